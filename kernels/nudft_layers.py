"""``nn.Module`` wrappers of the NUDFT ops: learnable frequencies and synthesis (see :mod:`.nudft`)."""

from __future__ import annotations

import math

import torch
from torch import nn

from .nudft import BACKENDS, NORMS, inudft, nudft

INITS = ("harmonic", "log")


class NUDFT(nn.Module):
    """Non-uniform DFT with learnable angular frequencies.

    Timestamps are expected normalised to [0, 1] over the history window. The frequencies are
    parameterised as ``omega = 2 pi max_cycles * sigmoid(raw)``, so they stay positive and below
    ``2 pi max_cycles`` (cycles per unit time) whatever the optimiser does, and the phase
    ``omega t`` stays small enough for fp32.

    Args:
        num_frequencies: K.
        learnable: whether ``raw`` is a trainable parameter (else a buffer).
        init: ``"harmonic"`` (``omega_k = 2 pi k``, k = 1..K: harmonics of the unit window) or
            ``"log"`` (log-spaced from half a cycle to K cycles).
        per_channel: one set of K frequencies per channel (``omega [C, K]``, broadcast against the
            channel dim of ``x [..., C, N]``) instead of one shared set (``[K]``).
        num_channels: C, required with ``per_channel``.
        max_cycles: the upper bound in cycles per unit time (default ``2 K``).
        norm, backend: as in :func:`icml26.kernels.nudft`.
    """

    def __init__(self, num_frequencies: int, *, learnable: bool = True, init: str = "harmonic",
                 per_channel: bool = False, num_channels: int | None = None, max_cycles: float | None = None,
                 norm: str = "mean", backend: str = "auto"):
        super().__init__()
        if not isinstance(num_frequencies, int) or num_frequencies < 1:
            raise ValueError(f"NUDFT: num_frequencies: expected a positive int, got {num_frequencies!r}")
        if init not in INITS:
            raise ValueError(f"NUDFT: init: expected one of {INITS}, got {init!r}")
        if per_channel and (not isinstance(num_channels, int) or num_channels < 1):
            raise ValueError(f"NUDFT: num_channels: expected a positive int with per_channel=True, got {num_channels!r}")
        if norm not in NORMS or backend not in BACKENDS:
            raise ValueError(f"NUDFT: norm/backend: expected {NORMS} / {BACKENDS}, got {norm!r} / {backend!r}")
        k = num_frequencies
        self.max_cycles = float(max_cycles) if max_cycles is not None else 2.0 * k
        cycles = torch.arange(1, k + 1, dtype=torch.float32) if init == "harmonic" else \
            torch.logspace(math.log10(0.5), math.log10(k), k)
        if k >= self.max_cycles:  # both inits end at K cycles (a plain number: works on the meta device too)
            raise ValueError(f"NUDFT: max_cycles: expected more than the largest initial frequency "
                             f"({k} cycles), got {self.max_cycles:g}")
        raw = torch.logit(cycles / self.max_cycles)
        if per_channel:
            raw = raw.repeat(num_channels, 1)
        if learnable:
            self.raw = nn.Parameter(raw)
        else:
            self.register_buffer("raw", raw)
        self.norm, self.backend = norm, backend

    @property
    def omega(self) -> torch.Tensor:
        """Angular frequencies, ``[K]`` or ``[C, K]``."""
        return 2 * math.pi * self.max_cycles * torch.sigmoid(self.raw)

    def forward(self, x: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None):
        """``(real, imag)`` ``[..., K]`` of ``x [..., N]`` observed at ``t`` (see :func:`nudft`)."""
        return nudft(x, t, self.omega, mask, norm=self.norm, backend=self.backend)

    def extra_repr(self) -> str:
        return f"K={self.raw.shape[-1]}, omega={tuple(self.raw.shape)}, max_cycles={self.max_cycles:g}, norm={self.norm}"


class InverseNUDFT(nn.Module):
    """Synthesis at arbitrary times: ``y(tau) = sum_k c_k (a_k cos(omega_k tau) - b_k sin(omega_k tau))``.

    ``coef`` is the fixed ``c_k`` (2 rebuilds a real signal from its mean-normalised NUDFT
    coefficients at non-zero frequencies); with ``learnable_scale`` and ``num_frequencies`` a
    per-frequency scale, initialised to ``coef``, is learnt.
    """

    def __init__(self, num_frequencies: int | None = None, *, coef: float = 2.0, learnable_scale: bool = False,
                 backend: str = "auto"):
        super().__init__()
        if backend not in BACKENDS:
            raise ValueError(f"InverseNUDFT: backend: expected one of {BACKENDS}, got {backend!r}")
        if learnable_scale:
            if not isinstance(num_frequencies, int) or num_frequencies < 1:
                raise ValueError("InverseNUDFT: num_frequencies: expected a positive int with learnable_scale=True, "
                                 f"got {num_frequencies!r}")
            self.coef = nn.Parameter(torch.full((num_frequencies,), float(coef)))
        else:
            self.coef = float(coef)
        self.backend = backend

    def forward(self, a: torch.Tensor, b: torch.Tensor, omega: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return inudft(a, b, omega, tau, coef=self.coef, backend=self.backend)
