"""Factored stochastic policies learned from paired conjoint data, with delta-method uncertainty.

Jerzak, Chandra & Hazra, "MiniMax Learning of Interpretable Factored Stochastic Policies from Conjoint
Data, with Uncertainty Quantification" (ICML 2026, arXiv 2504.19043); reference code: the R package
``strategize`` (cjerzak/strategize-software, GPL-3), whose files are named below where we follow them.

A policy is a product of per-factor categorical distributions, pi = (x)_d Categorical(pi_d). Step one
fits a logit on the difference design of forced-choice pairs, logit P(left chosen) = (x(t_L) - x(t_R)) . theta,
x(t) holding treatment-coded main effects (level 0 of each factor is the reference) and two-way
interactions (``two_step_model_outcome_glm.R``). Step two maximises a policy value minus a penalty
towards the randomisation design p, on one of two scales:

- ``"linear"``: U(pi) = E_{t~pi}[x(t)] . theta, a quadratic in pi whose stationary point solves C pi = b
  (``two_step_optimize_exact_solution.R``; this is the closed form of the paper's "two-way interactions + L2");
- ``"probability"``: Q(pi) = E_{t~pi, u~p}[sigma((x(t) - x(u)) . theta)], the win probability against the
  design's opponent, computed exactly by enumerating the profile space, maximised by gradient ascent.

Uncertainty is the delta method Var = J Sigma J^T, Sigma the respondent-clustered sandwich of the logit and
J = d(value, pi*)/d theta by ``torch.func`` through the closed form, through the unrolled ascent, or by
implicit differentiation of the optimality condition. The two-party game is
:class:`icml26.training.conjoint.MinimaxPolicy` (module :mod:`icml26.training.conjoint.minimax`).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.conjoint.model import (
    DTYPE,
    FactorialDesign,
    PairedConjointLogit,
    _design_from_data,
    check_factored_policy,
)
from icml26.validation import check_choice, check_finite, check_int, check_random_state

__all__ = ["AverageCasePolicy", "AverageCasePolicyCV", "penalty", "PENALTIES", "closed_form_system"]

PENALTIES = ("L2", "KL", "L1", "LInfinity")
SOLVERS = ("auto", "closed_form", "gradient")
SE_METHODS = ("auto", "closed_form", "unrolled", "implicit")
SCALES = ("linear", "probability")
INTERVALS = ("delta", "bootstrap")


class BoundaryWarning(UserWarning):
    """A delta-method standard error at an optimum on the simplex's boundary, where it under-covers."""



# ==============================================================================================
# Penalties towards the design
# ==============================================================================================
def penalty(kind: str, pi, p) -> torch.Tensor:
    """Pen(pi, p) summed over factors: ``L2`` ``sum (pi - p)^2``, ``KL`` ``sum p log(p / pi)``
    (``KL(p || pi)``, as the reference's ``two_step_optimize_get_q.R``), ``L1`` ``sum abs(pi - p)``,
    ``LInfinity`` ``sum_d max_l abs(pi_d - p_d)`` (Reconstruction: the reference's per-factor reduction
    is not documented; we sum the factors' maxima).

    ``pi`` and ``p`` are factored policies of the same factors: one probability vector per factor
    (non-negative, summing to 1); differentiable in both."""
    check_choice("penalty", "kind", kind, PENALTIES)
    p = _as_policy("penalty", "p", p)
    pi = _as_policy("penalty", "pi", pi, [len(q) for q in p])
    return _penalty(kind, pi, p)


def _as_policy(function: str, argument: str, pi, lengths=None) -> list[torch.Tensor]:
    """A factored policy without a design at hand: ``lengths`` from ``p`` (or from ``pi`` itself)."""
    if lengths is None:
        if isinstance(pi, (str, bytes)) or not hasattr(pi, "__len__") or hasattr(pi, "keys") or len(pi) == 0:
            raise InputTypeError(function, argument, "a non-empty list of per-factor probability vectors",
                                 described(type(pi).__name__))
        lengths = [int(np.size(q)) for q in pi]
    return check_factored_policy(pi, lengths, function, argument)


def _penalty(kind: str, pi, p) -> torch.Tensor:
    """:func:`penalty` without checks (inside solvers and ``torch.func`` transforms)."""
    terms = []
    for q, base in zip(pi, p):
        if kind == "L2":
            terms.append(((q - base) ** 2).sum())
        elif kind == "KL":
            terms.append((base * (torch.log(base) - torch.log(q))).sum())
        elif kind == "L1":
            terms.append((q - base).abs().sum())
        elif kind == "LInfinity":
            terms.append((q - base).abs().max())
    return torch.stack(terms).sum()


# ==============================================================================================
# Step two: the average-case policy
# ==============================================================================================
def _quadratic_form(model: PairedConjointLogit, coef: torch.Tensor):
    """(beta, B) with U(pi) = beta . f + f^T B f / 2 over the free coordinates f (each pair once)."""
    design, n = model.design_, model.design_.n_free
    beta = coef[:n]
    B = torch.zeros(n, n, dtype=DTYPE)
    at = n
    for d, e in model.pairs_:
        sd, se = design.free_slices[d], design.free_slices[e]
        block = coef[at:at + (sd.stop - sd.start) * (se.stop - se.start)].reshape(sd.stop - sd.start, -1)
        B[sd, se] = block
        B[se, sd] = block.T
        at += block.numel()
    return beta, B


def closed_form_system(model: PairedConjointLogit, lam: float, coef: torch.Tensor | None = None):
    """(C, b) of the stationarity condition C f = b of U(pi) - lam sum (pi - p)^2 in the free coordinates.

    With pi_d = c_d + A_d f_d (c_d the reference level, A_d = [-1; I]), C = B - 2 lam A^T A and
    b = -beta + 2 lam A^T (c - p): C_{ll} = -4 lam, C_{ll'} = -2 lam within a factor, C = beta_{dl,d'l'}
    across factors, b_l = -beta_l - 4 lam p_l - 2 lam sum_{l' != l free} p_l', as ``getPiStar_exact`` of the
    reference (``two_step_optimize_exact_solution.R``).
    """
    name = "closed_form_system"
    _check_model(name, model)
    lam = check_finite(name, "lam", lam, non_negative=True)
    return _closed_form_system(model, lam, model._check_coef(name, coef))


def _check_model(function: str, model) -> None:
    if not isinstance(model, PairedConjointLogit):
        raise InputTypeError(function, "model", "a fitted PairedConjointLogit", described(type(model).__name__))
    if not hasattr(model, "coef_"):
        raise input_error(function, "model", "a fitted PairedConjointLogit (call fit first)",
                          described("an unfitted one"))


def _closed_form_system(model: PairedConjointLogit, lam: float, coef: torch.Tensor):
    design = model.design_
    beta, B = _quadratic_form(model, coef)
    AtA = torch.zeros(design.n_free, design.n_free, dtype=DTYPE)
    Atcp = torch.zeros(design.n_free, dtype=DTYPE)
    for s, q in zip(design.free_slices, design.p):
        k = s.stop - s.start
        AtA[s, s] = torch.eye(k, dtype=DTYPE) + 1
        Atcp[s] = -(1 - q[0]) - torch.as_tensor(q[1:], dtype=DTYPE)  # A^T (c - p) = -(1 - p_0) - p_l
    return B - 2 * lam * AtA, -beta + 2 * lam * Atcp


def _softmax_split(design, logits):
    return [torch.softmax(logits[s], 0) for s in _logit_slices(design)]


def _logit_slices(design):
    offsets = np.cumsum([0] + design.n_levels)
    return [slice(int(offsets[d]), int(offsets[d + 1])) for d in range(design.n_factors)]


def _initial_logits(design, rng, sd=1e-3):
    """alr(p) + N(0, sd^2), the reference's start (``a_init_sd = 0.001``)."""
    base = np.concatenate([np.log(q) - np.log(q[0]) for q in design.p])
    noise = rng.normal(0, sd, base.shape) if rng is not None else 0.0
    return torch.as_tensor(base + noise, dtype=DTYPE)


def ascend(objective, logits0: torch.Tensor, smooth: bool, max_iter: int = 500, lr: float = 0.05) -> torch.Tensor:
    """Maximise ``objective(logits)``: L-BFGS with a strong-Wolfe line search when the objective is smooth,
    else Adam with a step decaying as 1/sqrt(t) (L1 and LInfinity penalties)."""
    logits = logits0.detach().clone().requires_grad_(True)
    if smooth:
        opt = torch.optim.LBFGS([logits], lr=1.0, max_iter=max_iter, tolerance_grad=1e-12, tolerance_change=1e-15,
                                history_size=20, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = -objective(logits)
            loss.backward()
            return loss

        opt.step(closure)
    else:
        opt = torch.optim.Adam([logits], lr=lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1 / math.sqrt(1 + t / 50))
        for _ in range(max_iter * 2):
            opt.zero_grad()
            (-objective(logits)).backward()
            opt.step()
            sched.step()
    return logits.detach()


#: probabilities below this are taken as on the simplex's boundary by the implicit delta method
ACTIVE_TOL = 1e-4


def _active_face(pi, tol: float = ACTIVE_TOL):
    """Free coordinates of the simplex face that ``pi`` lies on, and the map back to full distributions.

    At a boundary optimum (a level at probability 0) the objective's gradient does not vanish in the interior
    coordinates, so the implicit function theorem applies on the face only: the zero levels stay at 0 (their
    derivative in theta is 0 while the active set is stable), the largest level of each factor is the
    reference (1 - the others), and the remaining positive levels are free. At an interior optimum this is the
    usual free parametrisation up to the choice of reference level, which does not change the delta method.
    """
    levels, offsets, z = [], [0], []
    for q in pi:
        q = torch.as_tensor(q, dtype=DTYPE).detach()
        active = torch.nonzero(q > tol).ravel()
        ref = int(active[torch.argmax(q[active])])
        free = active[active != ref]
        levels.append((q.numel(), ref, free))
        z.append(q[free])
        offsets.append(offsets[-1] + free.numel())

    def to_full(zz):
        out = []
        for (n, ref, free), a, b in zip(levels, offsets[:-1], offsets[1:]):
            part = zz[a:b]
            base = torch.zeros(n, dtype=zz.dtype).index_add(0, free, part)
            out.append(base + torch.nn.functional.one_hot(torch.tensor(ref), n).to(zz.dtype) * (1 - part.sum()))
        return out

    return torch.cat(z), to_full


class AverageCasePolicy(BaseEstimator):
    """The average-case optimal factored policy: argmax_pi value(pi) - lam Pen(pi, p), with delta-method SEs.

    A scikit-learn estimator: the constructor stores its parameters, :meth:`fit` checks them, and ``clone``,
    ``get_params`` and ``set_params`` work (``fit`` takes a fitted model, not ``(X, y)``).

    ``scale="linear"`` maximises U(pi) = E_pi[x(t)] . theta (the quadratic of the paper's closed form);
    ``scale="probability"`` maximises Q(pi) = E_{t~pi,u~p}[P(t beats u)] under the fitted logit (enumerated).
    ``solver``: ``"auto"`` (closed form when it is valid, else gradient ascent), ``"closed_form"`` (forced:
    refused unless L2, the linear scale, C negative definite and pi* interior) or ``"gradient"`` (ascent on
    softmax logits). ``se_method``: ``"auto"`` (closed form after a closed-form solve, implicit otherwise; none,
    NaN SEs, for the non-smooth L1/LInfinity, whose optima sit on kinks where pi*(theta) has no derivative),
    ``"closed_form"``, ``"unrolled"`` (differentiates ``n_unroll`` steps of gradient ascent on the logits, the
    reference's ``se_method="full"``) or ``"implicit"`` (the implicit function theorem at the optimum, on the
    simplex face it lies on: levels at probability 0 stay there, see :func:`_active_face`).

    ``interval``: how :meth:`conf_int` bounds the value. ``"delta"``: ``value_ +- z value_se_``; at an optimum on the
    simplex's boundary (a level of pi* below ``ACTIVE_TOL``, the small-lam regime) it under-covers, so fit
    then warns with :class:`BoundaryWarning` and sets ``at_boundary_``. ``"bootstrap"`` (L2 penalty): the bias-corrected
    normal interval of a parametric bootstrap of the solve, ``n_boot`` draws ``theta* ~ N(coef_, vcov_)`` each re-solved
    exactly (:mod:`icml26.training.conjoint.bootstrap`; measured: it does not close the boundary
    under-coverage, and covers no better there than the face-aware delta method) and sets ``value_boot_``
    (the draws' values) and ``value_bias_`` (their mean minus ``value_``, the plug-in's estimated bias).

    After ``fit(model, design)``: ``pi_`` (one array per factor), ``objective_`` (penalised), ``value_``
    (the unpenalised value on ``scale``), ``value_se_``, ``pi_se_``, ``solver_used_``, ``jacobian_``
    (d(value, pi)/d theta), ``at_boundary_`` and :meth:`conf_int`.
    """

    def __init__(self, penalty: str = "L2", lam: float = 1.0, solver: str = "auto", se_method: str = "auto",
                 scale: str = "linear", conf_level: float = 0.90, max_iter: int = 500, n_unroll: int = 300,
                 interval: str = "delta", n_boot: int = 400, random_state=None):
        self.penalty = penalty
        self.lam = lam
        self.solver = solver
        self.se_method = se_method
        self.scale = scale
        self.conf_level = conf_level
        self.max_iter = max_iter
        self.n_unroll = n_unroll
        self.interval = interval
        self.n_boot = n_boot
        self.random_state = random_state

    def _check_params(self, function: str) -> None:
        """scikit-learn's rule: ``__init__`` stores, ``fit`` validates (so ``set_params`` values are checked too)."""
        check_choice(function, "penalty", self.penalty, PENALTIES)
        check_choice(function, "interval", self.interval, INTERVALS)
        check_int(function, "n_boot", self.n_boot, low=10)
        if self.interval == "bootstrap" and (self.penalty != "L2" or not self.lam > 0):
            raise input_error(function, "interval", "'delta' unless penalty='L2' with lam > 0 (the bootstrap "
                              "re-solves by projected gradient on the L2 objective)", self.interval)
        check_finite(function, "lam", self.lam, non_negative=True)
        check_choice(function, "solver", self.solver, SOLVERS)
        check_choice(function, "se_method", self.se_method, SE_METHODS)
        check_choice(function, "scale", self.scale, SCALES)
        check_finite(function, "conf_level", self.conf_level, low=0, high=1, low_open=True, high_open=True)
        check_int(function, "max_iter", self.max_iter, low=1)
        check_int(function, "n_unroll", self.n_unroll, low=1)
        check_random_state(function, "random_state", self.random_state)

    # -- objective ---------------------------------------------------------------------------------
    def _value(self, model, pi, coef):
        return model._utility(pi, coef) if self.scale == "linear" else model._win_prob(pi, None, coef)

    def _objective(self, model, pi, coef):
        return self._value(model, pi, coef) - self.lam * _penalty(self.penalty, pi, model.design_.p_tensor())

    def _closed_form(self, model, coef):
        C, b = _closed_form_system(model, self.lam, coef)
        return torch.linalg.solve(C, b)

    def _closed_form_problem(self, model) -> str | None:
        """Why the closed form does not apply here, or None."""
        if self.penalty != "L2" or self.scale != "linear":
            return f"the closed form needs penalty='L2' and scale='linear' (got {self.penalty!r}, {self.scale!r})"
        C, b = _closed_form_system(model, self.lam, model.coef_tensor())
        top = float(torch.linalg.eigvalsh((C + C.T) / 2).max())
        if not top < 0:
            return f"C is not negative definite (largest eigenvalue {top:.4g})"
        full = model.design_.to_full(torch.linalg.solve(C, b))
        low = min(float(q.min()) for q in full)
        if not (low > 0 and max(float(q.max()) for q in full) < 1):
            return f"pi* = C^-1 b leaves the simplex (smallest probability {low:.4g})"
        return None

    def fit(self, model: PairedConjointLogit, design: FactorialDesign | None = None) -> AverageCasePolicy:
        pi = self._solve(model, design)
        self.at_boundary_ = bool(min(float(q.min()) for q in self.pi_) < ACTIVE_TOL)
        self._delta_method(model, pi)
        if self.at_boundary_ and self.se_method_used_ != "none":
            warnings.warn(f"AverageCasePolicy: a level of pi* is below {ACTIVE_TOL} (an optimum on the simplex's "
                          "boundary): the delta-method value_se_ under-covers there (the plug-in maximum is biased "
                          "upward), and interval='bootstrap' has not been measured to cover there either", BoundaryWarning,
                          stacklevel=2)
        if self.interval == "bootstrap":
            from icml26.training.conjoint.bootstrap import bootstrap_values

            rng = np.random.default_rng(self.random_state)
            self.value_boot_ = bootstrap_values(model, self.lam, self.scale, self.n_boot, rng)
            self.value_bias_ = float(self.value_boot_.mean() - self.value_)
        return self

    def _solve(self, model, design=None) -> list[torch.Tensor]:
        """Validate, solve and set ``pi_``, ``value_``, ``objective_``, ``solver_used_``; no SEs."""
        name = "AverageCasePolicy.fit"
        self._check_params(name)
        _check_model(name, model)
        if design is not None and not isinstance(design, FactorialDesign):
            raise InputTypeError(name, "design", "None or a FactorialDesign", described(type(design).__name__))
        if design is not None and (design.factors != model.design_.factors or design.n_levels != model.design_.n_levels):
            raise input_error(name, "design", f"the model's design {model.design_!r}", design)
        design = model.design_
        self.design_, self.model_ = design, model
        problem = self._closed_form_problem(model) if self.solver != "gradient" else "gradient requested"
        if self.solver == "closed_form" and problem:
            raise input_error(name, "solver", "'auto' or 'gradient' here: " + problem, "closed_form")
        coef = model.coef_tensor()
        if problem is None:
            pi = design.to_full(self._closed_form(model, coef))
            self.solver_used_ = "closed_form"
        else:
            rng = np.random.default_rng(self.random_state)
            smooth = self.penalty in ("L2", "KL")
            logits = ascend(lambda a: self._objective(model, _softmax_split(design, a), coef),
                            _initial_logits(design, rng), smooth, self.max_iter)
            pi = _softmax_split(design, logits)
            self.solver_used_ = "gradient" + ("" if self.solver == "gradient" else f" ({problem})")
        with torch.no_grad():
            self.pi_ = [q.detach().numpy().copy() for q in pi]
            self.value_ = float(self._value(model, pi, coef))
            self.objective_ = float(self._objective(model, pi, coef))
        return pi

    # -- uncertainty -------------------------------------------------------------------------------
    def _delta_method(self, model, pi):
        from torch.func import jacrev

        design = model.design_
        method = self.se_method
        if method == "auto":
            method = ("closed_form" if self.solver_used_ == "closed_form" else
                      "implicit" if self.penalty in ("L2", "KL") else "none")
        if method == "none":  # L1 / LInfinity optima sit on kinks where pi*(theta) is not differentiable
            self.se_method_used_, self.jacobian_ = "none", None
            self.value_se_ = math.nan
            self.pi_se_ = [np.full(k, math.nan) for k in design.n_levels]
            return
        if method == "closed_form" and self.solver_used_ != "closed_form":
            raise input_error("AverageCasePolicy.fit", "se_method", "'implicit' or 'unrolled' when the closed form "
                              "was not used", "closed_form")
        self.se_method_used_ = method
        coef0 = model.coef_tensor()

        def outputs(full, coef):
            return torch.cat([self._value(model, full, coef).reshape(1), torch.cat(full)])

        if method == "closed_form":
            J = jacrev(lambda c: outputs(design.to_full(self._closed_form(model, c)), c))(coef0)
        elif method == "implicit":
            z0, to_full = _active_face(pi)
            grad_F = jacrev(lambda z, c: self._objective(model, to_full(z), c))
            dout_dz, dout_dc = jacrev(lambda z, c: outputs(to_full(z), c), argnums=(0, 1))(z0, coef0)
            if z0.numel():
                H = jacrev(grad_F, argnums=0)(z0, coef0)
                G_theta = jacrev(grad_F, argnums=1)(z0, coef0)
                J = dout_dz @ -torch.linalg.solve(H, G_theta) + dout_dc
            else:  # every factor at a vertex: pi* does not move with theta
                J = dout_dc
        else:
            a0 = _initial_logits(design, None)
            step = self._unroll_step(model, a0, coef0)

            smooth = self.penalty in ("L2", "KL")

            def unrolled(c):
                a = a0
                g = torch.func.grad(lambda x: self._objective(model, _softmax_split(design, x), c))
                for t in range(self.n_unroll):  # a subgradient needs a decaying step to settle at a kink
                    a = a + (step if smooth else step / math.sqrt(1 + t / 50)) * g(a)
                return outputs(_softmax_split(design, a), c)

            J = jacrev(unrolled)(coef0)
        cov = J @ torch.as_tensor(model.vcov_, dtype=DTYPE) @ J.T
        se = torch.sqrt(torch.clamp(torch.diagonal(cov), min=0)).numpy()
        self.jacobian_ = J.detach().numpy()
        self.value_se_ = float(se[0])
        offsets = np.cumsum([1] + design.n_levels)
        self.pi_se_ = [se[offsets[d]:offsets[d + 1]] for d in range(design.n_factors)]

    def _unroll_step(self, model, a0, coef):
        """1 / (largest curvature of the objective in the logits at the start), the plain-GD step."""
        if self.penalty == "KL":
            design = model.design_
            H = torch.func.hessian(lambda a: self._objective(model, _softmax_split(design, a), coef))(a0)
            return 1.0 / max(float(torch.linalg.eigvalsh((H + H.T) / 2).abs().max()), 1e-8)
        design, p = model.design_, model.design_.p_tensor()
        # L1 / LInfinity have no curvature at p: their step is sized on the L2 penalty of the same lam
        H = torch.func.hessian(lambda a: self._value(model, _softmax_split(design, a), coef)
                               - self.lam * _penalty("L2", _softmax_split(design, a), p))(a0)
        return 1.0 / max(float(torch.linalg.eigvalsh((H + H.T) / 2).abs().max()), 1e-8)

    def conf_int(self, conf_level: float | None = None) -> dict:
        """Intervals at ``conf_level`` (default the estimator's): {"value": (lo, hi), factor: array (L_d, 2)};
        the value's is the bias-corrected bootstrap interval with ``interval="bootstrap"``, else normal (delta method);
        the probabilities' are normal (delta method)."""
        from scipy.stats import norm

        name = "AverageCasePolicy.conf_int"
        if not hasattr(self, "pi_"):
            raise input_error(name, "self", "a fitted policy (call fit first)", described("an unfitted one"))
        level = self.conf_level if conf_level is None else conf_level
        level = check_finite(name, "conf_level", level, low=0, high=1, low_open=True, high_open=True)
        z = float(norm.ppf(0.5 + level / 2))
        out = {"value": (self.value_ - z * self.value_se_, self.value_ + z * self.value_se_)}
        if self.interval == "bootstrap":
            from icml26.training.conjoint.bootstrap import bias_corrected_interval

            out["value"] = bias_corrected_interval(self.value_, self.value_boot_, level)
        for f, q, s in zip(self.design_.factors, self.pi_, self.pi_se_):
            out[f] = np.stack([q - z * s, q + z * s], axis=1)
        return out


class AverageCasePolicyCV(BaseEstimator):
    """lam chosen by respondent-grouped K-fold cross-fitting of the policy value (a scikit-learn estimator).

    For each lam in ``lams`` and each fold, the outcome model is fitted on the other folds, the policy solved
    there, and its value measured under a model fitted on the held-out fold (the reference's
    ``cv_strategize``: the out-of-fold value). ``lam_`` maximises the mean; ``cv_values_`` holds the means
    (one per lam); ``best_estimator_`` is the policy refitted on all data at ``lam_``. ``model_params`` and
    ``policy_params`` are keyword arguments of :class:`PairedConjointLogit` and :class:`AverageCasePolicy`
    (``lam`` and ``random_state`` excepted: they come from ``lams`` and this estimator).
    """

    def __init__(self, lams=(0.01, 0.1, 1.0, 10.0), n_folds: int = 3, model_params: dict | None = None,
                 policy_params: dict | None = None, random_state=None):
        self.lams = lams
        self.n_folds = n_folds
        self.model_params = model_params
        self.policy_params = policy_params
        self.random_state = random_state

    def _check_params(self, function: str):
        """(lams, model params, policy params), checked."""
        try:
            lams = np.ravel(np.asarray(self.lams, dtype=float)).tolist()
        except (TypeError, ValueError):
            raise InputTypeError(function, "lams", "a non-empty sequence of numbers >= 0",
                                 described(type(self.lams).__name__)) from None
        if not lams:
            raise input_error(function, "lams", "a non-empty sequence of numbers >= 0", self.lams)
        for lam in lams:
            check_finite(function, "lams", lam, non_negative=True)
        check_int(function, "n_folds", self.n_folds, low=2)
        check_random_state(function, "random_state", self.random_state)
        params = []
        for arg, value, cls, banned in (("model_params", self.model_params, PairedConjointLogit, ()),
                                        ("policy_params", self.policy_params, AverageCasePolicy,
                                         ("lam", "random_state"))):
            value = {} if value is None else value
            if not hasattr(value, "items"):
                raise InputTypeError(function, arg, "None or a dict of keyword arguments",
                                     described(type(value).__name__))
            allowed = set(cls().get_params()) - set(banned)
            unknown = sorted(set(value) - allowed)
            if unknown:
                raise input_error(function, arg, f"keys among {sorted(allowed)}", unknown)
            params.append(dict(value))
        model_params, policy_params = params
        # fail on a bad nested value now, before any fold is fitted
        PairedConjointLogit(**model_params)._check_params(function)
        AverageCasePolicy(**policy_params)._check_params(function)
        return lams, model_params, policy_params

    def fit(self, left, right, chosen, respondent, design: FactorialDesign | None = None) -> AverageCasePolicyCV:
        """Cross-fit every lam on pairs (the arguments of :meth:`PairedConjointLogit.fit`; ``respondent``
        labels define the folds and are required)."""
        from sklearn.model_selection import GroupKFold

        name = "AverageCasePolicyCV.fit"
        lams, model_params, policy_params = self._check_params(name)
        if design is not None and not isinstance(design, FactorialDesign):
            raise InputTypeError(name, "design", "None or a FactorialDesign", described(type(design).__name__))
        design = design or _design_from_data(left, right)
        L, R = design.as_indices(left, name, "left"), design.as_indices(right, name, "right")
        y = np.asarray(chosen)
        if L.shape != R.shape:
            raise input_error(name, "right", f"profiles of left's shape {L.shape}", describe(R))
        if y.shape != (len(L),) or not np.isin(y, (0, 1)).all():
            raise input_error(name, "chosen", f"{len(L)} values in {{0, 1}} (1: left chosen)", describe(y))
        if respondent is None:
            raise input_error(name, "respondent", f"{len(L)} respondent labels (the folds group them)", None)
        groups = np.asarray(respondent)
        if groups.shape != (len(L),) or len(np.unique(groups)) < self.n_folds:
            raise input_error(name, "respondent", f"{len(L)} labels of at least n_folds = {self.n_folds} "
                              "respondents", describe(groups))
        policy_params = {**policy_params, "random_state": self.random_state}
        values = np.zeros((len(lams), self.n_folds))
        for k, (train, test) in enumerate(GroupKFold(self.n_folds).split(L, y, groups)):
            fitted = PairedConjointLogit(**model_params).fit(L[train], R[train], y[train], groups[train], design)
            # the held-out fold is scored by the unscreened model of the same family
            held_params = dict(model_params)
            if held_params.get("interactions") == "screened":
                held_params["interactions"] = "all"
            held = PairedConjointLogit(**held_params).fit(L[test], R[test], y[test], groups[test], design)
            for i, lam in enumerate(lams):
                policy = AverageCasePolicy(lam=lam, **policy_params)
                pi = policy._solve(fitted, design)  # the fold fits need no SEs
                with torch.no_grad():
                    values[i, k] = float(policy._value(held, pi, held.coef_tensor()))
        self.cv_values_ = values.mean(1)
        self.cv_folds_ = values
        self.lam_ = float(lams[int(np.argmax(self.cv_values_))])
        model = PairedConjointLogit(**model_params).fit(L, R, y, groups, design)
        self.best_estimator_ = AverageCasePolicy(lam=self.lam_, **policy_params).fit(model, design)
        return self

