"""eval/gpu/check_all.sh, the GPU check, on this machine: its syntax, its arguments, one dry-run step and a timeout.

The whole dry run (every step on CPU, in a venv without trl and datasets) takes a minute or two: run it by
hand as the README says.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "eval" / "gpu" / "check_all.sh"

pytestmark = pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                                reason="needs bash and coreutils' timeout")


def _run(args, out, **env):
    environ = dict(os.environ, OUT=str(out), PYTHON=sys.executable, ICML26_GPU_WORK=str(out / "work"), **env)
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=environ, timeout=300)


def test_the_script_parses_and_refuses_an_unknown_step(tmp_path):
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    done = _run(["--dry-run", "benchmarks"], tmp_path)
    assert done.returncode == 2
    assert "check_all.sh: step: expected one of install env tests naevit nudft saisa" in done.stderr
    assert "got 'benchmarks'" in done.stderr
    assert "--dry-run" in _run(["--help"], tmp_path).stdout


def test_a_dry_run_step_writes_the_summary(tmp_path):
    """`env` runs (icml26 is importable here, so nothing is installed) and the summary says so."""
    done = _run(["--dry-run", "env"], tmp_path)
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["dry_run"] is True and summary["device"] == "cpu" and summary["status"] == 0, done.stdout[-2000:]
    assert [(s["name"], s["rc"]) for s in summary["steps"]] == [("env", 0)]
    assert "triton_mode" in (tmp_path / "check.log").read_text() and done.returncode == 0


def test_a_step_past_the_deadline_is_cut_and_recorded(tmp_path):
    """A 1 s deadline leaves the step its floor of 5 s: the timeout's status 124 lands in the summary and exit."""
    done = _run(["--dry-run", "tests"], tmp_path, ICML26_GPU_DEADLINE="1")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert [(s["name"], s["rc"], s["timeout_s"]) for s in summary["steps"]] == [("tests", 124, 5)], done.stdout[-2000:]
    assert summary["status"] == 124 and done.returncode == 124
    log = (tmp_path / "check.log").read_text()
    assert "=== tests: exit 124 in " in log and "(timed out)" in log
