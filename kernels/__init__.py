"""Triton kernels beside their PyTorch references (``icml26.kernels``).

Kept free of imports: a script run from the repository root sees this folder as a
top-level ``kernels`` module too, and transformers probes for a package of that name.
"""
