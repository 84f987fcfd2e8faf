"""Problems for private hypothesis selection: covers, realizable and agnostic truths, the audit instance.

The classes and truths are those of the experiment ``dp_select`` (ICML 2026, "Fast and Optimal
Algorithms for Private Hypothesis Selection"; the paper has no experiments, these are ours):

- ``"gaussian"``: ``n`` discretised ``N(mu, 1)`` on 200 bins of ``[-10, 10]``, means evenly spaced in
  ``[-5, 5]`` (:func:`icml26.training.dp_select.selection.gaussian_cover`);
- ``"dirichlet"``: ``n`` random ``Dirichlet(1)`` histograms on 50 points;
- truth ``"realizable"``: ``P = H_i``; ``"agnostic"``: ``0.8 H_i + 0.2`` a discretised Laplace centred
  at ``H_i``'s mean with scale 1 (:func:`icml26.training.dp_select.selection.agnostic_truth`); ``i`` is
  drawn uniformly from the middle 80% of the class (away from the grid's ends).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml26.errors import input_error
from icml26.training.dp_select import (
    HypothesisClass,
    agnostic_truth,
    check_hypotheses,
    dirichlet_class,
    gaussian_cover,
    sample,
    tv,
)
from icml26.validation import check_int

FAMILIES = ("gaussian", "dirichlet")
TRUTHS = ("realizable", "agnostic")
DIRICHLET_D = 50


def make_class(family: str, n: int, seed: int = 0, *, precompute: bool = False) -> HypothesisClass:
    """The hypothesis class ``family`` with ``n`` members (``seed`` draws the Dirichlet histograms)."""
    n = check_int("make_class", "n", n, low=1)
    if family == "gaussian":
        H = gaussian_cover(n)
    elif family == "dirichlet":
        H = dirichlet_class(n, DIRICHLET_D, seed=seed)
    else:
        raise input_error("make_class", "family", f"one of {FAMILIES}", family)
    return HypothesisClass(H, precompute=precompute)


@dataclass
class Problem:
    """A truth ``P`` for one class: the member ``index`` it is built on, ``opt = min_i TV(H_i, P)``, samples."""

    P: np.ndarray
    index: int
    opt: float
    samples: np.ndarray

    def tv_of(self, cover: HypothesisClass, i: int) -> float:
        return float(tv(cover.pmfs[i], self.P))


def draw_problem(cover: HypothesisClass, truth: str, s: int, seed) -> Problem:
    """A truth of kind ``truth`` on ``cover`` (a :class:`HypothesisClass` or an ``(n, D)`` array of pmfs) and
    ``s`` samples from it, all drawn from ``seed``."""
    if truth not in TRUTHS:
        raise input_error("draw_problem", "truth", f"one of {TRUTHS}", truth)
    if not isinstance(cover, HypothesisClass):
        cover = HypothesisClass(check_hypotheses("draw_problem", cover, "cover"))
    s = check_int("draw_problem", "s", s, low=1)
    rng = np.random.default_rng(seed)
    n = cover.n
    i = int(rng.integers(n // 10, n - n // 10)) if n >= 10 else int(rng.integers(n))
    P = cover.pmfs[i] if truth == "realizable" else agnostic_truth(cover.pmfs, i)
    return Problem(P, i, float(tv(cover.pmfs, P).min()), sample(P, s, seed=rng))


def audit_instance(seed: int = 0, n: int = 6, D: int = 5, s: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """The small instance of the exact-DP tests and the audit: ``n`` Dirichlet histograms on ``D`` points,
    ``s`` samples from the first."""
    H = dirichlet_class(n, D, seed=seed)
    return H, sample(H[0], s, seed=np.random.SeedSequence((seed, 1)))
