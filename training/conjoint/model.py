"""Step one of the conjoint policy learner: the randomisation design and the paired outcome model.

Jerzak, Chandra & Hazra (ICML 2026, arXiv 2504.19043); the reference's ``two_step_model_outcome_glm.R``.
Public names are re-exported by :mod:`icml26.training.conjoint.policy`.
"""

from __future__ import annotations

import itertools
import math
import os

import numpy as np
import torch
from sklearn.base import BaseEstimator

from icml26.errors import InputError, InputTypeError, describe, described, input_error
from icml26.training.conjoint.irls import fit_logit_irls
from icml26.training.conjoint.profiles import (
    DTYPE,
    MAX_PROFILES,
    bilinear_mc_se,
    profile_table,
    row_weights,
)
from icml26.validation import check_choice, check_finite, check_int

#: a policy's per-factor probabilities must sum to 1 within this tolerance (float32 softmax outputs pass)
POLICY_ATOL = 1e-6
INTERACTIONS = ("none", "all", "screened")
BACKENDS = ("statsmodels", "numpy")


def _check_values(t: torch.Tensor) -> bool:
    """Whether to read a tensor's values (a GPU sync): on CPU always, elsewhere with ICML26_CHECK_VALUES=1."""
    return t.device.type == "cpu" or os.environ.get("ICML26_CHECK_VALUES") == "1"


# ==============================================================================================
# The randomisation design
# ==============================================================================================
class FactorialDesign:
    """Factors (name -> levels) and the randomisation distribution p of each factor.

    ``levels``: a mapping from factor name to a sequence of at least two distinct levels; ``probs``: None
    (uniform) or a mapping from factor name to probabilities summing to 1 (strictly positive). Level 0 of
    each factor is the reference of the treatment coding; ``features`` codes profiles (integer level
    indices, one column per factor) as main effects and two-way interactions, each unordered pair once.

    ``n_monte``: how win probabilities, AMCEs, marginal means and the game integrate over profiles. None
    (default): exactly, by enumerating the profile space, when it has at most ``MAX_PROFILES`` profiles, else by
    Monte Carlo over ``DEFAULT_MONTE`` profiles; an int >= 2: always by Monte Carlo over that many profiles.
    The Monte-Carlo sample is drawn once from p (seeded by ``random_state``, an int) and reused for every
    policy (common random numbers), each sampled profile weighted by P_pi(t) / P_p(t), so values stay smooth in
    pi and solvers see a fixed objective (Reconstruction: the reference samples ``nMonte_Qglm`` relaxed
    profiles per step; a fixed importance-weighted sample keeps the best-response gap exact for that sample).
    """

    def __init__(self, levels, probs=None, n_monte=None, random_state=0):
        name = "FactorialDesign"
        self.n_monte = None if n_monte is None else check_int(name, "n_monte", n_monte, low=2)
        self.random_state = check_int(name, "random_state", random_state, low=0)
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

    @property
    def monte_carlo(self) -> bool:
        """Whether profiles are integrated by Monte Carlo (see ``n_monte``) rather than enumerated."""
        return self.n_monte is not None or self.n_profiles > MAX_PROFILES

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
                              described(f"values from {arr.min()} to {arr.max()}"))
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
        """``n`` profiles drawn from p, factor by factor (``rng``: a numpy Generator)."""
        n = check_int("FactorialDesign.sample", "n", n, low=0)
        if not isinstance(rng, np.random.Generator):
            raise InputTypeError("FactorialDesign.sample", "rng", "a numpy Generator (numpy.random.default_rng(seed))",
                                 described(type(rng).__name__))
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
        """``pi`` as float64 tensors after checking it is a factored policy of this design (see
        :func:`check_factored_policy`); raises InputError naming ``argument``."""
        return check_factored_policy(pi, self.n_levels, function, argument, self.factors)


def check_factored_policy(pi, n_levels, function: str, argument: str, factors=None) -> list[torch.Tensor]:
    """``pi`` as float64 tensors after checking it is a factored policy: one probability vector per factor, of
    the factor's length ``n_levels[d]``, finite, non-negative and summing to 1 (within ``POLICY_ATOL``).
    Tensors keep their autograd graph; values are read on CPU (elsewhere with ``ICML26_CHECK_VALUES=1``)."""
    D = len(n_levels)
    factors = list(factors) if factors is not None else [str(d) for d in range(D)]
    expected = f"{D} per-factor probability vectors (lengths {list(n_levels)})"
    if isinstance(pi, (str, bytes)) or not hasattr(pi, "__len__") or isinstance(pi, torch.Tensor) and pi.ndim == 0:
        raise InputTypeError(function, argument, expected, described(type(pi).__name__))
    if hasattr(pi, "keys"):
        raise InputTypeError(function, argument, expected + " in factor order, not a mapping", described("a mapping"))
    if len(pi) != D:
        raise input_error(function, argument, expected, described(f"{len(pi)} vectors"))
    out = []
    for d, q in enumerate(pi):
        k, where, what = n_levels[d], f"{argument}[{d}]", f"factor {factors[d]!r}"
        try:
            t = q.to(DTYPE) if isinstance(q, torch.Tensor) else torch.as_tensor(np.asarray(q, dtype=float), dtype=DTYPE)
        except (TypeError, ValueError, RuntimeError):
            raise InputTypeError(function, where, f"{k} probabilities ({what})", described(type(q).__name__)) from None
        if t.shape != (k,):
            raise input_error(function, where, f"{k} probabilities ({what})", describe(t))
        if _check_values(t):
            v = t.detach()
            if not bool(torch.isfinite(v).all()) or bool((v < 0).any()) or abs(float(v.sum()) - 1) > POLICY_ATOL:
                raise input_error(function, where, f"{k} non-negative probabilities summing to 1 ({what})",
                                  [round(float(x), 6) for x in v])
        out.append(t)
    return out


# ==============================================================================================
# Step one: the paired logit
# ==============================================================================================
#: plus ``mc_se``, the Monte-Carlo standard error of the estimate (0 when the profile space is enumerated)
EFFECT_COLUMNS = ("feature", "level", "estimate", "std_error", "z", "p", "lower", "upper", "mc_se")


class PairedConjointLogit(BaseEstimator):
    """The outcome model: a logit on the difference design of forced-choice pairs (a scikit-learn estimator:
    parameters are stored as given, checked by ``fit``, and ``clone`` / ``get_params`` / ``set_params`` work).

    ``interactions``: ``"none"`` (main effects), ``"all"`` (every two-way interaction) or ``"screened"``
    (Reconstruction: the reference screens with glinternet's hierarchical group lasso; we keep the factor
    pairs whose interaction columns an L1 ``LogisticRegression`` with cross-validated C, respondent-grouped
    folds, leaves nonzero, then refit unpenalised). ``cluster``: respondent-clustered sandwich (the reference
    uses ``sandwich::vcovCL``) when respondents are given. ``backend``: ``"statsmodels"`` (``GLM(Binomial)``)
    or ``"numpy"`` (:func:`fit_logit_irls`, the same estimates about 20x faster). One row per pair: stacking
    (Y, 1 - Y) would double the information unless clustered.

    After ``fit``: ``design_``, ``pairs_`` (kept factor pairs), ``coef_``, ``vcov_``, ``coef_names_``;
    :meth:`amce` and :meth:`marginal_means` return ``cregg``-style tables with delta-method standard errors.
    """

    def __init__(self, interactions: str = "none", cluster: bool = True, backend: str = "statsmodels",
                 screen_folds: int = 3, random_state=None):
        self.interactions = interactions
        self.cluster = cluster
        self.backend = backend
        self.screen_folds = screen_folds
        self.random_state = random_state

    def _check_params(self, function: str) -> None:
        check_choice(function, "interactions", self.interactions, INTERACTIONS)
        check_choice(function, "backend", self.backend, BACKENDS)
        if not isinstance(self.cluster, (bool, np.bool_)):
            raise InputTypeError(function, "cluster", "a bool", described(f"{type(self.cluster).__name__} "
                                                                         f"{self.cluster!r}"))
        check_int(function, "screen_folds", self.screen_folds, low=2)
        if self.random_state is not None and not isinstance(self.random_state, (int, np.integer)):
            raise InputTypeError(function, "random_state", "None or an int",
                                 described(type(self.random_state).__name__))

    @classmethod
    def from_coefficients(cls, design: FactorialDesign, coef, vcov=None, pairs="all") -> PairedConjointLogit:
        """A model with given coefficients (a known truth, or coefficients fitted elsewhere)."""
        name = "PairedConjointLogit.from_coefficients"
        if not isinstance(design, FactorialDesign):
            raise InputTypeError(name, "design", "a FactorialDesign", described(type(design).__name__))
        if isinstance(pairs, str):
            check_choice(name, "pairs", pairs, ("all", "none"))
            kept = design.pairs(pairs)
        else:
            try:
                kept = [tuple(int(i) for i in pr) for pr in pairs]
            except (TypeError, ValueError):
                raise input_error(name, "pairs", "'all', 'none' or a list of factor index pairs (d, e)",
                                  pairs) from None
            D = design.n_factors
            if any(len(pr) != 2 or not 0 <= pr[0] < pr[1] < D for pr in kept):
                raise input_error(name, "pairs", f"factor index pairs (d, e) with 0 <= d < e < {D}", pairs)
        model = cls(interactions="all" if kept else "none")
        model.design_, model.pairs_ = design, kept
        k = design.n_coef(kept)
        try:
            model.coef_ = np.asarray(coef, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise InputTypeError(name, "coef", f"{k} numeric coefficients", described(type(coef).__name__)) from None
        if model.coef_.shape != (k,) or not np.isfinite(model.coef_).all():
            raise input_error(name, "coef", f"{k} finite coefficients", describe(model.coef_))
        model.vcov_ = np.zeros((k, k)) if vcov is None else np.asarray(vcov, dtype=float)
        if model.vcov_.shape != (k, k) or not np.isfinite(model.vcov_).all():
            raise input_error(name, "vcov", f"a finite ({k}, {k}) matrix", describe(model.vcov_))
        if vcov is not None and (np.abs(model.vcov_ - model.vcov_.T).max() > 1e-8 * max(np.abs(model.vcov_).max(), 1)
                                 or np.linalg.eigvalsh((model.vcov_ + model.vcov_.T) / 2).min()
                                 < -1e-10 * max(np.abs(model.vcov_).max(), 1)):
            raise input_error(name, "vcov", "a symmetric positive semi-definite covariance matrix",
                              described("a matrix that is not"))
        model.coef_names_ = design.coef_names(kept)
        return model

    def fit(self, left, right, chosen, respondent=None, design: FactorialDesign | None = None) -> PairedConjointLogit:
        """Fit the logit on pairs: ``left`` and ``right`` profiles (integer level indices (n, D) or DataFrames
        whose columns are the factors), ``chosen`` (1: left chosen), ``respondent`` (cluster labels or None),
        ``design`` (None: levels seen in the data, with their empirical marginals as p)."""
        name = "PairedConjointLogit.fit"
        self._check_params(name)
        if design is not None and not isinstance(design, FactorialDesign):
            raise InputTypeError(name, "design", "None or a FactorialDesign", described(type(design).__name__))
        if hasattr(left, "columns") != hasattr(right, "columns") or (
                hasattr(left, "columns") and sorted(map(str, left.columns)) != sorted(map(str, right.columns))):
            raise input_error(name, "right", "profiles over the same factors as left",
                              list(getattr(right, "columns", [])) or describe(right))
        if not hasattr(left, "columns") and np.shape(left) != np.shape(right):
            raise input_error(name, "right", f"profiles of left's shape {np.shape(left)} (the same factors)",
                              describe(np.asarray(right)))
        if len(left) == 0:
            raise input_error(name, "left", "at least one pair", described("no rows"))
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
            if self.cluster and len(np.unique(groups)) < 2:
                raise input_error(name, "respondent", "at least two respondents for a clustered covariance "
                                  "(or cluster=False)", described("one cluster"))
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

    def fit_long(self, data, *, choice: str = "selected", respondent: str = "respondent", task: str = "task",
                 profile: str = "profile", attributes=None, design: FactorialDesign | None = None):
        """Fit on long-format data, one row per profile as ``cjoint`` / ``cregg`` take it (column names as
        cjoint's ``selected``, ``respondent.id``, ``task.id``, ``profile.id``); see
        :func:`icml26.training.conjoint.long.pairs_from_long` for each argument. Clusters are respondents."""
        from icml26.training.conjoint.long import pairs_from_long

        left, right, chosen, ids = pairs_from_long(data, choice=choice, respondent=respondent, task=task,
                                                   profile=profile, attributes=attributes,
                                                   function="PairedConjointLogit.fit_long")
        return self.fit(left, right, chosen, ids, design)

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

    def _check_coef(self, function, coef) -> torch.Tensor:
        if coef is None:
            return self.coef_tensor()
        try:
            t = coef.to(DTYPE) if isinstance(coef, torch.Tensor) else torch.as_tensor(coef, dtype=DTYPE)
        except (TypeError, ValueError, RuntimeError):
            raise InputTypeError(function, "coef", f"None or {len(self.coef_)} coefficients",
                                 described(type(coef).__name__)) from None
        if t.shape != (len(self.coef_),) or (_check_values(t) and not bool(torch.isfinite(t.detach()).all())):
            raise input_error(function, "coef", f"None or {len(self.coef_)} finite coefficients", describe(t))
        return t

    def coef_tensor(self) -> torch.Tensor:
        return torch.as_tensor(self.coef_, dtype=DTYPE)

    def utility(self, pi, coef=None) -> torch.Tensor:
        """E_{t~pi}[x(t)] . theta: the linear predictor's policy value (exact, no enumeration)."""
        name = "PairedConjointLogit.utility"
        self._check_fitted(name)
        pi = self.design_.check_policy(pi, name, "pi")
        return self._utility(pi, self._check_coef(name, coef))

    def _utility(self, pi, coef) -> torch.Tensor:
        return self.design_.expected_features(pi, self.pairs_) @ coef

    def win_matrix(self, coef=None, strength=1.0) -> torch.Tensor:
        """sigma(strength (eta(t) - eta(u))) over every pair of rows (t, u) of the design's profile table: the
        enumerated profile space, or its fixed Monte-Carlo sample (``FactorialDesign(n_monte=...)``)."""
        name = "PairedConjointLogit.win_matrix"
        self._check_fitted(name)
        strength = check_finite(name, "strength", strength, non_negative=True)
        return self._win_matrix(self._check_coef(name, coef), strength)

    def _win_matrix(self, coef, strength=1.0) -> torch.Tensor:
        grid, X, _ = profile_table(self.design_, self.pairs_)
        eta = X @ coef
        return torch.sigmoid(strength * (eta[:, None] - eta[None, :]))

    def win_prob(self, pi, opponent=None, coef=None) -> torch.Tensor:
        """E_{t~pi, u~opponent}[P(t chosen over u)]: exact over the profile space up to ``MAX_PROFILES`` profiles,
        else by Monte Carlo over the design's fixed sample (see :class:`FactorialDesign` and
        :meth:`win_prob_mc_se`); differentiable in pi, opponent and coef (defaults: opponent = the design's p,
        coef = ``coef_``). ``pi`` and ``opponent`` are factored policies: one probability vector per factor
        (non-negative, summing to 1)."""
        name = "PairedConjointLogit.win_prob"
        pi, opponent, coef = self._check_pair(name, pi, opponent, coef)
        return self._win_prob(pi, opponent, coef)

    def win_prob_mc_se(self, pi, opponent=None, coef=None) -> float:
        """The Monte-Carlo standard error of :meth:`win_prob` (0.0 when the profile space is enumerated)."""
        name = "PairedConjointLogit.win_prob_mc_se"
        pi, opponent, coef = self._check_pair(name, pi, opponent, coef)
        design = self.design_
        if not design.monte_carlo:
            return 0.0
        grid, _, base = profile_table(design, self.pairs_)
        with torch.no_grad():
            a, b = row_weights(design, pi, grid, base), row_weights(design, opponent, grid, base)
            return float(bilinear_mc_se(a[None, :], self._win_matrix(coef), b)[0])

    def _check_pair(self, name, pi, opponent, coef):
        self._check_fitted(name)
        design = self.design_
        pi = design.check_policy(pi, name, "pi")
        opponent = design.p_tensor() if opponent is None else design.check_policy(opponent, name, "opponent")
        return pi, opponent, self._check_coef(name, coef)

    def _win_prob(self, pi, opponent=None, coef=None) -> torch.Tensor:
        """:meth:`win_prob` without checks (inside solvers and ``torch.func`` transforms)."""
        design = self.design_
        opponent = design.p_tensor() if opponent is None else opponent
        coef = self.coef_tensor() if coef is None else coef
        grid, _, base = profile_table(design, self.pairs_)
        return row_weights(design, pi, grid, base) @ self._win_matrix(coef) @ row_weights(design, opponent, grid, base)

    def _level_weights(self) -> torch.Tensor:
        """(sum L_d, rows): row weights of the policies "level l of factor d, the rest p", one per level.

        With the level of factor d fixed at l and the rest following p, P(t) = [t_d = l] P_p(t) / p_dl."""
        design = self.design_
        grid, _, base = profile_table(design, self.pairs_)
        probs = row_weights(design, design.p_tensor(), grid, base)
        out = torch.cat([(torch.nn.functional.one_hot(grid[:, d], design.n_levels[d]).to(DTYPE) * probs[:, None]).T
                         for d in range(design.n_factors)])
        return out / out.sum(1, keepdim=True)  # = [t_d = l] P_p(t) / p_dl when enumerated

    def _marginal_means(self, coef) -> torch.Tensor:
        """Every level's marginal mean, factor by factor (sum of L_d entries), as a function of coef: the win
        probability against p of the policy with that level fixed and the other factors following p."""
        design = self.design_
        grid, _, base = profile_table(design, self.pairs_)
        return self._level_weights() @ (self._win_matrix(coef) @ row_weights(design, design.p_tensor(), grid, base))

    def _effects_table(self, function, conf_level, h0, amce: bool):
        import pandas as pd
        from scipy.stats import norm
        from torch.func import jacrev

        self._check_fitted(function)
        conf_level = check_finite(function, "conf_level", conf_level, low=0, high=1, low_open=True, high_open=True)
        h0 = check_finite(function, "h0", h0)
        design, coef = self.design_, self.coef_tensor()
        with torch.no_grad():
            mm = self._marginal_means(coef)
        # a Monte-Carlo table makes the win matrix large: reverse passes a few outputs at a time
        J = jacrev(self._marginal_means, chunk_size=4 if design.monte_carlo else None)(coef)
        A = self._level_weights()
        if amce:  # each level minus its factor's reference level (level 0): estimate and Jacobian row alike
            starts = np.cumsum([0] + design.n_levels[:-1])
            ref = torch.as_tensor(np.repeat(starts, design.n_levels))
            mm, J = mm - mm[ref], J - J[ref]
        mc_se = np.zeros(len(mm))
        if design.monte_carlo:
            grid, _, base = profile_table(design, self.pairs_)
            with torch.no_grad():
                mc_se = bilinear_mc_se(A, self._win_matrix(coef), row_weights(design, design.p_tensor(), grid, base),
                                       A[ref] if amce else None).numpy()
        cov = J @ torch.as_tensor(self.vcov_, dtype=DTYPE) @ J.T
        estimate = mm.numpy()
        se = np.sqrt(np.clip(np.diagonal(cov.numpy()), 0, None))
        if amce:  # the reference rows are 0 by definition: no standard error, as cregg reports them
            se[np.cumsum([0] + design.n_levels[:-1])] = np.nan
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(se > 0, (estimate - h0) / se, np.nan)
        crit = float(norm.ppf(0.5 + conf_level / 2))
        return pd.DataFrame({
            "feature": [f for f in design.factors for _ in design.levels[f]],
            "level": [lv for f in design.factors for lv in design.levels[f]],
            "estimate": estimate, "std_error": se, "z": z, "p": 2 * norm.sf(np.abs(z)),
            "lower": estimate - crit * se, "upper": estimate + crit * se, "mc_se": mc_se},
            columns=list(EFFECT_COLUMNS))

    def marginal_means(self, conf_level: float = 0.95, h0: float = 0.5):
        """Per factor and level, P(a profile with that level is chosen) when the other factors and the
        opponent follow p: the marginal means ``cregg`` reports, from the fitted model.

        Returns a pandas DataFrame, one row per level, with columns ``feature``, ``level``, ``estimate``,
        ``std_error`` (delta method, J Sigma J^T with ``vcov_``, respondent-clustered when the model was), ``z``
        and ``p`` (the normal test of ``estimate = h0``; 0.5 is no effect in a forced choice, ``cregg``'s
        default is 0), the ``conf_level`` normal interval ``lower``, ``upper``, and ``mc_se``, the Monte-Carlo
        standard error of the estimate when the design integrates by Monte Carlo (0 when enumerated).
        """
        return self._effects_table("PairedConjointLogit.marginal_means", conf_level, h0, amce=False)

    def amce(self, conf_level: float = 0.95):
        """Average marginal component effects on the probability scale: each level's marginal mean minus
        its factor's reference level's (level 0), as a DataFrame with the columns of :meth:`marginal_means`
        (``z`` and ``p`` test AMCE = 0). Reference rows have estimate 0 and NaN standard errors, as in
        ``cregg``."""
        return self._effects_table("PairedConjointLogit.amce", conf_level, 0.0, amce=True)


def _codes(groups):
    return np.unique(np.asarray(groups), return_inverse=True)[1]


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
