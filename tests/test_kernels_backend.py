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
def launches(monkeypatch, kernel_device):
    """Count Triton launches, failing any that happens outside cuda_device_guard."""
    pytest.importorskip("triton")
    monkeypatch.setenv(_backend.AUTOTUNE_ENV, "0")  # the counted launches are the jitted kernels themselves
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


def test_every_triton_launch_runs_inside_the_device_guard(launches, kernel_device):
    from icml26.kernels import naevit_attention, nudft

    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, h, n, 16, generator=gen).to(kernel_device).requires_grad_()
               for h, n in ((2, 3), (1, 5), (1, 5)))
    out = naevit_attention(q, k, v, torch.tensor([[0, 3, 4]], device=kernel_device), backend="triton")
    out.sum().backward()
    assert launches["launches"] == 3  # forward, dK/dV, dQ

    x, t = torch.randn(2, 3, 7, generator=gen).to(kernel_device), torch.rand(2, 1, 7, generator=gen).to(kernel_device)
    omega = torch.rand(4, generator=gen).to(kernel_device).requires_grad_()
    real, imag = nudft(x.requires_grad_(), t.requires_grad_(), omega, backend="triton")
    (real.sum() + imag.sum()).backward()
    assert launches["launches"] > 3 and launches["inside"] == 0


def test_importing_the_kernels_imports_neither_torch_nor_triton():
    code = ("import sys, icml26.kernels, icml26.kernels.naevit, icml26.kernels.nudft, icml26.kernels._backend; "
            "heavy = [m for m in ('torch', 'triton', 'transformers') if m in sys.modules]; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


def _tile_spaces():
    from icml26.kernels import naevit_triton, nudft_triton

    return {
        "naevit forward": (naevit_triton._naevit_fwd_kernel, naevit_triton.FWD_TILES, naevit_triton.TUNE_KEY),
        "naevit dK/dV": (naevit_triton._naevit_bwd_dkdv_kernel, naevit_triton.DKDV_TILES, naevit_triton.TUNE_KEY),
        "naevit dQ": (naevit_triton._naevit_bwd_dq_kernel, naevit_triton.DQ_TILES, naevit_triton.TUNE_KEY),
        "nudft": (nudft_triton._trig_sums_kernel, nudft_triton.TILES, nudft_triton.TUNE_KEY),
    }


@pytest.mark.parametrize("name", ["naevit forward", "naevit dK/dV", "naevit dQ", "nudft"])
def test_autotune_spaces_are_well_formed(name):
    """Block sizes are powers of two in [16, 256] (tl.arange and tl.dot need that), every tile names the
    kernel's own block constexprs, no tile repeats, and the autotune key names the kernel's arguments."""
    import inspect

    pytest.importorskip("triton")
    from icml26.kernels import naevit_triton, nudft_triton

    fn, tiles, key = _tile_spaces()[name]
    params = inspect.signature(fn).parameters
    blocks = {p for p in params if p.startswith("BLOCK_") and p != "BLOCK_D"}  # BLOCK_D follows the head dim
    fixed = [naevit_triton.INTERPRET_TILE, naevit_triton.default_tile(64, False), naevit_triton.default_tile(256, False)]
    if name == "nudft":
        fixed = [nudft_triton.INTERPRET_TILE, nudft_triton.default_tile(8, False), nudft_triton.default_tile(64, False)]
    assert 2 <= len(tiles) <= 8  # small: every tile compiles once per dtype and head dim
    assert len({tuple(sorted(t.meta().items())) for t in tiles}) == len(tiles)
    for tile in (*tiles, *fixed):
        assert set(tile.sizes) == blocks, tile
        for size in tile.sizes.values():
            assert 16 <= size <= 256 and size & (size - 1) == 0, tile
        assert tile.num_warps in (1, 2, 4, 8, 16) and tile.num_stages >= 1, tile
    assert set(key) <= set(params), set(key) - set(params)


def test_the_interpreter_runs_one_fixed_tile(monkeypatch):
    """No autotuning in the interpreter (one tile, fast and deterministic tests) or with ICML26_AUTOTUNE=0."""
    pytest.importorskip("triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv(_backend.AUTOTUNE_ENV, raising=False)
    assert not _backend.autotuning()
    monkeypatch.delenv("TRITON_INTERPRET")
    assert _backend.autotuning()
    monkeypatch.setenv(_backend.AUTOTUNE_ENV, "0")
    assert not _backend.autotuning()
    import triton.language as tl

    if type(tl.zeros).__name__ != "InterpretedFunction":
        pytest.skip("this session compiles its kernels (--device cuda): the launches below need the interpreter")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.delenv(_backend.AUTOTUNE_ENV)
    from icml26.kernels import naevit_attention, naevit_triton, nudft, nudft_triton

    seen = {}
    real = _backend.jit

    class Recorded:
        def __init__(self, kernel):
            self.kernel = kernel

        def __getitem__(self, grid):
            def launch(*args, **meta):
                seen.setdefault(self.kernel.fn.__name__, []).append(
                    {k: v for k, v in meta.items() if k.startswith("BLOCK_") and k != "BLOCK_D"})
                return self.kernel[grid](*args, **meta)
            return launch

    monkeypatch.setattr(_backend, "jit", lambda fn: Recorded(real(fn)))
    gen = torch.Generator().manual_seed(0)
    for n in (5, 70):  # two lengths: a GPU would tune them separately
        q, k, v = (torch.randn(1, h, m, 32, generator=gen).requires_grad_() for h, m in ((2, n), (1, n), (1, n)))
        naevit_attention(q, k, v, torch.arange(n)[None], backend="triton").sum().backward()
        x, t, omega = torch.randn(2, 3, n, generator=gen), torch.rand(2, 1, n, generator=gen), torch.rand(4) * 5
        nudft(x, t, omega, backend="triton")
    naevit_tile = naevit_triton.INTERPRET_TILE.sizes
    for kernel in ("_naevit_fwd_kernel", "_naevit_bwd_dkdv_kernel", "_naevit_bwd_dq_kernel"):
        assert seen[kernel] == [naevit_tile, naevit_tile], kernel
    assert seen["_trig_sums_kernel"] == [nudft_triton.INTERPRET_TILE.sizes] * 2
