"""Fused NAEViT attention in Triton: forward, backward, and the autograd Function that joins them.

One query row ``i`` of sequence ``b`` sees the keys ``j <= q_pos[i]`` of that sequence (and, in
the padded form, only keys whose ``key_padding_mask`` is True). The kernels follow
FlashAttention-2:

- forward, one program per (query tile, batch x q-head): online softmax in base 2 with fp32 running
  max / sum / accumulator; key tiles that lie entirely below ``min(q_pos)`` of the tile are visible
  to every row and skip the mask compare (for post-image text this is every visual tile); the key
  loop stops at ``max(q_pos)``; writes O and the log-sum-exp;
- backward: ``delta = rowsum(dO * O)`` first; then dK/dV with one program per (key tile, batch x
  kv-head), looping over the GQA group and over the query tiles that can see the key tile (no
  atomics, so the result is deterministic), and dQ with one program per query tile, looping over
  key tiles as the forward does.

No Tq x Tk tensor is ever stored. Both layouts share the kernels: a padded tensor ``[B, H, T, D]``
is addressed with a batch stride, a packed one ``[total, H, D]`` with a batch stride of 0 and the
sequence start read from ``cu_seqlens``.

Every launch runs inside :func:`icml26.kernels._backend.cuda_device_guard`, and the kernels are
jitted on first use for the current mode (see :func:`icml26.kernels._backend.jit`). On a GPU each
kernel picks its tile from a small ``triton.autotune`` space; the interpreter runs one fixed tile
(see :func:`icml26.kernels._backend.launcher`).

Reference: FlashAttention-2 (Dao, arXiv 2307.08691, Algorithm 1 for the forward, Algorithm 2 for
the backward); the visibility rule is SAISA's NAEViT attention (arXiv 2502.02458; the released
code ``icip-cas/SAISA``, ``llava/model/language_model/llava_llama.py``, builds it as a dense mask).
Reconstruction: the full-tile skip below ``min(q_pos)`` and the dK/dV parallelisation over key
tiles (queries are few next to keys) are our choices.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ._backend import Tile, cuda_device_guard, interpreting, launcher

# The kernels work in base 2 (exp2/log2 are the fast instructions): exp(x) = exp2(x * LOG2_E) and
# ln(y) = log2(y) * LN_2. Kernels read globals only as constexpr.
LOG2_E: tl.constexpr = tl.constexpr(1 / math.log(2))
LN_2: tl.constexpr = tl.constexpr(math.log(2))


def _naevit_fwd_kernel(
    Q, K, V, QPOS, KVMASK, CU_Q, CU_K, O, LSE,
    stride_qb, stride_qt, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_ob, stride_ot, stride_oh,
    stride_lb, stride_lt, stride_lh,
    stride_pb, stride_mb,
    seqlen_q, seqlen_k, n_heads_q, group, head_dim, qk_scale, tune_q, tune_k,
    VARLEN: tl.constexpr, HAS_KV_MASK: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // n_heads_q
    h = pid_bh % n_heads_q
    hk = h // group
    if VARLEN:
        q_start = tl.load(CU_Q + b)
        q_len = tl.load(CU_Q + b + 1) - q_start
        k_start = tl.load(CU_K + b)
        k_len = tl.load(CU_K + b + 1) - k_start
    else:
        q_start = 0
        q_len = seqlen_q
        k_start = 0
        k_len = seqlen_k
    if pid_m * BLOCK_M < q_len:
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        row_in = offs_m < q_len
        d_in = offs_d < head_dim
        qpos = tl.load(QPOS + b * stride_pb + q_start + offs_m, mask=row_in, other=-1)
        row_ok = qpos >= 0
        q = tl.load(Q + b * stride_qb + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh + offs_d[None, :],
                    mask=row_in[:, None] & d_in[None, :], other=0.0)
        k_base = K + b * stride_kb + hk * stride_kh
        v_base = V + b * stride_vb + hk * stride_vh

        # Keys [0, full_end) are visible to every valid row: no compare there. Keys up to `hi` need it.
        hi = tl.minimum(tl.max(qpos, 0) + 1, k_len)
        lowest = tl.min(tl.where(row_ok, qpos, k_len), 0) + 1
        full_end = (tl.minimum(lowest, hi) // BLOCK_N) * BLOCK_N

        m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for start_n in range(0, hi, BLOCK_N):
            cols = start_n + offs_n
            col_in = cols < k_len
            k = tl.load(k_base + (k_start + cols)[:, None] * stride_kt + offs_d[None, :],
                        mask=col_in[:, None] & d_in[None, :], other=0.0)
            v = tl.load(v_base + (k_start + cols)[:, None] * stride_vt + offs_d[None, :],
                        mask=col_in[:, None] & d_in[None, :], other=0.0)
            s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
            if start_n >= full_end:
                s = tl.where(cols[None, :] <= qpos[:, None], s, float("-inf"))
            if HAS_KV_MASK:
                real = tl.load(KVMASK + b * stride_mb + cols, mask=col_in, other=0)
                s = tl.where(real[None, :] != 0, s, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
            alpha = tl.math.exp2(m_i - m_safe)
            p = tl.math.exp2(s - m_safe[:, None])
            l_i = l_i * alpha + tl.sum(p, 1)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, input_precision=DOT_PRECISION)
            m_i = m_new

        sees = row_ok & (l_i > 0.0)
        out = acc / tl.where(sees, l_i, 1.0)[:, None]
        out = tl.where(sees[:, None], out, 0.0)
        lse = tl.where(sees, (m_i + tl.math.log2(tl.where(sees, l_i, 1.0))) * LN_2, float("-inf"))
        tl.store(O + b * stride_ob + (q_start + offs_m)[:, None] * stride_ot + h * stride_oh + offs_d[None, :],
                 out.to(O.dtype.element_ty), mask=row_in[:, None] & d_in[None, :])
        tl.store(LSE + b * stride_lb + (q_start + offs_m) * stride_lt + h * stride_lh, lse, mask=row_in)


def _naevit_bwd_dkdv_kernel(
    Q, K, V, DO, LSE, DELTA, QPOS, KVMASK, CU_Q, CU_K, DK, DV,
    stride_qb, stride_qt, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_dob, stride_dot, stride_doh,
    stride_lb, stride_lt, stride_lh,
    stride_dkb, stride_dkt, stride_dkh,
    stride_dvb, stride_dvt, stride_dvh,
    stride_pb, stride_mb,
    seqlen_q, seqlen_k, n_heads_kv, group, head_dim, qk_scale, sm_scale, tune_q, tune_k,
    VARLEN: tl.constexpr, HAS_KV_MASK: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // n_heads_kv
    hk = pid_bh % n_heads_kv
    if VARLEN:
        q_start = tl.load(CU_Q + b)
        q_len = tl.load(CU_Q + b + 1) - q_start
        k_start = tl.load(CU_K + b)
        k_len = tl.load(CU_K + b + 1) - k_start
    else:
        q_start = 0
        q_len = seqlen_q
        k_start = 0
        k_len = seqlen_k
    if pid_n * BLOCK_N < k_len:
        first_key = pid_n * BLOCK_N
        offs_n = first_key + tl.arange(0, BLOCK_N)
        offs_m = tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        col_in = offs_n < k_len
        d_in = offs_d < head_dim
        kv_tile = col_in[:, None] & d_in[None, :]
        k = tl.load(K + b * stride_kb + (k_start + offs_n)[:, None] * stride_kt + hk * stride_kh + offs_d[None, :],
                    mask=kv_tile, other=0.0)
        v = tl.load(V + b * stride_vb + (k_start + offs_n)[:, None] * stride_vt + hk * stride_vh + offs_d[None, :],
                    mask=kv_tile, other=0.0)
        key_ok = col_in
        if HAS_KV_MASK:
            key_ok = key_ok & (tl.load(KVMASK + b * stride_mb + offs_n, mask=col_in, other=0) != 0)
        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        for g in range(0, group):
            h = hk * group + g
            for start_m in range(0, q_len, BLOCK_M):
                rows = start_m + offs_m
                row_in = rows < q_len
                qpos = tl.load(QPOS + b * stride_pb + q_start + rows, mask=row_in, other=-1)
                if tl.max(qpos, 0) >= first_key:  # some row of this query tile sees this key tile
                    q_tile = row_in[:, None] & d_in[None, :]
                    q = tl.load(Q + b * stride_qb + (q_start + rows)[:, None] * stride_qt + h * stride_qh
                                + offs_d[None, :], mask=q_tile, other=0.0)
                    do = tl.load(DO + b * stride_dob + (q_start + rows)[:, None] * stride_dot + h * stride_doh
                                 + offs_d[None, :], mask=q_tile, other=0.0)
                    lse = tl.load(LSE + b * stride_lb + (q_start + rows) * stride_lt + h * stride_lh,
                                  mask=row_in, other=0.0)
                    delta = tl.load(DELTA + b * stride_lb + (q_start + rows) * stride_lt + h * stride_lh,
                                    mask=row_in, other=0.0)
                    lse2 = tl.where(lse == float("-inf"), 0.0, lse * LOG2_E)
                    s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
                    seen = (offs_n[None, :] <= qpos[:, None]) & key_ok[None, :]
                    p = tl.where(seen, tl.math.exp2(s - lse2[:, None]), 0.0)
                    dv += tl.dot(tl.trans(p.to(do.dtype)), do, input_precision=DOT_PRECISION)
                    dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
                    ds = p * (dp - delta[:, None])
                    dk += tl.dot(tl.trans(ds.to(q.dtype)), q, input_precision=DOT_PRECISION)
        dk = dk * sm_scale
        tl.store(DK + b * stride_dkb + (k_start + offs_n)[:, None] * stride_dkt + hk * stride_dkh + offs_d[None, :],
                 dk.to(DK.dtype.element_ty), mask=kv_tile)
        tl.store(DV + b * stride_dvb + (k_start + offs_n)[:, None] * stride_dvt + hk * stride_dvh + offs_d[None, :],
                 dv.to(DV.dtype.element_ty), mask=kv_tile)


def _naevit_bwd_dq_kernel(
    Q, K, V, DO, LSE, DELTA, QPOS, KVMASK, CU_Q, CU_K, DQ,
    stride_qb, stride_qt, stride_qh,
    stride_kb, stride_kt, stride_kh,
    stride_vb, stride_vt, stride_vh,
    stride_dob, stride_dot, stride_doh,
    stride_lb, stride_lt, stride_lh,
    stride_dqb, stride_dqt, stride_dqh,
    stride_pb, stride_mb,
    seqlen_q, seqlen_k, n_heads_q, group, head_dim, qk_scale, sm_scale, tune_q, tune_k,
    VARLEN: tl.constexpr, HAS_KV_MASK: tl.constexpr, DOT_PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
):
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = pid_bh // n_heads_q
    h = pid_bh % n_heads_q
    hk = h // group
    if VARLEN:
        q_start = tl.load(CU_Q + b)
        q_len = tl.load(CU_Q + b + 1) - q_start
        k_start = tl.load(CU_K + b)
        k_len = tl.load(CU_K + b + 1) - k_start
    else:
        q_start = 0
        q_len = seqlen_q
        k_start = 0
        k_len = seqlen_k
    if pid_m * BLOCK_M < q_len:
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_n = tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        row_in = offs_m < q_len
        d_in = offs_d < head_dim
        q_tile = row_in[:, None] & d_in[None, :]
        qpos = tl.load(QPOS + b * stride_pb + q_start + offs_m, mask=row_in, other=-1)
        q = tl.load(Q + b * stride_qb + (q_start + offs_m)[:, None] * stride_qt + h * stride_qh + offs_d[None, :],
                    mask=q_tile, other=0.0)
        do = tl.load(DO + b * stride_dob + (q_start + offs_m)[:, None] * stride_dot + h * stride_doh
                     + offs_d[None, :], mask=q_tile, other=0.0)
        lse = tl.load(LSE + b * stride_lb + (q_start + offs_m) * stride_lt + h * stride_lh, mask=row_in, other=0.0)
        delta = tl.load(DELTA + b * stride_lb + (q_start + offs_m) * stride_lt + h * stride_lh,
                        mask=row_in, other=0.0)
        lse2 = tl.where(lse == float("-inf"), 0.0, lse * LOG2_E)
        k_base = K + b * stride_kb + hk * stride_kh
        v_base = V + b * stride_vb + hk * stride_vh
        hi = tl.minimum(tl.max(qpos, 0) + 1, k_len)
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        for start_n in range(0, hi, BLOCK_N):
            cols = start_n + offs_n
            col_in = cols < k_len
            k = tl.load(k_base + (k_start + cols)[:, None] * stride_kt + offs_d[None, :],
                        mask=col_in[:, None] & d_in[None, :], other=0.0)
            v = tl.load(v_base + (k_start + cols)[:, None] * stride_vt + offs_d[None, :],
                        mask=col_in[:, None] & d_in[None, :], other=0.0)
            seen = (cols[None, :] <= qpos[:, None]) & col_in[None, :]
            if HAS_KV_MASK:
                real = tl.load(KVMASK + b * stride_mb + cols, mask=col_in, other=0)
                seen = seen & (real[None, :] != 0)
            s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION) * qk_scale
            p = tl.where(seen, tl.math.exp2(s - lse2[:, None]), 0.0)
            dp = tl.dot(do, tl.trans(v), input_precision=DOT_PRECISION)
            ds = p * (dp - delta[:, None])
            dq += tl.dot(ds.to(k.dtype), k, input_precision=DOT_PRECISION)
        dq = dq * sm_scale
        tl.store(DQ + b * stride_dqb + (q_start + offs_m)[:, None] * stride_dqt + h * stride_dqh + offs_d[None, :],
                 dq.to(DQ.dtype.element_ty), mask=q_tile)


def _strides(t: torch.Tensor, packed: bool) -> tuple[int, int, int]:
    """(batch, token, head) strides of a [B, H, T, ...] padded or [total, H, ...] packed tensor."""
    if packed:
        return 0, t.stride(0), t.stride(1)
    return t.stride(0), t.stride(2), t.stride(1)


def _tile(block_m: int, block_n: int, warps: int = 4, stages: int = 2) -> Tile:
    return Tile({"BLOCK_M": block_m, "BLOCK_N": block_n}, warps, stages)


# The autotune spaces on a GPU (BLOCK_M: query rows, BLOCK_N: key rows of a tile; powers of two >= 16,
# as tl.arange and tl.dot need; nothing else constrains them). Kept small: every tile is compiled
# once per dtype and head dim, and each new key below times every tile once.
FWD_TILES = (_tile(128, 64, 8, 3), _tile(128, 64, 4, 3), _tile(64, 64, 4, 3), _tile(64, 32, 4, 2),
             _tile(32, 32, 4, 2))
# dK/dV: one program holds a key tile's dk and dv in fp32 and loops over query tiles of BLOCK_M rows.
DKDV_TILES = (_tile(32, 128, 8, 2), _tile(64, 64, 4, 2), _tile(32, 64, 4, 2), _tile(32, 32, 4, 2))
DQ_TILES = (_tile(128, 64, 8, 2), _tile(64, 64, 4, 2), _tile(64, 32, 4, 2), _tile(32, 32, 4, 2))
# Autotune key: the head dim, the GQA group, the layout, and the lengths rounded up to a power of two
# (tune_q, tune_k), so a new batch length retunes only when it crosses a power of two.
TUNE_KEY = ("head_dim", "group", "tune_q", "tune_k", "VARLEN")
INTERPRET_TILE = _tile(32, 32, 4, 1)
"""The one tile of every kernel in the interpreter (autotuning is off there)."""


def default_tile(head_dim: int, interpret: bool) -> Tile:
    """The fixed tile of every kernel when not autotuning (the interpreter, or ``ICML26_AUTOTUNE=0``)."""
    if interpret:
        return INTERPRET_TILE
    return _tile(64, 64, 4, 2) if head_dim <= 128 else _tile(32, 32, 8, 2)


class _Call:
    """The shape bookkeeping shared by the forward and backward launches."""

    def __init__(self, q, k, q_pos, key_padding_mask, cu_q, cu_k, max_q, max_k, scale, blocks):
        self.packed = cu_q is not None
        self.batch = cu_q.numel() - 1 if self.packed else q.shape[0]
        self.heads_q = q.shape[1]
        self.heads_kv = k.shape[1]
        self.group = self.heads_q // self.heads_kv
        self.head_dim = q.shape[-1]
        self.seqlen_q = max_q
        self.seqlen_k = max_k
        self.scale = scale
        self.qk_scale = scale * LOG2_E.value
        # `blocks` (BLOCK_M, BLOCK_N, num_warps[, num_stages]) fixes one tile for all three kernels.
        self.tune = blocks is None
        self.tile = _tile(*blocks) if blocks is not None else default_tile(self.head_dim, interpreting())
        self.tune_q = triton.next_power_of_2(max(self.seqlen_q, 1))
        self.tune_k = triton.next_power_of_2(max(self.seqlen_k, 1))
        self.block_d = max(16, triton.next_power_of_2(self.head_dim))
        self.dot_precision = "ieee" if q.dtype == torch.float32 else "tf32"
        self.q_pos = q_pos.to(torch.int32).contiguous()
        self.stride_pb = 0 if self.packed else self.q_pos.stride(0)
        self.has_kv_mask = key_padding_mask is not None
        if self.has_kv_mask:
            self.kv_mask = key_padding_mask.to(torch.int8).contiguous()
            self.stride_mb = self.kv_mask.stride(0)
        else:
            self.kv_mask = self.q_pos  # never read: HAS_KV_MASK is False
            self.stride_mb = 0
        # Padded launches read no offsets; any int32 tensor stands in for the pointer.
        self.cu_q = cu_q.to(torch.int32).contiguous() if self.packed else self.q_pos
        self.cu_k = cu_k.to(torch.int32).contiguous() if self.packed else self.q_pos

    def kernel(self, fn, tiles):
        """``(kernel, meta)``: ``fn`` autotuned over ``tiles``, or jitted with this call's fixed tile."""
        kernel, tile_meta = launcher(fn, tiles, TUNE_KEY, self.tile, tune=self.tune)
        return kernel, dict(VARLEN=self.packed, HAS_KV_MASK=self.has_kv_mask, DOT_PRECISION=self.dot_precision,
                            BLOCK_D=self.block_d, **tile_meta)

    def s(self, t):
        return _strides(t, self.packed)


def _forward(call: _Call, q, k, v):
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(q.shape[:-1], dtype=torch.float32, device=q.device)
    kernel, meta = call.kernel(_naevit_fwd_kernel, FWD_TILES)

    def grid(m):
        return triton.cdiv(call.seqlen_q, m["BLOCK_M"]), call.batch * call.heads_q

    with cuda_device_guard(q):
        kernel[grid](
            q, k, v, call.q_pos, call.kv_mask, call.cu_q, call.cu_k, o, lse,
            *call.s(q), *call.s(k), *call.s(v), *call.s(o), *call.s(lse),
            call.stride_pb, call.stride_mb,
            call.seqlen_q, call.seqlen_k, call.heads_q, call.group, call.head_dim, call.qk_scale,
            call.tune_q, call.tune_k, **meta,
        )
    return o, lse


def _backward(call: _Call, q, k, v, o, lse, do, dlse):
    do = do.contiguous()
    delta = (do.float() * o.float()).sum(-1)
    if dlse is not None:  # d lse / d score = softmax probability: folds into delta
        delta = delta - dlse.float()
    delta = delta.contiguous()
    dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    dk = torch.empty_like(k, memory_format=torch.contiguous_format)
    dv = torch.empty_like(v, memory_format=torch.contiguous_format)
    common = (call.stride_pb, call.stride_mb, call.seqlen_q, call.seqlen_k)
    dkdv_kernel, dkdv_meta = call.kernel(_naevit_bwd_dkdv_kernel, DKDV_TILES)
    dq_kernel, dq_meta = call.kernel(_naevit_bwd_dq_kernel, DQ_TILES)

    def grid_kv(m):
        return triton.cdiv(call.seqlen_k, m["BLOCK_N"]), call.batch * call.heads_kv

    def grid_q(m):
        return triton.cdiv(call.seqlen_q, m["BLOCK_M"]), call.batch * call.heads_q

    with cuda_device_guard(q):
        dkdv_kernel[grid_kv](
            q, k, v, do, lse, delta, call.q_pos, call.kv_mask, call.cu_q, call.cu_k, dk, dv,
            *call.s(q), *call.s(k), *call.s(v), *call.s(do), *call.s(lse), *call.s(dk), *call.s(dv),
            *common, call.heads_kv, call.group, call.head_dim, call.qk_scale, call.scale,
            call.tune_q, call.tune_k, **dkdv_meta,
        )
        dq_kernel[grid_q](
            q, k, v, do, lse, delta, call.q_pos, call.kv_mask, call.cu_q, call.cu_k, dq,
            *call.s(q), *call.s(k), *call.s(v), *call.s(do), *call.s(lse), *call.s(dq),
            *common, call.heads_q, call.group, call.head_dim, call.qk_scale, call.scale,
            call.tune_q, call.tune_k, **dq_meta,
        )
    return dq, dk, dv


class NaevitAttentionFunction(torch.autograd.Function):
    """Autograd glue: forward saves q, k, v, o and lse; backward runs the two backward kernels."""

    @staticmethod
    def forward(ctx, q, k, v, q_pos, key_padding_mask, cu_q, cu_k, max_q, max_k, scale, blocks):
        q, k, v = (t if t.stride(-1) == 1 else t.contiguous() for t in (q, k, v))
        call = _Call(q, k, q_pos, key_padding_mask, cu_q, cu_k, max_q, max_k, scale, blocks)
        o, lse = _forward(call, q, k, v)
        ctx.save_for_backward(q, k, v, o, lse)
        ctx.call = call
        return o, lse

    @staticmethod
    def backward(ctx, do, dlse):
        q, k, v, o, lse = ctx.saved_tensors
        dq, dk, dv = _backward(ctx.call, q, k, v, o, lse, do, dlse)
        return dq, dk, dv, None, None, None, None, None, None, None, None


def naevit_triton(q, k, v, q_pos, *, key_padding_mask=None, cu_seqlens_q=None, cu_seqlens_k=None,
                  max_seqlen_q, max_seqlen_k, softmax_scale, blocks=None):
    """Run the fused kernels on validated inputs (see ``naevit_attention``); returns ``(out, lse)``.

    On a GPU each kernel autotunes its tile (:data:`FWD_TILES`, :data:`DKDV_TILES`,
    :data:`DQ_TILES`) per head dim, GQA group, layout and power-of-two length bucket; the interpreter
    runs :data:`INTERPRET_TILE`. ``blocks=(BLOCK_M, BLOCK_N, num_warps[, num_stages])`` fixes one
    tile for all three kernels instead (tests use small tiles to exercise tile boundaries).
    """
    return NaevitAttentionFunction.apply(q, k, v, q_pos, key_padding_mask, cu_seqlens_q, cu_seqlens_k,
                                         int(max_seqlen_q), int(max_seqlen_k), float(softmax_scale), blocks)
