"""Problems for private hypothesis selection: covers, realizable and agnostic truths, the audit instance.

The classes and truths are those of the experiment ``dp_select`` (ICML 2026, "Fast and Optimal
Algorithms for Private Hypothesis Selection"; the paper has no experiments, these are ours):

- ``"gaussian"``: ``n`` discretised ``N(mu, 1)`` on 200 bins of ``[-10, 10]``, means evenly spaced in
  ``[-5, 5]`` (:func:`icml26.training.dp_select.selection.gaussian_cover`);
- ``"dirichlet"``: ``n`` random ``Dirichlet(1)`` histograms on 50 points;
- truth ``"realizable"``: ``P = H_i``; ``"agnostic"``: ``0.8 H_i + 0.2`` a discretised Laplace centred
  at ``H_i``'s mean with scale 1 (:func:`icml26.training.dp_select.selection.agnostic_truth`); ``i`` is
  drawn uniformly from the middle 80% of the class (away from the grid's ends).

The rate study (:func:`rate_instance`) adds a third class, ``"narrow location"``: ``N(mu, 0.1^2)`` on 400
bins of ``[-6, 6]``, means evenly spaced in ``[-5, 5]``, with the truth among the first 5% of the means. A
random opponent there is a Scheffé witness only for hypotheses within a few ``sigma`` of it, so the
hypotheses near the truth (at one end of the grid) have few witnesses among random opponents: the class on
which StrongSetEM's strong set has to do the work.
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
#: The classes of the rate study and the TV accuracy ``alpha`` each is measured at.
RATE_CLASSES = {"dirichlet": 0.05, "gaussian": 0.1, "narrow location": 0.1}
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


def rate_instance(name: str, n: int, runs: int, seed: int = 0) -> tuple[HypothesisClass, np.ndarray, float]:
    """The rate study's class ``name`` (a key of :data:`RATE_CLASSES`) with ``n`` members, ``runs`` truths
    (member indices) and its ``alpha``: ``(cover, truths, alpha)``, all drawn from ``seed``.

    ``"dirichlet"``: Dirichlet(1) histograms on 50 points, truths uniform; ``"gaussian"``: the ``N(mu, 1)``
    cover, truths uniform in the middle 80% of the means; ``"narrow location"``: ``N(mu, 0.1^2)`` on 400 bins
    of ``[-6, 6]``, truths among the first ``max(1, n // 20)`` means. The masses are precomputed for
    ``n <= 2048`` (``O(n^2)`` memory).
    """
    if name not in RATE_CLASSES:
        raise input_error("rate_instance", "name", f"one of {tuple(RATE_CLASSES)}", name)
    n = check_int("rate_instance", "n", n, low=1)
    runs = check_int("rate_instance", "runs", runs, low=1)
    class_seed, truth_seed = np.random.SeedSequence(seed).spawn(2)
    rng = np.random.default_rng(truth_seed)
    if name == "dirichlet":
        H, truths = dirichlet_class(n, DIRICHLET_D, seed=np.random.default_rng(class_seed)), rng.integers(n, size=runs)
    elif name == "gaussian":
        H = gaussian_cover(n)
        truths = rng.integers(n // 10, n - n // 10, size=runs) if n >= 10 else rng.integers(n, size=runs)
    else:
        H, truths = gaussian_cover(n, bins=400, low=-6.0, high=6.0, sigma=0.1), rng.integers(max(1, n // 20), size=runs)
    return HypothesisClass(H, precompute=n <= 2048), truths, RATE_CLASSES[name]
