"""Tasks and metrics for information-open synthetic data loops ("An Information-Theoretic Criterion for Efficient
Data Synthesis", Li, Sun and Deng, ICML 2026, arXiv 2605.16379).

The paper is a position paper without code; these are the measurements its statements need. Distribution level:
:func:`entropy`, :func:`support_size`, :func:`tail_mass`, :func:`kl_divergence`, :func:`total_variation`. Task level:
:func:`accuracy`, :func:`mutual_information` (plug-in ``I(Y; Y_hat)`` from the confusion counts with the
Miller-Madow correction of each entropy), :func:`paired_bootstrap` (intervals for a difference measured on the same
test items) and :func:`bits_per_gain` (bits of supervision per unit of accuracy gained). Everything is in bits.

Tasks: :func:`zipf` (the categorical truth), :func:`linear_teacher` (isotropic Gaussian inputs, a fixed ``w*``),
:func:`digits_split` (scikit-learn's ``digits`` as labelled / pool / test) and :func:`addition_pairs` (2-digit sums as
prompt and completion strings, for a language model).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from icml26.errors import describe, input_error
from icml26.validation import check_finite, check_int

__all__ = ["DigitsSplit", "LinearTeacher", "accuracy", "addition_pairs", "bits_per_gain", "digits_split", "entropy",
           "kl_divergence", "linear_teacher", "mutual_information", "paired_bootstrap", "support_size", "tail_mass",
           "total_variation", "zipf"]


def _probabilities(function: str, argument: str, p) -> np.ndarray:
    p = np.asarray(p, dtype=np.float64)
    if p.ndim != 1 or len(p) == 0 or not np.isfinite(p).all() or (p < 0).any() or p.sum() <= 0:
        raise input_error(function, argument, "non-negative finite weights [K] with a positive sum", describe(p))
    return p / p.sum()


def _labels(function: str, argument: str, y) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or len(y) == 0 or not np.issubdtype(y.dtype, np.integer) or (y < 0).any():
        raise input_error(function, argument, "non-negative integer labels [n], n >= 1", describe(y))
    return y


# ----------------------------------------------------------------------------------------------
# distribution level
# ----------------------------------------------------------------------------------------------
def entropy(p) -> float:
    """Shannon entropy in bits of a distribution (weights are normalised)."""
    p = _probabilities("entropy", "p", p)
    nz = p[p > 0]
    return float(-(nz * np.log2(nz)).sum())


def support_size(p, threshold: float = 0.0) -> int:
    """The number of categories with probability above ``threshold``."""
    p = _probabilities("support_size", "p", p)
    threshold = check_finite("support_size", "threshold", threshold, non_negative=True)
    return int((p > threshold).sum())


def tail_mass(p, reference, tau: float) -> float:
    """The mass ``p`` puts on the reference's rare categories (reference probability below ``tau``)."""
    p = _probabilities("tail_mass", "p", p)
    q = _probabilities("tail_mass", "reference", reference)
    if len(q) != len(p):
        raise input_error("tail_mass", "reference", f"{len(p)} categories (as p)", describe(reference))
    tau = check_finite("tail_mass", "tau", tau, positive=True)
    return float(p[q < tau].sum())


def kl_divergence(p, q) -> float:
    """``KL(p || q)`` in bits (``inf`` where ``p`` has mass ``q`` lacks)."""
    p = _probabilities("kl_divergence", "p", p)
    q = _probabilities("kl_divergence", "q", q)
    if len(q) != len(p):
        raise input_error("kl_divergence", "q", f"{len(p)} categories (as p)", describe(q))
    nz = p > 0
    if (q[nz] == 0).any():
        return math.inf
    return float((p[nz] * np.log2(p[nz] / q[nz])).sum())


def total_variation(p, q) -> float:
    """Total variation distance ``1/2 sum |p - q|``."""
    p = _probabilities("total_variation", "p", p)
    q = _probabilities("total_variation", "q", q)
    if len(q) != len(p):
        raise input_error("total_variation", "q", f"{len(p)} categories (as p)", describe(q))
    return float(0.5 * np.abs(p - q).sum())


# ----------------------------------------------------------------------------------------------
# task level
# ----------------------------------------------------------------------------------------------
def accuracy(y, y_hat) -> float:
    """The share of ``y_hat`` equal to ``y``."""
    y, y_hat = _labels("accuracy", "y", y), _labels("accuracy", "y_hat", y_hat)
    if len(y_hat) != len(y):
        raise input_error("accuracy", "y_hat", f"{len(y)} labels (as y)", describe(y_hat))
    return float((y == y_hat).mean())


def _entropy_mm(counts: np.ndarray) -> float:
    """Miller-Madow entropy in bits: the plug-in plus ``(m - 1) / (2 N)`` nats, ``m`` the occupied cells."""
    n = counts.sum()
    p = counts[counts > 0] / n
    return float(-(p * np.log(p)).sum() + (len(p) - 1) / (2 * n)) / math.log(2)


def mutual_information(y, y_hat, correction: str = "miller_madow") -> float:
    """Plug-in ``I(Y; Y_hat)`` in bits from the joint counts: ``H(Y) + H(Y_hat) - H(Y, Y_hat)``, each entropy
    Miller-Madow corrected (``correction="none"``: the raw plug-in, biased upwards on small samples).

    Args:
        y: ``[n]`` true labels.
        y_hat: ``[n]`` predicted labels.
        correction: ``"miller_madow"`` or ``"none"``.
    """
    y, y_hat = _labels("mutual_information", "y", y), _labels("mutual_information", "y_hat", y_hat)
    if len(y_hat) != len(y):
        raise input_error("mutual_information", "y_hat", f"{len(y)} labels (as y)", describe(y_hat))
    if correction not in ("miller_madow", "none"):
        raise input_error("mutual_information", "correction", "'miller_madow' or 'none'", correction)
    joint = np.zeros((y.max() + 1, y_hat.max() + 1))
    np.add.at(joint, (y, y_hat), 1)
    if correction == "none":
        def h(c):
            p = c[c > 0] / c.sum()
            return float(-(p * np.log2(p)).sum())
    else:
        h = _entropy_mm
    return h(joint.sum(1)) + h(joint.sum(0)) - h(joint.ravel())


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval."""

    estimate: float
    low: float
    high: float

    def to_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def paired_bootstrap(a, b=None, n_boot: int = 2000, level: float = 0.95, seed=0) -> Interval:
    """Percentile bootstrap interval of ``mean(a - b)`` over items resampled together (paired: both scored on the
    same test items), e.g. per-item correctness of two models.

    Args:
        a: ``[n]`` per-item values.
        b: ``[n]`` per-item values of the comparison (``None``: the interval of ``mean(a)``).
        n_boot: bootstrap resamples.
        level: the interval's coverage.
        seed: anything ``numpy.random.default_rng`` takes.
    """
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 1 or len(a) < 2 or not np.isfinite(a).all():
        raise input_error("paired_bootstrap", "a", "finite values [n], n >= 2", describe(a))
    diff = a
    if b is not None:
        b = np.asarray(b, dtype=np.float64)
        if b.shape != a.shape or not np.isfinite(b).all():
            raise input_error("paired_bootstrap", "b", f"finite values [{len(a)}] (as a)", describe(b))
        diff = a - b
    n_boot = check_int("paired_bootstrap", "n_boot", n_boot, low=10)
    level = check_finite("paired_bootstrap", "level", level, low=0.0, high=1.0, low_open=True, high_open=True)
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, len(diff), size=(n_boot, len(diff)))].mean(1)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(float(diff.mean()), float(low), float(high))


def bits_per_gain(bits: float, gain: float) -> float:
    """Bits of supervision spent per unit of accuracy gained (``inf`` when nothing was gained)."""
    bits = check_finite("bits_per_gain", "bits", bits, non_negative=True)
    gain = check_finite("bits_per_gain", "gain", gain)
    return bits / gain if gain > 0 else math.inf


# ----------------------------------------------------------------------------------------------
# tasks
# ----------------------------------------------------------------------------------------------
def zipf(K: int = 100, s: float = 1.1) -> np.ndarray:
    """Zipf probabilities ``p_k proportional to k^-s``, ``k = 1..K``."""
    K = check_int("zipf", "K", K, low=1)
    s = check_finite("zipf", "s", s, non_negative=True)
    w = np.arange(1, K + 1, dtype=np.float64) ** -s
    return w / w.sum()


@dataclass(frozen=True)
class LinearTeacher:
    """``y = x w* + sigma eps`` with ``x ~ N(0, I_d)``; :meth:`excess_risk` is ``||w - w*||^2`` (the excess test
    risk under isotropic inputs)."""

    w: np.ndarray
    sigma: float

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        """``(X [n, d], y [n])`` from the teacher."""
        rng = np.random.default_rng(rng)
        X = rng.standard_normal((n, len(self.w)))
        return X, X @ self.w + self.sigma * rng.standard_normal(n)

    def excess_risk(self, w) -> float:
        return float(((np.asarray(w) - self.w) ** 2).sum())


def linear_teacher(d: int = 10, sigma: float = 1.0, seed=0) -> LinearTeacher:
    """A teacher with ``w* ~ N(0, I_d / d)``.

    Args:
        d: input dimension.
        sigma: label noise.
        seed: anything ``numpy.random.default_rng`` takes.
    """
    d = check_int("linear_teacher", "d", d, low=1)
    sigma = check_finite("linear_teacher", "sigma", sigma, non_negative=True)
    return LinearTeacher(np.random.default_rng(seed).standard_normal(d) / math.sqrt(d), sigma)


@dataclass(frozen=True)
class DigitsSplit:
    """scikit-learn's ``digits`` (pixels scaled to [0, 1]) in three disjoint parts."""

    x_labelled: np.ndarray
    y_labelled: np.ndarray
    x_pool: np.ndarray
    y_pool: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def digits_split(seed=0, labelled: int = 100, pool: int = 1000) -> DigitsSplit:
    """A random split of the 1,797 ``digits`` images: ``labelled`` for round 0, a ``pool`` of inputs the loop labels
    itself (its true labels are for verifiers only), the rest (697 by default) for testing.

    Args:
        seed: anything ``numpy.random.default_rng`` takes.
        labelled: labelled images.
        pool: pool images.
    """
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    labelled = check_int("digits_split", "labelled", labelled, low=10)
    pool = check_int("digits_split", "pool", pool, low=1, high=len(X) - labelled - 10)
    order = np.random.default_rng(seed).permutation(len(X))
    a, b = order[:labelled], order[labelled:labelled + pool]
    c = order[labelled + pool:]
    X = X / 16.0
    return DigitsSplit(X[a], y[a], X[b], y[b], X[c], y[c])


def addition_pairs(n: int, seed=0, digits: int = 2) -> list[tuple[str, str]]:
    """``n`` prompts ``"a+b="`` with their completions ``"<a + b>"`` (``a``, ``b`` of ``digits`` digits).

    Args:
        n: pairs.
        seed: anything ``numpy.random.default_rng`` takes.
        digits: digits per operand.
    """
    n = check_int("addition_pairs", "n", n, low=1)
    digits = check_int("addition_pairs", "digits", digits, low=1, high=6)
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 10 ** digits, size=(2, n))
    return [(f"{x}+{y}=", str(x + y)) for x, y in zip(a.tolist(), b.tolist())]
