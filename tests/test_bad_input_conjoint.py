"""Bad input to the conjoint method (designs, the paired logit, policies, the game, the task generators): each
probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from probes import Probe, check, ids

from icml26.eval.tasks import conjoint as task
from icml26.training.conjoint import (
    AverageCasePolicy,
    AverageCasePolicyCV,
    FactorialDesign,
    MinimaxPolicy,
    PairedConjointLogit,
    closed_form_system,
    fit_logit_irls,
    penalty,
    solve_batch,
)

DESIGN = task.factorial_design(2, 2)
COEF = task.true_coefficients(DESIGN, 0)
DATA = task.simulate(DESIGN, COEF, 200, seed=0)
MODEL = PairedConjointLogit(backend="numpy").fit(DATA.left, DATA.right, DATA.chosen, DATA.respondent, DESIGN)
POLICY = AverageCasePolicy(lam=1.0).fit(MODEL)
GAME = MinimaxPolicy(lam=0.5, n_steps=20, random_state=0).fit({"A": MODEL, "B": MODEL})
P = [np.array([0.5, 0.5]), np.array([0.5, 0.5])]
LONG = pd.DataFrame({"respondent": [0, 0, 0, 0], "task": [0, 0, 1, 1], "profile": [1, 2, 1, 2],
                     "selected": [1, 0, 0, 1], "f1": [0, 1, 1, 0], "f2": [1, 0, 0, 1]})
X = np.random.default_rng(0).normal(size=(20, 2))
Y = (np.arange(20) % 2).astype(float)


def _fit(estimator=None, **changes):
    args = {"left": DATA.left, "right": DATA.right, "chosen": DATA.chosen, "respondent": DATA.respondent,
            "design": DESIGN, **changes}
    return (estimator or PairedConjointLogit(backend="numpy")).fit(**args)


def _cv(**params):
    cv = AverageCasePolicyCV(**{"lams": [0.1, 1.0], "n_folds": 2, "model_params": {"backend": "numpy"}, **params})
    return cv


PROBES = [
    # the randomisation design
    Probe("FactorialDesign-probs-not-summing-to-1", lambda: FactorialDesign({"a": [0, 1]}, {"a": [0.3, 0.3]}),
          "probs['a']"),
    Probe("FactorialDesign-levels-one-level", lambda: FactorialDesign({"a": [0, 1], "b": ["x"]}), "levels['b']"),
    Probe("FactorialDesign-levels-a-list", lambda: FactorialDesign([["x", "y"]]), "levels"),
    Probe("FactorialDesign-n_monte-one", lambda: FactorialDesign({"a": [0, 1]}, n_monte=1), "n_monte"),
    Probe("FactorialDesign-n_monte-float", lambda: FactorialDesign({"a": [0, 1]}, n_monte=100.0), "n_monte"),
    Probe("FactorialDesign-random_state-negative", lambda: FactorialDesign({"a": [0, 1]}, random_state=-1),
          "random_state"),
    Probe("FactorialDesign.sample-n-negative", lambda: DESIGN.sample(-1, np.random.default_rng(0)), "n"),
    Probe("FactorialDesign.sample-rng-an-int", lambda: DESIGN.sample(5, 0), "rng"),
    # the paired logit
    Probe("fit_logit_irls-y-not-binary", lambda: fit_logit_irls(X, Y * 2), "y"),
    Probe("fit_logit_irls-max_iter-zero", lambda: fit_logit_irls(X, Y, max_iter=0), "max_iter"),
    Probe("fit_logit_irls-groups-wrong-length", lambda: fit_logit_irls(X, Y, np.arange(5)), "groups"),
    Probe("PairedConjointLogit.fit-interactions-unknown", lambda: _fit(PairedConjointLogit("pairs")), "interactions"),
    Probe("PairedConjointLogit.fit-backend-unknown", lambda: _fit(PairedConjointLogit(backend="R")), "backend"),
    Probe("PairedConjointLogit.fit-screen_folds-one", lambda: _fit(PairedConjointLogit(screen_folds=1)),
          "screen_folds"),
    Probe("PairedConjointLogit.fit-chosen-too-short", lambda: _fit(chosen=DATA.chosen[:-1]), "chosen"),
    Probe("PairedConjointLogit.fit-respondent-too-short", lambda: _fit(respondent=DATA.respondent[:5]), "respondent"),
    Probe("PairedConjointLogit.fit-left-level-out-of-range", lambda: _fit(left=DATA.left + 5), "left"),
    Probe("PairedConjointLogit.fit-no-pairs", lambda: _fit(left=DATA.left[:0], right=DATA.right[:0],
                                                           chosen=DATA.chosen[:0], respondent=None), "left"),
    Probe("PairedConjointLogit.fit-design-a-dict", lambda: _fit(design={"f1": [0, 1]}), "design"),
    Probe("PairedConjointLogit.fit_long-data-an-array", lambda: PairedConjointLogit().fit_long(np.zeros((4, 3))),
          "data"),
    Probe("PairedConjointLogit.fit_long-choice-missing-column", lambda: PairedConjointLogit().fit_long(LONG, choice="y"),
          "choice"),
    Probe("PairedConjointLogit.fit_long-respondent-missing-column",
          lambda: PairedConjointLogit().fit_long(LONG, respondent="id"), "respondent"),
    Probe("PairedConjointLogit.fit_long-task-missing-column", lambda: PairedConjointLogit().fit_long(LONG, task="t"),
          "task"),
    Probe("PairedConjointLogit.fit_long-profile-missing-column",
          lambda: PairedConjointLogit().fit_long(LONG, profile="p"), "profile"),
    Probe("PairedConjointLogit.fit_long-attributes-unknown",
          lambda: PairedConjointLogit().fit_long(LONG, attributes=["f9"]), "attributes"),
    Probe("PairedConjointLogit.fit_long-choice-not-binary",
          lambda: PairedConjointLogit().fit_long(LONG.assign(selected=LONG.selected * 2)), "choice"),
    Probe("PairedConjointLogit.fit_long-data-three-profiles-in-a-task",
          lambda: PairedConjointLogit().fit_long(LONG.assign(task=0)), "data"),
    Probe("PairedConjointLogit.from_coefficients-coef-wrong-length",
          lambda: PairedConjointLogit.from_coefficients(DESIGN, [0.1, 0.2]), "coef"),
    Probe("PairedConjointLogit.from_coefficients-vcov-not-psd",
          lambda: PairedConjointLogit.from_coefficients(DESIGN, COEF, -np.eye(3)), "vcov"),
    # policies must be distributions
    Probe("win_prob-pi-not-summing-to-1", lambda: MODEL.win_prob([np.array([0.7, 0.7]), P[1]]), "pi[0]"),
    Probe("win_prob-pi-negative", lambda: MODEL.win_prob([P[0], np.array([1.5, -0.5])]), "pi[1]"),
    Probe("win_prob-pi-wrong-number-of-levels", lambda: MODEL.win_prob([np.ones(3) / 3, P[1]]), "pi[0]"),
    Probe("win_prob-pi-one-factor-missing", lambda: MODEL.win_prob([P[0]]), "pi"),
    Probe("win_prob-opponent-nan", lambda: MODEL.win_prob(P, [np.array([np.nan, 1.0]), P[1]]), "opponent[0]"),
    Probe("win_prob-unfitted-model", lambda: PairedConjointLogit().win_prob(P), "self"),
    Probe("utility-pi-not-summing-to-1", lambda: MODEL.utility([P[0], np.array([0.2, 0.2])]), "pi[1]"),
    Probe("win_matrix-strength-negative", lambda: MODEL.win_matrix(strength=-1.0), "strength"),
    Probe("amce-conf_level-above-1", lambda: MODEL.amce(conf_level=1.5), "conf_level"),
    Probe("marginal_means-h0-nan", lambda: MODEL.marginal_means(h0=float("nan")), "h0"),
    Probe("penalty-kind-unknown", lambda: penalty("L3", P, P), "kind"),
    Probe("penalty-pi-not-summing-to-1", lambda: penalty("KL", [np.array([0.9, 0.9]), P[1]], P), "pi[0]"),
    Probe("closed_form_system-lam-negative", lambda: closed_form_system(MODEL, -1.0), "lam"),
    Probe("closed_form_system-model-unfitted", lambda: closed_form_system(PairedConjointLogit(), 1.0), "model"),
    # the average-case policy
    Probe("AverageCasePolicy.fit-lam-nan", lambda: AverageCasePolicy(lam=float("nan")).fit(MODEL), "lam"),
    Probe("AverageCasePolicy.fit-conf_level-one", lambda: AverageCasePolicy(conf_level=1.0).fit(MODEL), "conf_level"),
    Probe("AverageCasePolicy.fit-scale-unknown", lambda: AverageCasePolicy(scale="logit").fit(MODEL), "scale"),
    Probe("AverageCasePolicy.fit-model-data", lambda: AverageCasePolicy().fit(DATA), "model"),
    Probe("AverageCasePolicy.fit-interval-unknown", lambda: AverageCasePolicy(interval="jackknife").fit(MODEL),
          "interval"),
    Probe("AverageCasePolicy.fit-interval-bootstrap-with-KL",
          lambda: AverageCasePolicy(penalty="KL", interval="bootstrap").fit(MODEL), "interval"),
    Probe("AverageCasePolicy.fit-n_boot-five", lambda: AverageCasePolicy(n_boot=5).fit(MODEL), "n_boot"),
    Probe("solve_batch-model-unfitted", lambda: solve_batch(PairedConjointLogit(), [COEF], 1.0), "model"),
    Probe("solve_batch-coefs-wrong-width", lambda: solve_batch(MODEL, np.zeros((3, 5)), 1.0), "coefs"),
    Probe("solve_batch-lam-zero", lambda: solve_batch(MODEL, [MODEL.coef_], 0.0), "lam"),
    Probe("solve_batch-scale-unknown", lambda: solve_batch(MODEL, [MODEL.coef_], 1.0, scale="logit"), "scale"),
    Probe("solve_batch-n_iter-zero", lambda: solve_batch(MODEL, [MODEL.coef_], 1.0, n_iter=0), "n_iter"),
    Probe("win_prob_mc_se-pi-not-summing-to-1", lambda: MODEL.win_prob_mc_se([np.array([0.7, 0.7]), P[1]]),
          "pi[0]"),
    Probe("AverageCasePolicy.conf_int-conf_level-zero", lambda: POLICY.conf_int(0.0), "conf_level"),
    Probe("AverageCasePolicyCV.fit-lams-empty", lambda: _fit(_cv(lams=[])), "lams"),
    Probe("AverageCasePolicyCV.fit-lams-negative", lambda: _fit(_cv(lams=[0.1, -1.0])), "lams"),
    Probe("AverageCasePolicyCV.fit-respondent-none", lambda: _fit(_cv(), respondent=None), "respondent"),
    Probe("AverageCasePolicyCV.fit-model_params-unknown-key", lambda: _fit(_cv(model_params={"alpha": 1})),
          "model_params"),
    # the two-party game
    Probe("MinimaxPolicy.fit-group_shares-not-summing-to-1",
          lambda: MinimaxPolicy(group_shares=(0.6, 0.6)).fit({"A": MODEL, "B": MODEL}), "group_shares"),
    Probe("MinimaxPolicy.fit-n_monte-zero",
          lambda: MinimaxPolicy(primaries=True, n_monte=0).fit({"A": MODEL, "B": MODEL}), "n_monte"),
    Probe("MinimaxPolicy.fit-method-unknown",
          lambda: MinimaxPolicy(method="adam").fit({"A": MODEL, "B": MODEL}), "method"),
    Probe("MinimaxPolicy.fit-models-without-B", lambda: MinimaxPolicy().fit({"A": MODEL}), "models"),
    Probe("MinimaxPolicy.payoffs-pi_A-not-summing-to-1", lambda: GAME.payoffs([np.array([1.0, 1.0]), P[1]], P),
          "pi_A[0]"),
    Probe("MinimaxPolicy.best_response-player-unknown", lambda: GAME.best_response("C", P), "player"),
    Probe("MinimaxPolicy.best_response-opponent-negative",
          lambda: GAME.best_response("A", [P[0], np.array([-0.5, 1.5])]), "opponent[1]"),
    # the task generators
    Probe("factorial_design-n_levels-one", lambda: task.factorial_design(3, n_levels=1), "n_levels"),
    Probe("factorial_design-n_factors-float", lambda: task.factorial_design(2.5), "n_factors"),
    Probe("true_coefficients-interaction_prob-above-1",
          lambda: task.true_coefficients(DESIGN, 0, interaction_prob=1.5), "interaction_prob"),
    Probe("true_coefficients-seed-negative", lambda: task.true_coefficients(DESIGN, -1), "seed"),
    Probe("true_model-design-a-list", lambda: task.true_model([2, 2], COEF), "design"),
    Probe("simulate-coef-wrong-length", lambda: task.simulate(DESIGN, COEF[:2], 100, seed=0), "coef"),
    Probe("simulate-n_pairs-zero", lambda: task.simulate(DESIGN, COEF, 0, seed=0), "n_pairs"),
    Probe("simulate-tasks_per_respondent-zero",
          lambda: task.simulate(DESIGN, COEF, 100, seed=0, tasks_per_respondent=0), "tasks_per_respondent"),
    Probe("simulate-respondent_sd-negative", lambda: task.simulate(DESIGN, COEF, 100, seed=0, respondent_sd=-0.5),
          "respondent_sd"),
    Probe("electorate-primary_shift-nan", lambda: task.electorate(DESIGN, 0, primary_shift=float("nan")),
          "primary_shift"),
    Probe("load_train-bins-one", lambda: task.load_train(bins=1), "bins"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
