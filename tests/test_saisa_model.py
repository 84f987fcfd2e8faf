"""The SAISA model (``models/saisa/modeling.py``): structure, an independent reference, caching, padding, I/O.

Tiny random models (Llama / Qwen3 text configs: hidden 64, 2 layers, 4 heads, 2 KV heads, vocab 50)
with the built-in patch encoder (8x8 single-channel images, 16 visual tokens of size 32) run the
three architectures ``"saisa"``, ``"llava"`` and ``"naevit_llava"``. The checks follow the method of
SAISA (arXiv 2502.02458, its method section, and the official code ``icip-cas/SAISA``): what the
visual rows may and may not influence, which modules see which rows, and a slow plain
re-implementation of one SAISA forward that a lazy implementation cannot match.
"""

import copy
import math
from collections import defaultdict

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from icml26.errors import InputError  # noqa: E402
from icml26.models.saisa import (  # noqa: E402
    ARCHITECTURES,
    SaisaConfig,
    SaisaForConditionalGeneration,
    SaisaPatchEncoderConfig,
    flops,
)
from icml26.utils import IGNORE_INDEX  # noqa: E402

VOCAB = 50
IMAGE = VOCAB  # the default image_token_id: the text vocabulary size
PAD = 0
N_V = 16  # visual tokens per 8x8 image with 2x2 patches
D_V = 32  # the patch encoder's feature size
ATOL = 1e-5
FAMILIES = ("llama", "qwen3")


def _text_config(family="llama", **overrides):
    common = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=256, pad_token_id=PAD,
                  initializer_range=0.1)
    common.update(overrides)
    if family == "llama":
        return transformers.LlamaConfig(**common)
    return transformers.Qwen3Config(head_dim=16, **common)


def _build(architecture="saisa", family="llama", seed=0, **config_kwargs):
    torch.manual_seed(seed)
    config = SaisaConfig(text_config=_text_config(family), vision_config=SaisaPatchEncoderConfig(),
                         architecture=architecture, **config_kwargs)
    model = SaisaForConditionalGeneration(config).eval()
    model.generation_config.eos_token_id = None  # always generate the full number of tokens
    model.generation_config.pad_token_id = PAD
    return model


@pytest.fixture(scope="module", autouse=True)
def _one_thread():
    """Tiny matrices gain nothing from threads, and on a busy 2-core machine spinning OpenMP workers
    made a 0.4 s loop take 50 s."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def models():
    """One tiny Llama-based model per architecture (same seed), built once."""
    return {arch: _build(arch) for arch in ARCHITECTURES}


def _text(n, seed):
    """n random text token ids (never the pad id 0)."""
    return torch.randint(1, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist()


def _sequence(prefix, text, n_images=1, seed=0):
    """``[prefix text][n_images * N_V image slots][text]`` as a list of ids."""
    return _text(prefix, seed) + [IMAGE] * (N_V * n_images) + _text(text, seed + 1000)


def _left_pad(sequences):
    """Left-pad lists of ids into ``(input_ids, attention_mask)``."""
    width = max(len(s) for s in sequences)
    ids = torch.tensor([[PAD] * (width - len(s)) + s for s in sequences])
    mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences])
    return ids, mask


def _features(n_images, seed):
    return torch.randn(n_images, N_V, D_V, generator=torch.Generator().manual_seed(seed))


def _pixels(n_images, seed):
    return torch.randn(n_images, 1, 8, 8, generator=torch.Generator().manual_seed(seed))


def _logits(model, input_ids, **kwargs):
    with torch.no_grad():
        return model(input_ids, **kwargs).logits


# --------------------------------------------------------------------------------------------
# 1. Structural invariants
# --------------------------------------------------------------------------------------------
def _capture_kv(model, input_ids, **kwargs):
    """Per layer: (k_proj output, v_proj output) over the whole sequence in sequence order, and the cache.

    One unpadded sample. LLaVA calls each module once on every row; SAISA and NAEViT-LLaVA call it on
    the text rows, then on the visual rows: the two outputs are put back in sequence order.
    """
    calls = defaultdict(list)
    hooks = []
    for i, layer in enumerate(model.language_model.model.layers):
        for name in ("k_proj", "v_proj"):
            module = getattr(layer.self_attn, name)
            hooks.append(module.register_forward_hook(
                lambda mod, args, out, key=(i, name): calls[key].append(out.detach().clone())))
    try:
        with torch.no_grad():
            out = model(input_ids, use_cache=True, **kwargs)
    finally:
        for hook in hooks:
            hook.remove()
    is_text = input_ids[0] != IMAGE
    captured = {}
    for key, outputs in calls.items():
        if len(outputs) == 1:
            captured[key] = outputs[0]
        else:
            text_out, visual_out = outputs
            assert text_out.shape[1] == int(is_text.sum()) and visual_out.shape[1] == int((~is_text).sum())
            full = text_out.new_empty(1, len(is_text), text_out.shape[-1])
            full[:, is_text], full[:, ~is_text] = text_out, visual_out
            captured[key] = full
    return captured, out.cache


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_visual_keys_and_values_do_not_depend_on_the_text(models, architecture):
    """3(a): changing every text token (before and after the image) leaves the visual K/V bitwise equal.

    True for SAISA (visual rows are a per-layer function of the features and their position) and
    for NAEViT-LLaVA (visual rows never attend); LLaVA's visual rows attend to the prefix, so from
    layer 1 on they change: that shows the check can fail.
    """
    model = models[architecture]
    prefix, text = 3, 5
    a = torch.tensor([_sequence(prefix, text, seed=1)])
    is_text = a != IMAGE
    b = torch.where(is_text, (a - 1 + 7) % (VOCAB - 1) + 1, a)  # every text token changes
    assert bool((a[is_text] != b[is_text]).all()) and bool((b[is_text] != PAD).all())
    visual = slice(prefix, prefix + N_V)
    features = _features(1, seed=3)
    proj_a, cache_a = _capture_kv(model, a, image_features=features)
    proj_b, cache_b = _capture_kv(model, b, image_features=features)

    for layer in range(model.config.text_config.num_hidden_layers):
        same_proj = all(torch.equal(proj_a[layer, name][:, visual], proj_b[layer, name][:, visual])
                        for name in ("k_proj", "v_proj"))
        keys_a, keys_b = cache_a.layers[layer].keys[:, :, visual], cache_b.layers[layer].keys[:, :, visual]
        values_a, values_b = cache_a.layers[layer].values[:, :, visual], cache_b.layers[layer].values[:, :, visual]
        same_cache = torch.equal(keys_a, keys_b) and torch.equal(values_a, values_b)
        if architecture == "llava" and layer > 0:
            assert not same_proj and not same_cache
        else:
            assert same_proj, f"layer {layer}: visual k_proj/v_proj outputs changed with the text"
            assert same_cache, f"layer {layer}: cached visual keys/values changed with the text"
        # The text keys do change: the hooks look at the right rows.
        assert not torch.equal(proj_a[layer, "k_proj"][:, :prefix], proj_b[layer, "k_proj"][:, :prefix])


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_prefix_logits_ignore_the_image_and_answer_logits_do_not(models, architecture):
    """3(b) and 3(c): text before the image never sees it; text after it does."""
    model = models[architecture]
    prefix, text = 4, 6
    ids = torch.tensor([_sequence(prefix, text, seed=4)])
    with_a = _logits(model, ids, pixel_values=_pixels(1, seed=5))
    with_b = _logits(model, ids, pixel_values=_pixels(1, seed=6))
    torch.testing.assert_close(with_a[:, :prefix], with_b[:, :prefix], rtol=0, atol=1e-6)
    answer = slice(prefix + N_V, None)
    assert (with_a[:, answer] - with_b[:, answer]).abs().amax(-1).min() > 1e-4  # every answer row moves


def _rows_seen(model, input_ids, **kwargs):
    """Rows (batch x sequence entries) each module's forward produced, summed over its calls, per layer."""
    rows = defaultdict(int)
    hooks = []
    for i, layer in enumerate(model.language_model.model.layers):
        attn = layer.self_attn
        for name, module in (("q_proj", attn.q_proj), ("k_proj", attn.k_proj), ("v_proj", attn.v_proj),
                             ("o_proj", attn.o_proj), ("mlp", layer.mlp)):
            def hook(mod, args, out, key=(i, name)):
                rows[key] += out.shape[:-1].numel()
            hooks.append(module.register_forward_hook(hook))
    try:
        _logits(model, input_ids, **kwargs)
    finally:
        for hook in hooks:
            hook.remove()
    return rows


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_queries_o_proj_and_ffn_see_only_text_rows(models, architecture):
    """3(d): the visual work is skipped, not computed and masked.

    Counted: the rows of each module's output, summed over the module's calls in one forward.
    One unpadded sample ``[P text][n_v image][T text]``: SAISA's q_proj, o_proj and mlp see exactly
    P + T rows; NAEViT-LLaVA's q_proj and o_proj see P + T while its mlp sees all P + n_v + T; LLaVA's
    every module sees all rows. k_proj / v_proj always see all rows (visual keys and values exist).
    """
    model = models[architecture]
    prefix, text = 3, 5
    ids = torch.tensor([_sequence(prefix, text, seed=7)])
    rows = _rows_seen(model, ids, image_features=_features(1, seed=8))
    n_text, n_all = prefix + text, prefix + N_V + text
    expected = {
        "saisa": dict(q_proj=n_text, o_proj=n_text, mlp=n_text, k_proj=n_all, v_proj=n_all),
        "naevit_llava": dict(q_proj=n_text, o_proj=n_text, mlp=n_all, k_proj=n_all, v_proj=n_all),
        "llava": dict(q_proj=n_all, o_proj=n_all, mlp=n_all, k_proj=n_all, v_proj=n_all),
    }[architecture]
    for layer in range(model.config.text_config.num_hidden_layers):
        assert {name: rows[layer, name] for name in expected} == expected, f"layer {layer}"


def test_saisa_text_rows_in_a_padded_batch_with_uneven_images():
    """3(d) in a batch: SAISA packs each sample's text rows (left padding included) to the longest.

    Counted: B x max_b(non-image tokens of sample b, padding included); it stays far below B x S.
    Here sample 0 holds two images and sample 1 one, so sample 0's text rows are padded up to sample 1's.
    """
    model = _build("saisa")
    sequences = [_sequence(2, 3, n_images=2, seed=9), _sequence(1, 4, seed=10)]
    ids, mask = _left_pad(sequences)
    rows = _rows_seen(model, ids, attention_mask=mask, image_features=_features(3, seed=11))
    batch, width = ids.shape
    n_text = (ids != IMAGE).sum(1)  # padding included
    assert n_text.tolist() == [5, width - N_V]
    packed = batch * int(n_text.max())
    # Keys and values: both streams, each packed to its longest (sample 1's one image padded to two).
    n_visual = (ids == IMAGE).sum(1)
    assert n_visual.tolist() == [2 * N_V, N_V]
    streams = batch * (int(n_text.max()) + int(n_visual.max()))
    for layer in range(2):
        assert rows[layer, "q_proj"] == rows[layer, "o_proj"] == rows[layer, "mlp"] == packed
        assert rows[layer, "k_proj"] == rows[layer, "v_proj"] == streams
    assert packed < batch * width


# --------------------------------------------------------------------------------------------
# 2. An independent, slow SAISA forward (catches a lazy implementation)
# --------------------------------------------------------------------------------------------
def _rms_norm(x, weight, eps):
    return weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps))


def _rope(x, positions, theta):
    """x [S, H, D] rotated at positions [S] (rotate-half convention, as Llama / Qwen)."""
    dim = x.shape[-1]
    inv_freq = 1.0 / theta ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim)
    angles = positions.float()[:, None] * inv_freq[None]
    cos, sin = torch.cat([angles, angles], -1).cos()[:, None], torch.cat([angles, angles], -1).sin()[:, None]
    half = dim // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], -1)
    return x * cos + rotated * sin


LAZY_SHORTCUTS = ("shared_projector", "add_not_overwrite", "no_visual_norm", "no_visual_rope",
                  "compacted_text_positions")


def _reference_saisa_logits(model, ids, features, shortcut=None):
    """One SAISA forward for one unpadded sample, written from the paper's layer with the raw weights.

    Returns the logits at the text positions (in sequence order). ``shortcut`` (one of
    :data:`LAZY_SHORTCUTS`) gets one of the method's easily missed details wrong on purpose.
    """
    cfg = model.config.text_config
    decoder = model.language_model.model
    heads, kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // heads
    theta = cfg.rope_parameters["rope_theta"]
    eps = cfg.rms_norm_eps
    linear = torch.nn.functional.linear

    is_image = ids == IMAGE
    text = (~is_image).nonzero().squeeze(1)
    visual = is_image.nonzero().squeeze(1)
    positions = torch.arange(len(ids))
    query_positions = torch.arange(len(text)) if shortcut == "compacted_text_positions" else positions[text]
    h = decoder.embed_tokens.weight[ids.masked_fill(is_image, 0)].clone()  # [S, d]
    if shortcut == "add_not_overwrite":
        h[visual] = 0.0
    for layer_idx, layer in enumerate(decoder.layers):
        attn, mlp = layer.self_attn, layer.mlp
        proj = model.projectors[0 if shortcut == "shared_projector" else layer_idx]
        projected = linear(torch.nn.functional.gelu(linear(features, proj.linear_1.weight, proj.linear_1.bias)),
                           proj.linear_2.weight, proj.linear_2.bias)
        # Overwrite with this layer's projector: visual rows carry no residual stream across layers.
        h[visual] = h[visual] + projected if shortcut == "add_not_overwrite" else projected
        hn = _rms_norm(h, layer.input_layernorm.weight, eps)  # every row, visual ones included
        if shortcut == "no_visual_norm":
            hn[visual] = h[visual]
        k = linear(hn, attn.k_proj.weight).view(-1, kv_heads, head_dim)
        v = linear(hn, attn.v_proj.weight).view(-1, kv_heads, head_dim)
        q = linear(hn[text], attn.q_proj.weight).view(-1, heads, head_dim)  # text rows only
        if hasattr(attn, "q_norm"):  # Qwen3: per-head RMSNorm before RoPE
            q = _rms_norm(q, attn.q_norm.weight, eps)
            k = _rms_norm(k, attn.k_norm.weight, eps)
        rotated = _rope(k, positions, theta)  # every key at its own position
        k = torch.where(is_image[:, None, None], k, rotated) if shortcut == "no_visual_rope" else rotated
        q = _rope(q, query_positions, theta)  # the text tokens' original positions
        k = k.repeat_interleave(heads // kv_heads, dim=1)
        v = v.repeat_interleave(heads // kv_heads, dim=1)
        scores = torch.einsum("qhd,khd->hqk", q, k) / math.sqrt(head_dim)
        visible = positions[None, :] <= positions[text][:, None]  # key j visible iff j <= pos
        scores = scores.masked_fill(~visible, float("-inf"))
        out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), v).reshape(len(text), -1)
        h[text] = h[text] + linear(out, attn.o_proj.weight)
        x = _rms_norm(h[text], layer.post_attention_layernorm.weight, eps)
        ffn = linear(torch.nn.functional.silu(linear(x, mlp.gate_proj.weight)) * linear(x, mlp.up_proj.weight),
                     mlp.down_proj.weight)
        h[text] = h[text] + ffn
    final = _rms_norm(h[text], decoder.norm.weight, eps)
    return linear(final, model.language_model.lm_head.weight)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("backend", ["auto", "torch"])
def test_saisa_matches_a_plain_reference_forward(family, backend):
    model = _build("saisa", family=family, seed=12, attention_backend=backend)
    ids = torch.tensor(_sequence(3, 6, seed=13))
    features = _features(1, seed=14)
    with torch.no_grad():
        expected = _reference_saisa_logits(model, ids, features[0])
        logits = model(ids[None], image_features=features).logits[0]
    text = ids != IMAGE
    torch.testing.assert_close(logits[text], expected, rtol=0, atol=ATOL)
    assert torch.equal(logits[~text], torch.zeros_like(logits[~text]))  # visual rows produce no output


@pytest.mark.parametrize("shortcut", LAZY_SHORTCUTS)
def test_each_lazy_shortcut_moves_the_logits_far_past_the_tolerance(shortcut):
    """The 1e-5 match above means something: getting any one hidden detail wrong misses by > 1e-3."""
    model = _build("saisa", seed=12)
    ids = torch.tensor(_sequence(3, 6, seed=13))
    features = _features(1, seed=14)
    with torch.no_grad():
        lazy = _reference_saisa_logits(model, ids, features[0], shortcut=shortcut)
        logits = model(ids[None], image_features=features).logits[0]
    assert (logits[ids != IMAGE] - lazy).abs().max() > 1e-3


# --------------------------------------------------------------------------------------------
# 3. NAEViT-LLaVA = the wrapped LM with attn_implementation="naevit"
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_naevit_llava_equals_the_language_model_under_naevit_attention(family):
    """Visual embeddings in the input, visual rows given q_pos = -1 (no query): the same function.

    A visual row's attention output is 0 in both, so it keeps its residual stream and gets the FFN.
    """
    from icml26.kernels.naevit_hf import register_naevit_attention

    model = _build("naevit_llava", family=family, seed=15)
    sequences = [_sequence(1, 4, seed=16), _sequence(4, 6, seed=17)]
    ids, mask = _left_pad(sequences)
    features = _features(2, seed=18)
    is_image = ids == IMAGE

    lm = copy.deepcopy(model.language_model)
    lm.set_attn_implementation(register_naevit_attention())
    with torch.no_grad():
        embeds = lm.get_input_embeddings()(ids.masked_fill(is_image, 0))
        embeds[is_image] = model.projectors[0](features.reshape(-1, D_V))
        q_pos = torch.where(is_image | ~mask.bool(), -1, torch.arange(ids.shape[1]))
        expected = lm(inputs_embeds=embeds, attention_mask=mask, q_pos=q_pos, naevit_backend="torch").logits
    logits = _logits(model, ids, attention_mask=mask, image_features=features)
    real_text = ~is_image & mask.bool()
    torch.testing.assert_close(logits[real_text], expected[real_text], rtol=0, atol=ATOL)


# --------------------------------------------------------------------------------------------
# 4. KV cache: greedy decoding with and without it
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_greedy_generation_with_cache_matches_recomputation(architecture, family):
    """Left padding, the image after 1 prefix token in sample 0 and after 4 in sample 1."""
    model = _build(architecture, family=family, seed=19)
    sequences = [_sequence(1, 3, seed=20), _sequence(4, 5, seed=21)]
    ids, mask = _left_pad(sequences)
    pixels = _pixels(2, seed=22)
    new = 10
    common = dict(attention_mask=mask, pixel_values=pixels, max_new_tokens=new, do_sample=False,
                  output_scores=True, return_dict_in_generate=True)
    with torch.no_grad():
        cached = model.generate(ids, use_cache=True, **common)
        full = model.generate(ids, use_cache=False, **common)
    assert cached.sequences.shape == (2, ids.shape[1] + new)
    assert torch.equal(cached.sequences, full.sequences)
    torch.testing.assert_close(torch.stack(cached.scores), torch.stack(full.scores), rtol=0, atol=1e-4)
    # Each sample alone (no padding) decodes the same tokens as in the padded batch.
    for i, sequence in enumerate(sequences):
        with torch.no_grad():
            alone = model.generate(torch.tensor([sequence]), pixel_values=pixels[i:i + 1], max_new_tokens=new,
                                   do_sample=False)
        assert torch.equal(alone[0, -new:], cached.sequences[i, -new:])


# --------------------------------------------------------------------------------------------
# 5. Padding
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("architecture", ARCHITECTURES)
@pytest.mark.parametrize("explicit_positions", [False, True], ids=["default_positions", "positions_from_mask"])
def test_left_padded_batch_matches_each_sample_alone(models, architecture, explicit_positions):
    """Different image positions, and two images in one sample, in one left-padded batch."""
    model = models[architecture]
    sequences = [_sequence(1, 3, seed=23), _sequence(4, 6, seed=24), _sequence(2, 2, n_images=2, seed=25)]
    images = [_features(1, seed=26), _features(1, seed=27), _features(2, seed=28)]
    ids, mask = _left_pad(sequences)
    kwargs = {}
    if explicit_positions:
        kwargs["position_ids"] = (mask.cumsum(-1) - 1).clamp(min=0)
    batched = _logits(model, ids, attention_mask=mask, image_features=torch.cat(images), **kwargs)
    for i, (sequence, features) in enumerate(zip(sequences, images)):
        alone = _logits(model, torch.tensor([sequence]), image_features=features)[0]
        real = batched[i, ids.shape[1] - len(sequence):]
        text = torch.tensor(sequence) != IMAGE
        torch.testing.assert_close(real[text], alone[text], rtol=0, atol=ATOL)


# --------------------------------------------------------------------------------------------
# 6. save_pretrained / from_pretrained
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_save_and_load_round_trip(architecture, tmp_path):
    extra = dict(share_projectors=True) if architecture == "saisa" else {}
    model = _build(architecture, seed=29, image_token_id=VOCAB + 3, attention_backend="torch",
                   projector_hidden_act="gelu_new", **extra)
    ids = torch.tensor([_sequence(2, 4, seed=30)])
    ids = ids.masked_fill(ids == IMAGE, VOCAB + 3)
    pixels = _pixels(1, seed=31)
    before = _logits(model, ids, pixel_values=pixels)
    model.save_pretrained(tmp_path)
    loaded = SaisaForConditionalGeneration.from_pretrained(tmp_path).eval()
    after = _logits(loaded, ids, pixel_values=pixels)
    assert torch.equal(before, after)

    saved, reread = model.config, loaded.config
    for field in ("architecture", "image_token_id", "vision_feature_layer", "vision_feature_select_strategy",
                  "projector_hidden_act", "share_projectors", "attention_backend", "tie_word_embeddings"):
        assert getattr(reread, field) == getattr(saved, field), field
    assert reread.share_projectors == (architecture == "saisa")
    assert reread.image_token_id == VOCAB + 3
    assert type(reread.text_config) is transformers.LlamaConfig
    assert type(reread.vision_config) is SaisaPatchEncoderConfig
    assert _comparable(reread.to_dict()) == _comparable(saved.to_dict())
    assert len(loaded.projectors) == (2 if architecture == "saisa" else 1)
    # SaisaConfig alone round-trips too.
    config_dir = tmp_path / "config_only"
    saved.save_pretrained(config_dir)
    assert _comparable(SaisaConfig.from_pretrained(config_dir).to_dict()) == _comparable(saved.to_dict())


def _comparable(config_dict):
    """A config dict without what loading fills in (the dtype of the weights, the folder's name)."""
    if not isinstance(config_dict, dict):
        return config_dict
    return {key: _comparable(value) for key, value in config_dict.items() if key not in ("dtype", "_name_or_path")}


# --------------------------------------------------------------------------------------------
# 7. Wrapping an existing causal LM
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_from_text_model_leaves_the_language_model_untouched(family, architecture):
    torch.manual_seed(32)
    llm_class = transformers.LlamaForCausalLM if family == "llama" else transformers.Qwen3ForCausalLM
    llm = llm_class(_text_config(family)).eval()
    state = {name: tensor.clone() for name, tensor in llm.state_dict().items()}
    text_only = torch.tensor([_text(9, seed=33)])
    with torch.no_grad():
        plain = llm(text_only).logits

    implementation = llm.config._attn_implementation
    model = SaisaForConditionalGeneration.from_text_model(llm, architecture=architecture).eval()
    assert model.language_model is llm
    assert llm.config._attn_implementation == implementation  # not reset by the parent config
    after = llm.state_dict()
    assert after.keys() == state.keys()
    assert all(torch.equal(after[name], state[name]) for name in state)
    assert model.config.image_token_id == VOCAB  # None -> the text vocabulary size
    assert model.config.architecture == architecture
    assert len(model.projectors) == (2 if architecture == "saisa" else 1)

    # With no image the model is the LM it wraps; with one it runs.
    torch.testing.assert_close(_logits(model, text_only), plain, rtol=0, atol=ATOL)
    ids = torch.tensor([_sequence(2, 3, seed=34)])
    logits = _logits(model, ids, pixel_values=_pixels(1, seed=35))
    assert logits.shape == (1, ids.shape[1], VOCAB) and bool(torch.isfinite(logits).all())

    chosen = SaisaForConditionalGeneration.from_text_model(copy.deepcopy(llm), architecture=architecture,
                                                           image_token_id=7)
    assert chosen.config.image_token_id == 7


# --------------------------------------------------------------------------------------------
# 8. Shared projectors (stage 1) and untying them (stage 2)
# --------------------------------------------------------------------------------------------
def test_shared_projectors_use_projector_zero_and_untie_copies_it():
    model = _build("saisa", seed=36, share_projectors=True)
    ids = torch.tensor([_sequence(2, 5, seed=37)])
    features = _features(1, seed=38)
    shared = _logits(model, ids, image_features=features)
    with torch.no_grad():
        for parameter in model.projectors[1].parameters():
            parameter.add_(torch.randn_like(parameter))
    assert torch.equal(_logits(model, ids, image_features=features), shared)  # projector 1 unused

    model.untie_projectors()
    assert model.config.share_projectors is False
    reference = model.projectors[0].state_dict()
    for projector in model.projectors[1:]:
        state = projector.state_dict()
        assert all(torch.equal(state[name], reference[name]) for name in reference)
        assert all(state[name].data_ptr() != reference[name].data_ptr() for name in reference)  # copies
    assert torch.equal(_logits(model, ids, image_features=features), shared)  # same function right after

    with torch.no_grad():
        for parameter in model.projectors[1].parameters():
            parameter.add_(torch.randn_like(parameter))
    untied = _logits(model, ids, image_features=features)
    assert (untied[:, -5:] - shared[:, -5:]).abs().max() > 1e-4  # now layer 1 uses its own projector

    with pytest.raises(InputError, match="untie_projectors: architecture: expected 'saisa'.*got 'llava'"):
        _build("llava").untie_projectors()


# --------------------------------------------------------------------------------------------
# 9. FLOPs
# --------------------------------------------------------------------------------------------
def test_analytic_flops_at_7b_scale():
    vicuna = dict(hidden_size=4096, intermediate_size=11008, num_hidden_layers=32, num_attention_heads=32,
                  num_key_value_heads=32)
    counts = flops(vicuna, n_visual=576, n_text=64, vision_dim=1024)
    assert 0.32 <= counts["saisa"] / counts["llava"] <= 0.36
    assert 0.80 <= counts["naevit_llava"] / counts["llava"] <= 0.86
    assert counts["projector_params_per_layer"] == 20_979_712
    assert counts["projector_params_total"] == 20_979_712 * 32
    # The hand-computed 7B table (8.53 / 7.10 / 2.86 TF) within 1%: the formula gives 8.504 / 7.074 / 2.860.
    assert counts["llava"] == pytest.approx(8.53e12, rel=1e-2)
    assert counts["naevit_llava"] == pytest.approx(7.10e12, rel=1e-2)
    assert counts["saisa"] == pytest.approx(2.86e12, rel=1e-2)
    # The same numbers from a dict without head counts (no GQA) and with vision_dim inside it.
    again = flops(dict(vicuna, num_attention_heads=None, num_key_value_heads=None, vision_dim=1024), 576, 64)
    assert again == counts


def test_projector_parameter_count_matches_the_modules():
    model = _build("saisa")
    counted = sum(p.numel() for p in model.projectors[0].parameters())
    assert counted == flops(model.config, N_V, 4)["projector_params_per_layer"] == D_V * 64 + 64 + 64 * 64 + 64


def _measured_decoder_flops(model, input_ids, image_features):
    """FlopCounterMode's count of one forward, less the vision tower, lm_head and a single (LLaVA) projector."""
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(input_ids, image_features=image_features, use_cache=False)
    per_module = {name.split(".", 1)[-1] if "." in name else name: sum(ops.values())
                  for name, ops in counter.get_flop_counts().items()}
    total = counter.get_total_flops()
    excluded = per_module.get("vision_tower", 0) + per_module["language_model.lm_head"]
    if model.config.architecture != "saisa":  # the input projector is not in the analytic count
        excluded += per_module["projectors.0"]
    return total - excluded


def test_analytic_flops_match_a_measured_count():
    """With the plain attention path (a dense Tq x Tk score matrix, as the formula counts), the
    matmul FLOPs counted by torch equal the formula exactly, at n_v = 64 >> n_t = 4 (four images)."""
    prefix, text, n_images = 1, 3, 4
    ids = torch.tensor([_sequence(prefix, text, n_images=n_images, seed=39)])
    features = _features(n_images, seed=40)
    measured, analytic = {}, {}
    for architecture in ARCHITECTURES:
        model = _build(architecture, attention_backend="torch")
        model.language_model.set_attn_implementation("eager")  # LLaVA: dense N x N scores, as counted
        measured[architecture] = _measured_decoder_flops(model, ids, features)
        analytic[architecture] = flops(model.config, n_visual=N_V * n_images, n_text=prefix + text)[architecture]
    assert measured == pytest.approx(analytic, rel=1e-9)
    assert measured["saisa"] < measured["naevit_llava"] < measured["llava"]
    ratio = measured["saisa"] / measured["llava"]
    assert ratio == pytest.approx(analytic["saisa"] / analytic["llava"], rel=0.15)


# --------------------------------------------------------------------------------------------
# 10. Bad input
# --------------------------------------------------------------------------------------------
def test_bad_inputs_name_the_problem(models):
    model = models["saisa"]
    ids = torch.tensor([_sequence(2, 3, seed=41)])
    with pytest.raises(InputError, match="SaisaForConditionalGeneration: pixel_values: expected pixel_values or "
                                         "image_features for the 16 image placeholder"):
        model(ids)
    too_many = torch.tensor([_sequence(2, 3, n_images=2, seed=41)])
    with pytest.raises(InputError, match="32 image placeholders.*got 1 image"):
        model(too_many, pixel_values=_pixels(1, seed=42))
    with pytest.raises(InputError, match="16 image placeholders.*got 2 image"):
        model(ids, image_features=_features(2, seed=42))
    with pytest.raises(InputError, match="image_features: expected shape .*vision_config.hidden_size"):
        model(ids, image_features=torch.randn(1, N_V, D_V + 1))
    with pytest.raises(InputError, match="inputs_embeds"):
        model(ids, inputs_embeds=torch.randn(1, ids.shape[1], 64))
    with pytest.raises(InputError, match="attention_mask: expected shape"):
        model(ids, image_features=_features(1, seed=42), attention_mask=torch.ones(1, ids.shape[1] + 1))


def test_token_ids_past_the_vocabulary_and_labels_of_the_wrong_length(models, monkeypatch):
    features = _features(1, seed=42)
    for architecture in ARCHITECTURES:
        model = models[architecture]
        ids = torch.tensor([_sequence(2, 3, seed=41)])
        past = ids.clone()
        past[0, -1] = IMAGE + 1  # past the text vocabulary and not the placeholder (IMAGE = VOCAB)
        with pytest.raises(InputError, match=rf"input_ids: expected token ids in \[0, {VOCAB}\).*got {IMAGE + 1}"):
            model(past, image_features=features)
        negative = ids.clone()
        negative[0, 0] = -3
        with pytest.raises(InputError, match="input_ids: expected token ids.*got -3"):
            model(negative, image_features=features)
        # labels are checked by shape, always (no value read)
        with pytest.raises(InputError, match=r"labels: expected the shape of input_ids \(1, \d+\), got a int64 "
                                             r"tensor of shape \(1, 3\)"):
            model(ids, image_features=features, labels=ids[:, :3])
    # The value check reads the ids (a device sync): it runs on CPU or when ICML26_CHECK_VALUES=1 only.
    # (the rule itself is tested in tests/test_kernels_backend.py; the model uses that one helper)
    import icml26.kernels
    import icml26.models.saisa.modeling as saisa_module

    assert saisa_module.values_checked is icml26.kernels.values_checked


def test_bad_configs_name_the_problem():
    with pytest.raises(InputError, match="SaisaConfig: architecture: expected one of .*got 'blip'"):
        SaisaConfig(text_config=_text_config(), architecture="blip")
    gpt2 = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=VOCAB)
    for architecture in ("saisa", "naevit_llava"):
        with pytest.raises(InputError, match="SaisaConfig: text_config: expected a text config of type.*got 'gpt2'"):
            SaisaConfig(text_config=gpt2, architecture=architecture)
    # LLaVA drives no decoder layer itself: any causal LM will do.
    config = SaisaConfig(text_config=gpt2, architecture="llava")
    torch.manual_seed(43)
    model = SaisaForConditionalGeneration(config).eval()
    logits = _logits(model, torch.tensor([_sequence(2, 3, seed=44)]), image_features=_features(1, seed=45))
    assert logits.shape == (1, 2 + N_V + 3, VOCAB)


# --------------------------------------------------------------------------------------------
# 11. Training
# --------------------------------------------------------------------------------------------
def test_labels_give_next_token_loss_on_answer_tokens_only(models):
    model = models["saisa"]
    prefix, text = 2, 5
    ids = torch.tensor([_sequence(prefix, text, seed=46)])
    labels = ids.clone()
    labels[:, :prefix + N_V + 2] = IGNORE_INDEX  # the answer: the last 3 tokens
    kept = labels.clone()
    features = _features(1, seed=47)
    with torch.no_grad():
        out = model(ids, image_features=features, labels=labels)
    assert torch.equal(labels, kept)  # the caller's labels are not modified
    expected = torch.nn.functional.cross_entropy(out.logits[0, -4:-1], ids[0, -3:])
    torch.testing.assert_close(out.loss, expected, rtol=0, atol=1e-6)
    # Labels everywhere: those on visual slots and the one predicted by the last visual row are ignored.
    with torch.no_grad():
        everywhere = model(ids, image_features=features, labels=ids.masked_fill(ids == IMAGE, VOCAB - 1)).loss
    start = prefix + N_V
    rows = torch.cat([torch.arange(prefix - 1), torch.arange(start, ids.shape[1] - 1)])
    expected = torch.nn.functional.cross_entropy(out.logits[0, rows], ids[0, rows + 1])
    torch.testing.assert_close(everywhere, expected, rtol=0, atol=1e-6)


def test_a_few_adamw_steps_reduce_the_answer_loss_and_train_the_projectors():
    model = _build("saisa", seed=48).train()
    sequences = [_sequence(2, 6, seed=49), _sequence(3, 5, seed=50)]
    ids, mask = _left_pad(sequences)
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)
    labels[:, :-3] = IGNORE_INDEX  # the last 3 tokens of each sample are the answer
    pixels = _pixels(2, seed=51)

    loss = model(ids, attention_mask=mask, pixel_values=pixels, labels=labels).loss
    loss.backward()
    for i, projector in enumerate(model.projectors):  # reached only through the visual keys and values
        for name, parameter in projector.named_parameters():
            assert parameter.grad is not None and parameter.grad.abs().sum() > 0, f"projector {i}.{name}"
    for layer in model.language_model.model.layers:
        assert layer.self_attn.k_proj.weight.grad.abs().sum() > 0

    model.zero_grad()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = model(ids, attention_mask=mask, pixel_values=pixels, labels=labels).loss
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0], losses
