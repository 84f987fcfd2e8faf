"""Boundary optima (the delta method's warning, the batched solver, the parametric bootstrap), Monte-Carlo
integration above MAX_PROFILES, and the game's solver checks that hold by construction."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from icml26.eval.tasks import conjoint as task
from icml26.training.conjoint import (
    AverageCasePolicy,
    BoundaryWarning,
    FactorialDesign,
    MinimaxPolicy,
    PairedConjointLogit,
    solve_batch,
)


def _fitted(design, seed=0, n=2000):
    data = task.simulate(design, task.true_coefficients(design, seed), n, seed=seed + 1)
    return PairedConjointLogit("all", backend="numpy").fit(data.left, data.right, data.chosen, data.respondent,
                                                           design)


@pytest.mark.parametrize("scale,lam", [("linear", 0.2), ("probability", 0.05)])
def test_batched_solver_matches_the_policy_solver_and_reaches_the_boundary(scale, lam):
    design = task.factorial_design(3, 3)
    coefs = np.stack([task.true_coefficients(design, s) for s in range(6)])
    values, pis = solve_batch(task.true_model(design, coefs[0]), coefs, lam, scale)
    for i in range(len(coefs)):
        model = task.true_model(design, coefs[i])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BoundaryWarning)
            policy = AverageCasePolicy(lam=lam, scale=scale).fit(model)
        mine = [torch.as_tensor(q[i]) for q in pis]
        assert float(policy._objective(model, mine, model.coef_tensor())) >= policy.objective_ - 1e-6
    assert (np.concatenate(pis, axis=1) == 0).any()  # the projection puts levels exactly at 0


def test_delta_method_warns_at_a_boundary_optimum_and_the_bootstrap_corrects_the_bias():
    design = task.factorial_design(3, 3)
    model = _fitted(design)
    with pytest.warns(BoundaryWarning, match="bootstrap"):
        policy = AverageCasePolicy(lam=0.2, interval="bootstrap", n_boot=100, random_state=0).fit(model)
    assert policy.at_boundary_ and policy.value_boot_.shape == (100,)
    assert policy.value_bias_ > 0  # the plug-in maximum is biased upward (value convex in theta)
    lo, hi = policy.conf_int()["value"]
    assert lo < policy.value_ - policy.value_bias_ < hi
    with warnings.catch_warnings():
        warnings.simplefilter("error", BoundaryWarning)  # an interior optimum: no warning
        interior = AverageCasePolicy(lam=5.0).fit(model)
    assert not interior.at_boundary_


def test_monte_carlo_agrees_with_enumeration_within_3_mc_se():
    levels = {f"f{d}": list(range(3)) for d in range(3)}
    coef = task.true_coefficients(FactorialDesign(levels), 0)
    exact = PairedConjointLogit.from_coefficients(FactorialDesign(levels), coef)
    sampled = PairedConjointLogit.from_coefficients(FactorialDesign(levels, n_monte=1024, random_state=3), coef)
    pi = [np.array([0.6, 0.3, 0.1])] * 3
    se = sampled.win_prob_mc_se(pi)
    assert 0 < se < 0.02 and exact.win_prob_mc_se(pi) == 0.0
    assert abs(float(sampled.win_prob(pi)) - float(exact.win_prob(pi))) < 3 * se
    for table in ("amce", "marginal_means"):
        a, b = getattr(exact, table)(), getattr(sampled, table)()
        keep = b.mc_se > 0
        assert (np.abs(a.estimate[keep] - b.estimate[keep]) < 3 * b.mc_se[keep]).all()
        assert (a.mc_se == 0).all()


def test_designs_above_max_profiles_integrate_by_monte_carlo_and_the_game_converges():
    design = FactorialDesign({f"f{d + 1}": list(range(3)) for d in range(8)}, n_monte=256, random_state=0)
    assert design.n_profiles == 6561 and design.monte_carlo
    truth = task.electorate(design, 0)
    models = {role: PairedConjointLogit.from_coefficients(design, c) for role, c in truth.items() if role in "AB"}
    assert 0 < float(models["A"].win_prob(design.p)) < 1
    assert len(models["A"].amce()) == 24
    game = MinimaxPolicy((0.3, 0.7), lam=0.3, n_steps=600, random_state=0).fit(models)
    assert game.best_response_gap_ < 1e-3
    assert game.value_A_ + game.value_B_from_B_ == pytest.approx(1.0, abs=1e-12)  # weights sum to 1 exactly


def test_penalised_margin_at_a_verified_equilibrium_is_at_least_minus_the_gap():
    # was an experiment claim; it holds by construction at an epsilon-equilibrium, so it is a solver check
    design = task.factorial_design(3, 3)
    models = {role: task.true_model(design, c) for role, c in task.electorate(design, 0).items()}
    game = MinimaxPolicy((0.3, 0.7), lam=0.3, primaries=True, n_steps=600, random_state=0).fit(models)
    assert game.best_response_gap_ < 1e-3
    eq = game.payoffs(game.pi_A_, game.pi_B_)
    for player in ("A", "B"):
        avg, _ = game.average_case(player)
        dev = game.payoffs(avg, game.pi_B_) if player == "A" else game.payoffs(game.pi_A_, avg)
        assert eq[f"f_{player}"] - dev[f"f_{player}"] >= -game.best_response_gap_ - 1e-9


def test_symmetric_zero_sum_game_is_even():
    # was an experiment claim; with one electorate for both parties the game is symmetric: Q_A = 1/2 exactly
    design = task.factorial_design(3, 3)
    model = task.true_model(design, task.true_coefficients(design, 0))
    game = MinimaxPolicy((0.5, 0.5), lam=0.3, n_steps=600, random_state=0).fit({"A": model, "B": model})
    assert game.best_response_gap_ < 1e-3
    assert abs(game.value_A_ - 0.5) < 1e-6


def _long(data, design):
    import pandas as pd

    rows = []
    for i in range(len(data)):
        for k, side in ((1, data.left), (2, data.right)):
            rows.append({"respondent": data.respondent[i], "task": i, "profile": k,
                         "selected": int(data.chosen[i] == (k == 1)),
                         **{f: design.levels[f][side[i, d]] for d, f in enumerate(design.factors)}})
    return pd.DataFrame(rows).sample(frac=1.0, random_state=0)  # row order must not matter


def test_long_format_fits_the_same_model_and_refuses_malformed_tasks():
    from icml26.errors import InputError

    design = FactorialDesign({"age": ["young", "mid", "old"], "party": ["D", "R"]})
    data = task.simulate(design, task.true_coefficients(design, 0), 300, seed=0)
    wide = PairedConjointLogit(backend="numpy").fit(data.left, data.right, data.chosen, data.respondent, design)
    df = _long(data, design)
    long = PairedConjointLogit(backend="numpy").fit_long(df, design=design)
    np.testing.assert_allclose(long.coef_, wide.coef_, atol=1e-10)
    np.testing.assert_allclose(long.vcov_, wide.vcov_, atol=1e-12)
    with pytest.raises(InputError, match="exactly two profiles"):
        PairedConjointLogit().fit_long(df.iloc[1:], design=design)
    both = df.assign(selected=1)
    with pytest.raises(InputError, match="exactly one chosen"):
        PairedConjointLogit().fit_long(both, design=design)
    odd = df.assign(age=df.age.replace("old", "ancient"))
    with pytest.raises(InputError, match="age"):
        PairedConjointLogit().fit_long(odd, design=design)
    with pytest.raises(InputError, match="choice"):
        PairedConjointLogit().fit_long(df, choice="chosen", design=design)
