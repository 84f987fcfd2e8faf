import os
import sys
from pathlib import Path

import pytest

import torch

TEST_DEVICE_ENV = "ICML26_TEST_DEVICE"
"""Where the kernel tests run Triton: ``cpu`` (the interpreter) or ``cuda``; set by ``--device``."""


def pytest_addoption(parser):
    parser.addoption("--device", choices=("auto", "cpu", "cuda"), default=os.environ.get(TEST_DEVICE_ENV, "auto"),
                     help="where the kernel tests run Triton: cpu (the interpreter; fp32/fp16), cuda (compiled; "
                          "fp32/fp16/bf16), auto (cuda when a GPU is present); default from $ICML26_TEST_DEVICE")


def pytest_configure(config):
    # Triton decides its mode (interpreter or compiled) when it is first imported, so the variable is
    # set here, before any test module can import it.
    choice = config.getoption("--device")
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda" and not torch.cuda.is_available():
        raise pytest.UsageError("--device: expected 'cpu' or 'auto' on a machine without a GPU, got 'cuda'")
    os.environ[TEST_DEVICE_ENV] = choice
    if choice == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
    else:
        os.environ.pop("TRITON_INTERPRET", None)
        # Tests check correctness, not speed: one fixed tile per kernel instead of timing every tile of
        # the autotune space at every new shape (test_naevit.py and test_nudft.py run every tile once).
        os.environ.setdefault("ICML26_AUTOTUNE", "0")

# The tests use tiny tensors: one intra-op thread is as fast and does not thrash when the machine is busy.
torch.set_num_threads(1)

TESTS = Path(__file__).resolve().parent
PLUGIN_DIR = TESTS / "plugins"
PLUGIN = "icml26_test_plugin"


def kernel_device_now() -> torch.device:
    """The device the kernel tests run Triton on in this session (see ``--device``)."""
    return torch.device(os.environ.get(TEST_DEVICE_ENV, "cpu"))


@pytest.fixture
def kernel_device(monkeypatch):
    """The device for Triton kernel tests: CUDA (compiled) with ``--device cuda``, else CPU tensors in the
    interpreter (kernels are jitted at first call, in the mode of the environment then)."""
    device = kernel_device_now()
    if device.type == "cuda":
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    else:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    return device


@pytest.fixture(params=["float16", "bfloat16"])
def low_precision(request, kernel_device):
    """float16 everywhere; bfloat16 on CUDA only: Triton 3.9's interpreter computes tl.dot on bf16 operands
    wrongly on CPU (bf16 loads and casts are right)."""
    if request.param == "bfloat16" and kernel_device.type == "cpu":
        pytest.skip("bf16 tl.dot is wrong in Triton's CPU interpreter: run with --device cuda")
    return getattr(torch, request.param)


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


@pytest.fixture(scope="module")
def one_torch_thread():
    """One intra-op torch thread for a module (``pytestmark = pytest.mark.usefixtures("one_torch_thread")``):
    tiny matrices gain nothing from threads, and on a busy 2-core machine OpenMP spinning costs 10-20x."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


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


# PhysioNet 2012 records in the challenge's format (tests of icml26.eval.tasks.tfmixer.physionet2012 and TFMixer)
PHYSIONET_HEADER = "Time,Parameter,Value\n"


def physionet_record_text(record_id, static=(54, 0, -1, 4, -1), rows=()):
    age, gender, height, icu, weight = static
    lines = [f"00:00,RecordID,{record_id}", f"00:00,Age,{age}", f"00:00,Gender,{gender}", f"00:00,Height,{height}",
             f"00:00,ICUType,{icu}", f"00:00,Weight,{weight}"]
    return PHYSIONET_HEADER + "\n".join(lines + [f"{t},{p},{v}" for t, p, v in rows]) + "\n"


@pytest.fixture
def physionet_folder(tmp_path):
    """Six records in the challenge's format (set-a/), and an outcomes file that must be skipped."""
    folder = tmp_path / "set-a"
    folder.mkdir()
    base = [("00:07", "HR", 73), ("01:00", "Urine", 100), ("01:00", "Urine", 300), ("12:30", "Temp", 36.6),
            ("23:59", "HR", 80), ("24:30", "HR", 90), ("30:00", "Temp", 37.2), ("37:00", "HR", 70),
            ("38:15", "HR", 71), ("39:00", "NIMAP", 80), ("40:00", "HR", 75)]
    for i in range(4):
        rows = [(t, p, v + i) for t, p, v in base]
        text = physionet_record_text(132530 + i, static=(50 + i, i % 2, 170 + i, 2, 80), rows=rows)
        (folder / f"13253{i}.txt").write_text(text)
    # no history at all (static unknown, everything after 24 h), and nothing to forecast
    unknown = physionet_record_text(132540, static=(-1, -1, -1, -1, -1), rows=[("25:00", "HR", 1000)])
    (folder / "132540.txt").write_text(unknown)
    (folder / "132541.txt").write_text(physionet_record_text(132541, rows=[("02:00", "HR", 60)]))
    (tmp_path / "Outcomes-a.txt").write_text(
        "RecordID,SAPS-I,SOFA,Length_of_stay,Survival,In-hospital_death\n132530,6,1,5,-1,0\n")
    return tmp_path
