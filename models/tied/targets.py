"""The analytic targets of TIED's sampler study on SO(n) (Inverting Data Transformations via Diffusion
Sampling, ICML 2026): the marginal law of ``X11`` under the symmetric ``exp(10 X11^2)`` and the two-mode
``w e^{b X11} + (1 - w) e^{-b X11}`` targets (Haar base measure), Haar draws, and ``E|X11|``. numpy, scipy
and torch are imported inside the functions: the experiment registry imports this module."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["MODE_SHARPNESS", "MODE_WEIGHT", "analytic_mean_abs_x11", "cdf_on_grid", "haar_so", "two_mode_log_density",
           "two_mode_marginal", "x11_marginal"]

#: The asymmetric SO(3) target ``log(w e^{b x} + (1 - w) e^{-b x})``, ``x = X11``: weight ``w`` of the X11 > 0 mode
#: and sharpness ``b``. Decided before measuring: a barrier of ``e^{-b}`` that no local sampler crosses.
MODE_WEIGHT, MODE_SHARPNESS = 0.8, 20.0


def cdf_on_grid(x, dens):
    """A density on the grid ``x`` normalised, and its cumulative distribution (trapezoid rule)."""
    import numpy as np

    cdf = np.concatenate([[0.0], np.cumsum((dens[1:] + dens[:-1]) / 2 * np.diff(x))])
    total = cdf[-1]
    return cdf / total, dens / total


def x11_marginal(n: int, grid: int = 20001):
    """``(x, cdf, density)`` of ``X11`` under ``exp(10 X11^2)`` on ``SO(n)`` with the Haar base measure."""
    import numpy as np

    x = np.linspace(-1, 1, grid)
    dens = np.exp(10 * x ** 2) * np.clip(1 - x ** 2, 0, None) ** ((n - 3) / 2)
    cdf, dens = cdf_on_grid(x, dens)
    return x, cdf, dens


def two_mode_marginal(n: int, weight: float = MODE_WEIGHT, sharpness: float = MODE_SHARPNESS, grid: int = 40001):
    """``(x, cdf, density)`` of ``X11`` under ``w e^{b X11} + (1 - w) e^{-b X11}`` on ``SO(n)`` (Haar base measure:
    ``X11`` has density ``(1 - x^2)^{(n-3)/2}``, uniform for ``n = 3``)."""
    import numpy as np

    x = np.linspace(-1, 1, grid)
    log = np.logaddexp(np.log(weight) + sharpness * x, np.log1p(-weight) - sharpness * x) - sharpness
    dens = np.exp(log) * np.clip(1 - x ** 2, 0, None) ** ((n - 3) / 2)
    cdf, dens = cdf_on_grid(x, dens)
    return x, cdf, dens


def two_mode_log_density(weight: float = MODE_WEIGHT, sharpness: float = MODE_SHARPNESS):
    """``g -> log(w e^{b g11} + (1 - w) e^{-b g11})`` on batches of elements ``(..., n, n)``."""
    import torch

    lw, lv = math.log(weight), math.log1p(-weight)
    return lambda g: torch.logaddexp(lw + sharpness * g[..., 0, 0], lv - sharpness * g[..., 0, 0])


def haar_so(n: int, draws: int, generator) -> Any:
    """``draws`` Haar-distributed elements of ``SO(n)`` (float64): the QR factor of a Gaussian matrix with the
    signs of ``R``'s diagonal moved into ``Q`` (Mezzadri 2007), then one column flipped where ``det = -1``."""
    import torch

    A = torch.randn(draws, n, n, generator=generator, dtype=torch.float64)
    Q, R = torch.linalg.qr(A)
    Q = Q * torch.sign(torch.diagonal(R, dim1=1, dim2=2))[:, None, :]
    flip = torch.linalg.det(Q) < 0
    Q[flip, :, 0] = -Q[flip, :, 0]
    return Q


def analytic_mean_abs_x11(n: int) -> float:
    """``E|X11|`` under ``exp(10 X11^2)`` on ``SO(n)`` (Haar base measure), by quadrature."""
    import numpy as np
    from scipy.integrate import quad

    w = lambda x: np.exp(10 * x ** 2) * (1 - x ** 2) ** ((n - 3) / 2)  # noqa: E731
    return quad(lambda x: x * w(x), 0, 1)[0] / quad(w, 0, 1)[0]
