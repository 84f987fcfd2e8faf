"""Universal horizon models and nu-Bellman targets ("Offline Reinforcement Learning with Universal
Horizon Models", Chung, Lee and Oh, arXiv 2605.15603, ICML 2026).

A universal horizon model (UHM) ``m^pi(x | s, a, n)`` is the distribution of the state exactly ``n``
steps after ``(s, a)`` under ``pi``: ``m(.|s,a,1) = P(.|s,a)`` and
``m(.|s,a,n+1) = E_{s'~P(.|s,a), a'~pi(.|s')} m(.|s',a',n)``. The value side is the paper's
nu-Bellman operator (Prop. C.1): for a sub-probability measure ``nu`` on ``{1, 2, ...}``,

    T^nu Q(s,a) = R(s,a) + gamma sum_k ( xi(k) E[R(s_k,a_k)] + nu(k) E[Q(s_k,a_k)] ),
    xi(k) = gamma^(k-1) - sum_{kappa=0}^{k-1} gamma^kappa nu(k - kappa),

whose fixed point is ``Q^pi``; its one-sample estimate draws ``n ~ p_H``, ``s_e ~ m(.|s,a,n)``,
``a_e ~ pi(.|s_e)`` and returns ``G = r + gamma (w_xi(n) R(s_e,a_e) + w_nu(n) Q(s_e,a_e))`` with
``w_xi = xi / p_H``, ``w_nu = nu / p_H`` (:func:`nu_target`). One model call per target, whatever
the horizon.

This module holds the weights (:class:`HorizonWeights` and its four constructors), the exact tabular
operator and target moments, the one-sample target, and the tabular horizon models
(:class:`TabularUHM`, :class:`TabularGHM`). The critic targets and the tabular critic live in
:mod:`icml26.training.uhm.targets`, the TD-flow loss and the ReBRAC-style actor-critic in
:mod:`icml26.training.uhm.actor_critic`; their public names are importable from here too.

Reconstruction: the winsorized ``p_H`` and ``nu`` (:func:`winsorized`) are derived, not quoted: the
project page shows the weights ``w_xi = lambda / (1 - lambda gamma)``, ``w_nu = (1 - lambda) /
(1 - lambda gamma)`` below ``k_max`` and ``(0, 1)`` at ``k_max``; the ``nu`` and ``p_H`` here are the
ones that give exactly those weights (checked in the tests). Defaults ``gamma = 0.99``,
``lambda = 0.95``, ``k_max = 50`` are ours (the paper's were not visible).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from icml26.errors import described, input_error
from icml26.training.uhm.data import check_policy, transition_arrays
from icml26.validation import check_finite, check_generator, check_int

__all__ = ["HorizonWeights", "winsorized", "td_lambda", "n_step", "geometric", "xi_from_nu", "nu_bellman_operator",
           "target_moments", "nu_target", "TabularUHM", "TabularGHM"]

#: Where an infinite ``nu`` (``geometric``) is cut for the arrays it shows: the first ``k`` whose tail
#: mass ``(lambda gamma)^k`` is below this. The operator and the exact moments never use the cut:
#: they sum the geometric tail in closed form (a resolvent).
TAIL_TOL = 1e-16


def xi_from_nu(nu: np.ndarray, gamma: float) -> np.ndarray:
    """``xi^nu(k) = gamma^(k-1) - sum_{kappa<k} gamma^kappa nu(k - kappa)`` for k = 1..len(nu) (Prop. C.1)."""
    nu = np.asarray(nu, dtype=float)
    K = len(nu)
    g = gamma ** np.arange(K)
    return np.array([g[k - 1] - sum(g[kappa] * nu[k - kappa - 1] for kappa in range(k)) for k in range(1, K + 1)])


@dataclass(frozen=True)
class HorizonWeights:
    """A horizon measure ``nu``, its reward weights ``xi^nu``, a proposal ``p_H`` and the ratios.

    Arrays are indexed by ``n - 1`` for horizons ``n = 1..k_max``. A finite ``nu`` must be
    *complete*, ``sum_k gamma^(1-k) nu(k) = 1``: then ``xi^nu`` vanishes beyond ``k_max`` and a
    target never needs a horizon past it (every constructor here is). ``k_max=None`` marks the
    uncapped geometric measure (:func:`geometric`); its arrays are cut at :data:`TAIL_TOL` for display
    only, and ``ratio`` is its ``lambda gamma``.
    ``p_H`` must be positive wherever ``nu`` or ``xi^nu`` is nonzero (an :class:`InputError` says so).
    """

    name: str
    gamma: float
    nu: np.ndarray
    xi: np.ndarray
    p: np.ndarray
    k_max: int | None
    lam: float | None = None
    ratio: float | None = None
    w_xi: np.ndarray = field(init=False, repr=False)
    w_nu: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        fn = f"HorizonWeights({self.name})"
        nu, xi, p = (np.asarray(x, dtype=float) for x in (self.nu, self.xi, self.p))
        if nu.ndim != 1 or nu.shape != xi.shape or nu.shape != p.shape or len(nu) == 0:
            raise input_error(fn, "nu, xi, p", "three 1-d arrays of one length >= 1",
                              f"shapes {nu.shape}, {xi.shape}, {p.shape}")
        if np.any(nu < 0) or nu.sum() > 1 + 1e-12:
            raise input_error(fn, "nu", "a sub-probability measure (nu >= 0, sum <= 1)", f"sum {nu.sum():.6g}")
        if np.any(p < 0) or abs(p.sum() - 1) > 1e-9 and self.k_max is not None:
            raise input_error(fn, "p_H", "a probability vector", f"sum {p.sum():.6g}")
        need = (np.abs(nu) > 1e-15) | (np.abs(xi) > 1e-15)
        if np.any(need & (p <= 0)):
            bad = (np.flatnonzero(need & (p <= 0)) + 1).tolist()
            raise input_error(fn, "p_H", "p_H(n) > 0 wherever nu(n) or xi^nu(n) is nonzero",
                              f"p_H = 0 at n = {bad[:5]}")
        if self.k_max is not None:
            complete = float(np.sum(self.gamma ** (1.0 - np.arange(1, len(nu) + 1)) * nu))
            if abs(complete - 1) > 1e-9:
                raise input_error(fn, "nu", "sum_k gamma^(1-k) nu(k) = 1 (xi^nu zero beyond k_max)",
                                  f"{complete:.9g}")
        for name, value in (("nu", nu), ("xi", xi), ("p", p)):
            value.setflags(write=False)
            object.__setattr__(self, name, value)
        safe = np.where(p > 0, p, 1.0)
        object.__setattr__(self, "w_xi", np.where(p > 0, xi / safe, 0.0))
        object.__setattr__(self, "w_nu", np.where(p > 0, nu / safe, 0.0))

    @property
    def support(self) -> int:
        """The largest horizon the arrays hold (``k_max``, or the display cut of a geometric measure)."""
        return len(self.nu)

    def check_horizons(self, n, function: str = "HorizonWeights") -> np.ndarray:
        n = np.asarray(n)
        if not np.issubdtype(n.dtype, np.integer):
            raise input_error(function, "n", "integer horizons", n.dtype)
        hi = self.k_max if self.k_max is not None else np.inf
        if n.size and (n.min() < 1 or n.max() > hi):
            raise input_error(function, "n", f"horizons in 1..{self.k_max or 'inf'}",
                              described(f"values in [{n.min()}, {n.max()}]"))
        return n

    def weights(self, n) -> tuple[np.ndarray, np.ndarray]:
        """``(w_xi(n), w_nu(n))`` for integer horizons ``n`` (any shape)."""
        n = self.check_horizons(n, "HorizonWeights.weights")
        if self.k_max is None:  # geometric: constant ratios at every n
            lam = self.lam
            shape = np.shape(n)
            return (np.full(shape, lam / (1 - self.ratio)), np.full(shape, (1 - lam) / (1 - self.ratio)))
        return self.w_xi[n - 1], self.w_nu[n - 1]

    def sample(self, size, rng: np.random.Generator) -> np.ndarray:
        """Horizons ``n ~ p_H`` (``Geom(1 - lambda gamma)`` without a cap for the geometric measure)."""
        if self.k_max is None:
            return rng.geometric(1 - self.ratio, size=size).astype(np.int64)
        return rng.choice(np.arange(1, self.k_max + 1), size=size, p=self.p).astype(np.int64)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "gamma": self.gamma, "lam": self.lam, "k_max": self.k_max,
                "nu": self.nu.tolist(), "xi": self.xi.tolist(), "p_H": self.p.tolist()}


def winsorized(gamma: float = 0.99, lam: float = 0.95, k_max: int = 50) -> HorizonWeights:
    """UHM's winsorized geometric weights (the paper's weights; ``nu`` and ``p_H`` derived by us).

    ``nu(k) = (1 - lam)(lam gamma)^(k-1)`` for ``k < k_max`` and ``nu(k_max) = (lam gamma)^(k_max-1)``:
    the TD(lambda) measure with its tail mass lumped at ``k_max``, which is the lambda-return truncated
    at ``k_max``. ``p_H`` is ``n = min(Geom(1 - lam gamma), k_max)``. Then ``xi(k) = gamma^(k-1) lam^k``
    below ``k_max``, ``xi(k_max) = 0``, and the ratios are constant below ``k_max``:
    ``w_xi = lam / (1 - lam gamma)``, ``w_nu = (1 - lam) / (1 - lam gamma)``, and ``(0, 1)`` at ``k_max``.
    """
    gamma = check_finite("winsorized", "gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    lam = check_finite("winsorized", "lam", lam, low=0, high=1)
    k_max = check_int("winsorized", "k_max", k_max, low=1)
    beta = lam * gamma
    k = np.arange(1, k_max + 1)
    nu = (1 - lam) * beta ** (k - 1)
    p = (1 - beta) * beta ** (k - 1)
    nu[-1], p[-1] = beta ** (k_max - 1), beta ** (k_max - 1)
    return HorizonWeights("winsorized", gamma, nu, xi_from_nu(nu, gamma), p, k_max, lam=lam, ratio=beta)


def td_lambda(gamma: float = 0.99, lam: float = 0.95, k_max: int = 50) -> HorizonWeights:
    """The lambda-return truncated at ``k_max`` with a uniform proposal.

    Its ``nu`` and ``xi`` are :func:`winsorized`'s (the truncated lambda-return is exactly that
    measure); what differs is ``p_H``: uniform on ``1..k_max``. Trace-based targets
    (:class:`~icml26.training.uhm.targets.DatasetTDLambda`, ``RolloutTDLambda``) sum over every ``k``
    and never sample from it; as a one-sample proposal its ratios vary with ``n`` (``w_xi(1) =
    k_max lam``), where the winsorized proposal makes them constant.
    """
    gamma = check_finite("td_lambda", "gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    lam = check_finite("td_lambda", "lam", lam, low=0, high=1)
    k_max = check_int("td_lambda", "k_max", k_max, low=1)
    base = winsorized(gamma, lam, k_max)
    return HorizonWeights("td_lambda", gamma, base.nu, base.xi, np.full(k_max, 1.0 / k_max), k_max, lam=lam,
                          ratio=lam * gamma)


def n_step(n: int, gamma: float = 0.99) -> HorizonWeights:
    """n-step TD: ``nu(k) = gamma^(n-1) 1[k = n]``, ``xi(k) = gamma^(k-1)`` for ``k < n``; ``p_H`` uniform
    on ``1..n`` (``n = 1`` is 1-step TD)."""
    gamma = check_finite("n_step", "gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    n = check_int("n_step", "n", n, low=1)
    nu = np.zeros(n)
    nu[-1] = gamma ** (n - 1)
    return HorizonWeights(f"{n}-step", gamma, nu, xi_from_nu(nu, gamma), np.full(n, 1.0 / n), n)


def geometric(gamma: float = 0.99, lam: float = 0.95) -> HorizonWeights:
    """The uncapped geometric measure of the GHM target: ``nu(k) = (1 - lam)(lam gamma)^(k-1)``,
    ``p_H = Geom(1 - lam gamma)`` on every ``k >= 1``, constant ratios.

    "GHM" here is a geometric horizon over ``Geom(1 - lam gamma)``, the same ``lam gamma`` as the
    winsorized target but without the cap, not the gamma-model's ``Geom(1 - gamma)``.
    """
    gamma = check_finite("geometric", "gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    lam = check_finite("geometric", "lam", lam, low=0, high=1, high_open=True)
    beta = lam * gamma
    K = max(1, int(math.ceil(math.log(TAIL_TOL) / math.log(beta)))) if beta > 0 else 1
    k = np.arange(1, K + 1)
    nu = (1 - lam) * beta ** (k - 1)
    xi = gamma ** (k - 1) * lam ** k
    p = (1 - beta) * beta ** (k - 1)
    return HorizonWeights("geometric", gamma, nu, xi, p, None, lam=lam, ratio=beta)


# ----------------------------------------------------------------------------------------------
# exact tabular operator and target moments
# ----------------------------------------------------------------------------------------------
def _tabular(function: str, Q, P, r, policy):
    Q, P, r, policy = (np.asarray(x, dtype=float) for x in (Q, P, r, policy))
    if P.ndim != 3 or P.shape[0] != P.shape[2]:
        raise input_error(function, "P", "transition probabilities of shape (S, A, S)", P.shape)
    S, A, _ = P.shape
    for name, value in (("Q", Q), ("r", r), ("policy", policy)):
        if value.shape != (S, A):
            raise input_error(function, name, f"an array of shape ({S}, {A})", value.shape)
    return Q, P, r, policy


def nu_bellman_operator(Q, P, r, policy, weights: HorizonWeights, gamma: float | None = None) -> np.ndarray:
    """``T^nu Q`` exactly for a tabular MDP (``P[s, a, s']``, ``r[s, a]``, ``policy[s, a]``; Prop. C.1).

    A finite ``nu`` sums ``k = 1..k_max`` with ``P_pi^k``; the uncapped geometric measure uses the
    resolvent, ``sum_k beta^(k-1) M^k = M (I - beta M)^-1`` with ``M = P Pi`` over (s, a), so nothing is
    truncated. ``gamma`` defaults to ``weights.gamma`` and must equal it.
    """
    Q, P, r, policy = _tabular("nu_bellman_operator", Q, P, r, policy)
    gamma = weights.gamma if gamma is None else check_finite("nu_bellman_operator", "gamma", gamma, low=0, high=1,
                                                             low_open=True, high_open=True)
    if abs(gamma - weights.gamma) > 1e-15:
        raise input_error("nu_bellman_operator", "gamma", f"the weights' gamma {weights.gamma}", gamma)
    S, A, _ = P.shape
    q_pi = (policy * Q).sum(1)
    r_pi = (policy * r).sum(1)
    if weights.k_max is None:
        beta, lam = weights.ratio, weights.lam
        kernel = np.einsum("sa,sax->sx", policy, P)  # state -> next state under pi
        # sum_k beta^(k-1) P_pi^k f = P (I - beta K)^-1 f over states
        resolvent = np.linalg.solve(np.eye(S) - beta * kernel, np.stack([r_pi, q_pi], 1))
        expect = P @ resolvent
        return r + gamma * (lam * expect[..., 0] + (1 - lam) * expect[..., 1])
    kernel = np.einsum("sa,sax->sx", policy, P)
    out = r.copy()
    d_r, d_q = P @ r_pi, P @ q_pi  # E[R_pi(s_k)], E[Q_pi(s_k)] at k = 1
    vr, vq = r_pi, q_pi
    for k in range(1, weights.k_max + 1):
        if k > 1:
            vr, vq = kernel @ vr, kernel @ vq
            d_r, d_q = P @ vr, P @ vq
        out = out + gamma * (weights.xi[k - 1] * d_r + weights.nu[k - 1] * d_q)
    return out


def target_moments(Q, P, r, policy, weights: HorizonWeights, states=None, actions=None) -> dict[str, np.ndarray]:
    """Exact mean and variance of the one-sample target ``G^nu`` at ``(states, actions)`` (default: all).

    ``n ~ p_H``, ``s_e ~ P_pi^n(.|s,a)`` under the *true* ``P``, ``a_e ~ pi(.|s_e)``; the reward at the
    start is ``r(s, a)``. The geometric measure's infinite sum is a resolvent (its ratios are the same at
    every ``n``). Returns ``mean`` and ``var`` arrays over the pairs.
    """
    Q, P, r, policy = _tabular("target_moments", Q, P, r, policy)
    S, A, _ = P.shape
    if states is None:
        states, actions = np.repeat(np.arange(S), A), np.tile(np.arange(A), S)
    states, actions = np.asarray(states), np.asarray(actions)
    gamma = weights.gamma
    kernel = np.einsum("sa,sax->sx", policy, P)
    r0 = r[states, actions][:, None]

    def per_state(w_xi, w_nu):  # E_a[G | s_e] and E_a[G^2 | s_e] as functions of s_e, per pair
        g = r0[:, :, None] + gamma * (w_xi * r + w_nu * Q)[None]  # [B, S, A]
        return (policy[None] * g).sum(-1), (policy[None] * g ** 2).sum(-1)

    d = P[states, actions]  # [B, S] distribution of s_1
    m1 = np.zeros(len(states))
    m2 = np.zeros(len(states))
    if weights.k_max is None:
        w_xi, w_nu = weights.weights(np.array([1]))
        e1, e2 = per_state(w_xi[0], w_nu[0])
        mix = (1 - weights.ratio) * np.linalg.solve((np.eye(S) - weights.ratio * kernel).T, d.T).T
        m1, m2 = (mix * e1).sum(1), (mix * e2).sum(1)
    else:
        # horizons with the same ratios share one E_a[G | s_e]: accumulate p_H-weighted distributions per group
        groups: dict[tuple[float, float], np.ndarray] = {}
        for n in range(1, weights.k_max + 1):
            if n > 1:
                d = d @ kernel
            if weights.p[n - 1] > 0:
                key = (float(weights.w_xi[n - 1]), float(weights.w_nu[n - 1]))
                groups[key] = groups.get(key, 0.0) + weights.p[n - 1] * d
        for (w_xi, w_nu), mix in groups.items():
            e1, e2 = per_state(w_xi, w_nu)
            m1 += (mix * e1).sum(1)
            m2 += (mix * e2).sum(1)
    return {"mean": m1, "var": np.maximum(m2 - m1 ** 2, 0.0)}


def nu_target(r, reward_e, q_e, n, weights: HorizonWeights, gamma: float | None = None):
    """The one-sample nu-target ``G = r + gamma (w_xi(n) R(s_e, a_e) + w_nu(n) Q(s_e, a_e))``.

    ``r``, ``reward_e``, ``q_e`` and ``n`` are arrays (numpy or torch) of one shape; ``n`` the sampled
    horizons (integers in ``1..k_max``). Works on torch tensors too (weights moved to their device).
    """
    gamma = weights.gamma if gamma is None else check_finite("nu_target", "gamma", gamma, low=0, high=1,
                                                             low_open=True, high_open=True)
    shapes = {name: tuple(getattr(x, "shape", np.shape(x))) for name, x in
              (("r", r), ("reward_e", reward_e), ("q_e", q_e), ("n", n))}
    if len(set(shapes.values())) != 1:
        raise input_error("nu_target", "r, reward_e, q_e, n", "arrays of one shape", shapes)
    if hasattr(n, "detach"):  # torch
        import torch

        w_xi, w_nu = weights.weights(n.detach().cpu().numpy().astype(np.int64))
        w_xi = torch.as_tensor(w_xi, dtype=q_e.dtype, device=q_e.device)
        w_nu = torch.as_tensor(w_nu, dtype=q_e.dtype, device=q_e.device)
    else:
        w_xi, w_nu = weights.weights(np.asarray(n))
    return r + gamma * (w_xi * reward_e + w_nu * q_e)


# ----------------------------------------------------------------------------------------------
# tabular horizon models
# ----------------------------------------------------------------------------------------------
def _transitions(function: str, transitions: dict, n_states: int, n_actions: int):
    """The empirical next-state distribution ``P_hat[s, a, s']`` of checked tabular transitions and the
    covered mask; an ``(s, a)`` the data never shows is modelled as staying put (no invented transitions)."""
    s, a, s2 = transition_arrays(function, transitions, n_states, n_actions)
    counts = np.zeros((n_states, n_actions, n_states))
    np.add.at(counts, (s, a, s2), 1.0)
    covered = counts.sum(-1) > 0
    P_hat = np.where(covered[..., None], counts / np.maximum(counts.sum(-1, keepdims=True), 1), 0.0)
    idx = np.argwhere(~covered)
    P_hat[idx[:, 0], idx[:, 1], idx[:, 0]] = 1.0
    return P_hat, covered


def _fit_arguments(function: str, policy, n_states, n_actions) -> tuple[np.ndarray, int, int]:
    """The checked ``policy`` (rows are distributions) and the table sizes ``S``, ``A`` (default: its shape)."""
    S = None if n_states is None else check_int(function, "n_states", n_states, low=1)
    A = None if n_actions is None else check_int(function, "n_actions", n_actions, low=1)
    policy = check_policy(function, policy, S, A)
    return policy, policy.shape[0], policy.shape[1]


def _query(function: str, fitted, table: str, **arrays) -> list[np.ndarray]:
    """Integer arrays of one shape: states in ``[0, S)``, actions in ``[0, A)`` of the fitted ``table``
    (``[..., S, A, S]``); horizons are checked by the caller."""
    check_is_fitted(fitted, table)
    S, A = getattr(fitted, table).shape[-3:-1]
    out = [np.asarray(v) for v in arrays.values()]
    if len({x.shape for x in out}) != 1:
        raise input_error(function, ", ".join(arrays), "arrays of one shape",
                          {k: tuple(x.shape) for k, x in zip(arrays, out)})
    highs = {"states": S, "actions": A, "horizons": None}
    for (name, x) in zip(arrays, out):
        if x.size and not np.issubdtype(x.dtype, np.integer):
            raise input_error(function, name, "integer arrays", described(f"dtype {x.dtype}"))
        hi = highs[name]
        if hi is not None and x.size and (x.min() < 0 or x.max() >= hi):
            raise input_error(function, name, f"integers in [0, {hi - 1}]", described(f"values in [{x.min()}, {x.max()}]"))
    return out


class _CategoricalSampler:
    """Inverse-CDF sampling from rows of a probability table, counting model calls."""

    calls = 0

    def _draw(self, cdf_rows: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(cdf_rows.shape[0])
        self.calls += cdf_rows.shape[0]
        return np.minimum((cdf_rows < u[:, None]).sum(1), cdf_rows.shape[1] - 1)


class TabularUHM(_CategoricalSampler, BaseEstimator):
    """A tabular universal horizon model ``M[n, s, a, :]`` for ``n = 1..k_max``, learned by the recursion.

    ``fit(transitions, policy)``: ``M[1]`` is the empirical next-state distribution of the data,
    ``M[n] = E_{s' ~ data(s, a)} sum_{a'} pi(a'|s') M[n-1, s', a']`` (the bootstrapped recursion over
    dataset transitions, here in closed form through the counts). It sees only dataset transitions and
    the policy, never the true ``P``. Uncovered ``(s, a)`` stay put. ``sample(states, actions, horizons,
    rng)`` draws ``s_e``; ``calls`` counts the draws (one model call per target).

    A scikit-learn estimator (``BaseEstimator``: ``get_params``/``set_params``, ``sklearn.base.clone``); as
    scikit-learn's, the constructor only stores ``k_max`` and :meth:`fit` validates it. Not an ``(X, y)``
    estimator (it fits transitions under a policy), so ``check_estimator`` does not apply.

    Args:
        k_max: the largest horizon modelled (an int >= 1).
    """

    def __init__(self, k_max: int = 50) -> None:
        self.k_max = k_max

    def fit(self, transitions: dict, policy, n_states: int | None = None, n_actions: int | None = None) -> TabularUHM:
        """Fit ``M`` from ``transitions`` (a dict of 1-d integer arrays ``observations``, ``actions``,
        ``next_observations``) under ``policy`` (``[S, A]`` action probabilities, rows summing to 1);
        ``n_states`` / ``n_actions`` default to the policy's shape. Returns ``self``."""
        k_max = check_int("TabularUHM", "k_max", self.k_max, low=1)
        policy, S, A = _fit_arguments("TabularUHM.fit", policy, n_states, n_actions)
        P_hat, covered = _transitions("TabularUHM.fit", transitions, S, A)
        M = np.empty((k_max, S, A, S))
        M[0] = P_hat
        for n in range(1, k_max):  # bootstrap from the data's s': M[n] = P_hat (sum_a' pi M[n-1])
            M[n] = P_hat @ np.einsum("sa,sax->sx", policy, M[n - 1])
        self.M_, self.covered_ = M, covered
        self._cdf = np.cumsum(M, axis=-1)
        self.n_states_, self.n_actions_ = S, A
        return self

    def distribution(self, n: int) -> np.ndarray:
        """``M[n]`` as ``[S, A, S]``."""
        check_is_fitted(self, "M_")
        n = check_int("TabularUHM.distribution", "n", n, low=1, high=self.M_.shape[0])
        return self.M_[n - 1]

    def sample(self, states, actions, horizons, rng: np.random.Generator) -> np.ndarray:
        """Draw ``s_e ~ M[n](. | s, a)`` for integer arrays of one shape; ``rng`` a ``numpy.random.Generator``."""
        states, actions, horizons = _query("TabularUHM.sample", self, "M_", states=states, actions=actions,
                                           horizons=horizons)
        k_max = self.M_.shape[0]
        if horizons.size and (horizons.min() < 1 or horizons.max() > k_max):
            raise input_error("TabularUHM.sample", "horizons", f"integers in 1..{k_max}",
                              described(f"values in [{horizons.min()}, {horizons.max()}]"))
        return self._draw(self._cdf[horizons - 1, states, actions], check_generator("TabularUHM.sample", "rng", rng))


class TabularGHM(_CategoricalSampler, BaseEstimator):
    """A tabular geometric horizon model: ``G(.|s,a) = sum_n (1 - beta) beta^(n-1) P_pi^n(.|s,a)``.

    Fitted from dataset transitions by its own fixed point ``G = (1 - beta) P_hat + beta P_hat Pi G``
    (solved exactly): one call draws ``s_e`` at an uncapped ``n ~ Geom(1 - beta)`` without knowing ``n``.
    With ``beta = lambda gamma`` this is the model of the GHM target (:func:`geometric`).

    A scikit-learn estimator as :class:`TabularUHM` (``beta`` validated in :meth:`fit`; ``check_estimator``
    does not apply: not an ``(X, y)`` estimator).

    Args:
        beta: the geometric ratio, a number in ``[0, 1)``.
    """

    def __init__(self, beta: float = 0.9405) -> None:
        self.beta = beta

    def fit(self, transitions: dict, policy, n_states: int | None = None, n_actions: int | None = None) -> TabularGHM:
        """Fit ``G`` as :meth:`TabularUHM.fit` fits ``M``. Returns ``self``."""
        beta = check_finite("TabularGHM", "beta", self.beta, low=0, high=1, high_open=True)
        policy, S, A = _fit_arguments("TabularGHM.fit", policy, n_states, n_actions)
        P_hat, self.covered_ = _transitions("TabularGHM.fit", transitions, S, A)
        kernel = np.einsum("sa,sax->sx", policy, P_hat)
        # G = (1 - beta) P_hat (I - beta K)^-1 over next states
        self.G_ = (1 - beta) * P_hat @ np.linalg.inv(np.eye(S) - beta * kernel)
        self._cdf = np.cumsum(self.G_, axis=-1)
        self.n_states_, self.n_actions_ = S, A
        return self

    def sample(self, states, actions, rng: np.random.Generator) -> np.ndarray:
        """Draw ``s_e ~ G(. | s, a)`` for integer arrays of one shape."""
        states, actions = _query("TabularGHM.sample", self, "G_", states=states, actions=actions)
        return self._draw(self._cdf[states, actions], check_generator("TabularGHM.sample", "rng", rng))

