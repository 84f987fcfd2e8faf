"""The trigonometric-sum kernel behind both NUDFT ops, forward and backward (see :mod:`.nudft`).

``C[g, m, i] = sum_l u[g, m, l] cos(p[g, i] q[g, l])`` and ``S[g, m, i] = sum_l v[g, m, l] sin(...)``.
One program per (group, tile of i, tile of rows): it loops over ``l`` in chunks, builds the
cos/sin tile of the outer-product phase in fp32 on the fly, and accumulates ``u_tile @ cos_tile``
with ``tl.dot`` (tensor cores on a GPU), so rows that share their phases (channels of one batch
row with a shared ``omega``) cost one cos/sin evaluation per phase, and nothing of size L x I is
ever stored. Accumulation is fp32; float64 inputs belong to the torch reference.

The launch runs inside :func:`icml26.kernels._backend.cuda_device_guard`, and the kernel is jitted
on first use for the current mode (see :func:`icml26.kernels._backend.jit`). On a GPU it picks its
tile from a small ``triton.autotune`` space (:data:`TILES`); the interpreter runs one fixed tile.
Reconstruction: the grouped trigonometric-sum formulation and its tiling are our design; TFMixer
(arXiv 2602.00582) specifies the transform, not a kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ._backend import Tile, cuda_device_guard, interpreting, launcher


def _trig_sums_kernel(
    P, Q, U, V, C, S,
    stride_pg, stride_qg, stride_ug, stride_um, stride_vg, stride_vm, stride_cg, stride_cm, stride_sg, stride_sm,
    M, I, L, tune_m, tune_i, tune_l,
    BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_L: tl.constexpr,
):
    g = tl.program_id(0)
    pid_i = tl.program_id(1)
    pid_m = tl.program_id(2)
    offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_l = tl.arange(0, BLOCK_L)
    i_in = offs_i < I
    m_in = offs_m < M
    p = tl.load(P + g * stride_pg + offs_i, mask=i_in, other=0.0)
    acc_c = tl.zeros([BLOCK_M, BLOCK_I], dtype=tl.float32)
    acc_s = tl.zeros([BLOCK_M, BLOCK_I], dtype=tl.float32)
    for start in range(0, L, BLOCK_L):
        cols = start + offs_l
        l_in = cols < L
        q = tl.load(Q + g * stride_qg + cols, mask=l_in, other=0.0)
        phase = q[:, None] * p[None, :]  # [BLOCK_L, BLOCK_I], fp32
        tile = m_in[:, None] & l_in[None, :]
        u = tl.load(U + g * stride_ug + offs_m[:, None] * stride_um + cols[None, :], mask=tile, other=0.0)
        v = tl.load(V + g * stride_vg + offs_m[:, None] * stride_vm + cols[None, :], mask=tile, other=0.0)
        acc_c += tl.dot(u, tl.cos(phase), input_precision="ieee")
        acc_s += tl.dot(v, tl.sin(phase), input_precision="ieee")
    out = m_in[:, None] & i_in[None, :]
    tl.store(C + g * stride_cg + offs_m[:, None] * stride_cm + offs_i[None, :], acc_c, mask=out)
    tl.store(S + g * stride_sg + offs_m[:, None] * stride_sm + offs_i[None, :], acc_s, mask=out)


def _tile(block_m: int, block_i: int, block_l: int, warps: int = 4, stages: int = 2) -> Tile:
    return Tile({"BLOCK_M": block_m, "BLOCK_I": block_i, "BLOCK_L": block_l}, warps, stages)


# The autotune space on a GPU (BLOCK_M rows, BLOCK_I outputs, BLOCK_L summed terms per tile; powers
# of two >= 16, as tl.arange and tl.dot need; nothing else constrains them).
TILES = (_tile(32, 64, 32), _tile(16, 64, 32), _tile(64, 64, 32, 4, 3), _tile(32, 128, 32, 8),
         _tile(32, 64, 64, 4, 3))
# Autotune key: M, I and L rounded up to a power of two, so a new size retunes only across a power of two.
TUNE_KEY = ("tune_m", "tune_i", "tune_l")
INTERPRET_TILE = _tile(16, 32, 32, 4, 1)
"""The one tile in the interpreter (autotuning is off there)."""


def default_tile(m: int, interpret: bool) -> Tile:
    """The fixed tile when not autotuning (the interpreter, or ``ICML26_AUTOTUNE=0``)."""
    if interpret:
        return INTERPRET_TILE
    return _tile(16 if m <= 16 else 32, 64, 32)


def trig_sums_triton(p, q, u, v, blocks: tuple[int, int, int] | None = None):
    """Triton ``(C, S)`` of :func:`icml26.kernels.nudft.trig_sums_reference` (fp32 in and out).

    p [G, I], q [G, L], u, v [G, M, L]; ``blocks=(BLOCK_M, BLOCK_I, BLOCK_L[, num_warps, num_stages])``
    fixes the tile instead of autotuning it.
    """
    out_dtype = u.dtype
    p, q, u, v = (x.to(torch.float32).contiguous() for x in (p, q, u, v))
    g, i = p.shape
    m, length = u.shape[1], q.shape[1]
    c = torch.empty(g, m, i, dtype=torch.float32, device=u.device)
    s = torch.empty_like(c)
    if g == 0 or m == 0 or i == 0:
        return c.to(out_dtype), s.to(out_dtype)
    fixed = _tile(*blocks) if blocks is not None else default_tile(m, interpreting())
    kernel, meta = launcher(_trig_sums_kernel, TILES, TUNE_KEY, fixed, tune=blocks is None)

    def grid(meta_):
        return g, triton.cdiv(i, meta_["BLOCK_I"]), triton.cdiv(m, meta_["BLOCK_M"])

    with cuda_device_guard(u):
        kernel[grid](
            p, q, u, v, c, s,
            p.stride(0), q.stride(0), u.stride(0), u.stride(1), v.stride(0), v.stride(1),
            c.stride(0), c.stride(1), s.stride(0), s.stride(1),
            m, i, length, *(triton.next_power_of_2(n) for n in (m, i, max(length, 1))),
            **meta,
        )
    return c.to(out_dtype), s.to(out_dtype)
