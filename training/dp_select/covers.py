"""Hypothesis classes and truths for private selection: discretised Gaussians, Dirichlet histograms, TV.

The covers of the universal-estimation application of "Fast and Optimal Algorithms for Private
Hypothesis Selection" (ICML 2026). Reconstruction: the paper's covers were not available; a 1-D
``(mu, log sigma)`` grid of discretised Gaussians is the one chosen here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml26.errors import describe, input_error
from icml26.training.dp_select.selection import check_hypotheses
from icml26.validation import check_finite, check_int

__all__ = ["agnostic_truth", "dirichlet_class", "gaussian_cover", "sample", "tv"]


# ----------------------------------------------------------------------------------------------
def gaussian_cover(n: int, *, bins: int = 200, low: float = -10.0, high: float = 10.0, mean_low: float = -5.0,
                   mean_high: float = 5.0, sigma: float = 1.0, n_sigmas: int = 1,
                   sigma_range: tuple[float, float] = (0.5, 2.0)) -> np.ndarray:
    """Discretised Gaussians ``N(mu, sigma^2)`` on ``bins`` equal bins of ``[low, high]`` (mass renormalised).

    ``n`` means evenly spaced in ``[mean_low, mean_high]``; with ``n_sigmas > 1`` each mean is paired with
    ``n_sigmas`` scales log-spaced in ``sigma_range`` (a ``(mu, log sigma)`` grid, ``n * n_sigmas`` rows),
    the 1-D cover of the universal-estimation application (reconstruction: the cover is our choice).
    """
    from scipy.stats import norm

    f = "gaussian_cover"
    n = check_int(f, "n", n, low=1)
    bins = check_int(f, "bins", bins, low=1)
    n_sigmas = check_int(f, "n_sigmas", n_sigmas, low=1)
    low = check_finite(f, "low", low)
    high = check_finite(f, "high", high, low=low, low_open=True)
    mean_low = check_finite(f, "mean_low", mean_low)
    mean_high = check_finite(f, "mean_high", mean_high, low=mean_low)
    if n_sigmas > 1:
        sigma_range = _interval(f, "sigma_range", sigma_range, positive=True)
    edges = np.linspace(low, high, bins + 1)
    means = np.linspace(mean_low, mean_high, n) if n > 1 else np.array([(mean_low + mean_high) / 2])
    sigmas = (np.array([check_finite("gaussian_cover", "sigma", sigma, positive=True)]) if n_sigmas == 1 else
              np.exp(np.linspace(np.log(sigma_range[0]), np.log(sigma_range[1]), n_sigmas)))
    mu, sd = np.repeat(means, sigmas.size), np.tile(sigmas, means.size)
    cdf = norm.cdf((edges[None, :] - mu[:, None]) / sd[:, None])
    H = np.diff(cdf, axis=1)
    return H / H.sum(axis=1, keepdims=True)


def _interval(function: str, argument: str, value: Any, positive: bool = False) -> tuple[float, float]:
    """A pair ``(a, b)`` of finite numbers with ``a < b`` (and ``a > 0`` when ``positive``)."""
    expected = f"a pair (a, b) of finite numbers with {'0 < ' if positive else ''}a < b"
    try:
        a, b = (float(v) for v in value)
    except (TypeError, ValueError):
        raise input_error(function, argument, expected, value) from None
    if not (np.isfinite(a) and np.isfinite(b) and a < b and (a > 0 or not positive)):
        raise input_error(function, argument, expected, value)
    return a, b


def dirichlet_class(n: int, D: int, *, alpha: float = 1.0, seed: int | None = None) -> np.ndarray:
    """``n`` random histograms on ``D`` points, i.i.d. ``Dirichlet(alpha 1_D)``."""
    n, D = check_int("dirichlet_class", "n", n, low=1), check_int("dirichlet_class", "D", D, low=1)
    alpha = check_finite("dirichlet_class", "alpha", alpha, positive=True)
    return np.random.default_rng(seed).dirichlet(np.full(D, alpha), size=n)


def agnostic_truth(H: Any, index: int, *, weight: float = 0.8, scale: float = 1.0, bins_range: tuple[float, float] = (-10.0, 10.0)) -> np.ndarray:
    """``weight H[index] + (1 - weight) Laplace``: the Laplace discretised on ``H``'s bins of ``bins_range``.

    The Laplace is centred at ``H[index]``'s mean (in the bins' coordinates) with scale ``scale``.
    """
    H = check_hypotheses("agnostic_truth", H)
    bins_range = _interval("agnostic_truth", "bins_range", bins_range)
    if isinstance(index, bool) or not isinstance(index, (int, np.integer)) or not 0 <= index < H.shape[0]:
        raise input_error("agnostic_truth", "index", f"an int in [0, {H.shape[0]})", index)
    weight = check_finite("agnostic_truth", "weight", weight)
    if not 0 <= weight <= 1:
        raise input_error("agnostic_truth", "weight", "a number in [0, 1]", weight)
    from scipy.stats import laplace

    D = H.shape[1]
    edges = np.linspace(bins_range[0], bins_range[1], D + 1)
    centres = (edges[:-1] + edges[1:]) / 2
    mean = float(H[index] @ centres)
    noise = np.diff(laplace.cdf(edges, loc=mean, scale=check_finite("agnostic_truth", "scale", scale, positive=True)))
    noise /= noise.sum()
    return weight * H[index] + (1 - weight) * noise


def tv(p: Any, q: Any) -> np.ndarray:
    """Total variation ``0.5 sum |p - q|`` along the last axis (broadcasts: ``tv(H, P)`` gives every row's)."""
    p, q = np.asarray(p, dtype=np.float64), np.asarray(q, dtype=np.float64)
    if p.ndim == 0 or q.ndim == 0 or p.shape[-1] != q.shape[-1]:
        raise input_error("tv", "q", f"pmfs over the same {p.shape[-1] if p.ndim else '?'} points as p (the last axis)",
                          describe(q))
    try:
        return 0.5 * np.abs(p - q).sum(axis=-1)
    except ValueError:
        raise input_error("tv", "q", f"an array that broadcasts against p's shape {p.shape}", describe(q)) from None


def sample(P: Any, s: int, seed: Any = None) -> np.ndarray:
    """``s`` i.i.d. draws from the pmf ``P`` (ints in ``[0, D)``)."""
    P = np.asarray(P, dtype=np.float64) if not isinstance(P, (str, bytes)) else P
    if getattr(P, "ndim", 0) != 1:
        raise input_error("sample", "P", "a pmf: a 1-D array of probabilities", describe(P))
    P = check_hypotheses("sample", P[None, :], "P")[0]
    return np.random.default_rng(seed).choice(P.size, size=check_int("sample", "s", s, low=1), p=P)
