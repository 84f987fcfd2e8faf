"""Training the digit classifier that TIED's classifier energy uses (:class:`icml26.models.tied.DigitsCNN`).

TIED itself is training-free (arXiv 2602.08267): it samples transformations against energies. The classifier
energy needs a classifier trained on clean digits; :func:`train_classifier` is that one loop.
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.models.tied.classifier import DigitsCNN
from icml26.validation import check_finite, check_int

__all__ = ["check_labelled_digits", "train_classifier"]


def check_labelled_digits(function: str, x, y) -> None:
    """``x``: ``(N, 1, S, S)`` float images with ``N >= 1``; ``y``: ``(N,)`` integer labels, in ``0..9`` (values
    read on CPU tensors only)."""
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor):
        bad, value = ("x", x) if not isinstance(x, torch.Tensor) else ("y", y)
        raise InputTypeError(function, bad, "a tensor", described(type(value).__name__))
    if x.ndim != 4 or x.shape[1] != 1 or x.shape[2] != x.shape[3] or x.shape[2] < 4 or not x.shape[0] \
            or not x.is_floating_point():
        raise input_error(function, "x", "float images of shape (N, 1, S, S) with N >= 1 and S >= 4", describe(x))
    if y.shape != (x.shape[0],) or y.is_floating_point():
        raise input_error(function, "y", f"integer labels of shape ({x.shape[0]},)", describe(y))
    if y.device.type == "cpu" and (int(y.min()) < 0 or int(y.max()) > 9):
        raise input_error(function, "y", "labels in 0..9", described(f"labels in [{int(y.min())}, {int(y.max())}]"))


def train_classifier(x: torch.Tensor, y: torch.Tensor, *, epochs: int = 8, lr: float = 1e-3, batch_size: int = 64,
                     seed: int = 0) -> DigitsCNN:
    """Adam on clean digits; the model's initialisation and batches come from ``seed`` (global RNG untouched).

    Args:
        x: ``(N, 1, S, S)`` float images (``S >= 4``).
        y: ``(N,)`` integer labels in ``0..9``.
        epochs: passes over the data (``>= 1``).
        lr: Adam's learning rate.
        batch_size: images per step.
        seed: the initialisation and the batch order.
    """
    check_labelled_digits("train_classifier", x, y)
    check_int("train_classifier", "epochs", epochs, low=1)
    check_finite("train_classifier", "lr", lr, positive=True)
    check_int("train_classifier", "batch_size", batch_size, low=1)
    check_int("train_classifier", "seed", seed, low=0)
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
