"""Training TFMixer (:mod:`icml26.models.tfmixer`) and its baselines on IMTS splits: one readable loop.

:func:`train_forecaster` is the loop the TFMixer experiment and benchmark use: AdamW with a one-cycle schedule,
gradient clipping, early stopping on validation MSE and the best-validation weights kept.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from icml26.errors import described, input_error
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def train_forecaster(model, splits, *, steps: int, batch_size: int, lr: float, eval_every: int, patience: int,
                     seed: int, device, phase_name: str = "train_forecaster",
                     validate_initial: bool = False) -> ForecasterTraining:
    """AdamW with a one-cycle schedule for ``steps`` steps; keeps the best-validation weights
    (``validate_initial``: the initial weights are a candidate too, evaluated at step 0).

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
    best, best_state, stale, train_seconds, step, curve = math.inf, None, 0, 0.0, 0, []
    if validate_initial:
        best = evaluate_forecaster(model, splits.validation, device=device)["mse"]
        best_state, curve = copy.deepcopy(model.state_dict()), [(0, best)]
    with phase(phase_name, total=steps) as bar:
        for step in range(1, steps + 1):
            start = time.perf_counter()
            idx = torch.randint(len(splits.train), (batch_size,), generator=gen).tolist()
            batch = {k: v.to(device) for k, v in collate([splits.train[i] for i in idx]).items()}
            loss = model(**batch).loss
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
            schedule.step()
            train_seconds += time.perf_counter() - start
            bar.update()
            if step % eval_every == 0 or step == steps:
                val = evaluate_forecaster(model, splits.validation, device=device)["mse"]
                curve.append((step, val))
                if val < best:
                    best, best_state, stale = val, copy.deepcopy(model.state_dict()), 0
                else:
                    stale += 1
                    if stale >= patience:
                        break
    if best_state is not None:
        model.load_state_dict(best_state)
    return ForecasterTraining(val_mse=best, steps=step,
                              series_per_second=step * batch_size / max(train_seconds, 1e-9), val_history=curve)


#: Training batches pad history and horizon lengths up to a multiple of this (IMTSCollator).
PAD_TO = 16
