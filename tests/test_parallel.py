"""``icml26.eval.parallel.map_jobs``: results in order, and the jobs' progress phases relayed to the parent."""

import os

import pytest

torch = pytest.importorskip("torch")

from icml26.eval.parallel import map_jobs  # noqa: E402
from icml26.progress import listening, phase  # noqa: E402


def _job(n: int) -> tuple[int, int]:
    with phase(f"job {n}", total=n) as bar:
        for _ in range(n):
            bar.update()
    return n * n, os.getpid()


@pytest.mark.parametrize("device", ["cpu", "meta"])  # meta: the serial path a GPU takes
def test_results_keep_the_job_order_and_the_phases_reach_the_parent(device):
    events = []
    with listening(lambda tracker, event: events.append((tracker.name, event, tracker.n, os.getpid()))):
        results = map_jobs(_job, [3, 1, 2], torch.device(device), phase_name="jobs")
    assert [square for square, _ in results] == [9, 1, 4]
    if device == "cpu":
        assert all(pid != os.getpid() for _, pid in results)  # each job ran in a forked worker
    # every event is seen in the parent, by the parent's listener (workers never call it themselves)
    assert {pid for *_, pid in events} == {os.getpid()}
    closed = {name: n for name, event, n, _ in events if event == "close"}
    assert closed == {"job 3": 3, "job 1": 1, "job 2": 2, "jobs": 3}


_SLEEPERS = r"""
import os, sys, time
import torch
from icml26.eval.parallel import map_jobs

def sleep(job):
    folder, index = job
    with open(os.path.join(folder, f"{index}.pid"), "w") as handle:
        handle.write(str(os.getpid()))
    time.sleep(60)

map_jobs(sleep, [(sys.argv[1], i) for i in range(3)], torch.device("cpu"))
"""


@pytest.mark.skipif(not os.path.isdir("/proc") or not hasattr(os, "sched_getaffinity"), reason="Linux only")
def test_workers_die_when_the_run_is_killed(tmp_path):
    import subprocess
    import sys

    from orphans import survivors_of_sigkill

    run = subprocess.Popen([sys.executable, "-c", _SLEEPERS, str(tmp_path)], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def workers() -> list[int]:
        files = list(tmp_path.glob("*.pid"))
        return [int(p.read_text()) for p in files] if len(files) == 3 else []

    assert survivors_of_sigkill(run, workers) == []


def test_die_with_parent_refuses_a_bad_pid():
    from icml26.errors import InputError
    from icml26.processes import die_with_parent

    with pytest.raises(InputError, match="parent_pid: expected an int >= 1"):
        die_with_parent(0)


def test_a_process_orphaned_before_it_asked_exits_at_once():
    """The race: a parent that died between the fork and the prctl never signals; the check of the parent ends it."""
    import subprocess
    import sys

    code = "import os\nfrom icml26.processes import die_with_parent\n{call}\nprint('alive')"
    other = subprocess.run([sys.executable, "-c", code.format(call="die_with_parent(os.getppid() + 10**6)")],
                           capture_output=True, text=True, timeout=60)
    assert other.returncode == 1 and other.stdout == ""  # "its parent" is not its parent: already orphaned
    own = subprocess.run([sys.executable, "-c", code.format(call="assert die_with_parent(os.getppid())")],
                         capture_output=True, text=True, timeout=60)
    assert own.returncode == 0 and own.stdout == "alive\n", own.stderr


_STARTER = r"""
import sys
import icml26.processes as p
if sys.argv[2] == "fork":  # the preexec_fn path a machine without setpriv takes
    p._setpriv = lambda: None
proc = p.popen_dying_with_parent(["sleep", "60"])
open(sys.argv[1], "w").write(str(proc.pid))
proc.wait()
"""


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="Linux only")
@pytest.mark.parametrize("path", ["setpriv", "fork"])
def test_a_started_program_dies_with_the_run(tmp_path, path):
    """A program started with popen_dying_with_parent (CBC per synthesised instance) goes when its run is SIGKILLed."""
    import subprocess
    import sys

    from orphans import survivors_of_sigkill

    from icml26.processes import _setpriv

    if path == "setpriv" and _setpriv() is None:
        pytest.skip("no setpriv with --pdeathsig here")
    pid_file = tmp_path / "pid"
    run = subprocess.Popen([sys.executable, "-c", _STARTER, str(pid_file), path], stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def started() -> list[int]:  # the pid of sleep itself (setpriv execs it: same pid)
        if not pid_file.exists() or not pid_file.read_text():
            return []
        pid = int(pid_file.read_text())
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                return [pid] if handle.read().startswith(b"sleep") else []
        except OSError:
            return []

    assert survivors_of_sigkill(run, started) == []


def test_popen_dying_with_parent_keeps_its_own_hook():
    from icml26.processes import popen_dying_with_parent

    with pytest.raises(TypeError, match="no preexec_fn"):
        popen_dying_with_parent(["true"], preexec_fn=lambda: None)


def _square_job(job: dict) -> dict:
    from pathlib import Path

    Path(job["path"]).with_suffix(".ckpt").write_text("partial")  # a job's own checkpoint beside its result
    return {"square": job["n"] ** 2, "pid": os.getpid()}


def test_saved_jobs_are_written_as_they_finish_and_loaded_by_a_rerun(tmp_path):
    import json

    from icml26.eval.parallel import map_saved_jobs

    jobs = [{"name": f"job/{n}", "n": n} for n in (3, 1, 2)]
    settings = lambda job: {"n": job["n"]}  # noqa: E731
    first = map_saved_jobs(_square_job, jobs, torch.device("cpu"), tmp_path, settings_of=settings)
    assert list(first) == ["job/3", "job/1", "job/2"] and [r["square"] for r in first.values()] == [9, 1, 4]
    saved = json.loads((tmp_path / "job_3.json").read_text())
    assert saved == {"name": "job/3", "settings": {"n": 3}, "result": first["job/3"]}
    assert not list(tmp_path.glob("*.ckpt"))  # each checkpoint went once its result was kept
    again = map_saved_jobs(_square_job, jobs, torch.device("cpu"), tmp_path, settings_of=settings)
    assert again == first  # loaded: the same pids, nothing ran again
    other = map_saved_jobs(_square_job, jobs, torch.device("cpu"), tmp_path, settings_of=lambda j: {**j, "v": 2})
    assert {r["pid"] for r in other.values()}.isdisjoint({r["pid"] for r in first.values()})
    assert json.loads((tmp_path / "job_1.json").read_text())["settings"]["v"] == 2
    # a file of another format (an earlier version's, or not JSON) is computed again, never trusted
    (tmp_path / "job_3.json").write_text(json.dumps({"settings": {"n": 3}, "square": 0}))
    (tmp_path / "job_2.json").write_text("{half a fi")
    fresh = map_saved_jobs(_square_job, jobs, torch.device("cpu"), tmp_path, settings_of=settings)
    assert [r["square"] for r in fresh.values()] == [9, 1, 4]
    assert all(json.loads((tmp_path / f"job_{n}.json").read_text())["result"] == fresh[f"job/{n}"] for n in (3, 2))
