"""The private selectors as scikit-learn style objects: ``clone``, ``get_params`` / ``set_params``, ``repr``,
and parameters checked by ``fit``.

The selectors are not estimators in scikit-learn's ``fit(X, y)`` sense: ``fit(H, samples)`` takes a class of
candidate pmfs ``H`` (n x D) and integer samples, and they neither predict nor transform. So
``check_estimator`` does not apply; what scikit-learn's tools need of them (``clone`` in a search, parameter
round trips, a readable ``repr``) is tested here instead.
"""

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone

from icml26.errors import InputError
from icml26.eval.tasks.dp_select import audit_instance, draw_problem
from icml26.training.dp_select import (
    BKSWSelector,
    ForgottenFactorMDE,
    MinimumDistanceEstimate,
    PrivateMDE,
    ScheffeTournament,
    StrongSetEM,
)

SELECTORS = [
    MinimumDistanceEstimate(chunk=512),
    ScheffeTournament(chunk=512),
    BKSWSelector(epsilon=0.5, margin=0.1, random_state=3),
    PrivateMDE(epsilon=2.0, lazy=False, k=2, random_state=3),
    StrongSetEM(epsilon=0.5, k=2, split=None, n_opponents=3, random_state=3),
    ForgottenFactorMDE(epsilon=0.5, random_state=3),
]


@pytest.mark.parametrize("selector", SELECTORS, ids=lambda s: type(s).__name__)
def test_clone_params_and_repr(selector):
    assert isinstance(selector, BaseEstimator)
    twin = clone(selector)
    assert type(twin) is type(selector) and twin is not selector
    assert twin.get_params() == selector.get_params()
    name = next(iter(selector.get_params()))
    value = selector.get_params()[name]
    assert twin.set_params(**{name: value}).get_params() == selector.get_params()
    text = repr(selector)
    assert text.startswith(type(selector).__name__ + "(")
    H, x = audit_instance(0)
    fitted = twin.fit(H, x)
    assert fitted is twin and 0 <= twin.index_ < 6
    # a clone of a fitted selector carries its parameters only
    assert not hasattr(clone(twin), "index_")
    if "random_state" in selector.get_params():  # the same parameters, the same output
        assert clone(selector).fit(H, x).index_ == twin.index_


def test_set_params_changes_what_fit_does():
    H, x = audit_instance(0)
    sel = PrivateMDE(epsilon=1.0, lazy=False, random_state=0)
    sel.set_params(epsilon=4.0)
    assert sel.fit(H, x).epsilon_ == 4.0
    law_1 = PrivateMDE(epsilon=1.0).output_probabilities(H, x)
    law_4 = sel.output_probabilities(H, x)
    assert law_4.max() > law_1.max()  # a larger epsilon concentrates the law on the best scores


@pytest.mark.parametrize("selector, name", [
    (PrivateMDE("1"), "epsilon"),
    (StrongSetEM(split=2), "split"),
    (BKSWSelector(margin=-0.1), "margin"),
    (ScheffeTournament(chunk=0), "chunk"),
])
def test_a_bad_parameter_is_stored_and_refused_by_fit(selector, name):
    assert selector.get_params()[name] is not None  # the constructor only stores (scikit-learn's convention)
    H, x = audit_instance(0)
    with pytest.raises(InputError, match=f"{type(selector).__name__}: {name}: expected"):
        selector.fit(H, x)


def test_draw_problem_takes_an_array_of_pmfs_as_well_as_a_class():
    H, _ = audit_instance(0)
    problem = draw_problem(H, "realizable", 10, seed=0)
    np.testing.assert_array_equal(problem.P, H[problem.index])
    assert problem.opt == 0 and problem.samples.shape == (10,)
