"""Trainers and configs that add the R2G term (:mod:`icml26.training.r2g.loss`) to a Hugging Face loss.

R2G (ICLR 2026 submission #10469, OpenReview ``yiSic9R2r8``) computes its term from the hooks of the
same forward pass as the task loss, so the integration overrides ``compute_loss`` (a
``TrainerCallback`` cannot change the loss), as TRL's trainers do:

- :class:`R2GConfig`: the ``r2g_*`` fields, parseable next to any ``TrainingArguments``;
  :class:`R2GTrainingArguments` is the merged argument class (``R2GSFTConfig``, TRL's, is in
  :mod:`icml26.training.r2g.sft`);
- :class:`R2GTrainerMixin` and :class:`R2GTrainer` (``transformers.Trainer``); ``R2GSFTTrainer``
  (``trl.SFTTrainer``) is in :mod:`icml26.training.r2g.sft`, so TRL loads only when it is used;
- :class:`R2GCallback`: the alpha schedule (:func:`alpha_at`) and the logged values;
- :class:`R2GDataCollator`: keeps a per-example ``r2g_mask`` column through batching.

Reconstruction: the paper keeps alpha constant from step 0; the linear and cosine schedules are ours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from icml26.errors import described, input_error
from icml26.training.distributed import mean_across_processes, use_cpu_when_launched_without_gpu
from icml26.training.r2g.loss import DISTANCES, FORMS, REDUCTIONS, SCHEDULES, R2GLoss, _canonical_distance
from icml26.validation import check_choice, check_finite, check_int

#: The statistics :class:`R2GLoss` records (the keys of ``pop_stats``), in the order they are reduced.
R2G_STATS = ("term", "distance", "angular_dist", "v_norm")

__all__ = [
    "R2GCallback", "R2GConfig", "R2GDataCollator", "R2GTrainer", "R2GTrainerMixin", "R2GTrainingArguments",
    "alpha_at",
]


@dataclass
class R2GConfig:
    """R2G settings; every field is prefixed ``r2g_`` so it merges with ``TrainingArguments``.

    Parse it next to any arguments class (``HfArgumentParser((SFTConfig, R2GConfig))``) or use the
    merged :class:`R2GTrainingArguments` / ``R2GSFTConfig``.
    """

    r2g_alpha: float = field(default=0.08, metadata={"help": "weight of the R2G term (>= 0); 0 disables it"})
    r2g_distance: str = field(default="euclidean", metadata={"help": "euclidean or angular (1 - cos)"})
    r2g_form: str = field(default="inverse", metadata={"help": "inverse (alpha / D, the authors' code) or negative"})
    r2g_reduction: str = field(default="mean", metadata={"help": "mean or sum of the pair distances per position"})
    r2g_layers: list[int] | None = field(default=None, metadata={"help": "indices of hooked layers (default all)"})
    r2g_positions: list[int] | None = field(
        default=None, metadata={"help": "positions to repel when the data has no r2g_mask column (default all)"})
    r2g_layer_weights: list[float] | None = field(default=None, metadata={"help": "per-layer weights (default 1/L)"})
    r2g_schedule: str = field(default="constant", metadata={"help": "alpha schedule: constant, linear or cosine"})
    r2g_warmup_steps: int = field(default=0, metadata={"help": "steps of linear alpha warm-up (linear, cosine)"})

    def __post_init__(self) -> None:
        self._validate_r2g()

    def _validate_r2g(self) -> None:
        name = type(self).__name__
        check_finite(name, "r2g_alpha", self.r2g_alpha, non_negative=True)
        self.r2g_distance = check_choice(name, "r2g_distance", _canonical_distance(self.r2g_distance), DISTANCES)
        check_choice(name, "r2g_form", self.r2g_form, FORMS)
        check_choice(name, "r2g_reduction", self.r2g_reduction, REDUCTIONS)
        check_choice(name, "r2g_schedule", self.r2g_schedule, SCHEDULES)
        check_int(name, "r2g_warmup_steps", self.r2g_warmup_steps, low=0)
        # R2GLoss checks these against the model; here what needs no model, so a bad config fails when parsed
        for field_name, expected in (("r2g_layers", "None or a list of layer indices (ints)"),
                                     ("r2g_positions", "None or a non-empty list of non-negative ints"),
                                     ("r2g_layer_weights", "None or a list of non-negative numbers")):
            value = getattr(self, field_name)
            if value is None:
                continue
            if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)) or not value:
                raise input_error(name, field_name, expected, value)
            for item in value:
                if field_name == "r2g_layer_weights":
                    check_finite(name, field_name, item, non_negative=True)
                else:
                    check_int(name, field_name, item, low=0 if field_name == "r2g_positions" else None)

    def r2g_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`R2GLoss`."""
        return dict(layers=self.r2g_layers, positions=self.r2g_positions, alpha=self.r2g_alpha,
                    distance=self.r2g_distance, form=self.r2g_form, reduction=self.r2g_reduction,
                    layer_weights=self.r2g_layer_weights)


def alpha_at(step: int, *, alpha: float, schedule: str = "constant", warmup_steps: int = 0,
             total_steps: int | None = None) -> float:
    """Alpha at ``step``: constant; linear warm-up from 0 to ``alpha`` over ``warmup_steps``; or
    cosine (the same warm-up, then a half-cosine decay to 0 at ``total_steps``)."""
    schedule = check_choice("alpha_at", "schedule", schedule, SCHEDULES)
    check_int("alpha_at", "step", step, low=0)
    alpha = check_finite("alpha_at", "alpha", alpha, non_negative=True)
    check_int("alpha_at", "warmup_steps", warmup_steps, low=0)
    if total_steps is not None:
        check_int("alpha_at", "total_steps", total_steps, low=1)
    if schedule == "constant":
        return alpha
    if warmup_steps > 0 and step < warmup_steps:
        return alpha * step / warmup_steps
    if schedule == "linear" or not total_steps or total_steps <= warmup_steps:
        return alpha
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return alpha * 0.5 * (1.0 + math.cos(math.pi * progress))


class R2GCallback(TrainerCallback):
    """Sets ``r2g.alpha`` from the schedule at each step and gathers the values to log.

    The R2G trainers bind it to their :class:`R2GLoss` and write :meth:`pop_logs` into every
    training log: ``r2g/term``, ``r2g/distance``, ``r2g/angular_dist`` (mean pairwise cosine
    distance of the hooked V at the selected positions), ``r2g/v_norm`` and ``r2g/alpha``.
    """

    def __init__(self, r2g: R2GLoss | None = None, *, alpha: float | None = None, schedule: str = "constant",
                 warmup_steps: int = 0, total_steps: int | None = None) -> None:
        self.r2g = r2g
        self.alpha = None if alpha is None else check_finite("R2GCallback", "alpha", alpha, non_negative=True)
        self.schedule = check_choice("R2GCallback", "schedule", schedule, SCHEDULES)
        self.warmup_steps = check_int("R2GCallback", "warmup_steps", warmup_steps, low=0)
        self.total_steps = None if total_steps is None else check_int("R2GCallback", "total_steps", total_steps, low=1)

    def bind(self, r2g: R2GLoss) -> R2GCallback:
        self.r2g, self.alpha = r2g, r2g.alpha if self.alpha is None else self.alpha
        return self

    def alpha_at(self, step: int, total_steps: int | None = None) -> float:
        return alpha_at(step, alpha=self.alpha if self.alpha is not None else 0.0, schedule=self.schedule,
                        warmup_steps=self.warmup_steps, total_steps=self.total_steps or total_steps)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.r2g is not None:
            self.r2g.alpha = self.alpha_at(state.global_step, state.max_steps)

    def pop_logs(self) -> dict[str, float]:
        """The statistics since the last call, averaged over processes (a collective under DDP: every rank
        logs at the same steps, so every rank calls it)."""
        if self.r2g is None:
            return {}
        stats = mean_across_processes(self.r2g.pop_stats(), R2G_STATS)
        return {**{f"r2g/{key}": value for key, value in stats.items()}, "r2g/alpha": self.r2g.alpha}


# -- trainers ----------------------------------------------------------------------------------
class R2GDataCollator:
    """Wraps a collator so that a per-example ``r2g_mask`` column survives batching.

    The mask of each example is written onto its real tokens (``attention_mask == 1``, in
    order), so it follows left or right padding; a mask longer than the (truncated) sequence is
    cut at the end.
    """

    def __init__(self, base) -> None:
        if not callable(base):
            raise TypeError(str(input_error("R2GDataCollator", "base", "a data collator (a callable: list of "
                                            "examples -> batch)", described(type(base).__name__))))
        self.base = base

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if not examples or "r2g_mask" not in examples[0]:
            return self.base(examples)
        masks = [ex["r2g_mask"] for ex in examples]
        batch = self.base([{k: v for k, v in ex.items() if k != "r2g_mask"} for ex in examples])
        if "attention_mask" in batch:
            attention = batch["attention_mask"].bool()
        elif "input_ids" in batch and batch["input_ids"].dim() == 2 and batch["input_ids"].shape[0] == len(masks) \
                and all(len(m) == batch["input_ids"].shape[1] for m in masks):
            attention = torch.ones_like(batch["input_ids"], dtype=torch.bool)  # unpadded, equal lengths
        else:
            raise input_error("R2GDataCollator", "r2g_mask",
                              "padded batches with an attention_mask, or sequences of equal length (no packing / "
                              "padding_free)", described("a batch without attention_mask and of unequal lengths"))
        out = torch.zeros_like(attention)
        for row, mask in enumerate(masks):
            real = attention[row].nonzero().flatten()
            mask = torch.as_tensor(mask, dtype=torch.bool)[: real.numel()]
            out[row, real[: mask.numel()]] = mask
        batch["r2g_mask"] = out
        return batch


class R2GTrainerMixin:
    """``compute_loss`` = the parent's loss + ``alpha * term`` from the same forward pass.

    Put it first in the bases: ``class MyTrainer(R2GTrainerMixin, SomeTrainer)``. Settings come
    from ``r2g_config=`` or, when ``args`` is an :class:`R2GConfig` (the merged argument classes),
    from ``args``. Gradient accumulation: the term is computed per micro-batch and, when the
    parent's loss is already normalised over the accumulated batch, divided by the number of
    micro-batches, so the update uses the mean term exactly as it uses the mean token loss.
    """

    def __init__(self, *args, r2g_config: R2GConfig | None = None, **kwargs) -> None:
        if r2g_config is not None and not isinstance(r2g_config, R2GConfig):  # before the parent's work
            raise TypeError(str(input_error(type(self).__name__, "r2g_config", "an R2GConfig or None",
                                            described(type(r2g_config).__name__))))
        super().__init__(*args, **kwargs)
        if r2g_config is None:
            r2g_config = self.args if isinstance(self.args, R2GConfig) else R2GConfig()
        if getattr(self.args, "packing", False) or getattr(self.args, "padding_free", False):
            # R2G pairs examples across the batch; packing puts the whole batch in one row.
            raise input_error(type(self).__name__, "args", "packing=False and padding_free=False",
                              described("packing=True or padding_free=True"))
        self.r2g_config = r2g_config
        self.r2g = R2GLoss(self.accelerator.unwrap_model(self.model), **r2g_config.r2g_kwargs())
        callback = next((cb for cb in self.callback_handler.callbacks if isinstance(cb, R2GCallback)), None)
        if callback is None:
            callback = R2GCallback(schedule=r2g_config.r2g_schedule, warmup_steps=r2g_config.r2g_warmup_steps)
            self.add_callback(callback)
        self.r2g_callback = callback.bind(self.r2g)
        self.data_collator = R2GDataCollator(self.data_collator)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self._signature_columns is not None and "r2g_mask" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "r2g_mask"]

    def _loss_is_scaled_for_ga(self, num_items_in_batch) -> bool:
        if self.loss_is_scaled_for_ga is not None:
            return self.loss_is_scaled_for_ga
        return bool((self.model_accepts_loss_kwargs and num_items_in_batch is not None)
                    or self.compute_loss_func is not None)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        position_mask = inputs.pop("r2g_mask", None)
        attention_mask = inputs.get("attention_mask")
        self.r2g.clear()
        self.r2g.recording = True
        try:  # record only this forward, not a gradient-checkpointing recomputation during backward
            result = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                          num_items_in_batch=num_items_in_batch)
        finally:
            self.r2g.recording = False
        loss, outputs = result if return_outputs else (result, None)
        if model.training and self.r2g.values:
            extra = self.r2g(position_mask=position_mask, attention_mask=attention_mask)
            if self.r2g.alpha > 0 and not extra.requires_grad and torch.is_grad_enabled():
                raise RuntimeError("the R2G term carries no gradient: the hooked values were computed without "
                                   "autograd (reentrant gradient checkpointing?); use gradient_checkpointing_kwargs="
                                   "{'use_reentrant': False} or turn gradient checkpointing off")
            if self._loss_is_scaled_for_ga(num_items_in_batch):
                extra = extra / self.current_gradient_accumulation_steps
            loss = loss + extra.to(loss.dtype)
        self.r2g.clear()
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = {k: v for k, v in inputs.items() if k != "r2g_mask"}
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if "loss" in logs:  # a training log
            logs.update(self.r2g_callback.pop_logs())
        super().log(logs, *args, **kwargs)


class R2GTrainer(R2GTrainerMixin, Trainer):
    """:class:`transformers.Trainer` with the R2G term added to its loss (see :class:`R2GTrainerMixin`)."""


@dataclass
class R2GTrainingArguments(TrainingArguments, R2GConfig):
    """``TrainingArguments`` with the :class:`R2GConfig` fields merged in (one HfArgumentParser class)."""

    def __post_init__(self) -> None:
        self._validate_r2g()
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()
