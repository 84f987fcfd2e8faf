"""Test-time canonicalisation of any model with TIED (arXiv 2602.08267, the official evaluation pipeline).

For an invariant task the prediction is ``model(act(g*^-1, x~))``; for an equivariant one (image-valued
outputs) the output is mapped back, ``act(g*, model(act(g*^-1, x~)))``. With ``ensemble`` the predictions of
every hypothesis' best state are averaged instead of taking the single lowest-energy one.
"""

from __future__ import annotations

import torch
from torch import nn

from .groups import act
from .sampler import TIEDResult, TIEDSampler

__all__ = ["TIEDCanonicalizer"]


class TIEDCanonicalizer(nn.Module):
    """Wrap ``model`` so that it sees each input in the pose TIED finds (training-free; the model is unchanged).

    ``forward(x_tilde)`` returns the model's output; :meth:`canonicalize` returns the canonical inputs and the
    sampler's :class:`TIEDResult`; the last result is kept in ``last_result`` for inspection.
    """

    def __init__(self, model: nn.Module, sampler: TIEDSampler, invariant: bool = True, ensemble: bool = False) -> None:
        super().__init__()
        if not callable(model):
            raise TypeError(f"TIEDCanonicalizer: model: expected a callable, got {type(model).__name__}")
        if not isinstance(sampler, TIEDSampler):
            raise TypeError(f"TIEDCanonicalizer: sampler: expected a TIEDSampler, got {type(sampler).__name__}")
        self.model, self.sampler = model, sampler
        self.invariant, self.ensemble = bool(invariant), bool(ensemble)
        self.last_result: TIEDResult | None = None

    def canonicalize(self, x_tilde: torch.Tensor) -> tuple[torch.Tensor, TIEDResult]:
        result = self.sampler.sample(x_tilde)
        self.last_result = result
        group = self.sampler.group
        return act(group.inverse(result.g).to(x_tilde.dtype), x_tilde), result

    def _predict(self, g: torch.Tensor, x_tilde: torch.Tensor) -> torch.Tensor:
        g = g.to(x_tilde.dtype)
        out = self.model(act(self.sampler.group.inverse(g), x_tilde))
        return out if self.invariant else act(g, out)

    def forward(self, x_tilde: torch.Tensor) -> torch.Tensor:
        if not self.ensemble:
            x_c, result = self.canonicalize(x_tilde)
            out = self.model(x_c)
            return out if self.invariant else act(result.g.to(x_tilde.dtype), out)
        result = self.sampler.sample(x_tilde)
        self.last_result = result
        H = result.hypotheses.shape[1]
        outs = [self._predict(result.hypotheses[:, h], x_tilde) for h in range(H)]
        return torch.stack(outs).mean(0)
