"""Exact ground truth on a tabular model (``P[s, a, s']``, ``R[s, a]``): ``Q*``, ``Q^pi`` and the horizon
distributions ``P_pi^n`` the UHM experiments measure learned models against (Universal Horizon Models,
ICML 2026). Importable from :mod:`icml26.eval.tasks.uhm` too."""

from __future__ import annotations

from typing import Any

import numpy as np

from icml26.training.uhm.data import check_model, check_policy
from icml26.validation import check_finite, check_int

__all__ = ["horizon_distributions", "policy_q", "value_iteration"]


def _check_gamma(function: str, gamma: Any) -> float:
    return check_finite(function, "gamma", gamma, low=0, high=1, low_open=True, high_open=True)


def value_iteration(P, R, gamma: float, tol: float = 1e-10, max_iter: int = 100_000) -> np.ndarray:
    """``Q*`` by value iteration (``P[s, a, s']``, ``R[s, a]``)."""
    P, R = check_model("value_iteration", P, R)
    gamma = _check_gamma("value_iteration", gamma)
    tol = check_finite("value_iteration", "tol", tol, positive=True)
    max_iter = check_int("value_iteration", "max_iter", max_iter, low=1)
    Q = np.zeros_like(R, dtype=float)
    for _ in range(max_iter):
        Q_new = R + gamma * P @ Q.max(axis=1)
        if np.max(np.abs(Q_new - Q)) < tol:
            return Q_new
        Q = Q_new
    return Q


def policy_q(P, R, policy, gamma: float) -> np.ndarray:
    """``Q^pi`` by one linear solve: ``(I - gamma P Pi) q = r`` over (s, a) pairs."""
    P, R = check_model("policy_q", P, R)
    gamma = _check_gamma("policy_q", gamma)
    S, A = R.shape
    policy = check_policy("policy_q", policy, S, A)
    M = (P.reshape(S * A, S)[:, :, None] * policy[None]).reshape(S * A, S * A)
    return np.linalg.solve(np.eye(S * A) - gamma * M, R.reshape(-1)).reshape(S, A)


def horizon_distributions(P, policy, k_max: int) -> np.ndarray:
    """``P_pi^n(x | s, a)`` for n = 1..k_max as an array ``[k_max, S, A, S]`` (index n - 1)."""
    P, _ = check_model("horizon_distributions", P)
    k_max = check_int("horizon_distributions", "k_max", k_max, low=1)
    S, A, _ = P.shape
    policy = check_policy("horizon_distributions", policy, S, A)
    state_kernel = np.einsum("sa,sax->sx", policy, P)
    out = np.empty((k_max, S, A, S))
    out[0] = P
    for n in range(1, k_max):
        out[n] = out[n - 1] @ state_kernel
    return out
