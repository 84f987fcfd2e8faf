"""Training TFMixer (:mod:`icml26.models.tfmixer`) and its baselines on IMTS splits: one readable loop.

:func:`train_forecaster` is the loop the TFMixer experiment and benchmark use: AdamW with a one-cycle schedule,
gradient clipping, early stopping on validation MSE and the best-validation weights kept.
"""

from __future__ import annotations

import dataclasses
import io
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icml26.errors import described, input_error
from icml26.utils import atomic_write_bytes
from icml26.validation import check_finite, check_int

__all__ = ["PAD_TO", "ForecasterTraining", "train_forecaster"]


@dataclass
class ForecasterTraining:
    """What :func:`train_forecaster` returns: the best validation MSE, the steps run, the
    training throughput (series per second of optimiser steps, validation excluded) and the
    validation curve."""

    val_mse: float
    steps: int
    series_per_second: float
    #: (step, validation MSE) at every evaluation
    val_history: list = dataclasses.field(default_factory=list)
    #: the step whose weights were kept (0: the initial weights, with ``validate_initial``)
    best_step: int = 0
    #: the schedule's length (``steps`` asked for; ``steps`` above stops early with ``patience``)
    schedule_steps: int = 0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def train_forecaster(model, splits, *, steps: int, batch_size: int, lr: float, eval_every: int, patience: int,
                     seed: int, device, phase_name: str = "train_forecaster",
                     validate_initial: bool = False, checkpoint: str | os.PathLike | None = None,
                     checkpoint_every: int = 500, ema_decay: float | None = None) -> ForecasterTraining:
    """AdamW with a one-cycle schedule for ``steps`` steps; keeps the best-validation weights
    (``validate_initial``: the initial weights are a candidate too, evaluated at step 0).

    ``ema_decay`` (in [0, 1), default None: off): validate, keep and return an exponential moving
    average of the weights instead of the raw weights (``icml26.training.ema.weight_ema``, the
    toolkit's one average: its decay warms up as ``min(ema_decay, 1 - k ** (-2/3))`` at the k-th
    update, the first update copying the weights); 0 gives the raw weights back. On PhysioNet 2012
    the raw weights' validation MSE moves by about 2% between evaluations 100 steps apart, so the
    kept checkpoint is partly a pick of noise; the average moves smoothly.

    ``checkpoint``: a file that receives the whole training state (weights, optimiser, schedule, batch
    generator, best weights so far, validation curve) every ``checkpoint_every`` steps, written
    atomically. A call that finds it resumes from it and returns what an uninterrupted run returns
    (a checkpoint of other settings is refused); the caller removes it once the result is kept.

    Batches are drawn with a local generator seeded by ``seed``; ``phase_name`` is the
    :func:`icml26.progress.phase` that reports the steps.

    The one-cycle warm-up is 10 % of ``steps`` (OneCycleLR's ``pct_start=0.1``) and at least one
    scheduler step: runs of 3 to 10 steps warm up over 2 steps (``pct_start = 2 / steps``; at 10 %
    OneCycleLR divides by a zero-length warm-up), and runs of 1 or 2 steps keep ``lr`` constant (too
    short for a cycle).
    """
    import copy

    import torch

    from icml26.eval.tasks.tfmixer import evaluate_forecaster
    from icml26.models.tfmixer import IMTSCollator
    from icml26.progress import phase

    fn = "train_forecaster"
    if not isinstance(model, torch.nn.Module):
        raise TypeError(str(input_error(fn, "model", "a torch.nn.Module (TFMixerForForecasting or a baseline)",
                                        described(type(model).__name__))))
    if not any(p.requires_grad for p in model.parameters()):
        raise input_error(fn, "model", "a model with trainable parameters (LOCF and history mean have none: "
                          "evaluate them with evaluate_forecaster)", described(type(model).__name__))
    for part in ("train", "validation"):
        data = getattr(splits, part, None)
        if data is None or not hasattr(data, "__len__"):
            raise TypeError(str(input_error(fn, "splits", "an IMTSSplits (train, validation, test)",
                                            described(type(splits).__name__))))
        if len(data) == 0:
            raise input_error(fn, "splits", f"a non-empty {part} split", described(f"an empty {part} split"))
    steps = check_int(fn, "steps", steps, low=1)
    batch_size = check_int(fn, "batch_size", batch_size, low=1)
    lr = check_finite(fn, "lr", lr, positive=True)
    eval_every = check_int(fn, "eval_every", eval_every, low=1)
    patience = check_int(fn, "patience", patience, low=1)
    seed = check_int(fn, "seed", seed, low=0)
    checkpoint_every = check_int(fn, "checkpoint_every", checkpoint_every, low=1)
    if ema_decay is not None:
        ema_decay = check_finite(fn, "ema_decay", ema_decay, low=0.0, high=1.0, high_open=True)
    try:
        device = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        raise input_error(fn, "device", "a torch device ('cpu', 'cuda', 'cuda:0', a torch.device)", device) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise input_error(fn, "device", "an available device (CUDA is not available here)", str(device))

    gen = torch.Generator().manual_seed(seed)
    # lengths rounded up to 16: with TFMixer's bucketed point lists the step's tensor sizes repeat, so
    # glibc's heap reuses its blocks instead of fragmenting (icml26.models.tfmixer.modeling.bucketed_nonzero)
    collate = IMTSCollator(pad_to_multiple_of=PAD_TO)
    model.to(device).train()
    # fused: one kernel for all parameters (TFMixer's 102 tensors: 1.9 ms a step with clipping, 5.8 ms looped)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4, fused=True)
    if steps >= 3:
        schedule = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=steps,
                                                       pct_start=0.1 if steps > 10 else 2 / steps)
    else:
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0)
    best, best_state, best_step, stale, train_seconds, step, curve = math.inf, None, 0, 0, 0.0, 0, []
    ema = None
    if ema_decay is not None:
        from icml26.training.ema import weight_ema

        ema = weight_ema(model, ema_decay)
    scored = model if ema is None else ema.ema_model  # the weights validated, kept and returned
    # What decides the trajectory: a checkpoint of other settings (or another model) is refused.
    fingerprint = {"steps": steps, "batch_size": batch_size, "lr": lr, "eval_every": eval_every, "patience": patience,
                   "seed": seed, "validate_initial": validate_initial, "model": type(model).__name__,
                   "config": model.config.to_dict() if hasattr(model, "config") else None,
                   "parameters": {k: list(v.shape) for k, v in model.state_dict().items()},
                   "trainable": sorted(k for k, v in model.named_parameters() if v.requires_grad),
                   "data": (len(splits.train), len(splits.validation)),
                   **({"ema_decay": ema_decay} if ema_decay is not None else {})}  # earlier checkpoints stay valid

    def save_state() -> None:
        state = {"fingerprint": fingerprint, "model": model.state_dict(), "optimizer": opt.state_dict(),
                 "schedule": schedule.state_dict(), "generator": gen.get_state(), "best_state": best_state,
                 "counters": (step, best, best_step, stale, train_seconds), "curve": curve,
                 "ema": ema.state_dict() if ema is not None else None}
        buffer = io.BytesIO()
        torch.save(state, buffer)
        atomic_write_bytes(checkpoint, buffer.getvalue())  # a run killed while saving keeps its previous one

    start_step = 1
    if checkpoint is not None and Path(checkpoint).is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if state["fingerprint"] != fingerprint:
            raise input_error(fn, "checkpoint", "a checkpoint of a run with these settings",
                              described(f"{checkpoint} holds {state['fingerprint']}"))
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        gen.set_state(state["generator"])
        if ema is not None:
            ema.load_state_dict(state["ema"])
        best_state, curve = state["best_state"], state["curve"]
        step, best, best_step, stale, train_seconds = state["counters"]
        start_step = step + 1
    elif validate_initial:
        best = evaluate_forecaster(scored, splits.validation, device=device)["mse"]
        best_state, curve = copy.deepcopy(scored.state_dict()), [(0, best)]
    with phase(phase_name, total=steps) as bar:
        bar.update(start_step - 1)
        for step in range(start_step, steps + 1) if stale < patience else ():
            start = time.perf_counter()
            idx = torch.randint(len(splits.train), (batch_size,), generator=gen).tolist()
            batch = {k: v.to(device) for k, v in collate([splits.train[i] for i in idx]).items()}
            loss = model(**batch).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
            schedule.step()
            if ema is not None:
                ema.update()
            train_seconds += time.perf_counter() - start
            bar.update()
            if step % eval_every == 0 or step == steps:
                val = evaluate_forecaster(scored, splits.validation, device=device)["mse"]
                curve.append((step, val))
                if val < best:
                    best, best_state, best_step, stale = val, copy.deepcopy(scored.state_dict()), step, 0
                else:
                    stale += 1
            if checkpoint is not None and (step % checkpoint_every == 0 or step == steps or stale >= patience):
                save_state()
            if stale >= patience:
                break
    if best_state is not None:
        model.load_state_dict(best_state)
    return ForecasterTraining(val_mse=best, steps=step,
                              series_per_second=step * batch_size / max(train_seconds, 1e-9), val_history=curve,
                              best_step=best_step, schedule_steps=steps)


#: Training batches pad history and horizon lengths up to a multiple of this (IMTSCollator).
PAD_TO = 16
