"""NAEViT attention as a transformers attention implementation (``attn_implementation="naevit"``).

NAEViT is the attention rule of SAISA (arXiv 2502.02458): text queries only, each seeing the keys
up to ``q_pos`` (see :mod:`icml26.kernels.naevit`). Reconstruction: routing it through
transformers' ``AttentionInterface`` with a key-padding mask function is our design.

Nothing here runs at import time: :func:`register_naevit_attention` adds the attention function
to transformers' ``AttentionInterface`` and a matching mask function to its
``AttentionMaskInterface`` when the user (or a model) calls it, as Liger's
``apply_liger_kernel_to_*`` do. Importing :mod:`icml26.kernels` never imports transformers.

Usage::

    from icml26.kernels.naevit_hf import register_naevit_attention

    register_naevit_attention()  # -> "naevit"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="naevit")
    out = model(input_ids, attention_mask=mask, q_pos=q_pos)  # q_pos [B, T] or [T]; omit for causal LM

Why a mask function too: transformers skips building any mask for an implementation it has no
mask function for, so a left-padded batch would lose its padding. Ours hands the attention
function a 2D boolean key mask ``[B, L]`` (True = real key) instead of a ``Tq x Tk`` tensor, where
``L`` is the number of keys filled so far; it is ``None`` when every key is real. ``L`` is shorter
than the key tensor only with a static cache, whose unfilled slots are then masked out.
"""

from __future__ import annotations

from icml26.errors import describe, described
from icml26.validation import check_int

from ._backend import fail
from .naevit import BACKENDS

DEFAULT_BACKEND = "auto"
"""Backend used when neither :func:`register_naevit_attention` nor the call's ``naevit_backend`` picks one."""

_UNSUPPORTED_KWARGS = {
    "softcap": "logit soft-capping",
    "sliding_window": "sliding-window attention",
    "s_aux": "attention sinks",
    "position_bias": "an additive position bias",
}


# --------------------------------------------------------------------------------------------
# Mask function (AttentionMaskInterface)
# --------------------------------------------------------------------------------------------
_MASK = "naevit_mask"
_FORWARD = "naevit_attention_forward"


def naevit_mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
                attention_mask=None, device="cpu", **kwargs):
    """Key padding mask for :func:`naevit_attention_forward`: bool ``[B, L]`` (True = real key) or None.

    Follows ``masking_utils.sdpa_mask``'s signature. Only the plain causal pattern is accepted:
    sliding windows, bidirectional layers, packed sequences and overlaid mask functions (image
    blocks) cannot be told to the kernel, whose visibility rule is ``q_pos`` alone, so they raise
    rather than being silently dropped.
    """
    import torch
    from transformers.masking_utils import causal_mask_function

    if mask_function is not None and mask_function is not causal_mask_function:
        name = getattr(mask_function, "__qualname__", repr(mask_function))
        fail(_MASK, "mask pattern", "the plain causal mask (full-attention decoder layers; pass q_pos for "
             "NAEViT's rule). Sliding windows, bidirectional layers, packed sequences and overlaid "
             "mask functions are not supported", described(f"another pattern ({name})"))
    # only batch_size: transformers passes the offsets (and, compiled, the lengths) as 0-d tensors
    check_int(_MASK, "batch_size", batch_size, low=1)
    if int(kv_offset) != 0:
        fail(_MASK, "kv_offset", "0 (a full-attention cache layer; sliding caches are not supported)", kv_offset)
    filled = int(q_offset) + int(q_length)  # keys the layer holds after this step's cache update
    if filled > kv_length:
        fail(_MASK, "cache sizes", f"at most kv_length = {kv_length} keys", described(f"{filled} keys"))
    if attention_mask is None:
        if filled == kv_length:
            return None
        return torch.ones(batch_size, filled, dtype=torch.bool, device=device)
    if attention_mask.dim() != 2:
        fail(_MASK, "attention_mask", "a 2D padding mask [B, keys]", describe(attention_mask))
    mask = attention_mask.to(device=device, dtype=torch.bool)
    if mask.shape[-1] < filled:
        fail(_MASK, "attention_mask", f"a column for each of the {filled} keys the layer holds (past and "
             "current tokens)", describe(mask))
    mask = mask[:, :filled]  # as in sdpa_mask, column j is key j; later columns are future cache slots
    # Reads the mask (a sync on CUDA), once per model forward, not per layer, as sdpa_mask does:
    # dropping an all-True mask keeps the mask-free paths (sdpa_split, no key test in Triton) open.
    if filled == kv_length and bool(mask.all()):
        return None
    return mask


# --------------------------------------------------------------------------------------------
# Attention function (AttentionInterface)
# --------------------------------------------------------------------------------------------
def _key_padding_mask(attention_mask, batch: int, n_keys: int):
    """``(key_padding_mask [B, Tk] or None, filled L)`` from what the mask function produced."""
    import torch

    if attention_mask is None:
        return None, n_keys
    if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
        fail(_FORWARD, "attention_mask", "None or a 2D padding mask [B, keys] (NAEViT takes q_pos instead of "
             "a 4D mask; pass the 2D attention_mask and q_pos to the model)", describe(attention_mask))
    if attention_mask.dtype.is_floating_point:
        fail(_FORWARD, "attention_mask.dtype", "bool or integer 0/1 (True = real token)",
             attention_mask.dtype)
    mask = attention_mask.to(torch.bool)
    if mask.shape[0] != batch or mask.shape[1] > n_keys:
        fail(_FORWARD, "attention_mask", f"shape [B, <= Tk] with B = {batch}, Tk = {n_keys}", describe(mask))
    filled = mask.shape[1]
    if filled < n_keys:  # static cache: slots past the filled keys hold no token yet
        mask = torch.nn.functional.pad(mask, (0, n_keys - filled), value=False)
    return mask, filled


def _q_pos(given, key_padding_mask, filled: int, batch: int, n_queries: int, device):
    import torch

    if given is not None:
        q_pos = torch.as_tensor(given, device=device)
        if q_pos.dim() == 1:
            q_pos = q_pos.expand(batch, -1)
        if tuple(q_pos.shape) != (batch, n_queries):
            fail(_FORWARD, "q_pos", f"shape [B, Tq] = ({batch}, {n_queries}) or [Tq] (the key index each "
                 "query sees up to; with a KV cache, an index into the cache's keys)", describe(q_pos))
        return q_pos
    # An ordinary causal LM: the queries are the last Tq of the `filled` keys, bottom-right aligned.
    q_pos = torch.arange(filled - n_queries, filled, device=device).expand(batch, -1)
    if key_padding_mask is not None:  # a query whose own token is padding sees nothing: a 0 row
        own = key_padding_mask[:, filled - n_queries:filled]
        q_pos = torch.where(own, q_pos, -1)
    return q_pos


def naevit_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                             is_causal=None, *, backend=None, **kwargs):
    """transformers attention function running :func:`icml26.kernels.naevit_attention`.

    Signature and layout as ``transformers.integrations.sdpa_attention.sdpa_attention_forward``:
    ``query [B, Hq, Tq, D]``, ``key``/``value [B, Hkv, Tk, D]`` (after the cache update; not
    repeated, the op does GQA), returns ``(out [B, Tq, Hq, D], None)``.

    ``kwargs`` are the model's forward kwargs, passed down by transformers' decoder layers:

    - ``q_pos`` (int ``[B, Tq]`` or ``[Tq]``): query ``i`` sees keys ``j <= q_pos[..., i]``.
      It indexes the key axis *as the attention layer sees it*: positions in the input sequence
      without a cache, positions in the cache (past keys first) with one. Negative marks a
      query that sees nothing (output 0). Without ``q_pos`` the layer is an ordinary causal LM:
      query ``i`` of ``Tq`` sees keys up to ``L - Tq + i`` where ``L`` is the number of keys
      filled (``Tk`` except with a static cache), i.e. bottom-right alignment, right for
      prefill and for decoding; queries whose own token is padding give 0.
    - ``naevit_backend``: ``"auto" | "triton" | "torch" | "sdpa_split"``; default: the one
      given to :func:`register_naevit_attention`, else :data:`DEFAULT_BACKEND`.

    ``attention_mask`` is what :func:`naevit_mask` built (2D bool key mask or None); left-padded
    batches as ``generate`` makes them work. ``dropout`` must be 0 (the kernel has none).
    """
    from .naevit import naevit_attention

    if dropout:
        fail(_FORWARD, "dropout", "0.0 (NAEViT attention has no attention dropout; set "
             "config.attention_dropout = 0.0 or call model.eval())", dropout)
    for name, feature in _UNSUPPORTED_KWARGS.items():
        if kwargs.get(name) is not None:
            fail(_FORWARD, name, f"None ({feature} is not supported by NAEViT attention)",
                 described(type(kwargs[name]).__name__))
    if is_causal is None:
        is_causal = getattr(module, "is_causal", True)
    if not is_causal and kwargs.get("q_pos") is None:
        fail(_FORWARD, "is_causal", "a causal self-attention layer, or an explicit q_pos",
             described("a non-causal layer"))
    chosen = kwargs.get("naevit_backend") or backend or DEFAULT_BACKEND
    if chosen not in BACKENDS:
        fail(_FORWARD, "naevit_backend", f"one of {BACKENDS}", chosen)

    batch, _, n_queries, _ = query.shape
    key_padding_mask, filled = _key_padding_mask(attention_mask, batch, key.shape[2])
    q_pos = _q_pos(kwargs.get("q_pos"), key_padding_mask, filled, batch, n_queries, query.device)
    out = naevit_attention(query, key, value, q_pos, key_padding_mask=key_padding_mask, softmax_scale=scaling,
                           backend=chosen)
    return out.transpose(1, 2).contiguous(), None


# --------------------------------------------------------------------------------------------
# Registration
# --------------------------------------------------------------------------------------------
def register_naevit_attention(name: str = "naevit", backend: str | None = None) -> str:
    """Register NAEViT attention with transformers under ``name``; returns ``name``.

    Afterwards ``attn_implementation=name`` (in ``from_pretrained``, ``from_config`` or
    ``model.set_attn_implementation``) runs Llama-style models (Llama, Qwen2, Qwen3, Mistral, ...)
    through :func:`naevit_attention_forward`. ``backend`` fixes the kernel backend for this name
    (a call's ``naevit_backend`` kwarg still wins); None defers to :data:`DEFAULT_BACKEND`.
    Idempotent: calling again re-registers the same functions.
    """
    from functools import partial

    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    if not isinstance(name, str) or not name or "/" in name:
        fail("register_naevit_attention", "name",
             "a non-empty attention implementation name without '/' (that marks hub kernels)", name)
    if backend is not None and backend not in BACKENDS:
        fail("register_naevit_attention", "backend", f"None or one of {BACKENDS}", backend)
    forward = naevit_attention_forward if backend is None else partial(naevit_attention_forward, backend=backend)
    AttentionInterface.register(name, forward)
    AttentionMaskInterface.register(name, naevit_mask)
    return name


__all__ = ["DEFAULT_BACKEND", "naevit_attention_forward", "naevit_mask", "register_naevit_attention"]
