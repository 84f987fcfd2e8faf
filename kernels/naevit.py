"""NAEViT attention: text queries attend to every earlier key, visual tokens issue no queries.

SAISA (arXiv 2502.02458) aligns the image with the LLM in the attention's input space and drops
attention *from* visual tokens ("No AttEntion from Visual Tokens", NAEViT): only text rows are
queries; keys and values are all rows, text and visual, in sequence order; a query may see key
``j`` of its own sequence iff ``j <= q_pos`` (its position among the keys). A text token after the
image thus sees the whole image, a text token before it sees none of it, and visual keys still
receive gradients. The rule is the one of the released code (``icip-cas/SAISA``,
``llava/model/language_model/llava_llama.py``: visual tokens issue no queries, the mask is
``pos_k <= pos_q``), which builds it as a dense boolean mask for SDPA.

Four backends compute the same function:

- ``"torch"``: the readable reference below (:func:`naevit_reference`): one matmul with the
  explicit mask built from ``q_pos``; any dtype including float64 (for gradcheck), O(Tq x Tk) memory.
- ``"sdpa_split"``: the one-image layout (a causal text prefix, then text that sees every key)
  is exactly two stock SDPA calls, prefix-causal plus bottom-right-causal, which PyTorch routes to
  its flash / memory-efficient kernels on any device; no mask tensor is built.
- ``"triton"``: the fused FlashAttention-2-style kernel in :mod:`icml26.kernels.naevit_triton`
  (CUDA, or Triton's interpreter on CPU tensors when ``TRITON_INTERPRET=1``); any layout, never
  materialises a Tq x Tk tensor.
- ``"auto"``: Triton on CUDA; elsewhere ``sdpa_split`` when the inputs have the one-image layout
  (and no key padding or lse is asked for), otherwise the reference.

Reconstruction: the packed (varlen) interface, ``q_pos`` as the visibility bound per query and
the two-SDPA decomposition are our design; the paper's code supports one image per batch of one.

Written by hand because no maintained library offers this mask without a dense mask tensor:
FlashAttention supports only (bottom-right) causal masks, SDPA with an explicit mask falls off the
flash path, and FlexAttention recompiles per shape.

Validation follows :func:`icml26.kernels.values_checked`: shapes, dtypes and devices are always
checked; the checks that read ``q_pos`` and ``cu_seqlens`` values (positions within the keys,
monotone offsets) run on CPU tensors, and on CUDA only with ``ICML26_CHECK_VALUES=1``.
"""

from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from functools import lru_cache
from numbers import Real

from icml26.errors import describe, described
from icml26.validation import check_finite

from ._backend import fail, fail_type, resolve_backend, values_checked

OP = "naevit_attention"
BACKENDS = ("auto", "triton", "torch", "sdpa_split")
_FLOAT_DTYPES = ("torch.float16", "torch.bfloat16", "torch.float32", "torch.float64")


class _PositionsMemo:
    """What the last ``q_pos`` tensor's values told: its maximum and, per key count, its SDPA split.

    A decoder calls the op once per layer with the same ``q_pos`` tensor; reading its values costs
    a host loop over the rows (and a device sync off CPU) that need not be paid again. An entry
    holds the tensor weakly and is trusted only while it is the same live object at the same
    version counter (an in-place change bumps it); one entry per thread. Inference tensors
    (``torch.inference_mode``) have no version counter and are read every time.
    """

    def __init__(self):
        self._local = threading.local()

    def _entry(self, q_pos):
        if q_pos.is_inference():  # inference tensors keep no version counter: nothing can be trusted
            return {}
        entry = getattr(self._local, "entry", None)
        if entry is not None and entry["ref"]() is q_pos and entry["version"] == q_pos._version:
            return entry
        entry = {"ref": weakref.ref(q_pos), "version": q_pos._version}
        self._local.entry = entry
        return entry

    def maximum(self, q_pos) -> int:
        entry = self._entry(q_pos)
        if "max" not in entry:
            entry["max"] = int(q_pos.max())
        return entry["max"]

    def rows(self, q_pos) -> list:
        entry = self._entry(q_pos)
        if "rows" not in entry:
            entry["rows"] = q_pos.tolist()
        return entry["rows"]

    def split(self, q_pos, key, compute):
        """``compute()`` once per (tensor, version, ``key``)."""
        cached = self._entry(q_pos).setdefault("splits", {})
        if key not in cached:
            cached[key] = compute()
        return cached[key]


_MEMO = _PositionsMemo()


@dataclass(frozen=True)
class _Layout:
    """Sizes of a validated call; ``packed`` for the varlen form, with its offsets when they were read."""

    packed: bool
    batch: int
    heads_q: int
    heads_kv: int
    head_dim: int
    max_seqlen_q: int
    max_seqlen_k: int
    cu_q: list[int] | None = None
    cu_k: list[int] | None = None


def _validate(q, k, v, q_pos, key_padding_mask, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
              softmax_scale, backend) -> _Layout:
    import torch

    if backend not in BACKENDS:
        fail(OP, "backend", f"one of {BACKENDS}", backend)
    for name, t in (("q", q), ("k", k), ("v", v), ("q_pos", q_pos)):
        if not isinstance(t, torch.Tensor):
            fail_type(OP, name, "a torch.Tensor", t)
    if str(q.dtype) not in _FLOAT_DTYPES:
        fail(OP, "q.dtype", "float16, bfloat16, float32 (or float64 with backend='torch')", q.dtype)
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            fail(OP, f"{name}.dtype", f"the dtype of q ({q.dtype})", t.dtype)
    extras = [("q_pos", q_pos), ("key_padding_mask", key_padding_mask), ("cu_seqlens_q", cu_seqlens_q),
              ("cu_seqlens_k", cu_seqlens_k)]
    for name, t in [("k", k), ("v", v)] + extras:
        if t is not None and t.device != q.device:
            fail(OP, f"{name}.device", f"the device of q ({q.device})", t.device)
    if q_pos.dtype.is_floating_point or q_pos.dtype == torch.bool or q_pos.is_complex():
        fail(OP, "q_pos.dtype", "an integer dtype", q_pos.dtype)
    if softmax_scale is not None:
        if isinstance(softmax_scale, bool) or not isinstance(softmax_scale, Real):
            fail_type(OP, "softmax_scale", "a positive finite number or None", softmax_scale)
        check_finite(OP, "softmax_scale", softmax_scale, positive=True)

    packed = cu_seqlens_q is not None or cu_seqlens_k is not None
    if packed:
        layout = _validate_packed(q, k, v, q_pos, key_padding_mask, cu_seqlens_q, cu_seqlens_k,
                                  max_seqlen_q, max_seqlen_k)
    else:
        layout = _validate_padded(q, k, v, q_pos, key_padding_mask)
    for name, given, actual in (("max_seqlen_q", max_seqlen_q, layout.max_seqlen_q),
                                ("max_seqlen_k", max_seqlen_k, layout.max_seqlen_k)):
        if given is not None and (isinstance(given, bool) or not isinstance(given, int)):
            fail_type(OP, name, "an int or None", given)
        if given is not None and given < actual:
            fail(OP, name, f"an int >= the longest sequence ({actual})", given)
    if q.dtype == torch.float64 and backend not in ("torch", "auto"):
        fail(OP, "q.dtype", f"float16, bfloat16 or float32 for backend={backend!r} (float64 needs 'torch')", q.dtype)
    return layout


def _check_heads(hq: int, hkv: int, d_q: int, d_k: int) -> None:
    if hkv == 0 or hq % hkv:
        fail(OP, "number of heads", f"q heads ({hq}) to be a multiple of k/v heads ({hkv}) (GQA/MQA)",
             described(f"{hq} and {hkv}"))
    if d_q != d_k:
        fail(OP, "head dim", f"q and k to share the head dim ({d_q})", d_k)


def _check_ranks(q, k, v, rank: int, q_form: str, k_form: str) -> None:
    if q.dim() != rank:
        fail(OP, "q", q_form, describe(q))
    if k.dim() != rank:
        fail(OP, "k", k_form, describe(k))
    if v.shape != k.shape:
        fail(OP, "v", f"the shape of k {tuple(k.shape)}", describe(v))


def _validate_padded(q, k, v, q_pos, key_padding_mask) -> _Layout:
    import torch

    _check_ranks(q, k, v, 4, "rank 4 [B, Hq, Tq, D] (or rank 3 with cu_seqlens_q/k for the packed form)",
                 "rank 4 [B, Hkv, Tk, D]")
    b, hq, tq, d = q.shape
    if k.shape[0] != b:
        fail(OP, "k", f"batch size {b} (from q)", describe(k))
    _check_heads(hq, k.shape[1], d, k.shape[3])
    tk = k.shape[2]
    if tuple(q_pos.shape) != (b, tq):
        fail(OP, "q_pos", f"shape [B, Tq] = ({b}, {tq})", describe(q_pos))
    if key_padding_mask is not None:
        if not isinstance(key_padding_mask, torch.Tensor):
            fail_type(OP, "key_padding_mask", "a bool tensor [B, Tk] or None", key_padding_mask)
        if key_padding_mask.dtype != torch.bool:
            fail(OP, "key_padding_mask.dtype", "torch.bool (True = real key)", key_padding_mask.dtype)
        if tuple(key_padding_mask.shape) != (b, tk):
            fail(OP, "key_padding_mask", f"shape [B, Tk] = ({b}, {tk})", describe(key_padding_mask))
    if q_pos.numel() and values_checked(q_pos):
        top = _MEMO.maximum(q_pos)
        if top >= tk:
            fail(OP, "q_pos", f"values < Tk = {tk} (the key index each query sees up to)", described(f"max {top}"))
    return _Layout(False, b, hq, k.shape[1], d, tq, tk)


def _validate_cu(name: str, cu, total: int) -> list[int] | None:
    """Check the offsets' shape and dtype; read and check their values when the rule allows."""
    import torch

    if cu is None:
        fail(OP, name, "a tensor (the packed form needs both cu_seqlens_q and cu_seqlens_k)", None)
    if not isinstance(cu, torch.Tensor):
        fail_type(OP, name, "an int32 tensor [B+1]", cu)
    if cu.dim() != 1 or cu.numel() < 2 or cu.dtype not in (torch.int32, torch.int64):
        fail(OP, name, "an int32 tensor [B+1]", describe(cu))
    if not values_checked(cu):
        return None
    values = cu.tolist()
    if values[0] != 0 or values[-1] != total:
        fail(OP, name, f"to start at 0 and end at the packed length {total}",
             described(f"{values[0]} ... {values[-1]}"))
    if any(b < a for a, b in zip(values, values[1:])):
        fail(OP, name, "non-decreasing offsets", values)
    return values


def _longest(cu, offsets: list[int] | None, given: int | None) -> int:
    """The longest sequence of a pack: from the offsets read, else ``given``, else read (one sync)."""
    if offsets is not None:
        return max(b - a for a, b in zip(offsets, offsets[1:]))
    if given is not None:
        return given
    return int((cu[1:] - cu[:-1]).max())


def _validate_packed(q, k, v, q_pos, key_padding_mask, cu_q, cu_k, max_seqlen_q, max_seqlen_k) -> _Layout:
    if key_padding_mask is not None:
        fail(OP, "key_padding_mask", "None in the packed form (leave padding keys out of the pack)",
             describe(key_padding_mask))
    _check_ranks(q, k, v, 3, "rank 3 [total_q, Hq, D] in the packed form",
                 "rank 3 [total_k, Hkv, D] in the packed form")
    _check_heads(q.shape[1], k.shape[1], q.shape[2], k.shape[2])
    offsets_q = _validate_cu("cu_seqlens_q", cu_q, q.shape[0])
    offsets_k = _validate_cu("cu_seqlens_k", cu_k, k.shape[0])
    if cu_q.numel() != cu_k.numel():
        fail(OP, "cu_seqlens_k", f"{cu_q.numel()} offsets like cu_seqlens_q", cu_k.numel())
    if tuple(q_pos.shape) != (q.shape[0],):
        fail(OP, "q_pos", f"shape [total_q] = ({q.shape[0]},)", describe(q_pos))
    if offsets_q is not None and offsets_k is not None and values_checked(q_pos):
        for i, (start, end) in enumerate(zip(offsets_q, offsets_q[1:])):
            keys = offsets_k[i + 1] - offsets_k[i]
            if end > start:
                top = int(q_pos[start:end].max())
                if top >= keys:
                    fail(OP, "q_pos", f"values < {keys} (the keys of sequence {i})", top)
    return _Layout(True, cu_q.numel() - 1, q.shape[1], k.shape[1], q.shape[2],
                   _longest(cu_q, offsets_q, max_seqlen_q), _longest(cu_k, offsets_k, max_seqlen_k),
                   offsets_q, offsets_k)


# --------------------------------------------------------------------------------------------
# Reference
# --------------------------------------------------------------------------------------------
def naevit_reference(q, k, v, q_pos, key_padding_mask=None, softmax_scale=None):
    """Padded-form NAEViT attention written plainly; returns ``(out, lse)``.

    ``out[b, h, i] = softmax_j(q[b,h,i] . k[b,h//g,j] * scale) v[b,h//g,j]`` over the keys with
    ``j <= q_pos[b, i]`` (and ``key_padding_mask[b, j]``); rows that see no key (padding queries,
    ``q_pos < 0``) give 0 and ``lse = -inf``. Scores are computed in at least float32.

    Validates its inputs as :func:`naevit_attention` does (padded form, ``backend="torch"``).
    """
    _validate(q, k, v, q_pos, key_padding_mask, None, None, None, None, softmax_scale, "torch")
    return _reference(q, k, v, q_pos, key_padding_mask, softmax_scale)


def _reference(q, k, v, q_pos, key_padding_mask=None, softmax_scale=None):
    import torch

    b, hq, tq, d = q.shape
    group = hq // k.shape[1]
    scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(d)
    compute = torch.promote_types(q.dtype, torch.float32)
    keys = k.to(compute).repeat_interleave(group, dim=1)
    values = v.to(compute).repeat_interleave(group, dim=1)
    scores = q.to(compute) @ keys.transpose(-1, -2) * scale  # [B, Hq, Tq, Tk]

    key_index = torch.arange(k.shape[2], device=q.device)
    visible = key_index[None, None, :] <= q_pos[:, :, None].to(torch.long)  # [B, Tq, Tk]
    if key_padding_mask is not None:
        visible = visible & key_padding_mask[:, None, :]
    visible = visible[:, None]  # broadcast over heads
    sees_a_key = visible.any(dim=-1, keepdim=True)
    # Rows that see nothing get a harmless all-zero score row and are zeroed afterwards, so no NaN
    # reaches the outputs or the gradients.
    scores = torch.where(visible, scores, float("-inf"))
    scores = torch.where(sees_a_key, scores, 0.0)
    lse = torch.logsumexp(scores, dim=-1, keepdim=True)
    out = torch.exp(scores - lse) @ values
    out = torch.where(sees_a_key, out, 0.0).to(q.dtype)
    lse = torch.where(sees_a_key, lse, float("-inf")).squeeze(-1).float()
    return out, lse


def _packed_reference(q, k, v, q_pos, cu_q, cu_k, softmax_scale):
    """Packed form through the padded reference, one sequence at a time."""
    import torch

    outs, lses = [], []
    for (qs, qe), (ks, ke) in zip(zip(cu_q[:-1], cu_q[1:]), zip(cu_k[:-1], cu_k[1:])):
        o, lse = _reference(q[qs:qe].transpose(0, 1)[None], k[ks:ke].transpose(0, 1)[None],
                                  v[ks:ke].transpose(0, 1)[None], q_pos[qs:qe][None],
                                  softmax_scale=softmax_scale)
        outs.append(o[0].transpose(0, 1))
        lses.append(lse[0].transpose(0, 1))
    return torch.cat(outs), torch.cat(lses)


# --------------------------------------------------------------------------------------------
# Two stock SDPA calls (one-image layout)
# --------------------------------------------------------------------------------------------
def _one_image_split(positions: list[int], n_keys: int) -> int | None:
    """Number of prefix queries P if ``positions`` is ``[0..P-1] + [n_keys-T .. n_keys-1]``, else None."""
    n = len(positions)
    tail = 0
    while tail < n and positions[n - 1 - tail] == n_keys - 1 - tail:
        tail += 1
    prefix = n - tail
    if positions[:prefix] != list(range(prefix)):
        return None
    return prefix


@lru_cache(maxsize=16)
def _lower_right_mask(n_queries: int, n_keys: int, device: str):
    """Bool mask [n_queries, n_keys]: query i sees keys j <= n_keys - n_queries + i (read-only, shared)."""
    import torch

    return torch.ones(n_queries, n_keys, dtype=torch.bool, device=device).tril(n_keys - n_queries)


def _sdpa_split_one(q, k, v, prefix: int, scale: float):
    """[B, H, Tq, D] queries whose first ``prefix`` rows are prefix-causal and the rest bottom-right causal.

    On CUDA the tail goes to SDPA as a ``causal_lower_right`` bias (its memory-efficient kernel
    takes the mask type, nothing is built); elsewhere SDPA would build that mask on every call, so
    the bool mask is built once per shape and kept.
    """
    import torch
    import torch.nn.functional as F
    from torch.nn.attention.bias import causal_lower_right

    gqa = q.shape[1] != k.shape[1]
    parts = []
    if prefix:
        parts.append(F.scaled_dot_product_attention(q[:, :, :prefix], k[:, :, :prefix], v[:, :, :prefix],
                                                    is_causal=True, scale=scale, enable_gqa=gqa))
    tail = q.shape[2] - prefix
    if tail:
        if q.device.type == "cuda":
            bias = causal_lower_right(tail, k.shape[2])
        else:
            bias = _lower_right_mask(tail, k.shape[2], str(q.device))
        parts.append(F.scaled_dot_product_attention(q[:, :, prefix:], k, v, attn_mask=bias, scale=scale,
                                                    enable_gqa=gqa))
    if not parts:  # no queries at all
        return q.new_zeros(q.shape)
    return torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]


def _sdpa_split_plan(q_pos, layout: _Layout, cu_q, cu_k) -> list[int] | None:
    """Per-sequence prefix sizes when every sequence has the one-image layout, else None (memoised)."""
    key = (layout.packed, layout.max_seqlen_k, tuple(cu_q) if cu_q else None, tuple(cu_k) if cu_k else None)
    return _MEMO.split(q_pos, key, lambda: _compute_split_plan(_MEMO.rows(q_pos), layout, cu_q, cu_k))


def _compute_split_plan(rows: list, layout: _Layout, cu_q, cu_k) -> list[int] | None:
    if layout.packed:
        splits = []
        for i in range(layout.batch):
            split = _one_image_split(rows[cu_q[i]:cu_q[i + 1]], cu_k[i + 1] - cu_k[i])
            if split is None:
                return None
            splits.append(split)
        return splits
    splits = [_one_image_split(row, layout.max_seqlen_k) for row in rows]
    return None if any(s is None for s in splits) else splits


def _sdpa_split(q, k, v, splits: list[int], layout: _Layout, cu_q, cu_k, scale: float):
    import torch

    if not layout.packed:
        if len(set(splits)) == 1:  # the whole batch shares the layout: two batched calls
            return _sdpa_split_one(q, k, v, splits[0], scale)
        return torch.cat([_sdpa_split_one(q[i:i + 1], k[i:i + 1], v[i:i + 1], s, scale)
                          for i, s in enumerate(splits)])
    outs = []
    for i, split in enumerate(splits):
        qs, qe, ks, ke = cu_q[i], cu_q[i + 1], cu_k[i], cu_k[i + 1]
        if qe == qs:
            continue
        o = _sdpa_split_one(q[qs:qe].transpose(0, 1)[None], k[ks:ke].transpose(0, 1)[None],
                            v[ks:ke].transpose(0, 1)[None], split, scale)
        outs.append(o[0].transpose(0, 1))
    return torch.cat(outs) if outs else q.new_zeros(q.shape)


# --------------------------------------------------------------------------------------------
# Public op
# --------------------------------------------------------------------------------------------
def naevit_attention(q, k, v, q_pos, *, key_padding_mask=None, cu_seqlens_q=None, cu_seqlens_k=None,
                     max_seqlen_q=None, max_seqlen_k=None, softmax_scale=None, return_lse=False,
                     backend="auto"):
    """NAEViT attention: each query sees the keys of its own sequence at positions ``<= q_pos``.

    Padded form: ``q [B, Hq, Tq, D]``, ``k, v [B, Hkv, Tk, D]``, ``q_pos [B, Tq]`` (int; the key
    index each query may see up to, inclusive; negative marks a padding query, whose output is 0
    and which gets no gradient), optional ``key_padding_mask [B, Tk]`` (True = real key, for
    left-padded batches).

    Packed (varlen) form: ``q [total_q, Hq, D]``, ``k, v [total_k, Hkv, D]``, ``cu_seqlens_q``,
    ``cu_seqlens_k`` (int32 ``[B+1]`` offsets), ``q_pos [total_q]`` indexing keys within the
    query's own sequence. On CUDA pass ``max_seqlen_q`` and ``max_seqlen_k`` too (as
    FlashAttention's varlen API asks): otherwise they are read from the offsets, one device sync.

    ``Hq`` must be a multiple of ``Hkv`` (GQA/MQA). fp16/bf16/fp32 inputs accumulate in fp32 and
    return the input dtype. ``softmax_scale`` defaults to ``1/sqrt(D)``. With ``return_lse=True``
    returns ``(out, lse)`` where ``lse`` (fp32, q's shape without the head dim) is the log-sum-exp
    of each row's scaled scores (``-inf`` for a row that sees no key). ``backend``: see the module
    docstring. Differentiable in q, k and v on every backend.

    Raises :class:`icml26.InputError` for bad shapes, dtypes, devices, a non-finite or
    non-positive ``softmax_scale``, and (on CPU, or with ``ICML26_CHECK_VALUES=1``) ``q_pos``
    beyond the keys or offsets that do not describe the pack; ``TypeError`` for arguments of the
    wrong type.
    """
    layout = _validate(q, k, v, q_pos, key_padding_mask, cu_seqlens_q, cu_seqlens_k, max_seqlen_q,
                       max_seqlen_k, softmax_scale, backend)
    scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(layout.head_dim)
    chosen = resolve_backend(OP, backend, q.device, q.dtype, choices=BACKENDS)

    if chosen == "triton":
        from .naevit_triton import naevit_triton

        out, lse = naevit_triton(q, k, v, q_pos, key_padding_mask=key_padding_mask,
                                 cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                 max_seqlen_q=max_seqlen_q or layout.max_seqlen_q,
                                 max_seqlen_k=max_seqlen_k or layout.max_seqlen_k, softmax_scale=scale)
        return (out, lse) if return_lse else out

    # The PyTorch paths loop over sequences in Python: they need the offsets as numbers.
    cu_q = layout.cu_q if layout.cu_q is not None or not layout.packed else cu_seqlens_q.tolist()
    cu_k = layout.cu_k if layout.cu_k is not None or not layout.packed else cu_seqlens_k.tolist()
    if chosen == "sdpa_split":
        if key_padding_mask is not None:
            fail(OP, "key_padding_mask", "None with backend='sdpa_split' (use 'torch' or 'triton')",
                 describe(key_padding_mask))
        if return_lse:
            fail(OP, "return_lse", "False with backend='sdpa_split' (SDPA returns no lse; use 'torch' or 'triton')",
                 return_lse)
    splits = None
    if chosen == "sdpa_split" or (backend == "auto" and key_padding_mask is None and not return_lse):
        splits = _sdpa_split_plan(q_pos, layout, cu_q, cu_k)  # reads q_pos: the layout decides the path
        if splits is None and chosen == "sdpa_split":
            fail(OP, "q_pos", "the one-image layout in every sequence with backend='sdpa_split' (q_pos = 0..P-1 for "
                 "the prefix, then consecutive positions ending at the last key)", described("another layout"))
    if splits:
        return _sdpa_split(q, k, v, splits, layout, cu_q, cu_k, scale)
    if layout.packed:
        out, lse = _packed_reference(q, k, v, q_pos, cu_q, cu_k, scale)
    else:
        out, lse = _reference(q, k, v, q_pos, key_padding_mask, scale)
    return (out, lse) if return_lse else out
