"""Denoising score matching for several tasks: the loss, its scalarisations, a plain training loop and the
``transformers.Trainer`` subclass ("Multi-Objective Learning for Diffusion Models", arXiv 2605.25210, Sec. 2).

The per-task DSM risk (epsilon-prediction, ``w(t) = 1``, ``t`` uniform over the training schedule):
``L_k(theta) = E ||eps - eps_theta(sqrt(abar_t) x + sqrt(1 - abar_t) eps, t, c, k)||^2``. Several tasks are traded
off by a scalarisation of ``(L_1, ..., L_K)``: the linear ``sum_k lambda_k L_k`` (the paper's sharper-rate case) or
the Chebyshev ``max_k lambda_k (L_k - L_k*)``.

Noising and the schedule are diffusers' (``DDPMScheduler.add_noise`` and ``alphas_cumprod``); the loss, the
scalarisations and the loop are written here because no kept library has a multi-task DSM.
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from diffusers import DDPMScheduler
from torch import nn
from transformers import Trainer, TrainerCallback, TrainingArguments

from icml26.errors import describe, input_error
from icml26.training.distributed import use_cpu_when_launched_without_gpu
from icml26.training.ema import weight_ema
from icml26.validation import check_choice, check_finite, check_int

SCALARIZATIONS = ("linear", "chebyshev")


def noise_scheduler(num_train_timesteps: int = 100) -> DDPMScheduler:
    """The training schedule of the issue and of diffusion_policy's low-dim configs: diffusers' ``DDPMScheduler``
    with ``num_train_timesteps`` steps, the cosine (``squaredcos_cap_v2``) betas and no sample clipping."""
    steps = check_int("noise_scheduler", "num_train_timesteps", num_train_timesteps, low=2)
    return DDPMScheduler(num_train_timesteps=steps, beta_schedule="squaredcos_cap_v2", clip_sample=False)


def check_weights(fn: str, argument: str, weights, num_tasks: int) -> torch.Tensor:
    """``weights`` as a float64 tensor of ``num_tasks`` non-negative entries summing to 1 (a point of the simplex)."""
    try:
        w = torch.as_tensor(np.asarray(weights, dtype=np.float64))
    except (TypeError, ValueError):
        raise input_error(fn, argument, f"{num_tasks} weights on the simplex", weights) from None
    if w.shape != (num_tasks,) or not bool(torch.isfinite(w).all()) or bool((w < 0).any()) \
            or not math.isclose(float(w.sum()), 1.0, abs_tol=1e-6):
        raise input_error(fn, argument, f"{num_tasks} non-negative weights summing to 1", weights)
    return w


def scalarize(per_task: torch.Tensor, weights: torch.Tensor, kind: str = "linear",
              reference: torch.Tensor | None = None) -> torch.Tensor:
    """One objective from the per-task losses ``[K]``: ``"linear"``, ``sum_k w_k L_k``; ``"chebyshev"``,
    ``max_k w_k (L_k - L_k*)`` with ``L_k* = reference`` (default 0)."""
    kind = check_choice("scalarize", "kind", kind, SCALARIZATIONS)
    weights = weights.to(per_task)
    if kind == "linear":
        return (weights * per_task).sum()
    ref = torch.zeros_like(per_task) if reference is None else torch.as_tensor(reference).to(per_task)
    return (weights * (per_task - ref)).max()


def dsm_loss(model: nn.Module, scheduler: DDPMScheduler, x0: torch.Tensor, cond: torch.Tensor,
             task: torch.Tensor | None = None, timesteps: torch.Tensor | None = None, noise: torch.Tensor | None = None,
             task_weights=None, *, scalarization: str = "linear", reference_losses=None,
             target: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
             generator: torch.Generator | None = None, reduction: str = "mean") -> torch.Tensor:
    """The DSM loss of ``model`` (an :class:`~icml26.models.mol_diffusion.EpsMLP` or any module with its
    ``forward(sample, timesteps, cond, task)``) on clean samples ``x0``.

    Args:
        model: the epsilon model.
        scheduler: the training schedule (``add_noise`` and ``alphas_cumprod``).
        x0: ``[B, D]`` clean samples.
        cond: ``[B, C]`` conditions.
        task: ``[B]`` task ids (needed with ``task_weights`` or a task-aware model).
        timesteps: ``[B]`` integer timesteps (default: uniform draws from ``generator``). Fixed ``timesteps`` and
            ``noise`` make the loss a pure function of the model: common random numbers across models.
        noise: ``[B, D]`` the noise (default: standard normal draws from ``generator``).
        task_weights: ``None`` (the mean over rows) or ``K`` weights on the simplex: the scalarisation of the
            per-task means (a task absent from the batch contributes 0).
        scalarization: ``"linear"`` or ``"chebyshev"`` (with ``task_weights``).
        reference_losses: ``L_k*`` of the Chebyshev scalarisation.
        target: ``(x_t, timesteps) -> eps_target`` regresses onto another model's prediction instead of the noise
            (the score-regression variant of stage 2); default: the noise.
        generator: the stream of the default timesteps and noise.
        reduction: ``"mean"`` (one scalar) or ``"none"`` (``[B]`` per-row losses; ``task_weights`` then unused).
    """
    fn = "dsm_loss"
    reduction = check_choice(fn, "reduction", reduction, ("mean", "none"))
    if x0.ndim != 2 or cond.ndim != 2 or cond.shape[0] != x0.shape[0]:
        raise input_error(fn, "x0, cond", "[B, D] samples and [B, C] conditions of one batch size",
                          f"{describe(x0)} and {describe(cond)}")
    n, T = x0.shape[0], scheduler.config.num_train_timesteps
    if timesteps is None:
        timesteps = torch.randint(0, T, (n,), generator=generator).to(x0.device)
    if noise is None:
        noise = torch.randn(x0.shape, generator=generator, dtype=x0.dtype).to(x0.device)
    if timesteps.shape != (n,) or noise.shape != x0.shape:
        raise input_error(fn, "timesteps, noise", f"[{n}] timesteps and noise of shape {tuple(x0.shape)}",
                          f"{describe(timesteps)} and {describe(noise)}")
    x_t = scheduler.add_noise(x0, noise, timesteps)
    eps = model(sample=x_t, timesteps=timesteps, cond=cond, task=task).sample
    goal = noise if target is None else target(x_t, timesteps)
    per_row = (goal - eps).square().sum(1)
    if reduction == "none":
        return per_row
    if task_weights is None:
        return per_row.mean()
    if task is None:
        raise input_error(fn, "task", "task ids with task_weights", None)
    w = task_weights if isinstance(task_weights, torch.Tensor) else check_weights(fn, "task_weights", task_weights,
                                                                                    len(task_weights))
    task = torch.as_tensor(task, device=per_row.device).long()
    sums = torch.zeros(len(w), dtype=per_row.dtype, device=per_row.device).index_add(0, task, per_row)
    counts = torch.bincount(task, minlength=len(w)).to(per_row.dtype)
    per_task = sums / counts.clamp(min=1)
    return scalarize(per_task, w, scalarization, reference_losses)


# ----------------------------------------------------------------------------------------------
# the plain loop
# ----------------------------------------------------------------------------------------------
@dataclass
class DSMFit:
    """What :func:`fit_dsm` measured: training losses every ``log_every`` steps, the validation DSM at each check
    (with early stopping), the step whose weights were kept, and the wall time."""

    steps: list[int] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_losses: list[float] = field(default_factory=list)
    best_step: int | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def as_columns(data, names: Sequence[str], fn: str, argument: str) -> dict[str, torch.Tensor]:
    """The columns ``names`` of ``data`` (a ``datasets.Dataset`` or a mapping of arrays) as tensors: float32 for
    ``cond``/``target``, int64 for ``task``; one length for all."""
    if not (isinstance(data, Mapping) or hasattr(data, "column_names")):
        raise input_error(fn, argument, "a datasets.Dataset or a mapping of columns", type(data).__name__)
    keys = list(data.column_names if hasattr(data, "column_names") else data.keys())
    out = {}
    for name in names:
        if name not in keys:
            raise input_error(fn, argument, f"columns {list(names)}", f"columns {keys}")
        column = data[name]
        if hasattr(column, "to_pylist") or not isinstance(column, (np.ndarray, torch.Tensor, list)):
            column = list(column)
        dtype = torch.long if name == "task" else torch.float32
        try:
            value = torch.as_tensor(np.asarray(column, dtype=np.int64 if name == "task" else np.float32), dtype=dtype)
        except (TypeError, ValueError):
            raise input_error(fn, argument, f"a numeric column {name!r} of one shape", describe(column)) from None
        if value.ndim != (1 if name == "task" else 2):
            raise input_error(fn, argument, f"column {name!r} of shape {'[n]' if name == 'task' else '[n, D]'}",
                              describe(value))
        out[name] = value
    lengths = {len(v) for v in out.values()}
    if len(lengths) > 1:
        raise input_error(fn, argument, "columns of one length", {k: len(v) for k, v in out.items()})
    if not lengths or 0 in lengths:
        raise input_error(fn, argument, "at least one row", 0)
    return out


def fit_dsm(model: nn.Module, scheduler: DDPMScheduler, data: Mapping[str, torch.Tensor], steps: int, *,
            batch_size: int = 128, lr: float = 1e-3, weight_decay: float = 0.0, task_weights=None,
            scalarization: str = "linear", reference_losses=None,
            teacher: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
            val: Mapping[str, torch.Tensor] | None = None, eval_every: int = 50, ema_decay: float | None = None,
            seed: int = 0, log_every: int = 100, progress: Callable[[int], None] | None = None) -> DSMFit:
    """Train ``model`` by (scalarised) DSM with AdamW on minibatches of ``data`` (tensors ``x0``, ``cond`` and,
    optionally, ``task``), one readable loop (the :class:`DSMTrainer` is the ``Trainer`` path).

    Args:
        model: the epsilon model.
        scheduler: the training schedule.
        data: ``{"x0": [n, D], "cond": [n, C], "task": [n]}``.
        steps: optimiser steps.
        batch_size: rows per step (drawn uniformly with replacement).
        lr: AdamW's learning rate.
        weight_decay: AdamW's decoupled weight decay.
        task_weights: scalarisation weights (see :func:`dsm_loss`); ``None``: the mean over rows.
        scalarization: ``"linear"`` or ``"chebyshev"``.
        reference_losses: the Chebyshev ``L_k*``.
        teacher: ``(x_t, t, cond, task) -> eps`` to regress onto (score regression) instead of the noise.
        val: held-out rows for early stopping: their DSM under fixed timesteps and noise every ``eval_every``
            steps; the best step's weights are restored at the end.
        eval_every: steps between validation checks.
        ema_decay: keep an exponential moving average of the weights (ema-pytorch) and load it at the end.
        seed: the stream of batches, timesteps and noise.
        log_every: record the training loss every this many steps.
        progress: called with the number of steps done, every ``log_every`` steps.
    """
    fn = "fit_dsm"
    steps = check_int(fn, "steps", steps, low=1)
    batch_size = check_int(fn, "batch_size", batch_size, low=1)
    lr = check_finite(fn, "lr", lr, positive=True)
    weight_decay = check_finite(fn, "weight_decay", weight_decay, non_negative=True)
    eval_every = check_int(fn, "eval_every", eval_every, low=1)
    log_every = check_int(fn, "log_every", log_every, low=1)
    seed = check_int(fn, "seed", seed, low=0)
    if ema_decay is not None:
        ema_decay = check_finite(fn, "ema_decay", ema_decay, low=0.0, high=1.0, high_open=True)
    x0, cond, task = data["x0"], data["cond"], data.get("task")
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    ema = None
    if ema_decay is not None:
        ema = weight_ema(model, ema_decay)
    weights = None if task_weights is None else check_weights(fn, "task_weights", task_weights, len(task_weights))
    if val is not None:
        val_gen = torch.Generator().manual_seed(seed + 1)
        val_t = torch.randint(0, scheduler.config.num_train_timesteps, (len(val["x0"]),), generator=val_gen)
        val_noise = torch.randn(val["x0"].shape, generator=val_gen)
    fit, best, best_state = DSMFit(), math.inf, None
    start = time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        rows = torch.randint(0, len(x0), (batch_size,), generator=generator)
        b_task = None if task is None else task[rows]
        b_cond = cond[rows]
        target = None if teacher is None else (lambda x_t, t: teacher(x_t, t, b_cond, b_task))
        loss = dsm_loss(model, scheduler, x0[rows], b_cond, b_task, task_weights=weights,
                        scalarization=scalarization, reference_losses=reference_losses, target=target,
                        generator=generator)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"fit_dsm: the loss is {loss.item()} at step {step} (lr {lr} too high?)")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if ema is not None:
            ema.update()
        if step % log_every == 0 or step == steps:
            fit.steps.append(step)
            fit.losses.append(loss.item())
            if progress is not None:
                progress(step)
        if val is not None and (step % eval_every == 0 or step == steps):
            judged = ema.ema_model if ema is not None else model
            with torch.no_grad():
                v = dsm_loss(judged, scheduler, val["x0"], val["cond"], val.get("task"), val_t, val_noise).item()
            fit.val_steps.append(step)
            fit.val_losses.append(v)
            if v < best:
                best, fit.best_step = v, step
                best_state = copy.deepcopy(judged.state_dict())
    if best_state is not None:
        model.load_state_dict(best_state)
    elif ema is not None:
        model.load_state_dict(ema.ema_model.state_dict())
    fit.seconds = time.perf_counter() - start
    model.eval()
    return fit


# ----------------------------------------------------------------------------------------------
# the Trainer path
# ----------------------------------------------------------------------------------------------
@dataclass
class DSMConfig(TrainingArguments):
    """``TrainingArguments`` plus the multi-task DSM settings."""

    scalarization: str = field(default="linear", metadata={"help": "linear (sum_k w_k L_k) or chebyshev "
                                                                   "(max_k w_k (L_k - L_k*))"})
    task_weights: list[float] | None = field(default=None, metadata={"help": "the scalarisation's weights, one per "
                                                                            "task on the simplex (none: the mean)"})
    reference_losses: list[float] | None = field(default=None, metadata={"help": "the Chebyshev reference L_k*"})
    ema_decay: float | None = field(default=None, metadata={"help": "an EMA of the weights (ema-pytorch), loaded "
                                                                    "into the model when training ends"})
    num_train_timesteps: int = field(default=100, metadata={"help": "steps of the cosine DDPM training schedule"})
    # the rows' "target" column is not an argument of the model's forward: keep it (as TRL's configs do)
    remove_unused_columns: bool = field(default=False, metadata={"help": "drop dataset columns the model's forward "
                                                                         "does not name (off: DSM reads 'target')"})

    def __post_init__(self) -> None:
        fn = "DSMConfig"
        check_choice(fn, "scalarization", self.scalarization, SCALARIZATIONS)
        if self.task_weights is not None:
            check_weights(fn, "task_weights", self.task_weights, len(self.task_weights))
        if self.reference_losses is not None:
            for v in self.reference_losses:
                check_finite(fn, "reference_losses", v)
            if self.task_weights is not None and len(self.reference_losses) != len(self.task_weights):
                raise input_error(fn, "reference_losses", f"{len(self.task_weights)} values (one per task weight)",
                                  self.reference_losses)
        if self.scalarization == "chebyshev" and self.task_weights is None:
            raise input_error(fn, "task_weights", "weights for the chebyshev scalarisation", None)
        if self.ema_decay is not None:
            check_finite(fn, "ema_decay", self.ema_decay, low=0.0, high=1.0, high_open=True)
        check_int(fn, "num_train_timesteps", self.num_train_timesteps, low=2)
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()


def collate_dsm(rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Batches rows with ``cond`` and ``target`` (and ``task``) into tensors ``cond``, ``x0`` (and ``task``)."""
    for i, row in enumerate(rows):
        if "cond" not in row or "target" not in row:
            raise input_error("collate_dsm", "rows", "dicts with 'cond' and 'target' (and 'task')",
                              f"row {i} with keys {sorted(row)}")
    batch = {"cond": torch.tensor(np.asarray([r["cond"] for r in rows], dtype=np.float32)),
             "x0": torch.tensor(np.asarray([r["target"] for r in rows], dtype=np.float32))}
    if "task" in rows[0]:
        batch["task"] = torch.tensor([int(r["task"]) for r in rows])
    return batch


class _EMACallback(TrainerCallback):
    """Updates an ema-pytorch EMA after each optimiser step and loads it into the model when training ends."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.ema = weight_ema(model, decay)
        self.model = model

    def on_step_end(self, args, state, control, **kwargs):
        self.ema.update()

    def on_train_end(self, args, state, control, **kwargs):
        self.model.load_state_dict(self.ema.ema_model.state_dict())


class DSMTrainer(Trainer):
    """:class:`transformers.Trainer` for (multi-task) DSM: ``compute_loss`` noises each batch's clean ``x0`` with
    the schedule and applies :func:`dsm_loss` with the ``args``' scalarisation (a :class:`DSMConfig`; plain
    ``TrainingArguments`` with ``remove_unused_columns=False`` give the mean over rows). Rows hold ``cond``,
    ``target`` and optionally ``task``.

    Args (besides ``Trainer``'s):
        noise_scheduler: the training schedule (default: :func:`noise_scheduler` with ``args.num_train_timesteps``).
    """

    _default_scheduler = staticmethod(noise_scheduler)  # the module function: the argument below shadows its name

    def __init__(self, *args, noise_scheduler: DDPMScheduler | None = None, **kwargs) -> None:
        kwargs.setdefault("data_collator", collate_dsm)
        super().__init__(*args, **kwargs)
        if self.args.remove_unused_columns:
            raise input_error("DSMTrainer", "args.remove_unused_columns", "False (the rows' 'target' column is not a "
                              "forward argument of the model)", True)
        steps = getattr(self.args, "num_train_timesteps", 100)
        self.noise_scheduler = noise_scheduler if noise_scheduler is not None else self._default_scheduler(steps)
        if not isinstance(self.noise_scheduler, DDPMScheduler):
            raise TypeError(f"DSMTrainer: noise_scheduler: expected a diffusers DDPMScheduler, got "
                            f"{type(self.noise_scheduler).__name__}")
        self.label_names = ["x0"]  # so evaluation reports the loss
        decay = getattr(self.args, "ema_decay", None)
        if decay is not None:
            self.add_callback(_EMACallback(self.model, decay))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        args = self.args
        weights = getattr(args, "task_weights", None)
        loss = dsm_loss(model, self.noise_scheduler, inputs["x0"], inputs["cond"], inputs.get("task"),
                        task_weights=weights, scalarization=getattr(args, "scalarization", "linear"),
                        reference_losses=getattr(args, "reference_losses", None))
        return (loss, {"loss": loss}) if return_outputs else loss


__all__ = ["SCALARIZATIONS", "noise_scheduler", "check_weights", "scalarize", "dsm_loss", "DSMFit", "as_columns",
           "fit_dsm", "DSMConfig", "collate_dsm", "DSMTrainer"]
