"""AMCEs and marginal means with delta-method standard errors, and the scikit-learn contract of the conjoint
estimators (clone, get_params / set_params, validation in fit)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone

from icml26.errors import InputError
from icml26.eval.tasks import conjoint as task
from icml26.training.conjoint import (
    AverageCasePolicy,
    AverageCasePolicyCV,
    FactorialDesign,
    MinimaxPolicy,
    PairedConjointLogit,
)
from icml26.training.conjoint.model import EFFECT_COLUMNS


def _fit(data, design, **params):
    return PairedConjointLogit(**params).fit(data.left, data.right, data.chosen, data.respondent, design)


def test_tables_have_cregg_columns_and_reference_rows():
    design = task.factorial_design(2, 3)
    data = task.simulate(design, task.true_coefficients(design, 0), 600, seed=0)
    model = _fit(data, design, backend="numpy")
    amce, mm = model.amce(), model.marginal_means()
    for table in (amce, mm):
        assert tuple(table.columns) == EFFECT_COLUMNS and len(table) == 6
        assert table.feature.tolist() == ["f1"] * 3 + ["f2"] * 3 and table.level.tolist() == [0, 1, 2] * 2
    ref = amce.level == 0
    assert (amce.estimate[ref] == 0).all() and amce.std_error[ref].isna().all()
    assert (amce.std_error[~ref] > 0).all() and (mm.std_error > 0).all()
    # the interval and the test are built from the estimate and its SE (level 0.95 -> z = 1.96)
    row = mm.iloc[1]
    assert row.upper - row.estimate == pytest.approx(1.959964 * row.std_error, rel=1e-6)
    assert row.z == pytest.approx((row.estimate - 0.5) / row.std_error)
    narrow = model.marginal_means(conf_level=0.5)
    assert (narrow.upper - narrow.lower < mm.upper - mm.lower).all()
    # marginal means average to 1/2 over p in a forced choice: sum_l p_l mm_l = P(u ~ p beats u' ~ p)
    for f in design.factors:
        assert mm.estimate[mm.feature == f].mean() == pytest.approx(0.5, abs=1e-12)


def test_binary_factor_amce_and_se_match_the_closed_form():
    # one binary factor, uniform p: AMCE = sigma(beta) - 1/2 and, by the delta method, SE = sigma'(beta) se(beta)
    design = FactorialDesign({"a": ["x", "y"]})
    beta, var = 0.8, 0.04
    model = PairedConjointLogit.from_coefficients(design, [beta], [[var]], pairs="none")
    row = model.amce().iloc[1]
    s = 1 / (1 + np.exp(-beta))
    assert row.estimate == pytest.approx(s - 0.5, abs=1e-12)
    assert row.std_error == pytest.approx(s * (1 - s) * np.sqrt(var), rel=1e-10)
    mm = model.marginal_means()
    assert mm.estimate.tolist() == pytest.approx([0.25 + 0.5 * (1 - s), 0.25 + 0.5 * s], abs=1e-12)


def test_se_matches_statsmodels_delta_method_on_the_clustered_glm():
    from statsmodels.stats._delta_method import NonlinearDeltaCov

    design = task.factorial_design(3, 3)
    data = task.simulate(design, task.true_coefficients(design, 1), 1500, seed=2, respondent_sd=0.5)
    model = _fit(data, design, interactions="all")  # statsmodels' GLM with cov_type="cluster"

    def means(c):
        if np.iscomplexobj(c):  # statsmodels then differentiates numerically with real steps
            raise TypeError("real coefficients only")
        return model._marginal_means(torch.as_tensor(c, dtype=torch.float64)).numpy()

    reference = NonlinearDeltaCov(means, model.coef_, model.vcov_).se_vectorized()
    np.testing.assert_allclose(model.marginal_means().std_error.to_numpy(), reference, rtol=1e-4)


def test_delta_se_matches_the_spread_over_simulated_designs_and_clustering_matters():
    # respondents answer 5 tasks each with their own slopes: the clustered delta SE tracks the Monte Carlo SD of
    # the AMCE over repeated designs; the model-based SE that ignores the clusters understates it
    design = task.factorial_design(2, 3)
    coef = task.true_coefficients(design, 3, interaction_prob=0.0)
    estimates, clustered, naive = [], [], []
    for seed in range(150):
        data = task.simulate(design, coef, 500, seed=seed, tasks_per_respondent=20, respondent_sd=1.5)
        fitted = _fit(data, design, backend="numpy").amce()
        estimates.append(fitted.estimate.to_numpy())
        clustered.append(fitted.std_error.to_numpy())
        naive.append(_fit(data, design, backend="numpy", cluster=False).amce().std_error.to_numpy())
    keep = np.array(fitted.level != 0)
    sd = np.std(estimates, axis=0, ddof=1)[keep]
    ratio = np.mean(clustered, axis=0)[keep] / sd
    assert np.all(np.abs(ratio - 1) < 0.2), ratio
    assert np.all(np.mean(naive, axis=0)[keep] / sd < 0.8)  # about 0.65 here


# ----------------------------------------------------------------------------------------------
# the scikit-learn contract. check_estimator does not apply: no estimator here is fitted on (X, y): the outcome
# model takes pairs of profiles and respondents, the policies take fitted outcome models.
# ----------------------------------------------------------------------------------------------
ESTIMATORS = [
    PairedConjointLogit(interactions="all", backend="numpy", screen_folds=4, random_state=3),
    AverageCasePolicy(penalty="KL", lam=0.3, scale="probability", random_state=1),
    AverageCasePolicyCV(lams=[0.1, 1.0], n_folds=2, model_params={"backend": "numpy"},
                        policy_params={"penalty": "L2"}, random_state=0),
    MinimaxPolicy(group_shares=(0.3, 0.7), lam=0.2, primaries=True, n_steps=50, random_state=0),
]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_clone_and_params_round_trip(estimator):
    params = estimator.get_params()
    copy = clone(estimator)
    assert copy is not estimator and type(copy) is type(estimator) and copy.get_params() == params
    copy.set_params(**params)
    assert copy.get_params() == params
    assert repr(estimator).startswith(type(estimator).__name__ + "(")


def _small():
    design = task.factorial_design(2, 2)
    data = task.simulate(design, task.true_coefficients(design, 0), 300, seed=0)
    return design, data, _fit(data, design, backend="numpy")


@pytest.mark.parametrize("estimator, argument, value", [
    (PairedConjointLogit(), "interactions", "some"),
    (PairedConjointLogit(), "screen_folds", 1),
    (AverageCasePolicy(), "lam", -1.0),
    (AverageCasePolicy(), "se_method", "bootstrap"),
    (MinimaxPolicy(), "n_steps", 0),
    (MinimaxPolicy(), "group_shares", (0.2, 0.2)),
    (AverageCasePolicyCV(), "n_folds", 1),
    (AverageCasePolicyCV(), "policy_params", {"lam": 1.0}),
])
def test_set_params_is_stored_and_checked_by_fit(estimator, argument, value):
    design, data, model = _small()
    estimator.set_params(**{argument: value})  # scikit-learn's rule: storing never raises
    assert estimator.get_params()[argument] == value
    with pytest.raises(InputError, match=f"{argument}.*expected"):
        if isinstance(estimator, PairedConjointLogit):
            estimator.fit(data.left, data.right, data.chosen, data.respondent, design)
        elif isinstance(estimator, AverageCasePolicy):
            estimator.fit(model)
        elif isinstance(estimator, MinimaxPolicy):
            estimator.fit({"A": model, "B": model})
        else:
            estimator.fit(data.left, data.right, data.chosen, data.respondent, design)


def test_a_clone_refits_to_the_same_result():
    design, data, model = _small()
    first = AverageCasePolicy(lam=0.5).fit(model)
    second = clone(first).fit(model)
    assert not hasattr(clone(first), "pi_")
    for a, b in zip(first.pi_, second.pi_):
        np.testing.assert_array_equal(a, b)
    refit = clone(model).fit(data.left, data.right, data.chosen, data.respondent, design)
    np.testing.assert_array_equal(refit.coef_, model.coef_)


def test_policies_must_be_distributions():
    design, data, model = _small()
    with pytest.raises(InputError, match=r"pi\[0\]: expected 2 non-negative probabilities summing to 1"):
        model.win_prob([np.array([0.7, 0.7]), np.array([0.5, 0.5])])
    with pytest.raises(InputError, match=r"opponent\[1\]: expected 2 non-negative probabilities"):
        model.win_prob(design.p, [np.array([0.5, 0.5]), np.array([1.2, -0.2])])
    # a softmax's float32 rounding is still a distribution; gradients flow through a checked policy
    logits = torch.zeros(2, requires_grad=True)
    pi = [torch.softmax(logits, 0), torch.tensor([0.5, 0.5], dtype=torch.float32)]
    model.win_prob(pi).backward()
    assert logits.grad is not None
