"""Bad input for private hypothesis selection (``icml26.training.dp_select``, ``icml26.eval.tasks.dp_select``).

Each probe makes one call with exactly one wrong value; see ``tests/probes.py`` for the verdicts. The class is
the audit instance (six histograms on five points, twenty samples), so every probe is refused at once.
"""

from __future__ import annotations

import numpy as np
import pytest
from probes import Probe, check, ids

from icml26.eval.tasks.dp_select import audit_instance, draw_problem, make_class, rate_instance
from icml26.training.dp_select import (
    BKSWSelector,
    ForgottenFactorMDE,
    HypothesisClass,
    MinimumDistanceEstimate,
    PrivateMDE,
    ScheffeTournament,
    StrongSetEM,
    agnostic_truth,
    audit_epsilon,
    clopper_pearson,
    dirichlet_class,
    em_probabilities,
    exact_privacy_loss,
    exponential_mechanism,
    gaussian_cover,
    gumbel_max_draws,
    knockout_tournament,
    lazy_exponential_mechanism,
    mde_distances,
    neighbours,
    sample,
    sample_complexity,
    scheffe_table,
    tv,
)

H, SAMPLES = audit_instance(0)


def fit(selector, **change):
    """``selector.fit(H, SAMPLES)`` with one argument changed."""
    args = {"H": H, "samples": SAMPLES}
    args.update(change)
    return lambda: selector.fit(args["H"], args["samples"])


def cover():
    return HypothesisClass(H)


PROBES = [
    # the selectors' parameters, checked by fit (scikit-learn's convention: the constructor only stores)
    Probe("private-mde-epsilon-string", fit(PrivateMDE("1")), "epsilon"),
    Probe("private-mde-epsilon-zero", fit(PrivateMDE(0.0)), "epsilon"),
    Probe("private-mde-epsilon-nan", fit(PrivateMDE(float("nan"))), "epsilon"),
    Probe("private-mde-lazy-string", fit(PrivateMDE(lazy="yes")), "lazy"),
    Probe("private-mde-k-zero", fit(PrivateMDE(k=0)), "k"),
    Probe("private-mde-k-above-n", fit(PrivateMDE(k=7)), "k"),
    Probe("private-mde-backend-unknown", fit(PrivateMDE(backend="torch")), "backend"),
    Probe("private-mde-random-state-negative", fit(PrivateMDE(random_state=-1)), "random_state"),
    Probe("private-mde-chunk-zero", fit(PrivateMDE(chunk=0)), "chunk"),
    Probe("private-mde-lazy-with-opendp", fit(PrivateMDE(lazy=True, backend="opendp")), "lazy"),
    Probe("bksw-margin-above-one", fit(BKSWSelector(margin=1.5)), "margin"),
    Probe("bksw-epsilon-negative", fit(BKSWSelector(epsilon=-1.0)), "epsilon"),
    Probe("strong-set-split-one", fit(StrongSetEM(split=1.0)), "split"),
    Probe("strong-set-n-opponents-zero", fit(StrongSetEM(n_opponents=0)), "n_opponents"),
    Probe("strong-set-k-float", fit(StrongSetEM(k=2.5)), "k"),
    Probe("strong-set-random-state-float", fit(StrongSetEM(random_state=0.5)), "random_state"),
    Probe("mde-chunk-negative", fit(MinimumDistanceEstimate(chunk=-1)), "chunk"),
    Probe("tournament-chunk-string", fit(ScheffeTournament(chunk="8")), "chunk"),
    Probe("forgotten-factor-epsilon-inf", fit(ForgottenFactorMDE(epsilon=float("inf"))), "epsilon"),
    # fit's data
    Probe("fit-H-rows-not-summing-to-one", fit(PrivateMDE(), H=H * 0.9), "H"),
    Probe("fit-H-negative", fit(BKSWSelector(), H=H - 0.05), "H"),
    Probe("fit-H-one-dimensional", fit(ScheffeTournament(), H=H[0]), "H"),
    Probe("fit-H-nan", fit(MinimumDistanceEstimate(), H=np.where(H > 0.3, np.nan, H)), "H"),
    Probe("fit-H-strings", fit(PrivateMDE(), H=[["a", "b"]]), "H"),
    Probe("fit-samples-outside-domain", fit(PrivateMDE(), samples=np.append(SAMPLES, 5)), "samples"),
    Probe("fit-samples-empty", fit(StrongSetEM(), samples=np.array([], dtype=int)), "samples"),
    Probe("fit-samples-fractional", fit(BKSWSelector(), samples=SAMPLES + 0.5), "samples"),
    Probe("fit-samples-two-dimensional", fit(PrivateMDE(), samples=SAMPLES.reshape(4, 5)), "samples"),
    Probe("fit-samples-one-with-split", fit(StrongSetEM(), samples=SAMPLES[:1]), "samples"),
    # the law and the draws
    Probe("draw-n-draws-zero", lambda: PrivateMDE().draw(H, SAMPLES, 0), "n_draws"),
    Probe("draw-random-state-negative", lambda: PrivateMDE().draw(H, SAMPLES, 5, random_state=-2), "random_state"),
    Probe("output-probabilities-samples-negative", lambda: PrivateMDE().output_probabilities(H, -SAMPLES - 1),
          "samples"),
    Probe("strong-set-law-too-many-outcomes", lambda: StrongSetEM(k=8, random_state=0).output_probabilities(
        dirichlet_class(40, 3, seed=0), [0, 1, 2]), "H"),
    # the mechanisms
    Probe("em-probabilities-epsilon-zero", lambda: em_probabilities([1.0, 2.0], 0.0), "epsilon"),
    Probe("em-probabilities-scores-nan", lambda: em_probabilities([1.0, np.nan], 1.0), "scores"),
    Probe("em-probabilities-sensitivity-negative", lambda: em_probabilities([1.0, 2.0], 1.0, -1.0), "sensitivity"),
    Probe("exponential-mechanism-scores-empty", lambda: exponential_mechanism([], 1.0), "scores"),
    Probe("exponential-mechanism-backend-unknown", lambda: exponential_mechanism([1.0, 2.0], 1.0, backend="jax"),
          "backend"),
    Probe("exponential-mechanism-gumbel-wrong-length", lambda: exponential_mechanism([1.0, 2.0], 1.0,
                                                                                   gumbel=np.zeros(3)), "gumbel"),
    Probe("lazy-mechanism-gumbel-wrong-length", lambda: lazy_exponential_mechanism(
        np.zeros(3), lambda rows: np.zeros(len(rows)), 1.0, np.zeros(2)), "gumbel"),
    Probe("lazy-mechanism-exact-not-callable", lambda: lazy_exponential_mechanism(np.zeros(3), None, 1.0,
                                                                                  np.zeros(3)), "exact"),
    Probe("gumbel-draws-n-draws-zero", lambda: gumbel_max_draws(np.zeros(3), 0, np.random.default_rng(0)), "n_draws"),
    # Scheffé tables and tournaments
    Probe("scheffe-table-pair-out-of-range", lambda: scheffe_table(H, np.array([[0, 6]]), np.ones(5)), "pairs"),
    Probe("scheffe-table-counts-nan", lambda: scheffe_table(H, np.array([[0, 1]]), np.full(5, np.nan)), "counts"),
    Probe("mde-distances-rows-out-of-range", lambda: mde_distances(cover(), np.ones(5), rows=np.array([9])), "rows"),
    Probe("mde-distances-counts-wrong-length", lambda: mde_distances(cover(), np.ones(4)), "counts"),
    Probe("knockout-k-zero", lambda: knockout_tournament(cover(), np.ones(5), 0, np.random.default_rng(0)), "k"),
    Probe("hypothesis-class-precompute-string", lambda: HypothesisClass(H, precompute="yes"), "precompute"),
    # classes and truths
    Probe("gaussian-cover-n-zero", lambda: gaussian_cover(0), "n"),
    Probe("gaussian-cover-sigma-zero", lambda: gaussian_cover(5, sigma=0.0), "sigma"),
    Probe("gaussian-cover-high-below-low", lambda: gaussian_cover(5, low=1.0, high=-1.0), "high"),
    Probe("gaussian-cover-mean-low-nan", lambda: gaussian_cover(5, mean_low=float("nan")), "mean_low"),
    Probe("gaussian-cover-sigma-range-negative", lambda: gaussian_cover(5, n_sigmas=3, sigma_range=(-1.0, 2.0)),
          "sigma_range"),
    Probe("dirichlet-alpha-zero", lambda: dirichlet_class(3, 4, alpha=0.0), "alpha"),
    Probe("dirichlet-D-zero", lambda: dirichlet_class(3, 0), "D"),
    Probe("agnostic-truth-index-out-of-range", lambda: agnostic_truth(H, 6), "index"),
    Probe("agnostic-truth-weight-above-one", lambda: agnostic_truth(H, 0, weight=1.5), "weight"),
    Probe("agnostic-truth-bins-range-reversed", lambda: agnostic_truth(H, 0, bins_range=(10.0, -10.0)), "bins_range"),
    Probe("tv-shapes-differ", lambda: tv(H, H[0, :3]), "q"),
    Probe("sample-s-zero", lambda: sample(H[0], 0), "s"),
    Probe("sample-P-not-a-pmf", lambda: sample(H[0] * 2, 5), "P"),
    # privacy checks
    Probe("neighbours-samples-outside-D", lambda: list(neighbours(SAMPLES, 3)), "samples"),
    Probe("exact-privacy-loss-selector-not-a-selector", lambda: exact_privacy_loss("PrivateMDE", H, SAMPLES),
          "selector"),
    Probe("clopper-pearson-alpha-above-one", lambda: clopper_pearson(3, 10, 1.5), "alpha"),
    Probe("clopper-pearson-successes-above-trials", lambda: clopper_pearson(12, 10, 0.05), "successes"),
    Probe("audit-n-runs-zero", lambda: audit_epsilon(PrivateMDE(), H, SAMPLES, 0), "n_runs"),
    Probe("audit-confidence-one", lambda: audit_epsilon(PrivateMDE(), H, SAMPLES, 10, confidence=1.0), "confidence"),
    Probe("audit-selector-not-a-selector", lambda: audit_epsilon(object(), H, SAMPLES, 10), "selector"),
    # the task generators
    Probe("make-class-family-unknown", lambda: make_class("poisson", 5), "family"),
    Probe("make-class-n-zero", lambda: make_class("dirichlet", 0), "n"),
    Probe("draw-problem-truth-unknown", lambda: draw_problem(cover(), "realisable", 10, 0), "truth"),
    Probe("draw-problem-s-zero", lambda: draw_problem(cover(), "realizable", 0, 0), "s"),
    Probe("draw-problem-cover-not-pmfs", lambda: draw_problem(H * 2, "realizable", 10, 0), "cover"),
    Probe("audit-instance-n-zero", lambda: audit_instance(0, n=0), "n"),
    Probe("strong-set-k-negative", fit(StrongSetEM(k=-1)), "k"),
    # the rate study
    Probe("sample-complexity-selector-a-class", lambda: sample_complexity(PrivateMDE, H, 0.1), "selector"),
    Probe("sample-complexity-selector-epsilon-negative", lambda: sample_complexity(PrivateMDE(-1.0), H, 0.1),
          "epsilon"),
    Probe("sample-complexity-cover-rows-not-summing", lambda: sample_complexity(PrivateMDE(), H * 2, 0.1), "cover"),
    Probe("sample-complexity-alpha-zero", lambda: sample_complexity(PrivateMDE(), H, 0.0), "alpha"),
    Probe("sample-complexity-alpha-nan", lambda: sample_complexity(PrivateMDE(), H, float("nan")), "alpha"),
    Probe("sample-complexity-alpha-above-one", lambda: sample_complexity(PrivateMDE(), H, 1.5), "alpha"),
    Probe("sample-complexity-runs-zero", lambda: sample_complexity(PrivateMDE(), H, 0.1, runs=0), "runs"),
    Probe("sample-complexity-s-min-zero", lambda: sample_complexity(PrivateMDE(), H, 0.1, s_min=0), "s_min"),
    Probe("sample-complexity-s-max-below-s-min", lambda: sample_complexity(PrivateMDE(), H, 0.1, s_min=64, s_max=32),
          "s_max"),
    Probe("sample-complexity-steps-float", lambda: sample_complexity(PrivateMDE(), H, 0.1, steps_per_doubling=0.25),
          "steps_per_doubling"),
    Probe("sample-complexity-truths-index-out-of-range", lambda: sample_complexity(
        PrivateMDE(), H, 0.1, runs=2, truths=np.array([0, 6])), "truths"),
    Probe("sample-complexity-truths-wrong-count", lambda: sample_complexity(
        PrivateMDE(), H, 0.1, runs=3, truths=np.array([0, 1])), "truths"),
    Probe("sample-complexity-truths-not-pmfs", lambda: sample_complexity(PrivateMDE(), H, 0.1, runs=6, truths=H * 2),
          "truths"),
    Probe("sample-complexity-seed-negative", lambda: sample_complexity(PrivateMDE(), H, 0.1, seed=-1), "seed"),
    Probe("rate-instance-name-unknown", lambda: rate_instance("poisson", 16, 5), "name"),
    Probe("rate-instance-runs-zero", lambda: rate_instance("gaussian", 16, 0), "runs"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
