"""The three synthesis operators on problem trees: subtree union, subtree transfer, knowledge fogging.

Names come from the paper's abstract; the semantics are ours (Reconstruction: the closest prior
work is InfoAgent, arXiv 2509.25189, with its entity trees, sub-tree sampling and entity fuzzification):

- :func:`union` merges two problems into a multi-domain one: both scenario subtrees, both model
  subtrees, the objectives added (a min problem joined to a max problem enters with a minus sign),
  and one linking constraint ``total(A) <= rho * total(B)`` with ``rho`` chosen from the parents'
  optima so that their joint optimum violates it (the link binds, the optimum moves);
- :func:`transfer` grafts the technique of a problem A onto problem B's scenario, re-instantiated
  with B's entities and parameter scale;
- :func:`fog` takes a technique's key parameter out of the problem text, leaving only the name of
  the standard that holds it, so its knowledge document becomes necessary to solve the problem.

Every operator returns a new tree (:meth:`~.tree.ProblemTree.copy`) and leaves its inputs untouched; they raise ``ValueError`` when
they cannot apply (synthesis then draws again).
"""

from __future__ import annotations

import re

from icml26.errors import described, input_error
from icml26.validation import check_generator

from .solve import solve_tree
from .templates import _hex, apply_technique, check_tree
from .tree import Constraint, Link, Objective, Param, ProblemTree, Rhs, Term, fmt, goal_of, objective_text


def _total(tree: ProblemTree, values: dict[str, float]) -> float:
    return sum(values[x] for x in tree.scenarios[0].primary)


def union(a: ProblemTree, b: ProblemTree, rng) -> ProblemTree:
    """Subtree union of ``a`` and ``b``: a two-domain problem with a binding linking constraint."""
    check_tree("union", a, "a"), check_tree("union", b, "b"), check_generator("union", "rng", rng)
    a, b = a.copy(), b.copy()
    clash = {v.name for v in a.model.variables} & {v.name for v in b.model.variables}
    sites = {s.site for s in a.scenarios} & {s.site for s in b.scenarios}
    if clash or set(a.params) & set(b.params) or sites:
        raise input_error("union", "a, b", "disjoint trees", described(f"shared variables {sorted(clash)[:3]}, "
                                                                        f"sites {sorted(sites)}"))
    sol_a, sol_b = solve_tree(a), solve_tree(b)
    if not (sol_a.optimal and sol_b.optimal):
        raise input_error("union", "a, b", "two parents with an optimum", described("a parent without one"))
    same = a.model.objective.sense == b.model.objective.sense
    sense = a.model.objective.sense
    goal = f"{goal_of(a.model.objective.text)} {'plus' if same else 'minus'} {goal_of(b.model.objective.text)}"
    objective = Objective(sense, a.model.objective.terms + [Term(t.var, t.coef * (1 if same else -1), t.param)
                                                            for t in b.model.objective.terms],
                          objective_text(sense, goal))
    merged = ProblemTree(id=f"u_{_hex(rng)}", scenarios=a.scenarios + b.scenarios,
                         model=type(a.model)(a.model.variables + b.model.variables, objective,
                                             a.model.constraints + b.model.constraints),
                         techniques=a.techniques + b.techniques, links=a.links + b.links,
                         params={**a.params, **b.params}, history=[f"union({'; '.join(a.history)} | {'; '.join(b.history)})"])
    totals = {"a": _total(a, sol_a.values), "b": _total(b, sol_b.values)}
    pairs = [(a, b, "a", "b"), (b, a, "b", "a")]
    for first, second, kf, ks in pairs[:: 1 if rng.random() < 0.5 else -1]:
        if totals[ks] <= 1e-6 or totals[kf] <= 1e-6:
            continue
        lid = f"{merged.id}.link"
        rho = max(0.01, round(float(rng.uniform(0.5, 0.8)) * totals[kf] / totals[ks], 2))
        s1, s2 = first.scenarios[0], second.scenarios[0]
        key = f"{lid}.rho"
        param = Param(key, rho, f"{s1.site} and {s2.site} are linked: the total number of {s1.noun} may not exceed "
                                f"{{v}} times the total number of {s2.noun}.", lid)
        con = Constraint(f"{lid}.total", [Term(x) for x in s1.primary] + [Term(x, -1.0, key) for x in s2.primary],
                         "<=", Rhs(0.0), "link", lid)
        candidate = merged.copy()
        candidate.params[key] = param
        candidate.model.constraints.append(con)
        candidate.links.append(Link(lid, [s1.id, s2.id], con.name))
        if solve_tree(candidate).optimal:
            return candidate
    raise input_error("union", "a, b", "parents that some linking constraint keeps feasible",
                      described("none found for these parents"))


def transfer(a: ProblemTree, b: ProblemTree, rng, tag: str | None = None,
             scenario: str | None = None) -> ProblemTree:
    """Graft a technique subtree of ``a`` (``tag``, default: a random one of ``a``'s) onto ``b``'s scenario."""
    check_tree("transfer", a, "a"), check_tree("transfer", b, "b"), check_generator("transfer", "rng", rng)
    tags = [t.tag for t in a.techniques]
    if not tags:
        raise input_error("transfer", "a", "a donor with a technique subtree", described(f"tree {a.id}, which has none"))
    if tag is None:
        tag = str(rng.choice(tags))
    elif tag not in tags:
        raise input_error("transfer", "tag", f"a technique of tree {a.id} ({tags})",
                          described(f"{tag!r}: tree {a.id} has no technique {tag!r}"))
    out = b.copy()
    technique = apply_technique(out, tag, rng, scenario)
    out.history[-1] = f"transfer:{tag}:{a.id}->{technique.scenario}"
    return out


def _mentions(text: str, value: float) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(fmt(value))}(?![\d]|\.\d)", text) is not None


def fog(tree: ProblemTree, rng, technique: str | None = None) -> ProblemTree:
    """Knowledge fogging: hide a technique's key parameter; only its knowledge document keeps it.

    ``technique`` picks the technique id (default: a random unfogged technique whose key value
    does not occur anywhere else in the text). The hidden number is absent from the new text.
    """
    check_tree("fog", tree), check_generator("fog", "rng", rng)
    out = tree.copy()
    pool = [t for t in out.techniques if not t.fogged and (technique is None or t.id == technique)]
    if technique is not None and not pool:
        raise input_error("fog", "technique", f"an unfogged technique of tree {tree.id}", technique)
    order = [pool[i] for i in rng.permutation(len(pool))]
    for t in order:
        t.fogged = True
        if not _mentions(out.render_text(), out.params[t.key_param].value):
            out.history.append(f"fog:{t.tag}@{t.scenario}")
            return out
        t.fogged = False
    raise input_error("fog", "tree", "a tree with a technique whose key value can be hidden from the text",
                      described(f"tree {tree.id}, which has none"))


def key_fact(tree: ProblemTree, technique) -> str:
    """The sentence stating a technique's key parameter (in its document; in the text unless fogged)."""
    return tree.params[technique.key_param].render()


def union_differs(child: ProblemTree, a: ProblemTree, b: ProblemTree, rtol: float = 1e-6) -> bool:
    """Whether the union's optimum differs from both parents' optima."""
    oc, oa, ob = (solve_tree(t).objective for t in (child, a, b))
    return all(o is not None for o in (oc, oa, ob)) and all(
        abs(oc - o) > rtol * (1 + abs(o)) for o in (oa, ob))


__all__ = ["union", "transfer", "fog", "key_fact", "union_differs"]
