"""Triton kernels beside their PyTorch references (``icml26.kernels``).

Kept free of heavy imports: a script run from the repository root sees this folder as a
top-level ``kernels`` module too, and transformers probes for a package of that name. The op
modules import torch and triton only when called; the ``nn.Module`` wrappers load on first access.

``values_checked(tensor)`` is the validation-cost rule shared by every op and model: checks that
read tensor values run on CPU tensors, and elsewhere only with ``ICML26_CHECK_VALUES=1``.
"""

from ._backend import values_checked
from .naevit import naevit_attention, naevit_reference
from .nudft import PhasePrecisionWarning, inudft, nudft

__all__ = ["InverseNUDFT", "NUDFT", "PhasePrecisionWarning", "inudft", "naevit_attention", "naevit_reference",
           "nudft", "values_checked"]


def __getattr__(name):
    if name in ("NUDFT", "InverseNUDFT"):
        from . import nudft_layers

        return getattr(nudft_layers, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
