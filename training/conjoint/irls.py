"""The paired logit's estimator: Newton-IRLS with the respondent-cluster sandwich (``fit_logit_irls``).

Jerzak, Chandra & Hazra (ICML 2026, arXiv 2504.19043) fit a binomial GLM on the difference design and use
``sandwich::vcovCL`` by respondent (the reference's ``two_step_model_outcome_glm.R``); this is the same estimate
and covariance as statsmodels' ``GLM(Binomial).fit(cov_type="cluster")``, about 20x faster on small designs.
"""

from __future__ import annotations

import numpy as np

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.validation import check_finite, check_int


def fit_logit_irls(X, y, groups=None, *, max_iter: int = 50, tol: float = 1e-8):
    """Logistic regression without intercept by Newton-IRLS, with the cluster-robust sandwich.

    Returns (coef, vcov). With ``groups`` the covariance is statsmodels' ``cov_type="cluster"`` one,
    (G / (G - 1)) ((N - 1) / (N - K)) B^-1 M B^-1 with M the sum over clusters of the outer product of
    the clusters' scores; without groups it is the model-based inverse information B^-1.
    """
    name = "fit_logit_irls"
    max_iter = check_int(name, "max_iter", max_iter, low=1)
    tol = check_finite(name, "tol", tol, positive=True)
    try:
        X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(name, "X", "a numeric (n, k) design matrix and n responses",
                             described(f"{type(X).__name__} and {type(y).__name__}")) from None
    if X.ndim != 2 or X.shape[0] <= X.shape[1] or X.shape[1] < 1 or not np.isfinite(X).all():
        raise input_error(name, "X", "a finite (n, k) matrix with n > k >= 1", describe(X))
    n, k = X.shape
    if y.shape != (n,) or not np.isin(y, (0, 1)).all():
        raise input_error(name, "y", f"{n} values in {{0, 1}}", describe(y))
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (n,) or len(np.unique(groups)) < 2:
            raise input_error(name, "groups", f"None or {n} cluster labels with at least two clusters",
                              describe(groups))
    beta = np.zeros(k)
    for _ in range(max_iter):
        mu = 1 / (1 + np.exp(-(X @ beta)))
        w = mu * (1 - mu)
        info = (X * w[:, None]).T @ X
        step = np.linalg.solve(info, X.T @ (y - mu))
        beta = beta + step
        if np.abs(step).max() < tol:  # Newton converges quadratically: the next step would be ~tol^2
            break
    mu = 1 / (1 + np.exp(-(X @ beta)))
    bread = np.linalg.inv((X * (mu * (1 - mu))[:, None]).T @ X)
    if groups is None:
        return beta, bread
    _, codes = np.unique(groups, return_inverse=True)
    n_groups = codes.max() + 1
    from scipy.sparse import csr_matrix

    members = csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(n_groups, n))
    scores = members @ (X * (y - mu)[:, None])  # each cluster's summed score
    meat = scores.T @ scores
    correction = n_groups / (n_groups - 1) * (n - 1) / (n - k)
    return beta, correction * bread @ meat @ bread


#: columns of :meth:`PairedConjointLogit.amce` and :meth:`PairedConjointLogit.marginal_means`, as ``cregg``'s
