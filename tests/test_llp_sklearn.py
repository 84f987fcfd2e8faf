"""``LLPClassifier`` under scikit-learn's contract: ``check_estimator``, ``clone``, ``Pipeline`` and
``cross_val_score`` with metadata routing, and the forms of ``bag_index`` / ``proportions`` that survive a split."""

import warnings

import numpy as np
import pytest
import sklearn
import torch
from sklearn.base import clone
from sklearn.model_selection import GroupKFold, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import check_estimator

from icml26.errors import InputError
from icml26.training.llp import LLPClassifier, bag_rows, dllp_loss, random_bags

#: The checks LLPClassifier is expected to fail: none. (Without bag_index, fit(X, y) makes each row its own
#: bag, so every common check runs the real estimator; see the class docstring.)
EXPECTED_FAILED_CHECKS: dict[str, str] = {}


@pytest.mark.parametrize("estimator", [
    LLPClassifier(),
    LLPClassifier("easyllp"),
    LLPClassifier("dllp", model="mlp", hidden=8),
    # the oracle's default 512 rows per step give the 300-row check data one step per epoch: too few to learn
    LLPClassifier("oracle", oracle_batch_size=16),
], ids=["lowvar", "easyllp", "dllp-mlp", "oracle"])
def test_check_estimator(estimator):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the checks' own warnings (e.g. skipped array-API checks)
        check_estimator(estimator, expected_failed_checks=EXPECTED_FAILED_CHECKS)


@pytest.fixture(scope="module")
def cancer():
    from sklearn.datasets import load_breast_cancer

    X, y = load_breast_cancer(return_X_y=True)
    index, alpha = random_bags(y, 8, seed=0)
    return X, y, index, alpha


def test_clone_and_params_round_trip():
    est = LLPClassifier("easyllp", model="mlp", hidden=7, prior=0.3, random_state=3)
    twin = clone(est)
    assert twin is not est and twin.get_params() == est.get_params()
    twin.set_params(hidden=9, method="dllp")
    assert twin.get_params()["hidden"] == 9 and est.get_params()["hidden"] == 7
    assert "LLPClassifier(" in repr(est) and "hidden=7" in repr(est)


def test_bad_parameters_are_refused_at_fit_not_construction(cancer):
    X, y, index, alpha = cancer
    est = LLPClassifier(method="lowvr", epochs=-1)  # scikit-learn's convention: __init__ only stores
    with pytest.raises(InputError, match=r"LLPClassifier: method: expected one of \['lowvar'"):
        est.fit(X, y)


def test_pipeline_and_cross_val_score_with_metadata_routing(cancer):
    X, y, index, alpha = cancer
    rows = bag_rows(index, alpha)
    with sklearn.config_context(enable_metadata_routing=True):
        pipe = make_pipeline(StandardScaler(), LLPClassifier(epochs=10, random_state=0)
                             .set_fit_request(bag_index=True, proportions=True))
        pipe.fit(X, bag_index=index, proportions=rows)
        assert (pipe.predict(X) == y).mean() > 0.85  # learnt from proportions of bags of 8 only
        cv = GroupKFold(n_splits=3)  # groups = bags, so no bag is cut between folds
        scores = cross_val_score(pipe, X, y, cv=cv, params={"groups": index, "bag_index": index, "proportions": rows})
        as_mapping = cross_val_score(pipe, X, y, cv=cv, params={"groups": index, "bag_index": index,
                                                                "proportions": dict(enumerate(alpha))})
    np.testing.assert_array_equal(scores, as_mapping)
    assert scores.min() > 0.8, scores
    # what routing did, by hand: each fold's rows with their bag ids and proportions
    by_hand = []
    for train, test in cv.split(X, y, groups=index):
        model = make_pipeline(StandardScaler(), LLPClassifier(epochs=10, random_state=0))
        model.fit(X[train], llpclassifier__bag_index=index[train], llpclassifier__proportions=rows[train])
        by_hand.append((model.predict(X[test]) == y[test]).mean())
    np.testing.assert_allclose(scores, by_hand)


def test_singleton_bags_from_labels_are_the_fallback_of_fit_x_y(cancer):
    X, y, _, _ = cancer
    X = StandardScaler().fit_transform(X)
    labels = np.where(y == 1, "benign", "malignant")
    fallback = LLPClassifier(epochs=2, random_state=0).fit(X, labels)
    assert fallback.classes_.tolist() == ["benign", "malignant"]
    codes = np.searchsorted(fallback.classes_, labels)
    explicit = LLPClassifier(epochs=2, random_state=0).fit(X, bag_index=np.arange(len(y)), proportions=np.eye(2)[codes])
    np.testing.assert_array_equal(fallback.predict_proba(X), explicit.predict_proba(X))
    assert set(fallback.predict(X)) <= {"benign", "malignant"}
    assert fallback.decision_function(X).shape == (len(y),)  # binary: one score, as scikit-learn's classifiers


def test_bag_ids_need_not_be_contiguous_and_y_is_ignored_with_bags(cancer):
    X, y, index, alpha = cancer
    rows = bag_rows(index, alpha)
    base = LLPClassifier(epochs=2, random_state=0).fit(X, bag_index=index, proportions=rows)
    shifted = LLPClassifier(epochs=2, random_state=0).fit(X, 1 - y, bag_index=10 * index + 7, proportions=rows)
    np.testing.assert_array_equal(base.predict_proba(X), shifted.predict_proba(X))
    mapping = LLPClassifier(epochs=2, random_state=0).fit(X, bag_index=index, proportions=dict(enumerate(alpha[:, 1])))
    np.testing.assert_allclose(base.predict_proba(X), mapping.predict_proba(X))
    some = index.copy()
    some[:5] = -1  # rows in no bag are left out, and so are their proportion rows (NaN here)
    out = bag_rows(some, alpha)
    assert np.isnan(out[:5]).all()
    LLPClassifier(epochs=1, random_state=0).fit(X, bag_index=some, proportions=out)


def test_random_bags_of_one_number_bags_by_row():
    y = np.array([0, 1, 1, 0, 2])
    index, alpha = random_bags(y, 1, seed=3)
    np.testing.assert_array_equal(index, np.arange(5))
    np.testing.assert_array_equal(alpha, np.eye(3)[y])


def test_dllp_loss_refuses_values_that_are_not_probabilities():
    alpha = torch.tensor([[0.5, 0.5]])
    with pytest.raises(InputError, match=r"dllp_loss: probs: expected class probabilities"):
        dllp_loss(torch.full((1, 2, 2), 2.0), alpha)
    mask = torch.tensor([[True, False]])
    padded = torch.tensor([[[0.3, 0.7], [2.0, 9.0]]])  # the padded slot may hold anything
    torch.testing.assert_close(dllp_loss(padded, alpha, mask), -(0.5 * torch.log(torch.tensor([0.3, 0.7]))).sum())
