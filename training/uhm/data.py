"""Checked tabular inputs of the UHM learners and mazes, and the policies derived from a table ``Q``
(arXiv 2605.15603): numpy only, shared by :mod:`icml26.eval.tasks.uhm` (which re-exports them) and the
tabular learners of :mod:`icml26.training.uhm`.

A policy is an ``[S, A]`` array whose rows are probability vectors; transitions are a dict of 1-d integer
arrays ``observations``, ``actions``, ``next_observations``; ``P[s, a, s']`` has probability rows. Anything
else raises :class:`~icml26.errors.InputError` naming the argument, before any work.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml26.errors import InputTypeError, described, input_error
from icml26.errors import describe as describe_value

__all__ = ["ROW_TOL", "check_layout", "check_model", "check_policy", "check_position", "check_q", "greedy_policy", "transition_arrays",
           "uniform_tie_policy"]

#: How far a row of a policy or of ``P`` may sum from 1 (or an entry fall below 0): float32 tables (a model's
#: softmax over ~100 cells) miss 1 by ~1e-7; a user's mistake (rows summing to 2) misses it by far more.
ROW_TOL = 1e-5


def check_policy(function: str, policy: Any, S: int | None = None, A: int | None = None) -> np.ndarray:
    """``policy`` as a float array ``[S, A]`` whose rows are probability vectors (non-negative, summing to 1
    within :data:`ROW_TOL`), else an :class:`~icml26.errors.InputError` naming the first bad row. ``S`` / ``A`` of
    ``None`` accept any size."""
    try:
        policy = np.asarray(policy, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(function, "policy", "an array of action probabilities", describe_value(policy)) from None
    want = f"({'S' if S is None else S}, {'A' if A is None else A})"
    if policy.ndim != 2 or (S is not None and policy.shape[0] != S) or (A is not None and policy.shape[1] != A) \
            or policy.size == 0:
        raise input_error(function, "policy", f"action probabilities of shape {want}", describe_value(policy))
    if not np.isfinite(policy).all():
        raise input_error(function, "policy", "finite action probabilities", described("NaN or infinite entries"))
    sums = policy.sum(-1)
    bad = np.flatnonzero((policy < -ROW_TOL).any(-1) | (np.abs(sums - 1) > ROW_TOL))
    if bad.size:
        row = int(bad[0])
        raise input_error(function, "policy", "rows that are probability vectors (entries >= 0, summing to 1)",
                          described(f"row {row} summing to {sums[row]:.6g} (min {policy[row].min():.6g}); "
                                    f"{bad.size} bad rows"))
    return policy


def check_model(function: str, P: Any, R: Any = None) -> tuple[np.ndarray, np.ndarray | None]:
    """``P[s, a, s']`` with rows that are distributions, and ``R[s, a]`` of the matching shape."""
    P = np.asarray(P, dtype=float)
    if P.ndim != 3 or P.shape[0] != P.shape[2] or P.size == 0:
        raise input_error(function, "P", "transition probabilities of shape (S, A, S)", describe_value(P))
    if not np.isfinite(P).all() or (P < -ROW_TOL).any() or (np.abs(P.sum(-1) - 1) > ROW_TOL).any():
        raise input_error(function, "P", "rows P[s, a] that are probability vectors", described("other rows"))
    if R is not None:
        R = np.asarray(R, dtype=float)
        if R.shape != P.shape[:2]:
            raise input_error(function, "R", f"rewards of shape {P.shape[:2]}", describe_value(R))
        if not np.isfinite(R).all():
            raise input_error(function, "R", "finite rewards", described("NaN or infinite entries"))
    return P, R


def transition_arrays(function: str, transitions: Any, n_states: int, n_actions: int,
                      argument: str = "transitions") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ``observations``, ``actions`` and ``next_observations`` of tabular ``transitions`` (a dict of
    arrays): 1-d integer arrays of one non-zero length, with states in ``[0, n_states)`` and actions in
    ``[0, n_actions)``, else an :class:`~icml26.errors.InputError` naming the key."""
    keys = ("observations", "actions", "next_observations")
    if not hasattr(transitions, "keys") or any(k not in transitions for k in keys):
        got = sorted(transitions.keys()) if hasattr(transitions, "keys") else described(type(transitions).__name__)
        raise input_error(function, argument, f"a dict with {', '.join(keys)}", got)
    arrays = [np.asarray(transitions[k]) for k in keys]
    for name, x in zip(keys, arrays):
        if x.ndim != 1 or x.shape != arrays[0].shape:
            raise input_error(function, f"{argument}['{name}']", "1-d arrays of one length",
                              described(", ".join(f"{k} {describe_value(v)}" for k, v in zip(keys, arrays))))
    if arrays[0].size == 0:
        raise input_error(function, argument, "at least one transition", described("empty arrays"))
    for name, x, hi in zip(keys, arrays, (n_states, n_actions, n_states)):
        if not np.issubdtype(x.dtype, np.integer) or x.min() < 0 or x.max() >= hi:
            got = describe_value(x) if not np.issubdtype(x.dtype, np.integer) else \
                described(f"values in [{x.min()}, {x.max()}]")
            raise input_error(function, f"{argument}['{name}']", f"integers in [0, {hi - 1}]", got)
    return arrays[0], arrays[1], arrays[2]


def check_q(function: str, Q: Any) -> np.ndarray:
    Q = np.asarray(Q, dtype=float)
    if Q.ndim != 2 or Q.size == 0 or not np.isfinite(Q).all():
        raise input_error(function, "Q", "finite action values of shape (S, A)", describe_value(Q))
    return Q


def greedy_policy(Q, seed: int | None = 0, atol: float = 1e-9) -> np.ndarray:
    """A deterministic greedy policy (one-hot rows); ties between actions broken at random (seeded)."""
    Q = check_q("greedy_policy", Q)
    rng = np.random.default_rng(seed)
    noise = rng.random(Q.shape)
    ties = Q >= Q.max(axis=1, keepdims=True) - atol
    pick = np.argmax(np.where(ties, noise, -1.0), axis=1)
    return np.eye(Q.shape[1])[pick]


def uniform_tie_policy(Q, atol: float = 1e-9) -> np.ndarray:
    """The greedy policy that spreads its mass uniformly over tied actions (uniform where Q is flat)."""
    Q = check_q("uniform_tie_policy", Q)
    ties = (Q >= Q.max(axis=1, keepdims=True) - atol).astype(float)
    return ties / ties.sum(axis=1, keepdims=True)


def check_layout(function: str, layout: Any) -> np.ndarray:
    """A user's cell map: a 2-d boolean array (True = free) whose free cells (at least 2) are connected."""
    array = np.asarray(layout) if not isinstance(layout, (str, bytes)) else None
    if array is None or array.dtype != bool or array.ndim != 2:
        raise input_error(function, "layout", "a 2-d boolean array (True = free cell)",
                          describe_value(layout) if array is None or array.ndim else layout)
    free = np.argwhere(array)
    if len(free) < 2:
        raise input_error(function, "layout", "at least 2 free cells", described(f"{len(free)} free cells"))
    from scipy.ndimage import label

    regions = label(array)[1]  # 4-neighbour connected components (the default cross structure)
    if regions > 1:
        raise input_error(function, "layout", "free cells that are all connected (4-neighbour moves)",
                          described(f"{regions} separate regions of free cells"))
    return array.copy()


def check_position(function: str, argument: str, value: Any) -> np.ndarray:
    """A finite ``(row, col)`` pair as a float array of shape ``(2,)``."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(function, argument, "2 finite numbers (row, col)", describe_value(value)) from None
    if array.shape != (2,) or not np.isfinite(array).all():
        raise input_error(function, argument, "2 finite numbers (row, col)", describe_value(array))
    return array
