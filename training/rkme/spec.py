"""Reduced kernel mean embedding (RKME) specifications of learnwares.

Prior work: Wu, Xu, Liu, Zhou, "Model Reuse with Reduced Kernel Mean Embedding Specification" (TKDE 2023,
arXiv 2001.07135), as implemented in the ``learnware`` package (Learnware-LAMDA/Learnware 0.4,
``learnware/specification/regular/table/rkme.py``). The ICML 2026 paper "A Statistical Framework for
Analyzing Specification Resistance to Learnware-Inversion Risks" studies how much such a specification
leaks beyond the released model; its games live in :mod:`icml26.eval.tasks.rkme` and the market in
:mod:`icml26.training.rkme.market`.

A specification summarises data ``X`` (n x d) by a reduced set ``Z`` (m x d) and weights ``beta`` whose
embedding ``sum_j beta_j k(z_j, .)`` is close, in the RKHS of the Gaussian kernel
``k(x, y) = exp(-gamma ||x - y||^2)``, to the empirical kernel mean embedding ``(1/n) sum_i k(x_i, .)``:

    MMD^2 = beta' K_zz beta - 2 beta' C + (1/n^2) 1' K_xx 1,   C_j = (1/n) sum_i k(z_j, x_i).

:class:`RKMESpecification` follows the reference algorithm (column-mean imputation, k-means start, the
simplex QP for ``beta`` solved by Clarabel through qpsolvers, alternating with steps on ``Z``) with three
changes the reference's own behaviour called for (measured, see the README):

- the ``Z`` step uses the true gradient of MMD^2,
  ``-4 gamma beta_j [sum_l beta_l k(z_j, z_l)(z_j - z_l) - (1/n) sum_i k(z_j, x_i)(z_j - x_i)]``, with a
  backtracking step, so MMD^2 never rises (``reference_update=True`` keeps the reference's
  ``-2 gamma beta_j [... - 2 (1/n) ...]`` and its fixed step);
- k-means clusters below ``min_cluster_size`` records are dissolved and the largest cluster split, because a
  singleton's centroid *is* a training record (the most isolated one);
- features are standardised and ``gamma="median"`` is ``1 / median squared distance`` (the reference's
  ``gamma = 0.1`` on raw features makes every kernel value vanish on digits pixels).

Kernels are evaluated in chunks of rows, so memory stays O(n m) (O(chunk n) for the data's own term).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator

from icml26.errors import InputError, InputTypeError, describe, described
from icml26.training.rkme.kernels import (
    BETA_SOLVERS,
    SPEC_TYPE,
    _as_matrix,
    _data_self_term,
    _gaussian_kernel,
    _keep_off_records,
    _kernel_row_means,
    _kmeans_start,
    _mmd2,
    _simplex_qp,
    _z_gradient,
    median_gamma,
)
from icml26.validation import check_choice, check_finite, check_int, check_random_state


# ----------------------------------------------------------------------------------------------
# the specification
# ----------------------------------------------------------------------------------------------
@dataclass
class StandardScaling:
    """Published feature scaling ``(x - mean) / scale`` (a market's, or one fitted on the data)."""

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, X: np.ndarray) -> StandardScaling:
        X = _as_matrix("StandardScaling.fit", "X", X)
        if not np.isfinite(X).all():
            raise InputError("StandardScaling.fit", "X", "finite values", described("NaN or inf"))
        scale = X.std(0)
        return cls(X.mean(0), np.where(scale > 0, scale, 1.0))

    @classmethod
    def of(cls, scaler: Any, function: str = "StandardScaling.of", argument: str = "scaler") -> StandardScaling:
        """From a :class:`StandardScaling` or a fitted ``sklearn.preprocessing.StandardScaler``."""
        if isinstance(scaler, StandardScaling):
            mean, scale = scaler.mean, scaler.scale
        else:
            mean, scale = getattr(scaler, "mean_", None), getattr(scaler, "scale_", None)
            if mean is None or scale is None:
                raise InputTypeError(function, argument, "a StandardScaling or a fitted StandardScaler",
                                     described(type(scaler).__name__))
        mean, scale = np.asarray(mean, dtype=np.float64), np.asarray(scale, dtype=np.float64)
        if mean.ndim != 1 or scale.shape != mean.shape or not (np.isfinite(mean).all() and np.isfinite(scale).all()) \
                or (scale <= 0).any():
            raise InputError(function, argument, "a scaler with finite means and positive scales of one length",
                             described(f"means of shape {mean.shape}, scales of shape {scale.shape}"))
        return scaler if isinstance(scaler, StandardScaling) else cls(mean, scale)

    def transform(self, X: np.ndarray) -> np.ndarray:
        return (np.asarray(X, dtype=np.float64) - self.mean) / self.scale

    def inverse_transform(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(X, dtype=np.float64) * self.scale + self.mean

    def same_as(self, other: StandardScaling | None) -> bool:
        return other is not None and self.mean.shape == other.mean.shape and bool(
            np.allclose(self.mean, other.mean, rtol=0, atol=1e-12) and np.allclose(self.scale, other.scale, rtol=0, atol=1e-12))


class RKMESpecification(BaseEstimator):
    """A reduced kernel mean embedding of a dataset (scikit-learn style; ``fit`` returns ``self``).

    Parameters: ``n_points`` (m, reference ``K``; ``m >= n`` falls back to ``2n/3`` as the reference does),
    ``gamma`` (a positive number, or ``"median"`` for :func:`median_gamma` on the standardised data),
    ``steps`` alternations of a ``Z`` step and a ``beta`` step (reference default 3), ``step_size`` (the
    first trial step; halved until MMD^2 does not rise), ``nonnegative_beta`` (simplex QP) or the
    ridge solution ``(K_zz + 1e-5 I)^-1 C``, ``reduce=False`` (Z = X, beta = 1/n: the no-privacy anchor),
    ``standardize`` (fit a :class:`StandardScaling` on ``X`` unless ``scaler`` is given), ``scaler`` (a
    published one: a market's), ``beta_solver`` (``"clarabel"`` via qpsolvers, or ``"slsqp"``),
    ``min_cluster_size`` (the k-means size floor), ``reference_update`` (learnware's Z direction with a
    fixed step), ``record_floor`` (every published ``z_j`` lies at least ``record_floor / sqrt(gamma)``, that
    fraction of the kernel's length scale, from every training record; 0 turns the floor off: the reference's
    behaviour, whose ``Z`` steps put points on records at ``m = n/2``), ``random_state``.

    Fitted: ``Z_`` (m x d, standardised space), ``beta_``, ``gamma_``, ``scaler_`` (or None),
    ``n_samples_``, ``mmd2_history_`` (MMD^2 to the data's KME after the start and after each alternation).
    """

    def __init__(self, n_points: int = 100, gamma: float | str = "median", steps: int = 3, step_size: float = 0.1,
                 nonnegative_beta: bool = True, reduce: bool = True, standardize: bool = True, scaler: Any = None,
                 beta_solver: str = "clarabel", min_cluster_size: int = 2, reference_update: bool = False,
                 record_floor: float = 0.1, random_state: int | None = None) -> None:
        self.n_points, self.gamma, self.steps, self.step_size = n_points, gamma, steps, step_size
        self.nonnegative_beta, self.reduce, self.standardize, self.scaler = nonnegative_beta, reduce, standardize, scaler
        self.beta_solver, self.min_cluster_size = beta_solver, min_cluster_size
        self.reference_update, self.record_floor, self.random_state = reference_update, record_floor, random_state

    # -- validation -----------------------------------------------------------------------------
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # NaN and inf are imputed by column means, as the reference does
        return tags

    def _check_params(self) -> None:
        """scikit-learn's rule: ``__init__`` stores, ``fit`` validates (so ``set_params`` values are checked too)."""
        f = "RKMESpecification"
        check_int(f, "n_points", self.n_points, low=1)
        if isinstance(self.gamma, str):
            check_choice(f, "gamma", self.gamma, ("median",))
        else:
            check_finite(f, "gamma", self.gamma, positive=True)
        check_int(f, "steps", self.steps, low=0)
        check_finite(f, "step_size", self.step_size, positive=True)
        for name in ("nonnegative_beta", "reduce", "standardize", "reference_update"):
            value = getattr(self, name)
            if not isinstance(value, (bool, np.bool_)):
                raise InputTypeError(f, name, "a bool", described(f"{type(value).__name__} {value!r}"))
        if self.scaler is not None:
            StandardScaling.of(self.scaler, f, "scaler")
        check_choice(f, "beta_solver", self.beta_solver, BETA_SOLVERS)
        check_int(f, "min_cluster_size", self.min_cluster_size, low=1)
        check_finite(f, "record_floor", self.record_floor, non_negative=True)
        check_random_state(f, "random_state", self.random_state)

    def _check_fitted(self, function: str) -> None:
        if not hasattr(self, "Z_"):
            raise InputError(f"RKMESpecification.{function}", "self", "a fitted specification (call fit first)",
                             "an unfitted one", show_got=False)

    # -- fitting --------------------------------------------------------------------------------
    def fit(self, X: Any, y: Any = None) -> RKMESpecification:
        """Summarise ``X`` (n x d, n >= 2; NaN/inf imputed by column means)."""
        self._check_params()
        X = _as_matrix("RKMESpecification.fit", "X", X, min_rows=2)
        X = X.copy()
        bad = ~np.isfinite(X)
        if bad.any():
            with np.errstate(invalid="ignore"):
                means = np.nanmean(np.where(bad, np.nan, X), axis=0)
            X[bad] = np.nan_to_num(means, nan=0.0)[np.nonzero(bad)[1]]
        if self.scaler is not None:
            self.scaler_ = StandardScaling.of(self.scaler)
            if self.scaler_.mean.shape != (X.shape[1],):
                raise InputError("RKMESpecification.fit", "X", f"{self.scaler_.mean.shape[0]} features (the scaler's)",
                                 describe(X))
        else:
            self.scaler_ = StandardScaling.fit(X) if self.standardize else None
        Xs = self.scaler_.transform(X) if self.scaler_ is not None else X
        seed = 0 if self.random_state is None else int(self.random_state)
        self.gamma_ = median_gamma(Xs, seed=seed) if isinstance(self.gamma, str) else float(self.gamma)
        self.n_samples_, self.n_features_in_ = X.shape
        if not self.reduce:
            self.Z_, self.beta_ = Xs.copy(), np.full(len(Xs), 1.0 / len(Xs))
            self.mmd2_history_ = [0.0]
            return self
        n = len(Xs)
        m = int(self.n_points) if self.n_points < n else max(1, (2 * n) // 3)
        floor = max(1, min(int(self.min_cluster_size), n // m))
        # Reconstruction (the rule): no published point equals, or sits within the floor of, a record
        rng, radius = np.random.default_rng(seed), float(self.record_floor) / math.sqrt(self.gamma_)

        def off_records(Z_: np.ndarray) -> np.ndarray:
            return _keep_off_records(Z_, Xs, radius, rng)

        Z = off_records(_kmeans_start(Xs, m, floor, seed))
        self_term = _data_self_term(Xs, self.gamma_)
        beta = self._beta_step(Z, Xs)
        history = [_mmd2(Z, beta, Xs, self.gamma_, self_term)]
        for _ in range(int(self.steps)):
            G = _z_gradient(Z, beta, Xs, self.gamma_, reference=self.reference_update)
            if self.reference_update:
                Z = off_records(Z - self.step_size * G)
            else:
                Z = self._backtrack(Z, G, beta, Xs, self_term, history[-1], off_records)
            new_beta = self._beta_step(Z, Xs)
            value = _mmd2(Z, new_beta, Xs, self.gamma_, self_term)
            if not self.reference_update:  # keep the old beta when the solver's tolerance would raise MMD^2
                old = _mmd2(Z, beta, Xs, self.gamma_, self_term)
                if old < value:
                    new_beta, value = beta, old
            beta = new_beta
            history.append(value)
        self.Z_, self.beta_, self.mmd2_history_ = Z, beta, history
        return self

    def _beta_step(self, Z: np.ndarray, Xs: np.ndarray) -> np.ndarray:
        K = _gaussian_kernel(Z, Z, self.gamma_)
        C = _kernel_row_means(Z, Xs, self.gamma_)
        if self.nonnegative_beta:
            return _simplex_qp(K, C, self.beta_solver)
        return np.linalg.solve(K + 1e-5 * np.eye(len(Z)), C)

    def _backtrack(self, Z, G, beta, Xs, self_term, current, off_records, halvings: int = 30) -> np.ndarray:
        step = float(self.step_size)
        for _ in range(halvings):
            trial = off_records(Z - step * G)
            if _mmd2(trial, beta, Xs, self.gamma_, self_term) <= current:
                return trial
            step /= 2
        return Z

    # -- using a specification ------------------------------------------------------------------
    def _to_space(self, function: str, X: Any) -> np.ndarray:
        A = _as_matrix(f"RKMESpecification.{function}", "X", X, dim=self.n_features_in_)
        return self.scaler_.transform(A) if self.scaler_ is not None else A

    def score(self, X: Any) -> np.ndarray:
        """``s(x) = sum_j beta_j k(z_j, x)`` for every row of ``X`` (in the original feature space)."""
        self._check_fitted("score")
        return _kernel_row_means(self._to_space("score", X), self.Z_, self.gamma_, self.beta_)

    def nearest_distance(self, X: Any) -> np.ndarray:
        """``min_j ||z_j - x||`` in the standardised space: the oracle nearest-reduced-point statistic."""
        self._check_fitted("nearest_distance")
        A = self._to_space("nearest_distance", X)
        d2 = np.einsum("ij,ij->i", A, A)[:, None] + np.einsum("ij,ij->i", self.Z_, self.Z_)[None, :] - 2 * A @ self.Z_.T
        return np.sqrt(np.maximum(d2.min(1), 0.0))

    def _check_compatible(self, function: str, other: RKMESpecification) -> None:
        if not isinstance(other, RKMESpecification):
            raise TypeError(f"RKMESpecification.{function}: other: expected an RKMESpecification, got "
                            f"{type(other).__name__}")
        other._check_fitted(function)
        if other.n_features_in_ != self.n_features_in_:
            raise InputError(f"RKMESpecification.{function}", "other", f"dimension {self.n_features_in_}",
                             other.n_features_in_)
        if not math.isclose(other.gamma_, self.gamma_, rel_tol=1e-12):
            raise InputError(f"RKMESpecification.{function}", "other", f"gamma {self.gamma_!r}", other.gamma_)
        if (self.scaler_ is None) != (other.scaler_ is None) or (self.scaler_ is not None and not self.scaler_.same_as(other.scaler_)):
            raise InputError(f"RKMESpecification.{function}", "other", "the same feature scaling",
                             "a different scaler", show_got=False)

    def inner(self, other: RKMESpecification) -> float:
        """``<Phi_1, Phi_2> = sum_ij beta1_i beta2_j k(z1_i, z2_j)`` (same gamma, scaler and dimension)."""
        self._check_fitted("inner")
        self._check_compatible("inner", other)
        return float(self.beta_ @ _gaussian_kernel(self.Z_, other.Z_, self.gamma_) @ other.beta_)

    def mmd2(self, other: RKMESpecification) -> float:
        """``MMD^2 = <Phi1, Phi1> - 2 <Phi1, Phi2> + <Phi2, Phi2>`` (learnware's ``dist``)."""
        return self.inner(self) - 2.0 * self.inner(other) + other.inner(other)

    def mmd2_to_data(self, X: Any) -> float:
        """MMD^2 between the specification and the empirical KME of ``X``."""
        self._check_fitted("mmd2_to_data")
        A = self._to_space("mmd2_to_data", X)
        value = self.beta_ @ _gaussian_kernel(self.Z_, self.Z_, self.gamma_) @ self.beta_
        value += _data_self_term(A, self.gamma_) - 2.0 * self.beta_ @ _kernel_row_means(self.Z_, A, self.gamma_)
        return float(value)

    def herding(self, T: int, seed: int | None = None) -> np.ndarray:
        """``T`` pseudo-records by kernel herding, as learnware's ``herding``: ``100 T`` Gaussian candidates
        around the ``z_j`` (std 0.25 in the standardised space, centres drawn by ``beta``), then greedily the
        candidate maximising ``(t+1) s(c) - sum_{chosen} k(c, .)``. Returned in the original feature space."""
        self._check_fitted("herding")
        T = check_int("RKMESpecification.herding", "T", T, low=1)
        check_random_state("RKMESpecification.herding", "seed", seed)
        rng = np.random.default_rng(self.random_state if seed is None else seed)
        p = np.clip(self.beta_, 0, None)
        p = p / p.sum() if p.sum() > 0 else np.full(len(p), 1.0 / len(p))
        centres = rng.choice(len(self.Z_), size=100 * T, p=p)
        cand = self.Z_[centres] + 0.25 * rng.standard_normal((100 * T, self.Z_.shape[1]))
        s = _kernel_row_means(cand, self.Z_, self.gamma_, self.beta_)
        chosen = np.zeros(len(cand))
        picks = []
        for t in range(T):
            j = int(np.argmax((t + 1) * s - chosen))
            picks.append(j)
            chosen += _gaussian_kernel(cand, cand[j:j + 1], self.gamma_)[:, 0]
        out = cand[picks]
        return self.scaler_.inverse_transform(out) if self.scaler_ is not None else out

    # -- JSON -----------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """learnware's table layout (``type``, ``gamma``, ``num_points``, ``z``, ``beta``, ``device``,
        ``cuda_idx``) plus an ``icml26`` block with the scaler (``z`` lives in the scaled space)."""
        self._check_fitted("save")
        return {"type": SPEC_TYPE, "gamma": self.gamma_, "num_points": int(len(self.Z_)), "z": self.Z_.tolist(),
                "beta": self.beta_.tolist(), "device": "cpu", "cuda_idx": -1,
                "icml26": {"scaler_mean": None if self.scaler_ is None else self.scaler_.mean.tolist(),
                           "scaler_scale": None if self.scaler_ is None else self.scaler_.scale.tolist(),
                           "n_samples": int(self.n_samples_), "reduce": bool(self.reduce),
                           "mmd2_history": list(map(float, self.mmd2_history_))}}

    def save(self, path: str | os.PathLike) -> None:
        """Write :meth:`to_dict` as JSON to ``path`` (its folder must exist)."""
        data = self.to_dict()
        if not isinstance(path, (str, os.PathLike)):
            raise InputTypeError("RKMESpecification.save", "path", "a file path", described(type(path).__name__))
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise InputError("RKMESpecification.save", "path", "a writable file path in an existing folder",
                             str(path))
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(data, fh, separators=(",", ":"))

    @classmethod
    def from_dict(cls, data: dict[str, Any], function: str = "RKMESpecification.from_dict") -> RKMESpecification:
        """A fitted specification from :meth:`to_dict`'s layout (learnware's, with or without the ``icml26`` block)."""
        if not hasattr(data, "keys"):
            raise InputTypeError(function, "data", "a dict in learnware's layout", described(type(data).__name__))
        for key in ("gamma", "z", "beta"):
            if key not in data:
                raise InputError(function, "data", f"a specification with key {key!r}", sorted(data))
        extra = data.get("icml26") or {}
        try:
            Z = np.atleast_2d(np.asarray(data["z"], dtype=np.float64))
            beta = np.asarray(data["beta"], dtype=np.float64).ravel()
        except (TypeError, ValueError):
            raise InputError(function, "data", "'z' a matrix and 'beta' a vector of numbers",
                             described("values that are not")) from None
        if Z.ndim != 2 or beta.shape != (len(Z),) or not (np.isfinite(Z).all() and np.isfinite(beta).all()):
            raise InputError(function, "data", "finite 'z' (m, d) and 'beta' (m,)",
                             described(f"z of shape {Z.shape}, beta of shape {beta.shape}"))
        check_finite(function, "data['gamma']", data["gamma"], positive=True)
        spec = cls(n_points=len(Z), gamma=float(data["gamma"]), reduce=extra.get("reduce", True))
        spec.Z_, spec.beta_, spec.gamma_ = Z, beta, float(data["gamma"])
        spec.n_samples_ = int(extra.get("n_samples", len(Z)))
        spec.n_features_in_ = Z.shape[1]
        mean, scale = extra.get("scaler_mean"), extra.get("scaler_scale")
        spec.scaler_ = None if mean is None else StandardScaling(np.asarray(mean, float), np.asarray(scale, float))
        spec.mmd2_history_ = list(extra.get("mmd2_history", []))
        return spec

    @classmethod
    def load(cls, path: str | os.PathLike) -> RKMESpecification:
        """The specification :meth:`save` wrote to ``path`` (or learnware's JSON of a table RKME)."""
        name = "RKMESpecification.load"
        if not isinstance(path, (str, os.PathLike)):
            raise InputTypeError(name, "path", "a file path", described(type(path).__name__))
        if not os.path.isfile(path):
            raise InputError(name, "path", "an existing JSON file", str(path))
        try:
            with open(path, encoding="utf-8") as fh:
                data = json.load(fh)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InputError(name, "path", "a JSON file", described(f"{path} ({type(exc).__name__})")) from None
        return cls.from_dict(data, name)


def noisy_copy_spec(X: Any, sigma: float, scaler: Any = None, gamma: float | str = "median",
                    seed: int | None = None) -> RKMESpecification:
    """An intermediate leak: ``Z = X + N(0, sigma^2)`` (standardised space), ``beta = 1/n``.

    Not a method anyone should publish: the membership game's detection check (a leak between the reduced
    set and raw records).
    """
    check_finite("noisy_copy_spec", "sigma", sigma, non_negative=True)
    check_random_state("noisy_copy_spec", "seed", seed)
    spec = RKMESpecification(reduce=False, gamma=gamma, scaler=scaler, random_state=seed).fit(X)
    spec.Z_ = spec.Z_ + sigma * np.random.default_rng(seed).standard_normal(spec.Z_.shape)
    return spec
