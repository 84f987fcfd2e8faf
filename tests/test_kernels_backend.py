"""kernels/_backend.py: backend choice, the device guard around every Triton launch, the value-check rule."""

import subprocess
import sys
import types
from contextlib import contextmanager
from importlib.util import find_spec

import pytest
import torch

from icml26 import InputError
from icml26.kernels import _backend, values_checked
from icml26.kernels._backend import cuda_device_guard, resolve_backend, triton_usable

CPU = torch.device("cpu")


def test_auto_is_the_reference_off_cuda_and_bad_choices_say_why(monkeypatch):
    if find_spec("triton") is not None:
        import triton  # noqa: F401  (imported in conftest's mode, before the variable goes)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert resolve_backend("op", "auto", CPU, torch.float32) == "torch"
    assert resolve_backend("op", "torch", CPU, torch.float64) == "torch"
    with pytest.raises(InputError, match=r"^op: backend: expected one of \('auto', 'triton', 'torch'\), got 'gpu'$"):
        resolve_backend("op", "gpu", CPU, torch.float32)
    assert resolve_backend("op", "extra", CPU, torch.float32, choices=("auto", "extra")) == "extra"
    if not torch.cuda.is_available():
        assert not triton_usable(CPU)
        with pytest.raises(InputError, match="op: backend: expected 'triton' only with CUDA tensors, or with "
                                             "TRITON_INTERPRET=1.*got 'triton' with cpu tensors"):
            resolve_backend("op", "triton", CPU, torch.float32)
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert triton_usable(CPU) and resolve_backend("op", "triton", CPU, torch.float16) == "triton"
    assert resolve_backend("op", "auto", CPU, torch.float32) == "torch"  # the interpreter is never automatic
    with pytest.raises(InputError, match="op: backend: expected 'torch' for float64 inputs"):
        resolve_backend("op", "triton", CPU, torch.float64)


def test_values_checked_only_on_cpu_unless_asked(monkeypatch):
    cuda_like = types.SimpleNamespace(device=torch.device("cuda", 0))
    monkeypatch.delenv(_backend.CHECK_VALUES_ENV, raising=False)
    assert values_checked(torch.zeros(1)) and not values_checked(cuda_like)
    monkeypatch.setenv(_backend.CHECK_VALUES_ENV, "1")
    assert values_checked(cuda_like)
    assert not values_checked(torch.zeros(1, device="meta"))  # no values to read


def test_device_guard_selects_the_tensors_gpu():
    with cuda_device_guard(torch.zeros(1)):  # a no-op off CUDA
        pass
    guard = cuda_device_guard(types.SimpleNamespace(device=torch.device("cuda", 1)))
    assert isinstance(guard, torch.cuda.device) and guard.idx == 1


def test_argument_errors_keep_the_one_form():
    with pytest.raises(InputError, match=r"^f: x: expected a positive int, got -1$"):
        _backend.fail("f", "x", "a positive int", -1)
    with pytest.raises(TypeError, match=r"^f: x: expected a tensor, got list$"):
        _backend.fail_type("f", "x", "a tensor", [1])


@pytest.fixture
def launches(monkeypatch):
    """Count Triton launches, failing any that happens outside cuda_device_guard."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from icml26.kernels import naevit_triton, nudft_triton

    state = {"inside": 0, "launches": 0}

    @contextmanager
    def guard(tensor):
        state["inside"] += 1
        try:
            yield
        finally:
            state["inside"] -= 1

    class Checked:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            assert state["inside"], "a Triton launch outside cuda_device_guard"
            state["launches"] += 1
            return self.kernel[grid]

    for module in (naevit_triton, nudft_triton):
        monkeypatch.setattr(module, "cuda_device_guard", guard)
    real = _backend.jit  # every kernel is launched through the one the launcher hands out
    monkeypatch.setattr(_backend, "jit", lambda fn: Checked(real(fn)))
    return state


def test_every_triton_launch_runs_inside_the_device_guard(launches):
    from icml26.kernels import naevit_attention, nudft

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, n, 16, generator=gen).requires_grad_() for h, n in ((2, 3), (1, 5), (1, 5)))
    out = naevit_attention(q, k, v, torch.tensor([[0, 3, 4]]), backend="triton")
    out.sum().backward()
    assert launches["launches"] == 3  # forward, dK/dV, dQ

    x, t = torch.randn(2, 3, 7, generator=gen).requires_grad_(), torch.rand(2, 1, 7, generator=gen)
    omega = torch.rand(4, generator=gen).requires_grad_()
    real, imag = nudft(x, t.requires_grad_(), omega, backend="triton")
    (real.sum() + imag.sum()).backward()
    assert launches["launches"] > 3 and launches["inside"] == 0


def test_importing_the_kernels_imports_neither_torch_nor_triton():
    code = ("import sys, icml26.kernels, icml26.kernels.naevit, icml26.kernels.nudft, icml26.kernels._backend; "
            "heavy = [m for m in ('torch', 'triton', 'transformers') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)
