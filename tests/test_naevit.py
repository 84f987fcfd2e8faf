"""NAEViT attention: Triton kernel (interpreter on CPU, compiled with --device cuda) and SDPA split against the reference."""

import itertools

import pytest
import torch
import torch.nn.functional as F

from icml26 import InputError
from icml26.kernels import naevit_attention, naevit_reference

HQ, HKV, D = 4, 2, 32


def make_batch(specs, hq=HQ, hkv=HKV, d=D, dtype=torch.float32, device="cpu", seed=0):
    """Packed inputs for sequences laid out as [prefix P][visual n_v][text T]; queries are the text rows."""
    gen = torch.Generator().manual_seed(seed)
    cu_q, cu_k, q_pos = [0], [0], []
    for prefix, n_visual, n_text in specs:
        n = prefix + n_visual + n_text
        q_pos += list(range(prefix)) + list(range(prefix + n_visual, n))
        cu_q.append(cu_q[-1] + prefix + n_text)
        cu_k.append(cu_k[-1] + n)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen).to(device=device, dtype=dtype).requires_grad_()

    return dict(q=rnd(cu_q[-1], hq, d), k=rnd(cu_k[-1], hkv, d), v=rnd(cu_k[-1], hkv, d),
                q_pos=torch.tensor(q_pos, device=device),
                cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32, device=device),
                cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32, device=device))


def to_padded(batch):
    """The same sequences right-padded: padding queries get q_pos = -1, padding keys a False mask."""
    cu_q, cu_k = batch["cu_seqlens_q"].tolist(), batch["cu_seqlens_k"].tolist()
    n = len(cu_q) - 1
    tq = max(b - a for a, b in zip(cu_q, cu_q[1:]))
    tk = max(b - a for a, b in zip(cu_k, cu_k[1:]))
    q, k = batch["q"], batch["k"]
    out = dict(q=q.new_zeros(n, q.shape[1], tq, q.shape[2]), k=k.new_zeros(n, k.shape[1], tk, k.shape[2]),
               v=k.new_zeros(n, k.shape[1], tk, k.shape[2]),
               q_pos=torch.full((n, tq), -1, dtype=torch.long, device=q.device),
               key_padding_mask=torch.zeros(n, tk, dtype=torch.bool, device=q.device))
    for i in range(n):
        lq, lk = cu_q[i + 1] - cu_q[i], cu_k[i + 1] - cu_k[i]
        with torch.no_grad():
            out["q"][i, :, :lq] = q[cu_q[i]:cu_q[i + 1]].transpose(0, 1)
            out["k"][i, :, :lk] = k[cu_k[i]:cu_k[i + 1]].transpose(0, 1)
            out["v"][i, :, :lk] = batch["v"][cu_k[i]:cu_k[i + 1]].transpose(0, 1)
        out["q_pos"][i, :lq] = batch["q_pos"][cu_q[i]:cu_q[i + 1]]
        out["key_padding_mask"][i, :lk] = True
    for name in ("q", "k", "v"):
        out[name].requires_grad_()
    return out


def run(batch, backend, grad_out=None, **kwargs):
    """Output, lse and the gradients of <out, grad_out> w.r.t. q, k, v."""
    out, lse = naevit_attention(**batch, backend=backend, return_lse=True, **kwargs)
    grad_out = torch.randn_like(out, generator=None) if grad_out is None else grad_out
    grads = torch.autograd.grad(out, (batch["q"], batch["k"], batch["v"]), grad_out)
    return out, lse, grads, grad_out


# Awkward layouts: a varlen batch of 3 with prefixes {0, 5}, visual counts {0, 16, 33}, text {1, 7, 20}.
VARLEN_CASES = [
    [(0, 16, 1), (5, 33, 7), (5, 0, 20)],
    [(5, 0, 1), (0, 33, 20), (0, 16, 7)],
    [(0, 0, 20), (5, 16, 1), (5, 33, 7)],
    [(5, 33, 20), (0, 0, 1), (0, 16, 7)],
]


@pytest.mark.parametrize("specs", VARLEN_CASES, ids=lambda s: "-".join(f"{p}.{v}.{t}" for p, v, t in s))
@pytest.mark.parametrize("blocks", [(16, 16, 4), (32, 16, 4)], ids=["16x16", "32x16"])
def test_triton_matches_reference_varlen(kernel_device, specs, blocks):
    from icml26.kernels.naevit_triton import naevit_triton

    batch = make_batch(specs, device=kernel_device)
    ref_out, ref_lse, ref_grads, g = run(batch, "torch")
    cu_q, cu_k = batch["cu_seqlens_q"].tolist(), batch["cu_seqlens_k"].tolist()
    out, lse = naevit_triton(
        batch["q"], batch["k"], batch["v"], batch["q_pos"], cu_seqlens_q=batch["cu_seqlens_q"],
        cu_seqlens_k=batch["cu_seqlens_k"], max_seqlen_q=max(b - a for a, b in zip(cu_q, cu_q[1:])),
        max_seqlen_k=max(b - a for a, b in zip(cu_k, cu_k[1:])), softmax_scale=D ** -0.5, blocks=blocks)
    grads = torch.autograd.grad(out, (batch["q"], batch["k"], batch["v"]), g)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=0)
    for name, got, want in zip("qkv", grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0, msg=f"d{name}")


def test_padded_form_equals_packed_form(kernel_device):
    batch = make_batch(VARLEN_CASES[0], device=kernel_device)
    padded = to_padded(batch)
    out_p, lse_p, grads_p, g_p = run(batch, "triton")
    g_d = to_padded(dict(batch, q=g_p))["q"].detach()  # the same output gradient, padded with zeros
    out_d, lse_d, grads_d, _ = run(padded, "triton", grad_out=g_d)
    want = to_padded(dict(batch, q=out_p.detach(), k=grads_p[1], v=grads_p[2]))
    torch.testing.assert_close(out_d, want["q"], atol=1e-6, rtol=0)
    torch.testing.assert_close(grads_d[0], to_padded(dict(batch, q=grads_p[0]))["q"], atol=1e-6, rtol=0)
    torch.testing.assert_close(grads_d[1], want["k"], atol=1e-6, rtol=0)
    torch.testing.assert_close(grads_d[2], want["v"], atol=1e-6, rtol=0)
    padding_queries = (padded["q_pos"] < 0)[:, None, :].expand_as(lse_d)
    assert torch.isinf(lse_d[padding_queries]).all() and torch.all(out_d.transpose(1, 2)[padded["q_pos"] < 0] == 0)
    lse_want = to_padded(dict(batch, q=lse_p.detach()[..., None]))["q"][..., 0]
    torch.testing.assert_close(lse_d[~padding_queries], lse_want[~padding_queries], atol=1e-6, rtol=0)


def test_left_padding_and_padding_queries(kernel_device):
    """generate-style left padding: padding keys masked, padding queries give 0 and no gradient."""
    torch.manual_seed(1)
    b, tq, tk = 2, 9, 40
    q = torch.randn(b, HQ, tq, D, device=kernel_device, requires_grad=True)
    k = torch.randn(b, HKV, tk, D, device=kernel_device, requires_grad=True)
    v = torch.randn(b, HKV, tk, D, device=kernel_device, requires_grad=True)
    mask = torch.ones(b, tk, dtype=torch.bool, device=kernel_device)
    mask[1, :6] = False  # sample 1 is left-padded by 6 keys
    q_pos = torch.arange(tk - tq, tk, device=kernel_device).repeat(b, 1)
    q_pos[1, :2] = -1  # and has two padding queries
    batch = dict(q=q, k=k, v=v, q_pos=q_pos, key_padding_mask=mask)
    ref_out, ref_lse, ref_grads, g = run(batch, "torch")
    out, lse, grads, _ = run(batch, "triton", grad_out=g)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    torch.testing.assert_close(lse, ref_lse, atol=1e-5, rtol=0)
    for name, got, want in zip("qkv", grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0, msg=f"d{name}")
    assert torch.all(out[1, :, :2] == 0) and torch.all(grads[0][1, :, :2] == 0)
    assert torch.all(grads[1][1, :, :6] == 0) and torch.all(grads[2][1, :, :6] == 0)


@pytest.mark.parametrize("head_dim", [64, 128, 256])
def test_triton_head_dims(kernel_device, head_dim):
    batch = make_batch([(3, 20, 5), (0, 7, 3)], d=head_dim, device=kernel_device)
    ref_out, _, ref_grads, g = run(batch, "torch")
    out, _, grads, _ = run(batch, "triton", grad_out=g)
    torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=0)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_triton_low_precision_accumulates_in_fp32(kernel_device, low_precision):
    """fp16 (and bf16 on CUDA): tolerances scale with the dtype's rounding (fp16's were measured)."""
    batch = make_batch(VARLEN_CASES[1], dtype=low_precision, device=kernel_device)
    ref_out, ref_lse, ref_grads, g = run(batch, "torch")
    out, lse, grads, _ = run(batch, "triton", grad_out=g)
    assert out.dtype == low_precision and lse.dtype == torch.float32 and grads[1].dtype == low_precision
    ulps = torch.finfo(low_precision).eps / torch.finfo(torch.float16).eps  # 1 for fp16, 8 for bf16
    torch.testing.assert_close(out.float(), ref_out.float(), atol=2e-3 * ulps, rtol=0)
    torch.testing.assert_close(lse, ref_lse, atol=2e-3 * ulps, rtol=0)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got.float(), want.float(), atol=1e-2 * ulps, rtol=1e-2 * ulps)


def test_gqa_mqa_and_lse_gradient(kernel_device):
    """MQA (one kv head) and a loss that uses lse: its gradient flows through the kernel too."""
    batch = make_batch([(2, 11, 6), (0, 5, 9)], hq=4, hkv=1, device=kernel_device)
    outs = {}
    for backend in ("torch", "triton"):
        out, lse = naevit_attention(**batch, backend=backend, return_lse=True)
        loss = (out ** 2).sum() + lse.sin().sum()
        outs[backend] = torch.autograd.grad(loss, (batch["q"], batch["k"], batch["v"]))
    for got, want in zip(outs["triton"], outs["torch"]):
        torch.testing.assert_close(got, want, atol=1e-4, rtol=0)


def test_reference_equals_dense_causal_sdpa_without_image():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, HQ, 13, D), torch.randn(2, HKV, 13, D), torch.randn(2, HKV, 13, D)
    q_pos = torch.arange(13).repeat(2, 1)
    want = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(naevit_attention(q, k, v, q_pos, backend="torch"), want, atol=1e-5, rtol=0)
    torch.testing.assert_close(naevit_attention(q, k, v, q_pos, backend="sdpa_split"), want, atol=1e-5, rtol=0)


@pytest.mark.parametrize("specs", VARLEN_CASES[:2])
def test_sdpa_split_equals_reference(specs):
    batch = make_batch(specs)
    ref_out, _, ref_grads, g = run(batch, "torch")
    out = naevit_attention(**batch, backend="sdpa_split")
    grads = torch.autograd.grad(out, (batch["q"], batch["k"], batch["v"]), g)
    torch.testing.assert_close(out, ref_out, atol=1e-6, rtol=0)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
    # padded form with a layout shared by the batch: two batched SDPA calls
    q = torch.randn(2, HQ, 5 + 7, D)
    k, v = torch.randn(2, HKV, 5 + 16 + 7, D), torch.randn(2, HKV, 5 + 16 + 7, D)
    q_pos = torch.tensor(list(range(5)) + list(range(21, 28))).repeat(2, 1)
    torch.testing.assert_close(naevit_attention(q, k, v, q_pos, backend="sdpa_split"),
                               naevit_attention(q, k, v, q_pos, backend="torch"), atol=1e-6, rtol=0)


def test_auto_picks_an_exact_path_on_cpu():
    batch = make_batch(VARLEN_CASES[0])
    ref = naevit_attention(**batch, backend="torch")
    torch.testing.assert_close(naevit_attention(**batch), ref, atol=1e-6, rtol=0)
    out, lse = naevit_attention(**batch, return_lse=True)  # sdpa_split has no lse: auto takes the reference
    torch.testing.assert_close(out, ref, atol=0, rtol=0)
    odd = dict(batch, q_pos=torch.zeros_like(batch["q_pos"]))  # not the one-image layout: auto takes the reference
    torch.testing.assert_close(naevit_attention(**odd), naevit_attention(**odd, backend="torch"), atol=0, rtol=0)


def test_values_read_once_per_positions_tensor_and_again_after_an_in_place_change(monkeypatch):
    """A decoder passes one q_pos to every layer: its values are read once, and again when they change."""
    import importlib

    naevit = importlib.import_module("icml26.kernels.naevit")
    reads = []
    real_tolist = torch.Tensor.tolist
    monkeypatch.setattr(torch.Tensor, "tolist", lambda self: reads.append(1) or real_tolist(self))
    q, k, v = torch.randn(1, HQ, 3 + 4, D), torch.randn(1, HKV, 3 + 9 + 4, D), torch.randn(1, HKV, 3 + 9 + 4, D)
    q_pos = torch.tensor([[0, 1, 2, 12, 13, 14, 15]])  # one image: the two-SDPA path
    ref = naevit_attention(q, k, v, q_pos, backend="torch")
    reads.clear()
    for _ in range(3):  # three "layers"
        torch.testing.assert_close(naevit_attention(q, k, v, q_pos), ref, atol=1e-6, rtol=0)
    assert len(reads) == 1
    q_pos[0, 3:] = torch.tensor([5, 6, 7, 8])  # in place: another layout, the memo must not be trusted
    torch.testing.assert_close(naevit_attention(q, k, v, q_pos), naevit_attention(q, k, v, q_pos, backend="torch"),
                               atol=1e-6, rtol=0)
    q_pos[0, -1] = k.shape[2]  # in place: past the keys, refused although the tensor was checked before
    with pytest.raises(InputError, match="q_pos"):
        naevit_attention(q, k, v, q_pos)
    fresh = torch.tensor([[0, 1, 2, 12, 13, 14, 15]])  # a new tensor equal to the first: read afresh, right answer
    torch.testing.assert_close(naevit_attention(q, k, v, fresh), ref, atol=1e-6, rtol=0)
    with torch.inference_mode():  # inference tensors keep no version counter: read every call, still right
        frozen = torch.tensor([[0, 1, 2, 12, 13, 14, 15]])
        torch.testing.assert_close(naevit_attention(q, k, v, frozen), ref, atol=1e-6, rtol=0)
        frozen[0, -1] = k.shape[2]
        with pytest.raises(InputError, match="q_pos"):
            naevit_attention(q, k, v, frozen)
    assert naevit._lower_right_mask(4, 16, "cpu").tolist() == [[j <= 12 + i for j in range(16)] for i in range(4)]


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_text_after_p_never_changes_outputs_up_to_p(kernel_device, backend):
    """Causality over the key axis; also: visual keys receive gradients."""
    prefix, n_visual, n_text = 4, 16, 10
    batch = make_batch([(prefix, n_visual, n_text)], device=kernel_device)
    out = naevit_attention(**batch, backend=backend)
    changed = dict(batch)
    k, v = batch["k"].detach().clone(), batch["v"].detach().clone()
    cut = prefix + n_visual + 5  # change keys/values (text tokens) after key position `cut`
    k[cut + 1:] += 3.0
    v[cut + 1:] -= 2.0
    changed["k"], changed["v"] = k, v
    out2 = naevit_attention(**changed, backend=backend)
    seen_up_to_cut = batch["q_pos"] <= cut
    torch.testing.assert_close(out2[seen_up_to_cut], out[seen_up_to_cut], atol=0, rtol=0)
    assert not torch.allclose(out2[~seen_up_to_cut], out[~seen_up_to_cut])
    dk, dv = torch.autograd.grad(out.sum() + (out ** 2).sum(), (batch["k"], batch["v"]))
    visual = slice(prefix, prefix + n_visual)
    assert dk[visual].abs().sum(-1).gt(0).all() and dv[visual].abs().sum(-1).gt(0).all()
    # prefix queries never see the image: their outputs ignore the visual keys entirely
    k3 = batch["k"].detach().clone()
    k3[visual] = 0
    out3 = naevit_attention(**dict(batch, k=k3), backend=backend)
    torch.testing.assert_close(out3[:prefix], out[:prefix], atol=0, rtol=0)


def test_reference_gradcheck_float64():
    torch.manual_seed(0)
    q = torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True)
    k = torch.randn(1, 1, 7, 8, dtype=torch.float64, requires_grad=True)
    v = torch.randn(1, 1, 7, 8, dtype=torch.float64, requires_grad=True)
    q_pos = torch.tensor([[0, 1, 5, 6]])
    mask = torch.tensor([[True] * 6 + [True]])
    assert torch.autograd.gradcheck(lambda a, b, c: naevit_attention(a, b, c, q_pos, backend="torch"), (q, k, v))
    assert torch.autograd.gradcheck(
        lambda a, b, c: naevit_reference(a, b, c, torch.tensor([[-1, 1, 5, 6]]), mask)[0], (q, k, v))


def _valid():
    return dict(q=torch.randn(2, 4, 5, 8), k=torch.randn(2, 2, 9, 8), v=torch.randn(2, 2, 9, 8),
                q_pos=torch.arange(4, 9).repeat(2, 1))


def _packed():
    return dict(q=torch.randn(6, 4, 8), k=torch.randn(12, 2, 8), v=torch.randn(12, 2, 8),
                q_pos=torch.tensor([2, 3, 4, 3, 4, 5]), cu_seqlens_q=torch.tensor([0, 3, 6], dtype=torch.int32),
                cu_seqlens_k=torch.tensor([0, 6, 12], dtype=torch.int32))


BAD = {
    "heads": (lambda a: a.update(k=torch.randn(2, 3, 9, 8), v=torch.randn(2, 3, 9, 8)), "multiple of k/v heads"),
    "q_pos beyond keys": (lambda a: a.update(q_pos=torch.arange(5, 10).repeat(2, 1)), "q_pos: expected values < Tk = 9"),
    "dtype": (lambda a: a.update(k=a["k"].half()), "k.dtype: expected the dtype of q"),
    "device": (lambda a: a.update(q_pos=a["q_pos"].to("meta")), "q_pos.device"),
    "rank": (lambda a: a.update(q=a["q"][0]), "q: expected rank 4"),
    "v shape": (lambda a: a.update(v=a["v"][:, :, :5]), "v: expected the shape of k"),
    "q_pos shape": (lambda a: a.update(q_pos=a["q_pos"][:, :3]), "q_pos: expected shape [B, Tq]"),
    "q_pos float": (lambda a: a.update(q_pos=a["q_pos"].float()), "q_pos.dtype: expected an integer"),
    "mask dtype": (lambda a: a.update(key_padding_mask=torch.ones(2, 9)), "key_padding_mask.dtype"),
    "mask shape": (lambda a: a.update(key_padding_mask=torch.ones(2, 8, dtype=torch.bool)), "key_padding_mask: expected shape"),
    "backend": (lambda a: a.update(backend="cuda"), "backend: expected one of"),
    "scale": (lambda a: a.update(softmax_scale=-1.0),
              "softmax_scale: expected a positive finite number, got -1.0"),
    "scale inf": (lambda a: a.update(softmax_scale=float("inf")), "softmax_scale: expected a positive finite number"),
    "scale nan": (lambda a: a.update(softmax_scale=float("nan")), "softmax_scale: expected a positive finite number"),
    "scale zero": (lambda a: a.update(softmax_scale=0), "softmax_scale: expected a positive finite number"),
    "head dim": (lambda a: a.update(k=torch.randn(2, 2, 9, 16), v=torch.randn(2, 2, 9, 16)), "head dim"),
}
BAD_PACKED = {
    "cu not increasing": (lambda a: a.update(cu_seqlens_q=torch.tensor([0, 4, 3, 6], dtype=torch.int32)), "cu_seqlens_q"),
    "cu wrong end": (lambda a: a.update(cu_seqlens_k=torch.tensor([0, 6, 11], dtype=torch.int32)), "end at the packed length 12"),
    "cu missing": (lambda a: a.pop("cu_seqlens_k"), "cu_seqlens_k: expected a tensor"),
    "cu float": (lambda a: a.update(cu_seqlens_q=torch.tensor([0.0, 3.0, 6.0])), "int32 tensor [B+1]"),
    "q_pos beyond its sequence": (lambda a: a.update(q_pos=torch.tensor([2, 3, 6, 3, 4, 5])), "the keys of sequence 0"),
    "mask in packed": (lambda a: a.update(key_padding_mask=torch.ones(12, dtype=torch.bool)), "key_padding_mask: expected None"),
    "max_seqlen too small": (lambda a: a.update(max_seqlen_q=2), "max_seqlen_q"),
}


@pytest.mark.parametrize("case", list(BAD) + list(BAD_PACKED))
def test_bad_input_names_the_argument(case):
    change, message = BAD[case] if case in BAD else BAD_PACKED[case]
    args = _valid() if case in BAD else _packed()
    change(args)
    with pytest.raises(InputError, match="^naevit_attention: ") as info:
        naevit_attention(**args)
    assert message in str(info.value)


@pytest.mark.parametrize("backend", ["torch", "sdpa_split", "triton"])
def test_infinite_softmax_scale_is_refused_on_every_backend(backend, monkeypatch):
    """softmax_scale=inf gave NaN from the reference and a finite result from Triton: now an error."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    for scale in (float("inf"), -float("inf"), float("nan"), 0.0, -0.5):
        with pytest.raises(InputError, match="naevit_attention: softmax_scale: expected a positive finite number"):
            naevit_attention(**_valid(), softmax_scale=scale, backend=backend)


def test_wrong_types_are_type_errors():
    with pytest.raises(TypeError, match="naevit_attention: softmax_scale: expected a positive finite number or "
                                        "None, got str"):
        naevit_attention(**_valid(), softmax_scale="0.1")
    with pytest.raises(TypeError, match="softmax_scale"):
        naevit_attention(**_valid(), softmax_scale=True)
    with pytest.raises(TypeError, match="naevit_attention: q: expected a torch.Tensor, got list"):
        naevit_attention(**dict(_valid(), q=[[0.0]]))


def test_validation_reads_no_values_off_the_cpu(monkeypatch):
    """On CUDA (values_checked False) validation reads no tensor value, so it never syncs the GPU."""
    import importlib

    naevit = importlib.import_module("icml26.kernels.naevit")
    monkeypatch.delenv("ICML26_CHECK_VALUES", raising=False)
    monkeypatch.setattr(naevit, "values_checked", lambda tensor: False)

    def synchronising(*args, **kwargs):
        raise AssertionError("a tensor value was read")

    padded = dict(_valid(), q_pos=torch.arange(5, 10).repeat(2, 1))  # beyond the keys: only a value check sees it
    packed = dict(_packed(), max_seqlen_q=3, max_seqlen_k=6)
    for name in ("item", "tolist", "__bool__", "__int__", "__float__"):
        monkeypatch.setattr(torch.Tensor, name, synchronising)
    args = ("key_padding_mask", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k")
    for call in (padded, packed):
        layout = naevit._validate(call["q"], call["k"], call["v"], call["q_pos"],
                                  *[call.get(name) for name in args], None, "auto")
        assert layout.max_seqlen_k in (9, 6)
    monkeypatch.undo()


def test_backend_requirements_are_explained(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="naevit_attention: backend: .*TRITON_INTERPRET=1"):
            naevit_attention(**_valid(), backend="triton")
    with pytest.raises(InputError, match="naevit_attention: q_pos: expected the one-image layout"):
        naevit_attention(**dict(_valid(), q_pos=torch.tensor([[0, 4, 5, 6, 7]] * 2)), backend="sdpa_split")
    with pytest.raises(InputError, match="naevit_attention: return_lse: expected False"):
        naevit_attention(**_valid(), backend="sdpa_split", return_lse=True)
    with pytest.raises(InputError, match="float64"):
        naevit_attention(**{k: v.double() if v.is_floating_point() else v for k, v in _valid().items()},
                         backend="sdpa_split")


def _every_tile():
    from icml26.kernels import naevit_triton

    tiles = naevit_triton.FWD_TILES + naevit_triton.DKDV_TILES + naevit_triton.DQ_TILES
    return sorted({(t.sizes["BLOCK_M"], t.sizes["BLOCK_N"], t.num_warps, t.num_stages) for t in tiles})


@pytest.mark.parametrize("tile", _every_tile(), ids=lambda t: "x".join(map(str, t)))
def test_every_autotune_tile_matches_reference_on_cuda(kernel_device, tile):
    """Each tile of the three autotune spaces, on all three kernels, at the benchmark's head dim in bf16.
    The interpreter runs one tile only (checked in test_kernels_backend.py), so this needs --device cuda."""
    if kernel_device.type != "cuda":
        pytest.skip("the autotune tiles run on a GPU only (--device cuda)")
    from icml26.kernels.naevit_triton import naevit_triton

    batch = make_batch([(8, 150, 70), (0, 64, 1), (3, 0, 40)], hq=8, hkv=2, d=128, dtype=torch.bfloat16,
                       device=kernel_device)
    ref_out, _, ref_grads, g = run(batch, "torch")
    cu_q, cu_k = batch["cu_seqlens_q"].tolist(), batch["cu_seqlens_k"].tolist()
    out, _ = naevit_triton(
        batch["q"], batch["k"], batch["v"], batch["q_pos"], cu_seqlens_q=batch["cu_seqlens_q"],
        cu_seqlens_k=batch["cu_seqlens_k"], max_seqlen_q=max(b - a for a, b in zip(cu_q, cu_q[1:])),
        max_seqlen_k=max(b - a for a, b in zip(cu_k, cu_k[1:])), softmax_scale=128 ** -0.5, blocks=tile)
    grads = torch.autograd.grad(out, (batch["q"], batch["k"], batch["v"]), g)
    ulps = torch.finfo(torch.bfloat16).eps / torch.finfo(torch.float16).eps
    torch.testing.assert_close(out.float(), ref_out.float(), atol=2e-3 * ulps, rtol=0)
    for name, got, want in zip("qkv", grads, ref_grads):
        torch.testing.assert_close(got.float(), want.float(), atol=1e-2 * ulps, rtol=1e-2 * ulps, msg=f"d{name}")


def test_autotuned_kernels_match_reference_on_cuda(kernel_device, monkeypatch):
    """The default GPU path: every kernel autotunes its tile (padded and packed layouts), and is right."""
    if kernel_device.type != "cuda":
        pytest.skip("autotuning runs on a GPU only (--device cuda)")
    monkeypatch.setenv("ICML26_AUTOTUNE", "1")
    batch = make_batch([(8, 150, 70), (0, 64, 1), (3, 0, 40)], hq=8, hkv=2, d=128, dtype=torch.bfloat16,
                       device=kernel_device)
    ulps = torch.finfo(torch.bfloat16).eps / torch.finfo(torch.float16).eps
    for layout in (batch, to_padded(batch)):
        ref_out, _, ref_grads, g = run(layout, "torch")
        out, _, grads, _ = run(layout, "triton", grad_out=g)
        torch.testing.assert_close(out.float(), ref_out.float(), atol=2e-3 * ulps, rtol=0)
        for got, want in zip(grads, ref_grads):
            torch.testing.assert_close(got.float(), want.float(), atol=1e-2 * ulps, rtol=1e-2 * ulps)
