"""NAEViT attention inside transformers models (``kernels/naevit_hf.py``).

A tiny randomly initialised Llama / Qwen3 runs with ``attn_implementation="naevit"`` and must match
``"sdpa"`` wherever the two define the same attention (causal, padded, cached), and match a model
given the equivalent dense 4D mask where q_pos departs from causal.
"""

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from icml26 import InputError  # noqa: E402
from icml26.kernels.naevit_hf import (  # noqa: E402
    naevit_attention_forward,
    naevit_mask,
    register_naevit_attention,
)

ATOL = 1e-5
VOCAB = 100


def _llama_config(**overrides):
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=VOCAB,
                                      max_position_embeddings=128, pad_token_id=0, **overrides)
    return config


def _build(config, attn_implementation="naevit"):
    register_naevit_attention()
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn_implementation)
    model.generation_config.pad_token_id = 0
    return model.eval()


@pytest.fixture(scope="module")
def llama():
    return _build(_llama_config())


@pytest.fixture(scope="module")
def ids():
    generator = torch.Generator().manual_seed(1)
    return torch.randint(1, VOCAB, (2, 11), generator=generator)


def _logits(model, impl, input_ids, **kwargs):
    model.set_attn_implementation(impl)
    with torch.no_grad():
        return model(input_ids, **kwargs).logits


def _dense_mask(q_pos, n_keys, key_padding=None):
    """The 4D additive mask an eager model needs to apply the rule ``j <= q_pos[b, i]``."""
    visible = torch.arange(n_keys)[None, None, :] <= q_pos[:, :, None]
    if key_padding is not None:
        visible = visible & key_padding[:, None, :].bool()
    return torch.where(visible, 0.0, torch.finfo(torch.float32).min)[:, None]


# --------------------------------------------------------------------------------------------
# Registration and imports
# --------------------------------------------------------------------------------------------
def test_register_is_idempotent_and_fills_both_interfaces():
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface

    assert register_naevit_attention() == "naevit"
    assert register_naevit_attention() == "naevit"
    assert AttentionInterface._global_mapping["naevit"] is naevit_attention_forward
    assert AttentionMaskInterface._global_mapping["naevit"] is naevit_mask
    assert register_naevit_attention("naevit_torch", backend="torch") == "naevit_torch"
    assert "naevit_torch" in AttentionInterface()


def test_importing_the_kernels_does_not_import_transformers():
    code = ("import sys, icml26.kernels, icml26.kernels.naevit, icml26.kernels.naevit_hf; "
            "assert 'transformers' not in sys.modules, 'transformers was imported'")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------------------------
# Same function as sdpa where the rule is causal
# --------------------------------------------------------------------------------------------
def test_plain_batch_matches_sdpa(llama, ids):
    expected = _logits(llama, "sdpa", ids)
    torch.testing.assert_close(_logits(llama, "naevit", ids), expected, atol=ATOL, rtol=0)
    torch.testing.assert_close(_logits(llama, "naevit", ids, naevit_backend="torch"), expected, atol=ATOL, rtol=0)


def test_explicit_causal_q_pos_matches_sdpa(llama, ids):
    expected = _logits(llama, "sdpa", ids)
    q_pos = torch.arange(ids.shape[1])
    torch.testing.assert_close(_logits(llama, "naevit", ids, q_pos=q_pos), expected, atol=ATOL, rtol=0)
    batched = q_pos.expand(ids.shape[0], -1)
    torch.testing.assert_close(_logits(llama, "naevit", ids, q_pos=batched, naevit_backend="torch"), expected,
                               atol=ATOL, rtol=0)


def test_left_padded_batch_matches_sdpa_at_real_positions(llama, ids):
    attention_mask = torch.ones_like(ids)
    attention_mask[0, :4] = 0
    ids = ids.masked_fill(attention_mask == 0, 0)
    expected = _logits(llama, "sdpa", ids, attention_mask=attention_mask)
    for backend in ("auto", "torch"):
        got = _logits(llama, "naevit", ids, attention_mask=attention_mask, naevit_backend=backend)
        real = attention_mask.bool()
        torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)


@pytest.mark.parametrize("cache_implementation", [None, "static"])
def test_greedy_generate_with_cache_matches_sdpa(llama, ids, cache_implementation):
    attention_mask = torch.ones_like(ids)
    attention_mask[1, :3] = 0
    ids = ids.masked_fill(attention_mask == 0, 0)
    outputs = {}
    for impl in ("sdpa", "naevit"):
        llama.set_attn_implementation(impl)
        outputs[impl] = llama.generate(ids, attention_mask=attention_mask, max_new_tokens=5, do_sample=False,
                                       cache_implementation=cache_implementation)
    assert outputs["naevit"].shape == (2, ids.shape[1] + 5)
    assert torch.equal(outputs["naevit"], outputs["sdpa"])


def test_qwen3_forward_matches_sdpa(ids):
    config = transformers.Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                      vocab_size=VOCAB, max_position_embeddings=128, pad_token_id=0)
    model = _build(config)
    attention_mask = torch.ones_like(ids)
    attention_mask[0, :2] = 0
    expected = _logits(model, "sdpa", ids, attention_mask=attention_mask)
    got = _logits(model, "naevit", ids, attention_mask=attention_mask)
    real = attention_mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)


# --------------------------------------------------------------------------------------------
# A q_pos that is not causal
# --------------------------------------------------------------------------------------------
def _image_like_q_pos(batch, n):
    """Sequence 0: causal head, tail of 4 tokens sees every key; sequence 1: an 'image' 3..6 seen
    whole from token 7 on, tokens inside it see only the text before it."""
    q_pos = torch.arange(n).repeat(batch, 1)
    q_pos[0, -4:] = n - 1
    q_pos[1, 3:7] = 2
    return q_pos


def test_non_causal_q_pos_matches_a_dense_4d_mask_under_eager(llama, ids):
    q_pos = _image_like_q_pos(*ids.shape)
    expected = _logits(llama, "eager", ids, attention_mask=_dense_mask(q_pos, ids.shape[1]))
    for backend in ("auto", "torch"):
        got = _logits(llama, "naevit", ids, q_pos=q_pos, naevit_backend=backend)
        torch.testing.assert_close(got, expected, atol=ATOL, rtol=0)
    assert not torch.allclose(expected, _logits(llama, "sdpa", ids), atol=1e-3)  # the rule really changed


def test_q_pos_with_left_padding_matches_a_dense_4d_mask(llama, ids):
    attention_mask = torch.ones_like(ids)
    attention_mask[0, :3] = 0
    q_pos = torch.arange(ids.shape[1]).repeat(2, 1)
    q_pos[:, -3:] = ids.shape[1] - 1
    q_pos[0, :3] = -1  # padding queries see nothing
    expected = _logits(llama, "eager", ids, attention_mask=_dense_mask(q_pos, ids.shape[1], attention_mask))
    got = _logits(llama, "naevit", ids, attention_mask=attention_mask, q_pos=q_pos)
    real = attention_mask.bool()
    torch.testing.assert_close(got[real], expected[real], atol=ATOL, rtol=0)
    assert torch.isfinite(got).all()


def test_a_query_sees_exactly_the_tokens_up_to_its_q_pos(llama, ids):
    n = ids.shape[1]
    q_pos = torch.arange(n)
    q_pos[6:] = n - 1  # queries 6.. see every key, later ones included; 0..5 stay causal
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 7) % VOCAB
    before = _logits(llama, "naevit", ids, q_pos=q_pos)
    after = _logits(llama, "naevit", changed, q_pos=q_pos)
    torch.testing.assert_close(after[:, :6], before[:, :6], atol=0, rtol=0)
    assert (after[:, 6] - before[:, 6]).abs().max() > 1e-4  # a causal model could not see the last token here


# --------------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------------
def _qkv(batch=1, heads_q=4, heads_kv=2, n=5, dim=8):
    return (torch.randn(batch, heads_q, n, dim), torch.randn(batch, heads_kv, n, dim),
            torch.randn(batch, heads_kv, n, dim))


def test_dropout_is_rejected():
    q, k, v = _qkv()
    module = torch.nn.Module()
    with pytest.raises(InputError, match=r"^naevit_attention_forward: dropout: expected 0\.0"):
        naevit_attention_forward(module, q, k, v, None, dropout=0.1)
    out, weights = naevit_attention_forward(module, q, k, v, None, dropout=0.0)
    assert out.shape == (1, 5, 4, 8) and weights is None

    model = _build(_llama_config(attention_dropout=0.1))
    model.train()
    with pytest.raises(InputError, match="dropout"):
        model(torch.randint(1, VOCAB, (1, 4)))


def test_bad_inputs_say_what_was_expected(llama, ids):
    q, k, v = _qkv()
    module = torch.nn.Module()
    with pytest.raises(InputError, match="naevit_attention_forward: naevit_backend: expected one of"):
        naevit_attention_forward(module, q, k, v, None, naevit_backend="cuda")
    with pytest.raises(InputError, match=r"naevit_attention_forward: q_pos: expected shape \[B, Tq\]"):
        naevit_attention_forward(module, q, k, v, None, q_pos=torch.arange(4))
    with pytest.raises(InputError, match="naevit_attention_forward: softcap: expected None"):
        naevit_attention_forward(module, q, k, v, None, softcap=30.0)
    with pytest.raises(InputError, match="naevit_attention_forward: attention_mask: expected None or a 2D"):
        _logits(llama, "naevit", ids, attention_mask=_dense_mask(torch.arange(ids.shape[1]).repeat(2, 1),
                                                                  ids.shape[1]))
    with pytest.raises(InputError, match="register_naevit_attention: backend: expected None or one of"):
        register_naevit_attention("naevit_bad", backend="fast")
    with pytest.raises(InputError, match="register_naevit_attention: name"):
        register_naevit_attention("hub/kernel")


def test_sliding_window_layers_are_refused():
    config = transformers.Qwen3Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, vocab_size=VOCAB,
                                      use_sliding_window=True, sliding_window=4, max_window_layers=0)
    model = _build(config)
    with pytest.raises(InputError, match="naevit_mask: mask pattern: expected the plain causal mask"):
        with torch.no_grad():
            model(torch.randint(1, VOCAB, (1, 6)))
