"""The OpenAI backend against a real ``transformers serve`` on loopback, driving a real agent rollout.

A random tiny model never writes a tool call, so the fixture first teaches it one: it records the
prompts a scripted two-turn rollout produces (turn 1: a malformed call; turn 2: a bash call and
``submit``) and fine-tunes the tiny Llama until greedy decoding reproduces both turns. The served
model then has to drive the same rollout through HTTP, with the sandbox executing its calls.

``transformers serve`` (5.x) raises on a ``<tool_call>`` block that is not JSON when the tokenizer
carries a response template (its ``parse_response`` is strict) and answers 500. So the model is
served twice from one server (it loads models by name on demand): as saved (the server parses the
calls) and as a copy without the response template (the server returns the raw text, which
:class:`OpenAIChatBackend` parses tolerantly) - the setting to use with small models.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

pytest.importorskip("fastapi", reason="transformers serve needs `pip install transformers[serving]`")
pytest.importorskip("uvicorn", reason="transformers serve needs `pip install transformers[serving]`")

from icml26.agents.backends import BackendError, OpenAIChatBackend, ScriptedBackend, to_template_messages  # noqa: E402
from icml26.agents.loop import run_agent  # noqa: E402
from icml26.agents.sandbox import Sandbox  # noqa: E402

TOOLS = [
    {"type": "function", "function": {"name": "bash", "parameters": {
        "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}},
    {"type": "function", "function": {"name": "submit", "parameters": {"type": "object", "properties": {}}}},
]
SYSTEM, TASK = "Agent.", "Make hello.txt"
SCRIPT = [
    "<tool_call>\nbash ls\n</tool_call>",  # malformed: not JSON
    '<tool_call>\n{"name": "bash", "arguments": {"command": "echo hi > hello.txt"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
]
SERVER_START_TIMEOUT = 120


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sandbox() -> Sandbox:
    return Sandbox(time_limit=20, allow_unisolated=True)


@pytest.fixture(scope="module")
def server():
    """``transformers serve`` on a free loopback port, no model forced (loaded per request)."""
    port = _free_port()
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-c", "from transformers.cli.transformers import main; main()", "serve",
           "--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "warning"]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    yield proc, url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _wait_ready(proc, url: str) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"transformers serve exited with {proc.returncode}:\n{proc.stdout.read()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"transformers serve did not answer /health within {SERVER_START_TIMEOUT} s")


@pytest.fixture(scope="module")
def agent_models(tmp_path_factory, server):
    """The tiny Llama fine-tuned to play SCRIPT; returns (path with response template, path without)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from icml26.tiny import build_tiny_model

    with _sandbox() as sandbox:  # the prompts the loop sends at each turn
        scripted = ScriptedBackend(list(SCRIPT))
        reference = run_agent(scripted, sandbox, TASK, system_prompt=SYSTEM, tools=TOOLS)
    assert reference.exit_reason == "submitted" and "hello.txt" in reference.patch

    path = build_tiny_model("llama", max_position_embeddings=1024)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    examples = []
    for request, target in zip(scripted.calls, SCRIPT):
        prompt = tokenizer.apply_chat_template(to_template_messages(request["messages"]), tools=TOOLS,
                                               add_generation_prompt=True, tokenize=False)
        examples.append((tokenizer(prompt, add_special_tokens=False)["input_ids"],
                         tokenizer(target + "<|im_end|>", add_special_tokens=False)["input_ids"]))
    width = max(len(p) + len(t) for p, t in examples)
    ids = torch.full((len(examples), width), tokenizer.pad_token_id)
    labels = torch.full((len(examples), width), -100)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for row, (prompt, target) in enumerate(examples):
        n = len(prompt) + len(target)
        ids[row, :n] = torch.tensor(prompt + target)
        labels[row, len(prompt):n] = torch.tensor(target)
        mask[row, :n] = 1
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(400):
        out = model(input_ids=ids, attention_mask=mask, labels=labels)
        predicted = out.logits[:, :-1].argmax(-1)
        target_mask = labels[:, 1:] != -100
        if out.loss.item() < 0.05 and bool((predicted == labels[:, 1:])[target_mask].all()):
            break  # teacher-forced argmax reproduces every target token: greedy decoding will too
        optimizer.zero_grad()
        out.loss.backward()
        optimizer.step()
    else:
        pytest.fail(f"the tiny model did not memorise the script (loss {out.loss.item():.3f})")
    model.eval()

    parsed = tmp_path_factory.mktemp("served") / "agent-parsed"
    model.save_pretrained(parsed)
    tokenizer.save_pretrained(parsed)
    raw = parsed.parent / "agent-raw"
    shutil.copytree(parsed, raw)
    config_file = raw / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    assert config.pop("response_template", None) is not None, "expected the tiny tokenizer to carry a response template"
    config_file.write_text(json.dumps(config))
    _wait_ready(*server)
    return str(parsed), str(raw)


def test_rollout_through_http_with_malformed_call(server, agent_models):
    _, url = server
    _, raw_model = agent_models
    backend = OpenAIChatBackend(url, raw_model, timeout=60, max_retries=1)
    with _sandbox() as sandbox:
        trajectory = run_agent(backend, sandbox, TASK, system_prompt=SYSTEM, tools=TOOLS, max_steps=4,
                               sampling={"temperature": 0.0, "max_tokens": 80})
    assert trajectory.exit_reason == "submitted", trajectory.to_dict()
    assert trajectory.steps == 2
    assert "+hi" in trajectory.patch and "hello.txt" in trajectory.patch
    roles = [m["role"] for m in trajectory.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool", "tool"]
    first_call = trajectory.messages[2]["tool_calls"][0]
    assert first_call["function"]["arguments"] == "bash ls"  # kept as the model wrote it
    assert trajectory.messages[3]["content"].startswith("Error: malformed tool call")
    assert trajectory.messages[3]["tool_call_id"] == first_call["id"]
    assert [c["function"]["name"] for c in trajectory.messages[4]["tool_calls"]] == ["bash", "submit"]
    assert trajectory.usage.prompt_tokens > 300 and trajectory.usage.completion_tokens > 20
    json.dumps(trajectory.to_dict())  # serialisable as is


def test_server_side_tool_call_parsing(server, agent_models):
    """With the response template the server itself returns OpenAI tool calls; on the malformed
    turn it fails with a 5xx, which the backend reports as a BackendError (no crash, no hang)."""
    _, url = server
    parsed_model, _ = agent_models
    backend = OpenAIChatBackend(url, parsed_model, timeout=60, max_retries=3, backoff=30.0)
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    start = time.monotonic()
    with pytest.raises(BackendError, match=r"HTTP 500 \(model .*\): Internal Server Error"):
        backend.chat(messages, TOOLS, temperature=0.0, max_tokens=40)
    assert time.monotonic() - start < 30.0  # the 500 is final: no retry (the first backoff would wait 30 s)

    with _sandbox() as sandbox:
        scripted = ScriptedBackend(list(SCRIPT))
        run_agent(scripted, sandbox, TASK, system_prompt=SYSTEM, tools=TOOLS)
    second_turn = scripted.calls[1]["messages"]
    reply = backend.chat(second_turn, TOOLS, temperature=0.0, max_tokens=80)
    assert [c.name for c in reply.tool_calls] == ["bash", "submit"]
    assert reply.tool_calls[0].arguments == {"command": "echo hi > hello.txt"}
    assert all(c.error is None for c in reply.tool_calls)
    assert reply.finish_reason == "tool_calls"
    assert reply.usage.completion_tokens > 0


def test_unknown_model_is_a_clear_4xx_or_5xx_error(server, agent_models):
    _, url = server
    backend = OpenAIChatBackend(url, "/no/such/model", timeout=30, max_retries=0)
    with pytest.raises(BackendError, match="/no/such/model|HTTP"):
        backend.chat([{"role": "user", "content": "hi"}])


def test_streamed_reply_equals_the_plain_one(server, agent_models):
    """``stream=True`` against transformers serve: the joined chunks give the same greedy reply and usage."""
    _, url = server
    _, raw_model = agent_models
    messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": TASK}]
    plain = OpenAIChatBackend(url, raw_model, timeout=60, max_retries=0).chat(messages, TOOLS, temperature=0.0,
                                                                             max_tokens=24)
    streamed = OpenAIChatBackend(url, raw_model, timeout=60, max_retries=0, stream=True).chat(
        messages, TOOLS, temperature=0.0, max_tokens=24)
    assert streamed.content == plain.content
    assert [(c.name, c.raw, c.error) for c in streamed.tool_calls] == [(c.name, c.raw, c.error) for c in plain.tool_calls]
    assert streamed.content or streamed.tool_calls  # the model said something
    assert streamed.finish_reason == plain.finish_reason
    assert streamed.usage == plain.usage and plain.usage.completion_tokens > 0

    # server-side tool calls (the model with a response template) arrive as deltas and are joined
    parsed_model, _ = agent_models
    with _sandbox() as sandbox:
        scripted = ScriptedBackend(list(SCRIPT))
        run_agent(scripted, sandbox, TASK, system_prompt=SYSTEM, tools=TOOLS)
    second_turn = scripted.calls[1]["messages"]
    streamed = OpenAIChatBackend(url, parsed_model, timeout=60, max_retries=0, stream=True).chat(
        second_turn, TOOLS, temperature=0.0, max_tokens=80)
    assert [(c.name, c.arguments, c.error) for c in streamed.tool_calls] == [
        ("bash", {"command": "echo hi > hello.txt"}, None), ("submit", {}, None)]
    assert streamed.finish_reason == "tool_calls"
