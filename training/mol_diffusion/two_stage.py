"""The two-stage semi-supervised procedure and its labelled-only baseline ("Multi-Objective Learning for Diffusion
Models: A Statistical Theory under Semi-Supervised Learning", Cheng et al., ICML 2026, arXiv 2605.25210).

1. **Specialists**: per task ``k`` a lightweight epsilon-model ``s_k`` in ``H_k`` fitted by DSM on the scarce pairs
   ``S_k`` only.
2. **Pseudo-samples**: for each condition ``c_j`` of the condition-only set ``U_k``, draws ``x_j ~ p_hat_k(. | c_j)``
   from the specialist's reverse sampler (DDIM, ``eta = 0``).
3. **Distillation**: the generalist ``eps_theta`` in ``G`` fitted by the scalarised DSM on the pseudo-pairs
   (optionally with the real pairs added).

The paper's bound: excess risk <~ specialist error (complexity(H_k) / n_k) + generalist error on pseudo-data
(complexity(G) / m) + sampling error: the paired data never pays for the generalist's complexity.

Reconstruction (the paper's code is not public): the specialist class, the sampler (50-step DDIM with trailing
spacing), the scalarisation's weights, ``include_real_pairs`` and the ``"score_regression"`` variant (regress
``eps_theta`` onto the specialist's ``eps`` at noised pseudo-points: a lower-variance ablation, not the paper's
stated procedure) are options named so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from diffusers import DDIMScheduler, DDPMScheduler
from torch import nn

from icml26.errors import describe, input_error
from icml26.models.mol_diffusion import EpsMLP, EpsMLPConfig
from icml26.training.mol_diffusion.dsm import DSMFit, as_columns, check_weights, fit_dsm, noise_scheduler
from icml26.utils import inner_seed
from icml26.validation import check_choice, check_finite, check_int, check_random_state

VARIANTS = ("pseudo_samples", "score_regression")


def ddim_sampler(scheduler: DDPMScheduler, steps: int, clip_sample: float | None = None) -> DDIMScheduler:
    """diffusers' deterministic DDIM (``eta = 0``) over ``steps`` of ``scheduler``'s timesteps, with ``"trailing"``
    spacing: it starts at the last training timestep (diffusers' default ``"leading"`` starts two steps short of it,
    which shifts a Gaussian's mean)."""
    fn = "ddim_sampler"
    steps = check_int(fn, "steps", steps, low=1)
    if steps > scheduler.config.num_train_timesteps:
        raise input_error(fn, "steps", f"at most the {scheduler.config.num_train_timesteps} training timesteps", steps)
    if clip_sample is None:
        ddim = DDIMScheduler.from_config(scheduler.config, timestep_spacing="trailing", clip_sample=False)
    else:
        r = check_finite(fn, "clip_sample", clip_sample, positive=True)
        ddim = DDIMScheduler.from_config(scheduler.config, timestep_spacing="trailing", clip_sample=True,
                                         clip_sample_range=r)
    ddim.set_timesteps(steps)
    return ddim


@torch.no_grad()
def ddim_sample(model: nn.Module, scheduler: DDPMScheduler, cond: torch.Tensor, task: torch.Tensor | None = None, *,
                steps: int = 50, generator: torch.Generator | None = None, x_T: torch.Tensor | None = None,
                batch_size: int = 8192, clip_sample: float | None = None) -> torch.Tensor:
    """One sample per condition by ``steps`` of deterministic DDIM from ``x_T ~ N(0, I)`` (drawn from
    ``generator`` unless given), in batches of ``batch_size`` conditions. ``clip_sample`` bounds each step's
    predicted ``x_0`` to ``[-clip_sample, clip_sample]`` (diffusers' ``clip_sample_range``), as diffusion_policy's
    sampler does on data normalised to ``[-1, 1]``: the cosine schedule's last ``alpha_bar`` is 2.4e-7, so without
    it the first step multiplies the model's epsilon error by ``sqrt(alpha_bar_97 / alpha_bar_99)`` = 63."""
    ddim = ddim_sampler(scheduler, steps, clip_sample)
    dim = model.config.sample_dim
    if x_T is None:
        x_T = torch.randn((cond.shape[0], dim), generator=generator)
    out = []
    for lo in range(0, cond.shape[0], batch_size):
        x, c = x_T[lo:lo + batch_size].clone(), cond[lo:lo + batch_size]
        k = None if task is None else task[lo:lo + batch_size]
        for t in ddim.timesteps:
            eps = model(sample=x, timesteps=t, cond=c, task=k).sample
            x = ddim.step(eps, t, x, eta=0.0).prev_sample
        out.append(x)
    return torch.cat(out) if out else x_T


def _check_config(fn: str, argument: str, config) -> EpsMLPConfig:
    if not isinstance(config, EpsMLPConfig):
        raise TypeError(f"{fn}: {argument}: expected an EpsMLPConfig, got {type(config).__name__}")
    return config


def _new_model(config: EpsMLPConfig, seed: int) -> EpsMLP:
    with torch.random.fork_rng():  # seeded initial weights; the caller's global stream untouched
        torch.manual_seed(seed)
        return EpsMLP(config)


def _tasks(fn: str, task: torch.Tensor, num_tasks: int | None = None) -> list[int]:
    ids = sorted(set(task.tolist()))
    if ids[0] < 0 or (num_tasks is not None and ids[-1] >= num_tasks):
        raise input_error(fn, "task", f"task ids in [0, {num_tasks})", ids)
    return ids


@dataclass
class TwoStageMOL:
    """Specialists on the pairs, pseudo-samples on the condition-only sets, a distilled generalist.

    Args:
        specialist_config: the lightweight class ``H_k`` (an :class:`EpsMLPConfig`; its ``num_tasks`` must be 0:
            one specialist per task).
        generalist_config: the generalist class ``G`` (``num_tasks = K`` for a task one-hot, 0 for a task-agnostic
            model that only the scalarisation's weights steer).
        pseudo_draws: pseudo-samples per condition (``r``).
        sampler_steps: DDIM steps of the specialists' sampler (and of :meth:`sample`).
        include_real_pairs: add the real pairs to stage 2's data.
        variant: ``"pseudo_samples"`` (DSM on pseudo-pairs: the paper's) or ``"score_regression"`` (regress onto the
            specialist's epsilon at noised pseudo-points).
        seed: every stream (initial weights, batches, noise, sampler); ``None``: 0.
        specialist_steps, generalist_steps: optimiser steps of each stage.
        batch_size, generalist_batch_size: rows per step of each stage.
        lr: AdamW's learning rate (both stages).
        weight_decay: AdamW's weight decay (both stages).
        task_weights: the scalarisation's weights (default: equal).
        scalarization: ``"linear"`` or ``"chebyshev"``.
        reference_losses: the Chebyshev ``L_k*``.
        num_train_timesteps: steps of the cosine DDPM schedule.
        clip_sample: the sampler's bound on predicted ``x_0`` (see :func:`ddim_sample`): a positive number,
            ``"auto"`` (the largest absolute target of the pairs: their range, as diffusion_policy's ``[-1, 1]``
            on normalised data) or ``None`` (no clipping: the first DDIM step from ``t = T - 1`` is then
            ill-conditioned for any learned model).
        ema_decay: keep an EMA of each model's weights (ema-pytorch) and use it (``None``: the last weights).
    """

    specialist_config: EpsMLPConfig
    generalist_config: EpsMLPConfig
    pseudo_draws: int = 1
    sampler_steps: int = 50
    include_real_pairs: bool = False
    variant: str = "pseudo_samples"
    seed: int | None = None
    specialist_steps: int = 3000
    generalist_steps: int = 3000
    batch_size: int = 128
    generalist_batch_size: int = 256
    lr: float = 1e-3
    weight_decay: float = 0.0
    task_weights: Any = None
    scalarization: str = "linear"
    reference_losses: Any = None
    num_train_timesteps: int = 100
    clip_sample: float | str | None = "auto"
    ema_decay: float | None = None
    fits_: dict[str, DSMFit] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        fn = "TwoStageMOL"
        _check_config(fn, "specialist_config", self.specialist_config)
        _check_config(fn, "generalist_config", self.generalist_config)
        if self.specialist_config.num_tasks:
            raise input_error(fn, "specialist_config", "num_tasks = 0 (one specialist per task)",
                              self.specialist_config.num_tasks)
        s, g = self.specialist_config, self.generalist_config
        if (s.sample_dim, s.cond_dim) != (g.sample_dim, g.cond_dim):
            raise input_error(fn, "generalist_config", f"sample_dim {s.sample_dim} and cond_dim {s.cond_dim} (the "
                              "specialist's)", f"{g.sample_dim} and {g.cond_dim}")
        check_int(fn, "pseudo_draws", self.pseudo_draws, low=1)
        check_int(fn, "num_train_timesteps", self.num_train_timesteps, low=2)
        check_int(fn, "sampler_steps", self.sampler_steps, low=1)
        if self.sampler_steps > self.num_train_timesteps:
            raise input_error(fn, "sampler_steps", f"at most num_train_timesteps ({self.num_train_timesteps})",
                              self.sampler_steps)
        if not isinstance(self.include_real_pairs, bool):
            raise TypeError(f"{fn}: include_real_pairs: expected a bool, got {type(self.include_real_pairs).__name__}")
        check_choice(fn, "variant", self.variant, VARIANTS)
        check_random_state(fn, "seed", self.seed)
        for name in ("specialist_steps", "generalist_steps", "batch_size", "generalist_batch_size"):
            check_int(fn, name, getattr(self, name), low=1)
        check_finite(fn, "lr", self.lr, positive=True)
        check_finite(fn, "weight_decay", self.weight_decay, non_negative=True)
        check_choice(fn, "scalarization", self.scalarization, ("linear", "chebyshev"))
        if self.clip_sample is not None and self.clip_sample != "auto":
            check_finite(fn, "clip_sample", self.clip_sample, positive=True)
        if self.task_weights is not None:  # on the simplex now; its length against the tasks at fit time
            k = self.generalist_config.num_tasks or np.asarray(self.task_weights, dtype=object).size
            check_weights(fn, "task_weights", self.task_weights, k)
        if self.ema_decay is not None:
            check_finite(fn, "ema_decay", self.ema_decay, low=0.0, high=1.0, high_open=True)
        self.scheduler_ = noise_scheduler(self.num_train_timesteps)

    # ------------------------------------------------------------------------------------------
    def _seed(self, *stream: int) -> int:
        return inner_seed(self.seed or 0, *stream, bits=31)

    def _weights(self, ids: list[int]) -> torch.Tensor:
        k = max(ids) + 1
        if self.task_weights is None:
            w = np.zeros(k)
            w[ids] = 1 / len(ids)
            return torch.as_tensor(w)
        return check_weights("TwoStageMOL", "task_weights", self.task_weights, k)

    def fit_specialists(self, paired) -> TwoStageMOL:
        """Stage 1 alone: one specialist per task of ``paired`` (columns ``cond``, ``target``, ``task``)."""
        cols = as_columns(paired, ("cond", "target", "task"), "TwoStageMOL.fit", "paired")
        s = self.specialist_config
        if cols["cond"].shape[1] != s.cond_dim or cols["target"].shape[1] != s.sample_dim:
            raise input_error("TwoStageMOL.fit", "paired", f"cond of width {s.cond_dim} and target of width "
                              f"{s.sample_dim}", f"{cols['cond'].shape[1]} and {cols['target'].shape[1]}")
        self.clip_range_ = (float(cols["target"].abs().max()) if self.clip_sample == "auto" else
                             None if self.clip_sample is None else float(self.clip_sample))
        self.tasks_ = _tasks("TwoStageMOL.fit", cols["task"], self.generalist_config.num_tasks or None)
        self.specialists_: dict[int, EpsMLP] = {}
        for k in self.tasks_:
            rows = cols["task"] == k
            model = _new_model(s, self._seed(1, k))
            self.fits_[f"specialist {k}"] = fit_dsm(
                model, self.scheduler_, {"x0": cols["target"][rows], "cond": cols["cond"][rows]},
                self.specialist_steps, batch_size=self.batch_size, lr=self.lr, weight_decay=self.weight_decay,
                ema_decay=self.ema_decay, seed=self._seed(2, k))
            self.specialists_[k] = model
        self.paired_ = cols
        return self

    def pseudo_label(self, unlabeled):
        """Stage 2: ``pseudo_draws`` specialist samples per condition of ``unlabeled`` (columns ``cond`` and
        ``task``; any target column is never read), as a ``datasets.Dataset`` with ``cond``, ``target``, ``task``."""
        import datasets

        fn = "TwoStageMOL.pseudo_label"
        if not hasattr(self, "specialists_"):
            raise input_error(fn, "self", "fitted specialists (call fit or fit_specialists first)", "none")
        cols = as_columns(unlabeled, ("cond", "task"), fn, "unlabeled")
        if cols["cond"].shape[1] != self.specialist_config.cond_dim:
            raise input_error(fn, "unlabeled", f"cond of width {self.specialist_config.cond_dim}",
                              cols["cond"].shape[1])
        missing = sorted(set(cols["task"].tolist()) - set(self.specialists_))
        if missing:
            raise input_error(fn, "unlabeled", f"tasks with a specialist ({sorted(self.specialists_)})", missing)
        cond = cols["cond"].repeat(self.pseudo_draws, 1)
        task = cols["task"].repeat(self.pseudo_draws)
        self.pseudo_calls_ = getattr(self, "pseudo_calls_", 0) + 1  # fresh sampler noise for each call
        generator = torch.Generator().manual_seed(self._seed(3, self.pseudo_calls_))
        x_T = torch.randn((len(cond), self.specialist_config.sample_dim), generator=generator)
        target = torch.empty_like(x_T)
        for k, model in self.specialists_.items():
            rows = task == k
            if bool(rows.any()):
                target[rows] = ddim_sample(model, self.scheduler_, cond[rows], steps=self.sampler_steps,
                                           x_T=x_T[rows], clip_sample=self.clip_range_)
        return datasets.Dataset.from_dict({"cond": cond.numpy(), "target": target.numpy(), "task": task.numpy()})

    def fit_generalist(self, pseudo) -> TwoStageMOL:
        """Stage 3: the generalist on the pseudo-pairs ``pseudo`` (from :meth:`pseudo_label`), plus the real pairs
        with ``include_real_pairs``."""
        cols = as_columns(pseudo, ("cond", "target", "task"), "TwoStageMOL.fit_generalist", "pseudo")
        data = {"x0": cols["target"], "cond": cols["cond"], "task": cols["task"]}
        if self.include_real_pairs:
            data = {k: torch.cat([v, self.paired_[{"x0": "target"}.get(k, k)]]) for k, v in data.items()}
        teacher = None
        if self.variant == "score_regression":
            def teacher(x_t, t, cond, task):
                out = torch.empty_like(x_t)
                with torch.no_grad():
                    for k, model in self.specialists_.items():
                        rows = task == k
                        if bool(rows.any()):
                            out[rows] = model(sample=x_t[rows], timesteps=t[rows], cond=cond[rows]).sample
                return out
        ids = sorted(set(data["task"].tolist()))
        self.generalist_ = _new_model(self.generalist_config, self._seed(4))
        self.fits_["generalist"] = fit_dsm(
            self.generalist_, self.scheduler_, data, self.generalist_steps, batch_size=self.generalist_batch_size,
            lr=self.lr, weight_decay=self.weight_decay, task_weights=self._weights(ids),
            scalarization=self.scalarization, reference_losses=self.reference_losses, teacher=teacher,
            ema_decay=self.ema_decay, seed=self._seed(5))
        return self

    def fit(self, paired, unlabeled) -> TwoStageMOL:
        """All three stages: specialists on ``paired`` (``cond``, ``target``, ``task``), pseudo-samples at the
        conditions of ``unlabeled`` (``cond``, ``task``; its targets, if any, are never read), the generalist."""
        self.fit_specialists(paired)
        self.pseudo_ = self.pseudo_label(unlabeled)
        return self.fit_generalist(self.pseudo_)

    def sample(self, cond, task=None, *, generator: torch.Generator | None = None,
               model: str = "generalist") -> torch.Tensor:
        """One sample per condition from the generalist (``model="generalist"``) or the task's specialist
        (``"specialist"``) by the DDIM sampler."""
        fn = "TwoStageMOL.sample"
        check_choice(fn, "model", model, ("generalist", "specialist"))
        cond = torch.as_tensor(np.asarray(cond, dtype=np.float32))
        if cond.ndim != 2 or cond.shape[1] != self.specialist_config.cond_dim:
            raise input_error(fn, "cond", f"[n, {self.specialist_config.cond_dim}] conditions", describe(cond))
        task_t = None if task is None else torch.as_tensor(task).long().expand(cond.shape[0])
        if model == "specialist":
            if task_t is None or len(set(task_t.tolist())) != 1 or int(task_t[0]) not in self.specialists_:
                raise input_error(fn, "task", f"one task id among {sorted(self.specialists_)}", task)
            return ddim_sample(self.specialists_[int(task_t[0])], self.scheduler_, cond, steps=self.sampler_steps,
                               generator=generator, clip_sample=self.clip_range_)
        return ddim_sample(self.generalist_, self.scheduler_, cond, task_t if self.generalist_config.num_tasks
                           else None, steps=self.sampler_steps, generator=generator, clip_sample=self.clip_range_)


def fit_labeled_only(generalist_config: EpsMLPConfig, paired, *, steps: int = 3000, batch_size: int = 128,
                     lr: float = 1e-3, weight_decay: float = 1e-4, val_fraction: float = 0.2, eval_every: int = 50,
                     num_train_timesteps: int = 100, ema_decay: float | None = None,
                     seed: int = 0) -> tuple[EpsMLP, DSMFit]:
    """The labelled-only multi-task baseline: the generalist fitted by DSM on the pairs alone, with AdamW weight
    decay and early stopping on ``val_fraction`` of the pairs (a stratified split per task; the best check's weights
    are kept; with ``ema_decay`` the checks judge, and keep, the EMA weights). Returns the model and its
    :class:`DSMFit` (``best_step``)."""
    fn = "fit_labeled_only"
    config = _check_config(fn, "generalist_config", generalist_config)
    cols = as_columns(paired, ("cond", "target", "task"), fn, "paired")
    val_fraction = check_finite(fn, "val_fraction", val_fraction, low=0.0, high=1.0, high_open=True)
    seed = check_int(fn, "seed", seed, low=0)
    _tasks(fn, cols["task"], config.num_tasks or None)
    rng = np.random.default_rng(seed)
    val = np.zeros(len(cols["task"]), dtype=bool)
    for k in set(cols["task"].tolist()):
        rows = np.flatnonzero(cols["task"].numpy() == k)
        n_val = int(math.floor(val_fraction * len(rows)))
        if val_fraction > 0 and (n_val < 1 or n_val == len(rows)):
            raise input_error(fn, "paired", f"enough pairs of task {k} for a {val_fraction:g} validation split",
                              len(rows))
        val[rng.choice(rows, n_val, replace=False)] = True
    as_data = lambda m: {"x0": cols["target"][m], "cond": cols["cond"][m], "task": cols["task"][m]}
    model = _new_model(config, inner_seed(seed, 1, bits=31))
    fit = fit_dsm(model, noise_scheduler(num_train_timesteps), as_data(torch.as_tensor(~val)), steps,
                  batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                  val=as_data(torch.as_tensor(val)) if val.any() else None, eval_every=eval_every,
                  ema_decay=ema_decay, seed=inner_seed(seed, 2, bits=31))
    return model, fit


__all__ = ["VARIANTS", "ddim_sampler", "ddim_sample", "TwoStageMOL", "fit_labeled_only"]
