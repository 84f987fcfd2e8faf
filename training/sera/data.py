"""SERA's trajectories as TRL reads them: loading ``trajectories.jsonl`` / ``dataset/`` rows, the tools of a
row, the training chat template, tokenising a trajectory exactly as TRL does, and the held-out
assistant-token loss (the same tokens as training). See :mod:`icml26.training.sera.sft` for the recipe.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from icml26.agents.backends import to_template_messages
from icml26.errors import InputTypeError, described, input_error
from icml26.utils import IGNORE_INDEX
from icml26.validation import check_int

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

def row_tools(row: dict) -> list[dict] | None:
    """A row's tool schemas: its ``tools`` (a list or a JSON string) or ``tools_json``; None when it has none."""
    tools = row.get("tools")
    if tools is None and row.get("tools_json") is not None:
        tools = row["tools_json"]
    if isinstance(tools, str):
        try:
            tools = json.loads(tools)
        except json.JSONDecodeError as exc:
            raise input_error("row_tools", f"trajectory {row.get('id')!r}: tools", "valid JSON", described(str(exc))) from None
    if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
        raise input_error("row_tools", f"trajectory {row.get('id')!r}: tools", "a list of OpenAI function schemas",
                          described(type(tools).__name__))
    return tools or None


def tool_names(tools: Iterable[dict] | None) -> set[str]:
    """Names of OpenAI function schemas (``{"type": "function", "function": {"name": ...}}``)."""
    names = set()
    for tool in tools or ():
        function = tool.get("function", tool)
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            names.add(function["name"])
    return names


def load_trajectories(source: Any, *, stages: Sequence[str] | None = None) -> list[dict]:
    """Trajectory rows from the SVG pipeline's output, a file or objects in memory.

    ``source`` may be a pipeline output folder (``trajectories.jsonl`` is read, else ``dataset/``), a
    ``.jsonl`` file, a folder written by ``Dataset.save_to_disk``, a ``datasets.Dataset`` or a list of
    dicts. ``stages`` keeps only rows whose ``stage`` is listed (e.g. ``["T2"]``).
    """
    rows: list[dict]
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        if path.is_dir() and (path / "trajectories.jsonl").is_file():
            path = path / "trajectories.jsonl"
        elif path.is_dir() and (path / "dataset").is_dir():
            path = path / "dataset"
        if path.is_file():
            rows = []
            with path.open(encoding="utf-8") as handle:
                for n, line in enumerate(handle, 1):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                            raise input_error("load_trajectories", f"source {str(path)!r}, line {n}", "a JSON object a "
                                              "line", described(str(exc))) from None
        elif path.is_dir():
            from datasets import load_from_disk

            try:
                data = load_from_disk(str(path))
            except FileNotFoundError as exc:
                raise input_error("load_trajectories", "source", "a pipeline output folder (with trajectories.jsonl or "
                                  "dataset/) or a saved dataset", described(f"{str(path)!r} ({exc})")) from None
            if hasattr(data, "keys") and not hasattr(data, "column_names"):  # a DatasetDict: use every split
                rows = [dict(r) for split in data.values() for r in split]
            else:
                rows = [dict(r) for r in data]
        else:
            raise input_error("load_trajectories", "source", "a pipeline output folder (with trajectories.jsonl or "
                              "dataset/), a .jsonl file or a saved dataset folder",
                              described(f"{str(path)!r}, which does not exist"))
    elif hasattr(source, "column_names"):
        rows = [dict(r) for r in source]
    elif isinstance(source, (list, tuple)):
        rows = [dict(r) for r in source]
    else:
        raise InputTypeError("load_trajectories", "source", "a path, a datasets.Dataset or a list of dicts",
                             described(type(source).__name__))
    if not all(isinstance(r, dict) for r in rows):
        bad = next(r for r in rows if not isinstance(r, dict))
        raise input_error("load_trajectories", "source", "trajectory rows that are JSON objects",
                          described(f"a {type(bad).__name__} row"))
    if stages:
        rows = [r for r in rows if r.get("stage") in set(stages)]
    return rows


def trajectories_to_dataset(rows: Any, *, stages: Sequence[str] | None = None) -> Dataset:
    """A conversational dataset for ``SFTTrainer``: ``messages`` (one ``datasets.Json`` per message, tool-call
    arguments as dicts), ``tools`` (a JSON string, which TRL parses) and the rows' ``id``/``stage``/``repo``."""
    from datasets import Dataset, Features, Json, List, Value

    rows = load_trajectories(rows, stages=stages)
    if not rows:
        raise input_error("trajectories_to_dataset", "rows", "trajectories to train on",
                          described("none" + (f" after keeping stages {list(stages)}" if stages else "")))
    records = []
    for n, row in enumerate(rows):
        row_id = row.get("id", n)
        if "messages" not in row:
            raise input_error("trajectories_to_dataset", f"trajectory {row_id!r}", "a 'messages' field",
                              described(f"the keys {sorted(row)}"))
        messages = to_template_messages(row["messages"], strict=True, row_id=row_id)
        if not any(m["role"] == "assistant" for m in messages):
            raise input_error("trajectories_to_dataset", f"trajectory {row_id!r}", "an assistant message to train on",
                              described("no assistant message"))
        tools = row_tools(row)
        records.append({"messages": messages, "tools": None if tools is None else json.dumps(tools),
                        "id": str(row_id), "stage": str(row.get("stage") or ""), "repo": str(row.get("repo") or "")})
    features = Features({"messages": List(Json()), "tools": Value("string"), "id": Value("string"),
                         "stage": Value("string"), "repo": Value("string")})
    return Dataset.from_list(records, features=features)


# ---------------------------------------------------------------------------------------------
# Tokenisation (the same call SFTTrainer makes) and the held-out loss
# ---------------------------------------------------------------------------------------------
def training_chat_template(tokenizer: PreTrainedTokenizerBase) -> str:
    """The template SFTTrainer trains with: the tokenizer's own when it has ``{% generation %}`` markers,
    else TRL's training variant of it (``trl.chat_template_utils.get_training_chat_template``)."""
    from trl.chat_template_utils import get_training_chat_template, has_generation_markers

    template = tokenizer.chat_template
    if template is None:
        raise input_error("training_chat_template", "tokenizer", "a tokenizer with a chat template that supports tool "
                          "calls", described("no chat template"))
    if has_generation_markers(template):
        return template if isinstance(template, str) else template["default"]
    patched = get_training_chat_template(tokenizer)
    return patched if patched is not None else template


def tokenize_trajectory(tokenizer: PreTrainedTokenizerBase, messages: Sequence[dict], tools: Any = None, *,
                        chat_template: str | None = None, max_length: int | None = None) -> dict[str, list[int]]:
    """``{"input_ids", "labels"}`` for one trajectory, as SFTTrainer builds them with ``assistant_only_loss``.

    ``messages`` may be OpenAI-format (arguments as JSON strings): they go through
    :func:`icml26.agents.backends.to_template_messages` with ``strict=True``.
    Labels are ``IGNORE_INDEX`` (-100) outside the template's ``{% generation %}`` blocks; ``max_length`` keeps the start.
    """
    if max_length is not None:
        max_length = check_int("tokenize_trajectory", "max_length", max_length, low=1)
    messages = to_template_messages(messages, strict=True)
    tools = json.loads(tools) if isinstance(tools, str) else tools
    processed = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=True, return_dict=True, return_assistant_tokens_mask=True,
        chat_template=chat_template or training_chat_template(tokenizer))
    ids = list(processed["input_ids"])
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, processed["assistant_masks"])]
    if max_length is not None:
        ids, labels = ids[:max_length], labels[:max_length]
    return {"input_ids": ids, "labels": labels}


def assistant_token_loss(model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, rows: Any, *,
                         max_length: int | None = None, batch_size: int = 4) -> dict[str, float]:
    """Mean next-token loss over the assistant tokens of ``rows`` (the trained tokens only).

    Returns ``{"loss": nats per assistant token, "tokens": count, "trajectories": count}``; the mean
    is over all tokens of all rows (not a mean of per-row means).
    """
    import torch

    batch_size = check_int("assistant_token_loss", "batch_size", batch_size, low=1)
    if max_length is not None:
        max_length = check_int("assistant_token_loss", "max_length", max_length, low=1)
    rows = load_trajectories(rows)
    template = training_chat_template(tokenizer)
    encoded = [tokenize_trajectory(tokenizer, r["messages"], row_tools(r), chat_template=template,
                                   max_length=max_length) for r in rows]
    encoded = [e for e in encoded if any(label != IGNORE_INDEX for label in e["labels"][1:])]
    if not encoded:
        raise input_error("assistant_token_loss", "rows", "a trajectory with assistant tokens within max_length",
                          described("none"))
    device = next(model.parameters()).device
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    total, count = 0.0, 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for start in range(0, len(encoded), batch_size):
                chunk = encoded[start:start + batch_size]
                width = max(len(e["input_ids"]) for e in chunk)
                ids = torch.full((len(chunk), width), pad, dtype=torch.long)
                labels = torch.full((len(chunk), width), IGNORE_INDEX, dtype=torch.long)
                mask = torch.zeros((len(chunk), width), dtype=torch.long)
                for i, e in enumerate(chunk):
                    n = len(e["input_ids"])
                    ids[i, :n], labels[i, :n], mask[i, :n] = (torch.tensor(e["input_ids"]),
                                                              torch.tensor(e["labels"]), 1)
                logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits.float()
                target = labels[:, 1:].to(device)
                nll = torch.nn.functional.cross_entropy(logits[:, :-1].transpose(1, 2), target,
                                                        ignore_index=IGNORE_INDEX, reduction="sum")
                total += nll.item()
                count += int((target != IGNORE_INDEX).sum())
    finally:
        model.train(was_training)
    return {"loss": total / count, "tokens": count, "trajectories": len(encoded)}


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def _drop_overlong(dataset: Dataset, tokenizer, max_length: int) -> tuple[Dataset, int]:
    template = training_chat_template(tokenizer)
    keep = [i for i, row in enumerate(dataset)
            if len(tokenize_trajectory(tokenizer, row["messages"], row["tools"], chat_template=template)["input_ids"])
            <= max_length]
    return dataset.select(keep), len(dataset) - len(keep)
