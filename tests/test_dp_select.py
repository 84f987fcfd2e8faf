"""Private hypothesis selection: Scheffé tables, exact DP on every neighbour, the lazy sampler, the audit."""

import dataclasses

import numpy as np
import pytest
from scipy.stats import chisquare

from icml26 import InputError
from icml26.eval.tasks.dp_select import audit_instance, draw_problem, make_class
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
    default_k,
    dirichlet_class,
    em_probabilities,
    exact_privacy_loss,
    exponential_mechanism,
    gaussian_cover,
    lazy_exponential_mechanism,
    mde_distances,
    neighbours,
    sample,
    scheffe_table,
    tv,
)

EPS = 1.0


def _counts(x, D):
    return np.bincount(x, minlength=D).astype(float)


def _chi2_p(draws, law):
    observed = np.bincount(draws, minlength=law.size).astype(float)
    expected = law * draws.size
    keep = expected >= 5  # merge the rare outputs into one bin
    obs = np.append(observed[keep], observed[~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    return chisquare(obs, exp * obs.sum() / exp.sum()).pvalue


# ----------------------------------------------------------------------------------------------
# Scheffé tables
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("precompute", [False, True])
def test_scheffe_table_gives_tv_masses_and_counts(precompute):
    H = dirichlet_class(9, 23, alpha=0.5, seed=1)
    x = sample(H[2], 300, seed=2)
    cover = HypothesisClass(H, precompute=precompute)
    pairs = np.array([(i, j) for i in range(9) for j in range(9) if i != j])
    table = scheffe_table(cover, pairs, _counts(x, 23), chunk=7)
    assert table.n_evals == len(pairs) == 72
    np.testing.assert_allclose(table.tv, tv(H[pairs[:, 0]], H[pairs[:, 1]]), rtol=0, atol=1e-12)
    masks = H[pairs[:, 0]] > H[pairs[:, 1]]
    np.testing.assert_array_equal(table.counts, [np.isin(x, np.flatnonzero(m)).sum() for m in masks])
    np.testing.assert_allclose(table.h_i, (H[pairs[:, 0]] * masks).sum(1), atol=1e-15)
    np.testing.assert_allclose(table.h_j, (H[pairs[:, 1]] * masks).sum(1), atol=1e-15)


def test_precomputed_masses_give_the_same_scores():
    H = gaussian_cover(40)
    x = sample(H[17], 400, seed=3)
    c = _counts(x, H.shape[1])
    np.testing.assert_allclose(mde_distances(HypothesisClass(H), c), mde_distances(HypothesisClass(H, precompute=True), c),
                               atol=1e-9)


# ----------------------------------------------------------------------------------------------
# exact differential privacy on every replace-one neighbour
# ----------------------------------------------------------------------------------------------
PRIVATE = {
    "BKSW": lambda: BKSWSelector(EPS),
    "private MDE": lambda: PrivateMDE(EPS, lazy=False),
    "StrongSetEM k=1": lambda: StrongSetEM(EPS, k=1, random_state=3),
    "StrongSetEM k=2": lambda: StrongSetEM(EPS, k=2, random_state=3),
    "StrongSetEM k=2 shared data": lambda: StrongSetEM(EPS, k=2, split=None, random_state=3),
    "StrongSetEM k=0 (no strong set)": lambda: StrongSetEM(EPS, k=0, random_state=3),
}


@pytest.mark.parametrize("name", list(PRIVATE))
@pytest.mark.parametrize("seed", [0, 1])
def test_exact_privacy_loss_is_at_most_epsilon(name, seed):
    H, x = audit_instance(seed)
    assert H.shape == (6, 5) and x.size == 20
    sel = PRIVATE[name]()
    assert sel.fit(H, x).epsilon_ == EPS
    loss = exact_privacy_loss(sel, H, x)
    assert 0.2 < loss <= EPS + 1e-9, loss


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dropping_the_factor_two_breaks_privacy(seed):
    H, x = audit_instance(seed)
    assert exact_privacy_loss(ForgottenFactorMDE(EPS), H, x) > 1.5 * EPS


def test_bksw_and_mde_scores_move_by_at_most_one_between_neighbours():
    H, x = audit_instance(4)
    bksw, mde = BKSWSelector(EPS, margin=0.1), PrivateMDE(EPS, lazy=False)
    cover = HypothesisClass(H)
    base_b, _ = bksw._scores(cover, x, _counts(x, 5))
    base_m, _ = mde._scores(cover, x, _counts(x, 5))
    assert np.array_equal(base_b, np.round(base_b)) and base_b.min() >= 0 and base_b.max() <= 20
    moved = 0
    for _, _, other in neighbours(x, 5):
        b, _ = bksw._scores(cover, other, _counts(other, 5))
        m, _ = mde._scores(cover, other, _counts(other, 5))
        assert np.abs(b - base_b).max() <= 1 and np.abs(m - base_m).max() <= 1 + 1e-9
        moved += np.abs(b - base_b).max() == 1
    assert moved > 0  # the bound is attained, not vacuous


# ----------------------------------------------------------------------------------------------
# the lazy sampler
# ----------------------------------------------------------------------------------------------
def test_lazy_equals_full_under_a_common_gumbel_vector_on_1000_instances():
    rng = np.random.default_rng(0)
    visited = []
    for trial in range(1000):
        n, D = int(rng.integers(2, 40)), int(rng.integers(2, 25))
        H = dirichlet_class(n, D, alpha=float(rng.choice([0.3, 1.0, 5.0])), seed=trial)
        x = sample(H[int(rng.integers(n))], int(rng.integers(1, 200)), seed=rng)
        eps = float(rng.choice([0.05, 0.5, 1.0, 8.0]))
        cover, c = HypothesisClass(H), _counts(x, D)
        gumbel = rng.gumbel(size=n)
        full = int(np.argmax(-mde_distances(cover, c) * (eps / 2) + gumbel))
        sel = PrivateMDE(eps)
        index, n_visited, _, strong = sel._lazy_select(cover, c, default_k(n), gumbel, np.random.default_rng(trial))
        assert index == full, trial
        assert strong.size == min(n, default_k(n))
        visited.append(n_visited / n)
    assert np.mean(visited) < 0.5  # it does skip most hypotheses


def test_lazy_and_full_fits_agree_with_the_same_random_state():
    cover = make_class("gaussian", 300)
    for r in range(20):
        problem = draw_problem(cover, "agnostic", 300, r)
        lazy = PrivateMDE(0.5, random_state=r).fit(cover, problem.samples)
        full = PrivateMDE(0.5, lazy=False, random_state=r).fit(cover, problem.samples)
        assert lazy.index_ == full.index_
        assert lazy.n_scheffe_evals_ < full.n_scheffe_evals_ / 5


def test_lazy_sampler_draws_follow_the_exponential_mechanism():
    H, x = audit_instance(5, n=8, D=6, s=15)
    cover, c = HypothesisClass(H), _counts(x, 6)
    law = PrivateMDE(EPS).output_probabilities(H, x)
    np.testing.assert_allclose(law, em_probabilities(-mde_distances(cover, c), EPS))
    # the sampler core with the bounds of a fixed strong set (which set it is changes only the cost; the
    # test above checks the whole lazy path, strong set included, against the full mechanism)
    exact = -mde_distances(cover, c)
    strong = np.array([0, 3, 5])
    from icml26.training.dp_select.selection import _deviations

    lower = _deviations(cover, c, np.arange(8), strong, 64)
    lower[strong, np.arange(3)] = 0
    upper = -lower.max(axis=1)
    assert (upper >= exact).all() and (upper > exact).any()
    rng = np.random.default_rng(1)
    draws = np.array([lazy_exponential_mechanism(upper, lambda rows: exact[rows], EPS, rng.gumbel(size=8))[0]
                      for _ in range(20_000)])
    assert _chi2_p(draws, law) > 1e-3


def test_lazy_exponential_mechanism_stops_early_with_tight_bounds():
    scores = np.linspace(-100, 0, 1000)
    gumbel = np.random.default_rng(0).gumbel(size=1000)
    index, visited = lazy_exponential_mechanism(scores, lambda rows: scores[rows], 1.0, gumbel)
    assert index == int(np.argmax(scores / 2 + gumbel)) and visited < 30


# ----------------------------------------------------------------------------------------------
# laws, draws, accounting
# ----------------------------------------------------------------------------------------------
def test_strong_set_fits_and_vectorised_draws_follow_the_exact_law():
    H, x = audit_instance(2)
    # n_opponents = n and shared data: no data-free choice depends on random_state, so one law covers every fit
    law = StrongSetEM(EPS, k=2, split=None, n_opponents=6, random_state=0).output_probabilities(H, x)
    fits = np.array([StrongSetEM(EPS, k=2, split=None, n_opponents=6, random_state=r).fit(H, x).index_
                     for r in range(3000)])
    assert _chi2_p(fits, law) > 1e-3
    split = StrongSetEM(EPS, k=2, random_state=7)
    assert _chi2_p(split.draw(H, x, 20_000, random_state=1), split.output_probabilities(H, x)) > 1e-3


def test_strong_set_accounting_and_fitted_attributes():
    H, x = audit_instance(0)
    split = StrongSetEM(2.0, k=2, random_state=0).fit(H, x)
    assert split.epsilon_ == 2.0 and split.epsilon_stages_ == (2.0, 2.0)
    shared = StrongSetEM(2.0, k=2, split=None, random_state=0).fit(H, x)
    assert shared.epsilon_ == 2.0 and shared.epsilon_stages_ == (1.0, 1.0)
    assert 1 <= split.strong_set_.size <= 2 and split.opponents_.size == 4
    assert split.n_scheffe_evals_ == 5 * (4 + np.union1d(split.strong_set_, split.opponents_).size)


def test_non_private_selectors_find_the_truth_and_are_deterministic():
    cover = make_class("gaussian", 200, precompute=True)
    problem = draw_problem(cover, "realizable", 5000, 0)
    for sel in (MinimumDistanceEstimate(), ScheffeTournament()):
        sel.fit(cover, problem.samples)
        assert sel.epsilon_ == np.inf and problem.tv_of(cover, sel.index_) < 0.03
        law = sel.output_probabilities(cover, problem.samples)
        assert law[sel.index_] == 1 and law.sum() == 1
    assert ScheffeTournament().fit(cover, problem.samples).n_scheffe_evals_ == 200 * 199 // 2
    assert MinimumDistanceEstimate().fit(cover, problem.samples).n_scheffe_evals_ == 200 * 199


def test_private_selectors_are_accurate_at_s_2000_eps_1():
    cover = make_class("gaussian", 500, precompute=True)
    for truth in ("realizable", "agnostic"):
        for r in range(5):
            problem = draw_problem(cover, truth, 2000, (r, 9))
            for sel in (PrivateMDE(EPS, random_state=r), StrongSetEM(EPS, random_state=r), BKSWSelector(EPS, random_state=r)):
                assert problem.tv_of(cover, sel.fit(cover, problem.samples).index_) <= 3 * problem.opt + 0.1


def test_classes_and_truths():
    H = gaussian_cover(11, n_sigmas=3)
    assert H.shape == (33, 200) and np.allclose(H.sum(1), 1)
    P = agnostic_truth(H, 4)
    laplace = (P - 0.8 * H[4]) / 0.2
    assert np.isclose(P.sum(), 1) and laplace.min() >= 0 and np.isclose(laplace.sum(), 1)
    assert np.isclose(tv(H[4], P), 0.2 * tv(H[4], laplace)) and 0.01 < tv(H, P).min() < 0.05
    assert np.allclose(agnostic_truth(H, 4, weight=1.0), H[4])
    assert tv(H, H[3]).shape == (33,) and tv(H, H[3])[3] == 0


# ----------------------------------------------------------------------------------------------
# the audit
# ----------------------------------------------------------------------------------------------
def test_audit_passes_private_selectors_and_catches_the_forgotten_factor():
    H, x = audit_instance(1)
    ok = audit_epsilon(PrivateMDE(EPS, lazy=False), H, x, 20_000, random_state=0)
    assert not ok.violated and ok.epsilon_lower <= EPS and ok.exact_loss <= EPS + 1e-9
    assert 0.5 < ok.expected_lower < EPS
    broken = audit_epsilon(ForgottenFactorMDE(EPS), H, x, 20_000, random_state=0)
    assert broken.violated and broken.epsilon_lower > 1.3 * EPS
    assert sum(broken.counts) > 0 and broken.to_dict()["n_runs"] == 20_000


# ----------------------------------------------------------------------------------------------
# OpenDP backend
# ----------------------------------------------------------------------------------------------
def _permute_and_flip_law(scores, epsilon):
    # OpenDP's max-divergence noisy max adds exponential noise: the permute-and-flip law (Ding et al. 2021)
    import itertools

    accept = np.exp(epsilon * (scores - scores.max()) / 2)
    law = np.zeros(scores.size)
    orders = list(itertools.permutations(range(scores.size)))
    for order in orders:
        reach = 1.0
        for r in order:
            law[r] += reach * accept[r] / len(orders)
            reach *= 1 - accept[r]
    return law


def test_opendp_backend_samples_report_noisy_max():
    pytest.importorskip("opendp")
    scores = np.array([0.0, -1.0, -2.0])
    draws = np.array([exponential_mechanism(scores, 2.0, backend="opendp") for _ in range(1500)])
    law = _permute_and_flip_law(scores, 2.0)
    assert _chi2_p(draws, law) > 1e-3
    assert _chi2_p(draws, em_probabilities(scores, 2.0)) < 1e-3  # another law than the softmax, as documented
    H, x = audit_instance(0)
    assert 0 <= PrivateMDE(EPS, lazy=False, backend="opendp").fit(H, x).index_ < 6
    assert 0 <= StrongSetEM(EPS, k=2, backend="opendp").fit(H, x).index_ < 6
    with pytest.raises(InputError, match="PrivateMDE: lazy"):
        PrivateMDE(EPS, backend="opendp").fit(H, x)


# ----------------------------------------------------------------------------------------------
# bad input
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("H, x, match", [
    (np.array([[0.5, 0.6, -0.1], [0.2, 0.3, 0.5]]), [0], r"PrivateMDE.fit: H: expected non-negative rows.*H\[0, 2\]"),
    (np.array([[0.5, 0.4, 0.0], [0.2, 0.3, 0.5]]), [0], "PrivateMDE.fit: H: expected rows summing to 1, got row 0 sums to 0.9"),
    (np.ones(3) / 3, [0], r"PrivateMDE.fit: H: expected an \(n, D\) array"),
    (np.ones((2, 3)) / 3, [0, 3], r"PrivateMDE.fit: samples: expected domain points in \[0, 3\), got a sample equal to 3"),
    (np.ones((2, 3)) / 3, [], "PrivateMDE.fit: samples: expected a non-empty 1-D array"),
    (np.ones((2, 3)) / 3, [0.5], "PrivateMDE.fit: samples: expected integer domain points"),
])
def test_bad_data_is_refused_with_a_clear_message(H, x, match):
    with pytest.raises(InputError, match=match):
        PrivateMDE(EPS).fit(H, x)


@pytest.mark.parametrize("make, match", [
    (lambda: PrivateMDE(0.0), "PrivateMDE: epsilon: expected a positive finite number, got 0"),
    (lambda: BKSWSelector(-1.0), "BKSWSelector: epsilon: expected a positive"),
    (lambda: BKSWSelector(1.0, margin=1.5), "BKSWSelector: margin: expected a number in"),
    (lambda: StrongSetEM(1.0, k=7), r"StrongSetEM: k: expected an int in \[1, n = 6\], got 7"),
    (lambda: PrivateMDE(1.0, k=7), r"PrivateMDE: k: expected an int in \[1, n = 6\], got 7"),
    (lambda: StrongSetEM(1.0, split=1.0), r"StrongSetEM: split: expected None or a number in \(0, 1\)"),
    (lambda: PrivateMDE(1.0, backend="jax"), "PrivateMDE: backend: expected one of"),
])
def test_bad_parameters_are_refused_at_fit(make, match):
    H, x = audit_instance(0)
    with pytest.raises(InputError, match=match):
        make().fit(H, x)


def test_bad_table_and_audit_arguments():
    H = np.ones((3, 4)) / 4
    with pytest.raises(InputError, match=r"scheffe_table: pairs: expected indices in \[0, 3\)"):
        scheffe_table(H, np.array([[0, 3]]), np.ones(4))
    with pytest.raises(InputError, match=r"scheffe_table: counts: expected a finite non-negative histogram of shape \(4,\)"):
        scheffe_table(H, np.array([[0, 1]]), np.ones(3))
    with pytest.raises(InputError, match="audit_epsilon: n_runs: expected an int >= 1"):
        audit_epsilon(PrivateMDE(), H, [0, 1], 0)
    with pytest.raises(InputError, match=r"StrongSetEM.output_probabilities: H: expected n\^k"):
        StrongSetEM(k=8, random_state=0).output_probabilities(dirichlet_class(40, 3, seed=0), [0, 1, 2])


# ----------------------------------------------------------------------------------------------
# the experiment, shrunk
# ----------------------------------------------------------------------------------------------
def test_quick_experiment_shrunk_makes_its_claims(tmp_path):
    from icml26.eval.experiments.dp_select import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], cost_ns=(250, 500, 1000), cost_reps=1, price_n=200, runs=5,
                            price_samples=(300,), price_epsilons=(1.0,), accuracy_s=1000, audit_draws=20_000,
                            rate_ns=(16, 32), rate_epsilons=(1.0,), rate_runs=9)
    result = run_experiment(RunConfig(out_dir=tmp_path), s)
    claims = {c.statement.split(":")[0]: c for c in result.claims}
    # cost 4, rate 2 per claimed class + the power check, price 2 (private MDE only), audit 5
    assert len(result.claims) == 16
    assert not any("StrongSetEM: worst cell" in c.statement for c in result.claims)
    rate = result.tables["sample complexity s* (median TV <= alpha) vs n"]
    assert len(rate) == 3 * 2 and all(r["s* private MDE"] >= 16 for r in rate)
    for r in rate:
        assert r["ratio StrongSetEM"] == pytest.approx(r["s* StrongSetEM"] / r["s* private MDE"], rel=1e-3)
    assert result.metrics["evals_slope"]["full private MDE"] == pytest.approx(2.0, abs=0.01)
    for c in result.claims:
        if "Scheffé" in c.statement or "audit" in c.statement:
            assert c.holds, c.statement
    assert claims["audit has power"].measured > 1
    assert set(result.figures) == {"scheffe_evals_vs_n", "rate_ratio_vs_n", "tv_histograms", "audited_epsilon"}
