"""Tests for icml26.tiny: offline tiny models with a locally trained tokenizer."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
import torch

from icml26 import InputError, tiny
from icml26.tiny import SPECIAL_TOKENS, build_tiny_model, default_cache_dir, load_tiny_model

from transformers import AutoModelForCausalLM, AutoTokenizer

FAMILIES = ["llama", "qwen3"]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string", "description": "The city name."}},
            "required": ["city"],
        },
    },
}
WEATHER_MESSAGES = [
    {"role": "user", "content": "weather in Paris?"},
    {
        "role": "assistant",
        "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}],
    },
    {"role": "tool", "name": "get_weather", "content": "sunny"},
]


@pytest.fixture(scope="session")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("tiny-cache")


@pytest.fixture(scope="session")
def built(cache_dir) -> dict[str, Path]:
    return {family: build_tiny_model(family, cache_dir=cache_dir) for family in FAMILIES}


@pytest.fixture(scope="session")
def loaded(built, cache_dir):
    return {family: load_tiny_model(family, cache_dir=cache_dir) for family in FAMILIES}


def _leftover_temps(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if ".tmp-" in p.name]


# --- building and loading ---------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_builds_a_loadable_checkpoint_with_gqa(family, built, loaded):
    path = built[family]
    assert path.is_dir() and path.name.startswith(f"{family}-")
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json"):
        assert (path / name).is_file(), name

    model, tok = loaded[family]
    cfg = model.config
    assert cfg.model_type == family
    assert not model.training
    assert cfg.num_key_value_heads < cfg.num_attention_heads
    assert cfg.num_attention_heads % cfg.num_key_value_heads == 0
    assert cfg.head_dim == cfg.hidden_size // cfg.num_attention_heads
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads) == (64, 2, 4, 2)
    assert model.get_input_embeddings().weight.dtype == torch.float32

    # Every tokenizer id has an embedding row; special ids agree between model and tokenizer.
    assert cfg.vocab_size == len(tok) == 1024
    im_end = tok.convert_tokens_to_ids("<|im_end|>")
    endoftext = tok.convert_tokens_to_ids("<|endoftext|>")
    assert tok.eos_token == "<|im_end|>" and tok.eos_token_id == im_end
    assert tok.pad_token == "<|endoftext|>" and tok.pad_token_id == endoftext
    assert cfg.eos_token_id == im_end and cfg.pad_token_id == endoftext
    assert cfg.bos_token_id is None or 0 <= cfg.bos_token_id < cfg.vocab_size
    assert model.generation_config.eos_token_id == im_end
    assert model.generation_config.pad_token_id == endoftext


@pytest.mark.parametrize("family", FAMILIES)
def test_from_pretrained_matches_in_memory_model(family, built, loaded, tmp_path):
    model, tok = loaded[family]
    ids = tok("def f(x):\n    return x + 1  # héllo", return_tensors="pt").input_ids

    # The same construction in memory (same seed) gives the same logits as the saved folder...
    args = json.loads((built[family] / "icml26_tiny.json").read_text())["args"]
    in_memory = tiny._build_model(family, tok, args)
    with torch.no_grad():
        expected = in_memory(ids).logits
        assert torch.equal(model(ids).logits, expected)

    # ...and a save/load round trip of the loaded model changes nothing.
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path, local_files_only=True).eval()
    with torch.no_grad():
        assert torch.equal(reloaded(ids).logits, expected)


def test_building_leaves_global_rng_alone(built):
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    sizes = {"hidden_size": 32, "intermediate_size": 64, "num_layers": 1, "num_heads": 2, "num_kv_heads": 1}
    args = {**sizes, "max_position_embeddings": 64, "seed": 7}
    tiny._build_model("llama", AutoTokenizer.from_pretrained(built["llama"]), args)
    assert torch.equal(torch.rand(3), expected)


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_greedy(family, loaded):
    model, tok = loaded[family]
    enc = tok.apply_chat_template(
        [{"role": "user", "content": "Say hi"}], add_generation_prompt=True, return_tensors="pt", return_dict=True
    )
    prompt_len = enc["input_ids"].shape[1]
    out = model.generate(**enc, max_new_tokens=5, do_sample=False)
    new = out[0, prompt_len:]
    assert 1 <= new.numel() <= 5
    assert int(out.min()) >= 0 and int(out.max()) < model.config.vocab_size
    assert isinstance(tok.decode(new), str)
    # Greedy decoding is deterministic.
    assert torch.equal(model.generate(**enc, max_new_tokens=5, do_sample=False), out)


# --- cache ------------------------------------------------------------------------------------


def test_cached_call_is_fast_and_does_not_rebuild(built, cache_dir, monkeypatch):
    path = built["llama"]
    stamps = {p.name: p.stat().st_mtime_ns for p in [path, *path.iterdir()]}

    def no_build(*args, **kwargs):
        raise AssertionError("a cached call must not rebuild")

    monkeypatch.setattr(tiny, "_build_tokenizer", no_build)
    monkeypatch.setattr(tiny, "_build_model", no_build)
    start = time.perf_counter()
    again = build_tiny_model("llama", cache_dir=cache_dir)
    elapsed = time.perf_counter() - start

    assert again == path
    assert elapsed < 0.5, elapsed
    assert {p.name: p.stat().st_mtime_ns for p in [path, *path.iterdir()]} == stamps


def test_different_arguments_get_different_folders(built, cache_dir):
    other = build_tiny_model("llama", cache_dir=cache_dir, num_layers=1, hidden_size=32, intermediate_size=64)
    reseeded = build_tiny_model("llama", cache_dir=cache_dir, seed=1)
    assert len({built["llama"], built["qwen3"], other, reseeded}) == 4
    assert json.loads((other / "config.json").read_text())["num_hidden_layers"] == 1

    from safetensors.torch import load_file

    a = load_file(built["llama"] / "model.safetensors")
    b = load_file(reseeded / "model.safetensors")
    assert a.keys() == b.keys()
    assert not all(torch.equal(a[k], b[k]) for k in a)


def test_same_arguments_and_seed_give_identical_weights(built, tmp_path):
    from safetensors.torch import load_file

    fresh = build_tiny_model("llama", cache_dir=tmp_path)  # a second, independent build
    assert fresh != built["llama"] and fresh.name == built["llama"].name
    a = load_file(built["llama"] / "model.safetensors")
    b = load_file(fresh / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # The tokenizer training is deterministic too.
    assert (fresh / "tokenizer.json").read_bytes() == (built["llama"] / "tokenizer.json").read_bytes()


def test_losing_the_rename_race_uses_the_winners_folder(built, tmp_path, monkeypatch):
    real_rename = os.rename

    def rename_after_another_process_won(src, dst):
        shutil.copytree(built["llama"], dst)  # the other process finished first
        return real_rename(src, dst)  # fails: dst is now a non-empty folder

    monkeypatch.setattr(tiny.os, "rename", rename_after_another_process_won)
    path = build_tiny_model("llama", cache_dir=tmp_path)
    assert path == tmp_path / built["llama"].name
    assert (path / "model.safetensors").is_file()
    assert _leftover_temps(tmp_path) == []


def test_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(tiny, "_build_model", broken)
    with pytest.raises(RuntimeError, match="boom"):
        build_tiny_model("llama", cache_dir=tmp_path, num_layers=1)
    assert list(tmp_path.iterdir()) == []


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ICML26_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "tiny"
    monkeypatch.delenv("ICML26_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "icml26" / "tiny"


# --- tokenizer --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Hello, world!",
        "  leading and trailing spaces  ",
        "tabs\tand\nnew\r\nlines\n\n",
        "def f(x):\n    return {'a': [1, 2.5, None]}  # comment",
        "Ünïcödé: naïve café, Größe, 日本語のテキスト, Ελληνικά, русский, עברית, العربية",
        "emoji 🎉👩‍💻 and combining e\u0301 and zero-width\u200bspace",
        'JSON {"name": "get_weather", "arguments": {"city": "Paris"}}',
    ],
)
def test_encode_decode_round_trip(text, loaded):
    _, tok = loaded["llama"]
    ids = tok.encode(text, add_special_tokens=False)
    assert all(0 <= i < len(tok) for i in ids)
    assert tok.decode(ids) == text


def test_special_tokens_are_single_ids(loaded):
    _, tok = loaded["qwen3"]
    ids = [tok.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS]
    assert len(set(ids)) == len(SPECIAL_TOKENS)
    assert all(0 <= i < len(tok) for i in ids)
    for token, token_id in zip(SPECIAL_TOKENS, ids):
        assert tok.encode(token, add_special_tokens=False) == [token_id]
        inside = tok.encode(f"a{token}b", add_special_tokens=False)
        assert inside.count(token_id) == 1
        assert tok.decode(inside) == f"a{token}b"
    # Control tokens are dropped by skip_special_tokens; tool markers are kept (as in Qwen2.5).
    text = "<|im_start|>assistant\n<tool_call>\n{}\n</tool_call><|im_end|>"
    skipped = tok.decode(tok.encode(text, add_special_tokens=False), skip_special_tokens=True)
    assert skipped == "assistant\n<tool_call>\n{}\n</tool_call>"


# --- chat template and tool calls -------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_chat_template_with_tools(family, loaded):
    _, tok = loaded[family]
    text = tok.apply_chat_template(WEATHER_MESSAGES, tools=[WEATHER_TOOL], add_generation_prompt=True, tokenize=False)
    assert json.dumps(WEATHER_TOOL) in text  # the schema, as the template's `tojson` writes it
    assert "<tool_call>" in text and '"get_weather"' in text and '{"city": "Paris"}' in text
    assert "<tool_response>\nsunny\n</tool_response>" in text
    assert text.endswith("<|im_start|>assistant\n")

    enc = tok.apply_chat_template(
        WEATHER_MESSAGES, tools=[WEATHER_TOOL], add_generation_prompt=True, tokenize=True, return_dict=True
    )
    ids = enc["input_ids"]
    assert all(0 <= i < len(tok) for i in ids)
    assert tok.decode(ids) == text
    # Each marker in the text is one id.
    assert ids.count(tok.convert_tokens_to_ids("<tool_call>")) == text.count("<tool_call>") == 3


def test_trl_recognises_template_and_parses_tool_calls(loaded):
    trl_templates = pytest.importorskip("trl.chat_template_utils")
    _, tok = loaded["llama"]
    assert tok.chat_template == trl_templates.qwen2_5_chat_template
    # The copy stored with the tokenizer matches what TRL would set for this template.
    assert tok.response_template == trl_templates.qwen3_template
    assert trl_templates.add_response_schema(tok).response_template == trl_templates.qwen3_template

    completion = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
    ids = tok.encode(completion, add_special_tokens=False)
    parsed = tok.parse_response(tok.decode(ids), prefix="")
    assert parsed["tool_calls"] == [
        {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    ]


# --- argument validation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "gpt2"}, r"build_tiny_model: family: expected one of \['llama', 'qwen3'\], got 'gpt2'"),
        ({"hidden_size": 64, "num_heads": 5}, r"num_heads: expected a divisor of hidden_size \(64\).*got 5$"),
        ({"num_heads": 4, "num_kv_heads": 3}, r"num_kv_heads: expected a divisor of num_heads \(4\).*got 3$"),
        ({"hidden_size": 60, "num_heads": 4}, r"hidden_size: expected an even head_dim.*got 60 // 4 = 15$"),
        ({"vocab_size": 100}, r"vocab_size: expected at least 263 .*got 100$"),
        ({"num_layers": 0}, r"num_layers: expected an int >= 1, got 0$"),
        ({"seed": -1}, r"seed: expected an int >= 0, got -1$"),
    ],
)
def test_bad_arguments_raise(kwargs, message, tmp_path):
    with pytest.raises(InputError, match=message):
        build_tiny_model(cache_dir=tmp_path, **kwargs)
    assert list(tmp_path.iterdir()) == []


# --- word-level tokenizer (toy tasks) -----------------------------------------------------------


@pytest.fixture(scope="module")
def word_tok():
    return tiny.build_word_tokenizer(["Plant K73 makes 42 units per shift.", "capacity of plant K73"])


def test_word_tokenizer_round_trip_and_stable_spelling(word_tok):
    text = "Plant K73 makes 42 units per shift.\n(K73: 42)"
    ids = word_tok.encode(text, add_special_tokens=False)
    assert word_tok.decode(ids) == text
    # a code or a number is the same ids wherever it stands (byte-level BPE spells " 4" and "4" apart)
    code = word_tok.encode("K73", add_special_tokens=False)
    assert code == [word_tok.convert_tokens_to_ids(t) for t in ("K", "7", "3")]
    for context in (" K73", "(K73)", "\nK73."):
        ids = word_tok.encode(context, add_special_tokens=False)
        assert any(ids[i:i + 3] == code for i in range(len(ids)))
    assert word_tok.tokenize("Plant makes") == ["Plant", " ", "makes"]


def test_word_tokenizer_unknown_words_and_special_tokens(word_tok):
    assert word_tok.tokenize("zebra") == ["<|unk|>"]  # not in the texts; single characters always are
    assert word_tok.tokenize("z") == ["z"]
    for token in SPECIAL_TOKENS:
        assert len(word_tok.encode(token, add_special_tokens=False)) == 1
    assert word_tok.eos_token == "<|im_end|>" and word_tok.pad_token != word_tok.eos_token
    assert len(word_tok) < 200  # printable ASCII, the specials and the few words of the texts


def test_word_tokenizer_chat_template_parses_tool_calls():
    from trl.chat_template_utils import qwen3_template

    messages = [{"role": "user", "content": "weather in Paris"}]
    completion = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
    # the vocabulary from the rendered prompt (a first tokenizer renders it), as a toy task builds it
    draft = tiny.build_word_tokenizer([])
    rendered = draft.apply_chat_template(messages, tools=[WEATHER_TOOL], add_generation_prompt=True, tokenize=False)
    assert "<|unk|>" in draft.tokenize(rendered)
    tok = tiny.build_word_tokenizer([rendered, completion])
    assert tok.response_template == qwen3_template
    prompt = tok.apply_chat_template(messages, tools=[WEATHER_TOOL], add_generation_prompt=True, tokenize=False)
    assert prompt == rendered and prompt.endswith("<|im_start|>assistant\n") and "<|unk|>" not in tok.tokenize(prompt)
    ids = tok.encode(completion, add_special_tokens=False)
    assert tok.decode(ids) == completion
    parsed = tok.parse_response(tok.decode(ids), prefix="")
    assert parsed["tool_calls"][0]["function"] == {"name": "get_weather", "arguments": {"city": "Paris"}}


def test_tiny_model_for_tokenizer_fits_and_is_seeded(word_tok):
    a = tiny.tiny_model_for_tokenizer(word_tok, "qwen3", seed=3)
    b = tiny.tiny_model_for_tokenizer(word_tok, "qwen3", seed=3)
    assert a.config.vocab_size >= len(word_tok)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    ids = torch.tensor([word_tok.encode("Plant K73 makes 42", add_special_tokens=False)])
    assert a(input_ids=ids).logits.shape == (1, ids.shape[1], a.config.vocab_size)
    with pytest.raises(InputError, match="tiny_model_for_tokenizer: num_heads"):
        tiny.tiny_model_for_tokenizer(word_tok, "qwen3", hidden_size=64, num_heads=5)
