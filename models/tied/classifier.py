"""The digit classifier TIED's classifier energy and accuracy evaluation use (``icml26.models.tied``)."""

from __future__ import annotations

import torch
from torch import nn

from icml26.validation import check_int

__all__ = ["DigitsCNN"]

#: Side of the square digit images the classifier takes by default (the TIED task's size).
DEFAULT_SIZE = 20


class DigitsCNN(nn.Module):
    """Conv(1 -> 16) - pool - Conv(16 -> 32) - pool - FC 64 - FC 10 on ``size`` x ``size`` digits (``size >= 4``:
    two 2x poolings)."""

    def __init__(self, size: int = DEFAULT_SIZE) -> None:
        super().__init__()
        size = check_int("DigitsCNN", "size", size, low=4)
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(32 * (size // 4) ** 2, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)
