"""The rate study of private hypothesis selection: ``sample_complexity`` against closed forms and controls."""

import math

import numpy as np
import pytest

from icml26.eval.tasks.dp_select import RATE_CLASSES, rate_instance
from icml26.training.dp_select import (
    MinimumDistanceEstimate,
    PrivateMDE,
    SampleComplexity,
    StrongSetEM,
    sample_complexity,
)

#: Point masses on 16 points: W(truth) = 0 and W(other) = 1 exactly, so private MDE is right with
#: probability 1 / (1 + 15 exp(-eps s / 2)), which crosses 1/2 at s = 2 ln 15 / eps.
POINTS = np.eye(16)


def _grid_below(s, s_min):
    j = round(4 * math.log2(s / s_min))
    return round(s_min * 2 ** ((j - 1) / 4))


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_private_mde_rate_on_point_masses_matches_the_closed_form(epsilon):
    found = sample_complexity(PrivateMDE(epsilon), POINTS, 0.5, runs=101, s_min=4, seed=0)
    crossing = 2 * math.log(15) / epsilon  # P(right) = 1/2
    # P(right) = 0.3 at s = 2 ln(15 / 2.33) / eps and 0.8 at 2 ln(15 / 0.25) / eps: 101 runs decide by then
    low, high = 2 * math.log(15 / (0.7 / 0.3)) / epsilon, 2 * math.log(15 / 0.25) / epsilon
    assert low <= found.s_star <= high * 2 ** 0.25, (found.s_star, crossing)
    # the search's invariant: s* reaches alpha and the grid point below it (evaluated) does not
    assert found.medians[int(found.s_star)] <= 0.5
    assert found.medians[_grid_below(found.s_star, 4)] > 0.5
    assert found.reached and found.n_fits == 101 * len(found.medians)


def test_rate_scales_as_one_over_epsilon_in_the_private_regime():
    slow = sample_complexity(PrivateMDE(0.1), POINTS, 0.5, runs=101, s_min=4, seed=1).s_star
    fast = sample_complexity(PrivateMDE(1.0), POINTS, 0.5, runs=101, s_min=4, seed=1).s_star
    assert 10 / 2 ** 0.75 <= slow / fast <= 10 * 2 ** 0.75


def test_a_selector_that_needs_one_sample_has_s_star_s_min():
    found = sample_complexity(MinimumDistanceEstimate(), POINTS, 0.05, runs=7, s_min=16, seed=0)
    assert found.s_star == 16 and found.medians == {16: 0.0} and found.n_fits == 7


def test_truths_outside_the_class_never_reach_alpha():
    uniform = np.full((5, 16), 1 / 16)  # TV 15/16 from every point mass
    found = sample_complexity(PrivateMDE(1.0), POINTS, 0.1, truths=uniform, runs=5, s_min=8, s_max=100, seed=0)
    assert not found.reached and found.s_star == math.inf
    assert max(found.medians) == round(8 * 2 ** 3.5) and min(found.medians.values()) == pytest.approx(15 / 16)
    assert isinstance(found, SampleComplexity) and found.to_dict()["s_star"] == math.inf


def test_same_seed_same_study_and_member_truths_are_used():
    kwargs = dict(runs=9, s_min=4, seed=3)
    a = sample_complexity(StrongSetEM(1.0), POINTS, 0.5, **kwargs)
    b = sample_complexity(StrongSetEM(1.0), POINTS, 0.5, **kwargs)
    assert a.to_dict() == b.to_dict()
    right = sample_complexity(MinimumDistanceEstimate(), POINTS, 0.5, truths=np.arange(9), runs=9, s_min=4)
    assert right.s_star == 4


def test_rate_instances():
    for name, alpha in RATE_CLASSES.items():
        cover, truths, a = rate_instance(name, 40, 7, seed=0)
        assert a == alpha and truths.shape == (7,) and cover.n == 40 and cover.mass_i is not None
    _, truths, _ = rate_instance("narrow location", 200, 50, seed=0)
    assert truths.max() < 10  # the first 5% of the means: one end of the grid
    _, truths, _ = rate_instance("gaussian", 200, 50, seed=0)
    assert truths.min() >= 20 and truths.max() < 180


def test_the_strong_set_is_what_rescues_the_rate_where_random_opponents_are_poor_witnesses():
    """Narrow location class, truth at one end: without its strong set (k = 0) StrongSetEM needs far more samples."""
    cover, truths, alpha = rate_instance("narrow location", 256, 31, seed=0)
    kwargs = dict(truths=truths, runs=31, seed=0, s_max=2 ** 14)
    mde = sample_complexity(PrivateMDE(0.5), cover, alpha, **kwargs).s_star
    strong = sample_complexity(StrongSetEM(0.5), cover, alpha, **kwargs).s_star
    ablation = sample_complexity(StrongSetEM(0.5, k=0), cover, alpha, **kwargs).s_star
    assert ablation > 4 * mde and ablation >= 2 * strong, (mde, strong, ablation)


def test_strong_set_without_stage_one_spends_epsilon_on_stage_two():
    from icml26.eval.tasks.dp_select import audit_instance
    from icml26.training.dp_select import exact_privacy_loss

    H, x = audit_instance(0)
    for split in (0.5, None):
        sel = StrongSetEM(1.0, k=0, split=split, random_state=0).fit(H, x)
        assert sel.epsilon_ == 1.0 and sel.epsilon_stages_ == (0.0, 1.0) and sel.strong_set_.size == 0
        assert sel.opponents_.size == 2 * 3 and sel.n_scheffe_evals_ == 5 * 6
        assert 0.2 < exact_privacy_loss(sel, H, x) <= 1.0 + 1e-9
