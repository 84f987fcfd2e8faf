"""Bad input for R2G: the loss (functions and hooks), its configs, trainers and callbacks, Grokfast's filter,
the modular-arithmetic and tense tasks, and the training loops.

Each probe makes one call with exactly one wrong value; see ``tests/probes.py`` for the verdicts.
Models are a tiny GPT-2 (p = 5) built once; no probe trains.
"""

from __future__ import annotations

import functools

import pytest
import torch

from icml26.eval.tasks.r2g import (
    anchor_dataset,
    anchor_decoder,
    anchor_init,
    modular_dataset,
    small_decoder,
    steps_to,
    tense_accuracy,
    tense_dataset,
)
from icml26.training.r2g import (
    GrokfastCallback,
    GrokfastEMA,
    R2GCallback,
    R2GConfig,
    R2GDataCollator,
    R2GLoss,
    R2GSFTConfig,
    R2GTrainer,
    R2GTrainingArguments,
    alpha_at,
    fourier_sparsity,
    operand_geometry,
    r2g_distance,
    r2g_term,
    random_pairing,
    train_anchor,
    train_grokking,
    value_geometry,
)
from probes import Probe, check, ids

P = 5


@functools.cache
def _decoder():
    return small_decoder(P, d_model=8, n_heads=2, d_mlp=16)


@functools.cache
def _data():
    return modular_dataset(P, "add", 0.5)


@functools.cache
def _anchor():
    return anchor_dataset(P, "add", 0.5)


@functools.cache
def _anchor_model():
    return anchor_decoder(P, "add", d_model=8, n_heads=2)


def loss(**change):
    return lambda: R2GLoss(_decoder(), **change)


def values(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


PROBES = [
    # the pure functions
    Probe("r2g_distance-values-rank-2", lambda: r2g_distance(values(4, 8)), "values"),
    Probe("r2g_distance-values-list", lambda: r2g_distance([[[0.0, 1.0]]]), "values"),
    Probe("r2g_distance-perm-not-permutation", lambda: r2g_distance(values(3, 2, 4), perm=torch.tensor([0, 0, 1])),
          "perm"),
    Probe("r2g_distance-position_mask-wrong-length",
          lambda: r2g_distance(values(3, 2, 4), position_mask=torch.ones(5, dtype=torch.bool)), "position_mask"),
    Probe("r2g_distance-distance-unknown", lambda: r2g_distance(values(3, 2, 4), distance="manhattan"), "distance"),
    Probe("r2g_term-form-unknown", lambda: r2g_term(values(3, 2, 4), form="log"), "form"),
    Probe("r2g_term-reduction-unknown", lambda: r2g_term(values(3, 2, 4), reduction="max"), "reduction"),
    Probe("value_geometry-values-int", lambda: value_geometry(torch.ones(3, 2, 4, dtype=torch.long)), "values"),
    Probe("random_pairing-batch_size-negative", lambda: random_pairing(-2), "batch_size"),
    # R2GLoss
    Probe("R2GLoss-alpha-negative", loss(alpha=-0.1), "alpha"),
    Probe("R2GLoss-distance-unknown", loss(distance="l1"), "distance"),
    Probe("R2GLoss-layers-out-of-range", loss(layers=[3]), "layers"),
    Probe("R2GLoss-layers-duplicate", loss(layers=[0, -1]), "layers"),
    Probe("R2GLoss-layer_weights-count", loss(layer_weights=[0.5, 0.5]), "layer_weights"),
    Probe("R2GLoss-positions-negative", loss(positions=[0, -1]), "positions"),
    Probe("R2GLoss-model-without-value-projections", lambda: R2GLoss(torch.nn.Linear(4, 4)), "model"),
    Probe("R2GLoss-call-r2g_mask-wrong-shape",
          lambda: (lambda h: (_decoder()(input_ids=torch.tensor([[0, 1, P], [2, 3, P]])),
                              h(position_mask=torch.ones(2, 7, dtype=torch.bool)), h.remove()))(R2GLoss(_decoder())),
          "r2g_mask"),
    # configs, callbacks, trainers
    Probe("R2GConfig-r2g_alpha-nan", lambda: R2GConfig(r2g_alpha=float("nan")), "r2g_alpha"),
    Probe("R2GConfig-r2g_schedule-unknown", lambda: R2GConfig(r2g_schedule="step"), "r2g_schedule"),
    Probe("R2GConfig-r2g_warmup_steps-negative", lambda: R2GConfig(r2g_warmup_steps=-1), "r2g_warmup_steps"),
    Probe("R2GConfig-r2g_layers-str", lambda: R2GConfig(r2g_layers="0,1"), "r2g_layers"),
    Probe("R2GConfig-r2g_positions-negative", lambda: R2GConfig(r2g_positions=[-1]), "r2g_positions"),
    Probe("R2GConfig-r2g_layer_weights-negative", lambda: R2GConfig(r2g_layer_weights=[1.0, -0.5]),
          "r2g_layer_weights"),
    Probe("R2GTrainingArguments-r2g_distance-unknown",
          lambda: R2GTrainingArguments(output_dir="/tmp/icml26-r2g-probe", r2g_distance="l2"), "r2g_distance"),
    Probe("R2GSFTConfig-r2g_form-unknown",
          lambda: R2GSFTConfig(output_dir="/tmp/icml26-r2g-probe", r2g_form="log"), "r2g_form"),
    Probe("R2GCallback-schedule-unknown", lambda: R2GCallback(schedule="exp"), "schedule"),
    Probe("R2GCallback-warmup_steps-negative", lambda: R2GCallback(warmup_steps=-5), "warmup_steps"),
    Probe("R2GCallback-total_steps-zero", lambda: R2GCallback(schedule="cosine", total_steps=0), "total_steps"),
    Probe("alpha_at-schedule-unknown", lambda: alpha_at(3, alpha=0.1, schedule="step"), "schedule"),
    Probe("alpha_at-alpha-nan", lambda: alpha_at(3, alpha=float("nan"), schedule="linear"), "alpha"),
    Probe("alpha_at-step-negative", lambda: alpha_at(-1, alpha=0.1, schedule="linear", warmup_steps=10), "step"),
    Probe("R2GDataCollator-base-not-callable", lambda: R2GDataCollator("default"), "base"),
    Probe("R2GTrainer-r2g_config-dict",
          lambda: R2GTrainer(model=_decoder(), args=R2GTrainingArguments(output_dir="/tmp/icml26-r2g-probe",
                                                                          report_to=[]),
                             r2g_config={"r2g_alpha": 0.1}), "r2g_config"),
    # Grokfast
    Probe("GrokfastEMA-alpha-one", lambda: GrokfastEMA(alpha=1.0), "alpha"),
    Probe("GrokfastEMA-lamb-negative", lambda: GrokfastEMA(lamb=-2.0), "lamb"),
    Probe("GrokfastCallback-alpha-nan", lambda: GrokfastCallback(alpha=float("nan")), "alpha"),
    # tasks
    Probe("modular_dataset-p-one", lambda: modular_dataset(1), "p"),
    Probe("modular_dataset-op-unknown", lambda: modular_dataset(P, "pow"), "op"),
    Probe("modular_dataset-train_fraction-one", lambda: modular_dataset(P, "add", 1.0), "train_fraction"),
    Probe("small_decoder-n_heads-not-divisor", lambda: small_decoder(P, d_model=10, n_heads=4), "n_heads"),
    Probe("small_decoder-n_layers-zero", lambda: small_decoder(P, n_layers=0), "n_layers"),
    Probe("steps_to-lengths-differ", lambda: steps_to([0, 50, 100], [0.1, 0.99]), "values"),
    Probe("anchor_dataset-p-two", lambda: anchor_dataset(2), "p"),
    Probe("anchor_dataset-selection_fraction-one", lambda: anchor_dataset(P, selection_fraction=1.0),
          "selection_fraction"),
    Probe("anchor_init-op-unknown", lambda: anchor_init(P, "div"), "op"),
    Probe("anchor_init-d_model-zero", lambda: anchor_init(P, d_model=0), "d_model"),
    Probe("anchor_decoder-block-unknown", lambda: anchor_decoder(P, block="llama", d_model=8, n_heads=2), "block"),
    Probe("AnchorData.for_selection-no-selection", lambda: _anchor().for_selection(), "selection"),
    Probe("tense_dataset-n_train-zero", lambda: tense_dataset(0), "n_train"),
    Probe("tense_dataset-n_ood-negative", lambda: tense_dataset(10, 2, -1), "n_ood"),
    Probe("tense_accuracy-batch_size-zero", lambda: tense_accuracy(_decoder(), [], batch_size=0), "batch_size"),
    # training loops and measurements
    Probe("train_grokking-steps-zero", lambda: train_grokking(_decoder(), _data(), steps=0), "steps"),
    Probe("train_grokking-eval_every-zero", lambda: train_grokking(_decoder(), _data(), steps=2, eval_every=0),
          "eval_every"),
    Probe("train_grokking-lr-negative", lambda: train_grokking(_decoder(), _data(), steps=2, lr=-1e-3), "lr"),
    Probe("train_grokking-data-without-test", lambda: train_grokking(_decoder(), {"train": _data()["train"]}, steps=2),
          "data"),
    Probe("train_grokking-r2g-alpha-negative",
          lambda: train_grokking(_decoder(), _data(), steps=2, r2g={"alpha": -1.0}), "alpha"),
    Probe("train_anchor-decay-unknown", lambda: train_anchor(_anchor_model(), _anchor(), steps=2, decay="l1"), "decay"),
    Probe("train_anchor-batch_size-one", lambda: train_anchor(_anchor_model(), _anchor(), steps=2, batch_size=1),
          "batch_size"),
    Probe("train_anchor-warmup_steps-negative",
          lambda: train_anchor(_anchor_model(), _anchor(), steps=2, warmup_steps=-1), "warmup_steps"),
    Probe("train_anchor-target-above-one", lambda: train_anchor(_anchor_model(), _anchor(), steps=2, target=95.0),
          "target"),
    Probe("train_anchor-data-DatasetDict", lambda: train_anchor(_anchor_model(), _data(), steps=2), "data"),
    Probe("fourier_sparsity-embedding-1d", lambda: fourier_sparsity(torch.randn(P)), "embedding"),
    Probe("operand_geometry-p-zero", lambda: operand_geometry(_decoder(), 0), "p"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
