import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from icml26.cli import main
from icml26.papers import PAPERS


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_list_shows_every_paper_and_registered_plugins(plugin_env, capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for paper in PAPERS:
        assert paper.key in out
    assert "t_ok" in out and "plugin" in out and "t_bench" in out
    assert main(["list", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["key"] for r in rows} >= {p.key for p in PAPERS} | {"t_ok", "t_bench"}


def test_list_imports_no_heavy_library():
    """``icml26 list`` stays instant because it imports neither torch nor numpy (timing lives in benchmarks)."""
    code = (
        "import sys; from icml26.cli import main; main(['list']); "
        "heavy = [m for m in ('torch', 'transformers', 'numpy', 'triton') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_reproduce_writes_report_results_and_figures(plugin_env, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["reproduce", "t_ok", "--seeds", "2", "--out", str(out), "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "sample mean is near 1" in printed and "yes" in printed  # summary table
    data = _results(out)
    assert data["state"] == "complete" and data["mode"] == "quick" and data["seeds"] == [0, 1]
    (exp,) = data["experiments"]
    assert exp["status"] == "ok" and exp["seconds"] > 0
    result = exp["result"]
    assert result["metrics"]["n_seeds"] == 2
    assert [c["holds"] for c in result["claims"]] == [True, True]
    assert result["figures"] == {"means": "t_ok/means.png"}
    png = out / "t_ok" / "means.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "t_ok" / "artifact.txt").read_text() == "kept"
    report = (out / "report.md").read_text()
    for text in ("## `t_ok`", "sample mean is near 1", "![means](t_ok/means.png)", "per seed",
                 "A sampled mean compared", "state: **complete**"):
        assert text in report


def test_full_mode_defaults_to_three_seeds(plugin_env, tmp_path):
    assert main(["reproduce", "t_ok", "--full", "--out", str(tmp_path), "--no-progress"]) == 0
    assert _results(tmp_path)["seeds"] == [0, 1, 2]


def test_failing_claim_passes_unless_strict(plugin_env, tmp_path, capsys):
    assert main(["reproduce", "t_ok", "t_fail_claim", "--out", str(tmp_path / "a"), "--no-progress"]) == 0
    assert main(["reproduce", "t_ok", "t_fail_claim", "--strict", "--out", str(tmp_path / "b"),
                 "--no-progress"]) == 1
    assert "do not hold" in capsys.readouterr().err
    claims = _results(tmp_path / "b")["experiments"][1]["result"]["claims"]
    assert claims[0]["holds"] is False and "NO" in (tmp_path / "b" / "report.md").read_text()
    assert main(["reproduce", "t_ok", "--strict", "--out", str(tmp_path / "c"), "--no-progress"]) == 0


def test_raising_experiment_is_reported_and_run_goes_on(plugin_env, tmp_path, capsys):
    assert main(["reproduce", "t_raise", "t_ok", "--out", str(tmp_path), "--no-progress"]) == 1
    data = _results(tmp_path)
    assert [e["status"] for e in data["experiments"]] == ["error", "ok"]
    assert "deliberate failure" in data["experiments"][0]["error"]
    report = (tmp_path / "report.md").read_text()
    assert "Traceback (most recent call last)" in report and "RuntimeError: deliberate failure" in report


def test_bench_uses_the_same_conventions(plugin_env, tmp_path):
    assert main(["bench", "t_bench", "--out", str(tmp_path), "--no-progress"]) == 0
    data = _results(tmp_path)
    assert data["kind"] == "benchmark" and data["experiments"][0]["result"]["metrics"]["seconds"] > 0
    assert "benchmark report" in (tmp_path / "report.md").read_text()


def test_default_run_folder_is_timestamped(plugin_env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["reproduce", "t_ok", "--no-progress"]) == 0
    assert main(["reproduce", "t_ok", "--no-progress"]) == 0
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert len(runs) == 2 and all((tmp_path / "runs" / r / "report.md").exists() for r in runs)


@pytest.mark.parametrize(
    "args, message",
    [
        (["reproduce", "no_such_key"], "reproduce: KEY: expected a registered experiment"),
        (["reproduce", "<first planned paper>"], "is not implemented yet"),
        (["bench", "no_such_bench"], "bench: NAME: expected a registered benchmark"),
        (["reproduce", "--seeds", "0"], "expected a positive integer"),
        (["reproduce", "--seeds", "many"], "expected a positive integer"),
        (["reproduce", "--quick", "--full"], "not allowed with argument"),
        (["reproduce", "--device", "gpu7"], "expected auto, cpu, cuda"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_bad_input_is_one_clear_line_with_exit_2(plugin_env, run_cli, args, message):
    if "<first planned paper>" in args:
        from icml26.registry import entries

        planned = [p.key for p in PAPERS if p.key not in entries("experiment")]
        if not planned:
            pytest.skip("every paper has an experiment")
        args = [planned[0] if a == "<first planned paper>" else a for a in args]
    proc = run_cli(args, env=plugin_env)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_unwritable_output_folder(plugin_env, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert main(["reproduce", "t_ok", "--out", str(blocker / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reproduce: --out: expected a folder that can be created and written to" in err[0]


def _start_slow_run(plugin_env, tmp_path):
    marker = tmp_path / "started"
    env = dict(plugin_env, ICML26_TEST_MARKER=str(marker))
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "icml26", "reproduce", "t_ok", "t_slow", "t_fail_claim",
                             "--out", str(out), "--no-progress"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "t_slow never started"
        time.sleep(0.05)
    return proc, out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_interrupt_leaves_a_valid_report(plugin_env, tmp_path, sig):
    proc, out = _start_slow_run(plugin_env, tmp_path)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    data = _results(out)
    assert data["state"] == "interrupted"
    assert [e["status"] for e in data["experiments"]] == ["ok", "interrupted", "not run"]
    report = (out / "report.md").read_text()
    assert "state: **interrupted**" in report and "sample mean is near 1" in report


def test_killed_run_keeps_what_finished(plugin_env, tmp_path):
    proc, out = _start_slow_run(plugin_env, tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    data = _results(out)  # still valid JSON: written atomically after each experiment
    assert data["state"] == "running"
    assert [e["status"] for e in data["experiments"]] == ["ok", "running", "pending"]
    assert re.fullmatch(r"waiting [01]/3", data["experiments"][1]["phase"])  # where it was when it died
    assert data["pid"] == proc.pid
    assert "sample mean is near 1" in (out / "report.md").read_text()
    # `icml26 status` tells the dead run from a live one (exit 1), and a new run into the folder says so.
    status = subprocess.run([sys.executable, "-m", "icml26", "status", str(out)], capture_output=True, text=True,
                            timeout=60)
    assert status.returncode == 1, status.stderr
    assert "stale" in status.stdout and f"process {proc.pid}" in status.stdout and "[waiting " in status.stdout
    again = subprocess.run([sys.executable, "-m", "icml26", "reproduce", "t_ok", "--out", str(out), "--no-progress"],
                           env=plugin_env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert "never finished" in again.stderr and _results(out)["state"] == "complete"


def test_status_of_a_live_run_and_refusal_to_share_its_folder(plugin_env, tmp_path, run_cli):
    proc, out = _start_slow_run(plugin_env, tmp_path)
    try:
        status = run_cli(["status", str(out), "--json"])
        assert status.returncode == 0, status.stderr
        data = json.loads(status.stdout)
        assert data["state"] == "running" and data["alive"] is True
        assert [(e["phase"] or "")[:8] for e in data["experiments"]] == ["", "waiting ", ""]
        clash = run_cli(["reproduce", "t_ok", "--out", str(out)], env=plugin_env)
        assert clash.returncode == 2 and "still running there" in clash.stderr
    finally:
        proc.kill()
        proc.communicate(timeout=60)


def test_status_of_a_folder_without_results_is_a_usage_error(run_cli, tmp_path):
    proc = run_cli(["status", str(tmp_path)])
    assert proc.returncode == 2 and "status: DIR: expected a run folder holding results.json" in proc.stderr


def test_device_that_is_not_there_is_refused_before_running(plugin_env, run_cli, tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    proc = run_cli(["reproduce", "t_ok", "--device", "cuda", "--out", str(tmp_path / "r")], env=plugin_env)
    assert proc.returncode == 2, proc.stderr
    assert "reproduce: --device: expected a device torch can see here" in proc.stderr
    assert not (tmp_path / "r").exists()


def test_env_reports_versions_device_and_triton_mode(run_cli):
    proc = run_cli(["env", "--json"])
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    from importlib.metadata import PackageNotFoundError, version

    for key in ("python", "torch", "transformers", "trl", "peft", "accelerate", "datasets", "triton", "vllm",
                "bitsandbytes", "liger-kernel", "openai", "device", "triton_mode", "git_commit", "git_dirty",
                "scikit-learn", "torch-geometric", "gymnasium", "pandas", "statsmodels", "scipy", "highspy", "bm25s"):
        assert key in info
    for name in ("accelerate", "datasets", "vllm", "peft", "trl", "bitsandbytes", "liger-kernel", "openai"):
        try:
            expected = version(name)
        except PackageNotFoundError:
            expected = "not installed"
        assert info[name] == expected, name
    interp = run_cli(["env"], env={**__import__("os").environ, "TRITON_INTERPRET": "1"})
    assert "interpreted" in interp.stdout


def test_a_running_folder_from_another_host_is_not_overwritten(plugin_env, run_cli, tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"state": "running", "pid": 1, "host": "another-host",
                                                  "heartbeat": "2000-01-01T00:00:00+00:00", "experiments": []}))
    proc = run_cli(["reproduce", "t_ok", "--out", str(out)], env=plugin_env)
    assert proc.returncode == 2 and "may still be running" in proc.stderr, proc.stderr
    assert json.loads((out / "results.json").read_text())["host"] == "another-host"  # left alone
    status = run_cli(["status", str(out)])
    assert status.returncode == 1 and "stale" in status.stdout  # old heartbeat: shown as stale


def test_results_record_the_exact_command_source_and_machine(plugin_env, tmp_path):
    import shlex

    out = tmp_path / "a run"
    args = ["reproduce", "t_ok", "--seeds", "2", "--out", str(out), "--no-progress"]
    assert main(args) == 0
    data = _results(out)
    assert data["command"] == shlex.join(["icml26", *args]) and shlex.split(data["command"])[1:] == args
    assert "git" not in data  # the nested form of 0.2.0 and before
    assert (data["git_commit"], data["git_dirty"]) == (None, None) or (
        re.fullmatch(r"[0-9a-f]{40}", data["git_commit"]) and isinstance(data["git_dirty"], bool))
    assert data["machine"]["platform"] and data["machine"]["torch_threads"] >= 1  # torch was imported by then
    assert data["versions"]["icml26"] and data["experiments"][0]["seconds"] > 0


def test_data_the_experiment_can_read_passes_the_check(physionet_folder, tmp_path, monkeypatch):
    """``--data`` that exists and that tfmixer's ``check_data`` accepts (a folder of records, a tar archive)
    reaches the run; the probes in test_bad_input_cli.py show the refusals."""
    import tarfile

    import icml26.runner

    class Reached(Exception):
        pass

    def reached(*args, **kwargs):
        raise Reached(kwargs["data"])

    monkeypatch.setattr(icml26.runner, "run_all", reached)
    archive = tmp_path / "set-a.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(physionet_folder / "set-a", arcname="set-a")
    for data in (physionet_folder, archive):
        with pytest.raises(Reached, match=str(data)):
            main(["reproduce", "tfmixer", "--data", str(data), "--out", str(tmp_path / "run"), "--no-progress"])


def test_every_registered_entry_runs_its_modules_run_function():
    """A helper slipped between ``@experiment(...)`` and ``def run`` registers the helper instead (it then
    receives the run's config and fails on every reproduce): each entry must be its module's ``run``."""
    import importlib

    from icml26.registry import KINDS, entries

    for kind in KINDS:
        for entry in entries(kind).values():
            if not entry.module.startswith("icml26."):
                continue  # the tests' plugins register functions of other names on purpose
            module = importlib.import_module(entry.module)
            assert entry.run is getattr(module, "run", None), f"{kind} {entry.key}: registers {entry.run.__name__}"
