"""The ``icml26`` logger: library modules log to ``logging.getLogger(__name__)``, the runner writes run.log."""

import ast
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from icml26 import Result
from icml26.registry import Entry
from icml26.runner import RUN_LOG, run_all

REPO = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("icml26", "kernels", "models", "training", "agents", "eval")

OK_BODY = {"choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}],
           "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


@pytest.fixture
def fails_once():
    """A loopback server answering 503 to its first request and a chat completion afterwards."""
    answered = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            status, body = (503, b"overloaded") if not answered else (200, json.dumps(OK_BODY).encode())
            answered.append(status)
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}", answered
    server.shutdown()
    server.server_close()


def test_a_retried_request_is_visible_at_info(fails_once, caplog):
    pytest.importorskip("openai")
    from icml26.agents.backends import OpenAIChatBackend

    url, answered = fails_once
    backend = OpenAIChatBackend(url, "m", backoff=0.01, max_retries=2)
    with caplog.at_level(logging.INFO, logger="icml26"):
        assert backend.chat([{"role": "user", "content": "hello"}]).content == "hi"
    assert answered == [503, 200]
    retries = [r for r in caplog.records if r.name == "icml26.agents.backends_http"]
    assert len(retries) == 1 and retries[0].levelno == logging.INFO
    message = retries[0].getMessage()
    assert "attempt 1 of 3 failed" in message and "HTTP 503" in message and "retrying in 0.01 s" in message


def _logs_from_a_library_module(config):
    logging.getLogger("icml26.eval.experiments.t_log").info("instance 3 failed: no patch")
    logging.getLogger("other.library").info("not ours")
    return Result(metrics={"ok": 1})


def _raises(config):
    raise RuntimeError("deliberate")


ENTRIES = [Entry("experiment", "t_log", "test: logs", _logs_from_a_library_module, None, __name__),
           Entry("experiment", "t_log_raise", "test: raises", _raises, None, __name__)]


def test_run_log_holds_the_icml26_loggers_during_the_run_only(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    package_logger = logging.getLogger("icml26")
    handlers, level = list(package_logger.handlers), package_logger.level
    run_all("experiment", ENTRIES, run_dir=tmp_path, progress=False, echo=lambda _: None)
    text = (tmp_path / RUN_LOG).read_text()
    assert "INFO icml26.eval.experiments.t_log: instance 3 failed: no patch" in text
    assert "not ours" not in text
    assert "experiment t_log: started" in text and "experiment t_log: done in" in text
    assert "ERROR icml26.runner: experiment t_log_raise raised:" in text and "RuntimeError: deliberate" in text
    assert package_logger.handlers == handlers and package_logger.level == level  # nothing left behind
    logging.getLogger("icml26.eval.experiments.t_log").warning("after the run")
    assert "after the run" not in (tmp_path / RUN_LOG).read_text()


def test_only_rank_0_writes_run_log(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    run_all("experiment", ENTRIES[:1], run_dir=tmp_path, progress=False, echo=lambda _: None)
    assert not (tmp_path / RUN_LOG).exists() and (tmp_path / "results.json").exists()


def test_library_modules_log_by_module_name_and_configure_no_handler():
    """``logging.getLogger(__name__)`` only, and no handlers, levels or basicConfig outside the runner's run.log."""
    configuring = {"addHandler", "removeHandler", "basicConfig", "setLevel", "dictConfig", "fileConfig"}
    wrong = []
    for folder in PACKAGE_FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            rel = path.relative_to(REPO).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
                    continue
                owner = node.func.value
                if node.func.attr == "getLogger" and isinstance(owner, ast.Name) and owner.id == "logging":
                    by_name = len(node.args) == 1 and isinstance(node.args[0], ast.Name) and node.args[0].id == "__name__"
                    package = (rel == "icml26/runner.py" and len(node.args) == 1
                               and isinstance(node.args[0], ast.Constant) and node.args[0].value == "icml26")
                    if not (by_name or package):
                        wrong.append(f"{rel}:{node.lineno} getLogger({ast.unparse(node.args[0]) if node.args else ''})")
                elif node.func.attr in configuring and rel != "icml26/runner.py" and "log" in ast.unparse(owner).lower():
                    wrong.append(f"{rel}:{node.lineno} {ast.unparse(node.func)}")
    assert wrong == []
