"""The Gaussian-kernel algebra of RKME specifications: kernels in row chunks, the simplex QP for the
weights ``beta``, the gradient of MMD^2 in the reduced set ``Z``, and the k-means start with a size floor.

See :mod:`icml26.training.rkme.spec` for the specification these serve and the references (Wu et al.,
TKDE 2023, arXiv 2001.07135; the ``learnware`` package 0.4). The public functions are checked wrappers of
the private ones the fitting loop calls (which skip the checks on every iteration).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from icml26.errors import InputError, InputTypeError, describe, described
from icml26.validation import check_choice, check_finite, check_int, check_random_state

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
    check_random_state("median_gamma", "seed", seed)
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


def _nearest_rows(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every row of ``A``: the index of its nearest row of ``B`` and the distance (blocked over ``A``)."""
    idx, dist = np.empty(len(A), dtype=int), np.empty(len(A))
    b2 = np.einsum("ij,ij->i", B, B)
    for s in range(0, len(A), KERNEL_CHUNK):
        a = A[s:s + KERNEL_CHUNK]
        d2 = np.einsum("ij,ij->i", a, a)[:, None] + b2[None, :] - 2.0 * a @ B.T
        idx[s:s + KERNEL_CHUNK] = d2.argmin(1)
        dist[s:s + KERNEL_CHUNK] = np.sqrt(np.maximum(d2[np.arange(len(a)), idx[s:s + KERNEL_CHUNK]], 0.0))
    return idx, dist


def _keep_off_records(Z: np.ndarray, X: np.ndarray, floor: float, rng: np.random.Generator,
                      passes: int = 20) -> np.ndarray:
    """``Z`` with every row at distance ``>= floor`` from every row of ``X``: a row closer than that to its
    nearest record ``x`` moves radially to ``x + floor (z - x) / ||z - x||`` (a random direction when it sits
    on ``x``); a move that lands near another record is corrected on the next pass, and after ``passes`` the
    radius of the move doubles each pass, so a point crowded by records leaves the crowd and the loop ends.

    Reconstruction: the issue's rule that a published reduced point never equals a training record (with
    ``m = n/2`` the ``Z`` steps drove a tenth of the points onto records).
    """
    if floor <= 0:
        return Z
    Z = Z.copy()
    target = floor * (1 + 1e-9)  # the radial move lands a hair outside, so rounding cannot leave it inside
    for p in range(passes + 200):  # a radius 2 ** 200 times the floor outgrows any data set's spread
        idx, dist = _nearest_rows(Z, X)
        close = np.flatnonzero(dist < floor)
        if len(close) == 0:
            return Z
        radius = target * 2.0 ** max(0, p + 1 - passes)
        u = Z[close] - X[idx[close]]
        norm = np.linalg.norm(u, axis=1)
        flat = norm <= 1e-12 * target
        u[flat] = rng.standard_normal((int(flat.sum()), Z.shape[1]))
        u /= np.linalg.norm(u, axis=1, keepdims=True)
        Z[close] = X[idx[close]] + radius * u
    raise RuntimeError("_keep_off_records: no placement at distance >= floor was found")


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
