import os
import sys
from pathlib import Path

import pytest

import torch

# Without a GPU, Triton kernels run in the interpreter on CPU tensors. Triton decides its mode when
# it is first imported, so the variable is set here, before any test module can import it.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

# The tests use tiny tensors: one intra-op thread is as fast and does not thrash when the machine is busy.
torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent
PLUGIN_DIR = TESTS / "plugins"
PLUGIN = "icml26_test_plugin"


@pytest.fixture
def plugin_env(monkeypatch):
    """Register the test-only experiments (tests/plugins/icml26_test_plugin.py) for this test.

    Returns the environment a subprocess needs to see them too.
    """
    from icml26 import registry

    monkeypatch.syspath_prepend(str(PLUGIN_DIR))
    monkeypatch.setenv(registry.PLUGIN_ENV, PLUGIN)
    monkeypatch.setattr(registry, "_discovered", False)
    registry.discover()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PLUGIN_DIR), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


@pytest.fixture
def make_git_repo():
    """``make_git_repo(root, files=None, *, commit=True)``: a git repository at ``root`` (returned).

    ``files`` maps relative paths to texts (dedented, so they can be written indented in a test); with
    ``commit`` everything is committed as ``init`` by a fixed test identity, else the files stay untracked.
    """
    import subprocess
    import textwrap

    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")

    def make(root, files=None, *, commit=True):
        root = Path(root)
        root.mkdir(parents=True, exist_ok=True)
        for rel, text in (files or {}).items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        steps = [["init", "-q"]] + ([["add", "-A"], ["commit", "-q", "-m", "init"]] if commit else [])
        for args in steps:
            subprocess.run(["git", "-C", str(root), *args], check=True, env=env, capture_output=True)
        return root

    return make


@pytest.fixture
def run_cli():
    """``run_cli(args, env=None)``: ``python -m icml26 ARGS`` in a subprocess, output as text."""
    import subprocess

    def run(args, env=None, timeout=120, **kwargs):
        return subprocess.run([sys.executable, "-m", "icml26", *args], env=env, capture_output=True, text=True,
                              timeout=timeout, **kwargs)

    return run


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    """Tiny models built by any test go to one temporary cache shared by the whole session."""
    patch = pytest.MonkeyPatch()
    patch.setenv("ICML26_CACHE", str(tmp_path_factory.mktemp("icml26-cache")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def tiny_llama_path():
    """Folder of the default tiny Llama (built once per session, see icml26.tiny)."""
    from icml26.tiny import build_tiny_model

    return build_tiny_model("llama")
