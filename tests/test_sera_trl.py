"""SERA's exports as a plain TRL user meets them: ``load_dataset("json")`` / ``load_from_disk`` then ``SFTTrainer``.

Two promises are checked on real exported trajectories (the scripted teacher on a real package):

- every export meant for TRL (``trajectories.jsonl``, ``dataset/``) renders each tool call once: the chat template
  prints the arguments as a JSON object, never as an escaped JSON string, and the rendered text is the one the
  in-memory rows give (so the JSON loader's schema inference added no ``null`` keys);
- the recipe of docs/integrations.md (``assistant_only_loss=True`` at a ``max_length`` that holds the longest
  trajectory) trains on every assistant turn, tool-call arguments included, and on nothing else; the same
  check run on the old recipe (``max_length=512``, which keeps only the system prompt) fails.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl")

from icml26.agents.sera import ScriptedTeacher, generate, make_git_repo_from_package  # noqa: E402
from icml26.agents.sera.exporter import OPENAI_JSONL, TRL_JSONL, trl_messages  # noqa: E402
from icml26.utils import IGNORE_INDEX  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("sera_trl")
    repo = make_git_repo_from_package("jmespath", root / "repo")
    out = root / "runs" / "sera"
    generate(repo, ScriptedTeacher(seed=1, q=1.0), out, threshold=0.5, limit=2, progress=False)
    return out


@pytest.fixture(scope="module")
def tiny():
    from icml26.tiny import load_tiny_model

    return load_tiny_model("qwen3", max_position_embeddings=8192)


def _wire_rows(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / OPENAI_JSONL).read_text().splitlines() if line.strip()]


def _calls(messages) -> list[dict]:
    return [c["function"] for m in messages if m["role"] == "assistant" for c in m.get("tool_calls") or ()]


def _loaded(run_dir, name):
    from datasets import load_dataset, load_from_disk

    if name == "dataset":
        return load_from_disk(str(run_dir / "dataset"))
    return load_dataset("json", data_files=str(run_dir / name), split="train")


def double_encoded(text: str) -> int:
    """Tool-call arguments rendered as a JSON string (``"arguments": "{\\"command\\": ...}"``) in ``text``."""
    return text.count('"arguments": "') + text.count('"{\\"')


@pytest.mark.parametrize("name", [TRL_JSONL, "dataset"])
def test_trl_exports_render_every_call_once(run_dir, tiny, name):
    _, tokenizer = tiny
    data = _loaded(run_dir, name)
    wire = {r["id"]: r for r in _wire_rows(run_dir)}
    assert len(data) == len(wire) >= 2
    for row in data:
        text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        assert double_encoded(text) == 0
        calls = _calls(row["messages"])
        assert calls and all(isinstance(c["arguments"], dict) for c in calls)
        for call in calls:
            assert f'"arguments": {json.dumps(call["arguments"], ensure_ascii=False)}' in text
        # what the loader gave renders exactly as the rows in memory: no key was added, none lost
        source = wire[row["id"]]
        expected = tokenizer.apply_chat_template(trl_messages(source["messages"], source["id"]), tools=source["tools"],
                                                 tokenize=False)
        assert text == expected


def test_the_wire_export_is_what_double_encodes(run_dir, tiny):
    """The check above can fail: the OpenAI wire file, loaded and rendered the same way, is double-encoded."""
    _, tokenizer = tiny
    data = _loaded(run_dir, OPENAI_JSONL)
    for row in data:
        text = tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        assert double_encoded(text) >= len(_calls(row["messages"])) > 0


def _trainer(data, tokenizer, model, tmp_path, max_length):
    from trl import SFTConfig, SFTTrainer

    args = SFTConfig(str(tmp_path / "sft"), assistant_only_loss=True, max_length=max_length,
                     per_device_train_batch_size=1, max_steps=1, report_to=[], use_cpu=True, save_strategy="no",
                     disable_tqdm=True)
    return SFTTrainer(model=model, args=args, train_dataset=data, processing_class=tokenizer)


def check_assistant_turns_trained(trainer, rows: list[dict], tokenizer) -> None:
    """Every row of ``rows`` is in the trainer's data, and its collated labels train each assistant turn's tool
    calls (the arguments' tokens included) and no system, user or tool-output text. Raises AssertionError."""
    kept = {row["id"]: row for row in trainer.train_dataset}
    assert set(kept) == {r["id"] for r in rows}, f"trajectories left out of training: {set(kept) ^ {r['id'] for r in rows}}"
    for row in rows:
        example = kept[row["id"]]
        batch = trainer.data_collator([example])
        ids, labels = batch["input_ids"][0].tolist(), batch["labels"][0].tolist()
        spans, current = [], []
        for token, label in zip(ids, labels):
            if label != IGNORE_INDEX:
                assert label == token
                current.append(token)
            elif current:
                spans.append(tokenizer.decode(current))
                current = []
        if current:
            spans.append(tokenizer.decode(current))
        trained = "\n".join(spans)
        assert spans, f"{row['id']}: no token carries loss"
        for call in _calls(row["messages"]):
            encoded = json.dumps({"name": call["name"], "arguments": call["arguments"]}, ensure_ascii=False)
            assert encoded in trained, f"{row['id']}: the call {encoded[:80]} carries no loss"
        assert "<|im_start|>" not in trained  # role headers, system/user/tool turns are masked
        for message in row["messages"]:
            if message["role"] in ("system", "user", "tool") and len(message["content"]) > 40:
                assert message["content"] not in trained


def test_the_documented_recipe_trains_on_every_assistant_turn(run_dir, tiny, tmp_path):
    model, tokenizer = tiny
    data = _loaded(run_dir, TRL_JSONL)
    rows = [dict(r) for r in data]
    lengths = [len(tokenizer.apply_chat_template(r["messages"], tools=r["tools"])["input_ids"]) for r in rows]
    first_assistant = [tokenizer.apply_chat_template(r["messages"][:2], tools=r["tools"], tokenize=False) for r in rows]
    assert min(len(tokenizer(t)["input_ids"]) for t in first_assistant) > 512  # why 512 trained on nothing
    check_assistant_turns_trained(_trainer(data, tokenizer, model, tmp_path, max(lengths)), rows, tokenizer)
    # Negative control: the old recipe's max_length=512 keeps only the system prompt, and the check says so.
    with pytest.raises(AssertionError):
        check_assistant_turns_trained(_trainer(data, tokenizer, model, tmp_path, 512), rows, tokenizer)
