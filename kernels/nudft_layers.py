"""``nn.Module`` wrappers of the NUDFT ops: learnable frequencies and synthesis (see :mod:`.nudft`).

TFMixer (arXiv 2602.00582) learns the frequencies of its Global Frequency Module. Reconstruction:
the bounded ``sigmoid`` parameterisation and the two initial rules (harmonics of the window, or
log-spaced) are our choices; the paper body was not available.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from icml26.validation import check_finite, check_int

from ._backend import BACKENDS, fail, fail_type
from .nudft import NORMS, inudft, nudft

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
        norm: as in :func:`icml26.kernels.nudft`.
        backend: as in :func:`icml26.kernels.nudft`.
    """

    def __init__(self, num_frequencies: int, *, learnable: bool = True, init: str = "harmonic",
                 per_channel: bool = False, num_channels: int | None = None, max_cycles: float | None = None,
                 norm: str = "mean", backend: str = "auto"):
        super().__init__()
        if isinstance(num_frequencies, bool) or not isinstance(num_frequencies, int):
            fail_type("NUDFT", "num_frequencies", "a positive int", num_frequencies)
        if num_frequencies < 1:
            fail("NUDFT", "num_frequencies", "a positive int", num_frequencies)
        if init not in INITS:
            fail("NUDFT", "init", f"one of {INITS}", init)
        if per_channel and (not isinstance(num_channels, int) or num_channels < 1):
            fail("NUDFT", "num_channels", "a positive int with per_channel=True", num_channels)
        if norm not in NORMS:
            fail("NUDFT", "norm", f"one of {NORMS}", norm)
        if backend not in BACKENDS:
            fail("NUDFT", "backend", f"one of {BACKENDS}", backend)
        k = num_frequencies
        if max_cycles is not None:
            check_finite("NUDFT", "max_cycles", max_cycles, positive=True)
        self.max_cycles = float(max_cycles) if max_cycles is not None else 2.0 * k
        if not k < self.max_cycles:  # both inits end at K cycles (plain numbers: works on the meta device too)
            fail("NUDFT", "max_cycles", f"more than the largest initial frequency ({k} cycles)", max_cycles)
        self.init = init
        shape = (num_channels, k) if per_channel else (k,)
        raw = torch.empty(shape)
        if learnable:
            self.raw = nn.Parameter(raw)
        else:
            self.register_buffer("raw", raw)
        self.norm, self.backend = norm, backend
        self.reset_parameters()

    def initial_raw(self) -> torch.Tensor:
        """The initial ``raw`` (shape of :attr:`raw`, on the default device): the one initial rule.

        ``"harmonic"``: ``omega_k = 2 pi k`` for k = 1..K; ``"log"``: K frequencies log-spaced from
        half a cycle to K cycles per unit time; then ``raw = logit(cycles / max_cycles)``, the
        inverse of :attr:`omega`'s parameterisation.
        """
        k = self.raw.shape[-1]
        if self.init == "harmonic":
            cycles = torch.arange(1, k + 1, dtype=torch.float32)
        else:
            cycles = torch.logspace(math.log10(0.5), math.log10(k), k)
        return torch.logit(cycles / self.max_cycles).expand(self.raw.shape)

    def reset_parameters(self) -> None:
        """Set :attr:`raw` to :meth:`initial_raw` (the constructor calls it; so does TFMixer's init)."""
        with torch.no_grad():
            self.raw.copy_(self.initial_raw())

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
            fail("InverseNUDFT", "backend", f"one of {BACKENDS}", backend)
        check_finite("InverseNUDFT", "coef", coef)
        if num_frequencies is not None:
            check_int("InverseNUDFT", "num_frequencies", num_frequencies, low=1)
        if learnable_scale:
            if num_frequencies is None:
                fail("InverseNUDFT", "num_frequencies", "a positive int with learnable_scale=True", num_frequencies)
            self.coef = nn.Parameter(torch.full((num_frequencies,), float(coef)))
        else:
            self.coef = float(coef)
        self.backend = backend

    def forward(self, a: torch.Tensor, b: torch.Tensor, omega: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return inudft(a, b, omega, tau, coef=self.coef, backend=self.backend)
