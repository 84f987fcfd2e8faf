"""Sample complexity of a selector: the smallest sample size at which it reaches a target accuracy.

"Fast and Optimal Algorithms for Private Hypothesis Selection" (ICML 2026) claims *near-optimal rates*:
the number of samples a private selector needs to output an ``alpha``-accurate hypothesis, about
``log n / alpha^2 + log n / (alpha epsilon)`` (Bun, Kamath, Steinke & Wu, arXiv 1905.13229), as a
function of the class size ``n``. :func:`sample_complexity` measures that number for one selector on
one class, so that two selectors' rates can be compared across ``n``: a method with the optimal rate up to
a constant keeps ``s*(method) / s*(optimal-rate reference)`` bounded and flat in ``n``.

Definition (ours; the paper's text was not available): ``s*`` is the smallest ``s`` on the grid
``s_min 2^(j / steps_per_doubling)`` (``j = 0, 1, ...``, rounded to ints) at which the median over
``runs`` runs of ``TV(H_hat, P)`` is at most ``alpha``. Each run has its own truth, its own sample stream
and its own selector noise, all drawn from ``seed``; the runs keep them across ``s`` (the first ``s``
draws of one stream, the same ``random_state``), so the median is a smooth function of ``s`` and the
search below sees common random numbers.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from sklearn.base import clone

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.dp_select.covers import tv
from icml26.training.dp_select.selection import HypothesisClass, _Selector, as_class, check_hypotheses
from icml26.validation import check_finite, check_int

__all__ = ["SampleComplexity", "sample_complexity"]


@dataclass
class SampleComplexity:
    """What :func:`sample_complexity` measured.

    ``s_star``: the smallest grid size whose median TV is at most ``alpha`` (``math.inf`` when ``s_max``
    is not enough); ``medians``: the median TV at every size the search evaluated (``{s: median}``);
    ``alpha``, ``runs``: as asked; ``n_fits``: selector fits spent.
    """

    s_star: float
    alpha: float
    runs: int
    medians: dict[int, float] = field(default_factory=dict)
    n_fits: int = 0

    @property
    def reached(self) -> bool:
        """Whether some size up to ``s_max`` reached ``alpha``."""
        return math.isfinite(self.s_star)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _grid(s_min: int, s_max: int, steps: int) -> np.ndarray:
    """``round(s_min 2^(j / steps))`` for ``j = 0, 1, ...`` up to ``s_max`` (index ``steps`` apart: one doubling)."""
    top = math.floor(steps * math.log2(s_max / s_min) + 1e-9)
    return np.round(s_min * 2.0 ** (np.arange(top + 1) / steps)).astype(np.int64)


def _truths(function: str, truths: Any, cover: HypothesisClass, runs: int, rng: np.random.Generator) -> np.ndarray:
    """One pmf per run: members drawn uniformly (``None``), the members named by an int array, or given pmfs."""
    if truths is None:
        return cover.pmfs[rng.integers(cover.n, size=runs)]
    arr = np.asarray(truths)
    if arr.ndim == 1 and arr.dtype.kind in "iu":
        if arr.size != runs or arr.min() < 0 or arr.max() >= cover.n:
            raise input_error(function, "truths", f"{runs} member indices in [0, {cover.n}) (one per run)",
                              describe(arr))
        return cover.pmfs[arr]
    if arr.ndim != 2 or arr.shape != (runs, cover.D):
        raise input_error(function, "truths", f"None, {runs} member indices or a ({runs}, {cover.D}) array of pmfs",
                          describe(arr))
    return check_hypotheses(function, arr, "truths")


def sample_complexity(selector: Any, cover: Any, alpha: float, *, truths: Any = None, runs: int = 30,
                      s_min: int = 16, s_max: int = 2 ** 20, steps_per_doubling: int = 4,
                      seed: Any = None) -> SampleComplexity:
    """``s*``: the smallest grid sample size at which ``selector``'s median ``TV(H_hat, P)`` is ``<= alpha``.

    The rate of a hypothesis selector, measured (ICML 2026, "Fast and Optimal Algorithms for Private
    Hypothesis Selection": near-optimal rates in nearly-linear time; module docstring for the definition).

    Search: sizes ``s_min, 2 s_min, 4 s_min, ...`` (every ``steps_per_doubling``-th grid point) until one
    reaches ``alpha``, then bisection on the grid between it and the last size that did not. Bisection
    assumes the median decreases in ``s``; the common random numbers across sizes make it nearly so, and
    every size evaluated is reported in ``medians``.

    Args:
        selector: an unfitted selector of :mod:`icml26.training.dp_select` (``PrivateMDE(0.1)``, ...); each
            run fits a clone whose ``random_state`` (when it has one) is drawn from ``seed``.
        cover: the class, a :class:`HypothesisClass` (precomputed masses are reused) or an ``(n, D)`` array
            of pmfs.
        alpha: the target TV accuracy, in ``(0, 1)``.
        truths: ``None`` (each run's truth ``P`` is a member drawn uniformly), a vector of ``runs`` member
            indices, or a ``(runs, D)`` array of pmfs (agnostic truths).
        runs: runs per size (the median's sample).
        s_min: the grid's first size.
        s_max: the largest size tried; ``s_star`` is ``inf`` when no size up to it reaches ``alpha``.
        steps_per_doubling: grid points per doubling of ``s`` (4: the ``2^(1/4)`` grid).
        seed: seeds the truths, the sample streams and the selectors' noise (``None``, an int >= 0 or a
            numpy Generator).

    Returns:
        A :class:`SampleComplexity`.
    """
    f = "sample_complexity"
    if not isinstance(selector, _Selector):
        raise InputTypeError(f, "selector", "a selector of icml26.training.dp_select (PrivateMDE(...), ...)",
                             described(type(selector).__name__))
    cover = as_class(f, cover, "cover")
    alpha = check_finite(f, "alpha", alpha, low=0, high=1, low_open=True, high_open=True)
    runs = check_int(f, "runs", runs, low=1)
    s_min = check_int(f, "s_min", s_min, low=1)
    s_max = check_int(f, "s_max", s_max, low=s_min)
    steps = check_int(f, "steps_per_doubling", steps_per_doubling, low=1)
    if not (seed is None or isinstance(seed, np.random.Generator)
            or (isinstance(seed, (int, np.integer)) and not isinstance(seed, bool) and seed >= 0)):
        raise input_error(f, "seed", "None, an int >= 0 or a numpy Generator", seed)
    selector._check()  # a bad selector parameter is refused before any run
    rng = np.random.default_rng(seed)
    P = _truths(f, truths, cover, runs, rng)
    cdfs = np.cumsum(P, axis=1)
    cdfs[:, -1] = 1.0
    stream_seeds = rng.integers(2 ** 63, size=runs)
    noise_seeds = rng.integers(2 ** 32, size=runs)
    has_state = "random_state" in selector.get_params()
    fits = [clone(selector).set_params(random_state=int(noise_seeds[r])) if has_state else clone(selector)
            for r in range(runs)]
    result = SampleComplexity(math.inf, alpha, runs)

    def median_tv(s: int) -> float:
        if s not in result.medians:
            values = np.empty(runs)
            for r in range(runs):
                # the first s uniforms of run r's stream: samples nested across sizes
                u = np.random.default_rng(stream_seeds[r]).random(s)
                x = np.minimum(np.searchsorted(cdfs[r], u, side="right"), cover.D - 1)
                values[r] = tv(cover.pmfs[fits[r].fit(cover, x).index_], P[r])
            result.medians[s] = float(np.median(values))
            result.n_fits += runs
        return result.medians[s]

    grid = _grid(s_min, s_max, steps)
    lo, hi = -1, None  # grid indices: lo fails (or is before the grid), hi reaches alpha
    for j in [*range(0, grid.size, steps), grid.size - 1]:
        if median_tv(int(grid[j])) <= alpha:
            hi = j
            break
        lo = j
    if hi is None:
        return result
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if median_tv(int(grid[mid])) <= alpha:
            hi = mid
        else:
            lo = mid
    result.s_star = float(grid[hi])
    return result
