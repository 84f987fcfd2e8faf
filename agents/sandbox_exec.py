"""Running one command in a sandbox: whether isolation works here, and how a command is launched,
watched and reported.

:func:`isolation_support` probes once per process whether namespaces and a new root work here, by
running the launcher (:mod:`icml26.agents.sandbox_launcher`) for real. :class:`ExecutionMixin` is the
machinery under :meth:`Sandbox.run <icml26.agents.sandbox.Sandbox.run>`: it starts a command through
``unshare`` and the launcher, in the cgroup ``run`` made for it (:mod:`icml26.agents.sandbox_limits`),
or as a plain subprocess with rlimits when unisolated; waits for it against its wall-clock, CPU, memory,
process and disk limits; drains its output (head and tail kept); and reports an :class:`ExecResult`.
It reads the limits, paths and scratch folders that :class:`~icml26.agents.sandbox.Sandbox` sets up.
"""

from __future__ import annotations

import collections
import functools
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from icml26.processes import die_with_parent

from . import sandbox_launcher as _launcher
from . import sandbox_root as _root

__all__ = ["DEFAULT_DISPLAY_ROOT", "PRIVATE_DIR", "ExecResult", "ExecutionMixin", "SandboxError", "isolation_support"]

DEFAULT_DISPLAY_ROOT = "/testbed"
PRIVATE_DIR = "/.sandbox"  # inside a sandbox: the git metadata (``git``) and the home (``home``)
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
_UNSHARE_FLAGS = ("--mount", "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc")
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class SandboxError(RuntimeError):
    """The sandbox cannot be built as asked (no git repository, no isolation, no git/bash...), or its
    isolation machinery failed for a command (which then did not run)."""


@dataclass
class ExecResult:
    """What a command did. ``timed_out``: it ran past its wall-clock (or CPU) time; the ``*_exceeded``
    flags: it hit its memory, process-count or disk limit (and was ended). ``peak_memory_mb``: the
    most memory its processes held together (None without a memory cgroup)."""

    returncode: int
    output: str
    timed_out: bool
    truncated: bool
    duration_s: float
    memory_exceeded: bool = False
    pids_exceeded: bool = False
    disk_exceeded: bool = False
    peak_memory_mb: float | None = None


# --------------------------------------------------------------------------------------------------
# capability probe


def _launcher_argv(prefix: tuple[str, ...], spec: dict) -> list[str]:
    return [*prefix, sys.executable, "-I", "-S", _launcher.__file__, _launcher.LAUNCH_FLAG, _launcher.encode(spec)]


@functools.cache
def isolation_support() -> tuple[tuple[str, ...] | None, str]:
    """``(unshare argv prefix, "")`` when isolated execution (namespaces and the new root) works here,
    else ``(None, reason)``.

    Probed once per process by running the launcher for real: user-namespace mode is tried when
    the root mode is refused.
    """
    if sys.platform != "linux":
        return None, f"namespaces need Linux (this is {sys.platform})"
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "the `unshare` command (util-linux) is not installed"
    base = (unshare, *_UNSHARE_FLAGS)
    modes = [base] if os.geteuid() == 0 else []
    modes.append(base[:1] + ("--user", "--map-root-user") + base[1:])
    reasons = []
    with tempfile.TemporaryDirectory(prefix="icml26-sandbox-probe-") as tmp:
        root = [*_root.system_steps((), 1 << 20), ["bind", tmp, DEFAULT_DISPLAY_ROOT, _root.RW_EXEC]]
        spec = {"root": root, "cwd": DEFAULT_DISPLAY_ROOT, "rlimits": {},
                "argv": ["/bin/sh", "-c", "echo ok > probe && cat probe && pwd"]}
        for prefix in modes:
            try:
                proc = subprocess.run(_launcher_argv(prefix, spec), capture_output=True, text=True, timeout=60,
                                      stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                reasons.append(f"{' '.join(prefix[1:3])}: {exc}")
                continue
            if proc.returncode == 0 and proc.stdout.split() == ["ok", DEFAULT_DISPLAY_ROOT]:
                return tuple(prefix), ""
            why = (proc.stderr or proc.stdout).strip().splitlines()
            reasons.append(f"`unshare {' '.join(prefix[1:])}` failed "
                           f"(exit {proc.returncode}): {why[-1] if why else 'no message'}")
    return None, "; ".join(reasons)


class ExecutionMixin:
    """What :meth:`Sandbox.run <icml26.agents.sandbox.Sandbox.run>` runs on: a base of
    :class:`~icml26.agents.sandbox.Sandbox` that launches one command, waits for it and reports it (``_run``).

    It reads what the sandbox's constructor sets up: the limits (``time_limit``, ``memory_limit_mb``,
    ``pids_limit``, ``disk_limit_mb``, ``cpu_time_limit``, ``open_files``, ``max_file_mb``,
    ``max_output_chars``, ``limits``, the cgroup support ``_cgroups``), the folders (``root``, ``home``,
    ``git_dir``, ``extra_ro_paths``, the size-capped ``_dir / "space"``) and where commands see them
    (``display_root``, ``_inside_home``, ``_inside_git``), ``isolated`` and its ``unshare`` prefix
    ``_unshare``, and ``_bash``.
    """

    def _env(self, extra: dict | None) -> dict:
        host_path = os.environ.get("PATH", "/usr/bin:/bin") if not self.isolated else _PATH
        path = os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable), *host_path.split(os.pathsep)]))
        env = {"PATH": path, "HOME": self._inside_home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "TMPDIR": "/tmp" if self.isolated else str(self.home / "tmp"), "TERM": "dumb", "PAGER": "cat",
               "GIT_PAGER": "cat", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
               "GIT_DIR": self._inside_git, "GIT_WORK_TREE": self.display_root, "GIT_CONFIG_NOSYSTEM": "1",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1", "OMP_NUM_THREADS": "1"}
        if extra:
            env.update({str(k): str(v) for k, v in extra.items()})
        return env

    def _rlimits(self, whole_memory: bool) -> dict:
        cpu = None
        if self.cpu_time_limit is not None and "cpu" not in self._cgroups:
            cpu = int(self.cpu_time_limit) + 1
        memory = None if whole_memory or self.memory_limit_mb is None else int(self.memory_limit_mb) << 20
        return {"as": memory, "fsize": int(self.max_file_mb) << 20, "nofile": self.open_files, "cpu": cpu, "core": 0}

    def _run(self, command: str, limit: float, env: dict | None, group) -> ExecResult:
        rlimits = self._rlimits(group is not None and "memory" in group.dirs)
        argv = [self._bash, "-c", command]
        status_read = status_write = err_read = err_write = None
        procs = [] if group is None else group.procs
        if self._unshare is not None:
            # the launcher joins the cgroup first thing: every process of the command is inside (unshare,
            # which only waits, is not)
            spec = {"root": self._root_steps(), "cwd": self.display_root, "rlimits": rlimits, "argv": argv,
                    "cgroup_procs": procs}
            # the launcher reports on this pipe (closed at exec, so the command cannot write to it)
            status_read, status_write = os.pipe()
            spec["status_fd"] = status_write
            # what unshare and the launcher say goes to a pipe of its own: the launcher points the command's
            # stderr at its stdout just before the exec, so only the machinery writes here
            err_read, err_write = os.pipe()
            argv = _launcher_argv(self._unshare, spec)

        parent = os.getpid()

        def die_with_run():  # isolated: unshare dies with this process, and --kill-child takes the command down
            die_with_parent(parent)

        def preexec():  # unisolated: in the child, before it executes the command
            die_with_parent(parent)  # a SIGKILLed run leaves no command running (its time limit died with it)
            for path in procs:
                fd = os.open(path, os.O_WRONLY)
                os.write(fd, b"0")
                os.close(fd)
            _launcher.set_limits(rlimits)

        full_before = self._disk_full()  # a full disk at the start is not this command's doing: it may clean up
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=self.root, env=self._env(env), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT if err_write is None else err_write,
                                    start_new_session=True,
                                    preexec_fn=preexec if status_write is None else die_with_run,
                                    pass_fds=() if status_write is None else (status_write,))
        except BaseException:
            for fd in (status_read, status_write, err_read, err_write):
                if fd is not None:
                    os.close(fd)
            raise
        for fd in (status_write, err_write):
            if fd is not None:
                os.close(fd)
        try:
            reader = _OutputReader(proc.stdout, self.max_output_chars)
            try:
                hit = self._wait(proc, start + limit, group, watch_disk=not full_before)
            finally:
                if proc.poll() is None or hit:  # unshare first: killed after its child, it complains in the output
                    _kill_group(proc.pid)
                if group is not None:
                    group.kill()  # what is left: daemons in their own sessions
                proc.wait()
            if group is not None and hit is None:
                memory_hit, pids_hit = group.check()
                hit = "memory" if memory_hit else "pids" if pids_hit else None
            if hit is None and not full_before and self._disk_full():
                hit = "disk"
            peak = None if group is None else group.peak_memory_bytes()
            reader.join(5.0)
            duration = time.monotonic() - start
            status, status_read = ("" if status_read is None else _read_status(status_read)), None  # closes it
            said, err_read = ("" if err_read is None else _read_status(err_read)), None
        finally:
            for fd in (status_read, err_read):  # interrupted before they were read
                if fd is not None:
                    os.close(fd)
        output, truncated = reader.text()
        if self._unshare is not None and status != _launcher.STARTED.strip() and hit is None:
            why = status.replace(_launcher.STARTED.strip(), "").strip() or \
                f"the isolation machinery exited with {proc.returncode} before the command started: " \
                f"{(said or output)[-500:]}"
            raise SandboxError(f"the sandbox could not be set up for the command, which did not run: {why}")
        output += _HIT_MESSAGES.get(hit, "").format(time=limit, cpu=self.cpu_time_limit, memory=self.memory_limit_mb,
                                                     pids=self.pids_limit, disk=self.disk_limit_mb)
        returncode = proc.returncode
        per_process = self.limits["memory"].scope == "process"
        memory_exceeded = hit == "memory" or (per_process and returncode != 0 and hit is None
                                              and any(m in output for m in _MEMORY_MARKERS))
        return ExecResult(returncode, output, hit in ("time", "cpu"), truncated, duration, memory_exceeded,
                          hit == "pids", hit == "disk", None if peak is None else round(peak / 2**20, 1))

    def _wait(self, proc: subprocess.Popen, deadline: float, group, *, watch_disk: bool) -> str | None:
        """Wait for ``proc``; the name of the limit that ended it early (``"time"``, ``"cpu"``,
        ``"memory"``, ``"pids"``, ``"disk"``), or None when it exited by itself."""
        try:
            pidfd = os.pidfd_open(proc.pid)
        except (AttributeError, OSError):
            pidfd = None
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None if proc.poll() is not None else "time"
                step = min(left, 0.1)
                if pidfd is not None:
                    select.select([pidfd], [], [], step)
                    if proc.poll() is not None:
                        return None
                else:
                    try:
                        proc.wait(timeout=step)
                        return None
                    except subprocess.TimeoutExpired:
                        pass
                if group is not None:
                    memory_hit, pids_hit = group.check()
                    if memory_hit or pids_hit:
                        return "memory" if memory_hit else "pids"
                    used = group.cpu_seconds() if self.cpu_time_limit is not None else None
                    if used is not None and used > self.cpu_time_limit:
                        return "cpu"
                if watch_disk and self._disk_full():
                    return "disk"
        finally:
            if pidfd is not None:
                os.close(pidfd)

    def _disk_full(self) -> bool:
        if not self._space_mounted:
            return False
        stats = os.statvfs(self._dir / "space")
        return stats.f_bavail * stats.f_frsize < 64 << 10

    def _root_steps(self) -> list:
        """The launcher's steps to build this sandbox's root: the shared part, then its own folders."""
        tmp = (self.disk_limit_mb or 512) << 20
        passwd = (f"root:x:0:0:root:{self._inside_home}:/bin/bash\n"
                  "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        shown = [["bind", str(self.root), self.display_root, _root.RW_EXEC],
                 ["bind", str(self.home), self._inside_home, _root.RW_EXEC],
                 ["bind", str(self.git_dir), self._inside_git, _root.RO]]
        shown.sort(key=lambda step: (step[2].count("/"), step[2]))
        return [*_root.system_steps(self.extra_ro_paths, tmp), ["file", "/etc/passwd", passwd, 0o644], *shown]


_HIT_MESSAGES = {"time": "\n[killed: the command exceeded its time limit of {time:g} s]",
                 "cpu": "\n[killed: the command exceeded its CPU time limit of {cpu:g} s (all its processes together)]",
                 "memory": "\n[killed: the command exceeded its memory limit of {memory} MB "
                           "(all its processes together)]",
                 "pids": "\n[killed: the command hit its process limit of {pids} processes at once]",
                 "disk": "\n[killed: the command filled its disk limit of {disk} MB (the repository and the home)]"}


def _read_status(fd: int) -> str:
    """What the launcher wrote on its status pipe (nothing when the command started), and close it."""
    chunks = []
    try:
        os.set_blocking(fd, False)
        while True:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                break
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", "replace").strip()



def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _OutputReader(threading.Thread):
    """Drain a pipe, keeping the first and the last ``limit`` bytes: a chatty command cannot fill memory."""

    def __init__(self, pipe, limit: int):
        super().__init__(daemon=True)
        self.pipe, self.limit = pipe, limit
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_bytes = 0
        self.total = 0
        self.start()

    def run(self) -> None:
        fd = self.pipe.fileno()
        while True:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            self.total += len(chunk)
            room = self.limit - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail.append(chunk)
                self.tail_bytes += len(chunk)
                while self.tail_bytes - len(self.tail[0]) >= self.limit:
                    self.tail_bytes -= len(self.tail.popleft())
        self.pipe.close()

    def text(self) -> tuple[str, bool]:
        head = self.head.decode("utf-8", "replace")
        if self.total <= self.limit:  # everything fit in the head
            return head, False
        tail = b"".join(self.tail).decode("utf-8", "replace")[-(self.limit // 2):]
        head = head[: self.limit - len(tail)]
        omitted = self.total - len(head.encode()) - len(tail.encode())
        return (f"{head}\n[... output truncated: {self.total} bytes in total, {omitted} omitted ...]\n{tail}"), True
