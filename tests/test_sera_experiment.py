"""Tests of SERA's student measurements (icml26.eval.tasks.sera) and the `sera` experiment."""

from __future__ import annotations

import json

import pytest
import torch

from icml26.eval.tasks.sera import heldout_prompts, tool_call_validity

TOOLS = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}}
         for n in ("bash", "submit")]


def _row(i, turns=2):
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": f"task {i}"}]
    for k in range(turns):
        messages.append({"role": "assistant", "content": f"step {k}", "tool_calls": [
            {"id": f"c{k}", "type": "function", "function": {"name": "bash", "arguments": json.dumps({"command": "ls"})}}]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": f"out {k}"})
    return {"id": f"r{i}", "instance_id": f"i{i}", "stage": "T1", "messages": messages, "tools": TOOLS}


def test_heldout_prompts_stop_before_assistant_turns_and_spread_over_rows():
    rows = [_row(i, turns=3) for i in range(4)]
    prompts = heldout_prompts(rows, n=None)
    assert len(prompts) == 12
    for p in prompts:
        assert p["messages"][-1]["role"] in ("user", "tool") and p["reference"]["role"] == "assistant"
        assert len([m for m in p["messages"] if m["role"] == "assistant"]) == p["turn"]
        # arguments are dicts, as the inference template wants them
        for m in p["messages"]:
            for call in m.get("tool_calls", []):
                assert call["function"]["arguments"] == {"command": "ls"}
    assert {p["id"] for p in heldout_prompts(rows, n=4)} == {"r0", "r1", "r2", "r3"}
    assert heldout_prompts(rows, n=5, seed=1) == heldout_prompts(rows, n=5, seed=1)


class _Scripted(torch.nn.Module):
    """A stand-in for a causal LM whose greedy reply to each prompt is a given text."""

    def __init__(self, tokenizer, replies):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.zeros(1))
        self.replies = [tokenizer(r, add_special_tokens=False)["input_ids"] for r in replies]
        self.end = tokenizer.convert_tokens_to_ids("<|im_end|>")
        self.calls = 0
        self.kwargs = {}

    def generate(self, input_ids, attention_mask, max_new_tokens, **kw):
        self.kwargs = kw
        out = []
        for row in input_ids:
            reply = (self.replies[self.calls] + [self.end])[:max_new_tokens]
            self.calls += 1
            out.append(row.tolist() + reply + [self.end] * (max_new_tokens - len(reply)))
        return torch.tensor(out)


def test_tool_call_validity_counts_only_well_formed_calls_to_offered_tools():
    from transformers import AutoTokenizer

    from icml26.tiny import build_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model("qwen3", max_position_embeddings=1024))
    replies = [
        'Looking.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>',  # valid
        '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',  # valid
        '<tool_call>\n{"name": "python", "arguments": {"code": "1"}}\n</tool_call>',  # not an offered tool
        '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"\n</tool_call>',  # malformed JSON
        'I will just think about it.',  # no call at all
    ]
    prompts = heldout_prompts([_row(i, turns=1) for i in range(5)], n=None)
    result = tool_call_validity(_Scripted(tokenizer, replies), tokenizer, prompts, max_new_tokens=64, batch_size=2)
    assert (result["valid"], result["n"], result["rate"]) == (2, 5, 0.4)
    assert result["with_tool_call_tag"] == 4 and result["name_counts"]["python"] == 1
    # decoding stops at the end of the turn and after the first call
    model = _Scripted(tokenizer, replies * 2)
    tool_call_validity(model, tokenizer, prompts, max_new_tokens=64)
    assert set(model.kwargs["eos_token_id"]) == set(tokenizer.convert_tokens_to_ids(["<|im_end|>", "</tool_call>"]))
    tool_call_validity(model, tokenizer, prompts[:1], max_new_tokens=64, stop_at_call_end=False)
    assert model.kwargs["eos_token_id"] == [tokenizer.convert_tokens_to_ids("<|im_end|>")]
    with pytest.raises(ValueError, match="tool_call_validity: prompts: expected prompts to decode, got none"):
        tool_call_validity(_Scripted(tokenizer, []), tokenizer, [])


def test_reply_tokens_counts_the_reply_as_the_template_renders_it():
    from transformers import AutoTokenizer

    from icml26.eval.tasks.sera import reply_tokens
    from icml26.tiny import build_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(build_tiny_model("qwen3", max_position_embeddings=1024))
    prompt = heldout_prompts([_row(0, turns=1)], n=None)[0]
    full = tokenizer.apply_chat_template(prompt["messages"] + [prompt["reference"]], tools=prompt["tools"],
                                         tokenize=True, return_dict=True)["input_ids"]
    head = tokenizer.apply_chat_template(prompt["messages"], tools=prompt["tools"], add_generation_prompt=True,
                                         tokenize=True, return_dict=True)["input_ids"]
    # the rendered turn is the reply plus <|im_end|> and a newline
    assert reply_tokens(tokenizer, prompt["reference"]) == len(full) - len(head) - 2
    assert reply_tokens(tokenizer, _row(0)["messages"][2]) == reply_tokens(tokenizer, prompt["reference"])


def test_split_by_instance_keeps_both_rollouts_together():
    from icml26.eval.experiments.sera import split_by_instance

    rows = [dict(_row(i), id=f"r{i}-{s}", stage=s) for i in range(6) for s in ("T1", "T2")]
    train, held = split_by_instance(rows, 2, seed=0)
    assert len(held) == 4 and len(train) == 8
    assert not {r["instance_id"] for r in train} & {r["instance_id"] for r in held}
    with pytest.raises(ValueError, match="more than 6"):
        split_by_instance(rows, 6, seed=0)


def test_rebase_repo_path_replaces_the_scratch_path_everywhere():
    from icml26.eval.experiments.sera import rebase_repo_path

    root = "/tmp/sera-x1/icml26-sandbox-ab12/repo"
    row = _row(0)
    row["messages"][1]["content"] = f"<uploaded_files>\n{root}\n</uploaded_files>\nI've uploaded {root}."
    row["messages"][2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"command": f"ls {root}/pkg"})
    row["messages"][3]["content"] = f"{root}/pkg/a.py"
    out = rebase_repo_path(row)
    assert root not in json.dumps(out) and json.dumps(out).count("/testbed") == 4
    assert json.loads(out["messages"][2]["tool_calls"][0]["function"]["arguments"]) == {"command": "ls /testbed/pkg"}
    assert root in json.dumps(row)  # the input is not modified
    assert rebase_repo_path(_row(1)) == _row(1)  # no <uploaded_files>: unchanged


def _check_result(result, *, all_claims: bool):
    m = result.metrics
    soft, hard = result.claims[0], result.claims[1:3]
    assert soft.measured >= soft.reference  # kept per token never falls when the threshold drops
    assert all(c.holds for c in hard), [c.to_dict() for c in hard]  # recall >= threshold for every kept row
    assert result.claims[4].holds, result.claims[4].to_dict()  # a random student makes no valid tool call
    assert m["validity_after"] >= m["validity_before"]
    assert m["loss_A_after"] < m["loss_A_before"] - 1.0 and m["loss_B_after"] < m["loss_B_before"]
    assert set(result.figures) == {"training_loss", "recall_histogram"}
    assert m["trajectories_A"] == m["train_A"] + m["heldout_A"] and m["trajectories_B"] > 0
    if all_claims:
        assert all(c.holds for c in result.claims), [c.to_dict() for c in result.claims if not c.holds]


def test_experiment_end_to_end_reduced(tmp_path):
    """The whole pipeline at a small size: generation on two real packages, both exports, SFT, all measurements.

    At 30 steps the student has learnt the shared format (both repositories' losses fall) but neither the call
    syntax nor much of A, so this run checks the measurements and the claims that hold by construction; the
    quick run is the slow test below."""
    from dataclasses import replace

    from icml26.eval.experiments.sera import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    settings = replace(SETTINGS["quick"], n_a=8, n_b=2, heldout_a=2, steps=30, n_prompts=6, max_new_tokens=96)
    result = run_experiment(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path, device="cpu"), settings)
    _check_result(result, all_claims=False)
    assert result.metrics["instances_A"] == 8 and result.metrics["prompts"] == 6
    assert (tmp_path / "generated_jmespath" / "summary.json").is_file()
    assert json.loads((tmp_path / "generated_jmespath" / "summary.json").read_text())["threshold"] == 0.5


@pytest.mark.slow
def test_quick_experiment(tmp_path):
    """The quick run (2.5-3 minutes on 2 cores): claims 1 and 3 hold. Claim 2 (>= 80% valid calls after
    SFT) is not reached by the quick student (33-61% at seed 0) and is reported, not asserted; the student must
    at least make some valid calls."""
    from icml26.eval.experiments.sera import run
    from icml26.runner import RunConfig

    result = run(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path, device="cpu"))
    _check_result(result, all_claims=False)
    assert result.claims[0].holds and result.claims[5].holds, [c.to_dict() for c in result.claims]
    assert result.metrics["validity_after"] >= 0.15, result.tables["replies_after_sft"]


def test_several_seeds_run_in_their_own_folders_and_claims_use_the_median(monkeypatch, tmp_path):
    """The seed loop only (each seed's run is the reduced pipeline above): folders, medians, per-seed rows."""
    from icml26.eval.experiments import sera
    from icml26.results import Claim, Result
    from icml26.runner import RunConfig

    seen = []

    def one_seed(config, sizes, seed, work):
        seen.append((seed, work))
        return Result(metrics={"seed": seed}, claims=[Claim.at_least("valid calls", [0.7, 0.9, 0.85][seed], 0.8)])

    monkeypatch.setattr(sera, "_run_seed", one_seed)
    result = sera.run_experiment(RunConfig(mode="quick", seeds=(0, 1, 2), out_dir=tmp_path))
    assert seen == [(0, tmp_path / "seed0"), (1, tmp_path / "seed1"), (2, tmp_path / "seed2")]
    (claim,) = result.claims
    assert claim.measured == 0.85 and claim.holds and result.metrics == {"seed": 0}
    assert [r["holds"] for r in result.tables["claims per seed"]] == [False, True, True]
