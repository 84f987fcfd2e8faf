"""RobustHalpernIteration honours the scikit-learn estimator contract where it applies.

``check_estimator`` does not apply: the learner is not fitted on ``(X, y)`` but on a generative model (a sampler
of next states), and it has no predict / transform. What does apply is tested here: ``clone``, the
``get_params`` / ``set_params`` round trip (nested oracle and uncertainty set included), parameters stored as
given and checked by ``fit``, and a clone refitting to the same result.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from icml26.errors import InputError
from icml26.training import rhi as rl

MDP = rl.garnet(4, 2, rl.KLBall(0.1), seed=0)


def _learner(**params):
    return rl.RobustHalpernIteration(**{"uncertainty": rl.KLBall(0.1), "oracle": rl.TruncatedMLMC(3), "epsilon": 0.3,
                                        "max_iter": 30, "random_state": 0, **params})


def test_clone_and_params_round_trip():
    learner = _learner(schedule_scale=0.5, max_samples=10_000)
    params = learner.get_params()
    assert params["schedule_scale"] == 0.5 and params["max_samples"] == 10_000
    copy = clone(learner)
    assert copy.get_params().keys() == params.keys() and copy.epsilon == 0.3 and copy.max_iter == 30
    assert repr(copy.oracle) == repr(learner.oracle) and copy.oracle is not learner.oracle
    copy.set_params(epsilon=0.2, oracle=rl.PlugIn())
    assert copy.epsilon == 0.2 and isinstance(copy.get_params()["oracle"], rl.PlugIn)
    assert repr(learner).startswith("RobustHalpernIteration(")


def test_a_clone_refits_to_the_same_result_and_the_parameters_stay_as_given():
    first = _learner().fit(MDP.generative_model(seed=1))
    second = clone(first).fit(MDP.generative_model(seed=1))
    assert not hasattr(clone(first), "Q_")
    np.testing.assert_array_equal(first.Q_, second.Q_)
    assert first.samples_used_ == second.samples_used_
    # fit binds a copy of the oracle to the set: the parameter itself is untouched
    assert first.oracle.uncertainty is None and first.oracle_.uncertainty is first.uncertainty


@pytest.mark.parametrize("argument, value", [("epsilon", 0.0), ("delta", 1.5), ("max_iter", 0),
                                             ("schedule_scale", float("nan")), ("oracle", "MLMC")])
def test_set_params_is_stored_and_checked_by_fit(argument, value):
    learner = _learner().set_params(**{argument: value})  # storing never raises
    assert learner.get_params()[argument] is value
    with pytest.raises(InputError, match=f"RobustHalpernIteration.fit: {argument}: expected"):
        learner.fit(MDP.generative_model(seed=0))
