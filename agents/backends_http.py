"""The chat backend of OpenAI-compatible HTTP servers (``vllm serve``, ``transformers serve``, hosted APIs).

:class:`OpenAIChatBackend` talks to any ``/v1/chat/completions`` server through the official ``openai``
client, with its own retries switched off for ours: exponential backoff on connection errors, dropped
connections, timeouts, 429, 502, 503 and 504; any other status (4xx, 500) raises
:class:`~icml26.agents.backends_base.BackendError` at once with the server's message.
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import time
import urllib.parse

from icml26.errors import InputTypeError, input_error
from icml26.validation import check_finite, check_int

from .backends_base import AssistantMessage, BackendError, Usage, check_messages, check_sampling, request_messages

__all__ = ["OpenAIChatBackend", "RETRY_STATUS"]

logger = logging.getLogger(__name__)


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
    server's status and message. Each retry is logged at INFO on this module's logger (under ``icml26``, which
    ``icml26 reproduce`` writes to the run folder's ``run.log``): the attempt, why, and the wait.
    """

    RETRY_STATUS = RETRY_STATUS

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 60.0,
                 max_retries: int = 3, backoff: float = 0.5, stream: bool = False, **default_sampling):
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise input_error("OpenAIChatBackend", "base_url", "an http(s) URL", base_url)
        if not isinstance(model, str) or not model.strip():
            raise input_error("OpenAIChatBackend", "model", "the name of the served model (as /v1/models lists it)", model)
        if api_key is not None and not isinstance(api_key, str):
            raise InputTypeError("OpenAIChatBackend", "api_key", "a string or None", type(api_key).__name__)
        timeout = check_finite("OpenAIChatBackend", "timeout", timeout, positive=True)
        max_retries = check_int("OpenAIChatBackend", "max_retries", max_retries, low=0)
        backoff = check_finite("OpenAIChatBackend", "backoff", backoff, non_negative=True)
        if not isinstance(stream, bool):
            raise InputTypeError("OpenAIChatBackend", "stream", "a bool", stream)
        check_sampling("OpenAIChatBackend", default_sampling)
        import openai

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
                wait = self.backoff * 2 ** (attempt - 1)
                logger.info("%s: attempt %d of %d failed (%s); retrying in %.2f s", self.url, attempt,
                            self.max_retries + 1, last, wait)
                time.sleep(wait)
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
        logger.warning("%s: giving up after %d attempt(s); last error: %s", self.url, self.max_retries + 1, last)
        raise BackendError(f"could not get a chat completion from {self.url} after {self.max_retries + 1} "
                           f"attempt(s); last error: {last}", status=status, server_message=message,
                           attempts=self.max_retries + 1)

    def chat(self, messages: list[dict], tools: list[dict] | None = None, **sampling) -> AssistantMessage:
        check_messages("OpenAIChatBackend.chat", messages, tools)
        params = {**self.default_sampling, **check_sampling("OpenAIChatBackend.chat", sampling)}
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
