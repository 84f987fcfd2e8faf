"""Jit a kernel for the current Triton mode (compiled, or the CPU interpreter with TRITON_INTERPRET=1)."""

from __future__ import annotations

import os

_CACHE: dict[tuple[str, str, bool], object] = {}


def interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def jit(fn):
    """``triton.jit(fn)`` made on first use, once per mode.

    Kernels are jitted at call time rather than at import so that the mode follows the
    environment. Triton's own helpers (``tl.zeros``...) are jitted when triton is imported, so the
    interpreter works only if ``TRITON_INTERPRET=1`` was set before that import: say so plainly
    instead of failing deep inside the interpreter.
    """
    import triton
    import triton.language as tl

    interpret = interpreting()
    if interpret and type(tl.zeros).__name__ != "InterpretedFunction":
        raise RuntimeError("TRITON_INTERPRET=1 was set after triton was imported; the interpreter needs it set "
                           "before the first `import triton` (in the shell, or at the top of the script)")
    key = (fn.__module__, fn.__name__, interpret)
    if key not in _CACHE:
        _CACHE[key] = triton.jit(fn)
    return _CACHE[key]
