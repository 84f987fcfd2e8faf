"""Few-shot episodes with noisy support sets, for CRDProto ("Rank-guided Diffusion for Noise Few-Shot Learning",
ICML 2026; reconstructed): an episode sampler and the support-noise protocol of TraNFS (Liang et al., CVPR 2022,
facebookresearch/noisy_few_shot, ``noise_utils.py``), which no library ships.

The protocol, per class of an N-way K-shot episode, replaces ``round(fraction * K)`` support shots:

- ``"sym_swap"``: by images of the episode's other classes, drawn from images outside the episode's support and
  query sets, so that no wrong class reaches the clean label's count (the clean label keeps a plurality);
- ``"pair_swap"``: class ``c`` receives its noise from class ``d[c]`` of a random derangement ``d``;
- ``"outlier"``: by images from outside the episode's classes (true label -1).

The noisy labels are what a method sees; the noise mask is returned beside them for scoring only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

NOISE_KINDS = ("sym_swap", "pair_swap", "outlier")


@dataclass(frozen=True)
class Episode:
    """One N-way episode: ``classes`` (the data set's class ids, in episode order), ``support`` ``[N, K]`` and
    ``query`` ``[N, Q]`` row indices into the data set (row ``i`` of each holds class ``classes[i]``)."""

    classes: np.ndarray
    support: np.ndarray
    query: np.ndarray


@dataclass(frozen=True)
class NoisyEpisode:
    """An episode after support noise: ``support`` ``[N, K]`` row indices (some replaced), the labels a method sees
    (``support_labels``: episode positions, unchanged by the noise), the true labels of the support rows
    (episode positions; -1 for an outlier) and the noise ``mask`` (True: replaced). ``query`` and ``classes`` as
    in :class:`Episode`."""

    classes: np.ndarray
    support: np.ndarray
    query: np.ndarray
    support_labels: np.ndarray
    true_labels: np.ndarray
    mask: np.ndarray


class EpisodeSampler:
    """N-way K-shot episodes with Q queries per class from ``labels`` (a data set's class labels).

    Args:
        labels: ``[n]`` class labels.
        n_way: classes per episode.
        n_shot: support shots per class.
        n_query: queries per class.
        seed: the stream of episodes.
        classes: the classes episodes draw from (default: every class of ``labels``); row indices stay indices
            into ``labels``.
    """

    def __init__(self, labels, n_way: int = 5, n_shot: int = 5, n_query: int = 15, seed: int = 0,
                 classes=None) -> None:
        fn = "EpisodeSampler"
        self.labels = np.asarray(labels)
        if self.labels.ndim != 1 or not len(self.labels):
            raise input_error(fn, "labels", "a non-empty [n] label array", describe(labels))
        self.n_way = check_int(fn, "n_way", n_way, low=1)
        self.n_shot = check_int(fn, "n_shot", n_shot, low=1)
        self.n_query = check_int(fn, "n_query", n_query, low=0)
        self.rng = np.random.default_rng(check_int(fn, "seed", seed, low=0))
        self.classes, counts = np.unique(self.labels, return_counts=True)
        if classes is not None:
            wanted = np.unique(np.asarray(classes))
            if not len(wanted) or not np.isin(wanted, self.classes).all():
                raise input_error(fn, "classes", "a non-empty subset of the labels' classes", describe(classes))
            counts, self.classes = counts[np.isin(self.classes, wanted)], wanted
        if self.n_way > len(self.classes):
            raise input_error(fn, "n_way", f"at most the {len(self.classes)} classes of labels", n_way)
        small = self.classes[counts < self.n_shot + self.n_query]
        if len(small):
            raise input_error(fn, "labels", f"at least n_shot + n_query = {self.n_shot + self.n_query} rows per "
                              "class", f"classes {small.tolist()} with {counts[counts < self.n_shot + self.n_query]}")
        self.rows = {c: np.flatnonzero(self.labels == c) for c in self.classes}

    def sample(self) -> Episode:
        """The next episode."""
        classes = self.rng.choice(self.classes, self.n_way, replace=False)
        support, query = [], []
        for c in classes:
            rows = self.rng.choice(self.rows[c], self.n_shot + self.n_query, replace=False)
            support.append(rows[: self.n_shot])
            query.append(rows[self.n_shot:])
        return Episode(classes, np.array(support), np.array(query))

    def __iter__(self) -> Iterator[Episode]:
        while True:
            yield self.sample()


class SupportNoise:
    """The TraNFS support-noise protocol (see the module docstring).

    Args:
        kind: ``"sym_swap"``, ``"pair_swap"`` or ``"outlier"``.
        fraction: the share of each class's shots replaced, in ``[0, 1)`` (``round(fraction * K)`` shots).
        seed: the stream of replacements.
    """

    def __init__(self, kind: str = "sym_swap", fraction: float = 0.4, seed: int = 0) -> None:
        fn = "SupportNoise"
        self.kind = check_choice(fn, "kind", kind, NOISE_KINDS)
        self.fraction = check_finite(fn, "fraction", fraction, low=0.0, high=1.0, high_open=True)
        self.rng = np.random.default_rng(check_int(fn, "seed", seed, low=0))

    def __call__(self, episode: Episode, labels, outliers=None) -> NoisyEpisode:
        """Apply the noise to ``episode`` of the data set with ``labels``; ``outliers`` (row indices outside the
        episode's classes) is needed for ``"outlier"``."""
        fn = "SupportNoise"
        labels = np.asarray(labels)
        n_way, k = episode.support.shape
        m = int(round(self.fraction * k))
        support = episode.support.copy()
        true = np.repeat(np.arange(n_way)[:, None], k, 1)
        mask = np.zeros((n_way, k), dtype=bool)
        used = set(episode.support.ravel().tolist()) | set(episode.query.ravel().tolist())
        spare = {i: [r for r in np.flatnonzero(labels == c) if r not in used] for i, c in enumerate(episode.classes)}
        if self.kind == "outlier":
            if outliers is None:
                raise input_error(fn, "outliers", "row indices outside the episode's classes for kind='outlier'", None)
            outliers = np.asarray(outliers)
            if np.isin(labels[outliers], episode.classes).any():
                raise input_error(fn, "outliers", "rows of no episode class", "rows of an episode class")
        derangement = _derangement(n_way, self.rng) if self.kind == "pair_swap" else None
        for i in range(n_way):
            if m == 0:
                break
            slots = self.rng.choice(k, m, replace=False)
            if self.kind == "outlier":
                picks, sources = self.rng.choice(outliers, m, replace=False), np.full(m, -1)
            else:
                if self.kind == "pair_swap":
                    sources = np.full(m, derangement[i])
                else:
                    sources = _plural_sources(i, n_way, m, k, self.rng)
                picks = np.empty(m, dtype=int)
                for j, src in enumerate(sources):
                    if not spare[src]:
                        raise input_error(fn, "labels", f"spare rows of class {episode.classes[src]} to swap in",
                                          "none left")
                    picks[j] = spare[src].pop(int(self.rng.integers(len(spare[src]))))
            support[i, slots] = picks
            true[i, slots] = sources
            mask[i, slots] = True
        return NoisyEpisode(episode.classes, support, episode.query, np.repeat(np.arange(n_way)[:, None], k, 1),
                            true, mask)


def _derangement(n: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random permutation with no fixed point (rejection sampling)."""
    if n < 2:
        raise input_error("SupportNoise", "n_way", "at least 2 classes for pair_swap", n)
    while True:
        p = rng.permutation(n)
        if not (p == np.arange(n)).any():
            return p


def _plural_sources(i: int, n_way: int, m: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """``m`` source classes other than ``i`` such that none reaches the clean count ``k - m``."""
    others = np.array([c for c in range(n_way) if c != i])
    if not len(others):
        raise input_error("SupportNoise", "n_way", "at least 2 classes for sym_swap", n_way)
    if m and -(-m // len(others)) >= k - m:
        raise input_error("SupportNoise", "fraction", f"a fraction that keeps the clean label a plurality with "
                          f"{n_way} classes and {k} shots", m / k)
    while True:
        sources = rng.choice(others, m)
        if not m or np.bincount(sources, minlength=n_way).max() < k - m:
            return sources


__all__ = ["NOISE_KINDS", "Episode", "NoisyEpisode", "EpisodeSampler", "SupportNoise"]
