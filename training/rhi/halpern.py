"""Robust average-reward RL: uncertainty sets, exact ground truth, and Robust Halpern Iteration.

Roch, Atia & Wang, "Model-Free Robust Average-Reward Reinforcement Learning with Sample Complexity
Analysis" (ICML 2026, arXiv 2505.12462). Tabular robust MDP with (s, a)-rectangular uncertainty
sets U(P_sa) around a nominal kernel; the robust Bellman operator on Q is

    T(Q)(s, a) = r(s, a) + sigma_{U(P_sa)}(V_Q),   V_Q(s) = max_a Q(s, a),
    sigma_U(V) = min_{q in U} q . V                 (the support function),

a non-expansion in the span seminorm Sp(x) = max x - min x. At the optimum T(Q*) = Q* + g* 1, and
for the greedy policy pi_Q of any Q, 0 <= g* - g(pi_Q) <= Sp(T(Q) - Q): the span residual is a
computable certificate. Halpern anchoring Q^k = (1 - b_k) Q^0 + b_k T(Q^{k-1}), b_k = k / (k + 2),
drives it to 0 at rate O(1/k) even where plain relative value iteration oscillates.

This module: :class:`RobustMDP` with its exact solvers and generators, the exact :func:`halpern_iteration` and
:func:`relative_value_iteration`, and the model-free learner :class:`RobustHalpernIteration`. The uncertainty sets
live in :mod:`icml26.training.rhi.uncertainty`; sampling, the generative model and the MLMC oracles in
:mod:`icml26.training.rhi.oracles`; the package :mod:`icml26.training.rhi` exports them all.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from sklearn.base import BaseEstimator

from icml26.errors import InputError, InputTypeError, described
from icml26.training.rhi.oracles import (
    MLMC,
    GenerativeModel,
    PlugIn,
    SupportOracle,
    check_kernel,
    check_rewards,
)
from icml26.training.rhi.uncertainty import Contamination, UncertaintySet
from icml26.validation import check_finite, check_int

__all__ = ["RobustMDP", "RobustSolution",
    "garnet", "periodic_cycle", "river_swim", "halpern_iteration", "relative_value_iteration", "IterationTrace",
    "RobustHalpernIteration", "span"]


def span(x, axis=None) -> np.ndarray | float:
    """Span seminorm max x - min x (over all entries by default)."""
    x = np.asarray(x)
    return x.max(axis=axis) - x.min(axis=axis)


# ==============================================================================================
# Tabular robust MDP and its exact (model-based) solvers
# ==============================================================================================
@dataclass
class RobustSolution:
    """Exact robust average-reward solution.

    ``gain`` g*; ``gain_bounds``: min/max of T(h) - h (g* lies between them); ``bias`` h* with h*(0) =
    0; ``span`` H = Sp(h*); ``policy`` greedy w.r.t. ``Q`` = r + sigma(h*) (so T(Q) = Q + g*);
    ``residual``: final Sp(T(h) - h); ``n_iter``; ``converged``.
    """

    gain: float
    gain_bounds: tuple[float, float]
    bias: np.ndarray
    span: float
    policy: np.ndarray
    Q: np.ndarray
    residual: float
    n_iter: int
    converged: bool


def _relative_vi(operator, n_states: int, *, tol: float, max_iter: int, tau: float):
    """h <- T_tau(h) - T_tau(h)(0), T_tau = (1 - tau) I + tau T (aperiodicity transform)."""
    h = np.zeros(n_states)
    for it in range(1, max_iter + 1):  # noqa: B007 (the count is returned)
        diff = operator(h) - h
        if span(diff) <= tol:
            break
        h = h + tau * diff
        h = h - h[0]
    return h, float(diff.min()), float(diff.max()), it


class RobustMDP:
    """Tabular robust MDP: nominal kernel ``P`` (S, A, S), rewards ``r`` (S, A), an uncertainty set.

    Exact solvers (they read P, unlike the learner): :meth:`solve` (optimal robust gain, bias, span,
    policy), :meth:`evaluate` (robust gain of a fixed policy; :meth:`evaluate_many` for a batch of them),
    :meth:`discounted_values`, and the robust Bellman operator :meth:`bellman`.
    """

    def __init__(self, P, r, uncertainty: UncertaintySet):
        self.P = check_kernel(P, function="RobustMDP")
        self.n_states, self.n_actions = self.P.shape[0], self.P.shape[1]
        self.r = check_rewards(r, (self.n_states, self.n_actions), function="RobustMDP")
        self.uncertainty = _check_set("RobustMDP", uncertainty)

    def with_uncertainty(self, uncertainty: UncertaintySet) -> RobustMDP:
        """The same kernel and rewards with another uncertainty set."""
        return RobustMDP(self.P, self.r, _check_set("RobustMDP.with_uncertainty", uncertainty))

    def generative_model(self, seed=None) -> GenerativeModel:
        """A sampler of the nominal kernel that also knows the rewards (``seed``: None, an int or a Generator)."""
        return GenerativeModel(self.P, seed, rewards=self.r)

    def _check_Q(self, Q, function: str = "RobustMDP", argument: str = "Q") -> np.ndarray:
        try:
            Q = np.asarray(Q, dtype=float)
        except (TypeError, ValueError):
            raise InputTypeError(function, argument, "an (S, A) array of numbers", described(type(Q).__name__)) from None
        if Q.shape != (self.n_states, self.n_actions):
            raise InputError(function, argument, f"shape (S, A) = {(self.n_states, self.n_actions)}",
                             described(f"shape {Q.shape}"))
        if not np.isfinite(Q).all():
            raise InputError(function, argument, "finite values", described("NaN or inf"))
        return Q

    def bellman(self, Q) -> np.ndarray:
        """T(Q) = r + sigma_{U(P_sa)}(max_a Q)."""
        Q = self._check_Q(Q, "RobustMDP.bellman")
        return self.r + self.uncertainty._support(self.P, Q.max(1))

    def solve(self, *, tol: float = 1e-10, max_iter: int = 200_000, tau: float = 0.5) -> RobustSolution:
        """Robust relative value iteration with the aperiodicity transform (Wang et al., AAAI 2023)."""
        tol, max_iter, tau = _check_solver("RobustMDP.solve", tol, max_iter, tau)

        def operator(h):
            return (self.r + self.uncertainty._support(self.P, h)).max(1)

        h, lo, hi, it = _relative_vi(operator, self.n_states, tol=tol, max_iter=max_iter, tau=tau)
        Q = self.r + self.uncertainty._support(self.P, h)
        return RobustSolution(gain=0.5 * (lo + hi), gain_bounds=(lo, hi), bias=h, span=float(span(h)),
                              policy=Q.argmax(1), Q=Q, residual=hi - lo, n_iter=it, converged=hi - lo <= tol)

    def _check_policy(self, policy, function: str = "RobustMDP.evaluate") -> np.ndarray:
        policy = np.asarray(policy)
        if policy.shape != (self.n_states,) or not np.issubdtype(policy.dtype, np.integer) \
                or policy.min() < 0 or policy.max() >= self.n_actions:
            raise InputError(function, "policy", f"{self.n_states} integer actions in [0, {self.n_actions}) (a "
                             "deterministic policy, one action per state)", policy)
        return policy

    def evaluate(self, policy, *, tol: float = 1e-10, max_iter: int = 200_000, tau: float = 0.5,
                 return_bounds: bool = False):
        """Robust (worst-case) gain of the deterministic ``policy``: the same iteration on rows (s, pi(s))."""
        policy = self._check_policy(policy)
        tol, max_iter, tau = _check_solver("RobustMDP.evaluate", tol, max_iter, tau)
        states = np.arange(self.n_states)
        P_pi, r_pi = self.P[states, policy], self.r[states, policy]
        h, lo, hi, _ = _relative_vi(lambda h: r_pi + self.uncertainty._support(P_pi, h), self.n_states,
                                    tol=tol, max_iter=max_iter, tau=tau)
        return (0.5 * (lo + hi), (lo, hi)) if return_bounds else 0.5 * (lo + hi)

    def evaluate_many(self, policies, *, tol: float = 1e-10, max_iter: int = 200_000, tau: float = 0.5) -> np.ndarray:
        """Robust gains of many deterministic policies at once: :meth:`evaluate` batched over the rows of ``policies``.

        ``policies`` has shape (n, S), one action per state in each row; returns the n gains (shape (n,)), each
        the midpoint of bounds ``tol`` apart, as :meth:`evaluate` gives. Every policy runs the same relative value
        iteration on its rows (s, pi(s)) (Wang et al., AAAI 2023), all in one vectorised support-function call
        per step; a policy leaves the batch once its bounds meet. It is what measures how often a uniformly
        random policy is already near-optimal (the baseline of the RHI experiment's success claims).
        """
        f = "RobustMDP.evaluate_many"
        policies = np.asarray(policies)
        if policies.ndim != 2 or policies.shape[1] != self.n_states or not (
                policies.size == 0 or np.issubdtype(policies.dtype, np.integer)):
            raise InputError(f, "policies", f"an (n, S) = (n, {self.n_states}) integer array, one deterministic "
                             "policy per row", described(f"shape {policies.shape}, dtype {policies.dtype}"))
        if policies.size and (policies.min() < 0 or policies.max() >= self.n_actions):
            raise InputError(f, "policies", f"actions in [0, {self.n_actions})",
                             described(f"actions from {policies.min()} to {policies.max()}"))
        tol, max_iter, tau = _check_solver(f, tol, max_iter, tau)
        if policies.size == 0:
            return np.zeros(0)
        states = np.arange(self.n_states)
        P_pi, r_pi = self.P[states, policies], self.r[states, policies]  # (n, S, S), (n, S)
        h = np.zeros(r_pi.shape)
        lo, hi = np.full(len(h), -np.inf), np.full(len(h), np.inf)
        active = np.arange(len(h))  # policies whose bounds are still more than tol apart
        for _ in range(max_iter):
            if active.size == 0:
                break
            diff = r_pi[active] + self.uncertainty._support(P_pi[active], h[active, None, :]) - h[active]
            lo[active], hi[active] = diff.min(1), diff.max(1)
            done = hi[active] - lo[active] <= tol
            step = h[active] + tau * diff
            h[active] = step - step[:, :1]
            active = active[~done]
        return 0.5 * (lo + hi)

    def discounted_values(self, gamma: float, *, tol: float = 1e-10, max_iter: int = 1_000_000) -> np.ndarray:
        """Optimal robust discounted values V_gamma, by value iteration with MacQueen's bounds.

        (1 - gamma) V_gamma -> g* as gamma -> 1: the cross-check of :meth:`solve`. Stops when the
        bounds V + gamma / (1 - gamma) [min, max](V_new - V) on V_gamma are tol / (1 - gamma) apart.
        """
        gamma = check_finite("RobustMDP.discounted_values", "gamma", gamma, low=0, high=1, high_open=True)
        tol = check_finite("RobustMDP.discounted_values", "tol", tol, positive=True)
        max_iter = check_int("RobustMDP.discounted_values", "max_iter", max_iter, low=1)
        V = np.zeros(self.n_states)
        for _ in range(max_iter):
            new = (self.r + gamma * self.uncertainty._support(self.P, V)).max(1)
            diff, V = new - V, new
            if gamma * span(diff) <= tol:  # the bounds on (1 - gamma) V are tol apart
                break
        return V + gamma / (1 - gamma) * 0.5 * (diff.min() + diff.max())

    def __repr__(self) -> str:
        return f"RobustMDP(n_states={self.n_states}, n_actions={self.n_actions}, uncertainty={self.uncertainty!r})"


def _check_set(function: str, uncertainty, argument: str = "uncertainty") -> UncertaintySet:
    if not isinstance(uncertainty, UncertaintySet):
        raise InputTypeError(function, argument, "an uncertainty set (Contamination, LpBall, KLBall or ChiSquareBall)",
                             described(type(uncertainty).__name__))
    return uncertainty


def _check_solver(function: str, tol, max_iter, tau) -> tuple[float, int, float]:
    return (check_finite(function, "tol", tol, positive=True), check_int(function, "max_iter", max_iter, low=1),
            check_finite(function, "tau", tau, low=0, high=1, low_open=True))


def _default_set(function: str, uncertainty):
    return Contamination(0.0) if uncertainty is None else _check_set(function, uncertainty)


def garnet(n_states: int, n_actions: int, uncertainty: UncertaintySet | None = None, *, branching: int | None = None,
           min_prob: float = 0.1, seed=None) -> RobustMDP:
    """Garnet G(S, A): each (s, a) reaches ``branching`` random states (default ~30% of S).

    Rewards are U[0, 1]. Every row also reaches (s + 1) mod S, so each policy's nominal chain is
    irreducible (a single recurrent class: constant gains); every reached state gets probability
    >= ``min_prob`` (a Dirichlet(1) draw shares the rest), so a small KL / chi-square ball cannot
    cut an edge: KL needs delta >= -log(1 - min_prob), chi-square delta >= min_prob.
    ``uncertainty=None``: the nominal model (Contamination(0)). ``seed`` seeds a local NumPy generator.
    """
    uncertainty = _default_set("garnet", uncertainty)
    S = check_int("garnet", "n_states", n_states, low=2)
    A = check_int("garnet", "n_actions", n_actions, low=1)
    b = max(2, round(0.3 * S)) if branching is None else branching
    b = check_int("garnet", "branching", b, low=1, high=S)
    min_prob = check_finite("garnet", "min_prob", min_prob, low=0, high=1 / b)
    rng = np.random.default_rng(seed)
    P = np.zeros((S, A, S))
    for s in range(S):  # generation only: a few hundred rows at most
        for a in range(A):
            others = np.setdiff1d(np.arange(S), [(s + 1) % S])
            targets = np.append(rng.choice(others, size=b - 1, replace=False), (s + 1) % S)
            P[s, a, targets] = min_prob + (1 - b * min_prob) * rng.dirichlet(np.ones(b))
    return RobustMDP(P, rng.uniform(0, 1, (S, A)), uncertainty)


def periodic_cycle(uncertainty: UncertaintySet | None = None) -> RobustMDP:
    """Two states, one action, deterministic swap 0 <-> 1, rewards (1, 0): period 2, g* = 1/2.

    Every ball around a deterministic row that keeps q << P is that row, so KL and chi-square sets
    leave this model nominal. Plain relative value iteration oscillates here forever.
    """
    uncertainty = _default_set("periodic_cycle", uncertainty)
    P = np.zeros((2, 1, 2))
    P[0, 0, 1] = P[1, 0, 0] = 1.0
    return RobustMDP(P, np.array([[1.0], [0.0]]), uncertainty)


def river_swim(n_states: int = 6, uncertainty: UncertaintySet | None = None, *, p_forward: float = 0.35,
               p_backward: float = 0.05, small_reward: float = 0.005) -> RobustMDP:
    """RiverSwim (Strehl & Littman 2008): action 0 swims left (always succeeds), action 1 swims right
    against the current (forward ``p_forward``, back ``p_backward``, else stay). Reward
    ``small_reward`` for resting at the left bank, 1 for swimming right at the far right bank: a
    large optimal bias span H.
    """
    S = check_int("river_swim", "n_states", n_states, low=2)
    pf = check_finite("river_swim", "p_forward", p_forward, low=0, high=1)
    pb = check_finite("river_swim", "p_backward", p_backward, low=0, high=1 - pf)
    small_reward = check_finite("river_swim", "small_reward", small_reward)
    uncertainty = _default_set("river_swim", uncertainty)
    P = np.zeros((S, 2, S))
    r = np.zeros((S, 2))
    for s in range(S):
        P[s, 0, max(s - 1, 0)] = 1.0
        P[s, 1, min(s + 1, S - 1)] += pf
        P[s, 1, max(s - 1, 0)] += pb
        P[s, 1, s] += 1 - pf - pb
    r[0, 0], r[S - 1, 1] = small_reward, 1.0
    return RobustMDP(P, r, uncertainty)


def _check_mdp(function: str, mdp) -> None:
    if not isinstance(mdp, RobustMDP):
        raise InputTypeError(function, "mdp", "a RobustMDP", described(type(mdp).__name__))


@dataclass
class IterationTrace:
    """Exact iteration output: last ``Q``, its greedy ``policy``, and ``residuals[k]`` = Sp(T(Q^k) - Q^k)."""

    Q: np.ndarray
    policy: np.ndarray
    residuals: np.ndarray


def halpern_iteration(mdp: RobustMDP, n_iter: int, *, Q0=None) -> IterationTrace:
    """Exact (model-based) Halpern iteration Q^k = (1 - b_k) Q^0 + b_k T(Q^{k-1}), b_k = k / (k + 2)."""
    _check_mdp("halpern_iteration", mdp)
    n_iter = check_int("halpern_iteration", "n_iter", n_iter, low=0)
    Q0 = np.zeros((mdp.n_states, mdp.n_actions)) if Q0 is None else mdp._check_Q(Q0, "halpern_iteration", "Q0")
    Q, TQ = Q0, mdp.bellman(Q0)
    residuals = [span(TQ - Q)]
    for k in range(1, n_iter + 1):
        beta = k / (k + 2)
        Q = (1 - beta) * Q0 + beta * TQ
        TQ = mdp.bellman(Q)
        residuals.append(span(TQ - Q))
    return IterationTrace(Q, Q.argmax(1), np.array(residuals))


def relative_value_iteration(mdp: RobustMDP, n_iter: int, *, tau: float = 1.0, Q0=None) -> IterationTrace:
    """Relative value iteration on Q: Q <- T_tau(Q) - T_tau(Q)[0, 0]; tau = 1 is the plain method."""
    _check_mdp("relative_value_iteration", mdp)
    n_iter = check_int("relative_value_iteration", "n_iter", n_iter, low=0)
    tau = check_finite("relative_value_iteration", "tau", tau, low=0, high=1, low_open=True)
    Q = np.zeros((mdp.n_states, mdp.n_actions)) if Q0 is None else mdp._check_Q(Q0, "relative_value_iteration", "Q0")
    TQ = mdp.bellman(Q)
    residuals = [span(TQ - Q)]
    for _ in range(n_iter):
        Q = (1 - tau) * Q + tau * TQ
        Q = Q - Q[0, 0]
        TQ = mdp.bellman(Q)
        residuals.append(span(TQ - Q))
    return IterationTrace(Q, Q.argmax(1), np.array(residuals))


# ==============================================================================================
# Model-free Robust Halpern Iteration
# ==============================================================================================
class RobustHalpernIteration(BaseEstimator):
    """Model-free Robust Halpern Iteration with a recursive (SPIDER-style) operator estimate.

    A scikit-learn estimator: the constructor stores its parameters, :meth:`fit` checks them, and ``clone``,
    ``get_params`` and ``set_params`` work (``fit`` takes a generative model, not ``(X, y)``).

    Learns an epsilon-optimal robust policy from a :class:`GenerativeModel` alone::

        T_hat[-1] = r;  h[-1] = 0;  Q^0 = 0
        for k = 0, 1, ...:
            Q^k  = (1 - b_k) Q^0 + b_k T_hat[k-1]            b_k = k / (k + 2)   (sampled operator)
            h^k  = max_a Q^k
            m_k  = max(1, ceil(scale * alpha_k * c_k * Sp(h^k - h^{k-1})^2 / eps^2)),
                   c_k = 5 (k+2) ln^2(k+2),  alpha_k = ln(2 S A (k+1)^2 (pi^2/6) / delta)
            D    = oracle estimate of sigma(h^k) - sigma(h^{k-1}) on common samples, budget m_k x cost_factor
            T_hat[k] = T_hat[k-1] + D
            stop when Sp(T_hat[k] - Q^k) + 2 margin_k <= eps,  margin_k = sqrt(2 alpha_k sum_j Sp(d_j)^2 / (4 m_j))

    T_hat[k] estimates T(Q^k); by the certificate ``g* - g(pi_Q) <= Sp(T(Q) - Q) <= Sp(T_hat - Q) +
    2 ||T_hat - T(Q)||``, and margin_k is the Azuma-Hoeffding bound on ``||T_hat - T(Q)||`` (a union
    bound over (s, a, k) replaces the unknown horizon; exact for averaging oracles, a nominal bound for
    MLMC ones). The stop reads only estimated quantities: no P, no g*, no span H.

    Attributes after :meth:`fit`: ``oracle_`` (the oracle used, bound to the set), ``policy_``, ``Q_``, ``samples_used_``, ``span_residual_``
    (estimated ``Sp(T_hat - Q)``), ``margin_``, ``operator_estimate_`` (T_hat, the estimate of
    ``T(Q_)``), ``gain_estimate_``, ``n_iter_``, ``converged_``,
    ``history_`` (per-step arrays: budget m_k, residual, margin, cumulative samples).

    Args:
        uncertainty: The uncertainty set (Contamination, LpBall, KLBall, ChiSquareBall).
        oracle: A support oracle (PlugIn, MLMC, TruncatedMLMC, KOrderMLMC); ``None`` picks MLMC()
            for KL / chi-square balls (plug-in is biased there) and PlugIn() otherwise.
        epsilon: Target suboptimality (> 0).
        delta: Confidence level of the margin, in (0, 1).
        max_samples: Stop (unconverged) before a step would exceed this many samples; ``None``: no
            cap.
        random_state: Seed of the oracle's randomness (the generative model has its own), as in
            scikit-learn estimators.
        schedule_scale: Multiplies m_k; larger = more samples per step, smaller margin, fewer steps.
        max_iter: Cap on Halpern steps.
    """

    def __init__(self, uncertainty=None, oracle=None, epsilon: float = 0.1, delta: float = 0.05, max_samples=None,
                 random_state=None, *, schedule_scale: float = 1.0, max_iter: int = 100_000):
        self.uncertainty = uncertainty
        self.oracle = oracle
        self.epsilon = epsilon
        self.delta = delta
        self.max_samples = max_samples
        self.random_state = random_state
        self.schedule_scale = schedule_scale
        self.max_iter = max_iter

    def _check_params(self, function: str) -> SupportOracle:
        """scikit-learn's rule: ``__init__`` stores, ``fit`` validates; returns the oracle to use."""
        _check_set(function, self.uncertainty)
        oracle = self.oracle
        if oracle is None:
            oracle = MLMC() if self.uncertainty.nonlinear_in_P else PlugIn()
        if not isinstance(oracle, SupportOracle):
            raise InputTypeError(function, "oracle", "None or a support oracle (PlugIn, MLMC, TruncatedMLMC, "
                                 "KOrderMLMC)", described(type(oracle).__name__))
        check_finite(function, "epsilon", self.epsilon, low=0, low_open=True)
        check_finite(function, "delta", self.delta, low=0, high=1, low_open=True, high_open=True)
        if self.max_samples is not None:
            check_finite(function, "max_samples", self.max_samples, low=1)
        if self.random_state is not None and (isinstance(self.random_state, bool) or not isinstance(
                self.random_state, (int, np.integer, np.random.Generator, np.random.SeedSequence))):
            raise InputTypeError(function, "random_state", "None, an int, a SeedSequence or a numpy Generator",
                                 described(type(self.random_state).__name__))
        check_finite(function, "schedule_scale", self.schedule_scale, low=0, low_open=True)
        check_int(function, "max_iter", self.max_iter, low=1)
        return oracle

    def fit(self, gen_model) -> RobustHalpernIteration:
        """Run the iteration on samples drawn from ``gen_model`` until the stopping rule holds.

        ``max_samples`` or ``max_iter`` may stop it earlier, unconverged (``converged_`` is then False).

        Args:
            gen_model: a :class:`GenerativeModel` built with rewards (e.g. by
                ``RobustMDP.generative_model()``); it is the learner's only access to the model.

        Returns:
            ``self``, with the fitted attributes listed in the class docstring.
        """
        name = "RobustHalpernIteration.fit"
        oracle = self._check_params(name)
        if not all(hasattr(gen_model, a) for a in ("n_states", "n_actions", "rewards", "batch", "samples_used")):
            raise InputTypeError(name, "gen_model", "a GenerativeModel", described(type(gen_model).__name__))
        if gen_model.rewards is None:
            raise InputError(name, "gen_model.rewards", "rewards (build the model with GenerativeModel(P, seed, "
                             "rewards=r) or RobustMDP.generative_model())", described("None (gen_model.rewards is None)"))
        S, A, r = gen_model.n_states, gen_model.n_actions, np.asarray(gen_model.rewards, dtype=float)
        eps, rng = float(self.epsilon), np.random.default_rng(self.random_state)
        self.oracle_ = oracle.bind(self.uncertainty)  # the oracle used, bound to the uncertainty set
        oracle, rows = self.oracle_, gen_model.batch()
        start_samples = gen_model.samples_used

        Q0 = np.zeros((S, A))
        T_hat, h_prev = r.copy(), np.zeros(S)
        variance_proxy, converged = 0.0, False
        history: dict[str, list] = {"budget": [], "residual": [], "margin": [], "samples": []}
        for k in range(self.max_iter):
            beta = k / (k + 2)
            Q = (1 - beta) * Q0 + beta * T_hat
            h = Q.max(1)
            alpha = math.log(2 * S * A * (k + 1) ** 2 * (math.pi ** 2 / 6) / self.delta)
            c_k = 5 * (k + 2) * math.log(k + 2) ** 2
            step_span = float(span(h - h_prev))
            m = max(1, math.ceil(self.schedule_scale * alpha * c_k * step_span ** 2 / eps ** 2))
            budget = m * oracle.cost_factor
            used = gen_model.samples_used - start_samples
            if self.max_samples is not None and used + S * A * budget > self.max_samples:
                break
            est = oracle.estimate(rows, np.stack([h, h_prev]), budget, rng)  # common samples for both
            T_hat = T_hat + (est[0] - est[1]).reshape(S, A)
            variance_proxy += step_span ** 2 / (4 * m)
            margin = math.sqrt(2 * alpha * variance_proxy)
            residual = float(span(T_hat - Q))
            for key, value in zip(history, (m, residual, margin, gen_model.samples_used - start_samples)):
                history[key].append(value)
            if residual + 2 * margin <= eps:
                converged = True
                break
            h_prev = h

        self.Q_, self.policy_ = Q, Q.argmax(1)
        self.samples_used_ = int(gen_model.samples_used - start_samples)
        self.span_residual_ = history["residual"][-1] if history["residual"] else math.inf
        self.margin_ = history["margin"][-1] if history["margin"] else math.inf
        self.operator_estimate_ = T_hat  # the estimate of T(Q_) that the residual and the stop used
        self.gain_estimate_ = float(0.5 * ((T_hat - Q).max() + (T_hat - Q).min()))
        self.n_iter_, self.converged_ = len(history["residual"]), converged
        self.history_ = {key: np.array(value) for key, value in history.items()}
        return self
