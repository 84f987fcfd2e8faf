"""Training the digit classifier that TIED's classifier energy uses (:class:`icml26.models.tied.DigitsCNN`).

TIED itself is training-free (arXiv 2602.08267): it samples transformations against energies. The classifier
energy needs a classifier trained on clean digits; :func:`train_classifier` is that one loop.
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.models.tied.classifier import DigitsCNN

__all__ = ["train_classifier"]


def train_classifier(x: torch.Tensor, y: torch.Tensor, *, epochs: int = 8, lr: float = 1e-3, batch_size: int = 64,
                     seed: int = 0) -> DigitsCNN:
    """Adam on clean digits; the model's initialisation and batches come from ``seed`` (global RNG untouched)."""
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = DigitsCNN(x.shape[-1])
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    for _ in range(epochs):
        perm = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), batch_size):
            idx = perm[i:i + batch_size]
            opt.zero_grad(set_to_none=True)
            nn.functional.cross_entropy(model(x[idx]), y[idx]).backward()
            opt.step()
    return model.eval()
