"""Opt-Miner's typed problem tree (ICML 2026 poster 65154; Reconstruction: only the abstract is public, the
schema below is ours).

A :class:`ProblemTree` has three kinds of subtrees:

- **scenario** subtrees (:class:`Scenario`): domain, site, entities, context sentence and the
  parameters (costs, capacities, demands) they own;
- the **model** subtree (:class:`ModelSubtree`): typed decision variables, the objective and the
  constraints, each constraint tagged with the technique that produced it (``None`` for plain
  scenario constraints);
- **technique** subtrees (:class:`Technique`): a modelling technique (integrality, fixed charge,
  either-or, ...) attached to scenario entities, carrying a knowledge document and naming its key
  parameter (the one knowledge fogging hides).

Every number of the model is a named :class:`Param` with a one-sentence ``phrase`` that states it
(``"... costs ${v} per unit."``). :meth:`ProblemTree.render_text` writes the problem as those
sentences in a fixed order, so the text is deterministic and every coefficient can be read back
from it (:func:`read_param`); a fogged parameter is left out of the text and stated only in its
technique's knowledge document. Coefficients refer to parameters (:class:`Term`), so
:meth:`ProblemTree.to_model` can rebuild the model from any set of parameter values (the true ones,
or the ones a modeller read from the text).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from icml26.errors import described, input_error

from .retrieval import Document

VARIABLE_KINDS = ("continuous", "integer", "binary")
SENSES = ("<=", ">=", "==")
NUMBER = r"(-?\d+(?:\.\d+)?)"


def fmt(value: float) -> str:
    """A parameter value as it appears in text: integers without a decimal point, else <= 4 decimals."""
    value = float(value)
    if value == int(value):
        return str(int(value))
    return f"{value:.4f}".rstrip("0").rstrip(".")


@dataclass
class Param:
    """A number of the model. ``phrase`` states it, with ``{v}`` where the value goes."""

    key: str
    value: float
    phrase: str
    owner: str  # the scenario, technique or link id that owns it

    def __post_init__(self) -> None:
        if self.phrase.count("{v}") != 1:
            raise input_error("Param", f"{self.key!r}: phrase", "exactly one '{v}'", self.phrase)
        self.phrase = _sentence(self.phrase)

    def render(self, value: float | None = None) -> str:
        return self.phrase.replace("{v}", fmt(self.value if value is None else value))

    def pattern(self) -> re.Pattern:
        """A regex that finds this sentence in a text and captures the number."""
        before, after = self.phrase.split("{v}")
        return re.compile(re.escape(before) + NUMBER + re.escape(after))


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


_SUFFIX = " Report the optimal objective value."
_CLAUSE = {"max": ", net of any setup costs, fees and penalties stated",
           "min": ", including any setup costs, fees and penalties stated"}


def objective_text(sense: str, goal: str) -> str:
    """The objective sentence: ``Maximise <goal>, net of any setup costs, ... Report the optimal objective value.``"""
    return f"{'Maximise' if sense == 'max' else 'Minimise'} {goal}{_CLAUSE[sense]}.{_SUFFIX}"


def goal_of(text: str) -> str:
    """The ``goal`` part of an :func:`objective_text` sentence."""
    text = text.removesuffix(_SUFFIX).removesuffix(".")
    for clause in _CLAUSE.values():
        text = text.removesuffix(clause)
    return text.split(" ", 1)[1] if " " in text else text


def read_param(param: Param, *texts: str) -> float | None:
    """The value of ``param`` as stated in the first text that states it, else ``None``."""
    pattern = param.pattern()
    for text in texts:
        match = pattern.search(text)
        if match:
            return float(match.group(1))
    return None


@dataclass
class Term:
    """``coef * params[param] * var`` (or ``coef * var`` when ``param`` is None).

    ``big_m``: the coefficient is a big-M constant (a bound of another variable that the text
    implies), which synthesis loosens to check that it never binds.
    """

    var: str
    coef: float = 1.0
    param: str | None = None
    big_m: bool = False


@dataclass
class Rhs:
    """A right-hand side ``coef * params[param]`` (or the constant ``coef``)."""

    coef: float = 0.0
    param: str | None = None


@dataclass
class Variable:
    """A decision variable. ``ub_param``: the parameter whose sentence states the upper bound; None when
    the bound is not stated but implied (by a constraint, or by optimality for an auxiliary
    variable), which synthesis checks by solving without it (:func:`~.solve.verify`)."""

    name: str
    kind: str
    lb: float = 0.0
    ub: float = 1.0
    ub_param: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in VARIABLE_KINDS:
            raise input_error("Variable", f"{self.name!r}: kind", f"one of {VARIABLE_KINDS}", self.kind)
        if not self.lb <= self.ub:
            raise input_error("Variable", f"{self.name!r}: lb, ub", "lb <= ub", (self.lb, self.ub))


@dataclass
class Constraint:
    name: str
    terms: list[Term]
    sense: str
    rhs: Rhs
    technique: str | None = None  # the technique tag that produced it; None for scenario constraints
    owner: str = ""

    def __post_init__(self) -> None:
        if self.sense not in SENSES:
            raise input_error("Constraint", f"{self.name!r}: sense", f"one of {SENSES}", self.sense)


@dataclass
class Objective:
    sense: str  # "max" | "min"
    terms: list[Term] = field(default_factory=list)
    text: str = ""

    def __post_init__(self) -> None:
        if self.sense not in ("max", "min"):
            raise input_error("Objective", "sense", "'max' or 'min'", self.sense)


@dataclass
class ModelSubtree:
    variables: list[Variable]
    objective: Objective
    constraints: list[Constraint]


@dataclass
class Scenario:
    """A scenario subtree: what is being decided, where, over which entities."""

    id: str
    template: str
    domain: str
    site: str
    entities: list[str]
    context: str
    primary: list[str]          # the main decision variables (what techniques attach to)
    primary_labels: list[str]   # their names in text, same order
    noun: str                   # what the primary variables measure ("units produced", ...)
    value_word: str             # per-unit objective wording with {v}: "yields a profit of ${v}", "costs ${v}"
    sense: str                  # the scenario's own objective sense
    goal: str                   # the objective in words ("the total profit of Alder Works")


@dataclass
class Technique:
    """A technique subtree: a modelling technique applied to scenario entities, with its knowledge."""

    id: str
    tag: str
    scenario: str
    targets: list[str]
    description: str            # the sentence in the problem text when not fogged (may be "")
    key_param: str
    document: Document
    fog_text: str = ""          # what the problem text says instead once fogged
    fogged: bool = False


@dataclass
class Link:
    """A linking constraint added by subtree union."""

    id: str
    scenarios: list[str]
    constraint: str


@dataclass
class ProblemTree:
    id: str
    scenarios: list[Scenario]
    model: ModelSubtree
    techniques: list[Technique] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    params: dict[str, Param] = field(default_factory=dict)
    history: list[str] = field(default_factory=list)

    # -- structure ------------------------------------------------------------------------------
    def var(self, name: str) -> Variable:
        for v in self.model.variables:
            if v.name == name:
                return v
        raise KeyError(f"no variable {name!r} in tree {self.id}")

    def scenario(self, sid: str) -> Scenario:
        for s in self.scenarios:
            if s.id == sid:
                return s
        raise KeyError(f"no scenario {sid!r} in tree {self.id}")

    def objective_coef(self, var: str, values: dict[str, float] | None = None) -> float:
        return sum(_coef(t.coef, t.param, self.params, values) for t in self.model.objective.terms if t.var == var)

    def fogged_params(self) -> list[str]:
        return [t.key_param for t in self.techniques if t.fogged]

    def documents(self) -> list[Document]:
        """The knowledge documents of the technique subtrees."""
        return [t.document for t in self.techniques]

    # -- text -----------------------------------------------------------------------------------
    def render_text(self) -> str:
        """The problem statement: deterministic, one sentence per parameter, fogged ones left out."""
        hidden = set(self.fogged_params())
        owners_done: set[str] = set()
        lines: list[str] = []

        def params_of(owner: str) -> list[str]:
            return [p.render() for p in self.params.values() if p.owner == owner and p.key not in hidden]

        for s in self.scenarios:
            lines.append(s.context)
            lines.extend(params_of(s.id))
            owners_done.add(s.id)
        for t in self.techniques:
            if t.description:
                lines.append(t.description)
            for p in self.params.values():  # a hidden number's sentence gives way to the fog sentence
                if p.owner == t.id:
                    lines.append(t.fog_text if p.key in hidden else p.render())
            owners_done.add(t.id)
        for link in self.links:
            lines.extend(params_of(link.id))
            owners_done.add(link.id)
        leftover = [p for p in self.params.values() if p.owner not in owners_done]
        if leftover:
            raise input_error("ProblemTree.render_text", f"tree {self.id}: params", "params owned by nodes of the tree",
                              described(f"unknown owners of {[p.key for p in leftover][:5]}"))
        lines.append(self.model.objective.text)
        return "\n".join(_sentence(line) for line in lines if line)

    # -- model ----------------------------------------------------------------------------------
    def to_model(self, values: dict[str, float] | None = None):
        """The optimisation model as a :class:`~icml26.agents.optminer.solve.MILP`.

        ``values`` overrides parameter values (missing keys use the tree's own values).
        """
        from .solve import MILP

        return MILP.from_tree(self, values)

    def copy(self, **changes) -> ProblemTree:
        """A copy whose containers (and technique nodes, which fogging flips) are new: the operators grow
        and edit those, never a variable, term, constraint or parameter in place, so those are shared.
        Much cheaper than ``copy.deepcopy``; ``changes`` replace fields (``id=...``)."""
        import dataclasses

        m = self.model
        fields = dict(id=self.id, scenarios=list(self.scenarios),
                      model=ModelSubtree(list(m.variables), Objective(m.objective.sense, list(m.objective.terms),
                                                                      m.objective.text), list(m.constraints)),
                      techniques=[dataclasses.replace(t) for t in self.techniques], links=list(self.links),
                      params=dict(self.params), history=list(self.history))
        fields.update(changes)
        return ProblemTree(**fields)

    # -- serialisation --------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self) -> str:
        """``to_dict()`` as JSON (key order matters: parameters render in insertion order), built without
        ``asdict``'s deep copies: every node here holds plain values and lists of them."""
        m = self.model
        data = {"id": self.id, "scenarios": [vars(s) for s in self.scenarios],
                "model": {"variables": [vars(v) for v in m.variables],
                          "objective": {"sense": m.objective.sense, "terms": [vars(t) for t in m.objective.terms],
                                        "text": m.objective.text},
                          "constraints": [{**vars(c), "terms": [vars(t) for t in c.terms], "rhs": vars(c.rhs)}
                                          for c in m.constraints]},
                "techniques": [{**vars(t), "document": t.document.to_dict()} for t in self.techniques],
                "links": [vars(link) for link in self.links], "params": {k: vars(p) for k, p in self.params.items()},
                "history": self.history}
        return json.dumps(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProblemTree:
        try:
            model = data["model"]
            return cls(
                id=data["id"],
                scenarios=[Scenario(**s) for s in data["scenarios"]],
                model=ModelSubtree(
                    variables=[Variable(**v) for v in model["variables"]],
                    objective=Objective(sense=model["objective"]["sense"], text=model["objective"]["text"],
                                        terms=[Term(**t) for t in model["objective"]["terms"]]),
                    constraints=[Constraint(**{**c, "terms": [Term(**t) for t in c["terms"]], "rhs": Rhs(**c["rhs"])})
                                 for c in model["constraints"]]),
                techniques=[Technique(**{**t, "document": Document(**t["document"])}) for t in data["techniques"]],
                links=[Link(**link) for link in data["links"]],
                params={k: Param(**p) for k, p in data["params"].items()},
                history=list(data["history"]))
        except (KeyError, TypeError) as exc:
            raise input_error("ProblemTree.from_dict", "data", "a problem-tree dict (from ProblemTree.to_dict)",
                              described(f"a dict failing with {exc!r}")) from None

    @classmethod
    def from_json(cls, text: str) -> ProblemTree:
        """The tree :meth:`to_json` wrote."""
        try:
            data = json.loads(text)
        except (TypeError, ValueError) as exc:
            raise input_error("ProblemTree.from_json", "text", "the JSON of a problem tree (ProblemTree.to_json)",
                              described(f"text failing to parse: {exc}")) from None
        if not isinstance(data, dict):
            raise input_error("ProblemTree.from_json", "text", "the JSON of a problem tree (ProblemTree.to_json)",
                              described(f"JSON of a {type(data).__name__}"))
        return cls.from_dict(data)


def _coef(coef: float, param: str | None, params: dict[str, Param], values: dict[str, float] | None) -> float:
    if param is None:
        return coef
    if values is not None and param in values:
        return coef * values[param]
    return coef * params[param].value
