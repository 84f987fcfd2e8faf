"""Bad input for the kernels (``naevit_attention``, ``nudft``/``inudft``, their modules and HF hooks).

Each probe makes one call with exactly one wrong value; see ``tests/probes.py`` for the verdicts.
Small CPU tensors only: the torch backend validates exactly as the Triton path does.
"""

from __future__ import annotations

import pytest
import torch

from icml26.kernels import inudft, naevit_attention, naevit_reference, nudft
from icml26.kernels.naevit_hf import naevit_attention_forward, naevit_mask, register_naevit_attention
from icml26.kernels.nudft_layers import NUDFT, InverseNUDFT
from probes import Probe, check, ids

B, H, T, D = 1, 2, 4, 8


def _qkv(**change):
    g = torch.Generator().manual_seed(0)
    args = {"q": torch.randn(B, H, T, D, generator=g), "k": torch.randn(B, H, T, D, generator=g),
            "v": torch.randn(B, H, T, D, generator=g), "q_pos": torch.arange(T).expand(B, T).contiguous()}
    args.update(change)
    return args


def attn(backend="torch", **change):
    args = _qkv(**{k: v for k, v in change.items() if k in ("q", "k", "v", "q_pos")})
    kwargs = {k: v for k, v in change.items() if k not in ("q", "k", "v", "q_pos")}
    return lambda: naevit_attention(args["q"], args["k"], args["v"], args["q_pos"], backend=backend, **kwargs)


def _series(**change):
    args = {"x": torch.randn(2, 3, 5), "t": torch.rand(2, 1, 5), "omega": torch.linspace(0.5, 4, 4),
            "mask": torch.ones(2, 3, 5, dtype=torch.bool)}
    args.update(change)
    return args


def dft(**change):
    args = _series(**{k: v for k, v in change.items() if k in ("x", "t", "omega", "mask")})
    kwargs = {k: v for k, v in change.items() if k not in ("x", "t", "omega", "mask")}
    return lambda: nudft(args["x"], args["t"], args["omega"], args["mask"], backend=kwargs.pop("backend", "torch"),
                         **kwargs)


def idft(**change):
    args = {"a": torch.randn(2, 3, 4), "b": torch.randn(2, 3, 4), "omega": torch.linspace(0.5, 4, 4),
            "tau": torch.rand(2, 1, 6)}
    args.update({k: v for k, v in change.items() if k in args})
    kwargs = {k: v for k, v in change.items() if k not in args}
    return lambda: inudft(args["a"], args["b"], args["omega"], args["tau"], backend=kwargs.pop("backend", "torch"),
                          **kwargs)


class _Attn(torch.nn.Module):
    is_causal = True


def hf_forward(**change):
    a = _qkv()
    kwargs = {"dropout": 0.0, **change}
    return lambda: naevit_attention_forward(_Attn(), a["q"], a["k"], a["v"], None, **kwargs)


PROBES = [
    # naevit_attention: shapes, dtypes, devices, masks, options
    Probe("naevit-backend-unknown", attn(backend="cuda"), "backend"),
    Probe("naevit-q-not-tensor", attn(q=[[0.0]]), "q"),
    Probe("naevit-q-int-dtype", attn(q=torch.ones(B, H, T, D, dtype=torch.int64)), "q.dtype"),
    Probe("naevit-v-dtype-mismatch", attn(v=torch.randn(B, H, T, D, dtype=torch.float16)), "v.dtype"),
    Probe("naevit-k-rank-3", attn(k=torch.randn(H, T, D)), "k"),
    Probe("naevit-head-dim-mismatch", attn(k=torch.randn(B, H, T, D + 1)), "k"),
    Probe("naevit-heads-not-multiple", attn(k=torch.randn(B, 3, T, D), v=torch.randn(B, 3, T, D)), "k"),
    Probe("naevit-q_pos-float", attn(q_pos=torch.zeros(B, T)), "q_pos"),
    Probe("naevit-q_pos-wrong-shape", attn(q_pos=torch.arange(T + 1).expand(B, T + 1)), "q_pos"),
    Probe("naevit-q_pos-beyond-keys", attn(q_pos=torch.full((B, T), T)), "q_pos"),
    Probe("naevit-key_padding_mask-float", attn(key_padding_mask=torch.ones(B, T)), "key_padding_mask"),
    Probe("naevit-key_padding_mask-wrong-length", attn(key_padding_mask=torch.ones(B, T + 2, dtype=torch.bool)),
          "key_padding_mask"),
    Probe("naevit-softmax_scale-zero", attn(softmax_scale=0.0), "softmax_scale"),
    Probe("naevit-softmax_scale-nan", attn(softmax_scale=float("nan")), "softmax_scale"),
    Probe("naevit-softmax_scale-str", attn(softmax_scale="0.1"), "softmax_scale"),
    Probe("naevit-cu_seqlens-not-increasing",
          lambda: naevit_attention(torch.randn(4, H, D), torch.randn(4, H, D), torch.randn(4, H, D),
                                   torch.tensor([0, 1, 0, 1]), cu_seqlens_q=torch.tensor([0, 3, 2], dtype=torch.int32),
                                   cu_seqlens_k=torch.tensor([0, 2, 4], dtype=torch.int32), backend="torch"),
          "cu_seqlens_q"),
    Probe("naevit-max_seqlen_q-too-small",
          lambda: naevit_attention(torch.randn(4, H, D), torch.randn(4, H, D), torch.randn(4, H, D),
                                   torch.tensor([0, 1, 0, 1]), cu_seqlens_q=torch.tensor([0, 2, 4], dtype=torch.int32),
                                   cu_seqlens_k=torch.tensor([0, 2, 4], dtype=torch.int32), max_seqlen_q=1,
                                   backend="torch"),
          "max_seqlen_q"),
    Probe("naevit-sdpa_split-with-padding-mask",
          attn(backend="sdpa_split", key_padding_mask=torch.ones(B, T, dtype=torch.bool)), "key_padding_mask"),
    Probe("naevit_reference-q_pos-float",
          lambda: naevit_reference(*_qkv(q_pos=torch.zeros(B, T)).values()), "q_pos"),
    # nudft / inudft
    Probe("nudft-x-not-tensor", dft(x=[[1.0, 2.0]]), "x"),
    Probe("nudft-x-complex", dft(x=torch.randn(2, 3, 5, dtype=torch.complex64)), "x"),
    Probe("nudft-t-length-mismatch", dft(t=torch.rand(2, 1, 4)), "t"),
    Probe("nudft-omega-empty", dft(omega=torch.zeros(0)), "omega"),
    Probe("nudft-omega-nan", dft(omega=torch.tensor([1.0, float("nan")])), "omega"),
    Probe("nudft-mask-float", dft(mask=torch.ones(2, 3, 5)), "mask"),
    Probe("nudft-mask-not-broadcastable", dft(mask=torch.ones(4, 3, 5, dtype=torch.bool)), "mask"),
    Probe("nudft-t-nan-at-observed", dft(t=torch.full((2, 1, 5), float("nan"))), "t"),
    Probe("nudft-norm-unknown", dft(norm="ortho"), "norm"),
    Probe("nudft-backend-unknown", dft(backend="numpy"), "backend"),
    Probe("nudft-chunk_size-zero", dft(chunk_size=0), "chunk_size"),
    Probe("nudft-phase-beyond-float32", dft(omega=torch.tensor([3e6]), t=torch.ones(2, 1, 5)), "t"),
    Probe("inudft-b-shape-mismatch", idft(b=torch.randn(2, 3, 5)), "b"),
    Probe("inudft-tau-int", idft(tau=torch.ones(2, 1, 6, dtype=torch.int64)), "tau"),
    Probe("inudft-coef-wrong-shape", idft(coef=torch.ones(7)), "coef"),
    # modules
    Probe("NUDFT-num_frequencies-zero", lambda: NUDFT(0), "num_frequencies"),
    Probe("NUDFT-init-unknown", lambda: NUDFT(4, init="fourier"), "init"),
    Probe("NUDFT-per_channel-without-num_channels", lambda: NUDFT(4, per_channel=True), "num_channels"),
    Probe("NUDFT-max_cycles-below-frequencies", lambda: NUDFT(8, max_cycles=4.0), "max_cycles"),
    Probe("NUDFT-forward-t-wrong-length", lambda: NUDFT(4, backend="torch")(torch.randn(2, 3, 5), torch.rand(2, 1, 6)),
          "t"),
    Probe("InverseNUDFT-coef-nan", lambda: InverseNUDFT(4, coef=float("nan")), "coef"),
    Probe("InverseNUDFT-num_frequencies-negative", lambda: InverseNUDFT(-1), "num_frequencies"),
    # HF integration
    Probe("naevit_attention_forward-dropout", hf_forward(dropout=0.1), "dropout"),
    Probe("naevit_attention_forward-backend-unknown", hf_forward(naevit_backend="flash"), "naevit_backend"),
    Probe("naevit_attention_forward-q_pos-wrong-length", hf_forward(q_pos=torch.arange(T + 3)), "q_pos"),
    Probe("register_naevit_attention-name-with-slash", lambda: register_naevit_attention("kernels-community/naevit"),
          "name"),
    Probe("register_naevit_attention-backend-unknown", lambda: register_naevit_attention("naevit_probe", "cuda"),
          "backend"),
    Probe("naevit_mask-batch_size-zero", lambda: naevit_mask(0, T, T), "batch_size"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
