"""NUDFT ops: reference and Triton (interpreter on CPU, compiled with --device cuda) against brute force,
FFT and theory."""

import math
import warnings

import os

import pytest
import torch

from icml26 import InputError
from icml26.kernels import InverseNUDFT, NUDFT, PhasePrecisionWarning
from icml26.kernels import inudft as _inudft
from icml26.kernels import nudft as _nudft
from icml26.kernels.nudft import trig_sums_reference


def _on_kernel_device(op):
    """``op`` whose ``backend="triton"`` calls run on the session's kernel device (``--device``).

    On CUDA the tensor arguments move there and the outputs come back to the CPU, both differentiably,
    so every test keeps its CPU leaves, references and gradients; on CPU nothing moves (the interpreter).
    """
    def call(*args, backend="auto", **kwargs):
        device = torch.device(os.environ.get("ICML26_TEST_DEVICE", "cpu"))  # set by conftest from --device
        if backend != "triton" or device.type == "cpu":
            return op(*args, backend=backend, **kwargs)

        def moved(x):
            return x.to(device) if isinstance(x, torch.Tensor) else x

        out = op(*map(moved, args), backend=backend, **{k: moved(v) for k, v in kwargs.items()})
        return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()

    return call


nudft, inudft = _on_kernel_device(_nudft), _on_kernel_device(_inudft)


@pytest.fixture(params=["torch", "triton"])
def backend(request, monkeypatch):
    if request.param == "triton":
        pytest.importorskip("triton")
        device = request.getfixturevalue("kernel_device")
        if device.type == "cuda":  # the value checks (NaN times, phase bounds) run on GPU tensors only when asked
            monkeypatch.setenv("ICML26_CHECK_VALUES", "1")
    return request.param


def brute(x, t, omega, mask, norm="mean"):
    """float64 complex sum, written independently of the ops."""
    x, t, omega = (v.double() for v in (x, t, omega))
    xm = torch.where(mask, x, 0.0).to(torch.complex128)
    tm = torch.where(mask, t, 0.0)
    X = (xm[..., None, :] * torch.exp(-1j * omega[..., :, None] * tm[..., None, :])).sum(-1)
    if norm == "mean":
        X = X / mask.sum(-1, keepdim=True).clamp(min=1).double()
    return X.real, X.imag


def _inputs(shape_x=(8, 37), k=11, dtype=torch.float32, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*shape_x, generator=gen, dtype=torch.float64)
    t = torch.rand(*shape_x, generator=gen, dtype=torch.float64)
    omega = torch.rand(*shape_x[:-1], k, generator=gen, dtype=torch.float64) * 30
    mask = torch.rand(*shape_x, generator=gen) > 0.3
    return x.to(dtype), t.to(dtype), omega.to(dtype), mask


@pytest.mark.parametrize("norm", ["sum", "mean"])
def test_matches_float64_brute_force_with_masked_slots(backend, norm):
    x, t, omega, mask = _inputs()
    x[~mask] = float("nan")  # masked slots may hold anything
    t[~mask] = float("inf")
    want_r, want_i = brute(x, t, omega, mask, norm)
    r, i = nudft(x, t, omega, mask, norm=norm, backend=backend)
    assert r.dtype == torch.float32 and torch.isfinite(r).all() and torch.isfinite(i).all()
    torch.testing.assert_close(r.double(), want_r, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(i.double(), want_i, rtol=1e-5, atol=1e-6)


def test_reference_float64_is_exact():
    x, t, omega, mask = _inputs(dtype=torch.float64)
    r, i = nudft(x, t, omega, mask, backend="torch")
    want_r, want_i = brute(x, t, omega, mask)
    torch.testing.assert_close(r, want_r, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(i, want_i, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("layout", ["shared omega, shared t", "per-channel omega", "per-series everything"])
def test_broadcast_layouts(backend, layout):
    """[B, C, N] values with t and omega shared at different levels: the grouped path is exact."""
    gen = torch.Generator().manual_seed(1)
    b, c, n, k = 3, 5, 19, 7
    x = torch.randn(b, c, n, generator=gen)
    mask = torch.rand(b, c, n, generator=gen) > 0.25
    t = {"shared omega, shared t": torch.rand(b, 1, n, generator=gen),
         "per-channel omega": torch.rand(b, 1, n, generator=gen),
         "per-series everything": torch.rand(b, c, n, generator=gen)}[layout]
    omega = {"shared omega, shared t": torch.rand(k, generator=gen) * 20,
             "per-channel omega": torch.rand(c, k, generator=gen) * 20,
             "per-series everything": torch.rand(b, c, k, generator=gen) * 20}[layout]
    r, i = nudft(x, t, omega, mask, backend=backend)
    assert r.shape == (b, c, k)
    want_r, want_i = brute(x, t.expand(b, c, n), omega.expand(b, c, k), mask)
    torch.testing.assert_close(r.double(), want_r, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(i.double(), want_i, rtol=1e-5, atol=1e-6)


def test_equals_fft_on_a_uniform_grid(backend):
    n = 32
    x = torch.randn(4, n, generator=torch.Generator().manual_seed(2))
    t = torch.arange(n) / n
    omega = 2 * math.pi * torch.arange(n, dtype=torch.float32)
    r, i = nudft(x, t, omega, norm="sum", backend=backend)
    spectrum = torch.fft.fft(x)
    torch.testing.assert_close(r, spectrum.real, atol=1e-4, rtol=0)
    torch.testing.assert_close(i, spectrum.imag, atol=1e-4, rtol=0)


def test_single_cosine(backend):
    n, f0 = 64, 5
    t = torch.arange(n) / n
    x = torch.cos(2 * math.pi * f0 * t)
    omega = 2 * math.pi * torch.arange(1, 11, dtype=torch.float32)
    r, i = nudft(x, t, omega, backend=backend)
    expected = torch.zeros(10)
    expected[f0 - 1] = 0.5
    torch.testing.assert_close(r, expected, atol=1e-5, rtol=0)
    torch.testing.assert_close(i, torch.zeros(10), atol=1e-5, rtol=0)


def test_shift_theorem(backend):
    x, t, omega, mask = _inputs(shape_x=(4, 29), k=9, seed=3)
    delta = 0.37
    r, i = nudft(x, t, omega, mask, backend=backend)
    r2, i2 = nudft(x, t + delta, omega, mask, backend=backend)
    torch.testing.assert_close(torch.hypot(r2, i2), torch.hypot(r, i), atol=1e-5, rtol=0)
    rotated = torch.complex(r, i) * torch.exp(-1j * omega * delta)
    torch.testing.assert_close(torch.complex(r2, i2), rotated, atol=1e-5, rtol=0)


def test_round_trip_on_a_uniform_grid(backend):
    """K = N/2 + 1 harmonics with DC and Nyquist weighted 1, the rest 2: inudft(nudft(x)) = x."""
    n = 16
    x = torch.randn(3, n, generator=torch.Generator().manual_seed(4))
    t = torch.arange(n) / n
    omega = 2 * math.pi * torch.arange(n // 2 + 1, dtype=torch.float32)
    coef = torch.full((n // 2 + 1,), 2.0)
    coef[0] = coef[-1] = 1.0
    r, i = nudft(x, t, omega, backend=backend)
    y = inudft(r, i, omega, t, coef=coef, backend=backend)
    torch.testing.assert_close(y, x, atol=1e-4, rtol=0)


def test_gradcheck_float64_reference():
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    t = torch.rand(2, 1, 7, generator=gen, dtype=torch.float64, requires_grad=True)
    omega = (torch.rand(4, generator=gen, dtype=torch.float64) * 10).requires_grad_()
    mask = torch.rand(2, 3, 7, generator=gen) > 0.3
    for norm in ("sum", "mean"):
        assert torch.autograd.gradcheck(lambda a, b, c: nudft(a, b, c, mask, norm=norm, backend="torch"),
                                        (x, t, omega))
    a = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 3, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    tau = torch.rand(2, 1, 5, generator=gen, dtype=torch.float64, requires_grad=True)
    coef = torch.rand(4, generator=gen, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *v: inudft(*v, backend="torch"), (a, b, omega, tau))
    assert torch.autograd.gradcheck(lambda a_, c_: inudft(a_, b, omega, tau, coef=c_, backend="torch"), (a, coef))


def _grads(fn, tensors, backend):
    leaves = [v.detach().float().requires_grad_() for v in tensors]
    out = fn(*leaves, backend=backend)
    out = out if isinstance(out, tuple) else (out,)
    loss = sum((o.sin() * torch.arange(o.shape[-1]).float()).sum() for o in out)
    return torch.autograd.grad(loss, leaves)


def test_triton_gradients_match_reference(kernel_device):
    gen = torch.Generator().manual_seed(6)
    x, t = torch.randn(3, 4, 21, generator=gen), torch.rand(3, 1, 21, generator=gen)
    omega, mask = torch.rand(4, 6, generator=gen) * 15, torch.rand(3, 4, 21, generator=gen) > 0.3
    fwd = lambda a, b, c, backend: nudft(a, b, c, mask, backend=backend)  # noqa: E731
    for got, want in zip(_grads(fwd, (x, t, omega), "triton"), _grads(fwd, (x, t, omega), "torch")):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    a, b, tau = torch.randn(3, 4, 6, generator=gen), torch.randn(3, 4, 6, generator=gen), torch.rand(3, 1, 9, generator=gen)
    inv = lambda a_, b_, c_, d_, backend: inudft(a_, b_, c_, d_, backend=backend)  # noqa: E731
    for got, want in zip(_grads(inv, (a, b, omega, tau), "triton"), _grads(inv, (a, b, omega, tau), "torch")):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)


def test_masked_slots_get_no_gradient_and_nan_stays_out(backend):
    x, t, omega, mask = _inputs(shape_x=(3, 13), k=5, seed=7)
    clean = [v.clone().requires_grad_() for v in (x, t, omega)]
    dirty_x, dirty_t = x.clone(), t.clone()
    dirty_x[~mask], dirty_t[~mask] = float("nan"), float("nan")
    dirty = [dirty_x.requires_grad_(), dirty_t.requires_grad_(), omega.clone().requires_grad_()]
    outs = []
    for leaves in (clean, dirty):
        r, i = nudft(*leaves, mask, backend=backend)
        (r.sum() + (i ** 2).sum()).backward()
        outs.append((r, i))
    torch.testing.assert_close(outs[1][0], outs[0][0], atol=0, rtol=0)
    for c, d in zip(clean, dirty):
        assert torch.isfinite(d.grad).all()
        torch.testing.assert_close(d.grad, c.grad, atol=0, rtol=0)
    assert torch.all(dirty[0].grad[~mask] == 0) and torch.all(dirty[1].grad[~mask] == 0)


def test_padding_invariance(backend):
    x, t, omega, mask = _inputs(shape_x=(4, 17), k=6, seed=8)
    pad = 9
    x_p = torch.cat([x, torch.randn(4, pad)], -1)
    t_p = torch.cat([t, torch.full((4, pad), float("nan"))], -1)
    m_p = torch.cat([mask, torch.zeros(4, pad, dtype=torch.bool)], -1)
    for got, want in zip(nudft(x_p, t_p, omega, m_p, backend=backend), nudft(x, t, omega, mask, backend=backend)):
        torch.testing.assert_close(got, want, atol=1e-6, rtol=0)


def test_reference_chunking_does_not_change_the_result():
    gen = torch.Generator().manual_seed(9)
    p, q = torch.rand(2, 7, generator=gen) * 9, torch.rand(2, 300, generator=gen)
    u, v = torch.randn(2, 3, 300, generator=gen), torch.randn(2, 3, 300, generator=gen)
    whole = trig_sums_reference(p, q, u, v, chunk=None)
    for chunk in (1, 64, 1000):
        for got, want in zip(trig_sums_reference(p, q, u, v, chunk=chunk), whole):
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-5)


def test_learns_an_off_grid_frequency():
    """Frequency learning: one sinusoid at 4.37 cycles, irregular samples, 50% missing, reconstruction loss."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(10)
    n, f_true = 200, 4.37
    t = torch.sort(torch.rand(8, n, generator=gen), dim=-1).values
    x = torch.cos(2 * math.pi * f_true * t + 0.3)
    mask = torch.rand(8, n, generator=gen) > 0.5
    layer, synth = NUDFT(4, init="harmonic"), InverseNUDFT(coef=2.0)  # starts at 1, 2, 3, 4 cycles
    opt = torch.optim.Adam(layer.parameters(), lr=0.01)
    for step in range(300):
        r, i = layer(x, t, mask)
        recon = synth(r, i, layer.omega, t)
        loss = ((recon - x) ** 2 * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        if step == 0:
            assert layer.raw.grad.abs().sum() > 0
        opt.step()
    cycles = layer.omega.detach() / (2 * math.pi)
    assert (cycles - f_true).abs().min() / f_true < 0.02, cycles


def test_modules_validate_and_keep_omega_bounded():
    layer = NUDFT(4, per_channel=True, num_channels=3, init="log")
    assert layer.omega.shape == (3, 4) and torch.all(layer.omega > 0)
    with torch.no_grad():
        layer.raw.fill_(1e4)
    assert torch.all(layer.omega <= 2 * math.pi * layer.max_cycles)
    r, i = layer(torch.randn(2, 3, 10), torch.rand(2, 1, 10))
    assert r.shape == (2, 3, 4)
    with pytest.raises(InputError, match="NUDFT: num_channels: expected a positive int"):
        NUDFT(4, per_channel=True)
    with pytest.raises(InputError, match="NUDFT: init: expected one of"):
        NUDFT(4, init="random")
    with pytest.raises(InputError, match="NUDFT: max_cycles: expected more than"):
        NUDFT(8, max_cycles=4)
    with pytest.raises(InputError, match="NUDFT: max_cycles: expected a positive finite number"):
        NUDFT(8, max_cycles=float("inf"))
    with pytest.raises(TypeError, match="NUDFT: num_frequencies"):
        NUDFT(4.0)
    with pytest.raises(InputError, match="InverseNUDFT: coef: expected a finite number, got nan"):
        InverseNUDFT(4, coef=float("nan"))
    synth = InverseNUDFT(4, learnable_scale=True)
    y = synth(r, i, layer.omega, torch.rand(2, 1, 5))
    y.sum().backward()
    assert synth.coef.grad is not None and y.shape == (2, 3, 5)


BAD = [
    (lambda: nudft(torch.randn(3, 5), torch.rand(4, 5), torch.rand(6)), "nudft: batch dimensions: expected"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 4), torch.rand(6)), "nudft: t: expected 5 timestamps"),
    (lambda: nudft(torch.randint(0, 3, (3, 5)), torch.rand(3, 5), torch.rand(6)),
     "nudft: x.dtype: expected a real floating"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(6, dtype=torch.complex64)), "nudft: omega.dtype"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(0)), "K >= 1"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5, device="meta"), torch.rand(6)), "nudft: t.device"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(6), torch.ones(3, 5)),
     "nudft: mask.dtype: expected torch.bool"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(6), norm="max"), "nudft: norm: expected one of"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(6), backend="cuda"), "nudft: backend: expected"),
    (lambda: nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(6), chunk_size=0), "nudft: chunk_size"),
    (lambda: inudft(torch.randn(3, 4), torch.randn(3, 5), torch.rand(4), torch.rand(3, 2)),
     "inudft: b: expected 4 frequencies"),
    (lambda: inudft(torch.randn(3, 4), torch.randn(3, 4), torch.rand(4), torch.rand(2, 2)),
     "inudft: batch dimensions"),
    (lambda: inudft(torch.randn(3, 4), torch.randn(3, 4), torch.rand(4), torch.rand(3, 2).long()), "inudft: tau.dtype"),
]


@pytest.mark.parametrize("call, message", BAD, ids=[m for _, m in BAD])
def test_bad_input_names_the_argument(call, message):
    with pytest.raises(InputError) as info:
        call()
    assert message in str(info.value)


def test_non_tensors_are_type_errors():
    with pytest.raises(TypeError, match="nudft: x: expected a torch.Tensor, got list"):
        nudft([1.0, 2.0], torch.rand(2), torch.rand(3))
    with pytest.raises(TypeError, match="nudft: mask: expected a bool tensor"):
        nudft(torch.randn(2), torch.rand(2), torch.rand(3), mask=[True, False])


def _nan_at(t, index):
    t = t.clone()
    t.view(-1)[index] = float("nan")
    return t


def test_non_finite_times_and_frequencies_are_refused(backend):
    x, t, omega = torch.randn(2, 3, 6), torch.rand(2, 1, 6), 2 * math.pi * torch.arange(1.0, 5.0)
    mask = torch.ones(2, 3, 6, dtype=torch.bool)
    with pytest.raises(InputError, match="nudft: t: expected finite values at observed slots.*got NaN"):
        nudft(x, _nan_at(t, 4), omega, mask, backend=backend)
    with pytest.raises(InputError, match="nudft: t: expected finite values.*got Inf"):
        nudft(x, t.index_fill(-1, torch.tensor([2]), float("inf")), omega, backend=backend)
    with pytest.raises(InputError, match="nudft: omega: expected finite values.*got Inf"):
        nudft(x, t, omega.index_fill(0, torch.tensor([1]), float("inf")), mask, backend=backend)
    with pytest.raises(InputError, match="nudft: omega: expected finite values.*got NaN"):
        nudft(x, t, _nan_at(omega, 0), mask, backend=backend)
    # a NaN time that no channel observes is not an error (masked slots may hold anything)
    hidden = mask.clone()
    hidden[0, :, 4] = False
    r, i = nudft(x, _nan_at(t, 4), omega, hidden, backend=backend)
    assert torch.isfinite(r).all() and torch.isfinite(i).all()

    a, b, tau = torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.rand(2, 1, 5)
    with pytest.raises(InputError, match="inudft: tau: expected finite values.*got NaN"):
        inudft(a, b, omega, _nan_at(tau, 3), backend=backend)
    with pytest.raises(InputError, match="inudft: omega: expected finite values.*got Inf"):
        inudft(a, b, omega.index_fill(0, torch.tensor([3]), -float("inf")), tau, backend=backend)


def test_float32_phases_beyond_what_float32_holds(backend):
    """|omega t| > 2^20 is refused and > 2^14 warns in float32; float64 times and frequencies are exact."""
    gen = torch.Generator().manual_seed(3)
    x, t = torch.randn(4, 32, generator=gen), torch.rand(4, 32, generator=gen)
    omega = torch.tensor([1e7, 2e7])  # rad per unit time: phases up to ~2e7
    with pytest.raises(InputError, match=r"nudft: t and omega: expected float32 phases \|omega t\| <= 2\^20.*"
                                         r"float64.*got max \|omega t\| = "):
        nudft(x, t, omega, backend=backend)
    with pytest.raises(InputError, match="inudft: tau and omega"):
        inudft(torch.randn(4, 2), torch.randn(4, 2), omega, t, backend=backend)
    with pytest.warns(PhasePrecisionWarning, match=r"nudft: float32 phases up to \|omega t\|"):
        nudft(x, t, omega / 500, backend=backend)  # up to ~4e4: between 2^14 and 2^20
    with pytest.warns(PhasePrecisionWarning, match="inudft"):
        inudft(torch.randn(4, 2), torch.randn(4, 2), omega / 500, t, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # ordinary phases (|omega t| <= 2^14) stay silent
        nudft(x, t, omega / 1e4, backend=backend)
    # the fix the message names: float64 times and frequencies match a float64 brute force
    if backend == "torch":
        r, i = nudft(x, t.double(), omega.double(), norm="sum", backend=backend)
        phase = omega.double()[:, None] * t.double()[..., None, :]
        want = (x.double()[..., None, :] * torch.exp(-1j * phase)).sum(-1)
        assert torch.allclose(r.double(), want.real, atol=1e-4) and torch.allclose(i.double(), want.imag, atol=1e-4)


def test_the_phase_bounds_follow_the_measured_float32_error():
    """Below the warning bound float32 is good to ~1e-4; past the refusal bound it is off by percents."""
    from icml26.kernels.nudft import PHASE_LIMIT, PHASE_WARN

    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 16, 64, generator=gen, dtype=torch.float64)
    t = torch.rand(1, 64, generator=gen, dtype=torch.float64)

    def relative_error(top):
        omega = torch.linspace(top / 8, top, 8, dtype=torch.float64)[None]
        want = trig_sums_reference(omega, t, x, x)
        got = trig_sums_reference(omega.float(), t.float(), x.float(), x.float())
        scale = torch.sqrt(want[0] ** 2 + want[1] ** 2).max()
        return max((g.double() - w).abs().max() / scale for g, w in zip(got, want)).item()

    assert relative_error(PHASE_WARN / 4) < 1e-4
    assert relative_error(PHASE_WARN) < 1e-3
    assert relative_error(4 * PHASE_LIMIT) > 1e-2


def test_phase_warning_can_be_filtered():
    x, t, omega = torch.randn(2, 8), torch.rand(2, 8), torch.tensor([3e4])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", category=PhasePrecisionWarning)
        nudft(x, t.clamp(min=0.9), omega)


def test_value_checks_follow_the_validation_cost_rule(monkeypatch):
    """Off the CPU (unless ICML26_CHECK_VALUES=1) the ops read no tensor value: no GPU sync per forward."""
    import importlib

    nudft_module = importlib.import_module("icml26.kernels.nudft")  # the package's `nudft` is the function
    # Pretend the tensors are on a GPU: the value checks are skipped and nothing reads a value.
    monkeypatch.setattr(nudft_module, "values_checked", lambda tensor: False)

    def synchronising(*args, **kwargs):
        raise AssertionError("a tensor value was read")

    x, t, omega = torch.randn(2, 3, 6), torch.rand(2, 1, 6), torch.tensor([1e7, 2.0])
    for name in ("item", "tolist", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, synchronising)
    r, i = nudft(x, _nan_at(t, 1), omega, backend="torch")
    y = inudft(r, i, omega, t, backend="torch")
    monkeypatch.undo()
    assert r.shape == (2, 3, 2) and y.shape == (2, 3, 6)


def test_triton_refuses_float64_and_cpu_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(InputError, match="nudft: backend: expected 'torch' for float64"):
        nudft(torch.randn(3, 5, dtype=torch.float64), torch.rand(3, 5, dtype=torch.float64),
              torch.rand(2, dtype=torch.float64), backend="triton")
    monkeypatch.delenv("TRITON_INTERPRET")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="nudft: backend: .*TRITON_INTERPRET=1"):
            nudft(torch.randn(3, 5), torch.rand(3, 5), torch.rand(2), backend="triton")


def test_agrees_with_finufft_type3_if_installed():
    finufft = pytest.importorskip("finufft")
    import numpy as np

    x, t, omega, mask = _inputs(shape_x=(1, 50), k=13, dtype=torch.float64, seed=11)
    mask[:] = True
    r, i = nudft(x, t, omega, mask, norm="sum", backend="torch")
    got = finufft.nufft1d3(t[0].numpy(), x[0].numpy().astype(np.complex128), omega[0].numpy(), isign=-1, eps=1e-12)
    np.testing.assert_allclose(r[0].numpy(), got.real, atol=1e-8)
    np.testing.assert_allclose(i[0].numpy(), got.imag, atol=1e-8)


@pytest.mark.parametrize("init", ["harmonic", "log"])
def test_reset_parameters_holds_the_initial_frequency_rule(init):
    layer = NUDFT(6, init=init, per_channel=True, num_channels=2)
    fresh = layer.raw.detach().clone()
    with torch.no_grad():
        layer.raw.add_(3.0)
    layer.reset_parameters()
    assert torch.equal(layer.raw, fresh) and torch.equal(layer.raw[0], layer.raw[1])
    cycles = torch.arange(1.0, 7.0) if init == "harmonic" else torch.logspace(math.log10(0.5), math.log10(6), 6)
    torch.testing.assert_close(layer.omega[0], 2 * math.pi * cycles)
    with torch.device("meta"):
        assert NUDFT(6, init=init).raw.is_meta  # the rule runs on the meta device too


def _nudft_tiles():
    from icml26.kernels import nudft_triton

    return [(*t.sizes.values(), t.num_warps, t.num_stages) for t in nudft_triton.TILES]


@pytest.mark.parametrize("tile", _nudft_tiles(), ids=lambda t: "x".join(map(str, t)))
def test_every_autotune_tile_matches_reference_on_cuda(kernel_device, tile):
    """Each tile of the autotune space (the interpreter runs one only), sizes not multiples of the tiles."""
    if kernel_device.type != "cuda":
        pytest.skip("the autotune tiles run on a GPU only (--device cuda)")
    from icml26.kernels.nudft_triton import trig_sums_triton

    gen = torch.Generator().manual_seed(12)
    p, q = torch.rand(3, 70, generator=gen) * 9, torch.rand(3, 300, generator=gen)
    u, v = torch.randn(3, 37, 300, generator=gen), torch.randn(3, 37, 300, generator=gen)
    want = trig_sums_reference(p, q, u, v, chunk=None)
    got = trig_sums_triton(*(x.to(kernel_device) for x in (p, q, u, v)), blocks=tile)
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu(), w, atol=1e-3, rtol=1e-4)


def test_autotuned_kernel_matches_reference_on_cuda(kernel_device, monkeypatch):
    if kernel_device.type != "cuda":
        pytest.skip("autotuning runs on a GPU only (--device cuda)")
    monkeypatch.setenv("ICML26_AUTOTUNE", "1")
    x, t, omega, mask = _inputs(shape_x=(6, 300), k=70, seed=13)
    want_r, want_i = brute(x, t, omega, mask)
    r, i = nudft(x, t, omega, mask, backend="triton")
    torch.testing.assert_close(r.double(), want_r, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(i.double(), want_i, rtol=1e-5, atol=1e-5)
