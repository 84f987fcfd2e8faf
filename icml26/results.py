"""What an experiment or benchmark returns: measured metrics, tables, figures and claims.

A :class:`Claim` is a paper's statement checked against a measurement. It is built only through
the comparison constructors (:meth:`Claim.less`, :meth:`Claim.greater`, :meth:`Claim.at_most`,
:meth:`Claim.at_least`, :meth:`Claim.close`), and its verdict :attr:`Claim.holds` is a property
computed from the two values every time it is read, so no code can set a verdict by hand.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Any

from .errors import described, input_error

# relation -> (symbol shown in reports, verdict(measured, reference, factor, rtol, atol))
_RELATIONS = {
    "less": ("<", lambda m, r, f, rt, at: m < f * r),
    "at_most": ("<=", lambda m, r, f, rt, at: m <= f * r),
    "greater": (">", lambda m, r, f, rt, at: m > f * r),
    "at_least": (">=", lambda m, r, f, rt, at: m >= f * r),
    "close": ("≈", lambda m, r, f, rt, at: abs(m - r) <= at + rt * abs(r)),
}


def _as_float(name: str, value: Any) -> float:
    """Accept Python/numpy/0-d torch numbers; refuse anything else with a clear message."""
    if hasattr(value, "item") and callable(value.item):  # numpy scalar, 0-d array or tensor
        try:
            value = value.item()
        except (ValueError, RuntimeError) as exc:
            raise TypeError(f"Claim: {name}: expected a single number, got an array ({exc})") from None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"Claim: {name}: expected a real number, got {type(value).__name__} {value!r:.80}")
    return float(value)


@dataclass(frozen=True)
class Claim:
    """A paper's statement decided by comparing a measured value with a reference value.

    ``reference`` is what the measurement is compared with: a baseline measured in the same run
    (the usual case) or a number from the paper. ``factor`` scales the reference
    (``Claim.less("MSE vs LOCF", mse, locf_mse, factor=0.7)`` holds when mse < 0.7 * locf_mse).
    A NaN measurement never holds.
    """

    statement: str
    measured: float
    reference: float
    relation: str
    factor: float = 1.0
    rtol: float = 0.0
    atol: float = 0.0
    unit: str = ""

    def __post_init__(self) -> None:
        if self.relation not in _RELATIONS:
            raise input_error("Claim", "relation", f"one of {sorted(_RELATIONS)}", self.relation)
        if not isinstance(self.statement, str) or not self.statement.strip():
            raise input_error("Claim", "statement", "a non-empty string", self.statement)
        for name in ("measured", "reference", "factor", "rtol", "atol"):
            object.__setattr__(self, name, _as_float(name, getattr(self, name)))
        # A measurement may be NaN (never holds) or infinite (e.g. "never reached"); the terms of the
        # comparison may not: a NaN or negative factor would turn the test around, an infinite one makes
        # every verdict trivial.
        if not (math.isfinite(self.factor) and self.factor > 0):
            raise input_error("Claim", "factor", "a positive finite number", self.factor)
        for name in ("rtol", "atol"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise input_error("Claim", name, "a non-negative finite number", value)

    # -- constructors: the only intended way to make a claim ---------------------------------
    @classmethod
    def less(cls, statement: str, measured: Any, reference: Any, *, factor: float = 1.0, unit: str = "") -> Claim:
        """Holds when ``measured < factor * reference``."""
        return cls(statement, measured, reference, "less", factor=factor, unit=unit)

    @classmethod
    def at_most(cls, statement: str, measured: Any, reference: Any, *, factor: float = 1.0, unit: str = "") -> Claim:
        """Holds when ``measured <= factor * reference``."""
        return cls(statement, measured, reference, "at_most", factor=factor, unit=unit)

    @classmethod
    def greater(cls, statement: str, measured: Any, reference: Any, *, factor: float = 1.0, unit: str = "") -> Claim:
        """Holds when ``measured > factor * reference``."""
        return cls(statement, measured, reference, "greater", factor=factor, unit=unit)

    @classmethod
    def at_least(cls, statement: str, measured: Any, reference: Any, *, factor: float = 1.0, unit: str = "") -> Claim:
        """Holds when ``measured >= factor * reference``."""
        return cls(statement, measured, reference, "at_least", factor=factor, unit=unit)

    @classmethod
    def close(cls, statement: str, measured: Any, reference: Any, *, rtol: float = 0.05, atol: float = 0.0,
              unit: str = "") -> Claim:
        """Holds when ``|measured - reference| <= atol + rtol * |reference|``."""
        return cls(statement, measured, reference, "close", rtol=rtol, atol=atol, unit=unit)

    # -- verdict -------------------------------------------------------------------------------
    @property
    def holds(self) -> bool:
        if math.isnan(self.measured) or math.isnan(self.reference):
            return False
        verdict = _RELATIONS[self.relation][1]
        return bool(verdict(self.measured, self.reference, self.factor, self.rtol, self.atol))

    @property
    def comparison(self) -> str:
        """The test in words, e.g. ``measured < 0.7 x reference``."""
        symbol = _RELATIONS[self.relation][0]
        if self.relation == "close":
            return f"|measured - reference| <= {self.atol:g} + {self.rtol:g} x |reference|"
        scale = "" if self.factor == 1.0 else f"{self.factor:g} x "
        return f"measured {symbol} {scale}reference"

    def to_dict(self) -> dict[str, Any]:
        return {
            "statement": self.statement,
            "measured": _claim_number(self.measured),
            "reference": _claim_number(self.reference),
            "relation": self.relation,
            "factor": self.factor,
            "rtol": self.rtol,
            "atol": self.atol,
            "unit": self.unit,
            "comparison": self.comparison,
            "holds": self.holds,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Claim:
        """Rebuild a claim from :meth:`to_dict`; the verdict is recomputed, never read back."""
        def num(x: Any) -> float:
            if x is None:
                return float("nan")
            if isinstance(x, str) and x in ("inf", "-inf"):
                return float(x)
            return x

        return cls(data["statement"], num(data["measured"]), num(data["reference"]), data["relation"],
                   factor=data.get("factor", 1.0), rtol=data.get("rtol", 0.0), atol=data.get("atol", 0.0),
                   unit=data.get("unit", ""))


def _claim_number(x: float) -> float | str | None:
    """A claim's value in strict JSON: NaN as null, infinities as ``"inf"``/``"-inf"`` so a round trip keeps them.

    ``inf < 5`` and ``nan < 5`` have different verdicts: writing both as null would change a claim's verdict
    when :meth:`Claim.from_dict` reads it back.
    """
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return _json_number(x)


def _json_number(x: float) -> float | None:
    """Strict JSON has no NaN or Inf: they are written as null."""
    return None if math.isnan(x) or math.isinf(x) else x


def to_jsonable(obj: Any) -> Any:
    """Turn numpy/torch scalars and arrays, paths, tuples and dataclasses into plain JSON values."""
    import dataclasses
    from pathlib import PurePath

    if obj is None or isinstance(obj, (str, bool)):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float):
        return _json_number(obj)
    if isinstance(obj, Claim):
        return obj.to_dict()
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if hasattr(obj, "tolist") and callable(obj.tolist):  # numpy arrays/scalars, torch tensors
        if hasattr(obj, "detach"):
            obj = obj.detach().cpu()
        return to_jsonable(obj.tolist())
    if isinstance(obj, numbers.Real):
        return _json_number(float(obj))
    raise TypeError(f"cannot store a {type(obj).__name__} in results.json: {obj!r:.80}")


@dataclass
class Result:
    """What ``run(config)`` returns.

    - ``metrics``: named measurements (numbers, or small lists/dicts of numbers);
    - ``tables``: name -> list of rows (dicts), rendered as markdown tables in the report;
    - ``figures``: name -> a matplotlib ``Figure`` (the runner saves it as ``<name>.png`` and
      closes it) or the path of a PNG the experiment already wrote;
    - ``claims``: the paper's statements checked against the measurements;
    - ``notes``: free text for the report (what was scaled down, what differs from the paper).
    """

    metrics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    figures: dict[str, Any] = field(default_factory=dict)
    claims: list[Claim] = field(default_factory=list)
    notes: str = ""

    def add_claim(self, claim: Claim) -> Claim:
        if not isinstance(claim, Claim):
            raise TypeError(f"add_claim expects a Claim (built with Claim.less/greater/...), got {type(claim).__name__}")
        self.claims.append(claim)
        return claim

    def to_dict(self) -> dict[str, Any]:
        return {
            "metrics": to_jsonable(self.metrics),
            "tables": to_jsonable(self.tables),
            "figures": {name: str(path) for name, path in self.figures.items()},
            "claims": [c.to_dict() for c in self.claims],
            "notes": self.notes,
        }


#: The table :func:`over_seeds` adds to a multi-seed result: one row (claim, seed, measured, reference, holds) per
#: claim and seed, claim by claim in the order of the claims.
CLAIMS_PER_SEED_TABLE = "claims per seed"


def _median(values: list[float]) -> float:
    """The median, NaN when any value is NaN (a seed that measured nothing must not vanish into the sort)."""
    import statistics

    return math.nan if any(math.isnan(v) for v in values) else statistics.median(values)


def median_over_seeds(per_seed: dict[int, list[Claim]]) -> tuple[list[Claim], list[dict[str, Any]]]:
    """Decide each claim on the median over seeds, and keep every seed's own verdict in a table.

    ``per_seed`` maps a seed to the claims one run at that seed made; every seed must make the same
    claims (relation, factor, tolerances, unit) in the same order; a statement may differ in a count it
    quotes (the first seed's is kept, each row keeps its own). Each returned claim compares
    the median of the measured values with the median of the references, by the same relation, so the
    threshold never moves; the rows (claim, seed, measured, reference, holds) show which seeds fail alone.
    A NaN at any seed makes the median NaN, so the claim does not hold.
    """
    if not per_seed:
        raise input_error("median_over_seeds", "per_seed", "claims of at least one seed", per_seed)
    seeds = list(per_seed)
    first = per_seed[seeds[0]]
    shape = [(c.relation, c.factor, c.rtol, c.atol, c.unit) for c in first]
    for seed in seeds[1:]:
        other = [(c.relation, c.factor, c.rtol, c.atol, c.unit) for c in per_seed[seed]]
        if other != shape:
            raise input_error("median_over_seeds", "per_seed", f"the same claims at every seed (as seed {seeds[0]})",
                              described(f"other claims at seed {seed}"))
    claims, rows = [], []
    for index, claim in enumerate(first):
        runs = [per_seed[seed][index] for seed in seeds]
        measured, reference = _median([c.measured for c in runs]), _median([c.reference for c in runs])
        claims.append(Claim(f"{claim.statement} (median over seeds {', '.join(map(str, seeds))})", measured,
                            reference, claim.relation, factor=claim.factor, rtol=claim.rtol, atol=claim.atol,
                            unit=claim.unit))
        rows += [{"claim": c.statement, "seed": seed, "measured": c.measured, "reference": c.reference,
                  "holds": c.holds} for seed, c in zip(seeds, runs)]
    return claims, rows


def over_seeds(seeds, run_seed) -> Result:
    """``run_seed(seed) -> Result`` at every seed, combined: the one mechanism behind ``--seeds N``.

    With one seed, its :class:`Result` as it is. With several, the first seed's result (metrics, tables,
    figures) whose claims are decided on the median over seeds (:func:`median_over_seeds`), with the table
    "claims per seed" and a note saying so. A phase "seeds" counts the finished seeds.
    """
    from .progress import phase

    seeds = list(seeds)
    if not seeds:
        raise input_error("over_seeds", "seeds", "at least one seed", seeds)
    per_seed: dict[int, Result] = {}
    with phase("seeds", total=len(seeds)) as done:
        for seed in seeds:
            per_seed[seed] = run_seed(seed)
            done.update()
    result = per_seed[seeds[0]]
    if len(seeds) > 1:
        result.claims, result.tables[CLAIMS_PER_SEED_TABLE] = median_over_seeds(
            {s: r.claims for s, r in per_seed.items()})
        result.notes = (result.notes + " " if result.notes else "") + (
            f"Claims: median over seeds {seeds} (per-seed verdicts in the table \"claims per seed\"); metrics, "
            f"tables and figures are seed {seeds[0]}'s.")
    return result
