"""The exponential mechanism for private selection: its exact law, Gumbel-max, OpenDP, and the lazy sampler.

``P(i) ∝ exp(epsilon u_i / (2 Delta))`` for scores ``u`` of sensitivity ``Delta`` is ``epsilon``-DP (McSherry &
Talwar 2007). Gumbel-max samples it exactly in real arithmetic: ``argmax_i u_i epsilon / (2 Delta) + G_i``
with ``G_i`` i.i.d. standard Gumbel; :func:`lazy_exponential_mechanism` returns that same argmax while
computing only the scores it needs. See :mod:`icml26.training.dp_select.selection` for the side channels.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.validation import check_finite, check_int

__all__ = ["BACKENDS", "em_probabilities", "exponential_mechanism", "gumbel_max_draws", "lazy_exponential_mechanism"]

BACKENDS = ("numpy", "opendp")


def _epsilon(function: str, value: Any) -> float:
    return check_finite(function, "epsilon", value, positive=True)


def _scores(function: str, scores: Any, argument: str = "scores") -> np.ndarray:
    try:
        scores = np.asarray(scores, dtype=np.float64)
    except (TypeError, ValueError):
        raise input_error(function, argument, "a non-empty finite 1-D array", describe(scores)) from None
    if scores.ndim != 1 or scores.size == 0 or not np.isfinite(scores).all():
        raise input_error(function, argument, "a non-empty finite 1-D array", describe(scores))
    return scores


def _gumbel(function: str, gumbel: Any, n: int) -> np.ndarray:
    gumbel = np.asarray(gumbel, dtype=np.float64)
    if gumbel.shape != (n,) or not np.isfinite(gumbel).all():
        raise input_error(function, "gumbel", f"a finite vector of {n} standard Gumbel draws (one per score)",
                          describe(gumbel))
    return gumbel


def _backend(function: str, value: Any) -> str:
    if value not in BACKENDS:
        raise input_error(function, "backend", f"one of {BACKENDS}", value)
    return value


# ----------------------------------------------------------------------------------------------
def em_probabilities(scores: Any, epsilon: float, sensitivity: float = 1.0) -> np.ndarray:
    """The exponential mechanism's exact law ``softmax(epsilon scores / (2 sensitivity))``."""
    scores = _scores("em_probabilities", scores)
    epsilon = _epsilon("em_probabilities", epsilon)
    sensitivity = check_finite("em_probabilities", "sensitivity", sensitivity, positive=True)
    z = scores * (epsilon / (2 * sensitivity))
    z = np.exp(z - z.max())
    return z / z.sum()


def exponential_mechanism(scores: Any, epsilon: float, sensitivity: float = 1.0, *, rng: Any = None,
                          gumbel: np.ndarray | None = None, backend: str = "numpy") -> int:
    """One draw of ``P(i) ∝ exp(epsilon scores_i / (2 sensitivity))``, as Gumbel-max.

    ``gumbel``: the standard Gumbel vector to use (common noise for tests); else drawn from ``rng``.
    ``backend="opendp"``: OpenDP's ``make_noisy_max`` (``opendp.measurements``, OpenDP 0.16: input
    ``vector_domain(atom_domain(T=float))`` under ``linf_distance``, output measure ``max_divergence()``,
    ``scale = 2 sensitivity / epsilon``): exact sampling from OpenDP's own generator (``rng`` is unused)
    with exponential noise, i.e. report-noisy-max with the permute-and-flip law, ``epsilon``-DP like the
    softmax it replaces but not equal to it in law.
    """
    scores = _scores("exponential_mechanism", scores)
    epsilon = _epsilon("exponential_mechanism", epsilon)
    sensitivity = check_finite("exponential_mechanism", "sensitivity", sensitivity, positive=True)
    if _backend("exponential_mechanism", backend) == "opendp":
        return _opendp_noisy_max(scores, epsilon, sensitivity)
    if gumbel is None:
        gumbel = np.random.default_rng(rng).gumbel(size=scores.size)
    gumbel = _gumbel("exponential_mechanism", gumbel, scores.size)
    return int(np.argmax(scores * (epsilon / (2 * sensitivity)) + gumbel))


def _opendp_noisy_max(scores: np.ndarray, epsilon: float, sensitivity: float) -> int:
    return int(_opendp_measurement(2 * sensitivity / epsilon, float(sensitivity), epsilon)([float(x) for x in scores]))


@functools.lru_cache(maxsize=64)
def _opendp_measurement(scale: float, sensitivity: float, epsilon: float):
    """OpenDP's noisy max at ``scale`` (built once per scale: a measurement holds no data)."""
    try:
        import opendp.prelude as dp
    except ImportError:
        raise ImportError("backend='opendp' needs OpenDP: pip install 'icml26[dp]'") from None
    dp.enable_features("contrib")
    measurement = dp.m.make_noisy_max(dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                                      dp.linf_distance(T=float), dp.max_divergence(), scale=scale)
    spent = measurement.map(sensitivity)
    if spent > epsilon * (1 + 1e-9):  # OpenDP's map is the authority on what the call spends
        raise RuntimeError(f"OpenDP's privacy map gives {spent} > epsilon = {epsilon} at scale {scale}")
    return measurement


def lazy_exponential_mechanism(upper: np.ndarray, exact, epsilon: float, gumbel: np.ndarray,
                               sensitivity: float = 1.0, *, batch: int = 1) -> tuple[int, int]:
    """Gumbel-max with scores computed only where needed; returns ``(index, number of exact scores)``.

    ``upper[i] >= u_i`` bounds every score from above; ``exact(indices)`` returns the exact ``u`` of
    those indices. Candidates are visited in decreasing ``upper * epsilon / (2 sensitivity) + G``; the
    search stops when that key cannot beat the best exact noisy score found. The index equals
    ``argmax(u * epsilon / (2 sensitivity) + gumbel)``: the same law as the full mechanism, whatever the
    bound was computed from (only the running time depends on it). ``batch`` candidates are scored per
    call of ``exact`` (vectorisation; it may score a few more than strictly needed).
    """
    function = "lazy_exponential_mechanism"
    upper = _scores(function, upper, "upper")
    if not callable(exact):
        raise InputTypeError(function, "exact", "a callable returning the exact scores of the indices it is given",
                             described(type(exact).__name__))
    epsilon = _epsilon(function, epsilon)
    gumbel = _gumbel(function, gumbel, upper.size)
    sensitivity = check_finite(function, "sensitivity", sensitivity, positive=True)
    batch = check_int(function, "batch", batch, low=1)
    scale = epsilon / (2 * sensitivity)
    key = upper * scale + gumbel
    order = np.argsort(-key, kind="stable")
    best, best_value, visited, pos = -1, -np.inf, 0, 0
    while pos < order.size and key[order[pos]] > best_value:
        take = order[pos:pos + batch]
        take = take[key[take] > best_value]
        values = np.asarray(exact(take), dtype=np.float64) * scale + gumbel[take]
        visited += take.size
        top = int(np.argmax(values))
        if values[top] > best_value:
            best, best_value = int(take[top]), float(values[top])
        pos += batch
    return best, visited


def gumbel_max_draws(logits: np.ndarray, n_draws: int, rng: np.random.Generator, chunk: int = 1 << 20) -> np.ndarray:
    """``n_draws`` i.i.d. draws of ``softmax(logits)`` by Gumbel-max, vectorised in chunks of ``chunk`` numbers."""
    logits = _scores("gumbel_max_draws", logits, "logits")
    n_draws = check_int("gumbel_max_draws", "n_draws", n_draws, low=1)
    if not isinstance(rng, np.random.Generator):
        raise InputTypeError("gumbel_max_draws", "rng", "a numpy Generator (numpy.random.default_rng(seed))",
                             described(type(rng).__name__))
    chunk = check_int("gumbel_max_draws", "chunk", chunk, low=1)
    per = max(1, chunk // logits.size)
    out = np.empty(n_draws, dtype=np.int64)
    for start in range(0, n_draws, per):
        m = min(per, n_draws - start)
        out[start:start + m] = np.argmax(logits + rng.gumbel(size=(m, logits.size)), axis=1)
    return out


