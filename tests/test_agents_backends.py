"""Tool-call parsing, message conversion, ScriptedBackend, the HTTP backend's retries and errors
(against a stdlib HTTP server that misbehaves on purpose), and the in-process transformers backend."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from icml26.agents.backends import (
    AssistantMessage,
    BackendError,
    OpenAIChatBackend,
    ScriptedBackend,
    ToolCall,
    TransformersChatBackend,
    Usage,
    add_backend_arguments,
    backend_from_args,
    backend_from_spec,
    request_messages,
    sampling_from_args,
    to_template_messages,
)
from icml26.agents.toolcalls import parse_tool_calls
from icml26.errors import InputError

# ---------------------------------------------------------------------------------------------------
# parsing


def test_parse_well_formed_calls_and_content():
    text = ('Let me look.\n<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>\n'
            '<tool_call>{"name": "submit", "arguments": {}}</tool_call>')
    content, calls = parse_tool_calls(text)
    assert content == "Let me look."
    assert [(c.name, c.arguments, c.error) for c in calls] == [("bash", {"command": "ls -la"}, None),
                                                               ("submit", {}, None)]
    assert [c.id for c in calls] == ["call_0", "call_1"]
    assert all(c.ok for c in calls)


@pytest.mark.parametrize("text, name, arguments", [
    ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}}', "bash", {"command": "ls"}),  # cut off
    ('<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>', "bash", {"command": "ls"}),
    ("<tool_call>{'name': 'bash', 'arguments': {'command': 'ls'}}</tool_call>", "bash", {"command": "ls"}),
    ('<tool_call>{"name": "bash", "arguments": {"command": "ls"}} trailing</tool_call>', "bash", {"command": "ls"}),
    ('<tool_call>```json\n{"name": "bash", "parameters": {"command": "ls"}}\n```</tool_call>', "bash", {"command": "ls"}),
    ('{"name": "bash", "arguments": {"command": "ls"}}', "bash", {"command": "ls"}),  # no tags at all
    ('<tool_call>{"name": "submit"}</tool_call>', "submit", {}),
])
def test_parse_tolerates_near_misses(text, name, arguments):
    _, calls = parse_tool_calls(text)
    assert len(calls) == 1
    assert (calls[0].name, calls[0].arguments, calls[0].error) == (name, arguments, None)


@pytest.mark.parametrize("text, expected_name, why", [
    ('<tool_call>\n{"name": "bash", "arguments": {"command": </tool_call>', "bash", "invalid JSON"),
    ("<tool_call>bash ls</tool_call>", None, "invalid JSON"),
    ('<tool_call>{"arguments": {"command": "ls"}}</tool_call>', None, 'missing "name"'),
    ('<tool_call>{"name": "bash", "arguments": [1, 2]}</tool_call>', "bash", "must be a JSON object"),
    ("<tool_call>[1, 2]</tool_call>", None, "expected a JSON object"),
])
def test_malformed_calls_become_errors_not_exceptions(text, expected_name, why):
    _, calls = parse_tool_calls(text)
    assert len(calls) == 1
    call = calls[0]
    assert call.error is not None and why in call.error
    assert call.name == expected_name and call.arguments is None and not call.ok
    assert call.raw  # what the model wrote is kept


@pytest.mark.parametrize("text", [None, "", "   ", "plain answer", "</tool_call>", "<tool_call>", "{not json",
                                  "\x00\xff<tool_call>\x00</tool_call>", "<tool_call>" * 50, "{" * 5000])
def test_parser_never_raises(text):
    content, calls = parse_tool_calls(text)
    assert content is None or isinstance(content, str)
    assert all(isinstance(c, ToolCall) for c in calls)


def test_plain_text_is_content_without_calls():
    assert parse_tool_calls("  I am done.  ") == ("I am done.", [])


# ---------------------------------------------------------------------------------------------------
# messages


def test_assistant_message_openai_round_trip():
    message = AssistantMessage("thinking", [ToolCall("c1", "bash", {"command": "ls"}, '{"command": "ls"}'),
                                            ToolCall("c2", "bash", None, "{oops", error="malformed tool call: x")],
                               Usage(3, 4), "tool_calls")
    openai = message.to_openai()
    assert openai["role"] == "assistant" and openai["content"] == "thinking"
    assert openai["tool_calls"][0] == {"id": "c1", "type": "function",
                                       "function": {"name": "bash", "arguments": '{"command": "ls"}'}}
    assert openai["tool_calls"][1]["function"]["arguments"] == "{oops"  # malformed kept verbatim
    back = AssistantMessage.from_openai(openai)
    assert [(c.id, c.name, c.arguments) for c in back.tool_calls] == [("c1", "bash", {"command": "ls"}),
                                                                       ("c2", "bash", None)]
    assert back.tool_calls[1].error is not None
    assert "tool_calls" not in AssistantMessage("hi", []).to_openai()


def test_from_openai_parses_tool_calls_left_in_content():
    message = AssistantMessage.from_openai(
        {"role": "assistant", "content": 'ok <tool_call>{"name": "bash", "arguments": {"command": "pwd"}}</tool_call>'})
    assert message.content == "ok"
    assert [(c.name, c.arguments) for c in message.tool_calls] == [("bash", {"command": "pwd"})]
    with pytest.raises(BackendError, match="expected an assistant message"):
        AssistantMessage.from_openai("not a dict")


def _conversation():
    return [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "a", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}},
            {"id": "b", "type": "function", "function": {"name": "bash", "arguments": "bash ls"}}]},
        {"role": "tool", "tool_call_id": "a", "content": "file.txt"},
        {"role": "tool", "tool_call_id": "b", "content": "Error: malformed"},
    ]


def test_to_template_messages_decodes_arguments_without_mutating():
    messages = _conversation()
    snapshot = json.dumps(messages)
    converted = to_template_messages(messages)
    assert json.dumps(messages) == snapshot
    calls = converted[2]["tool_calls"]
    assert calls[0]["function"]["arguments"] == {"command": "ls"}
    assert calls[1]["function"]["arguments"] == {"invalid_arguments": "bash ls"}
    assert converted[2]["content"] == ""
    sent = request_messages(messages)
    assert json.loads(sent[2]["tool_calls"][1]["function"]["arguments"]) == {"invalid_arguments": "bash ls"}
    assert json.dumps(messages) == snapshot


def test_template_messages_render_with_the_tiny_chat_template(tiny_llama_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    text = tokenizer.apply_chat_template(to_template_messages(_conversation()), tokenize=False)
    assert '<tool_call>\n{"name": "bash", "arguments": {"command": "ls"}}\n</tool_call>' in text
    assert "<tool_response>\nfile.txt\n</tool_response>" in text


# ---------------------------------------------------------------------------------------------------
# ScriptedBackend


def test_scripted_backend_replays_in_order_and_counts_usage():
    backend = ScriptedBackend([
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"}}</tool_call>',
        {"role": "assistant", "content": "done"},
        AssistantMessage("explicit", [], Usage(7, 8)),
    ])
    messages = [{"role": "user", "content": "one two three"}]
    first = backend.chat(messages, None, temperature=0.3)
    assert [c.name for c in first.tool_calls] == ["bash"] and first.finish_reason == "tool_calls"
    assert first.usage == Usage(3, 5)  # whitespace-separated words of the prompt and of the reply
    assert first.tool_calls[0].id == "call_1_0"
    second = backend.chat(messages)
    assert second.content == "done" and second.tool_calls == [] and second.finish_reason == "stop"
    assert backend.chat(messages).usage == Usage(7, 8)
    with pytest.raises(BackendError, match="ran out of responses after 3"):
        backend.chat(messages)
    assert backend.calls[0]["sampling"] == {"temperature": 0.3}


def test_scripted_backend_with_a_policy_and_a_tokenizer(tiny_llama_path):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    seen = []

    def policy(messages, tools):
        seen.append(len(messages))
        return f"turn {len(messages)}"

    backend = ScriptedBackend(policy, tokenizer=tokenizer)
    reply = backend.chat([{"role": "user", "content": "hello there"}])
    assert reply.content == "turn 1" and seen == [1]
    expected_prompt = len(tokenizer.apply_chat_template([{"role": "user", "content": "hello there"}],
                                                        add_generation_prompt=True, tokenize=True)["input_ids"])
    assert reply.usage.prompt_tokens == expected_prompt
    assert reply.usage.completion_tokens == len(tokenizer("turn 1", add_special_tokens=False)["input_ids"])
    with pytest.raises(TypeError, match="ScriptedBackend: policy: expected a callable policy"):
        ScriptedBackend(42)
    with pytest.raises(BackendError, match="returned int"):
        ScriptedBackend(lambda m, t: 5).chat([{"role": "user", "content": "x"}])


# ---------------------------------------------------------------------------------------------------
# OpenAI HTTP backend against a misbehaving stdlib server

OK_BODY = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
    {"id": "srv_0", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}]},
    "finish_reason": "tool_calls"}], "usage": {"prompt_tokens": 11, "completion_tokens": 5}}


class _Flaky:
    """A loopback HTTP server answering requests from a script of actions."""

    def __init__(self, actions):
        self.actions = list(actions)
        self.requests: list[dict] = []
        state = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                state.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                action = state.actions.pop(0) if state.actions else "ok"
                if action == "close":  # drop the connection without answering
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if action == "slow":  # answer after the client's timeout
                    time.sleep(1.0)
                    action = "ok"
                status, payload = {"ok": (200, json.dumps(OK_BODY)), "503": (503, "overloaded"),
                                   "429": (429, '{"error": {"message": "rate limited"}}'),
                                   "502": (502, "bad gateway"), "504": (504, "gateway timeout"),
                                   "500": (500, json.dumps({"error": {"message": "The request could not be processed:"
                                                                      " unterminated tool call JSON", "code": 500}})),
                                   "500plain": (500, "Internal Server Error"),
                                   "400": (400, '{"error": "messages[0] is bad"}'),
                                   "404": (404, '{"detail": "model m not found"}'),
                                   "badjson": (200, "<html>not json</html>")}[action]
                data = payload.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def flaky():
    servers = []

    def make(*actions):
        servers.append(_Flaky(actions))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


MESSAGES = [{"role": "user", "content": "list files"}]


def test_retries_after_503_and_dropped_connections(flaky):
    server = flaky("503", "close", "ok")
    backend = OpenAIChatBackend(server.url, "m", backoff=0.01, max_retries=3)
    reply = backend.chat(MESSAGES)
    assert len(server.requests) == 3
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [("srv_0", "bash", {"command": "ls"})]
    assert reply.usage == Usage(11, 5) and reply.finish_reason == "tool_calls"


def test_429_502_503_504_are_retried_with_backoff(flaky):
    server = flaky("429", "502", "503", "504", "ok")
    backend = OpenAIChatBackend(server.url, "m", backoff=0.05, max_retries=4)
    start = time.perf_counter()
    assert backend.chat(MESSAGES).tool_calls[0].name == "bash"
    assert len(server.requests) == 5
    assert time.perf_counter() - start >= 0.05 * (1 + 2 + 4 + 8)  # exponential backoff between the attempts


@pytest.mark.parametrize("action, message", [
    ("500", r"HTTP 500 \(model 'm'\): The request could not be processed: unterminated tool call JSON"),
    ("500plain", r"HTTP 500 \(model 'm'\): Internal Server Error"),
    ("404", r"HTTP 404 \(model 'm'\): model m not found"),
])
def test_500_and_other_4xx_are_not_retried_and_carry_the_server_message(flaky, action, message):
    server = flaky(action, "ok")
    backend = OpenAIChatBackend(server.url, "m", backoff=0.01, max_retries=3)
    with pytest.raises(BackendError, match=message) as caught:
        backend.chat(MESSAGES)
    assert len(server.requests) == 1
    assert (caught.value.status, caught.value.attempts) == (int(action[:3]), 1)
    assert caught.value.server_message in str(caught.value)


def test_a_timeout_is_retried_then_reported(flaky):
    server = flaky("slow", "ok")
    backend = OpenAIChatBackend(server.url, "m", backoff=0.01, max_retries=1, timeout=0.3)
    assert backend.chat(MESSAGES).tool_calls[0].name == "bash"  # the second attempt answers in time
    server = flaky("slow", "slow")
    backend = OpenAIChatBackend(server.url, "m", backoff=0.01, max_retries=1, timeout=0.3)
    with pytest.raises(BackendError, match=r"after 2 attempt\(s\).*Timeout"):
        backend.chat(MESSAGES)


def test_options_the_openai_api_does_not_name_travel_in_the_body(flaky):
    server = flaky("ok")
    OpenAIChatBackend(server.url, "m", top_k=5).chat(MESSAGES, repetition_penalty=1.1, max_new_tokens=7)
    body = server.requests[0]["body"]
    assert (body["top_k"], body["repetition_penalty"], body["max_tokens"]) == (5, 1.1, 7)


def test_gives_up_after_max_retries(flaky):
    server = flaky("503", "503", "503")
    backend = OpenAIChatBackend(server.url, "m", backoff=0.01, max_retries=1)
    with pytest.raises(BackendError, match=r"after 2 attempt\(s\).*HTTP 503") as caught:
        backend.chat(MESSAGES)
    assert len(server.requests) == 2
    assert (caught.value.status, caught.value.server_message, caught.value.attempts) == (503, "overloaded", 2)


def test_4xx_is_a_clear_error_without_retry(flaky):
    server = flaky("400")
    backend = OpenAIChatBackend(server.url, "my-model", backoff=0.01, max_retries=3)
    with pytest.raises(BackendError, match=r"HTTP 400 \(model 'my-model'\).*messages\[0\] is bad"):
        backend.chat(MESSAGES)
    assert len(server.requests) == 1


def test_a_body_that_is_not_json_is_an_error(flaky):
    server = flaky("badjson")
    with pytest.raises(BackendError, match="not JSON"):
        OpenAIChatBackend(server.url, "m", max_retries=0).chat(MESSAGES)


def test_request_payload(flaky):
    server = flaky("ok")
    backend = OpenAIChatBackend(server.url + "/v1", "m", api_key="secret", temperature=0.6, max_tokens=64)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    backend.chat(_conversation(), tools, temperature=0.0, seed=3)
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer secret"
    body = request["body"]
    assert body["model"] == "m" and body["tools"] == tools
    assert (body["temperature"], body["max_tokens"], body["seed"]) == (0.0, 64, 3)
    sent_args = [c["function"]["arguments"] for c in body["messages"][2]["tool_calls"]]
    assert [json.loads(a) for a in sent_args] == [{"command": "ls"}, {"invalid_arguments": "bash ls"}]


def test_unreachable_server_is_a_clear_error():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    backend = OpenAIChatBackend(f"http://127.0.0.1:{port}", "m", backoff=0.01, max_retries=2, timeout=5)
    with pytest.raises(BackendError, match=rf"127.0.0.1:{port}/v1/chat/completions after 3 attempt.*Connection"):
        backend.chat(MESSAGES)


@pytest.mark.parametrize("base, url", [
    ("http://h:1", "http://h:1/v1/chat/completions"),
    ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
    ("https://h/api/v2", "https://h/api/v2/chat/completions"),
    ("http://h:1/v1/chat/completions", "http://h:1/v1/chat/completions"),
])
def test_url_forms(base, url):
    assert OpenAIChatBackend(base, "m").url == url


@pytest.mark.parametrize("kwargs, match", [
    (dict(base_url="localhost:8000", model="m"), "http"),
    (dict(base_url="http://h", model=""), "model"),
    (dict(base_url="http://h", model="m", timeout=0), "timeout"),
    (dict(base_url="http://h", model="m", max_retries=-1), "max_retries"),
])
def test_bad_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OpenAIChatBackend(**kwargs)


# ---------------------------------------------------------------------------------------------------
# in-process transformers and backend_from_spec


def test_transformers_backend_generates_and_counts(tiny_llama_path):
    from transformers import AutoTokenizer

    backend = TransformersChatBackend(tiny_llama_path, max_new_tokens=12)
    tools = [{"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}}]
    reply = backend.chat(_conversation(), tools)
    again = backend.chat(_conversation(), tools)
    assert reply.content == again.content  # greedy by default
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    prompt = tokenizer.apply_chat_template(to_template_messages(_conversation()), tools=tools,
                                           add_generation_prompt=True, tokenize=True)["input_ids"]
    assert reply.usage.prompt_tokens == len(prompt)
    assert 1 <= reply.usage.completion_tokens <= 12
    assert reply.finish_reason in ("length", "stop", "tool_calls")
    sampled = backend.chat(MESSAGES, temperature=1.0, seed=0, max_tokens=5)
    assert sampled.usage.completion_tokens <= 5
    with pytest.raises(ValueError, match="unsupported sampling"):
        backend.chat(MESSAGES, frequency_penalty=1.0)


def test_backend_from_spec(tiny_llama_path, tmp_path):
    http = backend_from_spec("http://127.0.0.1:9/v1", model="m")
    assert isinstance(http, OpenAIChatBackend) and http.model == "m"
    local = backend_from_spec(str(tiny_llama_path), max_new_tokens=4)
    assert isinstance(local, TransformersChatBackend)
    with pytest.raises(InputError, match="backend_from_spec: spec: expected an http"):
        backend_from_spec(str(tmp_path / "missing"))


def test_seeded_sampling_leaves_the_global_generator_alone(tiny_llama_path):
    import torch

    backend = TransformersChatBackend(tiny_llama_path, max_new_tokens=6)
    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = backend.chat(MESSAGES, temperature=1.0, seed=7)
    assert torch.equal(torch.get_rng_state(), state)  # the caller's RNG is where it was
    torch.manual_seed(7)  # the tokens are those of seeding torch's generator before generating, as before
    assert backend.chat(MESSAGES, temperature=1.0).content == first.content


def test_cuda_device_without_a_gpu_is_refused_up_front(tiny_llama_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(InputError, match="TransformersChatBackend: device: expected 'cpu' on a machine without"):
        TransformersChatBackend(tiny_llama_path, device="cuda")


def _backend_args(*argv):
    import argparse

    parser = argparse.ArgumentParser()
    add_backend_arguments(parser, scripted="offline", temperature=0.6)
    return parser.parse_args(list(argv))


def test_backend_options_helper(tiny_llama_path):
    args = _backend_args("--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--api-key", "k",
                         "--max-new-tokens", "7")
    backend = backend_from_args(args, command="cmd")
    assert isinstance(backend, OpenAIChatBackend) and backend.model == "m"
    assert backend._client.api_key == "k"
    assert sampling_from_args(args) == {"temperature": 0.6, "max_tokens": 7}
    assert backend_from_args(_backend_args("--backend", "scripted"), command="cmd", scripted=lambda: "S") == "S"
    assert isinstance(backend_from_args(_backend_args("--backend", str(tiny_llama_path)), command="cmd"),
                      TransformersChatBackend)
    for argv, scripted, match in [
        ((), None, "cmd: --backend: expected a server URL, a local model folder"),
        (("--backend", "scripted"), None, "cmd: --backend: expected a server URL or a local model folder"),
        (("--base-url", "localhost:8000"), None, "cmd: --base-url: expected an http"),
        (("--backend", "http://a:1", "--base-url", "http://b:1"), None, "cmd: --backend: expected nothing else"),
        (("--backend", str(tiny_llama_path), "--api-key", "k"), None, "cmd: --api-key: expected an API key only"),
    ]:
        with pytest.raises(InputError, match=match):
            backend_from_args(_backend_args(*argv), command="cmd", scripted=scripted)
    with pytest.raises(SystemExit):
        _backend_args("--temperature", "-1")


def test_strict_template_messages_name_the_bad_message():
    out = to_template_messages([{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "function": {"name": "bash", "arguments": "{\"command\": \"ls\"}"}}], "name": None}], strict=True)
    assert out == [{"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": "bash", "arguments": {"command": "ls"}}, "id": "c"}]}]
    with pytest.raises(InputError, match=r"to_template_messages: trajectory 'r', message 0: role: expected one of"):
        to_template_messages([{"role": "human", "content": "x"}], strict=True, row_id="r")
    with pytest.raises(InputError, match="expected a non-empty list"):
        to_template_messages([], strict=True)
    assert to_template_messages([]) == []  # lenient: anything goes
