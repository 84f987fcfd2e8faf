"""SERA soft verification and trajectory filters (arXiv 2601.20789, "soft verification" and the filters of its
postprocessing; as allenai/SERA computes them in ``sera/datagen/data/eval/eval.py`` and ``filter.py``).

* :func:`patch_recall` is the line-level recall of the first rollout's patch P1 inside the second
  rollout's patch P2, exactly as SERA's evaluation computes it: changed lines keep their sign, diff
  headers and lines blank after the sign are skipped, matching is over a multiset and the
  denominator is P1's line count (recall, not precision).
* :func:`filter_trajectory` applies the post-processing filters: submitted only, at most 40 changed
  lines, an average tool response of at most 600 tokens (the submit review is not counted) and a
  token budget that truncates at a message boundary and records the kept proportion.

Patch parsing is hand-written on purpose: the rules above are about raw diff lines (signs kept,
headers and blank lines skipped), which a structured diff parser (unidiff, whatthepatch) would
first normalise away.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_finite, check_int

HEADER_PREFIXES = ("diff", "---", "+++", "@@")
TokenCounter = Callable[[str], int]


def _check_patch(patch: Any, name: str, function: str = "changed_lines") -> str:
    if patch is None:
        return ""
    if not isinstance(patch, str):
        raise InputTypeError(function, name, "a unified diff as str (or None)", described(type(patch).__name__))
    return patch


def changed_lines(patch: str | None) -> list[str]:
    """The lines of a unified diff that add or remove code, each with its leading ``+``/``-``.

    Lines starting with ``diff``, ``---``, ``+++`` or ``@@`` are headers; lines that are empty
    after the sign are skipped. Leading whitespace inside a line is kept (lines compare exactly).
    """
    out = []
    for line in _check_patch(patch, "patch").splitlines():
        if not line or line[0] not in "+-" or line.startswith(HEADER_PREFIXES):
            continue
        if not line[1:].strip():
            continue
        out.append(line)
    return out


def count_changed_lines(patch: str | None) -> int:
    """Added plus deleted lines of a diff, headers excluded (the 40-line filter's count).

    Unlike :func:`changed_lines` this counts blank added/removed lines too, as SERA's filter does.
    """
    return sum(1 for line in _check_patch(patch, "patch").splitlines()
               if line[:1] in ("+", "-") and not line.startswith(("+++", "---")))


def patch_recall(p1: str | None, p2: str | None) -> float | None:
    """Share of P1's changed lines found in P2's (multiset matching); None when P1 changes nothing."""
    target = changed_lines(_check_patch(p1, "p1", "patch_recall"))
    if not target:
        return None
    produced = Counter(changed_lines(_check_patch(p2, "p2", "patch_recall")))
    matched = 0
    for line in target:
        if produced[line] > 0:
            produced[line] -= 1
            matched += 1
    return matched / len(target)


def check_threshold(threshold: Any, *, function: str = "check_threshold") -> float:
    """``threshold`` as a float in [0, 1] (1 = hard verification, 0 = none), else an InputError naming ``function``."""
    return check_finite(function, "threshold", threshold, low=0, high=1)


def is_verified(recall: float | None, threshold: float, *, p2_nonempty: bool = True) -> bool:
    """Keep a second rollout at this threshold?

    ``recall`` None (P1 empty) is never kept; an empty P2 is never kept, so t = 0 keeps every
    rollout that changed something; otherwise ``recall >= threshold``.
    """
    threshold = check_threshold(threshold, function="is_verified")
    return recall is not None and p2_nonempty and recall >= threshold


def verify(p1: str | None, p2: str | None, threshold: float) -> bool:
    """:func:`is_verified` of :func:`patch_recall` (P2 must change at least one line)."""
    threshold = check_threshold(threshold, function="verify")
    return is_verified(patch_recall(p1, p2), threshold, p2_nonempty=bool(changed_lines(p2)))


# ----------------------------------------------------------------------------------------- filters

@dataclass
class FilterConfig:
    """Post-processing filters; the defaults are SERA's.

    Attributes:
        max_changed_lines: drop a patch with more added+deleted lines than this.
        max_avg_tool_tokens: drop when the mean token count of tool responses exceeds this (the
            response to ``submit``, SERA's "thank you for your work" review, is not counted).
        enforce_submit: drop trajectories that did not end with a submit.
        max_tokens: token budget of a whole trajectory (tool schemas + messages); None: no limit.
        truncate: over budget, cut at the last assistant message that fits (True) or drop (False).
    """

    max_changed_lines: int | None = 40
    max_avg_tool_tokens: float | None = 600
    enforce_submit: bool = True
    max_tokens: int | None = 32768
    truncate: bool = True

    def __post_init__(self):
        if self.max_changed_lines is not None:
            check_int("FilterConfig", "max_changed_lines", self.max_changed_lines, low=0)
        if self.max_avg_tool_tokens is not None:
            check_finite("FilterConfig", "max_avg_tool_tokens", self.max_avg_tool_tokens, non_negative=True)
        if self.max_tokens is not None:
            check_int("FilterConfig", "max_tokens", self.max_tokens, low=1)
        for flag in ("enforce_submit", "truncate"):
            if not isinstance(getattr(self, flag), bool):
                raise InputTypeError("FilterConfig", flag, "True or False", described(repr(getattr(self, flag))))


@dataclass
class FilterResult:
    keep: bool
    reasons: list[str]
    n_changed_lines: int
    avg_tool_tokens: float
    n_tokens: int
    truncation_ratio: float
    messages: list[dict] = field(repr=False, default_factory=list)

    def summary(self) -> dict:
        return {"keep": self.keep, "reasons": list(self.reasons), "n_changed_lines": self.n_changed_lines,
                "avg_tool_tokens": self.avg_tool_tokens, "n_tokens": self.n_tokens,
                "truncation_ratio": self.truncation_ratio}


def whitespace_tokens(text: str) -> int:
    """Default token count: whitespace-separated words (pass a tokenizer for real counts)."""
    return len(text.split())


def token_counter(tokenizer: Any = None, *, function: str = "token_counter") -> TokenCounter:
    """A ``str -> int`` counter from None (whitespace words), a callable, a tokenizer or a tokenizer path."""
    if tokenizer is None:
        return whitespace_tokens
    if isinstance(tokenizer, (str, os.PathLike)):
        path = os.fspath(tokenizer)
        if not os.path.exists(os.path.expanduser(path)):
            raise input_error(function, "tokenizer", "None, a tokenizer, a callable or an existing tokenizer folder",
                              described(f"{path!r}, which does not exist"))
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(os.path.expanduser(path))
        except (OSError, ValueError) as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise input_error(function, "tokenizer", "a folder holding a tokenizer",
                              described(f"{path!r} ({first[:160]})")) from None
    if hasattr(tokenizer, "encode"):
        return lambda text: len(tokenizer.encode(text, add_special_tokens=False))
    if callable(tokenizer):
        return tokenizer
    raise InputTypeError(function, "tokenizer", "None, a path, a tokenizer with .encode or a callable",
                         described(type(tokenizer).__name__))


def message_text(message: dict) -> str:
    """The text a message contributes to the token count: its content and its tool calls."""
    parts = [message.get("content") or ""]
    for call in message.get("tool_calls") or ():
        fn = call.get("function", {})
        parts.append(f"{fn.get('name', '')} {fn.get('arguments', '')}")
    return "\n".join(p for p in parts if p)


def _submit_call_ids(messages: Iterable[dict]) -> set:
    return {call.get("id") for m in messages if m.get("role") == "assistant"
            for call in m.get("tool_calls") or () if call.get("function", {}).get("name") == "submit"}


def tool_response_tokens(messages: list[dict], count: TokenCounter = whitespace_tokens) -> list[int]:
    """Token counts of the tool responses, excluding the responses to ``submit``.

    The submit review ("Thank you for your work on this issue. ..." followed by the whole diff) is
    recognised by its text too (:func:`~icml26.agents.tools.is_review_observation`), so it stays out of
    the count even when the call it answers cannot be matched (a missing or reused call id).
    """
    from icml26.agents.tools import is_review_observation

    skip = _submit_call_ids(messages)
    return [count(m.get("content") or "") for m in messages
            if m.get("role") == "tool" and m.get("tool_call_id") not in skip
            and not is_review_observation(m.get("content"))]


def truncate_messages(messages: list[dict], budget: int, count: TokenCounter = whitespace_tokens,
                      overhead: int = 0) -> tuple[list[dict], int, int]:
    """Longest prefix ending on an assistant message within ``budget`` tokens.

    Returns ``(kept_messages, kept_tokens, total_tokens)``; ``kept_messages`` is empty when not even
    the first assistant turn fits.
    """
    sizes = [count(message_text(m)) for m in messages]
    total = overhead + sum(sizes)
    best, running, best_tokens = 0, overhead, 0
    for i, (message, size) in enumerate(zip(messages, sizes)):
        running += size
        if running > budget:
            break
        if message.get("role") == "assistant":
            best, best_tokens = i + 1, running
    return list(messages[:best]), best_tokens, total


def filter_trajectory(messages: list[dict], patch: str | None, submitted: bool, *,
                      tools: list[dict] | None = None, config: FilterConfig | None = None,
                      count_tokens: TokenCounter | None = None) -> FilterResult:
    """Apply SERA's filters to one trajectory; ``reasons`` names every filter that failed."""
    if not isinstance(messages, list):
        raise InputTypeError("filter_trajectory", "messages", "a list of chat messages",
                             described(type(messages).__name__))
    if config is not None and not isinstance(config, FilterConfig):
        raise InputTypeError("filter_trajectory", "config", "None or a FilterConfig", described(type(config).__name__))
    config = config or FilterConfig()
    count = count_tokens or whitespace_tokens
    reasons = []
    if config.enforce_submit and not submitted:
        reasons.append("not_submitted")
    n_changed = count_changed_lines(patch)
    if config.max_changed_lines is not None and n_changed > config.max_changed_lines:
        reasons.append("changed_lines")
    tool_tokens = tool_response_tokens(messages, count)
    avg = sum(tool_tokens) / len(tool_tokens) if tool_tokens else 0.0
    if config.max_avg_tool_tokens is not None and avg > config.max_avg_tool_tokens:
        reasons.append("tool_output_length")
    overhead = count(json.dumps(tools)) if tools else 0
    kept, kept_tokens, total = truncate_messages(messages, config.max_tokens if config.max_tokens is not None
                                                 else float("inf"), count, overhead)
    ratio = 1.0
    out_messages = list(messages)
    if config.max_tokens is not None and total > config.max_tokens:
        if not config.truncate or not kept:
            reasons.append("token_length")
        else:
            out_messages = kept
            ratio = kept_tokens / total if total else 1.0
    return FilterResult(keep=not reasons, reasons=reasons, n_changed_lines=n_changed, avg_tool_tokens=avg,
                        n_tokens=total, truncation_ratio=ratio, messages=out_messages)
