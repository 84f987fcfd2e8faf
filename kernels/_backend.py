"""What every kernel op shares: backend choice, Triton's mode, argument errors, the device guard.

Each op (:mod:`.naevit`, :mod:`.nudft`) takes ``backend="auto" | "triton" | "torch"``: ``auto``
runs the Triton kernel on CUDA tensors and the PyTorch reference elsewhere, and tests force
Triton's CPU interpreter with ``TRITON_INTERPRET=1``. This module holds that rule once, with:

- :func:`interpreting`, :func:`triton_usable`, :func:`resolve_backend`: the mode and the choice;
- :func:`jit`: ``triton.jit`` made on first use for the current mode;
- :class:`Tile`, :func:`autotuning`, :func:`launcher`: each kernel's small ``triton.autotune`` space of
  tiles (block sizes, warps, stages) on a GPU, and one fixed tile in the interpreter (fast and
  deterministic CPU tests) or with ``ICML26_AUTOTUNE=0``;
- :func:`cuda_device_guard`: every Triton launch runs inside ``torch.cuda.device(t.device)``, so
  a model spread over several GPUs (``device_map="auto"``) launches each kernel on the GPU that
  holds its tensors, not on the current device (Liger-Kernel does the same since its PR #1304);
- :func:`fail` / :func:`fail_type`: the ``"<function>: <argument>: expected X, got Y"`` errors
  of :mod:`icml26.errors`;
- :func:`values_checked`: the validation-cost rule. Checks that read tensor values (a NaN scan,
  ``.max()``, ``.tolist()``) force a GPU to synchronise, so they run on CPU tensors always and on
  other devices only when the environment sets ``ICML26_CHECK_VALUES=1``; shape, dtype and device
  checks always run. Models outside this package use it for their own value checks.

Nothing here imports torch or triton at import time (``import icml26.kernels`` stays light).
"""

from __future__ import annotations

import os
from contextlib import nullcontext
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, NoReturn

from icml26.errors import described, input_error

if TYPE_CHECKING:
    import torch

BACKENDS = ("auto", "triton", "torch")
CHECK_VALUES_ENV = "ICML26_CHECK_VALUES"
"""Set to ``1`` to run value-reading input checks on GPU tensors too (they always run on CPU)."""
AUTOTUNE_ENV = "ICML26_AUTOTUNE"
"""Set to ``0`` to launch compiled kernels with their fixed default tile instead of autotuning."""

_JITTED: dict[tuple[str, str, Any], Any] = {}


# --------------------------------------------------------------------------------------------
# Argument errors
# --------------------------------------------------------------------------------------------
def fail(function: str, argument: str, expected: str, got: Any) -> NoReturn:
    """Raise :class:`icml26.InputError` ``"<function>: <argument>: expected <expected>, got <got>"``.

    ``got`` is shown with ``repr``; wrap a description in :func:`icml26.errors.described`
    (or use :func:`icml26.errors.describe` for a tensor) to print it as is.
    """
    raise input_error(function, argument, expected, got)


def fail_type(function: str, argument: str, expected: str, value: Any) -> NoReturn:
    """Raise ``TypeError`` in the same message form, naming the type of ``value``."""
    raise TypeError(str(input_error(function, argument, expected, described(type(value).__name__))))


def values_checked(tensor: torch.Tensor) -> bool:
    """Whether a check that reads ``tensor``'s values may run now (the validation-cost rule).

    True for CPU tensors, and for tensors elsewhere (CUDA) only when ``ICML26_CHECK_VALUES=1``:
    reading a GPU tensor's values synchronises the device, which a forward run per layer must not
    do. Meta tensors hold no values and are never checked.
    """
    kind = tensor.device.type
    if kind == "cpu":
        return True
    return kind != "meta" and os.environ.get(CHECK_VALUES_ENV, "0") == "1"


# --------------------------------------------------------------------------------------------
# Triton's mode and the backend choice
# --------------------------------------------------------------------------------------------
def interpreting() -> bool:
    """Whether Triton runs its CPU interpreter (``TRITON_INTERPRET=1``) rather than compiling."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


@cache
def _triton_installed() -> bool:
    from importlib.util import find_spec

    return find_spec("triton") is not None


def triton_usable(device: torch.device) -> bool:
    """Whether a Triton kernel can run on ``device``: triton installed, and CUDA or the interpreter."""
    return _triton_installed() and (device.type == "cuda" or interpreting())


def resolve_backend(function: str, backend: Any, device: torch.device, dtype: torch.dtype,
                    choices: tuple[str, ...] = BACKENDS) -> str:
    """The backend to run: ``backend`` itself, with ``"auto"`` resolved to ``"triton"`` or ``"torch"``.

    ``auto`` picks Triton for CUDA tensors of a dtype the kernels take (float16, bfloat16,
    float32) when triton is installed, else the reference. An explicit ``"triton"`` that cannot
    run raises :class:`icml26.InputError` saying what it needs. ``choices`` lists the op's
    backends (an op may add its own beside the three common ones).
    """
    import torch

    if backend not in choices:
        fail(function, "backend", f"one of {choices}", backend)
    if backend == "auto":
        triton_fits = device.type == "cuda" and dtype != torch.float64 and triton_usable(device)
        return "triton" if triton_fits else "torch"
    if backend == "triton":
        if not triton_usable(device):
            fail(function, "backend", "'triton' only with CUDA tensors, or with TRITON_INTERPRET=1 for the CPU "
                 "interpreter, and triton installed", described(f"'triton' with {device.type} tensors"))
        if dtype == torch.float64:
            fail(function, "backend", "'torch' for float64 inputs ('triton' takes float16, bfloat16 or float32: "
                 "the kernels compute in float32)", described("'triton' with float64 inputs"))
    return backend


def jit(fn):
    """``triton.jit(fn)``, made on first use, once per mode (compiled or interpreted).

    Kernels are jitted at call time rather than at import so that the mode follows the
    environment. Triton's own helpers (``tl.zeros`` ...) are jitted when triton is imported, so the
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
    if key not in _JITTED:
        _JITTED[key] = triton.jit(fn)
    return _JITTED[key]


@dataclass(frozen=True)
class Tile:
    """One launch configuration of a kernel: its constexpr block sizes, warps and pipeline stages."""

    sizes: dict[str, int] = field(default_factory=dict)
    num_warps: int = 4
    num_stages: int = 2

    def meta(self) -> dict[str, int]:
        """The keyword arguments of a launch with this tile."""
        return {**self.sizes, "num_warps": self.num_warps, "num_stages": self.num_stages}


def autotuning() -> bool:
    """Whether compiled kernels pick their tile with ``triton.autotune`` (never in the interpreter).

    On by default; ``ICML26_AUTOTUNE=0`` launches each kernel's fixed default tile instead (no tuning
    runs on the first call of each shape, at the price of speed).
    """
    return not interpreting() and os.environ.get(AUTOTUNE_ENV, "1") != "0"


def launcher(fn, tiles, key, fixed: Tile, *, tune: bool = True):
    """``(kernel, meta)`` to launch ``fn`` as ``kernel[grid](*args, **other_meta, **meta)``.

    When :func:`autotuning` (and ``tune``): ``triton.autotune`` over ``tiles`` keyed on the argument
    names ``key`` (Triton adds the tensors' dtypes), made once per kernel, with no meta to pass.
    Otherwise the jitted kernel and ``fixed``'s meta: the interpreter always runs one tile. ``grid``
    must then read the block sizes from its ``meta`` argument.
    """
    if not (tune and autotuning()):
        return jit(fn), fixed.meta()
    import triton

    name = (fn.__module__, fn.__name__, "autotune")
    if name not in _JITTED:
        configs = [triton.Config(dict(t.sizes), num_warps=t.num_warps, num_stages=t.num_stages) for t in tiles]
        _JITTED[name] = triton.autotune(configs=configs, key=list(key))(jit(fn))
    return _JITTED[name], {}


def cuda_device_guard(tensor: torch.Tensor):
    """``torch.cuda.device(tensor.device)`` for a CUDA tensor, a no-op context otherwise.

    Triton launches on the *current* CUDA device; with a model split over GPUs the current device
    is often not the one holding the inputs, and the kernel then reads another GPU's memory. Wrap
    every launch in this guard.
    """
    if tensor.device.type != "cuda":
        return nullcontext()
    import torch

    return torch.cuda.device(tensor.device)


__all__ = ["AUTOTUNE_ENV", "BACKENDS", "CHECK_VALUES_ENV", "Tile", "autotuning", "cuda_device_guard", "fail",
           "fail_type", "interpreting", "jit", "launcher", "resolve_backend", "triton_usable", "values_checked"]
