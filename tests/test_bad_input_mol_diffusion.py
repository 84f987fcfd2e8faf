"""Bad input to multi-objective diffusion (the epsilon-MLP, the loss and loops, the two-stage estimator, the tasks
and the point mass): each probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks.mol_diffusion import ConditionalTasks, PointMassEnv, energy_distance
from icml26.models.mol_diffusion import EpsMLP, EpsMLPConfig
from icml26.training.mol_diffusion import (
    DSMConfig,
    TwoStageMOL,
    ddim_sampler,
    dsm_loss,
    fit_dsm,
    fit_labeled_only,
    noise_scheduler,
)

TASKS = ConditionalTasks(8, seed=0)
SCH = noise_scheduler()
MODEL = EpsMLP(EpsMLPConfig(num_tasks=2, hidden_size=8))
SPEC, GEN = EpsMLPConfig(cond_bottleneck=1, hidden_size=8), EpsMLPConfig(num_tasks=2, hidden_size=8)
RNG = np.random.default_rng(0)
COND = TASKS.conditions(10, RNG)
PAIRED = {"cond": np.concatenate([COND, COND]), "target": np.concatenate([TASKS.sample(0, COND, RNG),
                                                                         TASKS.sample(1, COND, RNG)]),
          "task": np.repeat([0, 1], 10)}
X, C, K = torch.zeros(4, 2), torch.zeros(4, 8), torch.zeros(4, dtype=torch.long)
DATA = {"x0": X, "cond": C, "task": K}


def _mol(**kw):
    return TwoStageMOL(SPEC, GEN, **kw)


def _fitted():
    return _mol(specialist_steps=1, generalist_steps=1, sampler_steps=2).fit_specialists(PAIRED)


PROBES = [
    Probe("EpsMLPConfig-sample_dim-zero", lambda: EpsMLPConfig(sample_dim=0), "sample_dim"),
    Probe("EpsMLPConfig-cond_bottleneck-zero", lambda: EpsMLPConfig(cond_bottleneck=0), "cond_bottleneck"),
    Probe("EpsMLPConfig-time_embed_dim-odd", lambda: EpsMLPConfig(time_embed_dim=7), "time_embed_dim"),
    Probe("EpsMLPConfig-num_tasks-negative", lambda: EpsMLPConfig(num_tasks=-1), "num_tasks"),
    Probe("EpsMLP-cond-wrong-width", lambda: MODEL(sample=X, timesteps=1, cond=torch.zeros(4, 3), task=K), "cond"),
    Probe("EpsMLP-sample-1d", lambda: MODEL(sample=torch.zeros(4), timesteps=1, cond=C, task=K), "sample"),
    Probe("EpsMLP-task-unknown-id", lambda: MODEL(sample=X, timesteps=1, cond=C, task=torch.full((4,), 5)), "task"),
    Probe("EpsMLP-task-missing", lambda: MODEL(sample=X, timesteps=1, cond=C), "task"),
    Probe("EpsMLP-timesteps-wrong-length", lambda: MODEL(sample=X, timesteps=torch.zeros(3), cond=C, task=K),
          "timesteps"),
    Probe("EpsMLP-noise-wrong-shape", lambda: MODEL(sample=X, timesteps=1, cond=C, task=K, noise=torch.zeros(4, 3)),
          "noise"),
    Probe("dsm_loss-task_weights-off-simplex", lambda: dsm_loss(MODEL, SCH, X, C, K, task_weights=(0.7, 0.7)),
          "task_weights"),
    Probe("dsm_loss-task_weights-negative", lambda: dsm_loss(MODEL, SCH, X, C, K, task_weights=(1.5, -0.5)),
          "task_weights"),
    Probe("dsm_loss-cond-other-rows", lambda: dsm_loss(MODEL, SCH, X, torch.zeros(3, 8), K), "cond"),
    Probe("dsm_loss-reduction-unknown", lambda: dsm_loss(MODEL, SCH, X, C, K, reduction="sum"), "reduction"),
    Probe("dsm_loss-scalarization-unknown",
          lambda: dsm_loss(MODEL, SCH, X, C, K, task_weights=(0.5, 0.5), scalarization="pareto"), "kind"),
    Probe("fit_dsm-steps-zero", lambda: fit_dsm(MODEL, SCH, DATA, 0), "steps"),
    Probe("fit_dsm-ema_decay-one", lambda: fit_dsm(MODEL, SCH, DATA, 1, ema_decay=1.0), "ema_decay"),
    Probe("noise_scheduler-num_train_timesteps-one", lambda: noise_scheduler(1), "num_train_timesteps"),
    Probe("ddim_sampler-more-steps-than-training", lambda: ddim_sampler(SCH, 200), "steps"),
    Probe("DSMConfig-task_weights-off-simplex",
          lambda: DSMConfig(output_dir="unused", task_weights=[0.2, 0.2], report_to="none"), "task_weights"),
    Probe("DSMConfig-scalarization-unknown",
          lambda: DSMConfig(output_dir="unused", scalarization="max", report_to="none"), "scalarization"),
    Probe("DSMConfig-chebyshev-without-weights",
          lambda: DSMConfig(output_dir="unused", scalarization="chebyshev", report_to="none"), "task_weights"),
    Probe("TwoStageMOL-variant-unknown", lambda: _mol(variant="distill"), "variant"),
    Probe("TwoStageMOL-pseudo_draws-zero", lambda: _mol(pseudo_draws=0), "pseudo_draws"),
    Probe("TwoStageMOL-sampler_steps-over-training", lambda: _mol(sampler_steps=101), "sampler_steps"),
    Probe("TwoStageMOL-specialist-with-tasks", lambda: TwoStageMOL(GEN, GEN), "specialist_config"),
    Probe("TwoStageMOL-generalist-other-width", lambda: TwoStageMOL(SPEC, EpsMLPConfig(cond_dim=4, num_tasks=2)),
          "generalist_config"),
    Probe("TwoStageMOL-config-not-a-config", lambda: TwoStageMOL({"hidden_size": 8}, GEN), "specialist_config"),
    Probe("TwoStageMOL-clip_sample-negative", lambda: _mol(clip_sample=-1.0), "clip_sample"),
    Probe("TwoStageMOL-task_weights-off-simplex",
          lambda: _mol(task_weights=(0.9, 0.9), specialist_steps=1, generalist_steps=1, sampler_steps=2)
          .fit(PAIRED, {"cond": COND, "task": np.zeros(10, dtype=int)}), "task_weights"),
    Probe("TwoStageMOL.fit-paired-empty",
          lambda: _mol().fit({"cond": np.zeros((0, 8)), "target": np.zeros((0, 2)), "task": np.zeros(0, dtype=int)},
                             {"cond": COND, "task": np.zeros(10, dtype=int)}), "paired"),
    Probe("TwoStageMOL.fit-paired-no-target", lambda: _mol().fit({"cond": COND, "task": np.zeros(10, dtype=int)},
                                                                 {"cond": COND, "task": np.zeros(10, dtype=int)}),
          "paired"),
    Probe("TwoStageMOL.fit-paired-wrong-width",
          lambda: _mol().fit({**PAIRED, "cond": PAIRED["cond"][:, :4]}, {"cond": COND, "task": np.zeros(10, int)}),
          "paired"),
    Probe("TwoStageMOL.fit-paired-unknown-task",
          lambda: _mol().fit({**PAIRED, "task": np.repeat([0, 7], 10)}, {"cond": COND, "task": np.zeros(10, int)}),
          "task"),
    Probe("TwoStageMOL.pseudo_label-before-fit", lambda: _mol().pseudo_label({"cond": COND, "task": np.zeros(10, int)}),
          "self"),
    Probe("TwoStageMOL.pseudo_label-task-without-specialist",
          lambda: _fitted().pseudo_label({"cond": COND, "task": np.full(10, 1) * 0 + 3}), "unlabeled"),
    Probe("TwoStageMOL.sample-model-unknown", lambda: _fitted().sample(COND, 0, model="teacher"), "model"),
    Probe("fit_labeled_only-val_fraction-one", lambda: fit_labeled_only(GEN, PAIRED, val_fraction=1.0), "val_fraction"),
    Probe("fit_labeled_only-too-few-pairs-to-hold-out",
          lambda: fit_labeled_only(GEN, {k: v[[0, 10]] for k, v in PAIRED.items()}, steps=1), "paired"),
    Probe("ConditionalTasks-task-unknown", lambda: TASKS.mixture(2, COND), "task"),
    Probe("ConditionalTasks-cond-wrong-width", lambda: TASKS.mixture(0, np.zeros((3, 5))), "cond"),
    Probe("ConditionalTasks-scalarized-weights-off-simplex",
          lambda: TASKS.scalarized_epsilon((0.5, 0.6), COND, torch.zeros(10, 2), torch.ones(10)), "weights"),
    Probe("energy_distance-other-dimensions", lambda: energy_distance(np.zeros((3, 2)), np.zeros((3, 3))), "a, b"),
    Probe("PointMassEnv-layout-unknown", lambda: PointMassEnv(3), "layout"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
