"""Running one command in a sandbox: whether isolation works here, and how a command is launched,
watched and reported.

:func:`isolation_support` probes once per process whether namespaces and a new root work here, by
running the launcher (:mod:`icml26.agents.sandbox_launcher`) for real. :class:`ExecutionMixin` is the
machinery under :meth:`Sandbox.run <icml26.agents.sandbox.Sandbox.run>`: it starts a command through
the launcher (which makes the namespaces and holds a deadline of its own), in the cgroup ``run`` made for it (:mod:`icml26.agents.sandbox_limits`),
or as a plain subprocess with rlimits when unisolated; waits for it against its wall-clock, CPU, memory,
process and disk limits; drains its output (head and tail kept); and reports an :class:`ExecResult`.
It reads the limits, paths and scratch folders that :class:`~icml26.agents.sandbox.Sandbox` sets up.
"""

from __future__ import annotations

import collections
import functools
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass

from . import sandbox_launcher as _launcher
from . import sandbox_root as _root
from . import sandbox_seccomp as _seccomp

__all__ = ["DEFAULT_DISPLAY_ROOT", "PRIVATE_DIR", "ExecResult", "ExecutionMixin", "SandboxError", "isolation_support"]

DEFAULT_DISPLAY_ROOT = "/testbed"
PRIVATE_DIR = "/.sandbox"  # inside a sandbox: the git metadata (``git``) and the home (``home``)
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
# what bash runs: the command, read whole from the memory file on descriptor {fd} (then closed), as `bash -c`
# runs its argument; BASH_EXECUTION_STRING is where `bash -c` keeps that argument
_SCRIPT = 'IFS= read -r -d "" BASH_EXECUTION_STRING <&{fd}; exec {fd}<&-; eval "$BASH_EXECUTION_STRING"'
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


def _launcher_argv(spec: dict) -> list[str]:
    return [sys.executable, "-I", "-S", _launcher.__file__, _launcher.LAUNCH_FLAG, _launcher.encode(spec)]


#: how much longer than its time limit the launcher lets a command run when the host no longer stops it
#: (the host ends it at the limit; the launcher's deadline is for a host that was killed, stopped or hung)
DEADLINE_GRACE_S = 1.0


@functools.cache
def isolation_support() -> tuple[str | None, str]:
    """``(mode, "")`` when isolated execution (namespaces, the new root and the seccomp filter) works
    here, else ``(None, reason)``. ``mode`` is ``"root"`` (the caller is root: namespaces of its own)
    or ``"user"`` (a user namespace maps the caller to root inside, as ``unshare --map-root-user`` does).

    Probed once per process by running the launcher for real: the user-namespace mode is tried when
    the root mode is refused or the caller is not root.
    """
    if sys.platform != "linux":
        return None, f"namespaces need Linux (this is {sys.platform})"
    program, why = _seccomp.filter_program()
    if program is None:
        return None, why
    modes = (["root"] if os.geteuid() == 0 else []) + ["user"]
    reasons = []
    with tempfile.TemporaryDirectory(prefix="icml26-sandbox-probe-") as tmp:
        root = [*_root.system_steps((), 1 << 20), ["bind", tmp, DEFAULT_DISPLAY_ROOT, _root.RW_EXEC]]
        spec = {"root": root, "cwd": DEFAULT_DISPLAY_ROOT, "rlimits": {}, "seccomp": program, "deadline": 60.0,
                "argv": ["/bin/sh", "-c", "echo ok > probe && cat probe && pwd"]}
        for mode in modes:
            try:
                proc = subprocess.run(_launcher_argv({**spec, "userns": mode == "user"}), capture_output=True,
                                      text=True, timeout=60, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                reasons.append(f"{mode} mode: {exc}")
                continue
            if proc.returncode == 0 and proc.stdout.split() == ["ok", DEFAULT_DISPLAY_ROOT]:
                return mode, ""
            why = (proc.stderr or proc.stdout).strip().splitlines()
            reasons.append(f"{mode} mode failed (exit {proc.returncode}): {why[-1] if why else 'no message'}")
    return None, "; ".join(reasons)


class ExecutionMixin:
    """What :meth:`Sandbox.run <icml26.agents.sandbox.Sandbox.run>` runs on: a base of
    :class:`~icml26.agents.sandbox.Sandbox` that launches one command, waits for it and reports it (``_run``).

    It reads what the sandbox's constructor sets up: the limits (``time_limit``, ``memory_limit_mb``,
    ``pids_limit``, ``disk_limit_mb``, ``cpu_time_limit``, ``open_files``, ``max_file_mb``,
    ``max_output_chars``, ``limits``, the cgroup support ``_cgroups``), the folders (``root``, ``home``,
    ``git_dir``, ``extra_ro_paths``, the size-capped ``_dir / "space"``) and where commands see them
    (``display_root``, ``_inside_home``, ``_inside_git``), ``isolated`` and its mode ``_mode`` (see
    :func:`isolation_support`), the seccomp program ``_seccomp``, and ``_bash``.
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
        # the command travels in a memory file, not in argv (where the kernel caps one argument at 128 KiB):
        # bash reads it whole from that descriptor, closes it, and runs it as `bash -c` would
        script_fd = os.memfd_create("icml26-command", 0)
        status_read = status_write = err_read = err_write = None
        try:
            data = command.encode("utf-8", "surrogateescape")
            view = memoryview(data)
            while view:
                view = view[os.write(script_fd, view):]
            os.lseek(script_fd, 0, os.SEEK_SET)
            # the launcher starts the command and holds its deadline whether or not it isolates it; the
            # command's first process joins the cgroup first thing, so every process of the command is inside
            # (the launcher, which only waits, is not)
            spec = {"cwd": self.display_root, "rlimits": rlimits, "argv": [self._bash, "-c", _SCRIPT.format(fd=script_fd)],
                    "cgroup_procs": [] if group is None else group.procs, "isolate": self._mode is not None,
                    "deadline": limit + DEADLINE_GRACE_S, "script_fd": script_fd, "parent": os.getpid()}
            if self._mode is not None:
                spec.update(root=self._root_steps(), userns=self._mode == "user", seccomp=self._seccomp)
            # the launcher reports on this pipe (closed before the exec, so the command cannot write to it)
            status_read, status_write = os.pipe()
            spec["status_fd"] = status_write
            # what the launcher says goes to a pipe of its own: it points the command's stderr at its
            # stdout just before the exec, so only the machinery writes here
            err_read, err_write = os.pipe()
            argv = _launcher_argv(spec)
        except BaseException:
            for fd in (script_fd, status_read, status_write, err_read, err_write):
                if fd is not None:
                    os.close(fd)
            raise

        full_before = self._disk_full()  # a full disk at the start is not this command's doing: it may clean up
        start = time.monotonic()
        try:
            # no preexec_fn, so Python can vfork (a large host forks slowly): the launcher watches this process
            # itself (spec["parent"])
            proc = subprocess.Popen(argv, cwd=self.root, env=self._env(env), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=err_write, start_new_session=True,
                                    pass_fds=(script_fd, status_write))
        except BaseException:
            for fd in (script_fd, status_read, status_write, err_read, err_write):
                if fd is not None:
                    os.close(fd)
            raise
        for fd in (script_fd, status_write, err_write):
            if fd is not None:
                os.close(fd)
        try:
            reader = _OutputReader(proc.stdout, self.max_output_chars)
            try:
                hit = self._wait(proc, start + limit, group, watch_disk=not full_before)
            finally:
                if proc.poll() is None or hit:
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
            status, status_read = _read_status(status_read), None  # closes it
            said, err_read = _read_status(err_read), None
        finally:
            for fd in (status_read, err_read):  # interrupted before they were read
                if fd is not None:
                    os.close(fd)
        output, truncated = reader.text()
        if status != _launcher.STARTED.strip() and hit is None:
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
