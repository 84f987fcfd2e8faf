"""Runs the snippets of the README section "Using icml26 from transformers / TRL" as they are written.

Each snippet follows a ``<!-- snippet:NAME -->`` marker. Python snippets run in order in one
namespace, in a scratch folder (``MODEL`` names a tiny model folder; ``runs/sera`` is a real
``icml26 sera generate`` output made by the scripted teacher). Shell lines run with ``MODEL`` and
the port substituted.
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
README = (ROOT / "README.md").read_text()
SECTION = README.split("## Using icml26 from transformers / TRL", 1)[1].split("\n## ", 1)[0]


def snippet(name: str) -> str:
    match = re.search(rf"<!-- snippet:{re.escape(name)} -->\n```(\w+)\n(.*?)```", SECTION, re.S)
    assert match, f"README section lacks the snippet {name!r}"
    return match.group(2)


def test_every_snippet_of_the_section_is_run_here():
    names = re.findall(r"<!-- snippet:([\w-]+) -->", SECTION)
    here = Path(__file__).read_text()
    assert names and all(f'"{name}"' in here for name in names), names


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A scratch folder holding ``runs/sera`` (a scripted SERA run of two instances)."""
    from icml26.agents.sera import ScriptedTeacher, generate, make_git_repo_from_package

    folder = tmp_path_factory.mktemp("readme_hf")
    repo = make_git_repo_from_package("jmespath", folder / "repo")
    generate(repo, ScriptedTeacher(seed=1, q=1.0), folder / "runs" / "sera", threshold=0.5, limit=2, progress=False)
    return folder


@pytest.fixture(scope="module")
def model_path():
    from icml26.tiny import build_tiny_model

    return str(build_tiny_model("qwen3", max_position_embeddings=8192))  # SERA's prompts hold ~5,000 tokens


@pytest.fixture(scope="module")
def namespace(workdir, model_path):
    return {"MODEL": model_path, "__name__": "readme"}


def _run_python(code: str, namespace: dict, folder: Path) -> None:
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        exec(compile(code, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)


def test_saisa_auto_classes_processor_lora_and_trainer_defaults(namespace, workdir):
    import torch

    from icml26.models.saisa import SaisaForConditionalGeneration

    _run_python(snippet("saisa-auto"), namespace, workdir)
    assert isinstance(namespace["model"], SaisaForConditionalGeneration)
    inputs = namespace["inputs"]
    assert int((inputs["input_ids"] == namespace["processor"].image_token_id).sum()) == namespace["model"].n_visual
    assert namespace["logits"].shape[:2] == inputs["input_ids"].shape
    _run_python(snippet("saisa-lora"), namespace, workdir)
    assert (workdir / "saisa-lora" / "adapter_config.json").exists()
    with torch.no_grad():
        assert torch.isfinite(namespace["peft_model"](**inputs).logits).all()
    _run_python(snippet("trainer-defaults"), namespace, workdir)
    assert namespace["model"].is_activation_checkpointing


def test_plain_sft_trainer_on_sera_data(namespace, workdir):
    _run_python(snippet("sera-sft"), namespace, workdir)
    assert namespace["trainer"].state.global_step == 2


def _shell_line(name: str, starts: str) -> list[str]:
    (line,) = [line for line in snippet(name).splitlines() if line.startswith(starts)]
    return shlex.split(line.split("  #")[0])


def test_two_process_launch_line(workdir, model_path):
    """The README's torchrun line (the accelerate line is the launcher of ``test_distributed.py``)."""
    args = [model_path if a == "MODEL" else a for a in _shell_line("two-process", "torchrun")]
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
    serve = [a.replace("8000", str(port)) for a in _shell_line("openai", "transformers serve")]
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
        code = snippet("openai-python").replace("http://127.0.0.1:8000", f"http://127.0.0.1:{port}")
        _run_python(code, namespace, workdir)
        assert namespace["reply"].usage.completion_tokens > 0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
