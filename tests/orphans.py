"""Counting the processes a SIGKILLed run leaves behind (the "workers die with their run" tests)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable


def processes_with(marker: str, *, at_start: bool = False) -> list[int]:
    """The pids whose command line holds ``marker`` (begins with it, with ``at_start``)."""
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as handle:
                    line = handle.read()
            except OSError:
                continue
            if line.startswith(marker.encode()) if at_start else marker.encode() in line:
                found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    """Running (a zombie waiting for init to reap it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (empty once it is gone)."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def survivors_of_sigkill(run: subprocess.Popen, watched: Callable[[], list[int]], *, grace: float = 1.0,
                         start_timeout: float = 60.0) -> list[int]:
    """Wait until ``watched()`` names the processes to watch, SIGKILL ``run`` (what a caller's time-out does: no
    cleanup can run in it), give them ``grace`` seconds to go, and return those still running (killed on the way
    out, so no test leaves them behind). ``run`` must have ``stderr=PIPE``; it is killed and closed on every path."""
    try:
        deadline = time.monotonic() + start_timeout
        while not (pids := watched()):
            assert run.poll() is None, run.stderr.read().decode()
            assert time.monotonic() < deadline, "the processes to watch did not start"
            time.sleep(0.05)
        assert os.getpid() not in pids
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        deadline = time.monotonic() + grace
        while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.02)
        left = [pid for pid in pids if alive(pid)]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
        return left
    finally:
        if run.poll() is None:
            run.kill()
        run.stderr.close()


def kill_once_written(argv: list[str], path, *, timeout: float = 120.0) -> None:
    """Start ``argv`` in its own session, wait until it has written ``path`` (a checkpoint), then SIGKILL its whole
    process group (a kill mid-run: no cleanup runs). Fails if the run ends or times out before writing ``path``."""
    import pathlib

    path = pathlib.Path(path)
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while not path.is_file() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert path.is_file(), f"{path.name} was not written before the run ended"
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
