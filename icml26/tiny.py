"""Tiny random-weight causal LMs with a locally trained tokenizer, built offline.

Tests and quick experiments need a *real* Hugging Face checkpoint folder: something that
``AutoModelForCausalLM.from_pretrained(path)``, ``AutoTokenizer.from_pretrained(path)``,
``model.generate``, ``tokenizer.apply_chat_template(messages, tools=[...])``, TRL's trainers and
``transformers serve <path>`` all accept. The usual answer is a tiny model from the Hub
(``hf-internal-testing/...``, ``trl-internal-testing/...``), but the Hub is unreachable here and
in CI, and no library builds such a folder from nothing: transformers can make a random model from
a config, but not a tokenizer, and a tokenizer needs a vocabulary that someone trained. So this
module does it by hand:

1. a byte-level BPE tokenizer is trained with the ``tokenizers`` library on text that ships inside
   installed packages (scikit-learn's dataset descriptions and a fixed, sorted selection of Python
   standard-library sources), so the result is deterministic and needs no download;
2. it is wrapped as a transformers fast tokenizer with Qwen2.5-style special tokens and TRL's
   bundled Qwen2.5 chat template, byte for byte, so TRL recognises the template (and knows how
   to parse tool calls) exactly as it does for a real Qwen2.5 checkpoint; the matching response
   template (TRL's) is stored too, so ``tokenizer.parse_response`` and ``transformers serve`` parse tool
   calls for either family;
3. a small Llama or Qwen3 model (grouped-query attention) is initialised with a fixed seed;
4. both are written with ``save_pretrained`` into a cache folder named by a hash of everything
   that determines the result, built in a temporary sibling folder and renamed into place, so
   concurrent processes never see a half-written checkpoint.

Typical use::

    from icml26.tiny import build_tiny_model, load_tiny_model

    path = build_tiny_model("qwen3")          # a folder; a few seconds the first time
    model, tokenizer = load_tiny_model()      # the Llama one, loaded and in eval mode

The weights are random: generations are gibberish, but every code path (tokenisation, chat
templates, tool-call parsing, generation, training steps, serving) runs as with a real model.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import described, input_error
from .utils import cache_dir as _cache_root
from .validation import check_choice, check_int

if TYPE_CHECKING:  # heavy imports stay out of module import; a cached build needs none of them
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = [
    "FAMILIES",
    "FORMAT_VERSION",
    "SPECIAL_TOKENS",
    "build_tiny_model",
    "build_word_tokenizer",
    "default_cache_dir",
    "load_tiny_model",
    "tiny_model_for_tokenizer",
]

#: Bump when the layout or content of a built folder changes, so old caches are not reused.
FORMAT_VERSION = 1

#: Supported model families, mapped to their transformers config class names.
FAMILIES: dict[str, str] = {"llama": "LlamaConfig", "qwen3": "Qwen3Config"}

ENDOFTEXT = "<|endoftext|>"
IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
#: Control tokens: special (dropped by ``decode(..., skip_special_tokens=True)``).
CONTROL_TOKENS: tuple[str, ...] = (ENDOFTEXT, IM_START, IM_END)
#: Tool-call markers: single ids, but *not* special, as in Qwen2.5, so that a decode with
#: ``skip_special_tokens=True`` keeps them and tool calls can still be parsed from the text.
TOOL_TOKENS: tuple[str, ...] = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")
#: Every token that is always encoded as one id.
SPECIAL_TOKENS: tuple[str, ...] = CONTROL_TOKENS + TOOL_TOKENS

# Training text: all of scikit-learn's dataset descriptions plus these standard-library modules,
# in this order, up to _MAX_CORPUS_BYTES (about 0.3 s of BPE training). Missing files are skipped.
_STDLIB_FILES: tuple[str, ...] = (
    "argparse.py",
    "ast.py",
    "base64.py",
    "bisect.py",
    "calendar.py",
    "collections/__init__.py",
    "contextlib.py",
    "copy.py",
    "csv.py",
    "dataclasses.py",
    "difflib.py",
    "enum.py",
    "fractions.py",
    "functools.py",
    "heapq.py",
    "json/__init__.py",
    "json/decoder.py",
    "json/encoder.py",
    "os.py",
    "pprint.py",
    "random.py",
    "shlex.py",
    "shutil.py",
    "statistics.py",
    "string.py",
    "tempfile.py",
    "textwrap.py",
    "typing.py",
)
_MAX_CORPUS_BYTES = 1 << 20
_MIN_VOCAB = 256 + len(SPECIAL_TOKENS)  # every byte plus the special tokens
_REQUIRED_FILES = ("config.json", "generation_config.json", "model.safetensors", "tokenizer.json")
_META_FILE = "icml26_tiny.json"


def default_cache_dir() -> Path:
    """Return the folder under which tiny models are cached.

    ``$ICML26_CACHE/tiny`` when the ``ICML26_CACHE`` environment variable is set, else
    ``~/.cache/icml26/tiny``. The folder is not created here.
    """
    return _cache_root("tiny")


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def _validate(
    family: str,
    vocab_size: int | None,
    hidden_size: int,
    num_layers: int,
    num_heads: int,
    num_kv_heads: int,
    intermediate_size: int,
    max_position_embeddings: int,
    seed: int,
    function: str = "build_tiny_model",
) -> None:
    check_choice(function, "family", family, sorted(FAMILIES))
    for name, value in (
        *((("vocab_size", vocab_size),) if vocab_size is not None else ()),
        ("hidden_size", hidden_size),
        ("num_layers", num_layers),
        ("num_heads", num_heads),
        ("num_kv_heads", num_kv_heads),
        ("intermediate_size", intermediate_size),
        ("max_position_embeddings", max_position_embeddings),
    ):
        check_int(function, name, value, low=1)
    check_int(function, "seed", seed, low=0)
    if vocab_size is not None and vocab_size < _MIN_VOCAB:  # None: the vocabulary comes from a given tokenizer
        raise input_error(function, "vocab_size", f"at least {_MIN_VOCAB} (256 byte tokens + "
                                                  f"{len(SPECIAL_TOKENS)} special tokens)", vocab_size)
    if hidden_size % num_heads:
        raise input_error(function, "num_heads", f"a divisor of hidden_size ({hidden_size}), since head_dim = "
                                                 "hidden_size // num_heads", num_heads)
    if num_heads % num_kv_heads:
        raise input_error(function, "num_kv_heads", f"a divisor of num_heads ({num_heads}) for grouped-query "
                                                    "attention", num_kv_heads)
    head_dim = hidden_size // num_heads
    if head_dim % 2:
        raise input_error(function, "hidden_size", "an even head_dim = hidden_size // num_heads (rotary embeddings "
                                                   "rotate pairs of channels)",
                          described(f"{hidden_size} // {num_heads} = {head_dim}"))


def _cache_key(args: dict[str, Any]) -> str:
    key = {
        "format_version": FORMAT_VERSION,
        **args,
        # The weights and the tokenizer depend on these libraries, and the training text on the
        # Python and scikit-learn versions that ship it.
        "transformers": _version("transformers"),
        "tokenizers": _version("tokenizers"),
        "trl": _version("trl"),
        "torch": _version("torch"),
        "scikit-learn": _version("scikit-learn"),
        "python": platform.python_version(),
    }
    blob = json.dumps(key, sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def _is_complete(folder: Path) -> bool:
    return all((folder / name).is_file() for name in _REQUIRED_FILES)


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _training_texts() -> list[str]:
    """The tokenizer's training text: files that ship with installed packages, in a fixed order."""
    paths: list[Path] = []
    sklearn_dir = _package_dir("sklearn")
    if sklearn_dir is not None:
        paths += sorted((sklearn_dir / "datasets" / "descr").glob("*.rst"))
    if getattr(os, "__file__", None):
        stdlib = Path(os.__file__).parent
        paths += [stdlib / name for name in _STDLIB_FILES]

    texts: list[str] = []
    budget = _MAX_CORPUS_BYTES
    for path in paths:
        if budget <= 0:
            break
        if not path.is_file():
            continue
        data = path.read_bytes()[:budget]
        budget -= len(data)
        texts.append(data.decode("utf-8", errors="ignore"))
    if sum(map(len, texts)) < 10_000:
        raise RuntimeError(
            "could not find enough text to train the tiny tokenizer (looked for scikit-learn's "
            f"datasets/descr/*.rst and standard-library sources next to {getattr(os, '__file__', None)!r})"
        )
    return texts


def _chat_template() -> str:
    trl_dir = _package_dir("trl")
    path = None if trl_dir is None else trl_dir / "chat_templates" / "qwen2_5.jinja"
    if path is None or not path.is_file():
        raise RuntimeError(
            "the tiny tokenizer uses TRL's bundled Qwen2.5 chat template (trl/chat_templates/qwen2_5.jinja), "
            "which was not found; install trl"
        )
    # Read exactly as TRL does, so that TRL's identity check against its known templates matches.
    return path.read_text(encoding="utf-8")


def _build_tokenizer(vocab_size: int, model_max_length: int):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast  # an alias of TokenizersBackend in transformers 5
    from trl.chat_template_utils import qwen3_template

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        # The tool tokens are appended afterwards as non-special added tokens.
        vocab_size=vocab_size - len(TOOL_TOKENS),
        min_frequency=1,
        special_tokens=list(CONTROL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    texts = _training_texts()
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])

    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=None,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        unk_token=None,
        model_max_length=model_max_length,
        clean_up_tokenization_spaces=False,  # exact decode(encode(text)) round trips
        chat_template=_chat_template(),
        # What TRL's add_response_schema sets for this template: `transformers serve` reads it from
        # the tokenizer to turn <tool_call> blocks into OpenAI tool calls, for either family.
        response_template=qwen3_template,
    )


def _build_model(family: str, tokenizer, args: dict[str, Any]):
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, GenerationConfig

    eos_id = tokenizer.convert_tokens_to_ids(IM_END)
    pad_id = tokenizer.convert_tokens_to_ids(ENDOFTEXT)
    common = dict(
        vocab_size=len(tokenizer),  # every id the tokenizer can produce, special tokens included
        hidden_size=args["hidden_size"],
        intermediate_size=args["intermediate_size"],
        num_hidden_layers=args["num_layers"],
        num_attention_heads=args["num_heads"],
        num_key_value_heads=args["num_kv_heads"],
        head_dim=args["hidden_size"] // args["num_heads"],
        max_position_embeddings=args["max_position_embeddings"],
        tie_word_embeddings=False,
        # As in Qwen2.5: no BOS is prepended by the tokenizer; <|endoftext|> doubles as BOS and pad.
        bos_token_id=pad_id,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        dtype="float32",
    )
    if family == "qwen3":
        common.update(use_sliding_window=False, sliding_window=None, max_window_layers=args["num_layers"])
    config = getattr(transformers, FAMILIES[family])(**common)

    with torch.random.fork_rng(devices=[]):  # leave the caller's RNG state alone
        torch.manual_seed(args["seed"])
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.generation_config = GenerationConfig(bos_token_id=pad_id, eos_token_id=eos_id, pad_token_id=pad_id)
    return model.eval()


def build_tiny_model(
    family: str = "llama",
    *,
    cache_dir: str | os.PathLike[str] | None = None,
    vocab_size: int = 1024,
    hidden_size: int = 64,
    num_layers: int = 2,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 128,
    max_position_embeddings: int = 512,
    seed: int = 0,
) -> Path:
    """Build, or find in the cache, a tiny random-weight causal LM folder and return its path.

    The folder holds a model and its tokenizer written with ``save_pretrained``, so
    ``AutoModelForCausalLM.from_pretrained(path)``, ``AutoTokenizer.from_pretrained(path)``,
    ``model.generate``, ``tokenizer.apply_chat_template(messages, tools=[...])`` and
    ``transformers serve <path>`` work on it without network access.

    Args:
        family: ``"llama"`` (``LlamaConfig``) or ``"qwen3"`` (``Qwen3Config``).
        cache_dir: folder under which built models are kept; defaults to :func:`default_cache_dir`.
            Each build gets a subfolder named ``<family>-<hash>``, where the hash covers every
            argument below, the library versions involved and :data:`FORMAT_VERSION`.
        vocab_size: size of the tokenizer's vocabulary, special tokens included (at least 263:
            256 byte tokens + 7 special tokens). The model's ``vocab_size`` is the tokenizer's
            full length, which equals this unless the training text runs out of merges
            (around 17,000 tokens with the text used here; larger requests are capped there).
        hidden_size: model width.
        num_layers: number of decoder layers.
        num_heads: attention heads; must divide ``hidden_size`` (``head_dim = hidden_size //
            num_heads``, which must be even for rotary embeddings).
        num_kv_heads: key/value heads for grouped-query attention; must divide ``num_heads``.
        intermediate_size: MLP width.
        max_position_embeddings: longest sequence; also the tokenizer's ``model_max_length``.
        seed: torch seed for the weight initialisation; same arguments and seed give the same
            weights (and the tokenizer is deterministic regardless of the seed).

    Returns:
        The checkpoint folder.

    Raises:
        ValueError: for an unknown family or inconsistent sizes.

    The first call takes a few seconds (training the tokenizer, initialising and saving the
    model); later calls with the same arguments only hash them and check the folder exists. The
    build happens in a temporary sibling folder that is renamed into place, so concurrent
    processes (e.g. parallel pytest workers) never see a partial folder; if two build at once,
    one result wins and the other is discarded.
    """
    _validate(
        family,
        vocab_size,
        hidden_size,
        num_layers,
        num_heads,
        num_kv_heads,
        intermediate_size,
        max_position_embeddings,
        seed,
    )
    args = {
        "family": family,
        "vocab_size": vocab_size,
        "hidden_size": hidden_size,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "num_kv_heads": num_kv_heads,
        "intermediate_size": intermediate_size,
        "max_position_embeddings": max_position_embeddings,
        "seed": seed,
    }
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    final = root / f"{family}-{_cache_key(args)}"
    if _is_complete(final):
        return final

    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.tmp-", dir=root))
    try:
        tmp.chmod(0o755)  # mkdtemp makes it private; the cache may be shared
        tokenizer = _build_tokenizer(vocab_size, max_position_embeddings)
        model = _build_model(family, tokenizer, args)
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        meta = {"format_version": FORMAT_VERSION, "built_by": "icml26.tiny.build_tiny_model", "args": args}
        (tmp / _META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        if final.exists() and not _is_complete(final):
            # Not something this function leaves behind (it renames complete folders only):
            # a folder damaged by hand. Replace it.
            shutil.rmtree(final, ignore_errors=True)
        try:
            os.rename(tmp, final)
        except OSError:
            if not _is_complete(final):  # lost no race: a real error
                raise
            # Another process finished the same build first; use its folder.
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


#: How :func:`build_word_tokenizer` splits text: every whitespace character, every digit, every run of
#: letters and every other character is one token, so a number or a code like ``K73`` is always the same
#: sequence of ids wherever it appears (byte-level BPE merges a leading space into some digits and letters
#: but not others, which a tiny model must then learn to map onto each other).
WORD_PATTERN = r"\s|\d|[A-Za-z]+|[^\sA-Za-z\d]"


def build_word_tokenizer(texts, *, model_max_length: int = 1024, chat_template: str | None = None):
    """A word-level tokenizer whose vocabulary is every token of ``texts`` (see :data:`WORD_PATTERN`).

    For toy tasks with a small closed vocabulary (a few hundred words, as Opt-Miner's
    R-GRPO toy needs): the special and tool tokens, the chat template (TRL's Qwen2.5 one unless
    ``chat_template`` is given) and the response template are those of :func:`build_tiny_model`'s
    tokenizer, every printable ASCII character is in the vocabulary, and ``decode`` concatenates
    tokens exactly, so ``decode(encode(text)) == text`` for any text made of known words. Words not
    in ``texts`` become ``<|unk|>``. Deterministic: the vocabulary is sorted.
    """
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from trl.chat_template_utils import qwen3_template

    unk = "<|unk|>"
    words = {chr(c) for c in range(32, 127)} | {"\n", "\t"}
    for text in texts:
        words.update(re.findall(WORD_PATTERN, text))
    vocab = {token: i for i, token in enumerate([*CONTROL_TOKENS, unk, *sorted(words - set(SPECIAL_TOKENS))])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(WORD_PATTERN), behavior="isolated")
    tok.decoder = decoders.Fuse()
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in (*CONTROL_TOKENS, unk)])
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TOOL_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, bos_token=None, eos_token=IM_END, pad_token=ENDOFTEXT, unk_token=unk,
        model_max_length=model_max_length, clean_up_tokenization_spaces=False,
        chat_template=chat_template or _chat_template(), response_template=qwen3_template)


def tiny_model_for_tokenizer(tokenizer, family: str = "qwen3", *, hidden_size: int = 64, num_layers: int = 2,
                             num_heads: int = 4, num_kv_heads: int = 2, intermediate_size: int = 128,
                             max_position_embeddings: int = 1024, seed: int = 0) -> PreTrainedModel:
    """A random-weight model of ``family`` sized for ``tokenizer`` (in memory, nothing cached).

    The same initialisation as :func:`build_tiny_model`, for a tokenizer built elsewhere, e.g. by
    :func:`build_word_tokenizer`.
    """
    _validate(family, None, hidden_size, num_layers, num_heads, num_kv_heads,
              intermediate_size, max_position_embeddings, seed, "tiny_model_for_tokenizer")
    args = {"hidden_size": hidden_size, "num_layers": num_layers, "num_heads": num_heads,
            "num_kv_heads": num_kv_heads, "intermediate_size": intermediate_size,
            "max_position_embeddings": max_position_embeddings, "seed": seed}
    return _build_model(family, tokenizer, args)


def load_tiny_model(
    family: str = "llama", **kwargs: Any
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """Build (or find) a tiny model with :func:`build_tiny_model` and load it.

    Args:
        family: ``"llama"`` or ``"qwen3"``.
        **kwargs: any keyword argument of :func:`build_tiny_model` (``cache_dir``, sizes, ``seed``).

    Returns:
        ``(model, tokenizer)``: the ``AutoModelForCausalLM`` in eval mode on the CPU in float32,
        and its ``AutoTokenizer``. Both are read from local files only.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(family, **kwargs)
    model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True)
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    return model.eval(), tokenizer
