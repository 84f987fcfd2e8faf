"""Factored stochastic policies learned from paired conjoint data, with delta-method uncertainty.

Jerzak, Chandra & Hazra, "MiniMax Learning of Interpretable Factored Stochastic Policies from Conjoint
Data, with Uncertainty Quantification" (ICML 2026, arXiv 2504.19043); reference code: the R package
``strategize`` (cjerzak/strategize-software, GPL-3), whose files are named below where we follow them.

A policy is a product of per-factor categorical distributions, pi = (x)_d Categorical(pi_d). Step one
fits a logit on the difference design of forced-choice pairs, logit P(left chosen) = (x(t_L) - x(t_R)) . theta,
x(t) holding treatment-coded main effects (level 0 of each factor is the reference) and two-way
interactions (``two_step_model_outcome_glm.R``). Step two maximises a policy value minus a penalty
towards the randomisation design p, on one of two scales:

- ``"linear"``: U(pi) = E_{t~pi}[x(t)] . theta, a quadratic in pi whose stationary point solves C pi = b
  (``two_step_optimize_exact_solution.R``; this is the closed form of the paper's "two-way interactions + L2");
- ``"probability"``: Q(pi) = E_{t~pi, u~p}[sigma((x(t) - x(u)) . theta)], the win probability against the
  design's opponent, computed exactly by enumerating the profile space, maximised by gradient ascent.

Uncertainty is the delta method Var = J Sigma J^T, Sigma the respondent-clustered sandwich of the logit and
J = d(value, pi*)/d theta by ``torch.func`` through the closed form, through the unrolled ascent, or by
implicit differentiation of the optimality condition. The two-party game is :class:`MinimaxPolicy`
(re-exported from :mod:`.conjoint_minimax`).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import torch

from icml26.errors import InputError, check_finite, describe, input_error

__all__ = ["FactorialDesign", "PairedConjointLogit", "AverageCasePolicy", "AverageCasePolicyCV", "MinimaxPolicy",
           "fit_logit_irls", "penalty", "PENALTIES"]

PENALTIES = ("L2", "KL", "L1", "LInfinity")
DTYPE = torch.float64
#: profile spaces up to this size are enumerated exactly (the |T| x |T| win matrix stays below ~130 MB)
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
# Penalties towards the design
# ==============================================================================================
def penalty(kind: str, pi, p) -> torch.Tensor:
    """Pen(pi, p) summed over factors: ``L2`` sum (pi - p)^2, ``KL`` sum p log(p / pi) (KL(p||pi), as the
    reference's ``two_step_optimize_get_q.R``), ``L1`` sum |pi - p|, ``LInfinity`` sum_d max_l |pi_d - p_d|
    (Reconstruction: the reference's per-factor reduction is not documented; we sum the factors' maxima)."""
    terms = []
    for q, base in zip(pi, p):
        if kind == "L2":
            terms.append(((q - base) ** 2).sum())
        elif kind == "KL":
            terms.append((base * (torch.log(base) - torch.log(q))).sum())
        elif kind == "L1":
            terms.append((q - base).abs().sum())
        elif kind == "LInfinity":
            terms.append((q - base).abs().max())
        else:
            raise input_error("penalty", "kind", f"one of {PENALTIES}", kind)
    return torch.stack(terms).sum()


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
        cluster = groups if (self.cluster and groups is not None) else None
        if self.backend == "numpy":
            coef, vcov = fit_logit_irls(X, y, cluster)
        else:
            import statsmodels.api as sm

            glm = sm.GLM(y.astype(float), X, family=sm.families.Binomial())
            res = glm.fit(cov_type="cluster", cov_kwds={"groups": _codes(cluster)}) if cluster is not None else glm.fit()
            coef, vcov = np.asarray(res.params), np.asarray(res.cov_params())
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


_TABLES: dict = {}


def _profile_table(design: FactorialDesign, pairs):
    """(grid, X) of the enumerated profile space as torch tensors, cached per (design, pairs)."""
    key = (id(design), tuple(pairs))
    hit = _TABLES.get(key)
    if hit is None or hit[0] is not design:
        grid = design.profiles()
        hit = (design, torch.as_tensor(grid), torch.as_tensor(design.features(grid, pairs), dtype=DTYPE))
        _TABLES[key] = hit
    return hit[1], hit[2]


# ==============================================================================================
# Step two: the average-case policy
# ==============================================================================================
def _quadratic_form(model: PairedConjointLogit, coef: torch.Tensor):
    """(beta, B) with U(pi) = beta . f + f^T B f / 2 over the free coordinates f (each pair once)."""
    design, n = model.design_, model.design_.n_free
    beta = coef[:n]
    B = torch.zeros(n, n, dtype=DTYPE)
    at = n
    for d, e in model.pairs_:
        sd, se = design.free_slices[d], design.free_slices[e]
        block = coef[at:at + (sd.stop - sd.start) * (se.stop - se.start)].reshape(sd.stop - sd.start, -1)
        B[sd, se] = block
        B[se, sd] = block.T
        at += block.numel()
    return beta, B


def closed_form_system(model: PairedConjointLogit, lam: float, coef: torch.Tensor | None = None):
    """(C, b) of the stationarity condition C f = b of U(pi) - lam sum (pi - p)^2 in the free coordinates.

    With pi_d = c_d + A_d f_d (c_d the reference level, A_d = [-1; I]), C = B - 2 lam A^T A and
    b = -beta + 2 lam A^T (c - p): C_{ll} = -4 lam, C_{ll'} = -2 lam within a factor, C = beta_{dl,d'l'}
    across factors, b_l = -beta_l - 4 lam p_l - 2 lam sum_{l' != l free} p_l', as ``getPiStar_exact`` of the
    reference (``two_step_optimize_exact_solution.R``).
    """
    design = model.design_
    coef = model.coef_tensor() if coef is None else coef
    beta, B = _quadratic_form(model, coef)
    AtA = torch.zeros(design.n_free, design.n_free, dtype=DTYPE)
    Atcp = torch.zeros(design.n_free, dtype=DTYPE)
    for s, q in zip(design.free_slices, design.p):
        k = s.stop - s.start
        AtA[s, s] = torch.eye(k, dtype=DTYPE) + 1
        Atcp[s] = -(1 - q[0]) - torch.as_tensor(q[1:], dtype=DTYPE)  # A^T (c - p) = -(1 - p_0) - p_l
    return B - 2 * lam * AtA, -beta + 2 * lam * Atcp


def _check_lam(function, lam):
    lam = check_finite(function, "lam", lam)
    if lam < 0:
        raise input_error(function, "lam", "a number >= 0", lam)
    return lam


def _softmax_split(design, logits):
    return [torch.softmax(logits[s], 0) for s in _logit_slices(design)]


def _logit_slices(design):
    offsets = np.cumsum([0] + design.n_levels)
    return [slice(int(offsets[d]), int(offsets[d + 1])) for d in range(design.n_factors)]


def _initial_logits(design, rng, sd=1e-3):
    """alr(p) + N(0, sd^2), the reference's start (``a_init_sd = 0.001``)."""
    base = np.concatenate([np.log(q) - np.log(q[0]) for q in design.p])
    noise = rng.normal(0, sd, base.shape) if rng is not None else 0.0
    return torch.as_tensor(base + noise, dtype=DTYPE)


def ascend(objective, logits0: torch.Tensor, smooth: bool, max_iter: int = 500, lr: float = 0.05) -> torch.Tensor:
    """Maximise ``objective(logits)``: L-BFGS with a strong-Wolfe line search when the objective is smooth,
    else Adam with a step decaying as 1/sqrt(t) (L1 and LInfinity penalties)."""
    logits = logits0.detach().clone().requires_grad_(True)
    if smooth:
        opt = torch.optim.LBFGS([logits], lr=1.0, max_iter=max_iter, tolerance_grad=1e-12, tolerance_change=1e-15,
                                history_size=20, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = -objective(logits)
            loss.backward()
            return loss

        opt.step(closure)
    else:
        opt = torch.optim.Adam([logits], lr=lr)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda t: 1 / math.sqrt(1 + t / 50))
        for _ in range(max_iter * 2):
            opt.zero_grad()
            (-objective(logits)).backward()
            opt.step()
            sched.step()
    return logits.detach()


@dataclass
class _Fit:
    """What a solve returns: the policy and, for the delta method, the function theta -> outputs."""

    pi: list
    solver: str


class AverageCasePolicy:
    """The average-case optimal factored policy: argmax_pi value(pi) - lam Pen(pi, p), with delta-method SEs.

    ``scale="linear"`` maximises U(pi) = E_pi[x(t)] . theta (the quadratic of the paper's closed form);
    ``scale="probability"`` maximises Q(pi) = E_{t~pi,u~p}[P(t beats u)] under the fitted logit (enumerated).
    ``solver``: ``"auto"`` (closed form when it is valid, else gradient ascent), ``"closed_form"`` (forced:
    refused unless L2, the linear scale, C negative definite and pi* interior) or ``"gradient"`` (ascent on
    softmax logits). ``se_method``: ``"auto"`` (closed form after a closed-form solve, implicit otherwise; none, NaN
    SEs, for the non-smooth L1/LInfinity, whose optima sit on kinks where pi*(theta) has no derivative), ``"closed_form"``, ``"unrolled"`` (differentiates ``n_unroll`` steps of
    gradient ascent on the logits, the reference's ``se_method="full"``) or ``"implicit"`` (the implicit
    function theorem at the optimum, in the free coordinates).

    After ``fit(model, design)``: ``pi_`` (one array per factor), ``objective_`` (penalised), ``value_``
    (the unpenalised value on ``scale``), ``value_se_``, ``pi_se_``, ``solver_used_``, ``jacobian_``
    (d(value, pi)/d theta) and :meth:`conf_int`.
    """

    def __init__(self, penalty: str = "L2", lam: float = 1.0, solver: str = "auto", se_method: str = "auto",
                 scale: str = "linear", conf_level: float = 0.90, max_iter: int = 500, n_unroll: int = 300,
                 random_state=None):
        name = "AverageCasePolicy"
        if penalty not in PENALTIES:
            raise input_error(name, "penalty", f"one of {PENALTIES}", penalty)
        if solver not in ("auto", "closed_form", "gradient"):
            raise input_error(name, "solver", "'auto', 'closed_form' or 'gradient'", solver)
        if se_method not in ("auto", "closed_form", "unrolled", "implicit"):
            raise input_error(name, "se_method", "'auto', 'closed_form', 'unrolled' or 'implicit'", se_method)
        if scale not in ("linear", "probability"):
            raise input_error(name, "scale", "'linear' or 'probability'", scale)
        conf_level = check_finite(name, "conf_level", conf_level)
        if not 0 < conf_level < 1:
            raise input_error(name, "conf_level", "a number in (0, 1)", conf_level)
        self.penalty, self.lam, self.solver, self.se_method = penalty, _check_lam(name, lam), solver, se_method
        self.scale, self.conf_level, self.max_iter, self.n_unroll = scale, conf_level, max_iter, n_unroll
        self.random_state = random_state

    # -- objective ---------------------------------------------------------------------------------
    def _value(self, model, pi, coef):
        return model.utility(pi, coef) if self.scale == "linear" else model.win_prob(pi, None, coef)

    def _objective(self, model, pi, coef):
        return self._value(model, pi, coef) - self.lam * penalty(self.penalty, pi, model.design_.p_tensor())

    def _closed_form(self, model, coef):
        C, b = closed_form_system(model, self.lam, coef)
        return torch.linalg.solve(C, b)

    def _closed_form_problem(self, model) -> str | None:
        """Why the closed form does not apply here, or None."""
        if self.penalty != "L2" or self.scale != "linear":
            return f"the closed form needs penalty='L2' and scale='linear' (got {self.penalty!r}, {self.scale!r})"
        C, b = closed_form_system(model, self.lam)
        top = float(torch.linalg.eigvalsh((C + C.T) / 2).max())
        if not top < 0:
            return f"C is not negative definite (largest eigenvalue {top:.4g})"
        full = model.design_.to_full(torch.linalg.solve(C, b))
        low = min(float(q.min()) for q in full)
        if not (low > 0 and max(float(q.max()) for q in full) < 1):
            return f"pi* = C^-1 b leaves the simplex (smallest probability {low:.4g})"
        return None

    def fit(self, model: PairedConjointLogit, design: FactorialDesign | None = None) -> AverageCasePolicy:
        pi = self._solve(model, design)
        self._delta_method(model, pi)
        return self

    def _solve(self, model, design=None) -> list[torch.Tensor]:
        """Validate, solve and set ``pi_``, ``value_``, ``objective_``, ``solver_used_``; no SEs."""
        name = "AverageCasePolicy.fit"
        if not isinstance(model, PairedConjointLogit):
            raise TypeError(f"{name}: model: expected a PairedConjointLogit, got {type(model).__name__}")
        model._check_fitted(name)
        if design is not None and (design.factors != model.design_.factors or design.n_levels != model.design_.n_levels):
            raise input_error(name, "design", f"the model's design {model.design_!r}", design)
        design = model.design_
        self.design_, self.model_ = design, model
        problem = self._closed_form_problem(model) if self.solver != "gradient" else "gradient requested"
        if self.solver == "closed_form" and problem:
            raise input_error(name, "solver", "'auto' or 'gradient' here: " + problem, "closed_form")
        coef = model.coef_tensor()
        if problem is None:
            pi = design.to_full(self._closed_form(model, coef))
            self.solver_used_ = "closed_form"
        else:
            rng = np.random.default_rng(self.random_state)
            smooth = self.penalty in ("L2", "KL")
            logits = ascend(lambda a: self._objective(model, _softmax_split(design, a), coef),
                            _initial_logits(design, rng), smooth, self.max_iter)
            pi = _softmax_split(design, logits)
            self.solver_used_ = "gradient" + ("" if self.solver == "gradient" else f" ({problem})")
        with torch.no_grad():
            self.pi_ = [q.detach().numpy().copy() for q in pi]
            self.value_ = float(self._value(model, pi, coef))
            self.objective_ = float(self._objective(model, pi, coef))
        return pi

    # -- uncertainty -------------------------------------------------------------------------------
    def _delta_method(self, model, pi):
        from torch.func import jacrev

        design = model.design_
        method = self.se_method
        if method == "auto":
            method = ("closed_form" if self.solver_used_ == "closed_form" else
                      "implicit" if self.penalty in ("L2", "KL") else "none")
        if method == "none":  # L1 / LInfinity optima sit on kinks where pi*(theta) is not differentiable
            self.se_method_used_, self.jacobian_ = "none", None
            self.value_se_ = math.nan
            self.pi_se_ = [np.full(k, math.nan) for k in design.n_levels]
            return
        if method == "closed_form" and self.solver_used_ != "closed_form":
            raise input_error("AverageCasePolicy.fit", "se_method", "'implicit' or 'unrolled' when the closed form "
                              "was not used", "closed_form")
        self.se_method_used_ = method
        coef0 = model.coef_tensor()

        def outputs(full, coef):
            return torch.cat([self._value(model, full, coef).reshape(1), torch.cat(full)])

        if method == "closed_form":
            J = jacrev(lambda c: outputs(design.to_full(self._closed_form(model, c)), c))(coef0)
        elif method == "implicit":
            z0 = design.to_free(pi).detach()
            grad_F = jacrev(lambda z, c: self._objective(model, design.to_full(z), c))
            H = jacrev(grad_F, argnums=0)(z0, coef0)
            G_theta = jacrev(grad_F, argnums=1)(z0, coef0)
            dz = -torch.linalg.solve(H, G_theta)
            dout_dz, dout_dc = jacrev(lambda z, c: outputs(design.to_full(z), c), argnums=(0, 1))(z0, coef0)
            J = dout_dz @ dz + dout_dc
        else:
            a0 = _initial_logits(design, None)
            step = self._unroll_step(model, a0, coef0)

            smooth = self.penalty in ("L2", "KL")

            def unrolled(c):
                a = a0
                g = torch.func.grad(lambda x: self._objective(model, _softmax_split(design, x), c))
                for t in range(self.n_unroll):  # a subgradient needs a decaying step to settle at a kink
                    a = a + (step if smooth else step / math.sqrt(1 + t / 50)) * g(a)
                return outputs(_softmax_split(design, a), c)

            J = jacrev(unrolled)(coef0)
        cov = J @ torch.as_tensor(model.vcov_, dtype=DTYPE) @ J.T
        se = torch.sqrt(torch.clamp(torch.diagonal(cov), min=0)).numpy()
        self.jacobian_ = J.detach().numpy()
        self.value_se_ = float(se[0])
        offsets = np.cumsum([1] + design.n_levels)
        self.pi_se_ = [se[offsets[d]:offsets[d + 1]] for d in range(design.n_factors)]

    def _unroll_step(self, model, a0, coef):
        """1 / (largest curvature of the objective in the logits at the start), the plain-GD step."""
        if self.penalty == "KL":
            design = model.design_
            H = torch.func.hessian(lambda a: self._objective(model, _softmax_split(design, a), coef))(a0)
            return 1.0 / max(float(torch.linalg.eigvalsh((H + H.T) / 2).abs().max()), 1e-8)
        design, p = model.design_, model.design_.p_tensor()
        # L1 / LInfinity have no curvature at p: their step is sized on the L2 penalty of the same lam
        H = torch.func.hessian(lambda a: self._value(model, _softmax_split(design, a), coef)
                               - self.lam * penalty("L2", _softmax_split(design, a), p))(a0)
        return 1.0 / max(float(torch.linalg.eigvalsh((H + H.T) / 2).abs().max()), 1e-8)

    def conf_int(self, conf_level: float | None = None) -> dict:
        """Normal intervals: {"value": (lo, hi), factor: array (L_d, 2)} at ``conf_level`` (default the
        estimator's)."""
        from scipy.stats import norm

        level = self.conf_level if conf_level is None else conf_level
        z = float(norm.ppf(0.5 + level / 2))
        out = {"value": (self.value_ - z * self.value_se_, self.value_ + z * self.value_se_)}
        for f, q, s in zip(self.design_.factors, self.pi_, self.pi_se_):
            out[f] = np.stack([q - z * s, q + z * s], axis=1)
        return out


class AverageCasePolicyCV:
    """lam chosen by respondent-grouped K-fold cross-fitting of the policy value.

    For each lam in ``lams`` and each fold, the outcome model is fitted on the other folds, the policy solved
    there, and its value measured under a model fitted on the held-out fold (the reference's
    ``cv_strategize``: the out-of-fold value). ``lam_`` maximises the mean; ``cv_values_`` holds the means
    (one per lam); ``best_estimator_`` is the policy refitted on all data at ``lam_``.
    """

    def __init__(self, lams, n_folds: int = 3, model_params: dict | None = None, random_state=None, **policy_params):
        lams = [_check_lam("AverageCasePolicyCV", lam) for lam in np.ravel(lams)]
        if not lams:
            raise input_error("AverageCasePolicyCV", "lams", "at least one lam", lams)
        if not isinstance(n_folds, int) or n_folds < 2:
            raise input_error("AverageCasePolicyCV", "n_folds", "an int >= 2", n_folds)
        self.lams, self.n_folds, self.random_state = lams, n_folds, random_state
        self.model_params = dict(model_params or {})
        self.policy_params = policy_params

    def fit(self, left, right, chosen, respondent, design: FactorialDesign | None = None) -> AverageCasePolicyCV:
        from sklearn.model_selection import GroupKFold

        design = design or _design_from_data(left, right)
        L, R = design.as_indices(left), design.as_indices(right)
        y, groups = np.asarray(chosen), np.asarray(respondent)
        values = np.zeros((len(self.lams), self.n_folds))
        for k, (train, test) in enumerate(GroupKFold(self.n_folds).split(L, y, groups)):
            fitted = PairedConjointLogit(**self.model_params).fit(L[train], R[train], y[train], groups[train], design)
            # the held-out fold is scored by the unscreened model of the same family
            held_params = dict(self.model_params)
            if held_params.get("interactions") == "screened":
                held_params["interactions"] = "all"
            held = PairedConjointLogit(**held_params).fit(L[test], R[test], y[test], groups[test], design)
            for i, lam in enumerate(self.lams):
                policy = AverageCasePolicy(lam=lam, **self.policy_params)
                pi = policy._solve(fitted, design)  # the fold fits need no SEs
                with torch.no_grad():
                    values[i, k] = float(policy._value(held, pi, held.coef_tensor()))
        self.cv_values_ = values.mean(1)
        self.cv_folds_ = values
        self.lam_ = float(self.lams[int(np.argmax(self.cv_values_))])
        model = PairedConjointLogit(**self.model_params).fit(L, R, y, groups, design)
        self.best_estimator_ = AverageCasePolicy(lam=self.lam_, **self.policy_params).fit(model, design)
        return self


from .conjoint_minimax import MinimaxPolicy  # noqa: E402  (defined beside, uses the pieces above)
