"""Tests of SERA's SFT recipe (icml26.training.sera) on small hand-written trajectories."""

from __future__ import annotations

import copy
import json
import math

import pytest
import torch

from icml26.agents.backends import to_template_messages
from icml26.agents.sera.cli import main_train
from icml26.errors import InputError
from icml26.training.sera import (
    SeraSFTConfig,
    assistant_token_loss,
    build_sft_trainer,
    load_trajectories,
    tokenize_trajectory,
    tool_names,
    train_sera,
    training_chat_template,
    trajectories_to_dataset,
)
from icml26.utils import IGNORE_INDEX

TOOLS = [
    {"type": "function", "function": {"name": "bash", "description": "Run a bash command.", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "str_replace_editor", "description": "View and edit files.",
                                      "parameters": {"type": "object", "properties": {
                                          "command": {"type": "string"}, "path": {"type": "string"},
                                          "old_str": {"type": "string"}, "new_str": {"type": "string"}},
                                          "required": ["command", "path"]}}},
    {"type": "function", "function": {"name": "submit", "description": "Submit.",
                                      "parameters": {"type": "object", "properties": {}}}},
]
SYSTEM = "You are a software engineer fixing a repository."


def _call(i, name, **arguments):
    return {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def trajectory(n, *, fn="parse", obs="87:    def parse(self, expression):", stage="T2", repo="pkg"):
    """A trajectory row in the SVG pipeline's format (arguments as JSON strings, last message a tool output)."""
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"<pr_description>\nThere may be a bug in `{fn}` in pkg/mod{n}.py.\n"
                                    "</pr_description>"},
        {"role": "assistant", "content": "Let me find the function.",
         "tool_calls": [_call(1, "bash", command=f"grep -n 'def {fn}' pkg/mod{n}.py")]},
        {"role": "tool", "tool_call_id": "call_1", "content": obs},
        {"role": "assistant", "content": "",
         "tool_calls": [_call(2, "str_replace_editor", command="str_replace", path=f"pkg/mod{n}.py",
                              old_str="x = 1", new_str="x = 2")]},
        {"role": "tool", "tool_call_id": "call_2", "content": f"The file pkg/mod{n}.py has been edited."},
        {"role": "assistant", "content": None, "tool_calls": [_call(3, "submit")]},
        {"role": "tool", "tool_call_id": "call_3", "content": "Submitted. Final observation text."},
    ]
    return {"id": f"{repo}-{n}", "stage": stage, "messages": messages, "tools": TOOLS, "recall": 1.0,
            "patch": "", "n_changed_lines": 2, "submitted": True, "function": fn, "category": "bug",
            "repo": repo, "prompt_tokens": 10, "completion_tokens": 10, "truncation_ratio": 1.0}


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from icml26.tiny import build_tiny_model

    path = build_tiny_model("qwen3", max_position_embeddings=1024)
    return path, AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)


def _config(tmp_path, **kw):
    base = dict(output_dir=str(tmp_path / "out"), max_steps=3, per_device_train_batch_size=2,
                gradient_accumulation_steps=1, max_length=1024, learning_rate=3e-3, use_cpu=True,
                activation_checkpointing=False, save_strategy="no", disable_tqdm=True, logging_steps=1,
                dataloader_num_workers=0)
    base.update(kw)
    return SeraSFTConfig(**base)


# --- data ----------------------------------------------------------------------------------------
def test_template_messages_parse_arguments_and_drop_arrow_nulls():
    row = trajectory(0)
    # What an Arrow round trip does to a message: every key of every message, None where missing
    arrowed = [{"role": m["role"], "content": m.get("content"), "tool_calls": m.get("tool_calls"),
                "tool_call_id": m.get("tool_call_id"), "name": None} for m in row["messages"]]
    out = to_template_messages(arrowed, strict=True)
    assert out[0] == {"role": "system", "content": SYSTEM}
    assert out[2]["tool_calls"][0]["function"] == {"name": "bash",
                                                   "arguments": {"command": "grep -n 'def parse' pkg/mod0.py"}}
    assert out[6]["content"] == "" and out[6]["tool_calls"][0]["function"]["arguments"] == {}
    assert out[3] == {"role": "tool", "content": row["messages"][3]["content"], "tool_call_id": "call_1"}


@pytest.mark.parametrize("mutate, words", [
    (lambda m: m[2]["tool_calls"][0]["function"].update(arguments="{not json"), ["message 2", "expected valid JSON"]),
    (lambda m: m[2]["tool_calls"][0]["function"].update(arguments="[1, 2]"), ["message 2", "JSON object", "list"]),
    (lambda m: m[1].update(role="human"), ["message 1", "role", "human"]),
    (lambda m: m[3].update(tool_calls=[_call(9, "bash")]), ["message 3", "tool calls only on assistant messages"]),
    (lambda m: m[4]["tool_calls"][0]["function"].pop("name"), ["message 4", "function.name"]),
])
def test_bad_messages_raise_errors_naming_the_trajectory_and_message(mutate, words):
    row = trajectory(3)
    mutate(row["messages"])
    with pytest.raises(InputError) as info:
        trajectories_to_dataset([row])
    assert "'pkg-3'" in str(info.value)
    for word in words:
        assert word in str(info.value)


def test_dataset_keeps_per_message_json_and_round_trips(tmp_path):
    rows = [trajectory(i) for i in range(3)] + [trajectory(9, stage="T1")]
    data = trajectories_to_dataset(rows)
    assert data.column_names == ["messages", "tools", "id", "stage", "repo"]
    bash = data[0]["messages"][2]["tool_calls"][0]["function"]["arguments"]
    edit = data[0]["messages"][4]["tool_calls"][0]["function"]["arguments"]
    assert set(bash) == {"command"} and set(edit) == {"command", "path", "old_str", "new_str"}  # no null-filled keys
    assert json.loads(data[0]["tools"]) == TOOLS
    assert len(trajectories_to_dataset(rows, stages=["T1"])) == 1
    # the pipeline's layouts: DIR/trajectories.jsonl, DIR/dataset/ (save_to_disk), a .jsonl file
    from datasets import Dataset

    out = tmp_path / "run"
    Dataset.from_list([dict(r, tools_json=json.dumps(TOOLS), tools=None) for r in rows]).save_to_disk(
        str(out / "dataset"))
    from_disk = load_trajectories(out)
    assert len(from_disk) == 4 and trajectories_to_dataset(from_disk)[1]["messages"] == data[1]["messages"]
    (out / "trajectories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert load_trajectories(out, stages=["T2"]) == rows[:3]
    with pytest.raises(InputError, match="load_trajectories: source: expected .*trajectories.jsonl.* does not exist"):
        load_trajectories(tmp_path / "missing")
    with pytest.raises(ValueError, match="no assistant"):
        trajectories_to_dataset([dict(rows[0], messages=rows[0]["messages"][:2])])
    assert tool_names(TOOLS) == {"bash", "str_replace_editor", "submit"}


# --- the loss mask -------------------------------------------------------------------------------
def _assistant_spans(text):
    """Character spans the loss may cover: each assistant turn after '<|im_start|>assistant' up to and
    including its '<|im_end|>\\n' (found in the rendered text, independently of the template's markers)."""
    spans, start = [], 0
    head = "<|im_start|>assistant"
    while (i := text.find(head, start)) >= 0:
        end = text.index("<|im_end|>\n", i) + len("<|im_end|>\n")
        spans.append((i + len(head), end))
        start = end
    return spans


def test_trainer_labels_cover_exactly_the_assistant_turns(tiny, tmp_path):
    path, tokenizer, model = tiny
    rows = [trajectory(i) for i in range(4)]
    trainer = build_sft_trainer(copy.deepcopy(model), tokenizer, rows, _config(tmp_path))
    template = training_chat_template(tokenizer)
    assert "{% generation %}" in template.replace("{%- generation %}", "{% generation %}")
    assert tokenizer.chat_template != template  # the tokenizer keeps its inference template
    for k, row in enumerate(rows):
        example = trainer.train_dataset[k]
        ids, labels = example["input_ids"], example["labels"]
        messages = to_template_messages(row["messages"], strict=True)
        text = tokenizer.apply_chat_template(messages, tools=TOOLS, tokenize=False)
        enc = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
        assert enc["input_ids"] == ids  # the trainer tokenised the same text as the inference template renders
        spans = _assistant_spans(text)
        assert len(spans) == 3
        for token, label, (a, b) in zip(ids, labels, enc["offset_mapping"]):
            inside = any(s <= a and b <= e for s, e in spans)
            assert (label == token) if inside else (label == IGNORE_INDEX), (tokenizer.decode([token]), a, b)
        # every system, user and tool-output character is in a masked token
        for message in messages:
            if message["role"] != "assistant":
                pos = text.index(message["content"])
                for a, b in enc["offset_mapping"]:
                    if a < pos + len(message["content"]) and b > pos:
                        assert labels[enc["offset_mapping"].index((a, b))] == IGNORE_INDEX
        # the stop token of each assistant turn is trained (the model learns to end its turn)
        end_id = tokenizer.convert_tokens_to_ids("<|im_end|>")
        trained_ends = sum(1 for t, l in zip(ids, labels) if t == end_id and l == end_id)
        assert trained_ends == 3
        assert tokenize_trajectory(tokenizer, row["messages"], row["tools"]) == {"input_ids": ids, "labels": labels}


def _batch_loss(model, tokenizer, rows, tmp_path):
    trainer = build_sft_trainer(model, tokenizer, rows, _config(tmp_path))
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(len(rows))])
    with torch.no_grad():
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                     labels=batch["labels"]).loss.item(), batch


def test_perturbing_tool_outputs_leaves_the_loss_unchanged(tiny, tmp_path):
    path, tokenizer, model = tiny
    model = copy.deepcopy(model).eval()
    rows = [trajectory(i) for i in range(2)]
    base, batch = _batch_loss(model, tokenizer, rows, tmp_path)
    assert (batch["labels"] != IGNORE_INDEX).sum() > 50
    # the final observation follows the last assistant turn: any change to it must leave the loss alone
    for new_text in ("Submitted. Final observation TEXT.", "a much longer observation " * 20, "x"):
        perturbed = copy.deepcopy(rows)
        for row in perturbed:
            row["messages"][-1]["content"] = new_text
        loss, _ = _batch_loss(model, tokenizer, perturbed, tmp_path)
        assert abs(loss - base) <= 1e-6, (new_text, loss, base)
    # a change to a trained (assistant) token does change it: the check can fail
    changed = copy.deepcopy(rows)
    for row in changed:
        row["messages"][2]["content"] = "Let me grep for the function."
    assert abs(_batch_loss(model, tokenizer, changed, tmp_path)[0] - base) > 1e-4
    # and the held-out loss helper sees the same tokens as the trainer
    helper = assistant_token_loss(model, tokenizer, rows, max_length=1024)
    assert helper["tokens"] == int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
    assert helper["loss"] == pytest.approx(base, rel=1e-5)


def test_the_models_own_loss_equals_trls_fused_loss(tiny, tmp_path):
    path, tokenizer, model = tiny
    rows = [trajectory(i, fn=f"f{i}") for i in range(3)]
    losses = {}
    for impl in ("fused", "model"):
        trainer = build_sft_trainer(copy.deepcopy(model), tokenizer, rows, _config(tmp_path, loss_impl=impl))
        batch = trainer.data_collator([trainer.train_dataset[i] for i in range(3)])
        n_items = int((batch["labels"][:, 1:] != IGNORE_INDEX).sum())
        with torch.no_grad():
            losses[impl] = trainer.compute_loss(trainer.model, dict(batch), num_items_in_batch=n_items).item()
    assert losses["model"] == pytest.approx(losses["fused"], rel=1e-5)
    with pytest.raises(ValueError, match="loss_impl"):
        SeraSFTConfig(output_dir="o", loss_impl="chunked", use_cpu=True)


# --- config and training -------------------------------------------------------------------------
def test_config_has_the_papers_defaults_and_parses_from_the_command_line():
    from transformers import HfArgumentParser

    config = SeraSFTConfig(output_dir="unused", use_cpu=True)
    assert (config.learning_rate, str(config.lr_scheduler_type.value), config.num_train_epochs) == (1e-5, "cosine", 3)
    assert (config.adam_beta1, config.adam_beta2, config.weight_decay) == (0.9, 0.95, 0.01)
    assert config.assistant_only_loss and config.max_length == 32768 and config.per_device_train_batch_size == 1
    assert config.bf16 is False and config.activation_checkpointing is True and config.get_peft_config() is None
    (parsed,) = HfArgumentParser(SeraSFTConfig).parse_args_into_dataclasses(
        ["--output_dir", "o", "--learning_rate", "2e-4", "--use_peft", "--lora_r", "4", "--sera_stages", "T2",
         "--overlong", "drop", "--max_length", "4096", "--num_train_epochs", "1", "--use_cpu"])
    assert (parsed.learning_rate, parsed.use_peft, parsed.lora_r, parsed.sera_stages) == (2e-4, True, 4, ["T2"])
    assert (parsed.overlong, parsed.max_length, parsed.num_train_epochs) == ("drop", 4096, 1)
    assert parsed.get_peft_config().r == 4 and parsed.get_peft_config().target_modules == "all-linear"
    with pytest.raises(ValueError, match="overlong"):
        SeraSFTConfig(output_dir="o", overlong="cut", use_cpu=True)
    with pytest.raises(ValueError, match="lora_r"):
        SeraSFTConfig(output_dir="o", use_peft=True, lora_r=0, use_cpu=True)


def test_a_few_steps_lower_the_assistant_loss(tiny, tmp_path):
    path, tokenizer, model = tiny
    rows = [trajectory(i, fn=f"fn_{i}") for i in range(6)]
    model = copy.deepcopy(model)
    before = assistant_token_loss(model, tokenizer, rows, max_length=1024)["loss"]
    out = train_sera(rows, model, tmp_path / "model", tokenizer=tokenizer,
                     config=_config(tmp_path, max_steps=8, learning_rate=5e-3, lr_scheduler_type="constant"))
    after = assistant_token_loss(model, tokenizer, rows, max_length=1024)["loss"]
    assert out.global_step == 8 and out.n_trajectories == 6 and math.isfinite(out.train_loss)
    assert after < before - 0.5, (before, after)
    losses = [e["loss"] for e in out.log_history if "loss" in e]
    assert len(losses) == 8 and losses[-1] < losses[0]
    from transformers import AutoModelForCausalLM, AutoTokenizer

    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "model")
    assert assistant_token_loss(reloaded, tokenizer, rows, max_length=1024)["loss"] == pytest.approx(after, rel=1e-5)
    assert AutoTokenizer.from_pretrained(tmp_path / "model").chat_template == tokenizer.chat_template


def test_lora_and_overlong_drop(tiny, tmp_path):
    path, tokenizer, model = tiny
    rows = [trajectory(i) for i in range(3)]
    long_row = trajectory(7, obs="line\n" * 600)  # far over 1024 tokens
    config = _config(tmp_path, max_steps=2, use_peft=True, lora_r=4, overlong="drop")
    trainer = build_sft_trainer(copy.deepcopy(model), tokenizer, rows + [long_row], config)
    assert trainer.sera_dropped_overlong == 1 and len(trainer.train_dataset) == 3
    assert type(trainer.model).__name__.startswith("Peft")
    trainable = [n for n, p in trainer.model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    with pytest.raises(ValueError, match="overlong='truncate'"):
        build_sft_trainer(copy.deepcopy(model), tokenizer, [long_row], config)
    out = train_sera(rows, copy.deepcopy(model), tmp_path / "merged", tokenizer=tokenizer, config=config)
    assert out.global_step == 2
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged")  # a plain checkpoint, adapters merged
    assert not any("lora" in n for n, _ in merged.named_parameters())


def test_main_train_through_the_command_line(tiny, tmp_path):
    path, tokenizer, model = tiny
    data = tmp_path / "gen"
    data.mkdir()
    (data / "trajectories.jsonl").write_text("".join(json.dumps(trajectory(i)) + "\n" for i in range(4)))
    (tmp_path / "sft.yaml").write_text("learning_rate: 0.001\nmax_steps: 5\nuse_cpu: true\n")
    argv = ["--data", str(data), "--model", str(path), "--out", str(tmp_path / "trained"), "--config",
            str(tmp_path / "sft.yaml"), "--max_length", "1024", "--max-steps", "2", "--gradient_accumulation_steps", "1",
            "--activation_checkpointing", "false", "--disable_tqdm", "true"]
    summary = main_train(argv)
    assert summary["global_step"] == 2 and summary["n_trajectories"] == 4  # the command line beats the YAML file
    assert summary["config"]["max_length"] == 1024 and summary["config"]["learning_rate"] == 1e-3
    written = json.loads((tmp_path / "trained" / "sera_train.json").read_text())
    assert written["global_step"] == 2 and any("loss" in e for e in written["log_history"])
    assert (tmp_path / "trained" / "model.safetensors").is_file()
    assert (tmp_path / "trained" / "tokenizer.json").is_file()
    with pytest.raises(InputError, match="--max_length: expected room for an assistant token"):
        main_train([*argv, "--max_length", "64"])
