"""Chat backends: OpenAI-compatible HTTP servers, in-process transformers models, scripted policies.

Every backend takes messages and tool schemas in the OpenAI chat format and returns an
:class:`AssistantMessage` whose tool calls are already parsed (malformed ones carry an ``error``
instead of raising, see :mod:`icml26.agents.toolcalls`) and whose token usage is counted.

* :class:`OpenAIChatBackend` talks to any ``/v1/chat/completions`` server (``vllm serve`` on a GPU,
  ``transformers serve`` on a CPU, hosted APIs) through the official ``openai`` client, with its
  own retries switched off for ours: exponential backoff on connection errors, dropped
  connections, timeouts, 429, 502, 503 and 504; any other status (4xx, 500) raises
  :class:`BackendError` at once with the server's message.
* :class:`TransformersChatBackend` runs a model in-process through its chat template
  (``apply_chat_template(..., tools=...)``), generates, and parses hermes ``<tool_call>`` blocks.
* :class:`ScriptedBackend` replays a policy, for deterministic tests and experiments.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence, runtime_checkable

from icml26.errors import described, input_error

from .toolcalls import ToolCall, parse_arguments, parse_tool_calls

__all__ = [
    "AssistantMessage",
    "BackendError",
    "ChatBackend",
    "OpenAIChatBackend",
    "ROLES",
    "ScriptedBackend",
    "ToolCall",
    "TransformersChatBackend",
    "Usage",
    "add_backend_arguments",
    "backend_from_args",
    "backend_from_spec",
    "request_messages",
    "sampling_from_args",
    "to_template_messages",
]


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

    def __add__(self, other: "Usage") -> "Usage":
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
                    *, id_prefix: str = "call_") -> "AssistantMessage":
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


# --------------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP


def _chat_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if base.rsplit("/", 1)[-1].startswith("v") and base.rsplit("/", 1)[-1][1:].isdigit():
        return base + "/chat/completions"  # .../v1
    return base + "/v1/chat/completions"


#: HTTP statuses worth another attempt: rate limited, or a gateway / server that is momentarily unavailable.
RETRY_STATUS = frozenset({429, 502, 503, 504})


class OpenAIChatBackend:
    """A chat backend for any OpenAI-compatible server, on the official ``openai`` client.

    ``base_url``: the server root (``http://127.0.0.1:8000``), its ``/v1`` prefix, or the full
    ``/chat/completions`` URL. ``api_key`` defaults to ``$OPENAI_API_KEY`` when set.
    ``default_sampling`` (temperature, max_tokens, seed, stop, ...) is sent with every request,
    overridden by the keyword arguments of :meth:`chat`; options the OpenAI API does not name
    (vLLM's ``top_k``, ``repetition_penalty``, ...) travel in the request body as they are.
    ``stream=True`` receives the completion as server-sent chunks (content and tool-call deltas
    joined into the same :class:`AssistantMessage`).

    Retries (ours; the client's own are off so there is one policy): connection errors, dropped
    connections and timeouts (``timeout`` seconds per attempt), and HTTP 429, 502, 503 and 504, at
    most ``max_retries`` times with exponential backoff (``backoff * 2**k`` seconds). Every other
    answer is final: a 4xx, or a 500 (a server that failed on this very request, e.g. a tool call
    it could not parse, fails the same way again), raises :class:`BackendError` at once with the
    server's status and message.
    """

    RETRY_STATUS = RETRY_STATUS

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 60.0,
                 max_retries: int = 3, backoff: float = 0.5, stream: bool = False, **default_sampling):
        import openai

        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise input_error("OpenAIChatBackend", "base_url", "an http(s) URL", base_url)
        if not model:
            raise input_error("OpenAIChatBackend", "model", "the name of the served model (as /v1/models lists it)", model)
        if timeout <= 0 or max_retries < 0 or backoff < 0:
            raise input_error("OpenAIChatBackend", "timeout, max_retries, backoff", "timeout > 0, max_retries >= 0, "
                              "backoff >= 0", (timeout, max_retries, backoff))
        self.base_url = base_url
        self.url = _chat_url(base_url)
        self.model = model
        self.timeout = float(timeout)
        self.max_retries = int(max_retries)
        self.backoff = float(backoff)
        self.default_sampling = dict(default_sampling)
        self.stream = bool(stream)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        # a proxy from the environment must not intercept a server on this machine
        local = urllib.parse.urlparse(self.url).hostname in ("localhost", "127.0.0.1", "::1")
        self._client = openai.OpenAI(
            base_url=self.url[: -len("/chat/completions")], api_key=key or "EMPTY", timeout=self.timeout,
            max_retries=0, http_client=openai.DefaultHttpxClient(trust_env=not local))
        self._named = set(inspect.signature(self._client.chat.completions.create).parameters)
        self._turn = 0

    def __repr__(self) -> str:
        return f"OpenAIChatBackend({self.url!r}, model={self.model!r})"

    def _create(self, payload: dict) -> dict:
        import openai

        named = {k: v for k, v in payload.items() if k in self._named and k != "extra_body"}
        extra = {k: v for k, v in payload.items() if k not in self._named}
        last, status, message = "", None, None
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(self.backoff * 2 ** (attempt - 1))
            try:
                if self.stream:  # the whole stream is read inside the try: a connection lost midway is retried
                    stream = self._client.chat.completions.create(**named, extra_body=extra or None, stream=True,
                                                                  stream_options={"include_usage": True})
                    return _collect_stream(stream)
                completion = self._client.chat.completions.create(**named, extra_body=extra or None)
            except openai.APIStatusError as exc:
                status, message = exc.status_code, _server_message(exc)
                if exc.status_code in RETRY_STATUS:
                    last = f"HTTP {exc.status_code}: {message}"
                    continue
                raise BackendError(f"{self.url} rejected the request with HTTP {exc.status_code} "
                                   f"(model {self.model!r}): {message}", status=status, server_message=message,
                                   attempts=attempt + 1) from None
            except openai.APIConnectionError as exc:  # refused, reset, dropped, timed out
                cause = exc.__cause__ or exc.__context__
                last = f"{type(exc).__name__}: {exc}" + (f" ({type(cause).__name__}: {cause})" if cause else "")
                status, message = None, None
                continue
            except openai.APIResponseValidationError as exc:
                message = _server_message(exc)
                raise BackendError(f"{self.url} answered HTTP {exc.status_code} with a body that is not a chat "
                                   f"completion: {message}", status=exc.status_code, server_message=message,
                                   attempts=attempt + 1) from None
            if not hasattr(completion, "model_dump"):  # the client hands back a body it could not decode as is
                raise BackendError(f"{self.url} answered with a body that is not JSON: {str(completion)[:500]!r}",
                                   status=200, server_message=str(completion)[:1000], attempts=attempt + 1)
            return completion.model_dump()
        raise BackendError(f"could not get a chat completion from {self.url} after {self.max_retries + 1} "
                           f"attempt(s); last error: {last}", status=status, server_message=message,
                           attempts=self.max_retries + 1)

    def chat(self, messages: list[dict], tools: list[dict] | None = None, **sampling) -> AssistantMessage:
        params = {**self.default_sampling, **sampling}
        if "max_new_tokens" in params:  # accept the transformers spelling too
            params.setdefault("max_tokens", params.pop("max_new_tokens"))
        payload = {"model": self.model, "messages": request_messages(messages), **params}
        if tools:
            payload["tools"] = list(tools)
        data = self._create(payload)
        self._turn += 1
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise BackendError(f"{self.url} answered without choices[0].message: {json.dumps(data)[:500]}") from None
        if not isinstance(message, dict):
            raise BackendError(f"{self.url} answered without choices[0].message: {json.dumps(data)[:500]}")
        raw_usage = data.get("usage") or {}
        usage = Usage(int(raw_usage.get("prompt_tokens") or 0), int(raw_usage.get("completion_tokens") or 0))
        return AssistantMessage.from_openai(message, usage, choice.get("finish_reason"),
                                            id_prefix=f"call_{self._turn}_")

    def list_models(self) -> list[str]:
        """Model ids the server lists under ``/v1/models`` (one attempt; raises BackendError)."""
        import openai

        url = self.url[: -len("/chat/completions")] + "/models"
        try:
            return [entry.id for entry in self._client.models.list()]
        except openai.APIStatusError as exc:
            raise BackendError(f"could not list models at {url}: HTTP {exc.status_code}: {_server_message(exc)}") \
                from None
        except openai.OpenAIError as exc:
            raise BackendError(f"could not list models at {url}: {exc}") from None


def _collect_stream(stream) -> dict:
    """A streamed chat completion (``ChatCompletionChunk``s) put back together as one completion's dict."""
    content: list[str] = []
    calls: dict[int, dict] = {}
    finish_reason, usage = None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage.model_dump()
        for choice in chunk.choices[:1] if chunk.choices else []:
            delta = choice.delta
            if delta.content:
                content.append(delta.content)
            for part in delta.tool_calls or []:
                call = calls.setdefault(part.index, {"id": None, "type": "function",
                                                     "function": {"name": "", "arguments": ""}})
                call["id"] = part.id or call["id"]
                if part.function is not None:
                    call["function"]["name"] += part.function.name or ""
                    call["function"]["arguments"] += part.function.arguments or ""
            finish_reason = choice.finish_reason or finish_reason
    message = {"role": "assistant", "content": "".join(content) if content else None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"choices": [{"message": message, "finish_reason": finish_reason}], "usage": usage}


def _server_message(exc: Exception) -> str:
    """What the server said: the body's ``error.message`` / ``detail`` / ``error`` when JSON, else its text."""
    response = getattr(exc, "response", None)
    text = getattr(response, "text", None) or str(exc)
    try:
        body = json.loads(text)
    except (ValueError, TypeError):
        return text[:1000]
    if isinstance(body, dict):
        error = body.get("error", body.get("detail", body.get("message")))
        if isinstance(error, dict):
            error = error.get("message") or error
        if error is not None:
            return (error if isinstance(error, str) else json.dumps(error))[:1000]
    return text[:1000]


# --------------------------------------------------------------------------------------------------
# In-process transformers


class TransformersChatBackend:
    """Generate in-process with a transformers causal LM and its chat template.

    ``model_or_path``: a model id/path (loaded with ``AutoModelForCausalLM``) or a loaded model, in
    which case ``tokenizer`` is required. Sampling: ``temperature`` (0 = greedy, the default),
    ``top_p``, ``max_tokens``/``max_new_tokens``, ``seed``, ``stop`` (strings).
    """

    def __init__(self, model_or_path, tokenizer=None, *, device=None, max_new_tokens: int = 256,
                 **default_sampling):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if isinstance(model_or_path, (str, Path)):
            path = str(model_or_path)
            self.model = AutoModelForCausalLM.from_pretrained(path)
            self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(path)
            self.name = path
        else:
            if tokenizer is None:
                raise input_error("TransformersChatBackend", "tokenizer", "a tokenizer with a loaded model", None)
            self.model, self.tokenizer = model_or_path, tokenizer
            self.name = getattr(getattr(model_or_path, "config", None), "name_or_path", type(model_or_path).__name__)
        if getattr(self.tokenizer, "chat_template", None) is None:
            raise input_error("TransformersChatBackend", "tokenizer", "a tokenizer with a chat template (set "
                              "tokenizer.chat_template)", described(f"the tokenizer of {self.name!r}, without one"))
        if device is not None:
            if str(device).startswith("cuda") and not torch.cuda.is_available():
                raise input_error("TransformersChatBackend", "device", "'cpu' on a machine without a CUDA GPU", device)
            self.model.to(torch.device(device))
        self.model.eval()
        self.max_new_tokens = int(max_new_tokens)
        self.default_sampling = dict(default_sampling)
        self._turn = 0

    def __repr__(self) -> str:
        return f"TransformersChatBackend({self.name!r})"

    def chat(self, messages: list[dict], tools: list[dict] | None = None, **sampling) -> AssistantMessage:
        import torch

        params = {**self.default_sampling, **sampling}
        max_new = int(params.pop("max_tokens", params.pop("max_new_tokens", self.max_new_tokens)))
        temperature = float(params.pop("temperature", 0.0) or 0.0)
        top_p = params.pop("top_p", None)
        seed = params.pop("seed", None)
        stop = params.pop("stop", None)
        if params:
            raise input_error("TransformersChatBackend.chat", "sampling", "temperature, top_p, max_tokens, "
                              "max_new_tokens, seed or stop", described(f"unsupported sampling arguments {sorted(params)}"))
        inputs = self.tokenizer.apply_chat_template(to_template_messages(messages), tools=tools or None,
                                                    add_generation_prompt=True, return_tensors="pt",
                                                    return_dict=True)
        device = next(self.model.parameters()).device
        inputs = {k: v.to(device) for k, v in inputs.items()}
        generate_kwargs: dict[str, Any] = dict(max_new_tokens=max_new, do_sample=temperature > 0,
                                               pad_token_id=self.tokenizer.pad_token_id)
        if temperature > 0:
            generate_kwargs["temperature"] = temperature
            if top_p is not None:
                generate_kwargs["top_p"] = float(top_p)
        if stop:
            generate_kwargs["stop_strings"] = [stop] if isinstance(stop, str) else list(stop)
            generate_kwargs["tokenizer"] = self.tokenizer
        # A seeded call draws from torch's global generator as ``generate`` does, inside a fork: the caller's RNG
        # state is left as it was (the sampled tokens are those of ``torch.manual_seed(seed)`` before generating).
        seeded = torch.random.fork_rng(devices=range(torch.cuda.device_count())) if seed is not None \
            else contextlib.nullcontext()
        with seeded, torch.no_grad():
            if seed is not None:
                torch.manual_seed(int(seed))
            output = self.model.generate(**inputs, **generate_kwargs)
        prompt_len = inputs["input_ids"].shape[1]
        new_ids = output[0, prompt_len:].tolist()
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
        finish = "length"
        for i, token in enumerate(new_ids):
            if token in eos_ids:
                new_ids, finish = new_ids[: i + 1], "stop"
                break
        text = self.tokenizer.decode(new_ids, skip_special_tokens=True)
        self._turn += 1
        content, calls = parse_tool_calls(text, id_prefix=f"call_{self._turn}_")
        if calls and finish == "stop":
            finish = "tool_calls"
        return AssistantMessage(content, calls, Usage(prompt_len, len(new_ids)), finish)


# --------------------------------------------------------------------------------------------------
# Scripted


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
            raise TypeError(f"policy must be a callable or a list of responses, got {type(policy).__name__}")
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


def backend_from_spec(spec: str, model: str | None = None, **kw) -> ChatBackend:
    """``"http(s)://host:port[/v1]"`` -> :class:`OpenAIChatBackend` (``model`` required, or the only
    model the server lists); an existing local folder -> :class:`TransformersChatBackend`."""
    if not isinstance(spec, (str, Path)):
        raise TypeError(f"backend spec must be a URL or a local model path, got {type(spec).__name__}")
    spec = str(spec)
    if spec.startswith(("http://", "https://")):
        if model is None:
            probe = OpenAIChatBackend(spec, "?", **{k: v for k, v in kw.items() if k in ("api_key", "timeout")})
            models = probe.list_models()
            if len(models) != 1:
                raise input_error("backend_from_spec", "model", f"the name of one model the server at {spec} lists",
                                  described(f"none given, and it lists {models or 'no models'}"))
            model = models[0]
        return OpenAIChatBackend(spec, model, **kw)
    if Path(spec).exists():
        if model is not None and model != spec:
            raise input_error("backend_from_spec", "model", f"no model name with the local model path {spec!r}", model)
        return TransformersChatBackend(spec, **kw)
    raise input_error("backend_from_spec", "spec", "an http(s) URL or an existing local model path", spec)


# --------------------------------------------------------------------------------------------------
# The chat-backend options of every command that talks to a model

def add_backend_arguments(parser: argparse.ArgumentParser, *, scripted: str | None = None, temperature: float = 0.0,
                          max_new_tokens: int | None = None) -> None:
    """Add ``--backend --model --base-url --api-key --temperature --max-new-tokens`` to ``parser``.

    ``scripted``: help text of ``--backend scripted`` where the command has an offline stand-in for a model
    (None: the command has none). ``temperature`` / ``max_new_tokens``: the command's defaults.
    Read them back with :func:`backend_from_args` and :func:`sampling_from_args`.
    """
    from icml26.argtypes import non_negative_float, positive_int

    kinds = "an OpenAI-compatible server URL (vLLM, `transformers serve`: http://host:8000/v1), a local model " \
            "folder (in-process transformers)" + (f", or 'scripted' ({scripted})" if scripted else "")
    parser.add_argument("--backend", metavar="BACKEND", help=f"the model: {kinds}; default: --base-url's server")
    parser.add_argument("--base-url", metavar="URL", help="OpenAI-compatible server URL (the same as --backend URL)")
    parser.add_argument("--model", metavar="NAME", help="model name on the server (default: the only one it lists)")
    parser.add_argument("--api-key", help="API key for the server (default: $OPENAI_API_KEY, else none)")
    parser.add_argument("--temperature", type=non_negative_float, default=temperature,
                        help=f"sampling temperature ({temperature:g})")
    parser.add_argument("--max-new-tokens", type=positive_int, default=max_new_tokens,
                        help=f"completion tokens per model call ({max_new_tokens or 'the backend default'})")


def backend_from_args(args: argparse.Namespace, *, command: str, scripted: Callable[[], Any] | None = None
                      ) -> ChatBackend:
    """The :class:`ChatBackend` named by the options of :func:`add_backend_arguments` (bad ones: InputError).

    ``scripted()`` builds the offline stand-in for ``--backend scripted``; ``command`` names the command in errors.
    """
    spec, url = args.backend, args.base_url
    if spec == "scripted":
        if scripted is None:
            raise input_error(command, "--backend", "a server URL or a local model folder", spec)
        if url:
            raise input_error(command, "--base-url", "no server URL with --backend scripted", url)
        return scripted()
    if spec is None and url is None:
        raise input_error(command, "--backend", "a server URL, a local model folder"
                          + (" or 'scripted'" if scripted else "") + " (or --base-url URL)", None)
    if url is not None:
        if not url.startswith(("http://", "https://")):
            raise input_error(command, "--base-url", "an http(s) URL", url)
        if spec is not None and spec != url:
            raise input_error(command, "--backend", f"nothing else with --base-url {url}", spec)
        spec = url
    kwargs: dict[str, Any] = {}
    if spec.startswith(("http://", "https://")):
        if args.api_key:
            kwargs["api_key"] = args.api_key
    elif args.api_key:
        raise input_error(command, "--api-key", "an API key only with a server URL", described("a key"))
    return backend_from_spec(spec, args.model, **kwargs)


def sampling_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling arguments of every chat call: ``temperature`` and, when set, ``max_tokens``."""
    sampling: dict[str, Any] = {"temperature": args.temperature}
    if args.max_new_tokens:
        sampling["max_tokens"] = args.max_new_tokens
    return sampling
