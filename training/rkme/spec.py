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
from icml26.validation import check_choice, check_finite, check_int


def _check_seed(function: str, argument: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer))):
        raise InputTypeError(function, argument, "None or an int", described(f"{type(value).__name__} {value!r}"))


#: Rows of ``A`` per kernel block: a block is ``KERNEL_CHUNK x len(B)`` float64 values.
KERNEL_CHUNK = 1024
#: Learnware's JSON ``type`` for a table specification (``save`` writes its layout).
SPEC_TYPE = "RKMETableSpecification"
BETA_SOLVERS = ("clarabel", "slsqp")


# ----------------------------------------------------------------------------------------------
# kernels
# ----------------------------------------------------------------------------------------------
def _gaussian_kernel(A: np.ndarray, B: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(-gamma ||a - b||^2)`` for every row pair (float64), computed in row blocks of ``A``."""
    A, B = np.asarray(A, dtype=np.float64), np.asarray(B, dtype=np.float64)
    out = np.empty((len(A), len(B)))
    b2 = np.einsum("ij,ij->i", B, B)
    for s in range(0, len(A), KERNEL_CHUNK):
        a = A[s:s + KERNEL_CHUNK]
        d2 = np.einsum("ij,ij->i", a, a)[:, None] + b2[None, :] - 2.0 * a @ B.T
        np.maximum(d2, 0.0, out=d2)
        out[s:s + KERNEL_CHUNK] = np.exp(-gamma * d2)
    return out


def _kernel_row_means(A: np.ndarray, B: np.ndarray, gamma: float, weights: np.ndarray | None = None) -> np.ndarray:
    """``sum_i w_i k(a, b_i)`` for every row ``a`` of ``A`` (``w = 1/len(B)`` by default), blocked over ``B``.

    Never holds more than ``len(A) x KERNEL_CHUNK`` kernel values, so ``A`` of m rows against n data rows
    costs O(n m) time and O(m * chunk) memory.
    """
    B = np.asarray(B, dtype=np.float64)
    w = np.full(len(B), 1.0 / len(B)) if weights is None else np.asarray(weights, dtype=np.float64)
    out = np.zeros(len(A))
    for s in range(0, len(B), KERNEL_CHUNK):
        out += _gaussian_kernel(A, B[s:s + KERNEL_CHUNK], gamma) @ w[s:s + KERNEL_CHUNK]
    return out


def _data_self_term(X: np.ndarray, gamma: float) -> float:
    """``(1/n^2) sum_{i,i'} k(x_i, x_i')``: the squared RKHS norm of the empirical KME (blocked)."""
    X = np.asarray(X, dtype=np.float64)
    total = 0.0
    for s in range(0, len(X), KERNEL_CHUNK):
        total += float(_kernel_row_means(X[s:s + KERNEL_CHUNK], X, gamma).sum())
    return total / len(X)


def median_gamma(X: np.ndarray, max_points: int = 1000, seed: int = 0) -> float:
    """The median heuristic ``1 / median ||x_i - x_j||^2`` over distinct pairs (a subsample of ``max_points``).

    Reconstruction: the issue's choice. ``1/(d * median)`` would flatten the kernel to 0.96-0.99 on
    standardised digits and make any specification look harmless.
    """
    X = _finite_matrix("median_gamma", "X", X)
    max_points = check_int("median_gamma", "max_points", max_points, low=2)
    _check_seed("median_gamma", "seed", seed)
    if len(X) < 2:
        raise InputError("median_gamma", "X", "at least 2 rows (a distance needs a pair)", describe(X))
    if len(X) > max_points:
        X = X[np.random.default_rng(seed).choice(len(X), max_points, replace=False)]
    sq = np.einsum("ij,ij->i", X, X)
    d2 = sq[:, None] + sq[None, :] - 2.0 * X @ X.T
    med = float(np.median(d2[np.triu_indices(len(X), 1)]))
    if not med > 0:
        raise InputError("median_gamma", "X", "rows that are not all identical", describe(X))
    return 1.0 / med


def neighbour_kme_distance(x: np.ndarray, x_prime: np.ndarray, n: int, gamma: float) -> float:
    """RKHS distance between the KMEs of two datasets of ``n`` rows that differ in one record ``x -> x'``.

    ``||(k(x, .) - k(x', .)) / n|| = sqrt(2 - 2 k(x, x')) / n <= 2 / n`` (``sup k = 1``): the sensitivity
    behind the reconstructed RKHS-smoothed total-variation bridge.
    """
    f = "neighbour_kme_distance"
    x = np.atleast_2d(np.asarray(x, dtype=np.float64))
    x_prime = np.atleast_2d(np.asarray(x_prime, dtype=np.float64))
    if x.shape[0] != 1 or not np.isfinite(x).all():
        raise InputError(f, "x", "one finite record (a 1-D array)", describe(x))
    if x_prime.shape != x.shape or not np.isfinite(x_prime).all():
        raise InputError(f, "x_prime", f"one finite record of x's length {x.shape[1]}", describe(x_prime))
    n = check_int(f, "n", n, low=1)
    k = float(_gaussian_kernel(x, x_prime, _check_gamma(f, gamma))[0, 0])
    return math.sqrt(max(2.0 - 2.0 * k, 0.0)) / n


# ----------------------------------------------------------------------------------------------
# the beta step
# ----------------------------------------------------------------------------------------------
def _simplex_qp(K: np.ndarray, C: np.ndarray, solver: str = "clarabel") -> np.ndarray:
    """``argmin_w 1/2 w'Kw - C'w`` over the probability simplex (``w >= 0``, ``sum w = 1``).

    ``solver="clarabel"`` goes through ``qpsolvers.solve_qp`` as the reference's ``rkme_solve_qp`` does;
    ``"slsqp"`` is scipy's SLSQP. The result is clipped to ``>= 0`` and renormalised (solver tolerance).
    """
    K = np.asarray(K, dtype=np.float64)
    C = np.asarray(C, dtype=np.float64).ravel()
    m = len(C)
    if m == 1:
        return np.ones(1)
    P = 0.5 * (K + K.T) + 1e-10 * np.eye(m)
    w = None
    if solver == "clarabel":
        from qpsolvers import solve_qp
        from scipy import sparse

        w = solve_qp(sparse.csc_matrix(P), -C, A=sparse.csc_matrix(np.ones((1, m))), b=np.ones(1), lb=np.zeros(m), solver="clarabel")
    if w is None:  # slsqp, or Clarabel reported no solution
        from scipy.optimize import minimize

        res = minimize(lambda v: 0.5 * v @ P @ v - C @ v, np.full(m, 1.0 / m), jac=lambda v: P @ v - C,
                       method="SLSQP", bounds=[(0.0, None)] * m,
                       constraints=[{"type": "eq", "fun": lambda v: v.sum() - 1.0, "jac": lambda v: np.ones(m)}],
                       options={"ftol": 1e-12, "maxiter": 500})
        w = res.x
    w = np.clip(np.asarray(w, dtype=np.float64), 0.0, None)
    return w / w.sum()


def _z_gradient(Z: np.ndarray, beta: np.ndarray, X: np.ndarray, gamma: float, reference: bool = False) -> np.ndarray:
    """Gradient of MMD^2 in the reduced set ``Z`` (``beta`` fixed).

    ``-4 gamma beta_j [sum_l beta_l k(z_j, z_l)(z_j - z_l) - (1/n) sum_i k(z_j, x_i)(z_j - x_i)]``.
    ``reference=True`` returns learnware's ``_update_z`` direction,
    ``-2 gamma beta_j [sum_l beta_l k(z_j, z_l)(z_j - z_l) - 2 (1/n) sum_i k(z_j, x_i)(z_j - x_i)]``.
    """
    Kzz = _gaussian_kernel(Z, Z, gamma) * beta[None, :]
    term_z = Kzz.sum(1)[:, None] * Z - Kzz @ Z
    term_x = np.zeros_like(Z)
    weight = np.zeros(len(Z))
    for s in range(0, len(X), KERNEL_CHUNK):
        Kzx = _gaussian_kernel(Z, X[s:s + KERNEL_CHUNK], gamma) / len(X)
        weight += Kzx.sum(1)
        term_x += Kzx @ X[s:s + KERNEL_CHUNK]
    term_x = weight[:, None] * Z - term_x
    if reference:
        return -2.0 * gamma * beta[:, None] * (term_z - 2.0 * term_x)
    return -4.0 * gamma * beta[:, None] * (term_z - term_x)


def _mmd2(Z, beta, X, gamma, self_term) -> float:
    C = _kernel_row_means(Z, X, gamma)
    return float(beta @ _gaussian_kernel(Z, Z, gamma) @ beta - 2.0 * beta @ C + self_term)


# ----------------------------------------------------------------------------------------------
# the public kernel functions: checked wrappers of the ones the fitting loops call
# ----------------------------------------------------------------------------------------------
def _check_gamma(function: str, gamma: Any) -> float:
    return check_finite(function, "gamma", gamma, positive=True)


def _finite_matrix(function: str, argument: str, X: Any, dim: int | None = None) -> np.ndarray:
    A = _as_matrix(function, argument, X, dim=dim)
    if not np.isfinite(A).all():
        raise InputError(function, argument, "finite values", described("NaN or inf"))
    return A


def gaussian_kernel(A: np.ndarray, B: np.ndarray, gamma: float) -> np.ndarray:
    """``exp(-gamma ||a - b||^2)`` for every row pair (float64), computed in row blocks of ``A``."""
    f = "gaussian_kernel"
    A = _finite_matrix(f, "A", A)
    B = _finite_matrix(f, "B", B, dim=A.shape[1])
    return _gaussian_kernel(A, B, _check_gamma(f, gamma))


def kernel_row_means(A: np.ndarray, B: np.ndarray, gamma: float, weights: np.ndarray | None = None) -> np.ndarray:
    """``sum_i w_i k(a, b_i)`` for every row ``a`` of ``A`` (``w = 1/len(B)`` by default), blocked over ``B``.

    Never holds more than ``len(A) x KERNEL_CHUNK`` kernel values, so ``A`` of m rows against n data rows
    costs O(n m) time and O(m * chunk) memory. ``weights``: None or one finite weight per row of ``B``.
    """
    f = "kernel_row_means"
    A = _finite_matrix(f, "A", A)
    B = _finite_matrix(f, "B", B, dim=A.shape[1])
    gamma = _check_gamma(f, gamma)
    if weights is not None:
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (len(B),) or not np.isfinite(w).all():
            raise InputError(f, "weights", f"None or {len(B)} finite weights (one per row of B)", describe(w))
    return _kernel_row_means(A, B, gamma, weights)


def data_self_term(X: np.ndarray, gamma: float) -> float:
    """``(1/n^2) sum_{i,i'} k(x_i, x_i')``: the squared RKHS norm of the empirical KME (blocked)."""
    return _data_self_term(_finite_matrix("data_self_term", "X", X), _check_gamma("data_self_term", gamma))


def simplex_qp(K: np.ndarray, C: np.ndarray, solver: str = "clarabel") -> np.ndarray:
    """``argmin_w 1/2 w'Kw - C'w`` over the probability simplex (``w >= 0``, ``sum w = 1``).

    ``solver="clarabel"`` goes through ``qpsolvers.solve_qp`` as the reference's ``rkme_solve_qp`` does;
    ``"slsqp"`` is scipy's SLSQP. The result is clipped to ``>= 0`` and renormalised (solver tolerance).
    ``K``: a finite symmetric (m, m) matrix; ``C``: m finite numbers.
    """
    f = "simplex_qp"
    check_choice(f, "solver", solver, BETA_SOLVERS)
    K = _finite_matrix(f, "K", K)
    if K.shape[0] != K.shape[1] or np.abs(K - K.T).max() > 1e-8 * max(np.abs(K).max(), 1.0):
        raise InputError(f, "K", "a symmetric square matrix", describe(K))
    C = np.asarray(C, dtype=np.float64)
    if C.shape not in ((len(K),), (len(K), 1)) or not np.isfinite(C).all():
        raise InputError(f, "C", f"{len(K)} finite numbers (one per row of K)", describe(C))
    return _simplex_qp(K, C, solver)


def z_gradient(Z: np.ndarray, beta: np.ndarray, X: np.ndarray, gamma: float, reference: bool = False) -> np.ndarray:
    """Gradient of MMD^2 in the reduced set ``Z`` (m, d) with ``beta`` (m weights) fixed, against data ``X`` (n, d).

    ``-4 gamma beta_j [sum_l beta_l k(z_j, z_l)(z_j - z_l) - (1/n) sum_i k(z_j, x_i)(z_j - x_i)]``.
    ``reference=True`` returns learnware's ``_update_z`` direction,
    ``-2 gamma beta_j [sum_l beta_l k(z_j, z_l)(z_j - z_l) - 2 (1/n) sum_i k(z_j, x_i)(z_j - x_i)]``.
    """
    f = "z_gradient"
    Z = _finite_matrix(f, "Z", Z)
    beta = np.asarray(beta, dtype=np.float64)
    if beta.shape != (len(Z),) or not np.isfinite(beta).all():
        raise InputError(f, "beta", f"{len(Z)} finite weights (one per row of Z)", describe(beta))
    X = _finite_matrix(f, "X", X, dim=Z.shape[1])
    return _z_gradient(Z, beta, X, _check_gamma(f, gamma), reference=bool(reference))


# ----------------------------------------------------------------------------------------------
# the k-means start with a size floor
# ----------------------------------------------------------------------------------------------
def _kmeans_start(X: np.ndarray, m: int, min_size: int, seed: int) -> np.ndarray:
    """Centroids of ``KMeans(m, n_init=1)`` with every cluster holding at least ``min_size`` records.

    A cluster below the floor is dissolved (its records go to their nearest remaining centroid) and the
    largest cluster is split in two by 2-means, keeping ``m`` centroids; each is then the mean of its
    cluster's records. Reconstruction: the issue's fix for singleton centroids that copy a record.
    """
    from sklearn.cluster import KMeans

    labels = KMeans(n_clusters=m, n_init=1, random_state=seed).fit(X).labels_.copy()
    rng = np.random.default_rng(seed)
    for _ in range(4 * m):
        sizes = np.bincount(labels, minlength=m)
        small = np.flatnonzero(sizes < min_size)
        if len(small) == 0:
            break
        j = int(small[np.argmin(sizes[small])])
        keep = np.flatnonzero(np.arange(m) != j)
        cents = np.stack([X[labels == c].mean(0) if sizes[c] else X[rng.integers(len(X))] for c in keep])
        members = np.flatnonzero(labels == j)
        if len(members):
            d = ((X[members, None, :] - cents[None]) ** 2).sum(-1)
            labels[members] = keep[d.argmin(1)]
        big = int(np.argmax(np.bincount(labels, minlength=m)))
        rows = np.flatnonzero(labels == big)
        if len(rows) < 2 * min_size:
            break
        split = KMeans(n_clusters=2, n_init=1, random_state=seed).fit(X[rows]).labels_
        if min(split.sum(), len(split) - split.sum()) < min_size:  # an unbalanced split: cut along its axis
            order = np.argsort(X[rows] @ (X[rows][split == 1].mean(0) - X[rows][split == 0].mean(0))
                               if 0 < split.sum() < len(split) else np.arange(len(rows)))
            split = np.zeros(len(rows), dtype=int)
            split[order[len(rows) // 2:]] = 1
        labels[rows[split == 1]] = j
    return np.stack([X[labels == c].mean(0) if np.any(labels == c) else X[labels == np.argmax(np.bincount(labels))].mean(0)
                     for c in range(m)])


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


def _as_matrix(function: str, argument: str, X: Any, *, min_rows: int = 1, dim: int | None = None) -> np.ndarray:
    """``X`` as a dense float64 (n, d) array, or an error naming ``argument`` (NaN/inf pass: ``fit`` imputes)."""
    if hasattr(X, "toarray") or type(X).__module__.startswith("scipy.sparse"):
        raise InputTypeError(function, argument, "a dense 2-D array of numbers (sparse input is not supported)",
                             described(type(X).__name__))
    if np.iscomplexobj(X):
        raise InputError(function, argument, "a 2-D array of real numbers", describe(np.asarray(X)))
    try:
        A = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputTypeError(function, argument, "a 2-D array of numbers", described(type(X).__name__)) from None
    if A.ndim == 1 and dim is not None and A.shape[0] == dim:
        A = A[None, :]
    if A.ndim != 2 or A.shape[0] < min_rows or A.shape[1] < 1:
        rows = "a row" if min_rows == 1 else f"at least {min_rows} rows"
        raise InputError(function, argument, f"a 2-D array with {rows} and at least one column", describe(A))
    if dim is not None and A.shape[1] != dim:
        raise InputError(function, argument, f"{dim} features (the specification's dimension)", describe(A))
    return A


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
    fixed step), ``random_state``.

    Fitted: ``Z_`` (m x d, standardised space), ``beta_``, ``gamma_``, ``scaler_`` (or None),
    ``n_samples_``, ``mmd2_history_`` (MMD^2 to the data's KME after the start and after each alternation).
    """

    def __init__(self, n_points: int = 100, gamma: float | str = "median", steps: int = 3, step_size: float = 0.1,
                 nonnegative_beta: bool = True, reduce: bool = True, standardize: bool = True, scaler: Any = None,
                 beta_solver: str = "clarabel", min_cluster_size: int = 2, reference_update: bool = False,
                 random_state: int | None = None) -> None:
        self.n_points, self.gamma, self.steps, self.step_size = n_points, gamma, steps, step_size
        self.nonnegative_beta, self.reduce, self.standardize, self.scaler = nonnegative_beta, reduce, standardize, scaler
        self.beta_solver, self.min_cluster_size = beta_solver, min_cluster_size
        self.reference_update, self.random_state = reference_update, random_state

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
        _check_seed(f, "random_state", self.random_state)

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
        Z = _kmeans_start(Xs, m, floor, seed)
        self_term = _data_self_term(Xs, self.gamma_)
        beta = self._beta_step(Z, Xs)
        history = [_mmd2(Z, beta, Xs, self.gamma_, self_term)]
        for _ in range(int(self.steps)):
            G = _z_gradient(Z, beta, Xs, self.gamma_, reference=self.reference_update)
            if self.reference_update:
                Z = Z - self.step_size * G
            else:
                Z = self._backtrack(Z, G, beta, Xs, self_term, history[-1])
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

    def _backtrack(self, Z, G, beta, Xs, self_term, current, halvings: int = 30) -> np.ndarray:
        step = float(self.step_size)
        for _ in range(halvings):
            trial = Z - step * G
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
        _check_seed("RKMESpecification.herding", "seed", seed)
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
    _check_seed("noisy_copy_spec", "seed", seed)
    spec = RKMESpecification(reduce=False, gamma=gamma, scaler=scaler, random_state=seed).fit(X)
    spec.Z_ = spec.Z_ + sigma * np.random.default_rng(seed).standard_normal(spec.Z_.shape)
    return spec
