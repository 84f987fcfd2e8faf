"""Solving problem trees: HiGHS through ``highspy`` (primary) and CBC through PuLP (check).

:class:`MILP` is the compiled model (dense arrays: small synthetic problems). Both solvers run
with a MIP gap of 0, so their optima agree to solver tolerance; synthesis keeps an instance only
when both report an optimum and the two objectives agree (:func:`agree`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from icml26.errors import described, input_error
from icml26.processes import popen_dying_with_parent

from .tree import ProblemTree, _coef

STATUSES = ("optimal", "infeasible", "unbounded", "error")
LOOSE_FACTOR = 10.0
"""How much :meth:`MILP.from_tree` with ``loose=True`` widens every big-M constant."""


@dataclass
class Solution:
    status: str
    objective: float | None
    values: dict[str, float]
    solver: str

    @property
    def optimal(self) -> bool:
        return self.status == "optimal"


@dataclass
class MILP:
    """``sense c.x`` subject to ``row_lo <= A x <= row_hi``, ``lb <= x <= ub``, integrality (1 = integer)."""

    names: list[str]
    sense: str
    c: np.ndarray
    A: np.ndarray
    row_lo: np.ndarray
    row_hi: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    integrality: np.ndarray
    row_names: list[str]

    @classmethod
    def from_tree(cls, tree: ProblemTree, values: dict[str, float] | None = None, *, loose: bool = False) -> MILP:
        """The tree's model; ``values`` override parameter values (stated bounds included).

        ``loose``: drop every upper bound the text does not state (continuous and integer variables
        without ``ub_param``) and multiply every big-M constant by :data:`LOOSE_FACTOR`, so a solve
        shows whether an implied bound or a big-M ever binds.
        """
        names = [v.name for v in tree.model.variables]
        index = {n: i for i, n in enumerate(names)}
        if len(index) != len(names):
            raise input_error("MILP", "tree", "unique variable names", described(f"duplicates in tree {tree.id}"))
        params = tree.params

        def col(var: str) -> int:
            if var not in index:
                raise input_error("MILP", f"tree {tree.id}: term", "a variable of the tree", var)
            return index[var]

        c = np.zeros(len(names))
        for t in tree.model.objective.terms:
            c[col(t.var)] += _coef(t.coef, t.param, params, values)
        A = np.zeros((len(tree.model.constraints), len(names)))
        lo = np.full(len(tree.model.constraints), -np.inf)
        hi = np.full(len(tree.model.constraints), np.inf)
        for r, con in enumerate(tree.model.constraints):
            for t in con.terms:
                A[r, col(t.var)] += _coef(t.coef, t.param, params, values) * (LOOSE_FACTOR if loose and t.big_m else 1.0)
            rhs = _coef(con.rhs.coef, con.rhs.param, params, values)
            if con.sense in ("<=", "=="):
                hi[r] = rhs
            if con.sense in (">=", "=="):
                lo[r] = rhs
        variables = tree.model.variables

        def upper(v) -> float:
            if v.kind == "binary":
                return 1.0
            if v.ub_param is not None:
                return _coef(1.0, v.ub_param, params, values)
            return np.inf if loose else v.ub

        return cls(names=names, sense=tree.model.objective.sense, c=c, A=A, row_lo=lo, row_hi=hi,
                   lb=np.array([0.0 if v.kind == "binary" else v.lb for v in variables]),
                   ub=np.array([upper(v) for v in variables]),
                   integrality=np.array([0 if v.kind == "continuous" else 1 for v in variables]),
                   row_names=[con.name for con in tree.model.constraints])

    # -- solvers ----------------------------------------------------------------------------------
    def solve(self, solver: str = "highs", *, time_limit: float = 30.0) -> Solution:
        if solver == "highs":
            return self.solve_highs(time_limit=time_limit)
        if solver == "cbc":
            return self.solve_cbc(time_limit=time_limit)
        raise input_error("MILP.solve", "solver", "'highs' or 'cbc'", solver)

    def solve_highs(self, *, time_limit: float = 30.0) -> Solution:
        """HiGHS through its own Python API (``highspy``), one solver object reused per process.

        MIP gap 0; HiGHS's feasibility-jump heuristic is off: on these tiny models it costs about
        three quarters of the solve time and changes no optimum (measured on the synthesised data).
        """
        import highspy

        h = _highs()
        h.setOptionValue("time_limit", float(time_limit))
        h.clearModel()
        h.passModel(self._highs_lp(highspy))
        h.run()
        status = h.getModelStatus()
        if status == highspy.HighsModelStatus.kOptimal:
            x = np.asarray(h.getSolution().col_value, dtype=float)
            return Solution("optimal", float(self.c @ x), dict(zip(self.names, map(float, x))), "highs")
        name = {highspy.HighsModelStatus.kInfeasible: "infeasible", highspy.HighsModelStatus.kUnbounded: "unbounded",
                highspy.HighsModelStatus.kUnboundedOrInfeasible: "unbounded"}.get(status, "error")
        return Solution(name, None, {}, "highs")

    def _highs_lp(self, highspy):
        inf = highspy.kHighsInf
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = len(self.c), len(self.A)
        lp.sense_ = highspy.ObjSense.kMaximize if self.sense == "max" else highspy.ObjSense.kMinimize
        lp.col_cost_ = self.c
        lp.col_lower_, lp.col_upper_ = self.lb, np.where(np.isinf(self.ub), inf, self.ub)
        lp.row_lower_ = np.where(np.isinf(self.row_lo), -inf, self.row_lo)
        lp.row_upper_ = np.where(np.isinf(self.row_hi), inf, self.row_hi)
        cols = [np.flatnonzero(self.A[:, j]) for j in range(len(self.c))]
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_ = np.cumsum([0] + [len(r) for r in cols])
        lp.a_matrix_.index_ = np.concatenate(cols) if cols else np.zeros(0, int)
        lp.a_matrix_.value_ = np.concatenate([self.A[r, j] for j, r in enumerate(cols)]) if cols else np.zeros(0)
        lp.integrality_ = [highspy.HighsVarType.kInteger if v else highspy.HighsVarType.kContinuous
                           for v in self.integrality]
        return lp

    def to_pulp(self):
        """The model as a ``pulp.LpProblem`` (variables named x0, x1, ... in column order)."""
        import pulp

        prob = pulp.LpProblem("optminer", pulp.LpMaximize if self.sense == "max" else pulp.LpMinimize)
        make = getattr(prob, "add_variable", None)  # PuLP >= 3.3; LpVariable(...) directly is deprecated there
        if make is None:  # pragma: no cover - older PuLP
            def make(name, lowBound, upBound, cat):
                return pulp.LpVariable(name, lowBound=lowBound, upBound=upBound, cat=cat)
        xs = [make(f"x{i}", lowBound=float(self.lb[i]), upBound=float(self.ub[i]) if np.isfinite(self.ub[i]) else None,
                   cat="Integer" if self.integrality[i] else "Continuous") for i in range(len(self.names))]
        prob += pulp.lpSum(float(self.c[i]) * xs[i] for i in range(len(xs)) if self.c[i] != 0)
        for r in range(len(self.A)):
            expr = pulp.lpSum(float(self.A[r, i]) * xs[i] for i in np.flatnonzero(self.A[r]))
            lo, hi = self.row_lo[r], self.row_hi[r]
            if lo == hi:
                prob += expr == float(hi), f"r{r}"
            else:
                if np.isfinite(hi):
                    prob += expr <= float(hi), f"r{r}_hi"
                if np.isfinite(lo):
                    prob += expr >= float(lo), f"r{r}_lo"
        return prob, xs

    def start_cbc(self, *, time_limit: float = 30.0) -> _CbcRun:
        """Start CBC on this model as a subprocess and return at once; ``.result()`` waits for its
        :class:`Solution`. The model file is written here, so the caller's own work overlaps only
        CBC's run (the same command line PuLP's ``COIN_CMD`` builds: MIP gap 0; unthreaded, see :func:`cbc_solver`)."""
        import subprocess
        import tempfile

        solver = cbc_solver(time_limit)
        folder = tempfile.mkdtemp(prefix="icml26-cbc-")
        mps, sol = f"{folder}/model.mps", f"{folder}/model.sol"
        prob, _ = self.to_pulp()
        prob.writeMPS(mps, rename=1)
        args = [solver.path, mps] + (["-max"] if self.sense == "max" else []) + [
            "-sec", str(time_limit), "-ratio", "0", "-solve", "-printingOptions", "all",
            "-solution", sol]
        # CBC stops at its -sec limit, but a SIGKILLed run must not leave it computing until then
        proc = popen_dying_with_parent(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                       stdin=subprocess.DEVNULL)
        return _CbcRun(proc, folder, sol, self.names)

    def solve_cbc(self, *, time_limit: float = 30.0) -> Solution:
        import pulp

        prob, xs = self.to_pulp()
        status = prob.solve(cbc_solver(time_limit))
        name = {1: "optimal", -1: "infeasible", -2: "unbounded"}.get(status, "error")
        if name != "optimal":
            return Solution(name, None, {}, "cbc")
        values = {n: float(x.value() or 0.0) for n, x in zip(self.names, xs)}
        return Solution("optimal", float(pulp.value(prob.objective) or 0.0), values, "cbc")


class _CbcRun:
    """A CBC subprocess started by :meth:`MILP.start_cbc`."""

    def __init__(self, proc, folder: str, sol: str, names: list[str]):
        self.proc, self.folder, self.sol, self.names = proc, folder, sol, names

    def result(self) -> Solution:
        import shutil

        try:
            if self.proc.wait() != 0:
                return Solution("error", None, {}, "cbc")
            with open(self.sol, encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        except OSError:
            return Solution("error", None, {}, "cbc")
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        head = lines[0].strip().lower() if lines else ""
        if not head.startswith("optimal"):
            status = "infeasible" if "infeasible" in head else "unbounded" if "unbounded" in head else "error"
            return Solution(status, None, {}, "cbc")
        values = dict.fromkeys(self.names, 0.0)
        for line in lines[1:]:
            parts = line.replace("**", " ").split()
            if len(parts) >= 3 and parts[0].isdigit() and int(parts[0]) < len(self.names):
                values[self.names[int(parts[0])]] = float(parts[2])
        return Solution("optimal", float(head.rsplit(" ", 1)[-1]), values, "cbc")


_HIGHS = None


def _highs():
    """This process's HiGHS object (building one costs more than solving a small model)."""
    global _HIGHS
    if _HIGHS is None:
        import highspy

        _HIGHS = highspy.Highs()
        for key, value in HIGHS_OPTIONS.items():
            _HIGHS.setOptionValue(key, value)
    return _HIGHS


def _forget_highs() -> None:  # a forked worker process builds its own HiGHS object
    global _HIGHS
    _HIGHS = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_highs)

HIGHS_OPTIONS = {"output_flag": False, "mip_rel_gap": 0.0, "mip_abs_gap": 0.0, "threads": 1, "presolve": "on",
                 "mip_heuristic_run_feasibility_jump": False}
"""The HiGHS options of every synthesis solve (and of the validator's, through PuLP)."""


def cbc_solver(time_limit: float = 30.0):
    """PuLP's CBC: the binary bundled with PuLP 3 (``PULP_CBC_CMD``), else a CBC on the PATH (``COIN_CMD``,
    what PuLP 4 uses with ``pip install pulp[cbc]``)."""
    import warnings

    import pulp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # PULP_CBC_CMD is deprecated for PuLP 4
        for name in ("PULP_CBC_CMD", "COIN_CMD"):
            cls = getattr(pulp, name, None)
            if cls is not None:
                # No ``threads``: CBC's threaded mode, even with one thread, stalls about 4% of runs for
                # 10 s (measured with PuLP 3's bundled CBC: 5-7 of 150 tiny MIPs; 0 of 150 without it).
                solver = cls(msg=False, gapRel=0.0, timeLimit=time_limit)
                if solver.available():
                    return solver
    raise RuntimeError("CBC is not available to PuLP: `pip install pulp` (bundles CBC) or `pip install 'pulp[cbc]'`")


def relative_error(value: float, reference: float) -> float:
    """SIRL's relative error ``|value - reference| / (|reference| + 1)``."""
    return abs(value - reference) / (abs(reference) + 1.0)


def agree(a: float | None, b: float | None, rtol: float = 1e-6) -> bool:
    return a is not None and b is not None and relative_error(a, b) <= rtol


def solve_tree(tree: ProblemTree, solver: str = "highs", values: dict[str, float] | None = None) -> Solution:
    return tree.to_model(values).solve(solver)


def bounds_bind(tree: ProblemTree, objective: float, rtol: float = 1e-9) -> bool:
    """Whether an unstated bound or a big-M constant changes the optimum: the tree's optimum
    ``objective`` differs from the optimum without those bounds and with every big-M widened
    (:meth:`MILP.from_tree` with ``loose=True``; an unbounded or failed loose solve counts as binding)."""
    loose = MILP.from_tree(tree, loose=True).solve_highs()
    return not (loose.optimal and agree(loose.objective, objective, rtol))


def verify(tree: ProblemTree, rtol: float = 1e-6) -> tuple[bool, Solution, Solution]:
    """Solve with HiGHS and CBC: valid when both are optimal (feasible, bounded) and agree within ``rtol``."""
    model = tree.to_model()
    highs, cbc = model.solve_highs(), model.solve_cbc()
    ok = highs.optimal and cbc.optimal and agree(highs.objective, cbc.objective, rtol)
    return ok, highs, cbc
