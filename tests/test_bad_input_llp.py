"""Bad input for learning from label proportions (``icml26.training.llp``, ``icml26.eval.tasks.llp``).

Each probe makes one call with exactly one wrong value; see ``tests/probes.py`` for the verdicts. The data are
tiny (six rows in three bags), so every probe is refused or fails in well under a second.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml26.eval.tasks.llp import logistic_model, sklearn_task
from icml26.training.llp import (
    LLPClassifier,
    LLPLoss,
    bag_estimates,
    bag_means,
    bag_rows,
    candidate_bag_estimates,
    dllp_loss,
    easyllp_loss,
    leave_one_bag_out_mean,
    lowvar_llp_loss,
    mom_tournament,
    nonnegative_risk,
    per_class_losses,
    random_bags,
    tournament_from_estimates,
)
from probes import Probe, check, ids

X = np.random.default_rng(0).standard_normal((6, 3)).astype(np.float32)
Y = np.array([0, 1, 0, 1, 1, 0])
INDEX = np.array([0, 0, 1, 1, 2, 2])
ROWS = np.full((6, 2), 0.5)  # each bag holds one row of each class


def fit(est=None, **change):
    """``est.fit(X, bag_index=INDEX, proportions=ROWS)`` with one argument changed."""
    args = {"X": X, "y": None, "bag_index": INDEX, "proportions": ROWS}
    args.update(change)
    est = LLPClassifier(epochs=1) if est is None else est
    return lambda: est.fit(args["X"], args["y"], bag_index=args["bag_index"], proportions=args["proportions"])


def fitted():
    return LLPClassifier(epochs=1, random_state=0).fit(X, bag_index=INDEX, proportions=ROWS)


def losses(B=3, k=2, c=2):
    return torch.rand(B, k, c, generator=torch.Generator().manual_seed(0), dtype=torch.float64)


ALPHA = torch.tensor([[0.5, 0.5], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
PROBS = torch.full((3, 2, 2), 0.5, dtype=torch.float64)
UNIFORM = lambda Z: np.full((len(Z), 2), 0.5)  # noqa: E731 - a candidate model


def llp_config(**change):
    from icml26.training.llp import LLPConfig

    return LLPConfig(**change)


def training_arguments(**change):
    from icml26.training.llp import LLPTrainingArguments

    return LLPTrainingArguments(output_dir="llp_probe_out", report_to="none", use_cpu=True, **change)


def logits_to_bags(*args):
    from icml26.training.llp import logits_to_bags as function

    return function(*args)


def collate(bags):
    from icml26.training.llp import LLPDataCollator

    return LLPDataCollator()(bags)


PROBES = [
    # LLPClassifier's parameters, checked by fit
    Probe("classifier-method-unknown", fit(LLPClassifier(method="lowvr")), "method"),
    Probe("classifier-model-unknown", fit(LLPClassifier(model="cnn")), "model"),
    Probe("classifier-hidden-zero", fit(LLPClassifier(model="mlp", hidden=0)), "hidden"),
    Probe("classifier-lr-zero", fit(LLPClassifier(lr=0.0)), "lr"),
    Probe("classifier-lr-nan", fit(LLPClassifier(lr=float("nan"))), "lr"),
    Probe("classifier-epochs-negative", fit(LLPClassifier(epochs=-1)), "epochs"),
    Probe("classifier-epochs-float", fit(LLPClassifier(epochs=2.5)), "epochs"),
    Probe("classifier-bags-per-batch-one-for-lowvar", fit(LLPClassifier(bags_per_batch=1)), "bags_per_batch"),
    Probe("classifier-weight-decay-negative", fit(LLPClassifier(weight_decay=-0.1)), "weight_decay"),
    Probe("classifier-base-unknown", fit(LLPClassifier(base="cubic")), "base"),
    Probe("classifier-prob-clip-above-half", fit(LLPClassifier(prob_clip=0.7)), "prob_clip"),
    Probe("classifier-prior-above-one", fit(LLPClassifier(prior=1.5)), "prior"),
    Probe("classifier-prior-not-summing-to-one", fit(LLPClassifier(prior=[0.5, 0.7])), "prior"),
    Probe("classifier-prior-of-wrong-length", fit(LLPClassifier(prior=[0.2, 0.3, 0.5])), "prior"),
    Probe("classifier-oracle-batch-size-zero", fit(LLPClassifier("oracle", oracle_batch_size=0), y=Y),
          "oracle_batch_size"),
    Probe("classifier-nonnegative-unknown", fit(LLPClassifier(nonnegative="sometimes")), "nonnegative"),
    Probe("classifier-random-state-negative", fit(LLPClassifier(random_state=-3)), "random_state"),
    Probe("classifier-random-state-string", fit(LLPClassifier(random_state="0")), "random_state"),
    # fit's data
    Probe("fit-X-nan", fit(X=np.where(np.eye(6, 3, dtype=bool), np.nan, X)), "X"),
    Probe("fit-X-one-dimensional", fit(X=X[:, 0]), "X"),
    Probe("fit-X-empty", fit(X=X[:0], bag_index=INDEX[:0], proportions=ROWS[:0]), "X"),
    Probe("fit-X-strings", fit(X=np.array([["a", "b", "c"]] * 6)), "X"),
    Probe("fit-bag-index-too-short", fit(bag_index=INDEX[:4]), "bag_index"),
    Probe("fit-bag-index-floats", fit(bag_index=INDEX.astype(float)), "bag_index"),
    Probe("fit-bag-index-below-minus-one", fit(bag_index=np.array([0, 0, 1, 1, -2, -2])), "bag_index"),
    Probe("fit-bag-index-all-in-no-bag", fit(bag_index=np.full(6, -1)), "bag_index"),
    Probe("fit-proportions-per-bag-array", fit(proportions=np.full((3, 2), 0.5)), "proportions"),
    Probe("fit-proportions-above-one", fit(proportions=np.array([0.5, 0.5, 1.5, 1.5, 0.2, 0.2])), "proportions"),
    Probe("fit-proportions-rows-not-summing-to-one", fit(proportions=np.full((6, 2), 0.4)), "proportions"),
    Probe("fit-proportions-disagree-within-a-bag", fit(proportions=np.array([0.5, 0.5, 0.5, 0.25, 0.2, 0.2])),
          "proportions"),
    Probe("fit-proportions-mapping-misses-a-bag", fit(proportions={0: 0.5, 1: 0.5}), "proportions"),
    Probe("fit-proportions-nan", fit(proportions=np.full(6, np.nan)), "proportions"),
    Probe("fit-proportions-without-bag-index", fit(bag_index=None), "bag_index"),
    Probe("fit-neither-bags-nor-labels", fit(bag_index=None, proportions=None), "bag_index"),
    Probe("fit-oracle-without-labels", fit(LLPClassifier("oracle")), "y"),
    Probe("fit-y-continuous", fit(bag_index=None, proportions=None, y=np.linspace(0, 1, 6)), "y"),
    Probe("fit-y-one-class", fit(bag_index=None, proportions=None, y=np.zeros(6, int)), "y"),
    Probe("fit-y-too-short", fit(bag_index=None, proportions=None, y=Y[:4]), "y"),
    # the fitted estimator
    Probe("predict-X-wrong-feature-count", lambda: fitted().predict(X[:, :2]), "X"),
    Probe("predict-proba-X-inf", lambda: fitted().predict_proba(np.full((2, 3), np.inf)), "X"),
    Probe("at-epoch-zero", lambda: fitted().at_epoch(0), "epoch"),
    # the losses
    Probe("dllp-probs-above-one", lambda: dllp_loss(torch.full((3, 2, 2), 2.0), ALPHA.float()), "probs"),
    Probe("dllp-probs-negative", lambda: dllp_loss(PROBS - 1, ALPHA), "probs"),
    Probe("dllp-eps-zero", lambda: dllp_loss(PROBS, ALPHA, eps=0.0), "eps"),
    Probe("dllp-proportions-not-summing", lambda: dllp_loss(PROBS, ALPHA * 0.5), "proportions"),
    Probe("lowvar-losses-nan", lambda: lowvar_llp_loss(losses().index_fill(1, torch.tensor([0]), float("nan")),
                                                       ALPHA), "losses"),
    Probe("lowvar-proportions-wrong-shape", lambda: lowvar_llp_loss(losses(), ALPHA[:2]), "proportions"),
    Probe("lowvar-prior-out-of-range", lambda: lowvar_llp_loss(losses(), ALPHA, prior=torch.tensor([1.2, -0.2])),
          "prior"),
    Probe("lowvar-mu-wrong-shape", lambda: lowvar_llp_loss(losses(), ALPHA, mu=torch.zeros(3)), "mu"),
    Probe("lowvar-losses-not-a-tensor", lambda: lowvar_llp_loss(losses().numpy(), ALPHA), "losses"),
    Probe("easyllp-reduction-sum", lambda: easyllp_loss(losses(), ALPHA, reduction="sum"), "reduction"),
    Probe("easyllp-mask-wrong-shape", lambda: easyllp_loss(losses(), ALPHA, mask=torch.ones(3, 3, dtype=torch.bool)),
          "mask"),
    Probe("per-class-losses-base-unknown", lambda: per_class_losses(torch.zeros(2, 3), "cubic"), "base"),
    Probe("per-class-losses-prob-clip-above-half", lambda: per_class_losses(torch.zeros(2, 3), prob_clip=0.6),
          "prob_clip"),
    Probe("per-class-losses-focal-gamma-negative", lambda: per_class_losses(torch.zeros(2, 3), "focal",
                                                                             focal_gamma=-1.0), "focal_gamma"),
    Probe("per-class-losses-logits-a-list", lambda: per_class_losses([[0.0, 1.0]]), "logits"),
    Probe("bag-estimates-method-dllp", lambda: bag_estimates(torch.zeros(3, 2), torch.ones(3), ALPHA, method="dllp"),
          "method"),
    Probe("bag-estimates-empty-bag", lambda: bag_estimates(torch.zeros(3, 2, dtype=torch.float64),
                                                           torch.tensor([2.0, 0.0, 1.0]), ALPHA), "sizes"),
    Probe("bag-means-losses-two-dimensional", lambda: bag_means(torch.zeros(3, 2)), "losses"),
    Probe("leave-one-bag-out-sizes-wrong-shape", lambda: leave_one_bag_out_mean(torch.zeros(3, 2), torch.ones(2)),
          "sizes"),
    Probe("llp-loss-method-unknown", lambda: LLPLoss("proportion"), "method"),
    Probe("llp-loss-ema-decay-one", lambda: LLPLoss(mu="ema", ema_decay=1.0), "ema_decay"),
    Probe("llp-loss-prior-string", lambda: LLPLoss(prior="0.2"), "prior"),
    Probe("llp-loss-nonnegative-a-string", lambda: LLPLoss(nonnegative="yes"), "nonnegative"),
    Probe("llp-loss-nn-beta-negative", lambda: LLPLoss(nonnegative=True, nn_beta=-0.1), "nn_beta"),
    Probe("llp-loss-nn-gamma-zero", lambda: LLPLoss(nonnegative=True, nn_gamma=0.0), "nn_gamma"),
    Probe("nonnegative-risk-not-a-tensor", lambda: nonnegative_risk([0.1, -0.2]), "partial_risks"),
    Probe("nonnegative-risk-integer-tensor", lambda: nonnegative_risk(torch.tensor([1, 2])), "partial_risks"),
    Probe("nonnegative-risk-beta-negative", lambda: nonnegative_risk(torch.zeros(2), beta=-1.0), "beta"),
    Probe("nonnegative-risk-gamma-zero", lambda: nonnegative_risk(torch.zeros(2), gamma=0.0), "gamma"),
    Probe("llp-loss-logits-four-dimensional", lambda: LLPLoss()(torch.zeros(3, 2, 2, 1), ALPHA), "logits"),
    # bags and model selection
    Probe("random-bags-y-floats", lambda: random_bags(np.array([0.0, 1.0, 1.0]), 1), "y"),
    Probe("random-bags-bag-size-zero", lambda: random_bags(Y, 0), "bag_size"),
    Probe("random-bags-n-classes-too-few", lambda: random_bags(np.array([0, 1, 2]), 1, n_classes=2), "n_classes"),
    Probe("bag-rows-id-beyond-proportions", lambda: bag_rows(np.array([0, 3]), np.full((2, 2), 0.5)), "bag_index"),
    Probe("mom-n-blocks-above-bags", lambda: mom_tournament([UNIFORM], X, INDEX, ROWS, n_blocks=4), "n_blocks"),
    Probe("mom-estimator-dllp", lambda: mom_tournament([UNIFORM], X, INDEX, ROWS, n_blocks=2, estimator="dllp"),
          "estimator"),
    Probe("mom-candidate-not-a-model", lambda: mom_tournament([0.5], X, INDEX, ROWS, n_blocks=2), "candidates[0]"),
    Probe("mom-candidate-probs-not-summing", lambda: mom_tournament([lambda Z: np.full((len(Z), 2), 0.9)], X, INDEX,
                                                                    ROWS, n_blocks=2), "candidates[0]"),
    Probe("mom-prob-clip-zero", lambda: mom_tournament([UNIFORM], X, INDEX, ROWS, n_blocks=2, prob_clip=0.0),
          "prob_clip"),
    Probe("candidate-estimates-probs-above-one", lambda: candidate_bag_estimates(np.full((6, 2), 2.0), INDEX, ROWS),
          "probs"),
    Probe("candidate-estimates-estimator-unknown", lambda: candidate_bag_estimates(np.full((6, 2), 0.5), INDEX, ROWS,
                                                                                  ("oracle",)), "estimators"),
    Probe("tournament-estimates-nan", lambda: tournament_from_estimates(np.full((2, 4), np.nan), 2), "estimates"),
    # the trainer's settings and batches
    Probe("config-method-unknown", lambda: llp_config(llp_method="proportion"), "method"),
    Probe("config-prob-clip-zero", lambda: llp_config(llp_prob_clip=0.0), "prob_clip"),
    Probe("config-ema-decay-above-one", lambda: llp_config(llp_mu="ema", llp_ema_decay=1.5), "ema_decay"),
    Probe("config-nonnegative-a-string", lambda: llp_config(llp_nonnegative="sometimes"), "nonnegative"),
    Probe("config-prior-not-summing", lambda: llp_config(llp_prior=[0.5, 0.7]), "prior"),
    Probe("training-arguments-base-unknown", lambda: training_arguments(llp_base="cubic"), "base"),
    Probe("logits-to-bags-sizes-mismatch", lambda: logits_to_bags(torch.zeros(5, 2), torch.tensor([2, 2])), "logits"),
    Probe("collator-bag-without-proportions", lambda: collate([{"input_ids": [[1, 2], [3, 4]]}]), "bags[0]"),
    # the task generators
    Probe("logistic-model-d-zero", lambda: logistic_model(d=0), "d"),
    Probe("logistic-model-prior-one", lambda: logistic_model(prior=1.0), "prior"),
    Probe("logistic-model-feature-mean-nan", lambda: logistic_model(feature_mean=float("nan")), "feature_mean"),
    Probe("logistic-sample-n-negative", lambda: logistic_model(d=3).sample(-5, seed=0), "n"),
    Probe("sklearn-task-name-unknown", lambda: sklearn_task("mnist", seed=0), "name"),
    Probe("sklearn-task-scaling-unknown", lambda: sklearn_task("breast_cancer", seed=0, scaling="zscore"), "scaling"),
    Probe("sklearn-task-test-size-above-one", lambda: sklearn_task("breast_cancer", seed=0, test_size=1.5),
          "test_size"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
