"""Scenario and technique templates that problem trees start from (Reconstruction: all six of each are ours).

Six scenario templates (:data:`SCENARIOS`: production mix, diet, transportation, knapsack, facility
location, staffing) each build a one-scenario :class:`~.tree.ProblemTree` with seeded parameters
chosen so the plain problem is feasible and bounded (every variable has a finite upper bound).
Six technique templates (:data:`TECHNIQUES`: integrality as lot sizing, fixed charge via big-M,
either-or, absolute value, min-max, piecewise-linear cost) graft a technique subtree onto a
scenario of a tree: new variables and constraints in the model subtree, new parameters, and a
knowledge document naming the technique's standard (a code like ``QX-4821``) that states the key
parameter. Every parameter sentence names its site and the quantities it is about (absolute value's
penalty names the total it prices, as its reference-level sentence does), and one tag's grafts at a site
take disjoint targets, so no two sentences of a tree are equal up to their numbers.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_generator, check_int

from .retrieval import Document
from .tree import (
    Constraint,
    ModelSubtree,
    Objective,
    Param,
    ProblemTree,
    Rhs,
    Scenario,
    Technique,
    Term,
    Variable,
    objective_text,
)

SITES = ["Alder", "Birch", "Cedar", "Dunmore", "Elmwood", "Fairholm", "Glenrock", "Hawthorn", "Ivybridge",
         "Juniper", "Kestrel", "Linden", "Marlow", "Northgate", "Oakfield", "Pinecrest", "Quarrytown", "Rowan",
         "Sprucevale", "Thornbury", "Upton", "Valemont", "Willowby", "Yarrow", "Zephyr", "Ashcombe", "Bramley",
         "Covehithe", "Deepdale", "Emberton"]
DISTRACTOR_SITES = ["Halden", "Ixworth", "Jessop", "Kirkby", "Lowick", "Mereton", "Nesbit", "Orford"]
PRODUCTS = ["chairs", "tables", "desks", "shelves", "cabinets", "benches", "stools", "lamps", "frames", "crates"]
RESOURCES = [("machining time", "hours"), ("assembly time", "hours"), ("timber", "board feet"),
             ("steel", "kg"), ("paint", "litres"), ("labour", "hours")]
FOODS = ["oats", "rice", "beans", "milk", "eggs", "lentils", "bread", "cheese", "spinach", "tofu"]
NUTRIENTS = [("protein", "g"), ("fibre", "g"), ("calcium", "mg"), ("iron", "mg"), ("energy", "kcal")]
SOURCES = ["Dover", "Exeter", "Falkirk", "Gorey"]
DESTINATIONS = ["Hull", "Ipswich", "Jarrow", "Kendal", "Leeds"]
ITEMS = ["drones", "sensors", "generators", "tents", "radios", "pumps", "medkits"]
FACILITIES = ["Ashford", "Brampton", "Corby"]
ZONES = ["Riverside", "Hilltop", "Lakeside", "Old Town"]


def _ints(rng, lo: int, hi: int, size: int) -> list[int]:
    return [int(v) for v in rng.integers(lo, hi + 1, size=size)]


def _pick(rng, pool: list, k: int) -> list:
    return [pool[i] for i in sorted(rng.choice(len(pool), size=k, replace=False))]


def _code(rng) -> str:
    letters = "".join(rng.choice(list("ABCDEFGHJKLMNPQRSTUVWXYZ"), size=2))
    return f"{letters}-{int(rng.integers(1000, 10000))}"


def _hex(rng, n: int = 6) -> str:
    return "".join(rng.choice(list("0123456789abcdef"), size=n))


class _Build:
    """Collects one scenario's parameters, variables and constraints."""

    def __init__(self, sid: str):
        self.sid = sid
        self.params: dict[str, Param] = {}
        self.variables: list[Variable] = []
        self.constraints: list[Constraint] = []
        self.objective: list[Term] = []

    def p(self, name: str, value: float, phrase: str) -> str:
        key = f"{self.sid}.{name}"
        self.params[key] = Param(key, float(value), phrase, self.sid)
        return key

    def v(self, name: str, kind: str, ub: float, ub_param: str | None = None) -> str:
        """A variable with upper bound ``ub``: stated by parameter ``ub_param``, else implied by the
        scenario's constraints (never a bound the text leaves out)."""
        full = f"{self.sid}.{name}"
        self.variables.append(Variable(full, kind, 0.0, float(ub), ub_param))
        return full

    def c(self, name: str, terms: list[Term], sense: str, rhs: Rhs) -> None:
        self.constraints.append(Constraint(f"{self.sid}.{name}", terms, sense, rhs, None, self.sid))

    def tree(self, scenario: Scenario, sense: str) -> ProblemTree:
        objective = Objective(sense, self.objective, objective_text(sense, scenario.goal))
        return ProblemTree(id=self.sid, scenarios=[scenario],
                           model=ModelSubtree(self.variables, objective, self.constraints),
                           params=self.params, history=[f"scenario:{scenario.template}"])


# -- scenario templates --------------------------------------------------------------------------
def production(rng, sid: str, site: str) -> ProblemTree:
    b, name = _Build(sid), f"{site} Works"
    prods, res = _pick(rng, PRODUCTS, int(rng.integers(2, 5))), _pick(rng, RESOURCES, int(rng.integers(2, 4)))
    profit, demand = _ints(rng, 20, 90, len(prods)), _ints(rng, 20, 80, len(prods))
    use = [_ints(rng, 1, 9, len(prods)) for _ in res]
    x = [b.v(f"x[{p}]", "continuous", d, f"{sid}.demand[{p}]") for p, d in zip(prods, demand)]
    for p, xi, pr, d in zip(prods, x, profit, demand):
        b.objective.append(Term(xi, 1.0, b.p(f"profit[{p}]", pr, f"At {name}, each unit of {p} yields a profit of ${{v}}.")))
        b.c(f"demand[{p}]", [Term(xi)], "<=", Rhs(1.0, b.p(f"demand[{p}]", d, f"At {name}, at most {{v}} units of {p} can be sold.")))
    for (r, unit), row in zip(res, use):
        terms = [Term(xi, 1.0, b.p(f"use[{r},{p}]", a, f"At {name}, one unit of {p} needs {{v}} {unit} of {r}."))
                 for p, xi, a in zip(prods, x, row)]
        cap = max(1, round(float(rng.uniform(0.3, 0.7)) * sum(a * d for a, d in zip(row, demand))))
        b.c(f"cap[{r}]", terms, "<=", Rhs(1.0, b.p(f"cap[{r}]", cap, f"At {name}, at most {{v}} {unit} of {r} are available.")))
    sc = Scenario(sid, "production", "manufacturing", name, prods,
                  f"{name} makes {', '.join(prods)} from {', '.join(r for r, _ in res)}; quantities may be fractional.",
                  x, [f"units of {p} made at {name}" for p in prods], f"units made at {name}",
                  "yields a profit of ${v}", "max", f"the total profit of {name}")
    return b.tree(sc, "max")


def diet(rng, sid: str, site: str) -> ProblemTree:
    b, name = _Build(sid), f"{site} Clinic"
    foods, nuts = _pick(rng, FOODS, int(rng.integers(3, 6))), _pick(rng, NUTRIENTS, int(rng.integers(2, 4)))
    cost, most = _ints(rng, 2, 15, len(foods)), _ints(rng, 5, 12, len(foods))
    x = [b.v(f"x[{f}]", "continuous", m, f"{sid}.most[{f}]") for f, m in zip(foods, most)]
    for f, xi, c, m in zip(foods, x, cost, most):
        b.objective.append(Term(xi, 1.0, b.p(f"cost[{f}]", c, f"At {name}, a serving of {f} costs ${{v}}.")))
        b.c(f"most[{f}]", [Term(xi)], "<=", Rhs(1.0, b.p(f"most[{f}]", m, f"At {name}, at most {{v}} servings of {f} fit in the daily menu.")))
    for n, unit in nuts:
        amount = _ints(rng, 1, 20, len(foods))
        terms = [Term(xi, 1.0, b.p(f"amount[{n},{f}]", a, f"At {name}, a serving of {f} provides {{v}} {unit} of {n}."))
                 for f, xi, a in zip(foods, x, amount)]
        req = max(1, round(float(rng.uniform(0.25, 0.5)) * sum(a * m for a, m in zip(amount, most))))
        b.c(f"req[{n}]", terms, ">=", Rhs(1.0, b.p(f"req[{n}]", req, f"At {name}, the daily menu must provide at least {{v}} {unit} of {n}.")))
    sc = Scenario(sid, "diet", "nutrition", name, foods,
                  f"{name} plans a daily menu from {', '.join(foods)}; servings may be fractional.",
                  x, [f"servings of {f} at {name}" for f in foods], f"servings planned at {name}",
                  "costs ${v}", "min", f"the daily food cost of {name}")
    return b.tree(sc, "min")


def transportation(rng, sid: str, site: str) -> ProblemTree:
    b, name = _Build(sid), f"{site} Logistics"
    srcs, dsts = _pick(rng, SOURCES, int(rng.integers(2, 4))), _pick(rng, DESTINATIONS, int(rng.integers(2, 4)))
    demand = _ints(rng, 20, 60, len(dsts))
    supply = _ints(rng, 30, 90, len(srcs))
    short = 1.2 * sum(demand) - sum(supply)
    if short > 0:
        supply = [s + int(np.ceil(short / len(srcs))) for s in supply]
    x, labels = {}, []
    for s, sup in zip(srcs, supply):
        for d, _dem in zip(dsts, demand):
            x[s, d] = b.v(f"x[{s},{d}]", "continuous", sup)  # implied: one lane carries at most its source's supply
            labels.append(f"units shipped by {name} from {s} to {d}")
            b.objective.append(Term(x[s, d], 1.0, b.p(f"cost[{s},{d}]", int(rng.integers(2, 21)),
                                                      f"{name} ships from {s} to {d} at ${{v}} per unit.")))
    for s, sup in zip(srcs, supply):
        b.c(f"supply[{s}]", [Term(x[s, d]) for d in dsts], "<=",
            Rhs(1.0, b.p(f"supply[{s}]", sup, f"{name} can ship at most {{v}} units from {s}.")))
    for d, dem in zip(dsts, demand):
        b.c(f"demand[{d}]", [Term(x[s, d]) for s in srcs], ">=",
            Rhs(1.0, b.p(f"demand[{d}]", dem, f"{name} must deliver at least {{v}} units to {d}.")))
    sc = Scenario(sid, "transportation", "logistics", name, srcs + dsts,
                  f"{name} ships goods from {', '.join(srcs)} to {', '.join(dsts)}; amounts may be fractional.",
                  list(x.values()), labels, f"units shipped by {name}", "costs ${v}", "min",
                  f"the total shipping cost of {name}")
    return b.tree(sc, "min")


def knapsack(rng, sid: str, site: str) -> ProblemTree:
    b, name = _Build(sid), f"{site} Outfitters"
    items = _pick(rng, ITEMS, int(rng.integers(3, 6)))
    value, weight, avail = _ints(rng, 10, 60, len(items)), _ints(rng, 2, 15, len(items)), _ints(rng, 2, 6, len(items))
    x = [b.v(f"x[{i}]", "integer", u, f"{sid}.avail[{i}]") for i, u in zip(items, avail)]
    cap_terms = []
    for i, xi, val, w, u in zip(items, x, value, weight, avail):
        b.objective.append(Term(xi, 1.0, b.p(f"value[{i}]", val, f"At {name}, each of the {i} is worth {{v}} points.")))
        cap_terms.append(Term(xi, 1.0, b.p(f"weight[{i}]", w, f"At {name}, each of the {i} weighs {{v}} kg.")))
        b.c(f"avail[{i}]", [Term(xi)], "<=", Rhs(1.0, b.p(f"avail[{i}]", u, f"At {name}, at most {{v}} {i} are available.")))
    cap = max(1, round(float(rng.uniform(0.3, 0.6)) * sum(w * u for w, u in zip(weight, avail))))
    b.c("cargo", cap_terms, "<=", Rhs(1.0, b.p("cargo", cap, f"At {name}, the cargo limit of the shipment is {{v}} kg.")))
    sc = Scenario(sid, "knapsack", "budget allocation", name, items,
                  f"{name} packs whole {', '.join(items)} into one shipment under a cargo limit.",
                  x, [f"{i} packed at {name}" for i in items], f"items packed at {name}",
                  "is worth {v} points", "max", f"the total value packed at {name}")
    return b.tree(sc, "max")


def facility(rng, sid: str, site: str) -> ProblemTree:
    b, name = _Build(sid), f"{site} Retail"
    facs, zones = _pick(rng, FACILITIES, int(rng.integers(2, 4))), _pick(rng, ZONES, int(rng.integers(2, 5)))
    demand, cap = _ints(rng, 10, 40, len(zones)), _ints(rng, 30, 90, len(facs))
    if sum(cap) < 1.3 * sum(demand):
        cap = [c + int(np.ceil((1.3 * sum(demand) - sum(cap)) / len(facs))) for c in cap]
    y = {f: b.v(f"open[{f}]", "binary", 1) for f in facs}
    x, labels = {}, []
    for f, c in zip(facs, cap):
        b.objective.append(Term(y[f], 1.0, b.p(f"fixed[{f}]", int(rng.integers(100, 401)),
                                               f"{name} can open a depot at {f} for a fixed cost of ${{v}}.")))
        for z in zones:
            x[f, z] = b.v(f"x[{f},{z}]", "continuous", c)  # implied: a depot serves at most its capacity
            labels.append(f"units sent by {name} from {f} to {z}")
            b.objective.append(Term(x[f, z], 1.0, b.p(f"cost[{f},{z}]", int(rng.integers(1, 13)),
                                                      f"{name} serves one unit of {z}'s demand from {f} for ${{v}}.")))
    for f, c in zip(facs, cap):
        capk = b.p(f"cap[{f}]", c, f"A depot of {name} at {f} can serve at most {{v}} units.")
        b.c(f"cap[{f}]", [Term(x[f, z]) for z in zones] + [Term(y[f], -1.0, capk)], "<=", Rhs(0.0))
    for z, dem in zip(zones, demand):
        b.c(f"demand[{z}]", [Term(x[f, z]) for f in facs], ">=",
            Rhs(1.0, b.p(f"demand[{z}]", dem, f"{name} must supply at least {{v}} units to {z}.")))
    sc = Scenario(sid, "facility", "facility location", name, facs + zones,
                  f"{name} decides which depots to open among {', '.join(facs)} to serve {', '.join(zones)}; "
                  "a closed depot serves nothing and shipped amounts may be fractional.",
                  list(x.values()), labels, f"units sent by {name}", "costs ${v}", "min",
                  f"the total opening and delivery cost of {name}")
    return b.tree(sc, "min")


def staffing(rng, sid: str, site: str) -> ProblemTree:
    b, name = _Build(sid), f"{site} Hospital"
    periods = int(rng.integers(4, 7))
    req = _ints(rng, 3, 15, periods)
    most = b.p("most", max(req), f"At {name}, at most {{v}} nurses can start a shift in any one period.")
    x = [b.v(f"x[{t + 1}]", "integer", max(req), most) for t in range(periods)]
    for t, xt in enumerate(x):
        b.objective.append(Term(xt, 1.0, b.p(f"wage[{t + 1}]", int(rng.integers(80, 161)),
                                             f"At {name}, a nurse on the shift starting in period {t + 1} is paid ${{v}}.")))
    for t in range(periods):
        on_duty = [Term(x[t]), Term(x[(t - 1) % periods])]
        b.c(f"cover[{t + 1}]", on_duty, ">=",
            Rhs(1.0, b.p(f"req[{t + 1}]", req[t], f"At {name}, at least {{v}} nurses must be on duty in period {t + 1}.")))
    sc = Scenario(sid, "staffing", "workforce scheduling", name, [f"period {t + 1}" for t in range(periods)],
                  f"{name} runs {periods} periods a day in a cycle; a shift lasts two consecutive periods (a shift "
                  f"starting in period {periods} continues into period 1); nurses are whole people.",
                  x, [f"nurses starting in period {t + 1} at {name}" for t in range(periods)],
                  f"nurses scheduled at {name}", "is paid ${v}", "min", f"the total daily wage bill of {name}")
    return b.tree(sc, "min")


SCENARIOS: dict[str, Callable] = {"production": production, "diet": diet, "transportation": transportation,
                                  "knapsack": knapsack, "facility": facility, "staffing": staffing}



def check_tree(function: str, tree, argument: str = "tree") -> ProblemTree:
    """``tree`` when it is a :class:`~.tree.ProblemTree`."""
    if not isinstance(tree, ProblemTree):
        raise InputTypeError(function, argument, "a ProblemTree", described(type(tree).__name__))
    return tree


def new_scenario(template: str, rng, *, site: str | None = None) -> ProblemTree:
    """A one-scenario tree from ``template`` (one of :data:`SCENARIOS`)."""
    if template not in SCENARIOS:
        raise input_error("new_scenario", "template", f"one of {sorted(SCENARIOS)}", template)
    check_generator("new_scenario", "rng", rng)
    site = site or str(rng.choice(SITES))
    sid = f"{template[:4]}_{_hex(rng)}"
    return SCENARIOS[template](rng, sid, site)


# -- technique templates ---------------------------------------------------------------------------
TECHNIQUE_INFO = {
    "integrality": ("Lot-size rule", "Quantities produced in whole lots are modelled with an integer number of lots n "
                    "and quantity = lot size x n (integrality constraint)."),
    "fixed_charge": ("Setup-cost schedule", "A one-time setup cost is modelled with a binary indicator y, the big-M "
                     "link quantity <= M y (M an upper bound of the quantity) and the setup cost times y in the objective."),
    "either_or": ("Exclusivity rule", "An either-or condition is modelled with a binary z: first quantity <= T + M z "
                  "and second quantity <= T + M (1 - z), so at least one of the two limits holds."),
    "absolute_value": ("Reference-level standard", "A penalty on |total - reference| is linearised with two non-negative "
                       "deviations: total - d_plus + d_minus = reference, penalty x (d_plus + d_minus)."),
    "min_max": ("Peak tariff", "A charge on the largest of several quantities (min-max) is modelled with a variable "
                "t >= each quantity and the peak fee times t in the objective."),
    "piecewise": ("Volume schedule", "A piecewise-linear per-unit value is modelled with segment variables "
                  "quantity = s1 + s2, s1 <= breakpoint, and a binary w with s1 >= breakpoint x w, s2 <= M w."),
}
TECHNIQUES = tuple(TECHNIQUE_INFO)


def technique_document(tag: str, code: str, statement: str, site: str) -> Document:
    """The knowledge document of a technique: its standard's code, the key fact and how to model it."""
    title, how = TECHNIQUE_INFO[tag]
    return Document(f"{code}", f"{title} {code}", f"{title} {code} for {site}. {statement} Modelling note: {how}")


def _cost_sign(tree: ProblemTree) -> float:
    """+1 when a cost enters the tree's objective as is (min), -1 when it is subtracted (max)."""
    return 1.0 if tree.model.objective.sense == "min" else -1.0


def _free_targets(tree: ProblemTree, sid: str, tag: str, min_ub: float) -> list[int]:
    sc, used = tree.scenario(sid), {v for t in tree.techniques if t.tag == tag for v in t.targets}
    return [i for i, x in enumerate(sc.primary) if x not in used and tree.var(x).ub >= min_ub]


def apply_technique(tree: ProblemTree, tag: str, rng, scenario: str | None = None) -> Technique:
    """Graft technique ``tag`` onto ``scenario`` (default: the first) of ``tree``, in place.

    Raises ``ValueError`` when the scenario has no suitable target left for this technique.
    """
    if tag not in TECHNIQUE_INFO:
        raise input_error("apply_technique", "tag", f"one of {list(TECHNIQUE_INFO)}", tag)
    check_tree("apply_technique", tree)
    check_generator("apply_technique", "rng", rng)
    sid = scenario or tree.scenarios[0].id
    sc = tree.scenario(sid)
    tid = f"{sid}.{tag}{sum(t.scenario == sid for t in tree.techniques)}"
    code, site = _code(rng), sc.site
    need = {"either_or": 2, "absolute_value": 2, "min_max": 2}.get(tag, 1)
    candidates = _free_targets(tree, sid, tag, min_ub=4.0 if tag in ("integrality", "piecewise", "either_or") else 1.0)
    if len(candidates) < need:
        raise input_error("apply_technique", "scenario", f"a scenario with a free target for technique {tag!r}", sid)
    idx = sorted(rng.choice(candidates, size=min(len(candidates), need if need == 1 else int(rng.integers(need, need + 2))),
                            replace=False))
    targets, labels = [sc.primary[i] for i in idx], [sc.primary_labels[i] for i in idx]
    new_params: dict[str, Param] = {}

    def p(name: str, value: float, phrase: str) -> str:
        key = f"{tid}.{name}"
        new_params[key] = Param(key, float(value), phrase, tid)
        return key

    def var(name: str, kind: str, ub: float) -> str:
        full = f"{tid}.{name}"
        tree.model.variables.append(Variable(full, kind, 0.0, float(ub)))
        return full

    def con(name: str, terms, sense, rhs) -> None:
        tree.model.constraints.append(Constraint(f"{tid}.{name}", terms, sense, rhs, tag, tid))

    cost = _cost_sign(tree)
    x, label = targets[0], labels[0]
    ub = tree.var(x).ub
    scale = float(np.mean([abs(tree.objective_coef(t)) for t in targets])) or 1.0
    group = " and ".join(labels)
    if tag == "integrality":
        lot = int(rng.integers(3, max(4, int(ub // 2)) + 1))
        key = p("lot", lot, f"At {site}, the number of {label} must be a whole multiple of {{v}}.")
        n = var("lots", "integer", float(ub // 2 + 1))
        con("lots", [Term(x), Term(n, -1.0, key)], "==", Rhs(0.0))
        fog = f"At {site}, the number of {label} must follow lot-size rule {code}."
    elif tag == "fixed_charge":
        setup = max(1, round(float(rng.uniform(0.2, 0.6)) * scale * ub))
        key = p("setup", setup, f"At {site}, having any {label} at all incurs a one-time setup cost of ${{v}}.")
        y = var("on", "binary", 1)
        con("bigM", [Term(x), Term(y, -ub, big_m=True)], "<=", Rhs(0.0))
        tree.model.objective.terms.append(Term(y, cost, key))
        fog = f"At {site}, having any {label} at all incurs the one-time setup cost of setup-cost schedule {code}."
    elif tag == "either_or":
        x2 = targets[1]
        limit = max(1, round(float(rng.uniform(0.3, 0.7)) * min(ub, tree.var(x2).ub)))
        key = p("limit", limit, f"At {site}, either the number of {label} or the number of {labels[1]} must not exceed {{v}}.")
        z, zc = var("first", "binary", 1), var("second", "binary", 1)
        con("choose", [Term(z), Term(zc)], "==", Rhs(1.0))
        con("first", [Term(x), Term(z, -ub, big_m=True)], "<=", Rhs(1.0, key))
        con("second", [Term(x2), Term(zc, -tree.var(x2).ub, big_m=True)], "<=", Rhs(1.0, key))
        targets, labels = targets[:2], labels[:2]
        fog = f"At {site}, the numbers of {label} and {labels[1]} are restricted by exclusivity rule {code}."
    elif tag == "absolute_value":
        total = sum(tree.var(t).ub for t in targets)
        level = max(1, round(float(rng.uniform(0.2, 0.8)) * total))
        key = p("level", level, f"At {site}, the reference level for the total number of {group} is {{v}}.")
        rate = p("penalty", max(1, round(float(rng.uniform(0.3, 1.0)) * scale)),
                 f"At {site}, each unit by which the total number of {group} deviates from its reference level, "
                 f"above or below, costs a penalty of ${{v}}.")
        dp, dm = var("above", "continuous", total + level), var("below", "continuous", total + level)
        con("deviation", [Term(t) for t in targets] + [Term(dp, -1.0), Term(dm, 1.0)], "==", Rhs(1.0, key))
        tree.model.objective.terms += [Term(dp, cost, rate), Term(dm, cost, rate)]
        fog = f"At {site}, the total number of {group} is tracked against the reference level of planning standard {code}."
    elif tag == "min_max":
        fee = max(1, round(float(rng.uniform(0.2, 0.8)) * scale))
        key = p("fee", fee, f"At {site}, the largest of the numbers of {group} is charged a peak fee of ${{v}} per unit.")
        peak = var("peak", "continuous", max(tree.var(t).ub for t in targets))
        for i, t in enumerate(targets):
            con(f"peak{i}", [Term(peak), Term(t, -1.0)], ">=", Rhs(0.0))
        tree.model.objective.terms.append(Term(peak, cost, key))
        fog = f"At {site}, the largest of the numbers of {group} is charged the peak fee of tariff {code}."
    else:  # piecewise
        base = [t for t in tree.model.objective.terms if t.var == x and t.param is not None]
        if not base:
            raise input_error("apply_technique", "tree", "a variable with a per-unit value to make piecewise", x)
        base_key, sign = base[0].param, float(np.sign(base[0].coef))
        c = tree.params[base_key].value
        brk = p("breakpoint", max(1, round(float(rng.uniform(0.3, 0.7)) * ub)),
                f"At {site}, the normal per-unit rate applies to the first {{v}} of the {label}.")
        later = round(c * float(rng.uniform(0.3, 0.8)), 1)
        later = later if later != c else c / 2
        key = p("rate", later, f"At {site}, each of the {label} beyond that point {sc.value_word}.")
        s1, s2, w = var("first", "continuous", ub), var("beyond", "continuous", ub), var("past", "binary", 1)
        con("split", [Term(x), Term(s1, -1.0), Term(s2, -1.0)], "==", Rhs(0.0))
        con("first_cap", [Term(s1)], "<=", Rhs(1.0, brk))
        con("first_full", [Term(s1), Term(w, -1.0, brk)], ">=", Rhs(0.0))
        con("beyond_on", [Term(s2), Term(w, -ub, big_m=True)], "<=", Rhs(0.0))
        tree.model.objective.terms += [Term(s2, sign, key), Term(s2, -sign, base_key)]
        fog = f"At {site}, each of the {label} beyond that point is valued by volume schedule {code}."
    tree.params.update(new_params)
    statement = new_params[key].render()
    technique = Technique(tid, tag, sid, targets, "", key, technique_document(tag, code, statement, site), fog)
    tree.techniques.append(technique)
    tree.history.append(f"technique:{tag}@{sid}")
    return technique


def distractor_documents(rng, n: int) -> list[Document]:
    """Documents shaped like technique standards, for sites and entities no instance uses."""
    check_generator("distractor_documents", "rng", rng)
    n = check_int("distractor_documents", "n", n, low=0)
    docs = []
    for _ in range(n):
        tag = str(rng.choice(TECHNIQUES))
        site = str(rng.choice(DISTRACTOR_SITES))
        thing = str(rng.choice(PRODUCTS + FOODS + ITEMS))
        value = int(rng.integers(2, 500))
        statement = {
            "integrality": f"At {site}, the number of {thing} must be a whole multiple of {value}.",
            "fixed_charge": f"At {site}, having any {thing} at all incurs a one-time setup cost of ${value}.",
            "either_or": f"At {site}, either the number of {thing} or the number of spare parts must not exceed {value}.",
            "absolute_value": f"At {site}, the reference level for the total number of {thing} is {value}.",
            "min_max": f"At {site}, the largest of the numbers of {thing} is charged a peak fee of ${value} per unit.",
            "piecewise": f"At {site}, each of the {thing} beyond that point costs ${value}.",
        }[tag]
        docs.append(technique_document(tag, _code(rng), statement, site))
    return docs
