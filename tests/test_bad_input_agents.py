"""Bad input to the agents' shared layer: chat backends, tool-call parsing, tools, the agent loop and the sandbox's
arguments. Each call carries one wrong value; each must be refused with the argument named."""

from __future__ import annotations

import functools
import math

import pytest
from probes import Probe, check, ids

from icml26.agents.backends import (
    OpenAIChatBackend,
    ScriptedBackend,
    TransformersChatBackend,
    backend_from_spec,
)
from icml26.agents.loop import run_agent
from icml26.agents.sandbox import Sandbox
from icml26.agents.toolcalls import parse_tool_calls
from icml26.agents.tools import ToolExecutor, default_tools, review_message

URL = "http://127.0.0.1:9/v1"  # never contacted: every probe fails before a request
USER = [{"role": "user", "content": "hello"}]


@functools.cache
def _box() -> Sandbox:
    """One scratch sandbox for the probes of calls on a sandbox (built on first use, removed at exit)."""
    import atexit

    box = Sandbox(None, allow_unisolated=True, isolation="none", time_limit=5)
    atexit.register(box.close)
    return box


def _scripted() -> ScriptedBackend:
    return ScriptedBackend(['<tool_call>{"name": "submit", "arguments": {}}</tool_call>'])


def _http(**kw) -> OpenAIChatBackend:
    return OpenAIChatBackend(URL, "m", **kw)


def p(id: str, call, argument: str) -> Probe:
    return Probe(id, call, argument)


PROBES = [
    # OpenAIChatBackend: construction
    p("http-base-url-without-scheme", lambda: OpenAIChatBackend("127.0.0.1:8000", "m"), "base_url"),
    p("http-base-url-not-a-string", lambda: OpenAIChatBackend(8000, "m"), "base_url"),
    p("http-model-empty", lambda: OpenAIChatBackend(URL, ""), "model"),
    p("http-model-not-a-string", lambda: OpenAIChatBackend(URL, 7), "model"),
    p("http-api-key-not-a-string", lambda: OpenAIChatBackend(URL, "m", api_key=123), "api_key"),
    p("http-timeout-zero", lambda: _http(timeout=0), "timeout"),
    p("http-timeout-nan", lambda: _http(timeout=math.nan), "timeout"),
    p("http-timeout-string", lambda: _http(timeout="30"), "timeout"),
    p("http-max-retries-negative", lambda: _http(max_retries=-1), "max_retries"),
    p("http-max-retries-float", lambda: _http(max_retries=2.5), "max_retries"),
    p("http-backoff-negative", lambda: _http(backoff=-0.5), "backoff"),
    p("http-stream-string", lambda: _http(stream="yes"), "stream"),
    p("http-temperature-negative", lambda: _http(temperature=-1.0), "temperature"),
    p("http-temperature-nan", lambda: _http(temperature=math.nan), "temperature"),
    p("http-top-p-zero", lambda: _http(top_p=0.0), "top_p"),
    p("http-max-tokens-zero", lambda: _http(max_tokens=0), "max_tokens"),
    p("http-stop-not-strings", lambda: _http(stop=[1, 2]), "stop"),
    # OpenAIChatBackend.chat: refused before a request is made
    p("http-chat-messages-empty", lambda: _http().chat([]), "messages"),
    p("http-chat-messages-a-string", lambda: _http().chat("hello"), "messages"),
    p("http-chat-message-role-unknown", lambda: _http().chat([{"role": "human", "content": "hi"}]), "messages[0]"),
    p("http-chat-tools-not-schemas", lambda: _http().chat(USER, tools=["bash"]), "tools[0]"),
    p("http-chat-temperature-negative", lambda: _http().chat(USER, temperature=-0.1), "temperature"),
    p("http-chat-seed-float", lambda: _http().chat(USER, seed=1.5), "seed"),
    # TransformersChatBackend: refused before the model loads
    p("local-max-new-tokens-zero", lambda: TransformersChatBackend("/no/such/model", max_new_tokens=0),
      "max_new_tokens"),
    p("local-top-p-above-1", lambda: TransformersChatBackend("/no/such/model", top_p=1.5), "top_p"),
    p("local-device-a-number", lambda: TransformersChatBackend("/no/such/model", device=0.5), "device"),
    p("local-device-unknown", lambda: TransformersChatBackend("/no/such/model", device="gpu"), "device"),
    p("local-model-path-empty", lambda: TransformersChatBackend(""), "model_or_path"),
    # ScriptedBackend and backend_from_spec
    p("scripted-policy-a-number", lambda: ScriptedBackend(42), "policy"),
    p("scripted-chat-message-not-a-dict", lambda: _scripted().chat(["hello"]), "messages[0]"),
    p("scripted-chat-tools-a-dict", lambda: _scripted().chat(USER, tools={"name": "bash"}), "tools"),
    p("spec-not-a-path", lambda: backend_from_spec(3.5), "spec"),
    p("spec-neither-url-nor-folder", lambda: backend_from_spec("/no/such/model/folder"), "spec"),
    p("spec-model-empty", lambda: backend_from_spec(URL, model=""), "model"),
    # tool-call parsing
    p("parse-text-bytes", lambda: parse_tool_calls(b"<tool_call>{}</tool_call>"), "text"),
    p("parse-id-prefix-not-a-string", lambda: parse_tool_calls("hi", id_prefix=3), "id_prefix"),
    p("parse-allow-bare-json-string", lambda: parse_tool_calls("hi", allow_bare_json="no"), "allow_bare_json"),
    # tools
    p("executor-sandbox-a-path", lambda: ToolExecutor("/tmp/repo"), "sandbox"),
    p("executor-tools-not-schemas", lambda: ToolExecutor(_box(), tools=[{"name": "bash"}]), "tools[0]"),
    p("executor-review-submit-string", lambda: ToolExecutor(_box(), review_submit="yes"), "review_submit"),
    # the agent loop
    p("loop-backend-without-chat", lambda: run_agent(object(), _box(), "Fix it."), "backend"),
    p("loop-sandbox-a-path", lambda: run_agent(_scripted(), "/tmp/repo", "Fix it."), "sandbox"),
    p("loop-task-empty", lambda: run_agent(_scripted(), _box(), "  "), "task"),
    p("loop-max-steps-zero", lambda: run_agent(_scripted(), _box(), "Fix it.", max_steps=0), "max_steps"),
    p("loop-max-steps-float", lambda: run_agent(_scripted(), _box(), "Fix it.", max_steps=3.0), "max_steps"),
    p("loop-no-tool-call-retries-negative", lambda: run_agent(_scripted(), _box(), "Fix it.",
                                                              no_tool_call_retries=-1), "no_tool_call_retries"),
    p("loop-max-observation-chars-zero", lambda: run_agent(_scripted(), _box(), "Fix it.", max_observation_chars=0),
      "max_observation_chars"),
    p("loop-sampling-a-list", lambda: run_agent(_scripted(), _box(), "Fix it.", sampling=[0.7]), "sampling"),
    p("loop-sampling-temperature-negative", lambda: run_agent(_scripted(), _box(), "Fix it.",
                                                              sampling={"temperature": -1}), "temperature"),
    p("loop-tools-a-string", lambda: run_agent(_scripted(), _box(), "Fix it.", tools="bash"), "tools"),
    p("loop-system-prompt-a-list", lambda: run_agent(_scripted(), _box(), "Fix it.", system_prompt=["be brief"]),
      "system_prompt"),
    p("loop-review-submit-int", lambda: run_agent(_scripted(), _box(), "Fix it.", review_submit=1), "review_submit"),
    p("loop-executor-wrong-type", lambda: run_agent(_scripted(), _box(), "Fix it.", executor=default_tools()),
      "executor"),
    # the sandbox's arguments
    p("sandbox-time-limit-negative", lambda: Sandbox(time_limit=-1), "time_limit"),
    p("sandbox-memory-limit-below-a-shell", lambda: Sandbox(memory_limit_mb=16), "memory_limit_mb"),
    p("sandbox-max-output-chars-float", lambda: Sandbox(max_output_chars=5000.0), "max_output_chars"),
    p("sandbox-max-file-mb-zero", lambda: Sandbox(max_file_mb=0), "max_file_mb"),
    p("sandbox-allow-unisolated-string", lambda: Sandbox(allow_unisolated="no"), "allow_unisolated"),
    p("sandbox-isolation-unknown", lambda: Sandbox(isolation="docker"), "isolation"),
    p("sandbox-scratch-parent-missing", lambda: Sandbox(scratch_parent="/no/such/folder"), "scratch_parent"),
    p("sandbox-repo-a-number", lambda: Sandbox(42), "repo"),
    p("sandbox-pids-limit-below-a-shell", lambda: Sandbox(pids_limit=1), "pids_limit"),
    p("sandbox-max-diff-mb-zero", lambda: Sandbox(max_diff_mb=0), "max_diff_mb"),
    p("sandbox-max-diff-files-float", lambda: Sandbox(max_diff_files=10.5), "max_diff_files"),
    p("sandbox-diff-time-limit-nan", lambda: Sandbox(diff_time_limit=math.nan), "diff_time_limit"),
    p("review-message-max-chars-zero", lambda: review_message("diff", max_chars=0), "max_chars"),
    p("review-message-diff-bytes", lambda: review_message(b"diff --git a/x b/x"), "diff"),
    p("sandbox-run-timeout-negative", lambda: _box().run("echo hi", timeout=-1), "timeout"),
    p("sandbox-run-timeout-nan", lambda: _box().run("echo hi", timeout=math.nan), "timeout"),
    p("sandbox-run-command-a-list", lambda: _box().run(["echo", "hi"]), "command"),
    p("sandbox-run-env-name-with-equals", lambda: _box().run("echo hi", env={"A=B": "1"}), "env"),
    p("sandbox-run-python-code-bytes", lambda: _box().run_python(b"print(1)"), "code"),
    p("sandbox-run-python-args-a-string", lambda: _box().run_python("print(1)", args="--fast"), "args"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
