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

This module is their public face, with :func:`backend_from_spec` and the chat-backend options of every
command (:func:`add_backend_arguments`). The code lives in :mod:`~icml26.agents.backends_base` (the
protocol, message types, converters), :mod:`~icml26.agents.backends_http`,
:mod:`~icml26.agents.backends_local` and :mod:`~icml26.agents.backends_scripted`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from icml26.errors import InputTypeError, described, input_error

from .backends_base import (
    ROLES,
    AssistantMessage,
    BackendError,
    ChatBackend,
    Usage,
    request_messages,
    to_template_messages,
)
from .backends_http import RETRY_STATUS, OpenAIChatBackend
from .backends_local import TransformersChatBackend
from .backends_scripted import ScriptedBackend
from .toolcalls import ToolCall

__all__ = [
    "AssistantMessage",
    "BackendError",
    "ChatBackend",
    "OpenAIChatBackend",
    "RETRY_STATUS",
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


def backend_from_spec(spec: str, model: str | None = None, **kw) -> ChatBackend:
    """``"http(s)://host:port[/v1]"`` -> :class:`OpenAIChatBackend` (``model`` required, or the only
    model the server lists); an existing local folder -> :class:`TransformersChatBackend`."""
    if not isinstance(spec, (str, Path)):
        raise InputTypeError("backend_from_spec", "spec", "an http(s) URL or a local model path",
                             described(type(spec).__name__))
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise input_error("backend_from_spec", "model", "None or the name of a served model", model)
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
