"""Step one of the conjoint policy learner: the randomisation design and the paired outcome model.

Jerzak, Chandra & Hazra (ICML 2026, arXiv 2504.19043); the reference's ``two_step_model_outcome_glm.R``.
Public names are re-exported by :mod:`icml26.training.conjoint.policy`.
"""

from __future__ import annotations

import itertools
import math
import weakref

import numpy as np
import torch

from icml26.errors import InputError, describe, input_error

DTYPE = torch.float64
#: profile spaces up to this size are enumerated exactly (the ``|T| x |T|`` win matrix stays below ~130 MB)
MAX_PROFILES = 4096


# ==============================================================================================
# The randomisation design
# ==============================================================================================
class FactorialDesign:
    """Factors (name -> levels) and the randomisation distribution p of each factor.

    ``levels``: a mapping from factor name to a sequence of at least two distinct levels; ``probs``: None
    (uniform) or a mapping from factor name to probabilities summing to 1 (strictly positive). Level 0 of
    each factor is the reference of the treatment coding; ``features`` codes profiles (integer level
    indices, one column per factor) as main effects and two-way interactions, each unordered pair once.
    """

    def __init__(self, levels, probs=None):
        name = "FactorialDesign"
        if not hasattr(levels, "items") or len(levels) == 0:
            raise input_error(name, "levels", "a non-empty mapping of factor name to levels", levels)
        self.factors = [str(f) for f in levels]
        self.levels = {}
        for f, lv in levels.items():
            lv = list(lv)
            if len(lv) < 2 or len(set(map(str, lv))) != len(lv):
                raise input_error(name, f"levels[{f!r}]", "at least two distinct levels", lv)
            self.levels[str(f)] = lv
        self.n_levels = [len(self.levels[f]) for f in self.factors]
        if probs is None:
            self.p = [np.full(k, 1.0 / k) for k in self.n_levels]
        else:
            if not hasattr(probs, "items") or set(map(str, probs)) != set(self.factors):
                raise input_error(name, "probs", f"None or a mapping with the factors {self.factors}", probs)
            probs = {str(k): v for k, v in probs.items()}
            self.p = []
            for f, k in zip(self.factors, self.n_levels):
                q = np.asarray(probs[f], dtype=float)
                if q.shape != (k,) or not np.all(np.isfinite(q)) or (q <= 0).any() or abs(q.sum() - 1) > 1e-8:
                    raise input_error(name, f"probs[{f!r}]", f"{k} positive probabilities summing to 1",
                                      q.tolist() if q.ndim == 1 else q)
                self.p.append(q / q.sum())
        self.n_free = sum(k - 1 for k in self.n_levels)
        self.n_profiles = math.prod(self.n_levels)
        offsets = np.cumsum([0] + [k - 1 for k in self.n_levels])
        self.free_slices = [slice(int(offsets[d]), int(offsets[d + 1])) for d in range(len(self.factors))]

    @property
    def n_factors(self) -> int:
        return len(self.factors)

    def __repr__(self) -> str:
        return f"FactorialDesign({dict(zip(self.factors, self.n_levels))})"

    def pairs(self, which="all"):
        """The unordered factor pairs (d, e), d < e: ``"all"`` or ``"none"``."""
        return list(itertools.combinations(range(self.n_factors), 2)) if which == "all" else []

    def n_coef(self, pairs) -> int:
        return self.n_free + sum((self.n_levels[d] - 1) * (self.n_levels[e] - 1) for d, e in pairs)

    def coef_names(self, pairs) -> list[str]:
        names = [f"{f}={self.levels[f][l]}" for f in self.factors for l in range(1, len(self.levels[f]))]
        for d, e in pairs:
            fd, fe = self.factors[d], self.factors[e]
            names += [f"{fd}={self.levels[fd][i]}:{fe}={self.levels[fe][j]}"
                      for i in range(1, self.n_levels[d]) for j in range(1, self.n_levels[e])]
        return names

    def as_indices(self, profiles, function="FactorialDesign.as_indices", argument="profiles") -> np.ndarray:
        """Integer level indices (n, D) from an int array or a DataFrame whose columns are the factors."""
        if hasattr(profiles, "columns"):
            cols = [str(c) for c in profiles.columns]
            if sorted(cols) != sorted(self.factors):
                raise input_error(function, argument, f"columns {self.factors}", cols)
            out = np.empty((len(profiles), self.n_factors), dtype=np.int64)
            for d, f in enumerate(self.factors):
                lookup = {str(v): i for i, v in enumerate(self.levels[f])}
                col = [str(v) for v in profiles[f].tolist()]
                unknown = sorted(set(col) - set(lookup))
                if unknown:
                    raise input_error(function, f"{argument}[{f!r}]", f"levels in {self.levels[f]}", unknown[:5])
                out[:, d] = [lookup[v] for v in col]
            return out
        arr = np.asarray(profiles)
        if arr.ndim != 2 or arr.shape[1] != self.n_factors or not np.issubdtype(arr.dtype, np.integer):
            raise input_error(function, argument, f"an integer array of shape (n, {self.n_factors}) or a DataFrame",
                              describe(arr))
        if (arr < 0).any() or (arr >= np.asarray(self.n_levels)).any():
            raise input_error(function, argument, f"level indices below {self.n_levels}",
                              f"values from {arr.min()} to {arr.max()}")
        return arr.astype(np.int64)

    def features(self, profiles, pairs) -> np.ndarray:
        """Main-effect and interaction columns of profiles (n, D) of level indices."""
        idx = self.as_indices(profiles, "FactorialDesign.features")
        main = [np.eye(k)[idx[:, d]][:, 1:] for d, k in enumerate(self.n_levels)]
        inter = [(main[d][:, :, None] * main[e][:, None, :]).reshape(len(idx), -1) for d, e in pairs]
        return np.concatenate(main + inter, axis=1)

    def profiles(self) -> np.ndarray:
        """Every profile of the design (n_profiles, D), in lexicographic order."""
        return np.array(list(itertools.product(*[range(k) for k in self.n_levels])), dtype=np.int64)

    def sample(self, n: int, rng) -> np.ndarray:
        """``n`` profiles drawn from p, factor by factor."""
        return np.stack([rng.choice(k, size=n, p=q) for k, q in zip(self.n_levels, self.p)], axis=1)

    # -- policies as torch tensors -----------------------------------------------------------------
    def p_tensor(self) -> list[torch.Tensor]:
        return [torch.as_tensor(q, dtype=DTYPE) for q in self.p]

    def to_full(self, free: torch.Tensor) -> list[torch.Tensor]:
        """Per-factor distributions from the free (non-reference) coordinates: pi_d0 = 1 - sum."""
        return [torch.cat([1 - free[s].sum().reshape(1), free[s]]) for s in self.free_slices]

    def to_free(self, pi) -> torch.Tensor:
        return torch.cat([torch.as_tensor(q, dtype=DTYPE)[1:] for q in pi])

    def expected_features(self, pi, pairs) -> torch.Tensor:
        """E_{t~pi}[x(t)]: the coded levels' probabilities and, per pair, their outer products."""
        main = [q[1:] for q in pi]
        return torch.cat(main + [torch.outer(main[d], main[e]).reshape(-1) for d, e in pairs])

    def profile_probs(self, pi, grid: torch.Tensor) -> torch.Tensor:
        """P_pi(t) for every row t of ``grid`` (the enumerated profile space)."""
        out = pi[0][grid[:, 0]]
        for d in range(1, len(pi)):
            out = out * pi[d][grid[:, d]]
        return out

    def check_policy(self, pi, function: str, argument: str) -> list[torch.Tensor]:
        if len(pi) != self.n_factors:
            raise input_error(function, argument, f"{self.n_factors} per-factor distributions", len(pi))
        out = []
        for d, q in enumerate(pi):
            q = torch.as_tensor(q, dtype=DTYPE)
            if q.shape != (self.n_levels[d],):
                raise input_error(function, f"{argument}[{d}]", f"{self.n_levels[d]} probabilities", describe(q))
            out.append(q)
        return out


# ==============================================================================================
# Step one: the paired logit
# ==============================================================================================
def fit_logit_irls(X, y, groups=None, *, max_iter: int = 50, tol: float = 1e-8):
    """Logistic regression without intercept by Newton-IRLS, with the cluster-robust sandwich.

    Returns (coef, vcov). With ``groups`` the covariance is statsmodels' ``cov_type="cluster"`` one,
    (G / (G - 1)) ((N - 1) / (N - K)) B^-1 M B^-1 with M the sum over clusters of the outer product of
    the clusters' scores; without groups it is the model-based inverse information B^-1.
    """
    X, y = np.asarray(X, dtype=float), np.asarray(y, dtype=float)
    n, k = X.shape
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
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    n_groups = codes.max() + 1
    from scipy.sparse import csr_matrix

    members = csr_matrix((np.ones(n), (codes, np.arange(n))), shape=(n_groups, n))
    scores = members @ (X * (y - mu)[:, None])  # each cluster's summed score
    meat = scores.T @ scores
    correction = n_groups / (n_groups - 1) * (n - 1) / (n - k)
    return beta, correction * bread @ meat @ bread


class PairedConjointLogit:
    """The outcome model: a logit on the difference design of forced-choice pairs.

    ``interactions``: ``"none"`` (main effects), ``"all"`` (every two-way interaction) or ``"screened"``
    (Reconstruction: the reference screens with glinternet's hierarchical group lasso; we keep the factor
    pairs whose interaction columns an L1 ``LogisticRegression`` with cross-validated C, respondent-grouped
    folds, leaves nonzero, then refit unpenalised). ``cluster``: respondent-clustered sandwich (the reference
    uses ``sandwich::vcovCL``) when respondents are given. ``backend``: ``"statsmodels"`` (``GLM(Binomial)``)
    or ``"numpy"`` (:func:`fit_logit_irls`, the same estimates about 20x faster). One row per pair: stacking
    (Y, 1 - Y) would double the information unless clustered.

    After ``fit``: ``design_``, ``pairs_`` (kept factor pairs), ``coef_``, ``vcov_``, ``coef_names_``.
    """

    def __init__(self, interactions: str = "none", cluster: bool = True, backend: str = "statsmodels",
                 screen_folds: int = 3, random_state=None):
        if interactions not in ("none", "all", "screened"):
            raise input_error("PairedConjointLogit", "interactions", "'none', 'all' or 'screened'", interactions)
        if backend not in ("statsmodels", "numpy"):
            raise input_error("PairedConjointLogit", "backend", "'statsmodels' or 'numpy'", backend)
        if not isinstance(screen_folds, int) or screen_folds < 2:
            raise input_error("PairedConjointLogit", "screen_folds", "an int >= 2", screen_folds)
        self.interactions, self.cluster, self.backend = interactions, bool(cluster), backend
        self.screen_folds, self.random_state = screen_folds, random_state

    @classmethod
    def from_coefficients(cls, design: FactorialDesign, coef, vcov=None, pairs="all") -> PairedConjointLogit:
        """A model with given coefficients (a known truth, or coefficients fitted elsewhere)."""
        model = cls(interactions="all" if pairs == "all" else "none")
        model.design_ = design
        model.pairs_ = design.pairs(pairs) if isinstance(pairs, str) else [tuple(map(int, pr)) for pr in pairs]
        k = design.n_coef(model.pairs_)
        model.coef_ = np.asarray(coef, dtype=float).reshape(-1)
        if model.coef_.shape != (k,):
            raise input_error("PairedConjointLogit.from_coefficients", "coef", f"{k} coefficients", describe(model.coef_))
        model.vcov_ = np.zeros((k, k)) if vcov is None else np.asarray(vcov, dtype=float)
        if model.vcov_.shape != (k, k):
            raise input_error("PairedConjointLogit.from_coefficients", "vcov", f"a ({k}, {k}) matrix", describe(model.vcov_))
        model.coef_names_ = design.coef_names(model.pairs_)
        return model

    def fit(self, left, right, chosen, respondent=None, design: FactorialDesign | None = None) -> PairedConjointLogit:
        name = "PairedConjointLogit.fit"
        if hasattr(left, "columns") != hasattr(right, "columns") or (
                hasattr(left, "columns") and sorted(map(str, left.columns)) != sorted(map(str, right.columns))):
            raise input_error(name, "right", "profiles over the same factors as left",
                              list(getattr(right, "columns", [])) or describe(right))
        if not hasattr(left, "columns") and np.shape(left) != np.shape(right):
            raise input_error(name, "right", f"profiles of left's shape {np.shape(left)} (the same factors)",
                              describe(np.asarray(right)))
        if design is None:
            design = _design_from_data(left, right)
        L = design.as_indices(left, name, "left")
        R = design.as_indices(right, name, "right")
        y = np.asarray(chosen)
        if y.shape != (len(L),) or not np.isin(y, (0, 1)).all():
            raise input_error(name, "chosen", f"{len(L)} values in {{0, 1}} (1: left chosen)", describe(y))
        groups = None
        if respondent is not None:
            groups = np.asarray(respondent)
            if groups.shape != (len(L),):
                raise input_error(name, "respondent", f"{len(L)} cluster labels", describe(groups))
        pairs = design.pairs("none" if self.interactions == "none" else "all")
        if self.interactions == "screened":
            pairs = self._screen(design, L, R, y, groups, pairs)
        X = design.features(L, pairs) - design.features(R, pairs)
        gram = np.linalg.eigvalsh(X.T @ X)
        rank = int((gram > 1e-10 * max(gram.max(), 1e-300)).sum())
        if rank < X.shape[1]:
            raise InputError(name, "interactions", f"terms the data identify: the difference design has rank {rank} "
                             f"< {X.shape[1]} columns (levels or level pairs never contrasted; use fewer "
                             "interactions or 'screened')", self.interactions)
        cluster = groups if (self.cluster and groups is not None) else None
        try:
            if self.backend == "numpy":
                coef, vcov = fit_logit_irls(X, y, cluster)
            else:
                import statsmodels.api as sm

                glm = sm.GLM(y.astype(float), X, family=sm.families.Binomial())
                res = (glm.fit(cov_type="cluster", cov_kwds={"groups": _codes(cluster)}) if cluster is not None
                       else glm.fit())
                coef, vcov = np.asarray(res.params), np.asarray(res.cov_params())
        except np.linalg.LinAlgError:  # separation: the likelihood has no finite maximum
            raise InputError(name, "chosen", "choices that no combination of the terms predicts perfectly "
                             "(the logit's information matrix is singular at the fit)", "separated data") from None
        self.design_, self.pairs_, self.coef_, self.vcov_ = design, pairs, coef, vcov
        self.coef_names_ = design.coef_names(pairs)
        self.n_pairs_ = len(L)
        return self

    def _screen(self, design, L, R, y, groups, pairs):
        from sklearn.linear_model import LogisticRegressionCV
        from sklearn.model_selection import GroupKFold, KFold

        X = design.features(L, pairs) - design.features(R, pairs)
        folds = (GroupKFold(self.screen_folds).split(X, y, groups) if groups is not None
                 else KFold(self.screen_folds, shuffle=True, random_state=self.random_state).split(X))
        cv = LogisticRegressionCV(Cs=10, cv=list(folds), l1_ratios=(1.0,), solver="liblinear", fit_intercept=False,
                                  scoring="neg_log_loss", random_state=self.random_state, use_legacy_attributes=False)
        coef = cv.fit(X, y).coef_.ravel()
        kept, at = [], design.n_free
        for d, e in pairs:
            width = (design.n_levels[d] - 1) * (design.n_levels[e] - 1)
            if np.any(coef[at:at + width] != 0):
                kept.append((d, e))
            at += width
        self.screen_C_ = float(np.ravel(cv.C_)[0])
        return kept

    # -- the fitted model as a function of its coefficients (torch, differentiable) ------------------
    def _check_fitted(self, function):
        if not hasattr(self, "coef_"):
            raise InputError(function, "self", "a fitted model (call fit first)", "an unfitted PairedConjointLogit")

    def coef_tensor(self) -> torch.Tensor:
        return torch.as_tensor(self.coef_, dtype=DTYPE)

    def utility(self, pi, coef=None) -> torch.Tensor:
        """E_{t~pi}[x(t)] . theta: the linear predictor's policy value (exact, no enumeration)."""
        self._check_fitted("PairedConjointLogit.utility")
        coef = self.coef_tensor() if coef is None else coef
        return self.design_.expected_features(pi, self.pairs_) @ coef

    def win_matrix(self, coef=None, strength=1.0) -> torch.Tensor:
        """sigma(strength (eta(t) - eta(u))) over every pair of profiles (t, u) of the enumerated space."""
        grid, X = _profile_table(self.design_, self.pairs_)
        eta = X @ (self.coef_tensor() if coef is None else coef)
        return torch.sigmoid(strength * (eta[:, None] - eta[None, :]))

    def win_prob(self, pi, opponent=None, coef=None) -> torch.Tensor:
        """E_{t~pi, u~opponent}[P(t chosen over u)], exact over the profile space; differentiable in pi,
        opponent and coef (defaults: opponent = the design's p, coef = ``coef_``)."""
        self._check_fitted("PairedConjointLogit.win_prob")
        design = self.design_
        if design.n_profiles > MAX_PROFILES:
            raise input_error("PairedConjointLogit.win_prob", "design", f"at most {MAX_PROFILES} profiles to "
                              "enumerate", design.n_profiles)
        pi = design.check_policy(pi, "PairedConjointLogit.win_prob", "pi") if not _all_tensors(pi) else pi
        opponent = design.p_tensor() if opponent is None else opponent
        grid, _ = _profile_table(design, self.pairs_)
        return design.profile_probs(pi, grid) @ self.win_matrix(coef) @ design.profile_probs(opponent, grid)

    def marginal_means(self) -> dict[str, np.ndarray]:
        """Per factor and level, P(a profile with that level is chosen) when the other factors and the
        opponent follow p: the marginal means ``cregg`` reports, from the fitted model."""
        self._check_fitted("PairedConjointLogit.marginal_means")
        design, out = self.design_, {}
        p = design.p_tensor()
        with torch.no_grad():
            for d, f in enumerate(design.factors):
                row = []
                for level in range(design.n_levels[d]):
                    pi = list(p)
                    pi[d] = torch.nn.functional.one_hot(torch.tensor(level), design.n_levels[d]).to(DTYPE)
                    row.append(float(self.win_prob(pi)))
                out[f] = np.array(row)
        return out

    def amce(self) -> dict[str, np.ndarray]:
        """Average marginal component effects: the marginal mean of each level minus the reference's."""
        return {f: mm - mm[0] for f, mm in self.marginal_means().items()}


def _codes(groups):
    return np.unique(np.asarray(groups), return_inverse=True)[1]


def _all_tensors(pi) -> bool:
    return all(isinstance(q, torch.Tensor) and q.dtype == DTYPE for q in pi)


def _design_from_data(left, right) -> FactorialDesign:
    """Levels seen in the data and their empirical marginals as p."""
    import pandas as pd

    if hasattr(left, "columns"):
        both = pd.concat([left, right], ignore_index=True)
    else:
        both = pd.DataFrame(np.concatenate([np.asarray(left), np.asarray(right)]))
    levels, probs = {}, {}
    for c in both.columns:
        counts = both[c].value_counts().sort_index()
        levels[str(c)] = list(counts.index)
        probs[str(c)] = (counts / counts.sum()).to_numpy()
    return FactorialDesign(levels, probs)


#: per design (weakly held: a design's tables go with it), per tuple of pairs: (grid, X)
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _profile_table(design: FactorialDesign, pairs):
    """(grid, X) of the enumerated profile space as torch tensors, cached per (design, pairs)."""
    tables = _TABLES.setdefault(design, {})
    key = tuple(pairs)
    if key not in tables:
        grid = design.profiles()
        tables[key] = (torch.as_tensor(grid), torch.as_tensor(design.features(grid, pairs), dtype=DTYPE))
    return tables[key]
