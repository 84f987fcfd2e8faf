"""Private hypothesis selection: Scheffé tables, minimum-distance selection and the exponential mechanism.

Paper: "Fast and Optimal Algorithms for Private Hypothesis Selection" (ICML 2026). Given ``n`` candidate
distributions ``H_1..H_n`` (an ``(n, D)`` array of pmfs on ``{0..D-1}``) and ``s`` samples of an unknown
``P``, output, under pure ``epsilon``-differential privacy (neighbours: one sample replaced), an ``H_i``
with ``TV(H_i, P) <= alpha * OPT + small``, ``OPT = min_i TV(H_i, P)``.

Definitions (prior work, as published). The Scheffé set of a pair is ``A_ij = {x : H_i(x) > H_j(x)}``, so
``TV(H_i, H_j) = H_i(A_ij) - H_j(A_ij)``. ``P̂`` is the empirical measure and ``c_ij = s P̂(A_ij)`` the
number of samples in ``A_ij``. One *Scheffé evaluation* is one pair's ``(H_i(A_ij), H_j(A_ij), c_ij)``;
:func:`scheffe_table` computes them vectorised over pairs in chunks (memory ``O(chunk x D)``) and the
selectors report how many they used (``n_scheffe_evals_``). ``H_i(A_ij)`` does not depend on the data:
:class:`HypothesisClass` can precompute it once per cover, after which a table only reads the sample's
support.

Selectors (scikit-learn style: validated parameters, ``random_state``, ``fit(H, samples)`` returns
``self`` and sets ``index_``, ``n_scheffe_evals_`` and ``epsilon_``, the privacy spent;
``output_probabilities(H, samples)`` is the exact output law):

- :class:`MinimumDistanceEstimate` (non-private): the modified MDE of Mahalanabis & Štefankovič (2008),
  ``argmin_i W(H_i)``, ``W(H_i) = max_j |H_i(A_ij) - P̂(A_ij)|``; ``TV <= 3 OPT + 4 dev``.
- :class:`ScheffeTournament` (non-private): every pair plays a Scheffé test (Devroye & Lugosi 2001);
  the most wins is output.
- :class:`BKSWSelector`: Bun, Kamath, Steinke & Wu, "Private Hypothesis Selection" (NeurIPS 2019, arXiv
  1905.13229), exponential mechanism on the integer score ``S(H_i) = min_j Gamma(H_i, H_j)``.
- :class:`PrivateMDE`: the exponential mechanism on ``u_i = -s W(H_i)`` (Aden-Ali et al. 2021), exact
  (``lazy=False``, ``n (n - 1)`` evaluations) or lazy (same output law, usually near-linear cost).
- :class:`StrongSetEM` (in :mod:`icml26.training.dp_select.strong`): the paper's strong-set
  loss as reconstructed here (the paper's text was not available).

The noise lives in :mod:`icml26.training.dp_select.noise`, the classes and truths
(``gaussian_cover``, ``dirichlet_class``, ``agnostic_truth``, ``tv``, ``sample``) in
:mod:`icml26.training.dp_select.covers`, the privacy checks (``exact_privacy_loss``,
``audit_epsilon``) in :mod:`icml26.training.dp_select.audit`; all are importable from here.

Noise. The exponential mechanism ``P(i) ∝ exp(epsilon u_i / (2 Delta))`` with sensitivity ``Delta = 1`` is
run as Gumbel-max: ``argmax_i u_i epsilon / 2 + G_i`` with ``G_i`` i.i.d. standard Gumbel (numpy, the
default). ``backend="opendp"`` (extra ``dp``) hands the scores to OpenDP's ``make_noisy_max``
(``opendp.measurements``, OpenDP 0.16, output measure ``max_divergence()``, scale ``2 / epsilon``; its
privacy map is checked to give at most ``epsilon`` for ``d_in = 1``), which samples exactly instead of in
floating point. Under max-divergence OpenDP adds *exponential* noise (report-noisy-max with exponential
noise, whose law is permute-and-flip's, Ding et al. 2021): the same ``epsilon``, a law at least as
concentrated on the best scores, but not the softmax. ``output_probabilities``, ``draw`` and the audits
describe the numpy sampler. Side channels, documented rather than closed: numpy's sampler is floating
point (Ilvento 2019 attacks such samplers), OpenDP draws from its own generator (``random_state`` does
not seed it), and the lazy path's running time depends on the data (the number of candidates it visits).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.dp_select.noise import (
    _backend,
    _epsilon,
    em_probabilities,
    exponential_mechanism,
    gumbel_max_draws,
    lazy_exponential_mechanism,
)
from icml26.validation import check_finite, check_int

__all__ = ["BKSWSelector", "default_k", "mde_distances", "HypothesisClass", "MinimumDistanceEstimate", "PrivateMDE", "ScheffeTable",
    "ScheffeTournament", "check_hypotheses", "check_samples", "knockout_tournament", "scheffe_table"]

#: Pairs per chunk of a Scheffé table: memory is a few ``chunk x D`` float64 arrays.
CHUNK_PAIRS = 8192
#: Rows summing to 1 within this (pmfs read from text files are rounded).
SUM_ATOL = 1e-9


# ----------------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------------
def check_hypotheses(function: str, H: Any, argument: str = "H") -> np.ndarray:
    """``H`` as a float64 ``(n, D)`` array of pmfs (finite, non-negative rows summing to 1), else InputError
    naming ``argument``."""
    if isinstance(H, HypothesisClass):
        return H.pmfs
    try:
        arr = np.asarray(H, dtype=np.float64)
    except (TypeError, ValueError):
        raise input_error(function, argument, "an (n, D) array of pmfs", described(type(H).__name__)) from None
    if arr.ndim != 2 or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise input_error(function, argument, "an (n, D) array of pmfs with n >= 1 and D >= 1", describe(arr))
    if not np.isfinite(arr).all():
        raise input_error(function, argument, "finite probabilities", described("an array with NaN or inf"))
    if (arr < 0).any():
        i, x = np.argwhere(arr < 0)[0]
        raise input_error(function, argument, "non-negative rows (pmfs)", described(f"H[{i}, {x}] = {arr[i, x]:g}"))
    sums = arr.sum(axis=1)
    bad = np.flatnonzero(np.abs(sums - 1) > SUM_ATOL * max(1, arr.shape[1]))
    if bad.size:
        raise input_error(function, argument, "rows summing to 1", described(f"row {bad[0]} sums to {sums[bad[0]]:.12g}"))
    return arr


def check_samples(function: str, samples: Any, D: int) -> np.ndarray:
    """``samples`` as a non-empty int64 vector of domain points in ``[0, D)``, else InputError."""
    arr = np.asarray(samples)
    if arr.ndim != 1 or arr.size == 0:
        raise input_error(function, "samples", "a non-empty 1-D array of ints in [0, D)", describe(arr))
    if arr.dtype.kind == "f":
        if not np.isfinite(arr).all() or (arr != np.round(arr)).any():
            raise input_error(function, "samples", "integer domain points", described("non-integer values"))
    elif arr.dtype.kind not in "iu":
        raise input_error(function, "samples", "integer domain points", describe(arr))
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= D:
        bad = arr[(arr < 0) | (arr >= D)][0]
        raise input_error(function, "samples", f"domain points in [0, {D})", described(f"a sample equal to {bad}"))
    return arr


def _random_state(function: str, value: Any) -> Any:
    if value is None or isinstance(value, np.random.Generator):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise input_error(function, "random_state", "None, an int >= 0 or a numpy Generator", value)
    return int(value)


# ----------------------------------------------------------------------------------------------
# Scheffé tables
# ----------------------------------------------------------------------------------------------
class HypothesisClass:
    """A validated ``(n, D)`` array of pmfs, optionally with its data-free Scheffé masses precomputed.

    ``precompute()`` stores ``mass_i[i, j] = H_i(A_ij)`` and ``mass_j[i, j] = H_j(A_ij)`` for every pair
    (``O(n^2 D)`` time once, ``O(n^2)`` memory). Afterwards a Scheffé table needs only the sample's support
    columns, which is what repeated fits on one cover (experiments, audits) want; a single fit at large
    ``n`` should not precompute (the lazy selectors then stay near-linear).
    """

    def __init__(self, H: Any, *, precompute: bool = False) -> None:
        if not isinstance(precompute, (bool, np.bool_)):
            raise InputTypeError("HypothesisClass", "precompute", "a bool", described(type(precompute).__name__))
        self.pmfs = check_hypotheses("HypothesisClass", H)
        self.mass_i: np.ndarray | None = None
        self.mass_j: np.ndarray | None = None
        if precompute:
            self.precompute()

    @property
    def n(self) -> int:
        return self.pmfs.shape[0]

    @property
    def D(self) -> int:
        return self.pmfs.shape[1]

    def precompute(self, chunk: int = CHUNK_PAIRS) -> HypothesisClass:
        n = self.n
        self.mass_i = self.mass_j = None
        a, b, _ = _rows(self, np.zeros(self.D), np.arange(n), np.arange(n), chunk, with_b=True)
        self.mass_i, self.mass_j = a, b
        return self

    def __repr__(self) -> str:
        return f"HypothesisClass(n={self.n}, D={self.D}, precomputed={self.mass_i is not None})"


def as_class(function: str, H: Any, argument: str = "H") -> HypothesisClass:
    """``H`` itself when it is a :class:`HypothesisClass`, else one built from the checked array."""
    return H if isinstance(H, HypothesisClass) else HypothesisClass(check_hypotheses(function, H, argument))


def _histogram(function: str, counts: Any, D: int) -> np.ndarray:
    """A sample histogram: finite, non-negative, of shape ``(D,)``."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape != (D,) or not np.isfinite(counts).all() or (counts < 0).any():
        raise input_error(function, "counts", f"a finite non-negative histogram of shape ({D},)", describe(counts))
    return counts


def _generator(function: str, argument: str, rng: Any) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise InputTypeError(function, argument, "a numpy Generator (numpy.random.default_rng(seed))",
                             described(type(rng).__name__))
    return rng


@dataclass
class ScheffeTable:
    """One row per pair ``(i, j)``: ``h_i = H_i(A_ij)``, ``h_j = H_j(A_ij)``, ``counts = s P̂(A_ij)``."""

    i: np.ndarray
    j: np.ndarray
    h_i: np.ndarray
    h_j: np.ndarray
    counts: np.ndarray
    n_evals: int

    @property
    def tv(self) -> np.ndarray:
        """``TV(H_i, H_j) = H_i(A_ij) - H_j(A_ij)``."""
        return self.h_i - self.h_j


def _masses(pmfs: np.ndarray, I: np.ndarray, J: np.ndarray, counts: np.ndarray | None):
    """``H_i(A_ij)``, ``H_j(A_ij)`` and (when counts are given) the counts in ``A_ij`` for the pairs (I, J)."""
    Hi, Hj = pmfs[I], pmfs[J]
    mask = Hi > Hj
    a = np.where(mask, Hi, 0.0).sum(axis=1)
    b = np.where(mask, Hj, 0.0).sum(axis=1)
    c = None if counts is None else mask @ counts
    return a, b, c


def _pair_counts(cover: HypothesisClass, I: np.ndarray, J: np.ndarray, counts: np.ndarray):
    """Masses and counts of the pairs, from the cache (support columns only) when the class has one."""
    if cover.mass_i is not None:
        support = np.flatnonzero(counts)
        P = cover.pmfs[:, support]
        c = (P[I] > P[J]) @ counts[support]
        return cover.mass_i[I, J], cover.mass_j[I, J], c
    return _masses(cover.pmfs, I, J, counts)


def scheffe_table(H: Any, pairs: Any, counts: Any, *, chunk: int = CHUNK_PAIRS) -> ScheffeTable:
    """The Scheffé quantities of ``pairs`` (an ``(m, 2)`` int array) for the sample histogram ``counts``.

    ``counts[x]`` is the number of samples equal to ``x`` (``numpy.bincount(samples, minlength=D)``).
    Vectorised over ``chunk`` pairs at a time; ``n_evals = m``. ``H`` may be an array or a
    :class:`HypothesisClass` (precomputed masses are then read, not recomputed).
    """
    cover = as_class("scheffe_table", H)
    pairs = np.asarray(pairs)
    if pairs.ndim != 2 or pairs.shape[1] != 2 or pairs.dtype.kind not in "iu":
        raise input_error("scheffe_table", "pairs", "an (m, 2) int array", describe(pairs))
    if pairs.size and (pairs.min() < 0 or pairs.max() >= cover.n):
        raise input_error("scheffe_table", "pairs", f"indices in [0, {cover.n})", described("an index outside"))
    counts = _histogram("scheffe_table", counts, cover.D)
    chunk = check_int("scheffe_table", "chunk", chunk, low=1)
    m = pairs.shape[0]
    h_i, h_j, c = np.empty(m), np.empty(m), np.empty(m)
    for start in range(0, m, chunk):
        sl = slice(start, start + chunk)
        h_i[sl], h_j[sl], c[sl] = _pair_counts(cover, pairs[sl, 0], pairs[sl, 1], counts)
    return ScheffeTable(pairs[:, 0].copy(), pairs[:, 1].copy(), h_i, h_j, c, m)


def _rows(cover: HypothesisClass, counts: np.ndarray, rows: np.ndarray, cols: np.ndarray, chunk: int,
          with_b: bool = False):
    """``H_i(A_ij)``, ``H_j(A_ij)`` (when ``with_b``) and ``c_ij`` for ``i`` in ``rows``, ``j`` in ``cols``.

    Each array has shape ``(rows, cols)``. A block of rows is done at once: the masks ``H_i > H_j`` of the
    block, then one batched product with ``[H_i, counts]``; with precomputed masses only the sample's
    support columns are compared. Memory ``O(chunk x D)``.
    """
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    a = np.empty((rows.size, cols.size))
    c = np.empty_like(a)
    b = np.empty_like(a) if with_b else None
    cached = cover.mass_i is not None
    if cached:
        support = np.flatnonzero(counts)
        P, weights = cover.pmfs[:, support], counts[support]
    else:
        P, weights = cover.pmfs, counts
    Pc = P[cols]
    per = max(1, chunk // max(1, cols.size))
    for start in range(0, rows.size, per):
        r = rows[start:start + per]
        Pi = P[r]
        mask = Pi[:, None, :] > Pc[None, :, :]
        sl = slice(start, start + r.size)
        if cached:
            c[sl] = mask @ weights
            a[sl] = cover.mass_i[np.ix_(r, cols)]
            if with_b:
                b[sl] = cover.mass_j[np.ix_(r, cols)]
        else:
            both = np.matmul(mask.astype(np.float64), np.stack([Pi, np.broadcast_to(weights, Pi.shape)], axis=2))
            a[sl], c[sl] = both[..., 0], both[..., 1]
            if with_b:
                b[sl] = np.where(mask, Pc[None, :, :], 0.0).sum(axis=2)
    return a, b, c


def _deviations(cover: HypothesisClass, counts: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                chunk: int) -> np.ndarray:
    """``|s H_i(A_ij) - c_ij|`` for every ``i`` in ``rows`` and ``j`` in ``cols``, shape ``(rows, cols)``.

    The one function every minimum-distance score of the module is computed with, so that the lazy and
    the full path see the same values.
    """
    a, _, c = _rows(cover, counts, rows, cols, chunk)
    return np.abs(counts.sum() * a - c)


def mde_distances(cover: HypothesisClass, counts: np.ndarray, rows: np.ndarray | None = None,
                  chunk: int = CHUNK_PAIRS) -> np.ndarray:
    """``s W(H_i) = max_{j != i} |s H_i(A_ij) - c_ij|`` for ``rows`` (all by default); ``(n - 1)`` evaluations each.

    ``cover``: a :class:`HypothesisClass` (or an ``(n, D)`` array of pmfs); ``counts``: the sample histogram
    ``(D,)``; ``rows``: hypothesis indices in ``[0, n)``.
    """
    cover = as_class("mde_distances", cover, "cover")
    counts = _histogram("mde_distances", counts, cover.D)
    chunk = check_int("mde_distances", "chunk", chunk, low=1)
    n = cover.n
    rows = np.arange(n) if rows is None else np.asarray(rows)
    if rows.ndim != 1 or (rows.size and (rows.dtype.kind not in "iu" or rows.min() < 0 or rows.max() >= n)):
        raise input_error("mde_distances", "rows", f"a 1-D array of hypothesis indices in [0, {n})", describe(rows))
    if n == 1:
        return np.zeros(rows.size)
    out = np.empty(rows.size)
    per = max(1, chunk // n)  # a block of rows at a time: memory O(chunk x D + n), never n x n
    for start in range(0, rows.size, per):
        block = rows[start:start + per]
        dev = _deviations(cover, counts, block, np.arange(n), chunk)
        dev[np.arange(block.size), block] = -np.inf  # A_ii is empty: not an opponent
        out[start:start + block.size] = dev.max(axis=1)
    return out


def knockout_tournament(cover: HypothesisClass, counts: np.ndarray, k: int, rng: np.random.Generator,
                        chunk: int = CHUNK_PAIRS) -> tuple[np.ndarray, int]:
    """The ``k`` survivors of a random single-elimination Scheffé tournament; ``(indices, evaluations)``.

    Each round pairs the survivors at random; the winner of ``i`` vs ``j`` is the one closer to ``P̂`` on
    ``A_ij`` (ties: ``i``); an odd one out advances. Stops as soon as at most ``k`` remain (``n - k``
    matches in all). Not private: only the lazy sampler's running time depends on it.
    """
    cover = as_class("knockout_tournament", cover, "cover")
    counts = _histogram("knockout_tournament", counts, cover.D)
    k = check_int("knockout_tournament", "k", k, low=1, high=cover.n)
    rng = _generator("knockout_tournament", "rng", rng)
    chunk = check_int("knockout_tournament", "chunk", chunk, low=1)
    alive = rng.permutation(cover.n)
    evals = 0
    s = counts.sum()
    while alive.size > k:
        matches = min(alive.size // 2, alive.size - k)  # stop exactly at k
        I, J = alive[:2 * matches:2], alive[1:2 * matches:2]
        a, b, c = _pair_counts(cover, I, J, counts)
        evals += matches
        i_wins = np.abs(s * a - c) <= np.abs(s * b - c)
        alive = rng.permutation(np.concatenate([np.where(i_wins, I, J), alive[2 * matches:]]))
    return np.sort(alive), evals


# ----------------------------------------------------------------------------------------------
# selectors
# ----------------------------------------------------------------------------------------------
class _Selector(BaseEstimator):
    """What every selector shares: validation, the fitted attributes, the exact law and vectorised draws."""

    private = True

    def _check(self) -> None:
        name = type(self).__name__
        if hasattr(self, "epsilon"):
            _epsilon(name, self.epsilon)
        if hasattr(self, "backend"):
            _backend(name, self.backend)
        _random_state(name, getattr(self, "random_state", None))
        check_int(name, "chunk", self.chunk, low=1)

    def _data(self, H: Any, samples: Any) -> tuple[HypothesisClass, np.ndarray, np.ndarray]:
        name = f"{type(self).__name__}.fit"
        cover = as_class(name, H)
        samples = check_samples(name, samples, cover.D)
        return cover, samples, np.bincount(samples, minlength=cover.D).astype(np.float64)

    def fit(self, H: Any, samples: Any) -> _Selector:
        self._check()
        cover, samples, counts = self._data(H, samples)
        self.index_, self.n_scheffe_evals_ = self._fit(cover, samples, counts, np.random.default_rng(getattr(self, "random_state", None)))
        self.index_ = int(self.index_)
        self.epsilon_ = self._spent()
        return self

    def output_probabilities(self, H: Any, samples: Any) -> np.ndarray:
        """The exact law of ``fit(H, samples).index_`` (``(n,)``; one-hot for a deterministic selector).

        With ``backend="numpy"``; OpenDP's sampler has the permute-and-flip law instead (module docstring).
        """
        self._check()
        cover, samples, counts = self._data(H, samples)
        return self._law(cover, samples, counts)

    def draw(self, H: Any, samples: Any, n_draws: int, random_state: Any = None) -> np.ndarray:
        """``n_draws`` independent outputs on one data set, the noise drawn vectorised and the scores reused.

        The same law as ``n_draws`` calls of ``fit`` (for audits); always the numpy sampler.
        """
        self._check()
        name = f"{type(self).__name__}.draw"
        n_draws = check_int(name, "n_draws", n_draws, low=1)
        random_state = _random_state(name, random_state)
        cover, samples, counts = self._data(H, samples)
        return self._draws(cover, samples, counts, n_draws, np.random.default_rng(random_state))

    def _spent(self) -> float:
        return float(self.epsilon)

    # deterministic and single-EM selectors override _scores
    def _scores(self, cover, samples, counts) -> tuple[np.ndarray, int]:
        raise NotImplementedError

    def _temperature(self) -> float:
        """``epsilon / (2 Delta)`` with ``Delta = 1``: the factor the scores are multiplied by."""
        return self.epsilon / 2

    def _fit(self, cover, samples, counts, rng):
        scores, evals = self._scores(cover, samples, counts)
        if not self.private:
            return int(np.argmax(scores)), evals
        return self._em(scores, rng), evals

    def _em(self, scores: np.ndarray, rng: np.random.Generator) -> int:
        # epsilon / (2 Delta) = temperature, i.e. the mechanism exponential_mechanism(epsilon = 2 temperature)
        return exponential_mechanism(scores, 2 * self._temperature(), rng=rng, backend=self.backend)

    def _law(self, cover, samples, counts) -> np.ndarray:
        scores, _ = self._scores(cover, samples, counts)
        if not self.private:
            law = np.zeros(cover.n)
            law[int(np.argmax(scores))] = 1.0
            return law
        return em_probabilities(scores, 2 * self._temperature())

    def _draws(self, cover, samples, counts, n_draws, rng) -> np.ndarray:
        scores, _ = self._scores(cover, samples, counts)
        if not self.private:
            return np.full(n_draws, int(np.argmax(scores)))
        return gumbel_max_draws(scores * self._temperature(), n_draws, rng)


class _NonPrivate(_Selector):
    """What the non-private references share: Scheffé tables in chunks of ``chunk`` pairs, no privacy."""

    private = False

    def __init__(self, chunk: int = CHUNK_PAIRS) -> None:
        self.chunk = chunk

    def _spent(self) -> float:
        return math.inf


class MinimumDistanceEstimate(_NonPrivate):
    """The (modified) minimum distance estimate, not private: ``argmin_i max_j |H_i(A_ij) - P̂(A_ij)|``.

    Mahalanabis & Štefankovič (2008); ``TV <= 3 OPT + 4 max_A |P̂(A) - P(A)|`` over the ``n (n - 1)``
    sets used. ``distances_`` holds ``W(H_i)``. ``epsilon_`` is ``inf``.
    """

    def _scores(self, cover, samples, counts):
        w = mde_distances(cover, counts, chunk=self.chunk)
        self.distances_ = w / counts.sum()
        return -w, cover.n * (cover.n - 1)


class ScheffeTournament(_NonPrivate):
    """The Scheffé tournament, not private: every pair plays once; the most wins is output.

    ``H_i`` beats ``H_j`` when ``|H_i(A_ij) - P̂(A_ij)| < |H_j(A_ij) - P̂(A_ij)|`` (a tie is a win for
    neither); ties in wins go to the lower index. Devroye & Lugosi (2001): factor 9, ``n (n - 1) / 2``
    evaluations. ``wins_`` holds the win counts.
    """

    def _scores(self, cover, samples, counts):
        n, s = cover.n, counts.sum()
        wins = np.zeros(n)
        for i in range(n - 1):
            cols = np.arange(i + 1, n)
            a, b, c = (x[0] for x in _rows(cover, counts, np.array([i]), cols, self.chunk, with_b=True))
            di, dj = np.abs(s * a - c), np.abs(s * b - c)
            wins[i] += np.count_nonzero(di < dj)
            wins[cols] += dj < di
        self.wins_ = wins
        return wins, n * (n - 1) // 2


class BKSWSelector(_Selector):
    """Bun, Kamath, Steinke & Wu's private selection (NeurIPS 2019, arXiv 1905.13229): EM on ``min_j Gamma``.

    For the pair ``(H, H')`` let ``p1 = H(A)``, ``p2 = H'(A)`` on ``A = A_{H,H'}`` and ``tau = P̂(A)``.
    ``H`` *loses* to ``H'`` (with margin ``zeta = margin``) when ``tau <= p2 + zeta``: the sample sits no
    further than ``zeta`` above the rival's mass on the set where ``H`` puts more. ``Gamma(H, H', D)`` is
    the number of samples that must be changed for ``H`` to lose: ``ceil(s max(0, tau - p2 - zeta))``,
    computed as ``max(0, c - floor(s (p2 + zeta)))`` with ``c = s tau`` an integer (exact, so the
    sensitivity is exactly 1); a rival within ``TV(H, H') <= 2 zeta`` cannot make ``H`` lose
    (``Gamma = s``). The score ``S(H) = min_{H'} Gamma(H, H', D)`` is an integer in ``[0, s]`` with
    sensitivity 1; output ``P(H) ∝ exp(epsilon S(H) / 2)``. ``n (n - 1)`` evaluations.

    Reconstruction: the published score is stated with the target accuracy ``alpha`` in the margins; the
    losing region and the ``2 zeta`` closeness rule above are the form chosen here. ``scores_`` holds ``S``.
    """

    def __init__(self, epsilon: float = 1.0, margin: float = 0.05, random_state: Any = None, backend: str = "numpy",
                 chunk: int = CHUNK_PAIRS) -> None:
        self.epsilon, self.margin, self.random_state, self.backend, self.chunk = epsilon, margin, random_state, backend, chunk

    def _check(self) -> None:
        super()._check()
        zeta = check_finite("BKSWSelector", "margin", self.margin, positive=True)
        if zeta >= 1:
            raise input_error("BKSWSelector", "margin", "a number in (0, 1)", self.margin)

    def _scores(self, cover, samples, counts):
        n, s = cover.n, int(counts.sum())
        scores = np.full(n, float(s))
        per = max(1, self.chunk // n)
        for start in range(0, n, per):
            rows = np.arange(start, min(n, start + per))
            a, b, c = _rows(cover, counts, rows, np.arange(n), self.chunk, with_b=True)
            gamma = np.maximum(0.0, c - np.floor(s * (b + self.margin)))
            gamma[(a - b) <= 2 * self.margin] = s  # includes j = i (A_ii is empty)
            scores[rows] = gamma.min(axis=1)
        self.scores_ = scores
        return scores, n * (n - 1)


class PrivateMDE(_Selector):
    """The exponential mechanism on the minimum-distance score ``u_i = -s W(H_i)``; ``epsilon``-DP.

    ``W(H_i) = max_{j != i} |H_i(A_ij) - P̂(A_ij)|``; each ``s P̂(A_ij)`` moves by at most 1 when one sample
    is replaced, so ``u`` has sensitivity 1 and ``P(i) ∝ exp(epsilon u_i / 2)`` is ``epsilon``-DP
    (Aden-Ali, Ashtiani & Kamath 2021, factor 3).

    ``lazy=False``: all ``n (n - 1)`` evaluations. ``lazy=True`` samples from the same law: a strong set
    ``T`` (the ``k = ceil(log2 n)`` survivors of a random knock-out Scheffé tournament on the data, ``n - k``
    evaluations) gives the lower bound ``l_T(H_i) = max_{t in T} |H_i(A_it) - P̂(A_it)| <= W(H_i)`` for every
    ``i`` (``n k`` evaluations), hence an upper bound on each noisy score; hypotheses are visited in
    decreasing bound and scored in full (``n - 1`` each) until no bound can beat the best noisy score
    (:func:`lazy_exponential_mechanism`). Under the same Gumbel vector it returns the index of
    ``lazy=False``. ``T`` is data-dependent and not private, which is harmless for the output (its law does
    not depend on ``T``) but makes the running time a side channel; on dense covers the number of visited
    candidates grows with ``n``. ``n_visited_`` holds it; the lazy path needs ``backend="numpy"``.
    """

    def __init__(self, epsilon: float = 1.0, lazy: bool = True, k: int | None = None, random_state: Any = None,
                 backend: str = "numpy", chunk: int = CHUNK_PAIRS) -> None:
        self.epsilon, self.lazy, self.k, self.random_state, self.backend, self.chunk = (
            epsilon, lazy, k, random_state, backend, chunk)

    def _check(self) -> None:
        super()._check()
        if not isinstance(self.lazy, (bool, np.bool_)):
            raise InputTypeError(type(self).__name__, "lazy", "a bool", described(f"{type(self.lazy).__name__} "
                                                                                   f"{self.lazy!r}"))
        if self.lazy and self.backend == "opendp":
            raise input_error(type(self).__name__, "lazy", "False with backend='opendp' (OpenDP draws its own noise, "
                              "the lazy sampler needs the Gumbel vector)", self.lazy)
        if self.k is not None:
            check_int(type(self).__name__, "k", self.k, low=1)

    def _scores(self, cover, samples, counts):
        return -mde_distances(cover, counts, chunk=self.chunk), cover.n * (cover.n - 1)

    def _fit(self, cover, samples, counts, rng):
        if not self.lazy:
            self.n_visited_ = cover.n
            return super()._fit(cover, samples, counts, rng)
        n = cover.n
        k = default_k(n) if self.k is None else _check_k(type(self).__name__, self.k, n)
        gumbel = rng.gumbel(size=n)
        index, self.n_visited_, evals, self.strong_set_ = self._lazy_select(cover, counts, k, gumbel, rng)
        return index, evals

    def _lazy_select(self, cover, counts, k, gumbel, rng):
        """The lazy sampler under the Gumbel vector ``gumbel``: ``(index, visited, evaluations, strong set)``."""
        n = cover.n
        strong, evals = knockout_tournament(cover, counts, k, rng, self.chunk)
        lower = _deviations(cover, counts, np.arange(n), strong, self.chunk)
        lower[strong, np.arange(strong.size)] = 0.0  # H_t against itself: the empty set
        evals += n * strong.size - strong.size
        # |s a - c| is computed by the same function on the same values in both paths, so lower <= W
        # holds exactly; the margin only guards against a future change of that function.
        upper = -lower.max(axis=1) + 1e-9 * counts.sum()
        index, visited = lazy_exponential_mechanism(
            upper, lambda rows: -mde_distances(cover, counts, rows, self.chunk), 2 * self._temperature(), gumbel)
        return index, visited, evals + visited * (n - 1), strong


def default_k(n: int) -> int:
    """``ceil(log2 n)``, at least 1: the size of the strong set."""
    return max(1, math.ceil(math.log2(n))) if n > 1 else 1


def _check_k(function: str, k: int, n: int) -> int:
    if k > n:
        raise input_error(function, "k", f"an int in [1, n = {n}]", k)
    return int(k)
