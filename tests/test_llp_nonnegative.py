"""The per-class non-negative correction of the debiased LLP losses (``nonnegative_risk``, nnPU-style).

Closed forms: the corrected risk is the unguarded one (value and gradient) when every partial risk is
>= 0, its value is ``sum_c max(0, R_c)`` and its gradient is reversed (times ``gamma``) on a partial risk
below ``-beta``. The partial risks sum to the estimator. Negative control: an MLP trained on the unguarded
LowVar objective drives it below 0; with the correction (``nonnegative="auto"`` for the MLP) it stays >= 0.
"""

import numpy as np
import pytest
import torch

from icml26.training.llp import (
    LLPClassifier,
    LLPLoss,
    bag_rows,
    candidate_bag_estimates,
    dllp_loss,
    easyllp_loss,
    lowvar_llp_loss,
    nonnegative_risk,
    random_bags,
)


def _grad(fn, x):
    x = x.clone().requires_grad_(True)
    value = fn(x)
    value.backward()
    return value.detach(), x.grad


def test_equals_the_unguarded_risk_when_every_partial_risk_is_non_negative():
    partial = torch.tensor([0.3, 0.0, 1.2], dtype=torch.float64)
    value, grad = _grad(nonnegative_risk, partial)
    plain_value, plain_grad = _grad(lambda r: r.sum(), partial)
    assert value == plain_value and torch.equal(grad, plain_grad)


@pytest.mark.parametrize("beta, gamma", [(0.0, 1.0), (0.1, 0.5)])
def test_value_is_clipped_and_the_gradient_is_reversed_below_minus_beta(beta, gamma):
    partial = torch.tensor([0.4, -0.05, -0.5], dtype=torch.float64)
    value, grad = _grad(lambda r: nonnegative_risk(r, beta, gamma), partial)
    assert value.item() == pytest.approx(0.4)  # sum_c max(0, R_c)
    below = partial < -beta
    assert torch.equal(grad, torch.where(below, -gamma * torch.ones(3, dtype=torch.float64),
                                         torch.ones(3, dtype=torch.float64)))


def test_partial_risks_sum_to_each_estimator():
    g = torch.Generator().manual_seed(0)
    losses = torch.rand(6, 5, 3, generator=g, dtype=torch.float64) * 3
    alpha = torch.from_numpy(np.random.default_rng(0).dirichlet(np.ones(3), size=6))
    prior = torch.tensor([0.2, 0.3, 0.5], dtype=torch.float64)
    for fn in (lambda r: lowvar_llp_loss(losses, alpha, prior, reduction=r),
               lambda r: easyllp_loss(losses, alpha, prior, reduction=r)):
        assert fn("classes").shape == (3,)
        torch.testing.assert_close(fn("classes").sum(), fn("mean"), rtol=0, atol=1e-12)
    probs = losses.softmax(-1)
    torch.testing.assert_close(dllp_loss(probs, alpha, reduction="classes").sum(), dllp_loss(probs, alpha),
                               rtol=0, atol=1e-12)


def test_llp_loss_with_the_correction_is_the_estimator_when_nothing_is_clipped():
    # proportions equal to the prior: every LowVar term is p_c lbar_bc >= 0
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(8, 4, 2, generator=g, dtype=torch.float64)
    alpha = torch.full((8,), 0.25, dtype=torch.float64)
    guarded = LLPLoss("lowvar", prior=0.25, nonnegative=True)(logits, alpha)
    plain = LLPLoss("lowvar", prior=0.25)(logits, alpha)
    torch.testing.assert_close(guarded, plain, rtol=0, atol=1e-12)


@pytest.fixture(scope="module")
def parity_bags():
    from icml26.eval.tasks.llp import sklearn_task

    X, y, _, _ = sklearn_task("digits_parity", seed=0, scaling="standard")
    index, alpha = random_bags(y, 32, seed=0)
    return X, index, bag_rows(index, alpha)


def test_the_correction_keeps_an_mlp_objective_non_negative_and_the_unguarded_one_falls_below(parity_bags):
    X, index, rows = parity_bags
    objective = {}
    for guard in (True, False):
        est = LLPClassifier("lowvar", model="mlp", epochs=30, nonnegative=guard, random_state=0)
        est.fit(X, bag_index=index, proportions=rows)
        full = candidate_bag_estimates(est.predict_proba(X), index, rows)["lowvar"].mean()
        objective[guard] = (min(est.loss_curve_), float(full))
    assert objective[True][0] >= 0  # the corrected batch objective, every epoch
    assert objective[True][1] > -0.5  # the unguarded estimate over all training bags stays near or above 0
    assert objective[False][0] < -1 and objective[False][1] < -1  # negative control: unbounded below


def test_auto_is_on_for_the_mlp_and_off_for_the_linear_model(parity_bags):
    X, index, rows = parity_bags

    def weights(**params):
        est = LLPClassifier("lowvar", epochs=10, random_state=0, **params).fit(X, bag_index=index, proportions=rows)
        return torch.cat([p.detach().flatten() for p in est.network_.parameters()]).numpy()

    for model, same in (("mlp", True), ("linear", False)):
        auto = weights(model=model)
        np.testing.assert_array_equal(auto, weights(model=model, nonnegative=same))
        assert not np.array_equal(auto, weights(model=model, nonnegative=not same))  # the correction acted
