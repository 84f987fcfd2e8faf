"""The agent loop: ask the backend, execute its tool calls in the sandbox, record everything.

One function, :func:`run_agent`, in the shape of SWE-agent's function-calling loop and
mini-swe-agent's simplicity: the conversation *is* the trajectory, kept in the OpenAI chat
format (assistant messages with ``tool_calls`` whose arguments are JSON strings, ``tool``
messages answering each call by ``tool_call_id``), together with the tool schemas, so a
trajectory can be replayed to any OpenAI-compatible server or rendered by a chat template for SFT
(see :func:`icml26.agents.backends.to_template_messages`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_int

from .backends import BackendError, ChatBackend, Usage
from .backends_base import check_sampling, check_tools
from .sandbox import Sandbox, SandboxError
from .tools import ToolExecutor, default_tools

__all__ = ["DEFAULT_SYSTEM_PROMPT", "EXIT_REASONS", "Trajectory", "run_agent"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a software engineering agent working in a git repository. Use the tools to inspect the code, "
    "run commands and edit files. Make the smallest change that solves the task. "
    "When you are done, call `submit`."
)
NO_TOOL_CALL_REMINDER = (
    "Your last message did not call a tool. Call exactly one tool per turn as "
    '<tool_call>{"name": ..., "arguments": {...}}</tool_call>, or call `submit` when you are done.'
)
EXIT_REASONS = ("submitted", "step_limit", "no_tool_call", "backend_error")


@dataclass
class Trajectory:
    messages: list[dict]
    tools: list[dict]
    submitted: bool
    patch: str
    steps: int
    usage: Usage = field(default_factory=Usage)
    exit_reason: str = "step_limit"
    error: str | None = None

    def to_dict(self) -> dict:
        return {"messages": self.messages, "tools": self.tools, "submitted": self.submitted, "patch": self.patch,
                "steps": self.steps, "usage": self.usage.to_dict(), "exit_reason": self.exit_reason,
                "error": self.error}

    @classmethod
    def from_dict(cls, data: dict) -> Trajectory:
        usage = data.get("usage") or {}
        return cls(messages=list(data["messages"]), tools=list(data.get("tools") or []),
                   submitted=bool(data["submitted"]), patch=data.get("patch") or "", steps=int(data["steps"]),
                   usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
                   exit_reason=data.get("exit_reason", "step_limit"), error=data.get("error"))

    def save(self, path: str | Path) -> Path:
        """Write as JSON (atomically)."""
        from icml26.utils import atomic_write_json

        return atomic_write_json(path, self.to_dict())

    def tool_calls(self) -> list[dict]:
        """Every tool call made, in order: ``{"name", "arguments" (JSON string), "observation"}``."""
        answers = {m.get("tool_call_id"): m.get("content") for m in self.messages if m.get("role") == "tool"}
        return [{"name": c["function"]["name"], "arguments": c["function"]["arguments"],
                 "observation": answers.get(c["id"])}
                for m in self.messages if m.get("role") == "assistant" for c in m.get("tool_calls") or []]


def run_agent(backend: ChatBackend, sandbox: Sandbox, task: str, *, system_prompt: str | None = None,
              tools: list[dict] | None = None, max_steps: int = 30, sampling: dict | None = None,
              executor: ToolExecutor | None = None, no_tool_call_retries: int = 0,
              max_observation_chars: int | None = None, review_submit: bool = False) -> Trajectory:
    """Let ``backend`` work on ``task`` in ``sandbox`` until it submits or runs out of steps.

    A step is one backend call. Every tool call is answered by a ``tool`` message (malformed calls
    with a format-error observation, so the model can correct itself). A reply without any tool
    call ends the run (``"no_tool_call"``) unless ``no_tool_call_retries`` reminders are allowed.
    A :class:`BackendError` ends it with ``"backend_error"`` and the message in ``error``.
    The patch is the sandbox's diff at the end; when the sandbox refuses to make it
    (:class:`~icml26.agents.sandbox.PatchRefused`: past ``max_diff_mb``, ``max_diff_files`` or
    ``diff_time_limit``), the patch is ``""`` and ``error`` says why.

    ``review_submit`` turns on SWE-agent's submit review (see :class:`ToolExecutor`): the first
    ``submit`` shows the diff and asks for a cleanup, the second one ends the run. It only applies
    to the executor built here; a given ``executor`` keeps its own setting.
    """
    if not callable(getattr(backend, "chat", None)):
        raise InputTypeError("run_agent", "backend", "a chat backend (with a chat(messages, tools) method)",
                             described(type(backend).__name__))
    if executor is None and not all(callable(getattr(sandbox, name, None)) for name in ("run", "diff")):
        raise InputTypeError("run_agent", "sandbox", "a Sandbox", described(type(sandbox).__name__))
    if not isinstance(task, str) or not task.strip():
        raise input_error("run_agent", "task", "a non-empty string", task)
    if system_prompt is not None and not isinstance(system_prompt, str):
        raise InputTypeError("run_agent", "system_prompt", "None or a string", described(type(system_prompt).__name__))
    max_steps = check_int("run_agent", "max_steps", max_steps, low=1)
    no_tool_call_retries = check_int("run_agent", "no_tool_call_retries", no_tool_call_retries, low=0)
    if max_observation_chars is not None:
        max_observation_chars = check_int("run_agent", "max_observation_chars", max_observation_chars, low=1)
    if sampling is not None and not isinstance(sampling, dict):
        raise InputTypeError("run_agent", "sampling", "None or a dict of sampling arguments",
                             described(type(sampling).__name__))
    check_sampling("run_agent", sampling or {})
    check_tools("run_agent", tools)
    if not isinstance(review_submit, bool):
        raise InputTypeError("run_agent", "review_submit", "a bool", review_submit)
    if executor is not None and not isinstance(executor, ToolExecutor):
        raise InputTypeError("run_agent", "executor", "None or a ToolExecutor", described(type(executor).__name__))
    tools = default_tools() if tools is None else list(tools)
    executor = executor if executor is not None else ToolExecutor(sandbox, tools=tools, review_submit=review_submit)
    messages: list[dict] = [{"role": "system", "content": system_prompt or DEFAULT_SYSTEM_PROMPT},
                            {"role": "user", "content": task}]
    usage = Usage()
    steps, reminders = 0, 0
    exit_reason, error = "step_limit", None
    while steps < max_steps:
        try:
            reply = backend.chat(messages, tools, **(sampling or {}))
        except BackendError as exc:
            exit_reason, error = "backend_error", str(exc)
            break
        steps += 1
        usage = usage + reply.usage
        messages.append(reply.to_openai())
        if not reply.tool_calls:
            if reminders < no_tool_call_retries:
                reminders += 1
                messages.append({"role": "user", "content": NO_TOOL_CALL_REMINDER})
                continue
            exit_reason = "no_tool_call"
            break
        for call in reply.tool_calls:
            if executor.submitted:
                observation = "Not executed: the task was already submitted."
            else:
                observation = executor.execute(call)
                if max_observation_chars is not None and len(observation) > max_observation_chars:
                    observation = observation[:max_observation_chars] + "\n[... observation truncated ...]"
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name or "",
                             "content": observation})
        if executor.submitted:
            exit_reason = "submitted"
            break
    if executor.submitted and executor.patch is not None:
        patch = executor.patch
    else:
        try:
            patch = sandbox.diff()
        except SandboxError as exc:  # a refused patch (PatchRefused: past a cap) ends the run without one
            patch, error = "", error or f"no patch: {exc}"
    return Trajectory(messages=messages, tools=tools, submitted=executor.submitted, patch=patch, steps=steps,
                      usage=usage, exit_reason=exit_reason, error=error)
