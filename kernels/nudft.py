"""Differentiable non-uniform DFT (analysis) and its inverse (synthesis) at arbitrary times.

TFMixer (arXiv 2602.00582) handles irregular multivariate time series in its Global Frequency
Module: with no grid to sample on, the transform is evaluated at the raw timestamps ``t`` with
learnable angular frequencies ``omega``, and an inverse transform extrapolates the seasonal part
to the query times::

    nudft:   R_k = w sum_n m_n x_n cos(omega_k t_n),   I_k = -w sum_n m_n x_n sin(omega_k t_n)
             (X_k = R_k + j I_k = w sum_n m_n x_n exp(-j omega_k t_n); w = 1 for "sum",
              1 / max(1, sum_n m_n) for "mean", a constant)
    inudft:  y_j = sum_k c_k (a_k cos(omega_k tau_j) - b_k sin(omega_k tau_j))  (= Re sum_k c_k X_k e^{+j phi})

Reconstruction: the paper body was not available, so the normalisation (``norm``), the synthesis
coefficients ``c_k`` and the closed-form gradients used below (derived by differentiating the two
sums) are our choices. Every forward and backward quantity of both ops is a *trigonometric sum*
``C[g, m, i] = sum_l u[g, m, l] cos(p[g, i] q[g, l])`` and
``S[g, m, i] = sum_l v[g, m, l] sin(p[g, i] q[g, l])``, where the phases depend only on a group
``g`` and the rows ``m`` share them: series whose timestamps and frequencies are shared (channels
of one batch row with a shared ``omega``) become rows of one group, and the sum is a matrix
product with cos/sin tiles built on the fly. The Triton kernel (:mod:`.nudft_triton`) computes
exactly this; the reference below computes it in chunks of ``l`` so memory stays bounded. The
autograd Functions use the closed-form gradients, so no tensor of size N x K per series is kept
for the backward on either backend.

Masked slots contribute nothing, even when they hold NaN or Inf: values and timestamps are
replaced with ``where(mask, ., 0)`` (never multiplied by the mask), and no gradient flows into the
mask. Phases are computed in float32 at least, whatever the input dtype.

**Phase precision.** A float32 phase ``theta = omega t`` carries an absolute error of up to
``|theta| 2^-24`` rad, and every cos/sin inherits it, so the relative error of the float32 result
grows in proportion to ``max |theta|`` (``tests/test_nudft.py`` measures it against float64 on both sides of the
thresholds below). So, when the phases are computed in float32 (no float64 input):

- ``max |omega| |t| > 2^14`` (phase error up to 2^-10 rad) warns with :class:`PhasePrecisionWarning`;
- ``max |omega| |t| > 2^20`` (phase error up to 2^-4 rad, results off by a percent or more) raises
  :class:`icml26.InputError`.

The fix is to normalise the times (e.g. to [0, 1] over the window) or to pass float64 times and
frequencies (``backend="torch"``). These checks, and the refusal of NaN/Inf observed times, query
times and frequencies, read tensor values, so they follow the validation-cost rule of
:func:`icml26.kernels.values_checked`: always on CPU tensors, on GPU tensors only with
``ICML26_CHECK_VALUES=1``.

Written by hand because no maintained library offers a batched, differentiable (in the points
and the frequencies) type-3 transform at this scale: FINUFFT/cuFINUFFT have no autograd in the
points, torchkbnufft and friends have no gradient w.r.t. coordinates.
"""

from __future__ import annotations

import math
import warnings

from icml26.errors import describe, described

from ._backend import BACKENDS, fail, fail_type, resolve_backend, values_checked  # noqa: F401 (the op's backends)

NORMS = ("sum", "mean")
REFERENCE_CHUNK = 256  # l-chunk of the reference trig sums: memory O(G * chunk * I)
PHASE_WARN = 2.0**14  # float32 phase |omega t| above which results lose about 1e-4 (module docstring)
PHASE_LIMIT = 2.0**20  # ... and above which they are off by a percent or more: refused


class PhasePrecisionWarning(UserWarning):
    """float32 phases ``omega t`` large enough to cost accuracy (see :mod:`icml26.kernels.nudft`).

    Filter it like any warning: ``warnings.filterwarnings("ignore", category=PhasePrecisionWarning)``.
    """


# --------------------------------------------------------------------------------------------
# The trigonometric-sum primitive
# --------------------------------------------------------------------------------------------
def trig_sums_reference(p, q, u, v, chunk: int | None = REFERENCE_CHUNK):
    """``C = sum_l u cos(p q)``, ``S = sum_l v sin(p q)``: p [G, I], q [G, L], u, v [G, M, L] -> [G, M, I].

    Computed over chunks of ``l`` (``chunk=None`` builds the whole [G, L, I] twiddle at once).
    """
    import torch

    g, i = p.shape
    m, length = u.shape[1], q.shape[1]
    c = u.new_zeros(g, m, i)
    s = u.new_zeros(g, m, i)
    step = length if chunk is None else max(int(chunk), 1)
    for start in range(0, length, step):
        phase = q[:, start:start + step, None] * p[:, None, :]  # [G, l, I]
        c = c + torch.bmm(u[:, :, start:start + step], torch.cos(phase))
        s = s + torch.bmm(v[:, :, start:start + step], torch.sin(phase))
    return c, s


def _trig_sums(p, q, u, v, backend: str, chunk: int | None):
    if backend == "triton":
        from .nudft_triton import trig_sums_triton

        return trig_sums_triton(p, q, u, v)
    return trig_sums_reference(p, q, u, v, chunk)


# --------------------------------------------------------------------------------------------
# Autograd Functions on the grouped layout
# --------------------------------------------------------------------------------------------
def _functions():
    """Build the autograd Functions on first use (keeps ``import icml26.kernels`` torch-free)."""
    global _NudftFunction, _InverseNudftFunction
    if "_NudftFunction" in globals():
        return _NudftFunction, _InverseNudftFunction
    import torch

    class NudftFunction(torch.autograd.Function):
        """(xm [G,R,N], t [G,N], omega [G,K]) -> raw (C, S) [G,R,K]: C = sum xm cos, S = sum xm sin."""

        @staticmethod
        def forward(ctx, xm, t, omega, backend, chunk):
            c, s = _trig_sums(omega, t, xm, xm, backend, chunk)
            ctx.save_for_backward(xm, t, omega)
            ctx.engine = backend, chunk
            return c, s

        @staticmethod
        def backward(ctx, g_c, g_s):
            xm, t, omega = ctx.saved_tensors
            rows = xm.shape[1]
            d_xm = d_t = d_omega = None
            w = omega[:, None, :]
            if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
                # d/dxm_n = sum_k g_c cos + g_s sin;  d/dt_n = xm_n sum_k omega (g_s cos - g_c sin)
                u = torch.cat([g_c, w * g_s], dim=1)
                v = torch.cat([g_s, -w * g_c], dim=1)
                c, s = _trig_sums(t, omega, u, v, *ctx.engine)
                d_xm = c[:, :rows] + s[:, :rows]
                d_t = (xm * (c[:, rows:] + s[:, rows:])).sum(1)
            if ctx.needs_input_grad[2]:
                # d/domega_k = sum_n xm t (g_s cos - g_c sin)
                xt = xm * t[:, None, :]
                c, s = _trig_sums(omega, t, xt, xt, *ctx.engine)
                d_omega = (g_s * c - g_c * s).sum(1)
            return d_xm, d_t, d_omega, None, None

    class InverseNudftFunction(torch.autograd.Function):
        """(a, b [G,R,K], omega [G,K], tau [G,J]) -> y [G,R,J] = sum_k a cos(omega tau) - b sin(omega tau)."""

        @staticmethod
        def forward(ctx, a, b, omega, tau, backend, chunk):
            c, s = _trig_sums(tau, omega, a, b, backend, chunk)
            ctx.save_for_backward(a, b, omega, tau)
            ctx.engine = backend, chunk
            return c - s

        @staticmethod
        def backward(ctx, g):
            a, b, omega, tau = ctx.saved_tensors
            rows = a.shape[1]
            d_a = d_b = d_omega = d_tau = None
            if any(ctx.needs_input_grad[:3]):
                gt = g * tau[:, None, :]
                u = torch.cat([g, gt], dim=1)
                c, s = _trig_sums(omega, tau, u, u, *ctx.engine)
                d_a, d_b = c[:, :rows], -s[:, :rows]
                d_omega = -(a * s[:, rows:] + b * c[:, rows:]).sum(1)
            if ctx.needs_input_grad[3]:
                w = omega[:, None, :]
                c, s = _trig_sums(tau, omega, w * b, w * a, *ctx.engine)
                d_tau = -(g * (c + s)).sum(1)
            return d_a, d_b, d_omega, d_tau, None, None

    _NudftFunction, _InverseNudftFunction = NudftFunction, InverseNudftFunction
    return NudftFunction, InverseNudftFunction


# --------------------------------------------------------------------------------------------
# Validation and the grouped layout
# --------------------------------------------------------------------------------------------
def _check_real(op: str, name: str, t) -> None:
    import torch

    if not isinstance(t, torch.Tensor):
        fail_type(op, name, "a torch.Tensor", t)
    if not t.dtype.is_floating_point or t.is_complex():
        fail(op, f"{name}.dtype", "a real floating dtype (float16, bfloat16, float32, float64)", t.dtype)
    if t.dim() < 1:
        fail(op, name, "at least one dimension", described("a 0-d tensor"))


def _check_devices(op: str, named) -> None:
    first_name, first = named[0]
    for name, t in named[1:]:
        if t is not None and t.device != first.device:
            fail(op, f"{name}.device", f"the device of {first_name} ({first.device})", t.device)


def _broadcast_batch(op: str, named) -> tuple[int, ...]:
    import torch

    try:
        return tuple(torch.broadcast_shapes(*[t.shape[:-1] for _, t in named]))
    except RuntimeError:
        shapes = ", ".join(f"{n} {tuple(t.shape)}" for n, t in named)
        fail(op, "batch dimensions", "leading dimensions (all but the last) that broadcast together", described(shapes))


def _check_phases(op: str, times, time_name: str, omega, compute) -> None:
    """Finite times and frequencies, and phases float32 can hold (module docstring); reads values.

    ``times`` and ``omega`` are the grouped ``[G, L]`` / ``[G, K]`` tensors, with unobserved times
    already replaced by 0.
    """
    import torch

    if not values_checked(times):
        return
    times, omega = times.detach(), omega.detach()
    for name, value in ((time_name, times), ("omega", omega)):
        if not bool(torch.isfinite(value).all()):
            bad = "NaN" if bool(torch.isnan(value).any()) else "Inf"
            where = " at observed slots" if name == "t" else ""
            fail(op, name, f"finite values{where} (unobserved slots may hold anything: mask them out)",
                 described(f"{bad} in {describe(value)}"))
    if compute != torch.float32 or times.numel() == 0:
        return
    largest = float((times.abs().amax(-1) * omega.abs().amax(-1)).max())
    fix = (f"normalise {time_name} (e.g. to [0, 1] over the window) or pass float64 {time_name} and omega "
           "(backend='torch')")
    if largest > PHASE_LIMIT:
        fail(op, f"{time_name} and omega", f"float32 phases |omega {time_name}| <= 2^20 (float32 holds a phase to "
             f"|phase| * 2^-24 rad); {fix}", described(f"max |omega {time_name}| = {largest:.3g}"))
    if largest > PHASE_WARN:
        warnings.warn(f"{op}: float32 phases up to |omega {time_name}| = {largest:.3g} > 2^14 lose accuracy "
                      f"(phase error up to {largest * 2.0**-24:.1e} rad); {fix}", PhasePrecisionWarning, stacklevel=3)


def _group_layout(batch: tuple[int, ...], phase_tensors) -> tuple[list[int], list[int]]:
    """Split batch dims into group dims (where a phase tensor varies) and row dims (shared phases)."""
    group, rows = [], []
    for dim in range(len(batch)):
        varies = False
        for t in phase_tensors:
            aligned = dim - (len(batch) - (t.dim() - 1))  # the same dim in t's leading dims, right-aligned
            varies |= aligned >= 0 and t.shape[aligned] != 1
        (group if varies else rows).append(dim)
    return group, rows


def _to_groups(t, batch, group, rows, last: int):
    """Broadcast ``t [..., last]`` to ``batch + (last,)`` and lay it out as [G, R, last]."""
    full = t.expand(*batch, last)
    perm = [*group, *rows, len(batch)]
    g = math.prod(batch[d] for d in group)
    r = math.prod(batch[d] for d in rows)
    return full.permute(perm).reshape(g, r, last)


def _from_groups(y, batch, group, rows):
    """Inverse of :func:`_to_groups` for a [G, R, last] result."""
    perm = [*group, *rows]
    shaped = y.reshape(*[batch[d] for d in perm], y.shape[-1])
    inverse = [perm.index(d) for d in range(len(batch))] + [len(batch)]
    return shaped.permute(inverse)


def _chunk(chunk_size) -> int:
    if chunk_size is None:
        return REFERENCE_CHUNK
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
        fail_type("nudft", "chunk_size", "a positive int or None", chunk_size)
    if chunk_size < 1:
        fail("nudft", "chunk_size", "a positive int or None", chunk_size)
    return chunk_size


# --------------------------------------------------------------------------------------------
# Public ops
# --------------------------------------------------------------------------------------------
def nudft(x, t, omega, mask=None, *, norm: str = "mean", backend: str = "auto", chunk_size: int | None = None):
    """Non-uniform DFT of ``x`` sampled at times ``t``, at angular frequencies ``omega``.

    Args:
        x: values ``[..., N]``.
        t: timestamps broadcastable to ``x`` (e.g. ``[B, 1, N]`` shared by the channels of a row).
        omega: frequencies ``[K]`` (shared), ``[C, K]`` (per channel) or ``[..., K]``; its leading
            dims broadcast against ``x``'s.
        mask: bool ``[..., N]`` broadcastable to ``x``; False = not observed (contributes nothing,
            even NaN or Inf).
        norm: ``"sum"`` or ``"mean"`` (divide by the number of observed points, at least 1).
        backend: ``"triton"``, ``"torch"`` or ``"auto"`` (Triton on CUDA).
        chunk_size: ``"torch"`` backend only: how many samples (or frequencies, in the backward)
            each step of the sum covers; memory grows with it (default 256).

    Returns:
        ``(real, imag)``, each ``[batch..., K]`` in ``x``'s dtype, with ``X = real + j imag =
        w sum_n x_n exp(-j omega t_n)``. Differentiable in ``x``, ``t`` and ``omega``.

    Raises:
        icml26.InputError: bad shapes, dtypes, devices or options; and, where values are checked
            (CPU tensors, or ``ICML26_CHECK_VALUES=1``): NaN/Inf at observed times or in ``omega``,
            or float32 phases ``max |omega t| > 2^20`` (see the module docstring).
        TypeError: an argument that is not a tensor.

    Warns:
        PhasePrecisionWarning: float32 phases ``max |omega t| > 2^14`` (checked as above).
    """
    import torch

    for name, value in (("x", x), ("t", t), ("omega", omega)):
        _check_real("nudft", name, value)
    if mask is not None:
        if not isinstance(mask, torch.Tensor):
            fail_type("nudft", "mask", "a bool tensor (False = not observed)", mask)
        if mask.dtype != torch.bool:
            fail("nudft", "mask.dtype", "torch.bool (False = not observed)", mask.dtype)
        if mask.dim() < 1:
            fail("nudft", "mask", "at least one dimension [..., N]", described("a 0-d tensor"))
    if norm not in NORMS:
        fail("nudft", "norm", f"one of {NORMS}", norm)
    _check_devices("nudft", [("x", x), ("t", t), ("omega", omega), ("mask", mask)])
    n, k = x.shape[-1], omega.shape[-1]
    if k == 0:
        fail("nudft", "omega", "at least one frequency (K >= 1)", describe(omega))
    if t.shape[-1] != n:
        fail("nudft", "t", f"{n} timestamps in its last dim, like x", describe(t))
    if mask is not None and mask.shape[-1] != n:
        fail("nudft", "mask", f"{n} entries in its last dim, like x", describe(mask))
    named = [("x", x), ("t", t), ("omega", omega)] + ([("mask", mask)] if mask is not None else [])
    batch = _broadcast_batch("nudft", named)
    compute = torch.promote_types(torch.promote_types(x.dtype, t.dtype), torch.promote_types(omega.dtype, torch.float32))
    backend = resolve_backend("nudft", backend, x.device, compute)
    chunk = _chunk(chunk_size)

    group, rows = _group_layout(batch, [t, omega])
    if mask is None:
        mask = torch.ones((1,) * len(batch) + (n,), dtype=torch.bool, device=x.device)
    m = _to_groups(mask, batch, group, rows, n)  # [G, R, N]
    xm = torch.where(m, _to_groups(x.to(compute), batch, group, rows, n), 0.0)
    t_g = _to_groups(t.to(compute), batch, group, rows, n)[:, 0]  # shared by the rows of a group
    t_g = torch.where(m.any(1), t_g, 0.0)  # a slot no row observes may hold NaN: never let it reach a phase
    omega_g = _to_groups(omega.to(compute), batch, group, rows, k)[:, 0]
    _check_phases("nudft", t_g, "t", omega_g, compute)
    fn, _ = _functions()
    c, s = fn.apply(xm, t_g, omega_g, backend, chunk)
    if norm == "mean":
        weight = 1.0 / m.sum(-1, keepdim=True).clamp(min=1).to(compute)
        c, s = c * weight, s * weight
    real = _from_groups(c, batch, group, rows).to(x.dtype)
    imag = _from_groups(-s, batch, group, rows).to(x.dtype)
    return real, imag


def inudft(a, b, omega, tau, *, coef=None, backend: str = "auto", chunk_size: int | None = None):
    """Synthesis ``y_j = sum_k c_k (a_k cos(omega_k tau_j) - b_k sin(omega_k tau_j))`` at times ``tau``.

    ``a``, ``b`` are ``[..., K]`` (e.g. the ``real``/``imag`` of :func:`nudft`), ``omega``
    ``[K]``/``[C, K]``/``[..., K]``, ``tau [..., J]``; leading dims broadcast. ``coef``
    (``c_k``, broadcastable to ``[..., K]``) defaults to 1, i.e. ``y = Re sum_k X_k e^{+j omega tau}``;
    to rebuild a real signal from its mean-normalised :func:`nudft` coefficients use
    ``coef = 2`` (and 1 for a DC term, ``omega_k = 0``). Returns ``[batch..., J]`` in ``a``'s dtype,
    differentiable in ``a``, ``b``, ``omega``, ``tau`` (and ``coef``). ``chunk_size`` as in :func:`nudft`.
    Errors and warnings as in :func:`nudft`, with the query times ``tau`` in place of ``t`` (every
    query time must be finite).
    """
    import torch

    for name, value in (("a", a), ("b", b), ("omega", omega), ("tau", tau)):
        _check_real("inudft", name, value)
    if coef is not None and not isinstance(coef, (int, float)):
        _check_real("inudft", "coef", coef)
    _check_devices("inudft", [("a", a), ("b", b), ("omega", omega), ("tau", tau),
                              ("coef", coef if isinstance(coef, torch.Tensor) else None)])
    k = a.shape[-1]
    if k == 0:
        fail("inudft", "a", "at least one frequency (K >= 1)", describe(a))
    for name, value in (("b", b), ("omega", omega)):
        if value.shape[-1] != k:
            fail("inudft", name, f"{k} frequencies in its last dim, like a", describe(value))
    if isinstance(coef, torch.Tensor) and coef.shape[-1] not in (1, k):
        fail("inudft", "coef", f"1 or {k} entries in its last dim", describe(coef))
    named = [("a", a), ("b", b), ("omega", omega), ("tau", tau)]
    if isinstance(coef, torch.Tensor) and coef.dim() > 1:
        named.append(("coef", coef))
    batch = _broadcast_batch("inudft", named)
    compute = torch.promote_types(torch.promote_types(a.dtype, b.dtype),
                                  torch.promote_types(torch.promote_types(omega.dtype, tau.dtype), torch.float32))
    backend = resolve_backend("inudft", backend, a.device, compute)
    chunk = _chunk(chunk_size)
    if coef is not None:
        a, b = a * coef, b * coef
    group, rows = _group_layout(batch, [tau, omega])
    j = tau.shape[-1]
    a_g = _to_groups(a.to(compute), batch, group, rows, k)
    b_g = _to_groups(b.to(compute), batch, group, rows, k)
    omega_g = _to_groups(omega.to(compute), batch, group, rows, k)[:, 0]
    tau_g = _to_groups(tau.to(compute), batch, group, rows, j)[:, 0]
    _check_phases("inudft", tau_g, "tau", omega_g, compute)
    _, fn = _functions()
    y = fn.apply(a_g, b_g, omega_g, tau_g, backend, chunk)
    return _from_groups(y, batch, group, rows).to(a.dtype)
