"""Tool calls: the record type and a tolerant parser for the hermes ``<tool_call>`` format.

Small models (and freshly fine-tuned ones) emit tool calls that are almost right: a missing
closing tag at the end of a truncated generation, arguments given as a JSON *string*, single
quotes, trailing text after the JSON object, or no JSON at all. ``transformers``'
``tokenizer.parse_response`` raises or drops such calls, but an agent loop must instead turn every
malformed call into an observation that tells the model what went wrong, so the parser here never
raises: it returns a :class:`ToolCall` whose ``error`` says why it could not be used.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass
from typing import Any

from icml26.errors import InputTypeError, described

__all__ = ["ToolCall", "parse_tool_calls", "parse_arguments", "TOOL_CALL_OPEN", "TOOL_CALL_CLOSE"]

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"

_BLOCK = re.compile(r"<tool_call>(.*?)(?:</tool_call>|$)", re.DOTALL)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)
_NAME = re.compile(r"""["']name["']\s*:\s*["']([^"']+)["']""")


@dataclass
class ToolCall:
    """One function call requested by the model.

    ``name`` is ``None`` when it could not be read; ``arguments`` is ``None`` when they are not a
    JSON object; ``raw`` keeps the arguments text as emitted (or the whole block when the call
    itself was unreadable); ``error`` explains what was wrong, and is ``None`` for a usable call.
    """

    id: str
    name: str | None
    arguments: dict | None
    raw: str
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.name is not None and self.arguments is not None

    def to_openai(self) -> dict:
        """The OpenAI ``tool_calls`` entry (arguments as a JSON string, as the API sends them)."""
        if self.arguments is not None and self.error is None:
            arguments = json.dumps(self.arguments, ensure_ascii=False)
        else:
            arguments = self.raw
        return {"id": self.id, "type": "function", "function": {"name": self.name or "", "arguments": arguments}}


def _loads_object(text: str) -> tuple[Any, str | None]:
    """Parse ``text`` as one JSON value, forgiving code fences, trailing text and Python literals."""
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        first_error = f"invalid JSON ({exc.msg} at position {exc.pos})"
    start = text.find("{")
    if start >= 0:
        try:  # a valid object followed by chatter
            value, _ = json.JSONDecoder().raw_decode(text, start)
            return value, None
        except json.JSONDecodeError:
            pass
        try:  # {'name': 'bash', 'arguments': {...}}: a Python literal, as some models write
            value = ast.literal_eval(text[start:])
            if isinstance(value, dict):
                return value, None
        except (ValueError, SyntaxError, MemoryError, RecursionError, TypeError):
            pass
    return None, first_error


def parse_arguments(raw: Any) -> tuple[dict | None, str | None]:
    """Arguments from an OpenAI tool call (a JSON string, or already a dict) -> ``(dict, error)``."""
    if isinstance(raw, dict):
        return raw, None
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return {}, None  # a call without arguments, e.g. submit()
    if not isinstance(raw, str):
        return None, f"arguments must be a JSON object, got {type(raw).__name__}"
    value, error = _loads_object(raw)
    if error is not None:
        return None, f"arguments are not valid JSON: {error}"
    if isinstance(value, str):  # double-encoded
        return parse_arguments(value)
    if not isinstance(value, dict):
        return None, f"arguments must be a JSON object, got {type(value).__name__}"
    return value, None


def _call_from_block(block: str, call_id: str) -> ToolCall:
    value, error = _loads_object(block)
    if error is not None or not isinstance(value, dict):
        name_match = _NAME.search(block)
        why = error or f"expected a JSON object, got {type(value).__name__}"
        return ToolCall(id=call_id, name=name_match.group(1) if name_match else None, arguments=None,
                        raw=block.strip(), error=f"malformed tool call: {why}")
    if "function" in value and isinstance(value["function"], dict):  # OpenAI-shaped object
        value = value["function"]
    name = value.get("name")
    if not isinstance(name, str) or not name.strip():
        return ToolCall(id=call_id, name=None, arguments=None, raw=block.strip(),
                        error='malformed tool call: missing "name" (expected {"name": ..., "arguments": {...}})')
    raw_args = value.get("arguments", value.get("parameters"))
    arguments, arg_error = parse_arguments(raw_args)
    raw = raw_args if isinstance(raw_args, str) else json.dumps(raw_args if raw_args is not None else {},
                                                               ensure_ascii=False)
    return ToolCall(id=call_id, name=name.strip(), arguments=arguments, raw=raw,
                    error=None if arg_error is None else f"malformed tool call: {arg_error}")


def parse_tool_calls(text: str, *, id_prefix: str = "call_", allow_bare_json: bool = True
                     ) -> tuple[str | None, list[ToolCall]]:
    """Split a model's raw text into ``(content, tool_calls)``; never raises.

    Every ``<tool_call>...</tool_call>`` block becomes one :class:`ToolCall` (a block left open at
    the end of the text counts too: generation was cut off). ``content`` is the text outside the
    blocks, stripped, or ``None`` when empty. With ``allow_bare_json``, a message that is nothing
    but a JSON object with a ``"name"`` key (possibly in a code fence) is read as one call, as
    small models often drop the tags. Call ids are ``{id_prefix}{index}``.

    Whatever the model wrote is accepted (``None`` reads as no text); a ``text`` that is no text at all (bytes, a
    dict: a caller's mistake, not a model's) raises :class:`~icml26.errors.InputTypeError`, as do a non-string
    ``id_prefix`` and a non-bool ``allow_bare_json``.
    """
    if text is not None and not isinstance(text, str):
        raise InputTypeError("parse_tool_calls", "text", "the model's text (a str) or None",
                             described(type(text).__name__))
    if not isinstance(id_prefix, str):
        raise InputTypeError("parse_tool_calls", "id_prefix", "a str", described(type(id_prefix).__name__))
    if not isinstance(allow_bare_json, bool):
        raise InputTypeError("parse_tool_calls", "allow_bare_json", "a bool", allow_bare_json)
    text = "" if text is None else text
    calls: list[ToolCall] = []
    if TOOL_CALL_OPEN in text:
        for index, match in enumerate(_BLOCK.finditer(text)):
            calls.append(_call_from_block(match.group(1), f"{id_prefix}{index}"))
        content = _BLOCK.sub("", text).replace(TOOL_CALL_CLOSE, "").strip()
        return (content or None), calls
    stripped = text.strip()
    if allow_bare_json and (stripped.startswith("{") or stripped.startswith("```")):
        value, error = _loads_object(stripped)
        if error is None and isinstance(value, dict) and isinstance(value.get("name"), str):
            return None, [_call_from_block(stripped, f"{id_prefix}0")]
    return (stripped or None), calls

