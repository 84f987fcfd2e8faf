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
import marshal
import os
import select
import signal
import socket
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
DEADLINE_GRACE_S = 0.5


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
        # the launcher starts the command and holds its deadline whether or not it isolates it; the command's
        # first process joins the cgroup first thing, so every process of the command is inside (the
        # launcher, which only waits, is not)
        spec = {"cwd": self.display_root, "rlimits": rlimits, "cgroup_procs": [] if group is None else group.procs,
                "isolate": self._mode is not None, "deadline": limit + DEADLINE_GRACE_S, "parent": os.getpid(),
                "env": self._env(env)}
        if self._mode is not None:
            spec.update(root=self._root_steps(), userns=self._mode == "user", seccomp=self._seccomp)
        full_before = self._disk_full()  # a full disk at the start is not this command's doing: it may clean up
        start = time.monotonic()
        launched = _Launched.start(spec, command, self._bash)
        try:
            reader = _OutputReader(launched.stdout, self.max_output_chars)
            try:
                hit = self._wait(launched, start + limit, group, watch_disk=not full_before)
            finally:
                if not launched.done or hit:
                    launched.kill()
                if group is not None:
                    group.kill()  # what is left: daemons in their own sessions
                launched.finish()
            if hit is None and launched.ending == "deadline":  # the host was late: the launcher ended it
                hit = "time"
            if group is not None and hit is None:
                memory_hit, pids_hit = group.check()
                hit = "memory" if memory_hit else "pids" if pids_hit else None
            if hit is None and not full_before and self._disk_full():
                hit = "disk"
            peak = None if group is None else group.peak_memory_bytes()
            reader.join(5.0)
            duration = time.monotonic() - start
            status, said = launched.statuses()
        finally:
            launched.close()
        output, truncated = reader.text()
        if status != _launcher.STARTED.strip() and hit is None:
            why = status.replace(_launcher.STARTED.strip(), "").strip() or \
                f"the isolation machinery exited with {launched.returncode} before the command started: " \
                f"{(said or output)[-500:]}"
            raise SandboxError(f"the sandbox could not be set up for the command, which did not run: {why}")
        output += _HIT_MESSAGES.get(hit, "").format(time=limit, cpu=self.cpu_time_limit, memory=self.memory_limit_mb,
                                                     pids=self.pids_limit, disk=self.disk_limit_mb)
        returncode = launched.returncode
        per_process = self.limits["memory"].scope == "process"
        memory_exceeded = hit == "memory" or (per_process and returncode != 0 and hit is None
                                              and any(m in output for m in _MEMORY_MARKERS))
        return ExecResult(returncode, output, hit in ("time", "cpu"), truncated, duration, memory_exceeded,
                          hit == "pids", hit == "disk", None if peak is None else round(peak / 2**20, 1))

    def _wait(self, launched: _Launched, deadline: float, group, *, watch_disk: bool) -> str | None:
        """Wait for the command; the name of the limit that ended it early (``"time"``, ``"cpu"``,
        ``"memory"``, ``"pids"``, ``"disk"``), or None when it exited by itself."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None if launched.poll() else "time"
            if launched.poll(min(left, 0.1)):
                return None
            if group is not None:
                memory_hit, pids_hit = group.check()
                if memory_hit or pids_hit:
                    return "memory" if memory_hit else "pids"
                used = group.cpu_seconds() if self.cpu_time_limit is not None else None
                if used is not None and used > self.cpu_time_limit:
                    return "cpu"
            if watch_disk and self._disk_full():
                return "disk"

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


class _Server:
    """This process's launch server (:func:`icml26.agents.sandbox_launcher.serve`): started once, it forks a
    warden for each command, which spares each command the start of an interpreter (the largest share of
    a command's fixed cost). A process that forked gets its own. ``ICML26_SANDBOX_SERVER=0`` in the
    environment turns it off: the launcher then starts for each command alone (the cost before the
    server; the benchmark compares the two)."""

    _lock = threading.Lock()
    _current: _Server | None = None

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)  # ours is not inherited
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-I", "-S", _launcher.__file__, _launcher.SERVE_FLAG, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True, cwd="/", env={"LC_ALL": "C.UTF-8"})
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self.sock, self.owner = ours, os.getpid()

    @classmethod
    def send(cls, spec: dict, fds: list[int]) -> None:
        """Ask the server (started or restarted as needed) to launch ``spec`` with ``fds``."""
        for attempt in (0, 1):
            with cls._lock:
                server = cls._current
                if server is None or server.owner != os.getpid() or server.proc.poll() is not None:
                    if server is not None and server.owner == os.getpid():
                        server.sock.close()
                    server = cls._current = cls()
            try:
                socket.send_fds(server.sock, [marshal.dumps(spec)], fds)
                return
            except OSError:
                if attempt:
                    raise
                with cls._lock:
                    if cls._current is server:
                        server.sock.close()
                        server.proc.kill()
                        cls._current = None


class _Launched:
    """One command as the launcher runs it: the warden's pid (the command's process group), its output,
    its status pipes and the report pipe the warden closes when it is done (after a line saying how the
    command ended)."""

    def __init__(self):
        self.pid: int | None = None
        self.proc: subprocess.Popen | None = None
        self.stdout = None
        self.done = False
        self.report = b""
        self._fds: dict[str, int] = {}

    @classmethod
    def start(cls, spec: dict, command: str, bash: str) -> _Launched:
        self = cls()
        theirs = []
        try:
            # the command travels in a memory file, not in argv (where the kernel caps one argument at 128 KiB):
            # bash reads it whole from that descriptor, closes it, and runs it as `bash -c` would
            script = os.memfd_create("icml26-command", 0)
            theirs.append(script)
            data = memoryview(command.encode("utf-8", "surrogateescape"))
            while data:
                data = data[os.write(script, data):]
            os.lseek(script, 0, os.SEEK_SET)
            # stdout: the command's output; stderr: what the launcher says (it points the command's stderr at
            # stdout just before the exec); status: "started" (closed before the exec); report: how it ended
            for name in ("stdout", "stderr", "status", "report"):
                read, write = os.pipe()
                self._fds[name] = read
                theirs.append(write)
            script_w, out_w, err_w, status_w, report_w = theirs
            served = os.environ.get("ICML26_SANDBOX_SERVER", "1") != "0"
            try:
                if not served:
                    raise OSError("the launch server is off (ICML26_SANDBOX_SERVER=0)")
                _Server.send({**spec, "argv": [bash, "-c", _SCRIPT.format(fd=3)]},
                             [out_w, err_w, script_w, status_w, report_w])
            except OSError:
                served = False  # no server: the launcher is started for this command alone
            if not served:
                direct = {**spec, "argv": [bash, "-c", _SCRIPT.format(fd=script_w)], "script_fd": script_w,
                          "status_fd": status_w, "report_fd": report_w}
                env = direct.pop("env")
                self.proc = subprocess.Popen(_launcher_argv(direct), cwd="/", env=env, stdin=subprocess.DEVNULL,
                                             stdout=out_w, stderr=err_w, start_new_session=True,
                                             pass_fds=(script_w, status_w, report_w))
                self.pid = self.proc.pid
        except BaseException:
            self.close()
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        self.stdout = os.fdopen(self._fds.pop("stdout"), "rb", buffering=0)
        if self.pid is None:  # served: the warden says its pid first
            self._read_pid()
        return self

    def _read_pid(self) -> None:
        deadline = time.monotonic() + 30
        while b"\n" not in self.report:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._fds["report"]], [], [], left)[0]:
                raise SandboxError("the sandbox's launch server did not start the command within 30 s")
            chunk = os.read(self._fds["report"], 4096)
            if not chunk:
                self.done = True
                break
            self.report += chunk
        first, _, self.report = self.report.partition(b"\n")
        if not first.startswith(b"pid "):
            raise SandboxError(f"the sandbox's launch server failed: {first.decode(errors='replace')!r}")
        self.pid = int(first.split()[1])

    def poll(self, timeout: float = 0.0) -> bool:
        """Whether the warden is done (its report pipe closed), waiting up to ``timeout`` seconds."""
        if self.done:
            return True
        fd = self._fds["report"]
        if select.select([fd], [], [], timeout)[0]:
            chunk = os.read(fd, 4096)
            if chunk:
                self.report += chunk
                return self.poll(0.0)
            self.done = True
        return self.done

    def kill(self) -> None:
        _kill_group(self.pid)

    def finish(self) -> None:
        """Wait for the warden to be done (it is being killed, or has ended)."""
        while not self.poll(1.0):
            self.kill()
        if self.proc is not None:
            self.proc.wait()

    @property
    def returncode(self) -> int:
        """The command's exit status (negative: the signal that ended it), as ``subprocess`` reports one."""
        kind, _, value = self.ending.partition(" ")
        if kind == "exit" and value.isdigit():
            return int(value)
        if kind == "signal" and value.isdigit():
            return -int(value)
        if self.proc is not None and self.proc.returncode is not None and not kind:
            return self.proc.returncode  # a launcher that failed before it could say anything
        return -signal.SIGKILL  # ended by the host or by the launcher's deadline

    @property
    def ending(self) -> str:
        """The warden's last line: ``exit N``, ``signal N``, ``deadline`` (it ended the command), or ``""``."""
        return self.report.decode(errors="replace").strip().rpartition("\n")[2]

    def statuses(self) -> tuple[str, str]:
        """What the launcher wrote on its status pipe and on its own stderr (both then closed)."""
        status, said = _read_status(self._fds.pop("status")), _read_status(self._fds.pop("stderr"))
        return status, said

    def close(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()


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
