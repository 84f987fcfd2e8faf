"""The scripted chat backend: a policy replayed, for deterministic agents in tests and experiments."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from icml26.errors import InputTypeError, described

from .backends_base import AssistantMessage, BackendError, Usage, check_messages, to_template_messages
from .toolcalls import parse_tool_calls

__all__ = ["ScriptedBackend"]


class ScriptedBackend:
    """A backend that replays a policy: deterministic agents for tests and experiments.

    ``policy`` is either a callable ``policy(messages, tools) -> response`` or a list of responses
    consumed in order (:class:`BackendError` when it runs out). A response is an
    :class:`AssistantMessage`, an OpenAI assistant message dict, or raw model text (parsed for
    hermes ``<tool_call>`` blocks, exactly as generated text would be). Usage is counted by
    whitespace-separated words, or with ``tokenizer`` (prompt: the chat template, when it has one).
    """

    def __init__(self, policy: Callable[[list[dict], list[dict] | None], Any] | Sequence[Any], *, tokenizer=None):
        if callable(policy):
            self._policy, self._queue = policy, None
        elif isinstance(policy, (list, tuple)):
            self._policy, self._queue = None, list(policy)
        else:
            raise InputTypeError("ScriptedBackend", "policy", "a callable policy(messages, tools) or a list of responses",
                                 described(type(policy).__name__))
        self.tokenizer = tokenizer
        self.calls: list[dict] = []  # what the backend was asked: {"messages", "tools", "sampling"}
        self._turn = 0

    def _count(self, text: str) -> int:
        if self.tokenizer is None:
            return len(text.split())
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def _prompt_tokens(self, messages: list[dict], tools: list[dict] | None) -> int:
        if self.tokenizer is not None and getattr(self.tokenizer, "chat_template", None):
            ids = self.tokenizer.apply_chat_template(to_template_messages(messages), tools=tools or None,
                                                     add_generation_prompt=True, tokenize=True)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            return len(ids)
        text = "\n".join(str(m.get("content") or "") + json.dumps(m.get("tool_calls") or "") for m in messages)
        return self._count(text)

    def chat(self, messages: list[dict], tools: list[dict] | None = None, **sampling) -> AssistantMessage:
        check_messages("ScriptedBackend.chat", messages, tools)
        self.calls.append({"messages": [dict(m) for m in messages], "tools": tools, "sampling": dict(sampling)})
        self._turn += 1
        if self._queue is not None:
            if not self._queue:
                raise BackendError(f"ScriptedBackend ran out of responses after {self._turn - 1} turn(s)")
            response = self._queue.pop(0)
        else:
            response = self._policy(messages, tools)
        prompt = self._prompt_tokens(messages, tools)
        prefix = f"call_{self._turn}_"
        if isinstance(response, AssistantMessage):
            if response.usage.prompt_tokens or response.usage.completion_tokens:
                return response
            text = (response.content or "") + " ".join(c.raw for c in response.tool_calls)
            return AssistantMessage(response.content, response.tool_calls, Usage(prompt, self._count(text)),
                                    response.finish_reason)
        if isinstance(response, dict):
            message = AssistantMessage.from_openai(response, id_prefix=prefix)
            text = json.dumps(response, ensure_ascii=False)
            message.usage = Usage(prompt, self._count(text))
            message.finish_reason = "tool_calls" if message.tool_calls else "stop"
            return message
        if isinstance(response, str):
            content, calls = parse_tool_calls(response, id_prefix=prefix)
            return AssistantMessage(content, calls, Usage(prompt, self._count(response)),
                                    "tool_calls" if calls else "stop")
        raise BackendError(f"scripted policy returned {type(response).__name__}; expected an AssistantMessage, "
                           "an OpenAI assistant message dict or raw text")
