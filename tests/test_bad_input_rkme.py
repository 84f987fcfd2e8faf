"""Bad input to the RKME method (kernels, the specification, the learnware market, the inversion games and their
digits generators): each probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
from probes import Probe, check, ids

from icml26.eval.tasks import rkme as games
from icml26.training.rkme import (
    LearnwareMarket,
    RKMESpecification,
    StandardScaling,
    balanced_halves,
    convert_dist_to_score,
    data_self_term,
    gaussian_kernel,
    kernel_row_means,
    lira_log_ratio,
    logit_confidence,
    median_gamma,
    neighbour_kme_distance,
    noisy_copy_spec,
    per_target_advantage,
    simplex_qp,
    z_gradient,
)

RNG = np.random.default_rng(0)
X = RNG.normal(size=(30, 3))
SCALER = StandardScaling.fit(X)
SPEC = RKMESpecification(n_points=4, random_state=0).fit(X)
MARKET = LearnwareMarket(1.0, SCALER)
MARKET.add("one", None, MARKET.specification(X, n_points=4, random_state=0))
USER = MARKET.specification(X[:10], n_points=3, random_state=0)
HALVES = balanced_halves(8, 3, seed=0)
RESULT = games.GameResult("membership", 2, 0.0, 0.0, 0.0, 0.0, 0.0, "x", correct_with=np.array([True, False]),
                          correct_without=np.array([True, True]))


def _fit(**params):
    return RKMESpecification(**{"n_points": 4, "random_state": 0, **params}).fit(X)


PROBES = [
    # kernels
    Probe("gaussian_kernel-gamma-zero", lambda: gaussian_kernel(X, X, 0.0), "gamma"),
    Probe("gaussian_kernel-B-other-dimension", lambda: gaussian_kernel(X, X[:, :2], 1.0), "B"),
    Probe("kernel_row_means-weights-wrong-length", lambda: kernel_row_means(X, X, 1.0, np.ones(3)), "weights"),
    Probe("data_self_term-X-nan", lambda: data_self_term(np.full((3, 2), np.nan), 1.0), "X"),
    Probe("median_gamma-X-one-row", lambda: median_gamma(X[:1]), "X"),
    Probe("median_gamma-max_points-one", lambda: median_gamma(X, max_points=1), "max_points"),
    Probe("neighbour_kme_distance-n-zero", lambda: neighbour_kme_distance(X[0], X[1], 0, 1.0), "n"),
    Probe("neighbour_kme_distance-x_prime-other-length", lambda: neighbour_kme_distance(X[0], X[1, :2], 10, 1.0),
          "x_prime"),
    Probe("simplex_qp-K-not-square", lambda: simplex_qp(np.ones((3, 2)), np.ones(3)), "K"),
    Probe("simplex_qp-solver-unknown", lambda: simplex_qp(np.eye(2), np.ones(2), solver="osqp"), "solver"),
    Probe("z_gradient-beta-wrong-length", lambda: z_gradient(X[:4], np.ones(3), X, 1.0), "beta"),
    # the specification
    Probe("RKMESpecification.fit-n_points-zero", lambda: _fit(n_points=0), "n_points"),
    Probe("RKMESpecification.fit-gamma-unknown-string", lambda: _fit(gamma="scott"), "gamma"),
    Probe("RKMESpecification.fit-steps-negative", lambda: _fit(steps=-1), "steps"),
    Probe("RKMESpecification.fit-step_size-inf", lambda: _fit(step_size=float("inf")), "step_size"),
    Probe("RKMESpecification.fit-reduce-a-string", lambda: _fit(reduce="no"), "reduce"),
    Probe("RKMESpecification.fit-scaler-unfitted", lambda: _fit(scaler=object()), "scaler"),
    Probe("RKMESpecification.fit-min_cluster_size-zero", lambda: _fit(min_cluster_size=0), "min_cluster_size"),
    Probe("RKMESpecification.fit-record_floor-negative", lambda: _fit(record_floor=-0.1), "record_floor"),
    Probe("RKMESpecification.fit-record_floor-nan", lambda: _fit(record_floor=float("nan")), "record_floor"),
    Probe("RKMESpecification.fit-X-sparse", lambda: RKMESpecification().fit(__import__("scipy.sparse").sparse
                                                                            .csr_matrix(X)), "X"),
    Probe("RKMESpecification.score-X-other-dimension", lambda: SPEC.score(X[:, :2]), "X"),
    Probe("RKMESpecification.herding-T-zero", lambda: SPEC.herding(0), "T"),
    Probe("RKMESpecification.mmd2-other-gamma", lambda: SPEC.mmd2(_fit(gamma=5.0)), "other"),
    Probe("RKMESpecification.save-missing-folder", lambda: SPEC.save("/nonexistent/folder/spec.json"), "path"),
    Probe("RKMESpecification.load-missing-file", lambda: RKMESpecification.load("/nonexistent/spec.json"), "path"),
    Probe("RKMESpecification.from_dict-beta-wrong-length",
          lambda: RKMESpecification.from_dict({"gamma": 1.0, "z": [[0.0, 1.0]], "beta": [0.5, 0.5]}), "data"),
    Probe("noisy_copy_spec-sigma-negative", lambda: noisy_copy_spec(X, -0.1), "sigma"),
    Probe("StandardScaling.of-zero-scale", lambda: StandardScaling.of(StandardScaling(np.zeros(3), np.zeros(3))),
          "scaler"),
    # the market
    Probe("convert_dist_to_score-min_score-above-1", lambda: convert_dist_to_score([0.1, 0.2], min_score=1.5),
          "min_score"),
    Probe("convert_dist_to_score-dists-nan", lambda: convert_dist_to_score([0.1, float("nan")]), "dists"),
    Probe("LearnwareMarket-gamma-negative", lambda: LearnwareMarket(-1.0, SCALER), "gamma"),
    Probe("LearnwareMarket.specification-unknown-parameter", lambda: MARKET.specification(X, n_point=3), "n_point"),
    Probe("LearnwareMarket.add-name-taken", lambda: MARKET.add("one", None, USER), "name"),
    Probe("LearnwareMarket.add-spec-other-gamma", lambda: MARKET.add("two", None, SPEC), "spec"),
    Probe("LearnwareMarket.search-mode-unknown", lambda: MARKET.search(USER, mode="best"), "mode"),
    Probe("LearnwareMarket.search-max_search_num-zero", lambda: MARKET.search(USER, max_search_num=0),
          "max_search_num"),
    Probe("LearnwareMarket.search-filter_score-above-1", lambda: MARKET.search(USER, filter_score=2.0),
          "filter_score"),
    Probe("LearnwareMarket.search-user_spec-unfitted", lambda: MARKET.search(RKMESpecification()), "user_spec"),
    Probe("LearnwareMarket.model-unknown-name", lambda: MARKET.model("two"), "name"),
    # the games and their digits generators
    Probe("digits_split-public-too-large", lambda: games.digits_split(public=5000), "public"),
    Probe("digits_market-noise-negative", lambda: games.digits_market(noise=-0.1), "noise"),
    Probe("digits_market-train-zero", lambda: games.digits_market(train=0), "train"),
    Probe("fit_model-y-one-class", lambda: games.fit_model(X, np.zeros(30), SCALER), "y"),
    Probe("rkme_factory-unknown-parameter", lambda: games.rkme_factory(points=10), "points"),
    Probe("rkme_factory-n_points-negative", lambda: games.rkme_factory(n_points=-5), "n_points"),
    Probe("noisy_copy_factory-sigma-nan", lambda: games.noisy_copy_factory(float("nan")), "sigma"),
    Probe("MembershipGame-folds-one", lambda: games.MembershipGame(folds=1), "folds"),
    Probe("MembershipGame-n-one", lambda: games.MembershipGame(n=1), "n"),
    Probe("AttributeGame-grid-repeated-value", lambda: games.AttributeGame(grid=(0.0, 0.0)), "grid"),
    Probe("AttributeGame-n_worlds-one", lambda: games.AttributeGame(n_worlds=1), "n_worlds"),
    Probe("play-game-a-string", lambda: games.play("membership", games.rkme_factory()), "game"),
    Probe("play-seed-negative", lambda: games.play(games.MembershipGame(n_worlds=20, folds=2), {}, seed=-1), "seed"),
    Probe("paired_difference-b-other-worlds",
          lambda: games.paired_difference(RESULT, games.GameResult(
              "membership", 3, 0, 0, 0, 0, 0, "x", correct_with=np.ones(3, bool), correct_without=np.ones(3, bool))),
          "b"),
    Probe("merge_worlds-parts-empty", lambda: games.merge_worlds([]), "parts"),
    # the LiRA attack and its game
    Probe("balanced_halves-n_records-odd", lambda: balanced_halves(9, 3), "n_records"),
    Probe("balanced_halves-pairs-two", lambda: balanced_halves(8, 2), "pairs"),
    Probe("balanced_halves-seed-negative", lambda: balanced_halves(8, 3, seed=-1), "seed"),
    Probe("logit_confidence-p-above-1", lambda: logit_confidence([0.5, 1.5]), "p"),
    Probe("lira_log_ratio-membership-not-complementary",
          lambda: lira_log_ratio(np.zeros((6, 8)), np.vstack([HALVES[:5], HALVES[4:5]])), "membership"),
    Probe("lira_log_ratio-membership-not-bool", lambda: lira_log_ratio(np.zeros((6, 8)), HALVES.astype(int)),
          "membership"),
    Probe("lira_log_ratio-stats-wrong-shape", lambda: lira_log_ratio(np.zeros((6, 7)), HALVES), "stats"),
    Probe("lira_log_ratio-stats-nan", lambda: lira_log_ratio(np.full((6, 8), np.nan), HALVES), "stats"),
    Probe("lira_log_ratio-variance-unknown", lambda: lira_log_ratio(np.zeros((6, 8)), HALVES, variance="pooled"),
          "variance"),
    Probe("per_target_advantage-membership-wrong-shape",
          lambda: per_target_advantage(np.zeros((6, 8)), HALVES[:, :7]), "membership"),
    Probe("LiraGame-pairs-two", lambda: games.LiraGame(pairs=2), "pairs"),
    Probe("LiraGame-n-too-large", lambda: games.LiraGame(n=700), "n"),
    Probe("LiraGame-variance-unknown", lambda: games.LiraGame(variance="fixed"), "variance"),
    Probe("LiraGame-public-too-small", lambda: games.LiraGame(public=10), "public"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
