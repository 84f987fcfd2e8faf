"""What every chat backend shares: the :class:`ChatBackend` protocol, the :class:`AssistantMessage` it
returns with its :class:`Usage`, :class:`BackendError`, and the converters of OpenAI-format messages to
what chat templates (:func:`to_template_messages`) and servers (:func:`request_messages`) accept.

The backends themselves live in :mod:`icml26.agents.backends_http`, :mod:`icml26.agents.backends_local`
and :mod:`icml26.agents.backends_scripted`; :mod:`icml26.agents.backends` is the public face of all of them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from icml26.errors import described, input_error

from .toolcalls import ToolCall, parse_arguments, parse_tool_calls

__all__ = ["AssistantMessage", "BackendError", "ChatBackend", "ROLES", "Usage", "check_messages", "check_sampling", "check_tools", "request_messages",
           "to_template_messages"]


def check_messages(function: str, messages: Any, tools: Any = None) -> None:
    """Refuse what no backend can send: ``messages`` must be a non-empty list of dicts with a ``role`` (system,
    user, assistant or tool), ``tools`` None or a list of OpenAI function schemas
    (``{"type": "function", "function": {"name": ...}}``)."""
    if not isinstance(messages, (list, tuple)) or not messages:
        raise input_error(function, "messages", "a non-empty list of chat messages (dicts with role and content)",
                          described(f"{messages!r:.80}"))
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise input_error(function, f"messages[{index}]", f"a dict whose role is one of {list(ROLES)}",
                              described(f"{message!r:.80}"))
    check_tools(function, tools)


def check_tools(function: str, tools: Any) -> None:
    """Refuse ``tools`` that are neither None nor a list of OpenAI function schemas
    (``{"type": "function", "function": {"name": ...}}``), naming the bad entry."""
    if tools is None:
        return
    if not isinstance(tools, (list, tuple)):
        raise input_error(function, "tools", "None or a list of OpenAI function schemas", described(f"{tools!r:.80}"))
    for index, tool in enumerate(tools):
        function_schema = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function_schema, dict) or not isinstance(function_schema.get("name"), str):
            raise input_error(function, f"tools[{index}]", 'an OpenAI function schema {"type": "function", '
                              '"function": {"name": ..., "parameters": {...}}}', described(f"{tool!r:.80}"))


def check_sampling(function: str, sampling: dict) -> dict:
    """The sampling arguments every backend shares, checked (an :class:`~icml26.errors.InputError` naming the bad
    one): ``temperature`` >= 0, ``top_p`` in (0, 1], ``max_tokens`` / ``max_new_tokens`` >= 1, ``seed`` an int,
    ``stop`` a string or a list of strings. Other keys pass unchecked (a server may take options of its own).
    Returns ``sampling``."""
    from icml26.validation import check_finite, check_int

    for name, value in sampling.items():
        if value is None:
            continue
        if name == "temperature":
            check_finite(function, name, value, non_negative=True)
        elif name == "top_p":
            check_finite(function, name, value, low=0, high=1, low_open=True)
        elif name in ("max_tokens", "max_new_tokens"):
            check_int(function, name, value, low=1)
        elif name == "seed":
            check_int(function, name, value)
        elif name == "stop" and not (isinstance(value, str) or (isinstance(value, (list, tuple))
                                                                and all(isinstance(s, str) for s in value))):
            raise input_error(function, name, "a string or a list of strings", value)
    return sampling


class BackendError(RuntimeError):
    """The backend could not produce a message: a 4xx answer, a server unreachable after retries,
    a response that is not a chat completion, or a scripted policy that ran out.

    ``status`` is the HTTP status of the (last) answer when there was one, ``server_message`` what
    the server said, and ``attempts`` how many requests were made (None where no request was made).
    """

    def __init__(self, message: str, *, status: int | None = None, server_message: str | None = None,
                 attempts: int | None = None):
        super().__init__(message)
        self.status, self.server_message, self.attempts = status, server_message, attempts


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens)

    def to_dict(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens}


@dataclass
class AssistantMessage:
    content: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    finish_reason: str | None = None

    def to_openai(self) -> dict:
        """The message as an OpenAI chat message (tool-call arguments as JSON strings)."""
        message: dict[str, Any] = {"role": "assistant", "content": self.content}
        if self.tool_calls:
            message["tool_calls"] = [call.to_openai() for call in self.tool_calls]
        return message

    @classmethod
    def from_openai(cls, message: dict, usage: Usage | None = None, finish_reason: str | None = None,
                    *, id_prefix: str = "call_") -> AssistantMessage:
        """Read an OpenAI assistant message; tool calls left as ``<tool_call>`` text are parsed too
        (servers started without a tool parser return them inside ``content``)."""
        if not isinstance(message, dict):
            raise BackendError(f"expected an assistant message (a dict), got {type(message).__name__}: {message!r:.200}")
        content = message.get("content")
        if isinstance(content, list):  # content parts
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        calls: list[ToolCall] = []
        for index, entry in enumerate(message.get("tool_calls") or []):
            function = entry.get("function", entry) if isinstance(entry, dict) else {}
            call_id = (entry.get("id") if isinstance(entry, dict) else None) or f"{id_prefix}{index}"
            name = function.get("name") if isinstance(function, dict) else None
            raw = function.get("arguments") if isinstance(function, dict) else None
            arguments, error = parse_arguments(raw)
            if not isinstance(name, str) or not name:
                name, error = None, error or "malformed tool call: missing function name"
            elif error is not None:
                error = f"malformed tool call: {error}"
            raw_text = raw if isinstance(raw, str) else json.dumps(raw if raw is not None else {}, ensure_ascii=False)
            calls.append(ToolCall(id=str(call_id), name=name, arguments=arguments, raw=raw_text, error=error))
        if not calls and isinstance(content, str) and "<tool_call>" in content:
            content, calls = parse_tool_calls(content, id_prefix=id_prefix)
        return cls(content=content, tool_calls=calls, usage=usage or Usage(), finish_reason=finish_reason)


@runtime_checkable
class ChatBackend(Protocol):
    def chat(self, messages: list[dict], tools: list[dict] | None = None, **sampling) -> AssistantMessage: ...


ROLES = ("system", "user", "assistant", "tool")


def to_template_messages(messages: Sequence[dict], *, strict: bool = False, row_id: Any = None) -> list[dict]:
    """OpenAI-format messages -> what ``apply_chat_template`` expects (the one converter of icml26).

    Chat templates index ``tool_call.function.arguments`` as a mapping (``| tojson``), while the
    OpenAI format stores a JSON string: arguments are decoded, and ``None`` content becomes ``""``
    because templates concatenate it. The input is not modified.

    ``strict=False`` (generation: a model must see every turn, right or wrong): a malformed call's
    text becomes ``{"invalid_arguments": <raw text>}``, as :func:`request_messages` sends it to
    servers, so a model sees the same prompt in-process and behind a server; other keys are kept.

    ``strict=True`` (training data): anything a template cannot render raises
    :class:`~icml26.errors.InputError` naming the trajectory (``row_id``) and the message; keys whose
    value is ``None`` are dropped (an Arrow round trip adds every key of every message to all of them)
    and each call is rebuilt as ``{"type": "function", "function": {"name", "arguments"}, "id"}``.
    """
    if strict and (not isinstance(messages, (list, tuple)) or not messages):
        raise input_error("to_template_messages", _where(row_id), "a non-empty list of message dicts",
                          described(f"{messages!r:.80}"))
    out: list[dict] = []
    for i, message in enumerate(messages):
        if strict:
            out.append(_strict_message(message, row_id, i))
            continue
        message = dict(message)
        if message.get("content") is None:
            message["content"] = ""
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                call = dict(call)
                function = dict(call.get("function") or {})
                arguments, error = parse_arguments(function.get("arguments"))
                function["arguments"] = arguments if error is None else {"invalid_arguments": str(function.get("arguments"))}
                call["function"] = function
                calls.append(call)
            message["tool_calls"] = calls
        out.append(message)
    return out


def _where(row_id: Any, index: int | None = None) -> str:
    return f"trajectory {row_id!r}" + ("" if index is None else f", message {index}")


def _strict_message(message: Any, row_id: Any, i: int) -> dict:
    where = _where(row_id, i)
    if not isinstance(message, dict):
        raise input_error("to_template_messages", where, "a message dict", described(type(message).__name__))
    message = {k: v for k, v in message.items() if v is not None}
    role = message.get("role")
    if role not in ROLES:
        raise input_error("to_template_messages", f"{where}: role", f"one of {list(ROLES)}", role)
    content = message.get("content", "")
    if not isinstance(content, str):
        raise input_error("to_template_messages", f"{where}: content", "a string", described(type(content).__name__))
    message["content"] = content
    calls = message.pop("tool_calls", None) or []
    if calls and role != "assistant":
        raise input_error("to_template_messages", f"{where}: tool_calls", "tool calls only on assistant messages",
                          described(f"role {role!r}"))
    if calls:
        message["tool_calls"] = [_strict_call(call, where) for call in calls]
    return message


def _strict_call(call: Any, where: str) -> dict:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
        raise input_error("to_template_messages", f"{where}: tool call", "a call with function.name",
                          described(f"{call!r:.120}"))
    arguments = function.get("arguments", {})
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as exc:
            raise input_error("to_template_messages", f"{where}: arguments of tool call {function['name']!r}",
                              "valid JSON", described(f"{arguments!r:.120} ({exc})")) from None
    if not isinstance(arguments, dict):
        raise input_error("to_template_messages", f"{where}: arguments of tool call {function['name']!r}",
                          "a JSON object", described(type(arguments).__name__))
    out = {"type": "function", "function": {"name": function["name"], "arguments": arguments}}
    if call.get("id") is not None:
        out["id"] = call["id"]
    return out


def request_messages(messages: Sequence[dict]) -> list[dict]:
    """Messages safe to send to a server: tool-call arguments that are not a JSON object are sent as
    ``{"invalid_arguments": <raw text>}``.

    A trajectory keeps a malformed call exactly as the model wrote it, but servers decode the
    arguments of past calls to render their chat template (``transformers serve`` and vLLM call
    ``json.loads`` and answer 500 or 400 otherwise), so one bad call would end the conversation.
    """
    out: list[dict] = []
    for message in messages:
        if message.get("tool_calls"):
            message = dict(message)
            calls = []
            for call in message["tool_calls"]:
                function = dict(call.get("function") or {})
                arguments, error = parse_arguments(function.get("arguments"))
                if error is None:
                    function["arguments"] = json.dumps(arguments, ensure_ascii=False)
                else:
                    function["arguments"] = json.dumps({"invalid_arguments": str(function.get("arguments"))},
                                                       ensure_ascii=False)
                calls.append({**call, "function": function})
            message["tool_calls"] = calls
        out.append(message)
    return out
