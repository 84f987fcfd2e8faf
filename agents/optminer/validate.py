"""The text-faithfulness validator: rebuild each instance's model from its text and documents alone.

A synthesised instance is only good training data if its stored optimum is the optimum of the
problem its text states; a model trained on answers that depend on unstated bounds learns to add
constraints nobody asked for. :func:`validate_instance` reads the problem text sentence by sentence
(every sentence must be understood: an unread one is a failure), looks a fogged fact up in the
instance's documents by its standard's code, writes the model a careful human would write (PuLP,
solved with HiGHS through ``highspy``, a different path from synthesis's ``scipy.optimize.milp``
arrays), and compares the optimum with the stored one. It never reads the stored problem tree:
variables get only the bounds a sentence states, and every big-M constant is the validator's own
bound, the largest value the variable can take under the stated linear constraints (an LP), so a
text that leaves a variable unbounded fails instead of borrowing the tree's bound.

Reconstruction: the sentence grammar is the one :mod:`~.templates` and :mod:`~.operators` write
(the paper publishes none); the modelling of each technique follows its knowledge document.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from icml26.errors import InputError, InputTypeError, described, input_error
from icml26.validation import check_finite

NUM = r"-?\d+(?:\.\d+)?"
V = rf"(?P<v>{NUM})"
RTOL = 1e-6


class TextError(ValueError):
    """The text does not state a complete model (an unread sentence, a missing document, an unbounded big-M)."""


@dataclass
class _Scenario:
    name: str
    template: str
    primary: list[str] = field(default_factory=list)    # the decision variables, in order
    value: dict[str, float] = field(default_factory=dict)  # per-unit objective coefficient of each variable
    data: dict = field(default_factory=lambda: defaultdict(dict))


def _items(text: str) -> list[str]:
    return text.split(", ")


class _Reader:
    """Collects variables, stated bounds, rows and objective terms while reading the sentences."""

    def __init__(self, documents: Sequence[dict]):
        self.documents = {str(d["id"]): d for d in documents}
        self.kind: dict[str, str] = {}          # variable -> continuous | integer | binary
        self.ub: dict[str, float] = {}          # stated upper bounds
        self.rows: list[tuple[dict, str, float, bool]] = []  # (coefs, sense, rhs, plain)
        self.scenarios: dict[str, _Scenario] = {}
        self.labels: dict[str, str] = {}        # the text's name of a variable -> variable
        self.costs: dict[str, float] = defaultdict(float)  # technique costs (they always hurt)
        self.extra_value: dict[str, dict[str, float]] = defaultdict(dict)  # scenario -> var -> coefficient
        self.pending: list = []                 # technique constraints needing a big-M, built after reading
        self.objective: tuple[str, list[tuple[str, float]]] | None = None
        # (site, the total's variables) -> its deviation variables, from its reference level until its penalty
        self._deviations: dict[tuple[str, tuple[str, ...]], tuple[str, str]] = {}
        self._breakpoint: tuple[str, float] | None = None  # the last breakpoint stated, until its rate beyond
        self._fresh = 0

    # -- helpers ------------------------------------------------------------------------------------
    def var(self, name: str, kind: str = "continuous") -> str:
        self.kind.setdefault(name, kind)
        return name

    def new(self, stem: str, kind: str) -> str:
        self._fresh += 1
        return self.var(f"_{stem}{self._fresh}", kind)

    def row(self, coefs: dict, sense: str, rhs: float, plain: bool = True) -> None:
        self.rows.append((dict(coefs), sense, float(rhs), plain))

    def scenario(self, name: str, template: str) -> _Scenario:
        sc = self.scenarios.get(name)
        if sc is None or sc.template != template:
            raise TextError(f"a sentence about {name!r} before (or without) its {template} context sentence")
        return sc

    def label(self, text: str) -> str:
        if text not in self.labels:
            raise TextError(f"the text names {text!r}, which no scenario sentence introduced")
        return self.labels[text]

    def open_scenario(self, name: str, template: str, primary: dict[str, str], kind: str) -> _Scenario:
        if name in self.scenarios:
            raise TextError(f"{name!r} is introduced twice")
        sc = _Scenario(name, template)
        for label, var in primary.items():
            sc.primary.append(self.var(var, kind))
            self.labels[label] = var
        self.scenarios[name] = sc
        return sc

    def document_statement(self, code: str, site: str) -> str:
        doc = self.documents.get(code)
        if doc is None:
            raise TextError(f"the text refers to standard {code}, but no document has that id")
        text = str(doc["text"])
        head = f"{code} for {site}. "
        if head not in text or " Modelling note:" not in text:
            raise TextError(f"document {code} does not state a fact for {site}")
        return text.split(head, 1)[1].split(" Modelling note:", 1)[0]


# -- scenario sentences: (pattern, handler) --------------------------------------------------------------
def _production(r: _Reader, m) -> None:
    name = m["name"]
    r.open_scenario(name, "production", {f"units of {p} made at {name}": f"{name}|x[{p}]" for p in _items(m["a"])},
                    "continuous")


def _diet(r: _Reader, m) -> None:
    name = m["name"]
    r.open_scenario(name, "diet", {f"servings of {f} at {name}": f"{name}|x[{f}]" for f in _items(m["a"])},
                    "continuous")


def _transport(r: _Reader, m) -> None:
    name = m["name"]
    r.open_scenario(name, "transportation", {f"units shipped by {name} from {s} to {d}": f"{name}|x[{s},{d}]"
                                             for s in _items(m["a"]) for d in _items(m["b"])}, "continuous")


def _knapsack(r: _Reader, m) -> None:
    name = m["name"]
    r.open_scenario(name, "knapsack", {f"{i} packed at {name}": f"{name}|x[{i}]" for i in _items(m["a"])}, "integer")


def _facility(r: _Reader, m) -> None:
    name = m["name"]
    sc = r.open_scenario(name, "facility", {f"units sent by {name} from {f} to {z}": f"{name}|x[{f},{z}]"
                                            for f in _items(m["a"]) for z in _items(m["b"])}, "continuous")
    sc.data["zones"] = _items(m["b"])
    for f in _items(m["a"]):
        r.var(f"{name}|open[{f}]", "binary")


def _staffing(r: _Reader, m) -> None:
    name, periods = m["name"], int(m["a"])
    sc = r.open_scenario(name, "staffing", {f"nurses starting in period {t} at {name}": f"{name}|x[{t}]"
                                            for t in range(1, periods + 1)}, "integer")
    sc.data["periods"] = periods


def _value(template: str, var_of):
    def handle(r: _Reader, m) -> None:
        sc = r.scenario(m["name"], template)
        sc.value[var_of(m)] = float(m["v"])
    return handle


def _data(template: str, table: str, key_of):
    def handle(r: _Reader, m) -> None:
        r.scenario(m["name"], template).data[table][key_of(m)] = float(m["v"])
    return handle


def _bound(template: str, var_of):
    def handle(r: _Reader, m) -> None:
        r.scenario(m["name"], template)
        var = var_of(m)
        r.row({var: 1.0}, "<=", float(m["v"]))
        r.ub[var] = min(r.ub.get(var, float("inf")), float(m["v"]))
    return handle


def _x(name_key: str, *keys: str):
    return lambda m: f"{m[name_key]}|x[{','.join(m[k] for k in keys)}]"


W, A, O, R_, H = r"(?P<name>\w+ Works)", r"(?P<name>\w+ Clinic)", r"(?P<name>\w+ Outfitters)", r"(?P<name>\w+ Retail)", \
    r"(?P<name>\w+ Hospital)"
L = r"(?P<name>\w+ Logistics)"
SCENARIO_SENTENCES = [
    (rf"{W} makes (?P<a>.+) from (?P<b>.+); quantities may be fractional\.", _production),
    (rf"At {W}, each unit of (?P<p>.+) yields a profit of \${V}\.", _value("production", _x("name", "p"))),
    (rf"At {W}, at most {V} units of (?P<p>.+) can be sold\.", _bound("production", _x("name", "p"))),
    (rf"At {W}, one unit of (?P<p>.+?) needs {V} (?P<u>.+?) of (?P<r>.+)\.",
     _data("production", "use", lambda m: (m["r"], m["p"]))),
    (rf"At {W}, at most {V} (?P<u>.+?) of (?P<r>.+) are available\.", _data("production", "cap", lambda m: m["r"])),
    (rf"{A} plans a daily menu from (?P<a>.+); servings may be fractional\.", _diet),
    (rf"At {A}, a serving of (?P<f>.+?) costs \${V}\.", _value("diet", _x("name", "f"))),
    (rf"At {A}, at most {V} servings of (?P<f>.+) fit in the daily menu\.", _bound("diet", _x("name", "f"))),
    (rf"At {A}, a serving of (?P<f>.+?) provides {V} (?P<u>\S+) of (?P<n>.+)\.",
     _data("diet", "amount", lambda m: (m["n"], m["f"]))),
    (rf"At {A}, the daily menu must provide at least {V} (?P<u>\S+) of (?P<n>.+)\.",
     _data("diet", "req", lambda m: m["n"])),
    (rf"{L} ships goods from (?P<a>.+) to (?P<b>.+); amounts may be fractional\.", _transport),
    (rf"{L} ships from (?P<s>.+) to (?P<d>.+) at \${V} per unit\.", _value("transportation", _x("name", "s", "d"))),
    (rf"{L} can ship at most {V} units from (?P<s>.+)\.", _data("transportation", "supply", lambda m: m["s"])),
    (rf"{L} must deliver at least {V} units to (?P<d>.+)\.", _data("transportation", "demand", lambda m: m["d"])),
    (rf"{O} packs whole (?P<a>.+) into one shipment under a cargo limit\.", _knapsack),
    (rf"At {O}, each of the (?P<i>.+) is worth {V} points\.", _value("knapsack", _x("name", "i"))),
    (rf"At {O}, each of the (?P<i>.+) weighs {V} kg\.", _data("knapsack", "weight", lambda m: m["i"])),
    (rf"At {O}, at most {V} (?P<i>.+) are available\.", _bound("knapsack", _x("name", "i"))),
    (rf"At {O}, the cargo limit of the shipment is {V} kg\.", _data("knapsack", "cargo", lambda m: "")),
    (rf"{R_} decides which depots to open among (?P<a>.+) to serve (?P<b>.+); a closed depot serves nothing and "
     r"shipped amounts may be fractional\.", _facility),
    (rf"{R_} can open a depot at (?P<f>.+) for a fixed cost of \${V}\.", _data("facility", "fixed", lambda m: m["f"])),
    (rf"{R_} serves one unit of (?P<z>.+)'s demand from (?P<f>.+) for \${V}\.",
     _value("facility", _x("name", "f", "z"))),
    (rf"A depot of {R_} at (?P<f>.+) can serve at most {V} units\.", _data("facility", "cap", lambda m: m["f"])),
    (rf"{R_} must supply at least {V} units to (?P<z>.+)\.", _data("facility", "demand", lambda m: m["z"])),
    (rf"{H} runs (?P<a>\d+) periods a day in a cycle; a shift lasts two consecutive periods \(a shift starting in "
     r"period \d+ continues into period 1\); nurses are whole people\.", _staffing),
    (rf"At {H}, a nurse on the shift starting in period (?P<t>\d+) is paid \${V}\.",
     _value("staffing", _x("name", "t"))),
    (rf"At {H}, at least {V} nurses must be on duty in period (?P<t>\d+)\.",
     _data("staffing", "req", lambda m: int(m["t"]))),
    (rf"At {H}, at most {V} nurses can start a shift in any one period\.", _data("staffing", "most", lambda m: "")),
]


def _scenario_rows(r: _Reader, sc: _Scenario) -> None:
    """The rows that aggregate several sentences (resource use and capacity, nutrients, supply and demand...)."""
    d, name = sc.data, sc.name
    if sc.template == "production":
        for res, cap in d["cap"].items():
            r.row({f"{name}|x[{p}]": a for (rr, p), a in d["use"].items() if rr == res}, "<=", cap)
    elif sc.template == "diet":
        for nut, req in d["req"].items():
            r.row({f"{name}|x[{f}]": a for (n, f), a in d["amount"].items() if n == nut}, ">=", req)
    elif sc.template == "transportation":
        lanes = [v.split("|x[")[1][:-1].split(",") for v in sc.primary]
        for s, sup in d["supply"].items():
            r.row({f"{name}|x[{a},{b}]": 1.0 for a, b in lanes if a == s}, "<=", sup)
        for t, dem in d["demand"].items():
            r.row({f"{name}|x[{a},{b}]": 1.0 for a, b in lanes if b == t}, ">=", dem)
    elif sc.template == "knapsack":
        r.row({f"{name}|x[{i}]": w for i, w in d["weight"].items()}, "<=", d["cargo"][""])
    elif sc.template == "facility":
        for f, cap in d["cap"].items():  # a closed depot serves nothing: sum_z x[f,z] <= cap * open[f]
            r.row({**{f"{name}|x[{f},{z}]": 1.0 for z in d["zones"]}, f"{name}|open[{f}]": -cap}, "<=", 0.0)
        for z, dem in d["demand"].items():
            r.row({f"{name}|x[{f},{z}]": 1.0 for f in d["cap"]}, ">=", dem)
        for f, cost in d["fixed"].items():
            sc.value[f"{name}|open[{f}]"] = cost
    elif sc.template == "staffing":
        periods = d["periods"]
        for t, req in d["req"].items():  # on duty in period t: the shifts starting in t and in the period before
            before = periods if t == 1 else t - 1
            r.row({f"{name}|x[{t}]": 1.0, f"{name}|x[{before}]": 1.0}, ">=", req)
        if "" in d["most"]:
            for var in sc.primary:
                r.row({var: 1.0}, "<=", d["most"][""])
                r.ub[var] = d["most"][""]


# -- technique, link and objective sentences ---------------------------------------------------------------
def _group(text: str) -> list[str]:
    return text.split(" and ")


def _lot(r: _Reader, m) -> None:
    x, n = r.label(m["l"]), r.new("lots", "integer")
    r.row({x: 1.0, n: -float(m["v"])}, "==", 0.0, plain=False)


def _setup(r: _Reader, m) -> None:
    x, y = r.label(m["l"]), r.new("on", "binary")
    r.pending.append(("upto", x, y, None))  # x <= M y
    r.costs[y] += float(m["v"])


def _either(r: _Reader, m) -> None:
    x1, x2, z = r.label(m["l"]), r.label(m["l2"]), r.new("first", "binary")
    r.pending.append(("either", x1, x2, z, float(m["v"])))


def _level(r: _Reader, m) -> None:
    xs = [r.label(g) for g in _group(m["g"])]
    above, below = r.new("above", "continuous"), r.new("below", "continuous")
    r.row({**dict.fromkeys(xs, 1.0), above: -1.0, below: 1.0}, "==", float(m["v"]), plain=False)
    r._deviations[(m["site"], tuple(xs))] = (above, below)


def _penalty(r: _Reader, m) -> None:
    """The penalty names its total (site and group), so two at one site are read by name, not by order."""
    key = (m["site"], tuple(r.label(g) for g in _group(m["g"])))
    if key not in r._deviations:
        raise TextError(f"a deviation penalty on the total number of {m['g']} at {m['site']} with no reference "
                        "level (or a second penalty) stated for that total before it")
    above, below = r._deviations.pop(key)
    r.costs[above] += float(m["v"])
    r.costs[below] += float(m["v"])


def _peak(r: _Reader, m) -> None:
    peak = r.new("peak", "continuous")
    for x in (r.label(g) for g in _group(m["g"])):
        r.row({peak: 1.0, x: -1.0}, ">=", 0.0, plain=False)
    r.costs[peak] += float(m["v"])


def _breakpoint(r: _Reader, m) -> None:
    r._breakpoint = (r.label(m["l"]), float(m["v"]))


def _beyond(r: _Reader, m) -> None:
    x = r.label(m["l"])
    if r._breakpoint is None or r._breakpoint[0] != x:
        raise TextError(f"a rate beyond a breakpoint for {m['l']!r} with no breakpoint stated before it")
    brk = r._breakpoint[1]
    r._breakpoint = None
    owner = next(sc for sc in r.scenarios.values() if x in sc.primary)
    if x not in owner.value:
        raise TextError(f"a rate beyond a breakpoint for {m['l']!r}, whose normal rate the text does not state")
    later = float(next(g for g in m.groups()[-4:] if g is not None))
    first, beyond, past = r.new("first", "continuous"), r.new("beyond", "continuous"), r.new("past", "binary")
    r.row({x: 1.0, first: -1.0, beyond: -1.0}, "==", 0.0, plain=False)
    r.row({first: 1.0}, "<=", brk, plain=False)
    r.row({first: 1.0, past: -brk}, ">=", 0.0, plain=False)  # beyond only once the first block is full
    r.pending.append(("upto", beyond, past, x))  # beyond <= M(x) past
    r.extra_value[owner.name][beyond] = r.extra_value[owner.name].get(beyond, 0.0) + later - owner.value[x]


def _link(r: _Reader, m) -> None:
    def total(noun: str) -> list[str]:
        name = " ".join(noun.split()[-2:])
        if name not in r.scenarios:
            raise TextError(f"a link names {noun!r}, whose scenario the text does not introduce")
        return r.scenarios[name].primary
    first, second = total(m["n1"]), total(m["n2"])
    r.row({**dict.fromkeys(first, 1.0), **{x: -float(m["v"]) for x in second}}, "<=", 0.0)


def _objective(r: _Reader, m) -> None:
    sense = "max" if m["sense"] == "Maximise" else "min"
    goals, sign, parts = [], 1.0, re.split(r" (plus|minus) ", m["goal"])
    for i, part in enumerate(parts):
        if i % 2:
            sign = 1.0 if part == "plus" else -1.0
            continue
        name = " ".join(part.split()[-2:])
        if name not in r.scenarios:
            raise TextError(f"the objective names {part!r}, whose scenario the text does not introduce")
        goals.append((name, sign))
    r.objective = (sense, goals)


S = r"(?P<site>\w+ \w+)"  # a scenario's name: site and kind ("Alder Works")
V = rf"{V}"
RATE = rf"(?:yields a profit of \$(?P<r1>{NUM})|costs \$(?P<r2>{NUM})|is worth (?P<r3>{NUM}) points|is paid \$(?P<r4>{NUM}))"
TECHNIQUE_SENTENCES = [  # (pattern, handler, fogged pattern whose document states the sentence)
    (rf"At {S}, the number of (?P<l>.+) must be a whole multiple of {V}\.", _lot,
     rf"At {S}, the number of (?P<l>.+) must follow lot-size rule (?P<code>\S+)\."),
    (rf"At {S}, having any (?P<l>.+) at all incurs a one-time setup cost of \${V}\.", _setup,
     rf"At {S}, having any (?P<l>.+) at all incurs the one-time setup cost of setup-cost schedule (?P<code>\S+)\."),
    (rf"At {S}, either the number of (?P<l>.+) or the number of (?P<l2>.+) must not exceed {V}\.", _either,
     rf"At {S}, the numbers of (?P<l>.+) and (?P<l2>.+) are restricted by exclusivity rule (?P<code>\S+)\."),
    (rf"At {S}, the reference level for the total number of (?P<g>.+) is {V}\.", _level,
     rf"At {S}, the total number of (?P<g>.+) is tracked against the reference level of planning standard "
     r"(?P<code>\S+)\."),
    (rf"At {S}, each unit by which the total number of (?P<g>.+) deviates from its reference level, above or below, "
     rf"costs a penalty of \${V}\.", _penalty, None),
    (rf"At {S}, the largest of the numbers of (?P<g>.+) is charged a peak fee of \${V} per unit\.", _peak,
     rf"At {S}, the largest of the numbers of (?P<g>.+) is charged the peak fee of tariff (?P<code>\S+)\."),
    (rf"At {S}, the normal per-unit rate applies to the first {V} of the (?P<l>.+)\.", _breakpoint, None),
    (rf"At {S}, each of the (?P<l>.+) beyond that point {RATE}\.", _beyond,
     rf"At {S}, each of the (?P<l>.+) beyond that point is valued by volume schedule (?P<code>\S+)\."),
]
OTHER_SENTENCES = [
    (r"(?P<s1>\w+ \w+) and (?P<s2>\w+ \w+) are linked: the total number of (?P<n1>.+) may not exceed "
     rf"{V} times the total number of (?P<n2>.+)\.", _link),
    (r"(?P<sense>Maximise|Minimise) (?P<goal>.+), (?:net of|including) any setup costs, fees and penalties stated\. "
     r"Report the optimal objective value\.", _objective),
]
_SCENARIO = [(re.compile(p), h) for p, h in SCENARIO_SENTENCES]
_TECHNIQUE = [(re.compile(p), h, re.compile(f) if f else None) for p, h, f in TECHNIQUE_SENTENCES]
_OTHER = [(re.compile(p), h) for p, h in OTHER_SENTENCES]


def _read(r: _Reader, sentence: str, *, from_document: bool = False) -> None:
    # technique sentences first: "each of the L beyond that point is worth ..." must not read as an item's value
    for pattern, handle, fogged in _TECHNIQUE:
        m = pattern.fullmatch(sentence)
        if m:
            return handle(r, m)
        m = fogged.fullmatch(sentence) if fogged is not None and not from_document else None
        if m:
            return _read(r, r.document_statement(m["code"], m["site"]), from_document=True)
    if not from_document:
        for pattern, handle in _SCENARIO + _OTHER:
            m = pattern.fullmatch(sentence)
            if m:
                return handle(r, m)
    raise TextError(f"unread sentence: {sentence!r}")


# -- the model -------------------------------------------------------------------------------------------
def _lp_max(r: _Reader, var: str, rows) -> float | None:
    """The largest value of ``var`` under ``rows`` and the stated bounds (integrality relaxed); None if unbounded."""
    import pulp

    prob = pulp.LpProblem("bound", pulp.LpMaximize)
    xs = _variables(prob, r, relax=True)
    prob += xs[var]
    _add_rows(prob, xs, rows)
    status = prob.solve(_highs(mip=False))
    return float(pulp.value(prob.objective)) if pulp.LpStatus[status] == "Optimal" else None


def _variables(prob, r: _Reader, *, relax: bool = False) -> dict:
    """One PuLP variable per variable read: lower bound 0, the stated upper bound, its kind (or continuous)."""
    import pulp

    make = getattr(prob, "add_variable", None)  # PuLP >= 3.3; LpVariable(...) directly is deprecated there
    if make is None:  # pragma: no cover - older PuLP
        def make(name, lowBound, upBound, cat):
            return pulp.LpVariable(name, lowBound=lowBound, upBound=upBound, cat=cat)
    cat = {"continuous": "Continuous", "integer": "Integer", "binary": "Integer"}
    return {v: make(f"v{i}", lowBound=0, upBound=1 if k == "binary" else r.ub.get(v),
                    cat="Continuous" if relax else cat[k]) for i, (v, k) in enumerate(r.kind.items())}


def _add_rows(prob, xs, rows) -> None:
    import pulp

    for i, (coefs, sense, rhs, _) in enumerate(rows):
        expr = pulp.lpSum(c * xs[v] for v, c in coefs.items())
        prob += (expr <= rhs if sense == "<=" else expr >= rhs if sense == ">=" else expr == rhs), f"r{i}"


def _highs(mip: bool = True):
    import pulp

    return pulp.HiGHS(msg=False, mip=mip, gapRel=0.0, gapAbs=0.0, threads=1, mip_heuristic_run_feasibility_jump=False)


def build_and_solve(text: str, documents: Sequence[dict]) -> tuple[str, float | None]:
    """Read ``text`` (one sentence per line) and ``documents``, solve the model they state:
    ``(status, objective)``. Raises :class:`TextError` when the text does not state a complete model."""
    import pulp

    r = _Reader(documents)
    for sentence in (s.strip() for s in text.splitlines()):
        if sentence:
            _read(r, sentence)
    if r.objective is None:
        raise TextError("the text states no objective")
    for sc in r.scenarios.values():
        _scenario_rows(r, sc)
    plain = [row for row in r.rows if row[3]]
    bounds: dict[str, float] = {}

    def big_m(var: str) -> float:
        if var not in bounds:
            value = _lp_max(r, var, plain)
            if value is None:
                raise TextError(f"the text states no bound on {var.split('|')[-1]} of {var.split('|')[0]}, "
                                "which a big-M constant needs")
            bounds[var] = value
        return bounds[var]

    for item in r.pending:
        if item[0] == "upto":  # a <= M(b_of) * indicator
            _, a, indicator, bound_of = item
            r.row({a: 1.0, indicator: -big_m(bound_of or a)}, "<=", 0.0, plain=False)
        else:  # either x1 <= v or x2 <= v: x1 <= v + M1 z, x2 <= v + M2 (1 - z)
            _, x1, x2, z, v = item
            r.row({x1: 1.0, z: -big_m(x1)}, "<=", v, plain=False)
            r.row({x2: 1.0, z: big_m(x2)}, "<=", v + big_m(x2), plain=False)
    sense, goals = r.objective
    coef: dict[str, float] = defaultdict(float)
    for name, sign in goals:
        for var, c in r.scenarios[name].value.items():
            coef[var] += sign * c
        for var, c in r.extra_value[name].items():
            coef[var] += sign * c
    hurt = -1.0 if sense == "max" else 1.0
    for var, c in r.costs.items():
        coef[var] += hurt * c
    prob = pulp.LpProblem("text", pulp.LpMaximize if sense == "max" else pulp.LpMinimize)
    xs = _variables(prob, r)
    prob += pulp.lpSum(c * xs[v] for v, c in coef.items() if c)
    _add_rows(prob, xs, r.rows)
    status = pulp.LpStatus[prob.solve(_highs())].lower()
    return status, (float(pulp.value(prob.objective)) if status == "optimal" else None)


# -- validation --------------------------------------------------------------------------------------------
@dataclass
class Check:
    id: str
    ok: bool
    stored: float
    rebuilt: float | None
    status: str             # agrees | differs | not_optimal | unreadable
    scenarios: list[str]
    techniques: list[str]
    reason: str = ""

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def validate_instance(row: dict, rtol: float = RTOL) -> Check:
    """Check one instance (a dataset row or :class:`~.synth.Instance` as a dict): only its ``text``,
    ``documents`` and stored ``objective`` are read to decide; ``scenarios`` and ``techniques`` only
    label the report."""
    from .solve import agree

    fn = "validate_instance"
    if not hasattr(row, "keys"):
        raise InputTypeError(fn, "row", "a dict (a dataset row or dataclasses.asdict(Instance))",
                             described(type(row).__name__))
    missing = [k for k in ("id", "objective", "text", "documents") if k not in row]
    if missing:
        raise input_error(fn, "row", "a dict with id, objective, text and documents",
                          described(f"keys {sorted(row.keys())} (missing {missing})"))
    try:
        stored = check_finite(fn, "row['objective']", row["objective"])
    except InputError as exc:
        raise input_error(fn, "row['objective']", "a finite number (the stored optimum)", exc.got) from None
    rtol = check_finite(fn, "rtol", rtol, positive=True)
    ident = str(row["id"])
    labels = (list(row.get("scenarios", [])), list(row.get("techniques", [])))
    try:
        status, value = build_and_solve(str(row["text"]), list(row["documents"]))
    except TextError as exc:
        return Check(ident, False, stored, None, "unreadable", *labels, str(exc))
    if status != "optimal":
        return Check(ident, False, stored, None, "not_optimal", *labels, f"the text's model is {status}")
    ok = agree(value, stored, rtol)
    return Check(ident, ok, stored, value, "agrees" if ok else "differs", *labels,
                 "" if ok else f"stored {stored:g}, the text's model gives {value:g}")


def validate(rows: Iterable[dict], rtol: float = RTOL) -> dict:
    """:func:`validate_instance` on every row; ``{"checked", "differ", "by_template", "by_technique", "failures"}``.

    ``differ`` counts every instance whose text does not give its stored optimum (a different
    optimum, an unreadable sentence, a model without optimum).
    """
    checks = [validate_instance(r, rtol) for r in rows]
    if not checks:
        raise input_error("validate", "rows", "at least one instance", "none")

    def table(key: str) -> dict:
        out: dict[str, dict] = {}
        for c in checks:
            for name in sorted(set(getattr(c, key))):
                entry = out.setdefault(name, {"checked": 0, "differ": 0})
                entry["checked"] += 1
                entry["differ"] += not c.ok
        return dict(sorted(out.items()))

    return {"checked": len(checks), "differ": sum(not c.ok for c in checks), "rtol": rtol,
            "by_template": table("scenarios"), "by_technique": table("techniques"),
            "failures": [c.to_dict() for c in checks if not c.ok]}


def format_report(report: dict) -> str:
    lines = [f"{report['checked']} instances rebuilt from text and documents; {report['differ']} differ from the "
             "stored optimum", "", "| template | checked | differ |", "| --- | --- | --- |"]
    lines += [f"| {k} | {v['checked']} | {v['differ']} |" for k, v in report["by_template"].items()]
    lines += ["", "| technique | checked | differ |", "| --- | --- | --- |"]
    lines += [f"| {k} | {v['checked']} | {v['differ']} |" for k, v in report["by_technique"].items()]
    for failure in report["failures"][:10]:
        lines.append(f"- {failure['id']} ({failure['status']}): {failure['reason']}")
    return "\n".join(lines)
