"""RKME specifications (:mod:`icml26.training.rkme.spec`), the market and the inversion-risk games."""

import dataclasses
import json
import math

import numpy as np
import pytest

from icml26 import InputError
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


@pytest.fixture(scope="module")
def digits():
    from sklearn.datasets import load_digits

    return load_digits().data.astype(float)


def _sample(digits, n, seed):
    return digits[np.random.default_rng(seed).choice(len(digits), n, replace=False)]


def _mmd2_direct(Z, beta, X, gamma):
    """MMD^2 from full kernel matrices (no chunking): the reference the blocked code is checked against."""
    n = len(X)
    return float(beta @ gaussian_kernel(Z, Z, gamma) @ beta - 2 * beta @ gaussian_kernel(Z, X, gamma).sum(1) / n
                 + gaussian_kernel(X, X, gamma).sum() / n**2)


# ----------------------------------------------------------------------------------------------
# algebra
# ----------------------------------------------------------------------------------------------
def test_reduce_false_matches_the_empirical_kme_exactly(digits):
    X = _sample(digits, 150, 0)
    spec = RKMESpecification(reduce=False).fit(X)
    assert spec.Z_.shape == (150, 64) and np.allclose(spec.beta_, 1 / 150)
    assert abs(spec.mmd2_to_data(X)) <= 1e-12


@pytest.mark.parametrize("solver", ["clarabel", "slsqp"])
def test_nonnegative_beta_lies_on_the_simplex_and_solvers_agree(digits, solver):
    X = _sample(digits, 200, 1)
    spec = RKMESpecification(n_points=20, beta_solver=solver, random_state=0).fit(X)
    assert spec.beta_.min() >= -1e-9 and abs(spec.beta_.sum() - 1) <= 1e-6
    other = RKMESpecification(n_points=20, beta_solver="slsqp" if solver == "clarabel" else "clarabel",
                              random_state=0).fit(X)
    assert abs(spec.mmd2_to_data(X) - other.mmd2_to_data(X)) <= 1e-6


def test_simplex_qp_finds_the_known_optimum():
    # 1/2 w'Iw - C'w on the simplex: the projection of C onto the simplex
    w = simplex_qp(np.eye(3), np.array([0.9, 0.3, -1.0]))
    assert np.allclose(w, [0.8, 0.2, 0.0], atol=1e-6)


def test_mmd2_never_rises_across_alternating_steps(digits):
    for seed in range(3):
        X = _sample(digits, 120, seed)
        for step in (0.1, 50.0):  # a huge first step forces the backtracking
            spec = RKMESpecification(n_points=8, steps=5, step_size=step, random_state=seed).fit(X)
            h = spec.mmd2_history_
            assert len(h) == 6 and all(b <= a + 1e-15 for a, b in zip(h, h[1:]))
            assert abs(h[-1] - _mmd2_direct(spec.Z_, spec.beta_, spec.scaler_.transform(X), spec.gamma_)) <= 1e-10
    # the larger step does move Z and lower MMD^2 measurably
    X = _sample(digits, 120, 0)
    spec = RKMESpecification(n_points=8, steps=5, step_size=50.0, random_state=0).fit(X)
    assert spec.mmd2_history_[-1] < spec.mmd2_history_[0] * (1 - 1e-3)


def test_z_gradient_matches_finite_differences_and_the_reference_differs():
    rng = np.random.default_rng(0)
    X, Z = rng.standard_normal((40, 3)), rng.standard_normal((5, 3))
    beta = rng.dirichlet(np.ones(5))
    gamma = 0.3
    G = z_gradient(Z, beta, X, gamma)
    eps = 1e-6
    num = np.zeros_like(Z)
    for j in range(5):
        for c in range(3):
            Zp, Zm = Z.copy(), Z.copy()
            Zp[j, c] += eps
            Zm[j, c] -= eps
            num[j, c] = (_mmd2_direct(Zp, beta, X, gamma) - _mmd2_direct(Zm, beta, X, gamma)) / (2 * eps)
    assert np.abs(G - num).max() <= 1e-8
    ref = z_gradient(Z, beta, X, gamma, reference=True)
    assert np.abs(ref - num).max() > 1e-3


def test_mmd2_falls_with_m(digits):
    X = _sample(digits, 200, 2)
    values = [RKMESpecification(n_points=m, random_state=0).fit(X).mmd2_to_data(X) for m in (5, 10, 20, 50, 100)]
    assert all(b <= 1.05 * a for a, b in zip(values, values[1:])), values
    assert values[-1] < values[0] / 10


def test_blocked_kernels_match_the_direct_ones(digits, monkeypatch):
    import icml26.training.rkme.kernels as rkme

    monkeypatch.setattr(rkme, "KERNEL_CHUNK", 7)
    X = StandardScaling.fit(digits[:50]).transform(digits[:50])
    Z = X[:9] + 0.1
    gamma = median_gamma(X)
    assert np.allclose(kernel_row_means(Z, X, gamma), gaussian_kernel(Z, X, gamma).mean(1), atol=1e-14)
    assert math.isclose(data_self_term(X, gamma), gaussian_kernel(X, X, gamma).mean(), abs_tol=1e-14)


def test_replace_one_neighbours_kme_distance_is_exact(digits):
    X = StandardScaling.fit(digits[:201]).transform(digits[:201])
    gamma = median_gamma(X)
    D, D2 = X[:200], np.vstack([X[:199], X[200:201]])
    n = 200
    dist2 = data_self_term(D, gamma) + data_self_term(D2, gamma) - 2 * gaussian_kernel(D, D2, gamma).sum() / n**2
    expected = neighbour_kme_distance(X[199], X[200], n, gamma)
    assert abs(math.sqrt(max(dist2, 0.0)) - expected) <= 1e-9
    assert math.isclose(expected, math.sqrt(2 - 2 * math.exp(-gamma * ((X[199] - X[200]) ** 2).sum())) / n)
    assert expected <= 2 / n


def _closest_to_a_record(spec, X):
    Xs = spec.scaler_.transform(X)
    return float(np.sqrt(((Xs[:, None, :] - spec.Z_[None]) ** 2).sum(-1)).min())


def test_no_reduced_point_copies_a_record_at_small_m(digits):
    for seed in range(6):
        X = _sample(digits, 200, 10 + seed)
        for m in (5, 10, 20):
            spec = RKMESpecification(n_points=m, random_state=seed).fit(X)
            assert _closest_to_a_record(spec, X) > 1e-6, (seed, m)
            assert len(spec.Z_) == m


def test_no_reduced_point_lies_within_the_record_floor_even_at_m_n_over_2(digits):
    copies = 0
    for seed in range(3):
        X = _sample(digits, 200, seed)
        for m in (100, 200):  # n/2, and m >= n (the 2n/3 fallback)
            spec = RKMESpecification(n_points=m, random_state=seed).fit(X)
            floor = 0.1 / math.sqrt(spec.gamma_)
            assert _closest_to_a_record(spec, X) >= floor * (1 - 1e-9), (seed, m)
            h = spec.mmd2_history_
            assert all(b <= a + 1e-15 for a, b in zip(h, h[1:]))
        # negative control: without the floor the Z steps put points on records (the 2 of 3 at n/2)
        copies += _closest_to_a_record(RKMESpecification(n_points=100, random_state=seed, record_floor=0.0).fit(X),
                                       X) < 1e-4
    assert copies >= 2


def test_the_record_floor_escapes_a_crowd_of_records():
    from icml26.training.rkme.kernels import _keep_off_records

    X = np.linspace(0.0, 1.0, 1001)[:, None]  # records 0.001 apart: every point inside [0, 1] is too close
    Z = np.array([[0.5], [0.5], [0.2001], [3.0]])
    out = _keep_off_records(Z, X, 0.05, np.random.default_rng(0))
    d = np.abs(out - X.T).min(1)
    assert (d >= 0.05).all() and out[3, 0] == 3.0  # a point already clear of the records stays put


def test_nan_rows_are_imputed_by_column_means(digits):
    X = _sample(digits, 60, 3)
    Y = X.copy()
    Y[0, 10], Y[5, 20] = np.nan, np.inf
    spec = RKMESpecification(n_points=5, random_state=0).fit(Y)
    assert np.isfinite(spec.Z_).all() and np.isfinite(spec.mmd2_history_).all()


def test_nonnegative_beta_false_uses_the_ridge_solution(digits):
    X = _sample(digits, 100, 4)
    spec = RKMESpecification(n_points=10, nonnegative_beta=False, steps=0, random_state=0).fit(X)
    Xs = spec.scaler_.transform(X)
    K = gaussian_kernel(spec.Z_, spec.Z_, spec.gamma_)
    assert np.allclose(spec.beta_, np.linalg.solve(K + 1e-5 * np.eye(10), kernel_row_means(spec.Z_, Xs, spec.gamma_)))


# ----------------------------------------------------------------------------------------------
# using and saving a specification
# ----------------------------------------------------------------------------------------------
def test_score_inner_mmd2_and_json_round_trip(digits, tmp_path):
    X = _sample(digits, 120, 5)
    spec = RKMESpecification(n_points=10, random_state=0).fit(X)
    other = RKMESpecification(n_points=10, gamma=spec.gamma_, scaler=spec.scaler_, random_state=1).fit(X[:60])
    s = spec.score(X[:4])
    assert s.shape == (4,) and np.allclose(s, gaussian_kernel(spec.scaler_.transform(X[:4]), spec.Z_, spec.gamma_)
                                           @ spec.beta_)
    assert spec.score(X[0]).shape == (1,)  # one row as a vector
    assert math.isclose(spec.mmd2(spec), 0.0, abs_tol=1e-14) and spec.mmd2(other) > 0
    assert math.isclose(spec.mmd2(other), spec.inner(spec) - 2 * spec.inner(other) + other.inner(other))
    path = tmp_path / "spec.json"
    spec.save(path)
    raw = json.loads(path.read_text())
    assert raw["type"] == "RKMETableSpecification" and len(raw["z"]) == raw["num_points"] == 10
    assert set(raw) >= {"gamma", "beta", "z", "device"}
    back = RKMESpecification.load(path)
    assert np.allclose(back.score(X[:4]), s, atol=1e-14) and math.isclose(back.mmd2(other), spec.mmd2(other))


def test_herding_returns_pseudo_records_near_the_data(digits):
    X = _sample(digits, 150, 6)
    spec = RKMESpecification(n_points=10, random_state=0).fit(X)
    S = spec.herding(20, seed=0)
    assert S.shape == (20, 64)
    # herded points summarise the data better than as many random Gaussian points in the scaled space
    herd = RKMESpecification(reduce=False, gamma=spec.gamma_, scaler=spec.scaler_).fit(S)
    noise = RKMESpecification(reduce=False, gamma=spec.gamma_, scaler=spec.scaler_).fit(
        spec.scaler_.inverse_transform(np.random.default_rng(0).standard_normal((20, 64)) * 2))
    assert herd.mmd2_to_data(X) < noise.mmd2_to_data(X)


def test_noisy_copy_spec_is_a_perturbed_raw_spec(digits):
    X = _sample(digits, 50, 7)
    spec = noisy_copy_spec(X, 0.5, seed=0)
    Xs = spec.scaler_.transform(X)
    assert spec.Z_.shape == Xs.shape and 0.45 < (spec.Z_ - Xs).std() < 0.55


# ----------------------------------------------------------------------------------------------
# the market
# ----------------------------------------------------------------------------------------------
def test_market_identifies_the_source_and_mixture_weights_lie_on_the_simplex(digits):
    from sklearn.datasets import load_digits

    y = load_digits().target
    scaler = StandardScaling.fit(digits)
    gamma = median_gamma(scaler.transform(digits))
    market = LearnwareMarket(gamma, scaler)
    for a in range(0, 10, 2):
        idx = np.flatnonzero((y == a) | (y == a + 1))[:150]
        market.add(f"{a}/{a + 1}", None, market.specification(digits[idx], n_points=10, random_state=0))
    user_idx = np.flatnonzero((y == 4) | (y == 5))[150:250]
    user = market.specification(digits[user_idx], n_points=20, random_state=1)
    found = market.search(user)
    assert found.ranking[0] == "4/5" and found.scores[0] >= 0.92 - 1e-12
    assert found.distances == sorted(found.distances)
    for mixture in ("auto", "greedy"):
        mix = market.search(user, mode="mixture", mixture=mixture)
        w = np.array(mix.weights)
        assert w.min() >= -1e-9 and abs(w.sum() - 1) <= 1e-6 and len(w) == len(mix.mixture) >= 1
        assert mix.mixture_mmd2 <= found.distances[0] + 1e-9  # a mixture is at least as close as the best single
    # a user mixing two tasks gets weight on both
    both = np.concatenate([np.flatnonzero(y == 0)[100:150], np.flatnonzero(y == 8)[100:150]])
    mix = market.search(market.specification(digits[both], n_points=20, random_state=2), mode="mixture")
    assert set(mix.mixture) >= {"0/1", "8/9"}


def test_convert_dist_to_score_follows_the_reference():
    assert convert_dist_to_score([0.5, 0.5]) == [1.0, 1.0]
    scores = convert_dist_to_score([0.1, 0.2, 1.0])
    assert scores[0] >= 0.92 and scores[-1] == 0.0 and scores == sorted(scores, reverse=True)
    assert convert_dist_to_score([0.001, 0.5]) == [1.0, 0.0]


def test_market_refuses_specs_built_otherwise(digits):
    scaler = StandardScaling.fit(digits)
    market = LearnwareMarket(0.01, scaler)
    X = digits[:80]
    with pytest.raises(InputError, match="gamma"):
        market.add("a", None, RKMESpecification(n_points=5, gamma=0.02, scaler=scaler).fit(X))
    with pytest.raises(InputError, match="scaler"):
        market.add("a", None, RKMESpecification(n_points=5, gamma=0.01).fit(X))
    with pytest.raises(InputError, match="dimension"):
        market.add("a", None, RKMESpecification(n_points=5, gamma=0.01).fit(X[:, :10]))
    market.add("a", None, market.specification(X, n_points=5))
    with pytest.raises(InputError, match="name"):
        market.add("a", None, market.specification(X, n_points=5))
    with pytest.raises(InputError, match="mode"):
        market.search(market.specification(X, n_points=5), mode="best")


# ----------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------
def test_bad_input_names_the_argument(digits):
    X = digits[:50]
    with pytest.raises(InputError, match="n_points: expected an int >= 1, got 0"):
        RKMESpecification(n_points=0).fit(X)
    for gamma in (0.0, -1.0):
        with pytest.raises(InputError, match="gamma: expected a positive"):
            RKMESpecification(gamma=gamma).fit(X)
    with pytest.raises(InputError, match="gamma"):
        RKMESpecification(gamma="mean").fit(X)
    with pytest.raises(InputError, match="X: expected a 2-D array with at least 2 rows"):
        RKMESpecification().fit(X[:1])
    with pytest.raises(InputError, match="beta_solver"):
        RKMESpecification(beta_solver="osqp").fit(X)
    spec = RKMESpecification(n_points=5).fit(X)
    with pytest.raises(InputError, match="X: expected 64 features"):
        spec.score(X[:, :63])
    with pytest.raises(InputError, match="fitted"):
        RKMESpecification().score(X)
    with pytest.raises(InputError, match="T: expected an int >= 1"):
        spec.herding(0)
    with pytest.raises(InputError, match="gamma"):
        spec.mmd2(RKMESpecification(n_points=5, gamma=1.0).fit(X))


# ----------------------------------------------------------------------------------------------
# the games
# ----------------------------------------------------------------------------------------------
def test_membership_game_catches_a_spec_that_stores_raw_records():
    from icml26.eval.tasks.rkme import MembershipGame, play, rkme_factory

    game = MembershipGame(n=60, n_worlds=60)
    results = play(game, {"raw": rkme_factory(reduce=False), "m = 3": rkme_factory(n_points=3)}, seed=0)
    raw, small = results["raw"], results["m = 3"]
    assert raw.with_spec >= 0.9 and raw.ci_low > 0 and raw.tpr_at_1pct_fpr_with >= 0.9
    assert small.delta < raw.delta and small.with_spec >= small.without  # the adversary may ignore the spec
    assert raw.worlds == 60 and len(raw.roc["with spec"][0]) == 50


def test_attribute_game_reads_the_hidden_pixel_from_raw_records():
    from icml26.eval.tasks.rkme import AttributeGame, play, rkme_factory

    raw = play(AttributeGame(n=60, n_worlds=40), rkme_factory(reduce=False), seed=0)
    assert raw.with_spec >= 0.8 and raw.delta > 0 and raw.adversary.endswith("nearest")


def test_games_validate_their_arguments():
    from icml26.eval.tasks.rkme import AttributeGame, MembershipGame, play

    with pytest.raises(InputError, match="target"):
        MembershipGame(target="rare")
    with pytest.raises(InputError, match="n_worlds"):
        MembershipGame(n_worlds=3)
    with pytest.raises(InputError, match="hidden_feature"):
        AttributeGame(hidden_feature=64)
    with pytest.raises(InputError, match="spec_factory"):
        play(MembershipGame(n_worlds=20), {}, seed=0)


@pytest.mark.skipif(not __import__("importlib").util.find_spec("learnware"), reason="learnware not installed")
def test_ours_is_at_most_1_1x_learnwares_mmd2_at_m_50(digits):  # pragma: no cover - optional dependency
    from learnware.specification import RKMETableSpecification

    X = StandardScaling.fit(digits[:400]).transform(digits[:400])
    gamma = median_gamma(X)
    ours = RKMESpecification(n_points=50, gamma=gamma, standardize=False, random_state=0).fit(X)
    theirs = RKMETableSpecification(gamma=gamma)
    theirs.generate_stat_spec_from_data(X, K=50)
    Zt, bt = np.asarray(theirs.get_z()), np.asarray(theirs.get_beta()).ravel()
    assert ours.mmd2_to_data(X) <= 1.1 * _mmd2_direct(Zt, bt, X, gamma)


# ----------------------------------------------------------------------------------------------
# LiRA
# ----------------------------------------------------------------------------------------------
def test_balanced_halves_put_every_record_in_exactly_one_model_of_each_pair():
    member = balanced_halves(40, 5, seed=0)
    assert member.shape == (10, 40) and (member[0::2] == ~member[1::2]).all()
    assert (member.sum(1) == 20).all() and (member.sum(0) == 5).all()
    assert not (balanced_halves(40, 5, seed=1) == member).all()


def _naive_log_ratio(S, member, variance):
    """Leave one pair out by slicing, Gaussians by np.mean / np.var: the reference for the running sums."""
    out = np.zeros_like(S)
    for k in range(len(S)):
        keep = np.arange(len(S)) // 2 != k // 2
        Sk, Ik = S[keep], member[keep]
        side = [Sk.T[Ik.T].reshape(S.shape[1], -1), Sk.T[~Ik.T].reshape(S.shape[1], -1)]  # (records, shadows)
        mu = [a.mean(1) for a in side]
        var = [a.var(1, ddof=1) for a in side]
        if variance == "global":
            var = [np.full(S.shape[1], v.mean()) for v in var]
        var = [v + 1e-8 for v in var]
        ll = [-0.5 * (S[k] - m) ** 2 / v - 0.5 * np.log(v) for m, v in zip(mu, var)]
        out[k] = ll[0] - ll[1]
    return out


@pytest.mark.parametrize("variance", ["per_target", "global"])
def test_lira_log_ratio_matches_a_naive_leave_one_pair_out_fit(variance):
    rng = np.random.default_rng(0)
    member = balanced_halves(30, 6, seed=3)
    S = rng.normal(size=member.shape) + 0.7 * member
    assert np.allclose(lira_log_ratio(S, member, variance), _naive_log_ratio(S, member, variance), atol=1e-9)


def test_lira_separates_a_member_signal_and_not_noise():
    rng = np.random.default_rng(1)
    member = balanced_halves(400, 8, seed=1)
    noise = rng.normal(size=member.shape) + rng.normal(size=(1, 400))  # a per-target offset, no membership
    assert abs(per_target_advantage(lira_log_ratio(noise, member), member).mean()) < 0.03
    signal = noise + 3.0 * member
    assert per_target_advantage(lira_log_ratio(signal, member), member).mean() > 0.8
    # the global-variance variant cannot undo a per-target scale the per-target one sees
    scaled = rng.normal(size=member.shape) * np.exp(rng.normal(size=(1, 400))) + 0.5 * member
    assert per_target_advantage(lira_log_ratio(scaled, member), member).mean() > 0


def test_logit_confidence_is_the_log_odds():
    assert np.allclose(logit_confidence([0.5, 0.9, 0.1]), [0.0, math.log(9), -math.log(9)])
    assert np.isfinite(logit_confidence([0.0, 1.0])).all()


def test_lira_game_catches_raw_records_and_the_model_leaks_some():
    from icml26.eval.tasks.rkme import LiraGame, lira_result, lira_worlds, merge_worlds, rkme_factory

    game = LiraGame(n=60, pairs=4)
    factories = {"raw": rkme_factory(reduce=False), "m = 3": rkme_factory(n_points=3)}
    whole = lira_worlds(game, factories, seed=0)
    parts = merge_worlds([lira_worlds(game, factories, seed=0, worlds=range(a, b)) for a, b in ((0, 3), (3, 8))])
    assert np.array_equal(parts["model"], whole["model"]) and np.array_equal(parts["member"], whole["member"])
    raw, small = lira_result(whole, "raw"), lira_result(whole, "m = 3")
    assert raw.with_spec >= 0.99 and raw.ci_low > 0 and raw.per_adversary["nearest reduced point"] >= 0.99
    assert 0.1 < raw.without < 0.9 and small.without == raw.without
    assert small.delta < raw.delta and raw.worlds == 8 and len(raw.correct_with) == 120


# ----------------------------------------------------------------------------------------------
# the experiment, shrunk
# ----------------------------------------------------------------------------------------------
def test_quick_experiment_shrunk_keeps_the_claims_direction(tmp_path):
    from icml26.eval.experiments.rkme import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], market_points=(5, 10), users=10, worlds=60, n=60, game_points=(5,),
                            batches=2, attribute_worlds=30, leak_sigmas=(0.3,), lira_pairs=4)
    result = run_experiment(RunConfig(out_dir=tmp_path), s)
    claims = {c.statement.split(" (")[0].split(":")[0]: c for c in result.claims}
    assert claims["top-1 identification at every m >= 10"].measured >= 0.9
    assert claims["membership advantage with the reduce=False spec"].holds
    assert result.metrics["membership"]["reduce=False"]["delta"] > result.metrics["membership"]["m = 5"]["delta"]
    assert set(result.figures) == {"identification_and_risk_vs_m", "mmd2_vs_m", "membership_roc"}
    assert result.metrics["attribute"]["reduce=False"]["delta"] > result.metrics["attribute"]["m = 10"]["delta"]
    lira = result.metrics["lira"]
    assert lira["reduce=False"]["with_spec"] >= 0.99 and lira["m = 50"]["delta"] > lira["m = 10"]["delta"]
    closest = {k: v["closest_reduced_point_to_a_member"] for k, v in lira.items()}
    assert closest["m = 10"] > 0.5 and closest["reduce=False"] < 1e-6
