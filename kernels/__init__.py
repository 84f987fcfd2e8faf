"""Triton kernels beside their PyTorch references (``icml26.kernels``).

Kept free of heavy imports: a script run from the repository root sees this folder as a
top-level ``kernels`` module too, and transformers probes for a package of that name. The op
modules import torch and triton only when called.
"""

from .naevit import naevit_attention, naevit_reference

__all__ = ["naevit_attention", "naevit_reference"]
