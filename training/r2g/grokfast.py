"""Grokfast-EMA, the gradient-filter baseline of the R2G experiment.

Grokfast (Lee et al. 2024, arXiv 2405.20233, Algorithm 2, "Grokfast" with an EMA filter; upstream code
ironjr/grokfast ``grads.py`` ``gradfilter_ema``) amplifies the slow component of the gradients: an
exponential moving average of each parameter's gradient is added back to it before the optimizer step.
"""

from __future__ import annotations

import torch
from transformers import TrainerCallback

from icml26.errors import input_error
from icml26.validation import check_finite

__all__ = ["GrokfastCallback", "GrokfastEMA"]


class GrokfastEMA:
    """Grokfast's EMA gradient filter (ironjr/grokfast ``gradfilter_ema``), applied in place.

    Between ``backward()`` and ``step()``: ``ema = a * ema + (1 - a) * g`` (the EMA starts at the
    first gradient) and ``g += lamb * ema``. Paper values: ``a = 0.98, lamb = 2``.
    """

    def __init__(self, alpha: float = 0.98, lamb: float = 2.0) -> None:
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0.0 <= alpha < 1.0:
            raise input_error("GrokfastEMA", "alpha", "a number in [0, 1)", alpha)
        self.alpha, self.lamb = float(alpha), check_finite("GrokfastEMA", "lamb", lamb, non_negative=True)
        self.ema: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def __call__(self, model: torch.nn.Module) -> None:
        for name, param in model.named_parameters():
            if param.grad is None or not param.requires_grad:
                continue
            if name not in self.ema:
                self.ema[name] = param.grad.detach().clone()
            else:
                self.ema[name].mul_(self.alpha).add_(param.grad, alpha=1.0 - self.alpha)
            param.grad.add_(self.ema[name], alpha=self.lamb)


class GrokfastCallback(TrainerCallback):
    """Grokfast-EMA as a ``Trainer`` callback (after gradient clipping, before the optimizer step)."""

    def __init__(self, alpha: float = 0.98, lamb: float = 2.0) -> None:
        self.filter = GrokfastEMA(alpha, lamb)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.filter(model)
