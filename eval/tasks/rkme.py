"""Inversion-risk games for learnware specifications on scikit-learn's digits.

The ICML 2026 paper ("A Statistical Framework for Analyzing Specification Resistance to Learnware-Inversion
Risks") defines the risk of a specification as the incremental Bayes value of a statistical decision game:
``R = V(f_D, s_D) - V(f_D)`` with ``V(O) = E[max_a E[g(theta, a) | O]]``. Its game definitions were not
available. Reconstruction: the games of its predecessor (Lei, Tan, Zhou, NeurIPS 2024, Algorithms 1-2,
after Stadler et al.'s synthetic-data privacy games), played by empirical adversaries. An empirical
adversary's value is a LOWER bound on the Bayes value, so a weak attack makes a specification look safe:
every game reports the ``reduce=False`` positive control beside it, and the risk is the max over a learned
adversary and an oracle nearest-reduced-point attack.

World: digits are split once into a public part (the market's scaler and gamma, the adversary's
population knowledge) and a private pool. In each world a developer set ``D`` of ``n`` private records
trains the released model ``f_D`` (a multinomial logistic regression on standardised features) and the
specification ``s_D``.

- :class:`MembershipGame` (theta = b, was the target ``x*`` in ``D``?): ``b ~ Bernoulli(1/2)``; targets are
  random private records or outliers (the 5% with the largest nearest-neighbour distance). Features of the
  model-only adversary: ``f_D``'s loss and confidence on ``(x*, y*)``; with the spec add ``s(x*)``,
  ``s(x*)`` minus its median over public records, and ``log min_j ||z_j - x*||``. Adversaries are logistic
  regressions fit on shadow worlds (5-fold cross-fitting over the worlds) and the oracle, a threshold on
  ``min_j ||z_j - x*||`` fit the same way; the with-spec value is the best of these and the model-only
  attack (an adversary may ignore the spec, ``V(f, s) >= V(f)``), chosen on the evaluation worlds, which
  biases the incremental risk up, never down. Advantage ``2 acc - 1``; the paired difference of the per-world
  correctness of the best with-spec adversary and the model-only one, with a normal 95% interval.
- :class:`LiraGame`: membership against the online per-target LiRA (Carlini et al., arXiv 2112.03570;
  :mod:`icml26.training.rkme.lira`), the attacker strong enough to test the paper's claim: ``2 pairs`` worlds
  on complementary halves of a pool of ``2 n`` private records, each world in turn released with the other
  pairs as its shadows; every pool record is a target in every world. Three adversaries: the model's
  ``phi = log(p / (1 - p))``, the log nearest-reduced-point distance, and both (log ratios added); the
  advantage is each target's ``TPR - FPR`` at log ratio > 0, averaged, and the increment (both minus model
  only) is paired over targets with a normal 95% interval.
- :class:`AttributeGame` (theta = ``x*``'s hidden pixel, given the others and ``x* in D``): the adversary
  picks a value on a grid. Without the spec: the better of the model (``argmax_v p_f(y* | x*(v))``) and the
  population (``argmax_v`` of the public data's kernel mean at ``x*(v)``); with the spec also
  ``argmax_v s(x*(v))`` and ``argmin_v min_j ||z_j - x*(v)||``. Gain = accuracy with - accuracy without.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from icml26.errors import InputError, InputTypeError, describe, described
from icml26.validation import check_choice, check_finite, check_int

TARGETS = ("random", "outlier")
#: records in scikit-learn's digits
N_DIGITS = 1797



# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
@dataclass
class DigitsSplit:
    """Digits split into public and private records, with the market's published scaler and gamma."""

    X_public: np.ndarray
    y_public: np.ndarray
    X_private: np.ndarray
    y_private: np.ndarray
    scaler: Any
    gamma: float


def digits_split(public: int = 600, seed: int = 0) -> DigitsSplit:
    """``load_digits`` (1797 x 64, offline) split at random: ``public`` records and the private rest."""
    from sklearn.datasets import load_digits

    public = check_int("digits_split", "public", public, low=2, high=N_DIGITS - 2)
    check_int("digits_split", "seed", seed, low=0)

    from icml26.training.rkme import StandardScaling, median_gamma

    X, y = load_digits(return_X_y=True)
    order = np.random.default_rng(seed).permutation(len(X))
    pub, priv = order[:public], order[public:]
    scaler = StandardScaling.fit(X[pub])
    return DigitsSplit(X[pub].astype(float), y[pub], X[priv].astype(float), y[priv], scaler,
                       median_gamma(scaler.transform(X[pub]), seed=seed))


def fit_model(X: np.ndarray, y: np.ndarray, scaler: Any, seed: int = 0):
    """The released model ``f_D``: a multinomial logistic regression on scaled features (C = 1)."""
    from icml26.training.rkme import StandardScaling

    f = "fit_model"
    X = np.asarray(X, dtype=float)
    if X.ndim != 2 or len(X) < 2 or not np.isfinite(X).all():
        raise InputError(f, "X", "a finite (n, d) array with n >= 2", describe(X))
    y = np.asarray(y)
    if y.shape != (len(X),) or len(np.unique(y)) < 2:
        raise InputError(f, "y", f"{len(X)} labels of at least two classes", describe(y))
    scaler = StandardScaling.of(scaler, f, "scaler")
    if scaler.mean.shape != (X.shape[1],):
        raise InputError(f, "scaler", f"a scaler of {X.shape[1]} features (X's)", scaler.mean.shape[0])
    check_int(f, "seed", seed, low=0)
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import FunctionTransformer

    return make_pipeline(FunctionTransformer(scaler.transform), LogisticRegression(C=1.0, max_iter=300,
                                                                                   random_state=seed)).fit(X, y)


def _label_proba(model, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    proba = model.predict_proba(X)
    cols = np.searchsorted(model.classes_, y)
    ok = (cols < len(model.classes_)) & (model.classes_[np.minimum(cols, len(model.classes_) - 1)] == y)
    return np.where(ok, proba[np.arange(len(y)), np.minimum(cols, proba.shape[1] - 1)], 0.0), proba.max(1)


# ----------------------------------------------------------------------------------------------
# the digits market
# ----------------------------------------------------------------------------------------------
#: The five digit pairs of the market; learnwares 5-9 are their noise-shifted copies.
PAIRS = ((0, 1), (2, 3), (4, 5), (6, 7), (8, 9))


@dataclass
class DigitsMarket:
    """Ten learnware tasks on digits: ``pair i`` (i < 5) and its copy ``i + 5`` shifted by ``shift * v_i``
    (``v_i ~ N(0, I_64)``, fixed) with fresh ``N(0, noise^2)`` per record, both in standardised units.

    ``train[l]`` / ``pool[l]`` index each pair's developer and held-out records (copies share their pair's);
    :meth:`draw` returns raw-unit features of task ``l`` for given record indices.
    """

    X: np.ndarray
    y: np.ndarray
    scaler: Any
    gamma: float
    shift: float
    noise: float
    directions: np.ndarray
    train: dict[int, np.ndarray]
    pool: dict[int, np.ndarray]

    @property
    def names(self) -> list[str]:
        return [f"digits {a}/{b}" for a, b in PAIRS] + [f"digits {a}/{b} shifted" for a, b in PAIRS]

    def draw(self, task: int, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        f = "DigitsMarket.draw"
        task = check_int(f, "task", task, low=0, high=2 * len(PAIRS) - 1)
        index = np.asarray(index)
        if index.ndim != 1 or not np.issubdtype(index.dtype, np.integer) or (
                index.size and (index.min() < 0 or index.max() >= len(self.X))):
            raise InputError(f, "index", f"a 1-D array of record indices in [0, {len(self.X)})", describe(index))
        if not isinstance(rng, np.random.Generator):
            raise InputTypeError(f, "rng", "a numpy Generator", described(type(rng).__name__))
        Xs = self.scaler.transform(self.X[index])
        if task >= len(PAIRS):
            Xs = Xs + self.shift * self.directions[task - len(PAIRS)] + self.noise * rng.standard_normal(Xs.shape)
        return self.scaler.inverse_transform(Xs)


def digits_market(shift: float = 0.1, noise: float = 0.1, train: int = 200, seed: int = 0) -> DigitsMarket:
    """The market's tasks; its scaler and gamma (median heuristic) are fit on all digits (public)."""
    from sklearn.datasets import load_digits

    f = "digits_market"
    shift = check_finite(f, "shift", shift, non_negative=True)
    noise = check_finite(f, "noise", noise, non_negative=True)
    # the smallest pair (digits 2 and 3 and the rest hold ~175 records each) keeps a held-out pool
    train = check_int(f, "train", train, low=2, high=300)
    check_int(f, "seed", seed, low=0)

    from icml26.training.rkme import StandardScaling, median_gamma

    X, y = load_digits(return_X_y=True)
    X = X.astype(float)
    rng = np.random.default_rng(seed)
    scaler = StandardScaling.fit(X)
    tr, pool = {}, {}
    for i, (a, b) in enumerate(PAIRS):
        idx = rng.permutation(np.flatnonzero((y == a) | (y == b)))
        tr[i] = tr[i + len(PAIRS)] = idx[:train]
        pool[i] = pool[i + len(PAIRS)] = idx[train:]
    return DigitsMarket(X, y, scaler, median_gamma(scaler.transform(X), seed=seed), shift, noise,
                        rng.standard_normal((len(PAIRS), X.shape[1])), tr, pool)


# ----------------------------------------------------------------------------------------------
# spec factories: (X, scaler, gamma, seed) -> fitted specification
# ----------------------------------------------------------------------------------------------
def rkme_factory(**params: Any) -> Callable:
    """A spec factory fitting :class:`~icml26.training.rkme.spec.RKMESpecification` with the game's scaler/gamma."""
    from icml26.training.rkme import RKMESpecification

    allowed = set(RKMESpecification().get_params()) - {"gamma", "scaler", "random_state"}
    for key in params:
        if key not in allowed:
            raise InputTypeError("rkme_factory", key, f"a parameter among {sorted(allowed)} (the game sets gamma, "
                                 "scaler and random_state)", described("an unexpected keyword"))
    # check the values now, not in the first world of a long game
    RKMESpecification(**params)._check_params()

    def factory(X, scaler, gamma, seed):
        return RKMESpecification(gamma=gamma, scaler=scaler, random_state=seed, **params).fit(X)

    return factory


def noisy_copy_factory(sigma: float) -> Callable:
    """A spec factory for ``Z = X + N(0, sigma^2)`` in the scaled space (an intermediate leak)."""
    from icml26.training.rkme import noisy_copy_spec

    sigma = check_finite("noisy_copy_factory", "sigma", sigma, non_negative=True)

    def factory(X, scaler, gamma, seed):
        return noisy_copy_spec(X, sigma, scaler=scaler, gamma=gamma, seed=seed)

    return factory


# ----------------------------------------------------------------------------------------------
# games and results
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class MembershipGame:
    """Membership (linkability): ``n`` developer records, ``n_worlds`` worlds, ``target`` random or outlier."""

    n: int = 200
    n_worlds: int = 400
    target: str = "random"
    folds: int = 5
    public: int = 600

    def __post_init__(self) -> None:
        check_int("MembershipGame", "n", self.n, low=2)
        check_int("MembershipGame", "folds", self.folds, low=2)
        check_int("MembershipGame", "n_worlds", self.n_worlds, low=4 * self.folds)
        check_choice("MembershipGame", "target", self.target, TARGETS)
        check_int("MembershipGame", "public", self.public, low=50, high=N_DIGITS - self.n - 2)


@dataclass(frozen=True)
class AttributeGame:
    """Attribute inference of pixel ``hidden_feature`` over ``grid`` (values in raw pixel units)."""

    hidden_feature: int = 42
    grid: tuple[float, ...] = (0.0, 4.0, 8.0, 12.0, 16.0)
    n: int = 200
    n_worlds: int = 200
    public: int = 600

    def __post_init__(self) -> None:
        check_int("AttributeGame", "hidden_feature", self.hidden_feature, low=0)
        if self.hidden_feature >= 64:
            raise InputError("AttributeGame", "hidden_feature", "a pixel index in [0, 64)", self.hidden_feature)
        try:
            grid = np.asarray(self.grid, dtype=float)
        except (TypeError, ValueError):
            raise InputTypeError("AttributeGame", "grid", "a sequence of at least two pixel values",
                                 described(type(self.grid).__name__)) from None
        if grid.ndim != 1 or len(grid) < 2 or not np.isfinite(grid).all() or len(np.unique(grid)) != len(grid):
            raise InputError("AttributeGame", "grid", "at least two distinct finite candidate values", self.grid)
        check_int("AttributeGame", "n", self.n, low=2)
        check_int("AttributeGame", "n_worlds", self.n_worlds, low=2)
        check_int("AttributeGame", "public", self.public, low=50, high=N_DIGITS - self.n - 2)


@dataclass
class GameResult:
    """One game against one specification: advantages (membership) or accuracies (attribute), without and
    with the spec, the paired difference ``delta`` with its 95% interval, the adversary that achieved the
    with-spec value, TPR at 1% FPR (membership) and a coarse ROC."""

    game: str
    worlds: int
    without: float
    with_spec: float
    delta: float
    ci_low: float
    ci_high: float
    adversary: str
    per_adversary: dict[str, float] = field(default_factory=dict)
    tpr_at_1pct_fpr_without: float | None = None
    tpr_at_1pct_fpr_with: float | None = None
    roc: dict[str, list[list[float]]] = field(default_factory=dict)
    #: per-world correctness of the with-spec adversary and of the one without (for paired comparisons)
    correct_with: np.ndarray | None = field(default=None, repr=False)
    correct_without: np.ndarray | None = field(default=None, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out.pop("correct_with"), out.pop("correct_without")
        return out


def _paired(correct_with: np.ndarray, correct_without: np.ndarray, scale: float) -> tuple[float, float, float]:
    d = scale * (correct_with.astype(float) - correct_without.astype(float))
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d)) if len(d) > 1 else math.inf
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


def _tpr_at(y, p, fpr_level=0.01) -> float:
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(y, p)
    return float(np.interp(fpr_level, fpr, tpr))


def _coarse_roc(y, p, points=50) -> list[list[float]]:
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(y, p)
    grid = np.linspace(0, 1, points)
    return [grid.tolist(), np.interp(grid, fpr, tpr).tolist()]


# ----------------------------------------------------------------------------------------------
# membership
# ----------------------------------------------------------------------------------------------
def _outlier_pool(X: np.ndarray, scaler, fraction=0.05) -> np.ndarray:
    A = scaler.transform(X)
    sq = np.einsum("ij,ij->i", A, A)
    d2 = sq[:, None] + sq[None, :] - 2 * A @ A.T
    np.fill_diagonal(d2, np.inf)
    nn = d2.min(1)
    return np.argsort(-nn)[: max(1, int(round(fraction * len(X))))]


def membership_worlds(game: MembershipGame, factories: Mapping[str, Callable], seed: int,
                      data: DigitsSplit | None = None, worlds: range | None = None) -> dict[str, Any]:
    """Play the worlds (``worlds``, a sub-range of ``range(n_worlds)`` for parallel batches): per world
    ``b``, the model features and every factory's spec features."""
    data = data or digits_split(game.public, seed=int(np.random.SeedSequence((seed, 0)).generate_state(1)[0]))
    Xp, yp = data.X_private, data.y_private
    if game.n + 1 > len(Xp):
        raise InputError("MembershipGame", "n", f"at most {len(Xp) - 1} (private records)", game.n)
    pool = _outlier_pool(Xp, data.scaler) if game.target == "outlier" else np.arange(len(Xp))
    ref = data.X_public[:50]
    seeds = np.random.SeedSequence((seed, 1)).spawn(game.n_worlds)
    seeds = [seeds[i] for i in (worlds or range(game.n_worlds))]
    b = np.zeros(len(seeds), dtype=int)
    model_feats = np.zeros((len(seeds), 2))
    spec_feats = {name: np.zeros((len(seeds), 3)) for name in factories}
    for w, ss in enumerate(seeds):
        rng = np.random.default_rng(ss)
        t = int(rng.choice(pool))
        others = rng.choice(np.delete(np.arange(len(Xp)), t), game.n, replace=False)
        b[w] = int(rng.integers(2))
        rows = np.concatenate([[t], others[: game.n - 1]]) if b[w] else others
        wseed = int(rng.integers(2**31))
        model = fit_model(Xp[rows], yp[rows], data.scaler, seed=wseed)
        p, conf = _label_proba(model, Xp[t:t + 1], yp[t:t + 1])
        model_feats[w] = [-math.log(max(p[0], 1e-12)), conf[0]]
        for name, factory in factories.items():
            spec = factory(Xp[rows], data.scaler, data.gamma, wseed)
            s = float(spec.score(Xp[t:t + 1])[0])
            spec_feats[name][w] = [s, s - float(np.median(spec.score(ref))),
                                   math.log(float(spec.nearest_distance(Xp[t:t + 1])[0]) + 1e-9)]
    return {"b": b, "model": model_feats, "spec": spec_feats}


def _cross_fit(features: np.ndarray, b: np.ndarray, folds: int, seed: int, kind: str) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import StratifiedKFold, cross_val_predict
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    from sklearn.tree import DecisionTreeClassifier

    est = (DecisionTreeClassifier(max_depth=1, random_state=0) if kind == "stump"
           else make_pipeline(StandardScaler(), LogisticRegression(C=1.0, max_iter=1000)))
    cv = StratifiedKFold(folds, shuffle=True, random_state=seed)
    return cross_val_predict(est, features, b, cv=cv, method="predict_proba")[:, 1]


def membership_result(worlds: dict[str, Any], name: str, folds: int = 5, seed: int = 0) -> GameResult:
    """Adversaries on the worlds of :func:`membership_worlds` for specification ``name``."""
    b = worlds["b"]
    cv_seed = int(np.random.SeedSequence((seed, 2)).generate_state(1)[0]) % (2**31)
    p0 = _cross_fit(worlds["model"], b, folds, cv_seed, "lr")
    spec = worlds["spec"][name]
    probs = {"model + spec (logistic)": _cross_fit(np.hstack([worlds["model"], spec]), b, folds, cv_seed, "lr"),
             "oracle nearest reduced point": _cross_fit(-spec[:, 2:3], b, folds, cv_seed, "stump")}
    correct0 = (p0 > 0.5) == b
    # The adversary who sees the spec may ignore it: V(f, s) >= V(f), so the model-only attack is a candidate.
    probs = {"model only (logistic)": p0, **probs}
    adv = {k: 2 * float(((p > 0.5) == b).mean()) - 1 for k, p in probs.items()}
    best = max(adv, key=adv.get)
    correct1 = (probs[best] > 0.5) == b
    delta, lo, hi = _paired(correct1, correct0, 2.0)
    return GameResult("membership", len(b), 2 * float(correct0.mean()) - 1, adv[best], delta, lo, hi, best, adv,
                      _tpr_at(b, p0), _tpr_at(b, probs[best]),
                      {"model only": _coarse_roc(b, p0), "with spec": _coarse_roc(b, probs[best])},
                      correct1, correct0)


# ----------------------------------------------------------------------------------------------
# membership against a per-target LiRA
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LiraGame:
    """Membership against the online per-target LiRA (:mod:`icml26.training.rkme.lira`): a pool of ``2 n``
    private records, ``pairs`` complementary pairs of worlds (each a model and specs fit on one half of the
    pool), every world in turn the released one and the other pairs its shadows (``pairs - 1`` a side); every
    pool record is a target in every world. ``variance``: ``"per_target"`` or ``"global"``."""

    n: int = 200
    pairs: int = 32
    variance: str = "per_target"
    public: int = 600

    def __post_init__(self) -> None:
        from icml26.training.rkme.lira import LIRA_VARIANCES

        check_int("LiraGame", "public", self.public, low=50, high=N_DIGITS - 4)
        check_int("LiraGame", "n", self.n, low=2, high=(N_DIGITS - self.public) // 2)
        check_int("LiraGame", "pairs", self.pairs, low=3)
        check_choice("LiraGame", "variance", self.variance, LIRA_VARIANCES)


def lira_worlds(game: LiraGame, factories: Mapping[str, Callable], seed: int, data: DigitsSplit | None = None,
                worlds: range | None = None) -> dict[str, Any]:
    """The worlds ``worlds`` (a sub-range of ``range(2 pairs)``, for parallel batches): per world its
    membership row, the model's ``phi`` of every pool record and, per factory, the distance of every
    pool record to the nearest reduced point."""
    from icml26.training.rkme.lira import balanced_halves, logit_confidence

    data = data or digits_split(game.public, seed=int(np.random.SeedSequence((seed, 0)).generate_state(1)[0]))
    rng = np.random.default_rng(np.random.SeedSequence((seed, 4)))
    pool = rng.choice(len(data.X_private), 2 * game.n, replace=False)
    X, y = data.X_private[pool], data.y_private[pool]
    member = balanced_halves(2 * game.n, game.pairs, seed=int(rng.integers(2**31)))
    seeds = np.random.SeedSequence((seed, 5)).spawn(2 * game.pairs)
    ks = list(worlds or range(2 * game.pairs))
    phi, dist = np.zeros((len(ks), len(X))), {name: np.zeros((len(ks), len(X))) for name in factories}
    for w, k in enumerate(ks):
        wseed = int(seeds[k].generate_state(1)[0]) % (2**31)
        rows = member[k]
        phi[w] = logit_confidence(_label_proba(fit_model(X[rows], y[rows], data.scaler, seed=wseed), X, y)[0])
        for name, factory in factories.items():
            spec = factory(X[rows], data.scaler, data.gamma, wseed)
            dist[name][w] = spec.nearest_distance(X)
    return {"member": member[ks], "model": phi, "spec": dist}


def lira_result(worlds: dict[str, Any], name: str, variance: str = "per_target") -> GameResult:
    """The three LiRA adversaries of :func:`lira_worlds` for specification ``name``: the model only, the
    nearest reduced point only, and both (their log ratios add); advantages are per target (``TPR - FPR``
    over the worlds), averaged over the targets; ``delta`` is both minus model only, paired over targets."""
    from icml26.eval.measure import paired_difference as paired
    from icml26.training.rkme.lira import lira_log_ratio, per_target_advantage

    member = worlds["member"]
    L0 = lira_log_ratio(worlds["model"], member, variance)
    Ls = lira_log_ratio(np.log(worlds["spec"][name] + 1e-9), member, variance)
    adv = {k: per_target_advantage(L, member) for k, L in
           (("model only", L0), ("nearest reduced point", Ls), ("model + nearest reduced point", L0 + Ls))}
    a0, a1 = adv["model only"], adv["model + nearest reduced point"]
    d = paired(a1, a0)
    b, p0, p1 = member.ravel(), L0.ravel(), (L0 + Ls).ravel()
    return GameResult("membership", len(member), float(a0.mean()), float(a1.mean()), d["mean"], d["lo"], d["hi"],
                      "LiRA: model + nearest reduced point", {k: float(v.mean()) for k, v in adv.items()},
                      _tpr_at(b, p0), _tpr_at(b, p1), {"model only": _coarse_roc(b, p0), "with spec": _coarse_roc(b, p1)},
                      (1 + a1) / 2, (1 + a0) / 2)


# ----------------------------------------------------------------------------------------------
# attribute inference
# ----------------------------------------------------------------------------------------------
def attribute_worlds(game: AttributeGame, factories: Mapping[str, Callable], seed: int,
                     data: DigitsSplit | None = None, worlds: range | None = None) -> dict[str, Any]:
    """Per world (``worlds``: a sub-range, as for :func:`membership_worlds`) the true grid index and each
    adversary's guess."""
    from icml26.training.rkme import kernel_row_means

    data = data or digits_split(game.public, seed=int(np.random.SeedSequence((seed, 0)).generate_state(1)[0]))
    Xp, yp = data.X_private, data.y_private
    grid = np.asarray(game.grid, dtype=float)
    h = game.hidden_feature
    pub_scaled = data.scaler.transform(data.X_public)
    seeds = np.random.SeedSequence((seed, 3)).spawn(game.n_worlds)
    seeds = [seeds[i] for i in (worlds or range(game.n_worlds))]
    W = len(seeds)
    truth = np.zeros(W, dtype=int)
    guesses: dict[str, np.ndarray] = {"model": np.zeros(W, int), "population": np.zeros(W, int)}
    for name in factories:
        guesses[f"{name}: score"] = np.zeros(W, int)
        guesses[f"{name}: nearest"] = np.zeros(W, int)
    for w, ss in enumerate(seeds):
        rng = np.random.default_rng(ss)
        rows = rng.choice(len(Xp), game.n, replace=False)
        t = int(rows[0])
        truth[w] = int(np.argmin(np.abs(grid - Xp[t, h])))
        cands = np.repeat(Xp[t:t + 1], len(grid), 0)
        cands[:, h] = grid
        wseed = int(rng.integers(2**31))
        model = fit_model(Xp[rows], yp[rows], data.scaler, seed=wseed)
        p, _ = _label_proba(model, cands, np.full(len(grid), yp[t]))
        guesses["model"][w] = int(np.argmax(p))
        guesses["population"][w] = int(np.argmax(kernel_row_means(data.scaler.transform(cands), pub_scaled,
                                                                   data.gamma)))
        for name, factory in factories.items():
            spec = factory(Xp[rows], data.scaler, data.gamma, wseed)
            guesses[f"{name}: score"][w] = int(np.argmax(spec.score(cands)))
            guesses[f"{name}: nearest"][w] = int(np.argmin(spec.nearest_distance(cands)))
    return {"truth": truth, "guesses": guesses}


def attribute_result(worlds: dict[str, Any], name: str) -> GameResult:
    truth, g = worlds["truth"], worlds["guesses"]
    acc = {k: float((v == truth).mean()) for k, v in g.items()}
    base = max(("model", "population"), key=acc.get)
    spec_keys = [f"{name}: score", f"{name}: nearest"]
    best = max(spec_keys + [base], key=acc.get)
    delta, lo, hi = _paired(g[best] == truth, g[base] == truth, 1.0)
    return GameResult("attribute", len(truth), acc[base], acc[best], delta, lo, hi, best,
                      {k: acc[k] for k in ["model", "population"] + spec_keys},
                      correct_with=g[best] == truth, correct_without=g[base] == truth)


def paired_difference(a: GameResult, b: GameResult) -> tuple[float, float, float]:
    """``a``'s incremental value minus ``b``'s on the same worlds, with a normal 95% interval."""
    for name, r in (("a", a), ("b", b)):
        if not isinstance(r, GameResult) or r.correct_with is None:
            raise InputTypeError("paired_difference", name, "a GameResult of play()", described(type(r).__name__))
    if b.game != a.game or len(b.correct_with) != len(a.correct_with) or len(a.correct_with) < 2:
        raise InputError("paired_difference", "b", f"a {a.game} result on the same {len(a.correct_with)} worlds "
                         "(at least 2)", described(f"a {b.game} result on {len(b.correct_with)} worlds"))
    scale = 2.0 if a.game == "membership" else 1.0
    d = scale * ((a.correct_with.astype(float) - a.correct_without) - (b.correct_with.astype(float) - b.correct_without))
    half = 1.96 * d.std(ddof=1) / math.sqrt(len(d))
    return float(d.mean()), float(d.mean() - half), float(d.mean() + half)


# ----------------------------------------------------------------------------------------------
# the one entry point
# ----------------------------------------------------------------------------------------------
def play(game: MembershipGame | AttributeGame, spec_factory: Callable | Mapping[str, Callable],
         seed: int = 0) -> GameResult | dict[str, GameResult]:
    """Play ``game`` against one spec factory (a :class:`GameResult`) or a mapping of them (a dict by name;
    every factory meets the same worlds, so their differences are paired).

    A factory is ``factory(X, scaler, gamma, seed) -> fitted RKMESpecification`` (see :func:`rkme_factory`).
    """
    check_int("play", "seed", seed, low=0)
    if not isinstance(game, (MembershipGame, AttributeGame)):
        raise InputTypeError("play", "game", "a MembershipGame or an AttributeGame", described(type(game).__name__))
    single = callable(spec_factory) and not isinstance(spec_factory, Mapping)
    factories = {"spec": spec_factory} if single else dict(spec_factory)
    if not factories or not all(callable(f) for f in factories.values()):
        raise InputError("play", "spec_factory", "a callable or a non-empty mapping of callables", type(spec_factory).__name__)
    if isinstance(game, MembershipGame):
        worlds = membership_worlds(game, factories, seed)
        out = {name: membership_result(worlds, name, game.folds, seed) for name in factories}
    elif isinstance(game, AttributeGame):
        worlds = attribute_worlds(game, factories, seed)
        out = {name: attribute_result(worlds, name) for name in factories}
    else:
        raise InputError("play", "game", "a MembershipGame or an AttributeGame", type(game).__name__)
    return out["spec"] if single else out


def merge_worlds(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Concatenate world batches of :func:`membership_worlds` / :func:`attribute_worlds` (parallel runs)."""
    if isinstance(parts, Mapping) or not isinstance(parts, (list, tuple)) or not parts \
            or not all(isinstance(p, Mapping) for p in parts):
        raise InputError("merge_worlds", "parts", "a non-empty list of world batches (dicts)",
                         described(type(parts).__name__ if not isinstance(parts, (list, tuple)) else f"{len(parts)} items"))
    first = parts[0]
    if any(set(p) != set(first) for p in parts):
        raise InputError("merge_worlds", "parts", "batches of one game (the same keys)",
                         described("batches with different keys"))
    out: dict[str, Any] = {}
    for key, value in first.items():
        if isinstance(value, dict):
            out[key] = {k: np.concatenate([p[key][k] for p in parts]) for k in value}
        else:
            out[key] = np.concatenate([p[key] for p in parts])
    return out
