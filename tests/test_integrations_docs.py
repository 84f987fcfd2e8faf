"""Runs the command lines of the docs' integrations page (``docs/integrations.md``) as they are written.

Its Python blocks run one by one in fresh processes in ``tests/test_docs_examples.py``; here the shell lines run
against real processes: the two-process ``torchrun`` line (on a real ``icml26 sera generate`` output made by the
scripted teacher) and ``transformers serve`` with the page's OpenAI-client block pointed at it (``MODEL`` and the
model id name a tiny model folder; the port is substituted).
"""

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("trl")
pytest.importorskip("peft")

ROOT = Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "integrations.md").read_text()


def block(containing: str) -> str:
    """The one fenced block of the page that contains ``containing``."""
    found = [body for body in re.findall(r"```\w+\n(.*?)```", PAGE, re.S) if containing in body]
    assert len(found) == 1, f"docs/integrations.md: expected one block containing {containing!r}, got {len(found)}"
    return found[0]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch folder holding ``runs/sera`` (a scripted SERA run of two instances)."""
    from icml26.agents.sera import ScriptedTeacher, generate, make_git_repo_from_package

    folder = tmp_path_factory.mktemp("integrations")
    repo = make_git_repo_from_package("jmespath", folder / "repo")
    generate(repo, ScriptedTeacher(seed=1, q=1.0), folder / "runs" / "sera", threshold=0.5, limit=2, progress=False)
    return folder


@pytest.fixture(scope="module")
def model_path():
    from icml26.tiny import build_tiny_model

    return str(build_tiny_model("qwen3", max_position_embeddings=8192))  # SERA's prompts hold ~5,000 tokens


@pytest.fixture(scope="module")
def namespace(workdir, model_path):
    return {"MODEL": model_path, "__name__": "integrations"}


def _run_python(code: str, namespace: dict, folder: Path) -> None:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, "docs/integrations.md", "exec"), namespace)
    finally:
        os.chdir(cwd)


def _shell_line(starts: str) -> list[str]:
    (line,) = [line for line in block(starts).splitlines() if line.startswith(starts)]
    return shlex.split(line.split("  #")[0])


def test_two_process_launch_line(workdir, model_path):
    """The page's torchrun line (the accelerate line is the launcher of ``test_distributed.py``)."""
    args = [model_path if a == "MODEL" else a for a in _shell_line("torchrun")]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    args[1:1] = ["--master-addr", "127.0.0.1", "--master-port", str(port)]
    args += ["--max-length", "8192", "--gradient-accumulation-steps", "1"]  # the tiny model's context; fast
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    env.pop("ACCELERATE_USE_CPU", None)
    done = subprocess.run([sys.executable, "-m", "torch.distributed.run", *args[1:]], cwd=workdir, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    out = workdir / "runs" / "sera-sft"
    summary = json.loads((out / "sera_train.json").read_text())
    assert summary["global_step"] == 2 and (out / "model.safetensors").exists()
    assert done.stdout.count("trained model written to") == 1  # rank 0 alone reports
    assert summary["n_trajectories"] >= 1 and summary["config"]["gradient_accumulation_steps"] == 1


def test_openai_client_against_transformers_serve(workdir, model_path, namespace):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    serve = [a.replace("8000", str(port)) for a in _shell_line("transformers serve")]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", "from transformers.cli.transformers import main; main()",
                             *serve[1:], "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None, "transformers serve did not start"
                time.sleep(0.5)
        code = block("OpenAIChatBackend(").replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}")
        _run_python(code.replace("Qwen/Qwen3-8B", model_path), namespace, workdir)
        assert namespace["reply"].usage.completion_tokens > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
