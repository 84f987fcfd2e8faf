"""Measurements for SERA's student: does it call tools in the right format, and what does it know of a repository?

Reconstruction: SERA (arXiv 2601.20789) reports SWE-bench resolve rates; these CPU-sized measurements are ours.

- :func:`heldout_prompts` cuts held-out trajectories before an assistant turn (system prompt, task and
  the earlier turns with their tool outputs): what the student would see at that point of an episode;
- :func:`tool_call_validity` greedy-decodes from those prompts with the tokenizer's own (inference)
  chat template and counts the replies that carry a tool call which parses
  (:func:`icml26.agents.toolcalls.parse_tool_calls`) and names one of the offered tools;
- :func:`icml26.training.sera.assistant_token_loss` (re-exported) is the loss on assistant tokens of
  held-out trajectories, tokenised exactly as in training.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from icml26.agents.backends import to_template_messages
from icml26.errors import described, input_error
from icml26.training.sera import assistant_token_loss, load_trajectories, row_tools, tool_names
from icml26.validation import check_int

__all__ = ["assistant_token_loss", "heldout_prompts", "reply_tokens", "tool_call_validity"]


def heldout_prompts(rows: Any, *, n: int | None = 20, tokenizer: Any = None, max_prompt_tokens: int | None = None,
                    seed: int = 0) -> list[dict]:
    """Prompts ``{"id", "turn", "messages", "tools", "reference"}`` cut before assistant turns of ``rows``.

    Every assistant turn of every row is a candidate (``turn`` counts assistant turns from 0;
    ``reference`` is the teacher's message there). With ``tokenizer`` and ``max_prompt_tokens``,
    prompts longer than that (with the generation prompt) are left out. ``n`` candidates are drawn
    with ``seed``, spread over the rows as evenly as possible (None: all).
    """
    name = "heldout_prompts"
    n = None if n is None else check_int(name, "n", n, low=1)
    max_prompt_tokens = None if max_prompt_tokens is None else check_int(name, "max_prompt_tokens", max_prompt_tokens,
                                                                         low=1)
    seed = check_int(name, "seed", seed)
    by_row: list[list[dict]] = []
    for k, row in enumerate(load_trajectories(rows)):
        row_id = row.get("id", k)
        messages = to_template_messages(row["messages"], strict=True, row_id=row_id)
        tools = row_tools(row)
        candidates, turn = [], 0
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            prompt = {"id": str(row_id), "turn": turn, "messages": messages[:i], "tools": tools,
                      "reference": message}
            turn += 1
            if tokenizer is not None and max_prompt_tokens is not None and _prompt_length(tokenizer, prompt) \
                    > max_prompt_tokens:
                break  # later turns are longer still
            candidates.append(prompt)
        if candidates:
            by_row.append(candidates)
    rng = random.Random(seed)
    for candidates in by_row:
        rng.shuffle(candidates)
    # round robin over the rows, so a few long trajectories do not supply every prompt
    ordered = [c for layer in _round_robin(by_row) for c in layer]
    return ordered if n is None else ordered[:n]


def reply_tokens(tokenizer: Any, message: dict) -> int:
    """Tokens of an assistant ``message`` as the student should emit it: its text, then each call in a
    ``<tool_call>`` block (the hermes format of the chat template), without the end-of-turn token."""
    import json

    message = to_template_messages([message], strict=True)[0]
    text = message.get("content") or ""
    for call in message.get("tool_calls") or ():
        function = call["function"]
        text += "\n<tool_call>\n" + json.dumps({"name": function["name"], "arguments": function["arguments"]}) \
            + "\n</tool_call>"
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def _round_robin(lists: list[list[dict]]):
    depth = max((len(x) for x in lists), default=0)
    for d in range(depth):
        yield [x[d] for x in lists if d < len(x)]


def _encode_prompt(tokenizer, prompt: dict) -> list[int]:
    return list(tokenizer.apply_chat_template(prompt["messages"], tools=prompt["tools"], add_generation_prompt=True,
                                              tokenize=True, return_dict=True)["input_ids"])


def _prompt_length(tokenizer, prompt: dict) -> int:
    return len(_encode_prompt(tokenizer, prompt))


def tool_call_validity(model: Any, tokenizer: Any, prompts: Sequence[dict], *, max_new_tokens: int = 160,
                       batch_size: int = 8, keep_examples: int = 5, stop_at_call_end: bool = True) -> dict[str, Any]:
    """Share of prompts whose greedy reply holds a well-formed call to one of the offered tools.

    A reply counts when :func:`~icml26.agents.toolcalls.parse_tool_calls` finds at least one call and
    every call is usable (``ToolCall.ok``: a name and JSON-object arguments) and names a tool of the
    prompt. Decoding stops at ``<|im_end|>`` and, with ``stop_at_call_end``, after the first
    ``</tool_call>`` (one call per turn, as SWE-agent runs them), so only that call is judged. Returns ``{"rate", "valid", "n", "with_tool_call_tag", "name_counts", "examples"}``.
    """
    import torch

    from icml26.agents.toolcalls import parse_tool_calls

    if not prompts:
        raise input_error("tool_call_validity", "prompts", "prompts to decode", described("none"))
    max_new_tokens = check_int("tool_call_validity", "max_new_tokens", max_new_tokens, low=1)
    batch_size = check_int("tool_call_validity", "batch_size", batch_size, low=1)
    keep_examples = check_int("tool_call_validity", "keep_examples", keep_examples, low=0)
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    vocab = tokenizer.get_vocab()
    # Decoding stops at the end of the turn or at the end of the first call (SWE-agent runs one call per turn).
    eos = [vocab[t] for t in ("<|im_end|>", "</tool_call>" if stop_at_call_end else None) if t in vocab]
    if not eos and tokenizer.eos_token_id is not None:
        eos = [tokenizer.eos_token_id]
    valid, tagged, names, examples, lengths = 0, 0, {}, [], []
    was_training = model.training
    model.eval()
    try:
        for start in range(0, len(prompts), batch_size):
            chunk = prompts[start:start + batch_size]
            encoded = [_encode_prompt(tokenizer, p) for p in chunk]
            width = max(map(len, encoded))
            ids = torch.full((len(chunk), width), pad, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for i, e in enumerate(encoded):  # left padding: every prompt ends where generation starts
                ids[i, width - len(e):] = torch.tensor(e)
                mask[i, width - len(e):] = 1
            with torch.no_grad():
                out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), do_sample=False,
                                     max_new_tokens=max_new_tokens, eos_token_id=eos, pad_token_id=pad)
            for prompt, row in zip(chunk, out[:, width:].tolist()):
                text = tokenizer.decode(row, skip_special_tokens=True)
                _, calls = parse_tool_calls(text)
                allowed = tool_names(prompt["tools"])
                ok = bool(calls) and all(c.ok and c.name in allowed for c in calls)
                valid += ok
                tagged += "<tool_call>" in text
                for c in calls:
                    names[str(c.name)] = names.get(str(c.name), 0) + 1
                if len(examples) < keep_examples:
                    examples.append({"id": prompt["id"], "turn": prompt["turn"], "valid": ok, "text": text[:400]})
                lengths.append(len(row) - row.count(pad))
    finally:
        model.train(was_training)
    return {"rate": valid / len(prompts), "valid": valid, "n": len(prompts), "with_tool_call_tag": tagged,
            "name_counts": names, "examples": examples, "mean_new_tokens": sum(lengths) / len(lengths)}
