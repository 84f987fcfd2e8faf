"""One sandbox for every command an agent runs: a scratch git copy, limits on the whole command, no escape.

A :class:`Sandbox` copies a git repository (its tracked and untracked, non-ignored files, as in the
working tree) into a scratch folder, commits it as the *base*, and runs commands there. Each
command gets, from a small launcher (:mod:`icml26.agents.sandbox_launcher`, standard library only; a
launch server per process forks one for each command):

* **its own root** (:mod:`icml26.agents.sandbox_root`): a new root file system built from nothing and
  entered with ``pivot_root``. It
  shows read-only binds of ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, this Python's prefix and base
  prefix (exactly those folders: a pyenv under ``/root`` shows nothing else of ``/root``), and any
  ``extra_ro_paths``; a minimal ``/etc`` (generated ``passwd``, ``group``, ``hosts``,
  ``resolv.conf``, ``nsswitch.conf``; read-only binds of the TLS certificates, ``alternatives``,
  the dynamic linker's cache); the scratch copy at ``display_root`` (``/testbed``), writable;
  a private home; the git metadata read-only; fresh size-capped tmpfs on ``/tmp``, ``/var/tmp``
  and ``/dev/shm``; a fresh ``/dev`` holding only ``null``, ``zero``, ``full``, ``random``,
  ``urandom``, ``tty``, a private ``pts`` and the ``fd`` links; a fresh read-only ``/proc``. Every
  mount is ``nosuid,nodev`` (device nodes aside), and ``noexec`` where nothing runs from it
  (``/etc``, ``/dev``, ``/proc``, the git metadata). Nothing else of the host is there: no
  ``/home``, ``/run``, ``/var``, ``/mnt``, ``/srv``, ``/sys``, host ``/tmp``, other checkouts; the key
  lists and kernel internals of ``/proc`` are masked;
* **namespaces**: new mount, network (loopback only: no host sockets, TCP, UDP or abstract unix),
  PID (killing its first process ends every descendant, daemons included), IPC and UTS
  namespaces;
* **the kernel's shared parts** (:mod:`icml26.agents.sandbox_seccomp`): a seccomp filter refuses vsock
  sockets, kernel keyrings, io_uring, userfaultfd, bpf, perf events, kexec and new user namespaces, and
  each command joins a fresh session keyring;
* **privileges**: all capabilities dropped (bounding set included) and ``no_new_privs`` set; the git
  metadata lives outside the copy and is read-only to commands, so a command cannot plant hooks or
  config (``core.fsmonitor``...) that the host's own git would run;
* **limits on the whole command** (see :mod:`icml26.agents.sandbox_limits` and :attr:`Sandbox.limits`):
  memory of all processes together, number of processes and CPU time through a cgroup per command
  (v2, or v1 where only that is writable), falling back to per-process rlimits with a warning; the
  scratch copy and home on a size-capped tmpfs (needs root; their writes count as the command's
  memory); wall time, which the launcher also holds by itself (a killed, stopped or hung host cannot
  leave a command running past its deadline, and a dead host's command is ended at once); open files
  and file size per process. Each new sandbox reaps the cgroups and mounts of owners that died;
* **output**: stdout and stderr interleaved, read as a stream and truncated (head and tail kept).

The host side (:meth:`Sandbox.diff`, :meth:`Sandbox.reset`, ``Sandbox.root``) keeps using the real
path. Namespaces need root, or unprivileged user namespaces (a user namespace maps the caller to root),
and the filter needs libseccomp (``pyseccomp`` and the system's ``libseccomp.so.2``); whether they work
is probed once per process when a sandbox is built; when they do not, :class:`SandboxError` says
why, unless ``allow_unisolated=True``, which runs commands as plain subprocesses with only the
limits (and a warning). A command is sent to bash in a memory file, not in argv: it may be of any
size, but not hold a NUL byte.

This module builds the sandbox (the checks of its arguments, the scratch copy, its limits) and holds
its git views and :meth:`Sandbox.run`; how a command runs (the isolation probe, launching it, waiting
against its limits, reading its output) is :mod:`icml26.agents.sandbox_exec`.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

from icml26.errors import InputTypeError, described, input_error
from icml26.validation import check_finite, check_int

from . import sandbox_diff as _diff
from . import sandbox_launcher as _launcher
from . import sandbox_limits as _limits
from . import sandbox_seccomp as _seccomp
from .sandbox_diff import PatchRefused
from .sandbox_exec import (
    DEFAULT_DISPLAY_ROOT,
    PRIVATE_DIR,
    ExecResult,
    ExecutionMixin,
    SandboxError,
    isolation_support,
)
from .sandbox_limits import Limit

__all__ = ["DEFAULT_DISPLAY_ROOT", "PRIVATE_DIR", "ExecResult", "Limit", "PatchRefused", "Sandbox", "SandboxError",
           "check_limits", "isolation_support", "remove_scratch"]

_GIT_IDENTITY = ("-c", "user.name=icml26 sandbox", "-c", "user.email=sandbox@icml26.invalid",
                 "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                 "-c", "color.ui=false", "-c", "diff.noprefix=false", "-c", "diff.external=",
                 "-c", "core.autocrlf=false", "-c", "core.quotepath=false")
# top-level folders a display root may not replace: the system's own (whether or not they exist here)
_SYSTEM_TOP = frozenset({"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "lost+found",
                         "media", "mnt", "nix", "opt", "proc", "root", "run", "sbin", "snap", "srv", "sys", "tmp",
                         "usr", "var", PRIVATE_DIR.strip("/")})


def _check_limit(function: str, name: str, value, minimum, unit: str, *, integer: bool = True):
    if value is None:
        return None
    kind = "an integer" if integer else "a number"
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not minimum <= value < float("inf"):
        raise input_error(function, name, f"{kind} >= {minimum}{unit} (or None for no limit)", value)
    return value


def check_limits(*, memory_limit_mb=None, pids_limit=None, disk_limit_mb=None, cpu_time_limit=None,
                 open_files=1024, function: str = "Sandbox") -> None:
    """Refuse limits below what can start the launcher and a shell (an :class:`~icml26.InputError`
    naming the argument): callers such as ``icml26 sera generate`` check them before any work."""
    _check_limit(function, "memory_limit_mb", memory_limit_mb, _limits.MIN_MEMORY_MB, " MB")
    _check_limit(function, "pids_limit", pids_limit, _limits.MIN_PIDS, " processes")
    _check_limit(function, "disk_limit_mb", disk_limit_mb, _limits.MIN_DISK_MB, " MB")
    _check_limit(function, "cpu_time_limit", cpu_time_limit, 0.1, " s", integer=False)
    if open_files is None or _check_limit(function, "open_files", open_files, 64, " files") is None:
        raise input_error(function, "open_files", "an integer >= 64 files", open_files)


def _check_display_root(value) -> str | None:
    """``value`` as a normalised absolute path, or a ValueError/TypeError that says what is wrong."""
    if value is None:
        return None
    if not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes):
        raise TypeError(f"display_root must be a path string like {DEFAULT_DISPLAY_ROOT!r} or None, "
                        f"got {type(value).__name__}")
    text = os.fspath(value)
    if not text.startswith("/"):
        raise input_error("Sandbox", "display_root", f"an absolute path like {DEFAULT_DISPLAY_ROOT!r}", text)
    if any(ch.isspace() or not ch.isprintable() for ch in text):
        raise input_error("Sandbox", "display_root", "a path without spaces or control characters", text)
    parts = [p for p in text.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise input_error("Sandbox", "display_root", "a path without '.' or '..' components", text)
    if not parts:
        raise input_error("Sandbox", "display_root", f"a folder of its own for the repository, like "
                          f"{DEFAULT_DISPLAY_ROOT!r} (it cannot be '/')", text)
    if parts[0] in _SYSTEM_TOP:
        raise input_error("Sandbox", "display_root", f"a path under a top-level folder of its own, like "
                          f"{DEFAULT_DISPLAY_ROOT!r}, not inside the system folder /{parts[0]}", text)
    return "/" + "/".join(parts)


def _refuse_special_files(paths) -> None:
    """Refuse ``extra_ro_paths`` holding sockets or FIFOs: a read-only bind does not stop ``connect()``
    on a socket nor a write to a FIFO, so through one a command could reach a host process."""
    for top in map(os.fspath, paths):
        found = []
        entries = [top] if not os.path.isdir(top) else []
        for current, dirs, files in os.walk(top) if os.path.isdir(top) else ():
            entries.extend(os.path.join(current, name) for name in files + dirs)
        for path in entries:
            try:
                mode = os.lstat(path).st_mode
            except OSError:
                continue
            if stat.S_ISSOCK(mode) or stat.S_ISFIFO(mode):
                found.append(f"{os.path.relpath(path, top)} ({'a socket' if stat.S_ISSOCK(mode) else 'a FIFO'})")
        if found:
            shown = ", ".join(sorted(found)[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
            raise input_error("Sandbox", "extra_ro_paths", "folders without sockets or FIFOs (a read-only view does "
                              "not stop a command from connecting to a socket or writing to a FIFO of the host)",
                              described(f"{shown} in {top}"))


def _hides(display_root: str, needed: dict[str, str]) -> None:
    """Refuse a display root whose top-level folder (replaced inside the sandbox) holds what it needs."""
    top = "/" + display_root.split("/")[1]
    for what, path in needed.items():
        real = os.path.realpath(path)
        if real == top or real.startswith(top + "/"):
            raise input_error("Sandbox", "display_root", f"a top-level folder that hides nothing the sandbox needs, like "
                              f"{DEFAULT_DISPLAY_ROOT!r}", described(f"{display_root!r}, which would hide {top} "
                                                                    f"inside the sandbox, but {what} ({real}) lives there"))


# --------------------------------------------------------------------------------------------------
# the sandbox


def _git(args: list[str], *, git_dir: Path | None = None, work_tree: Path | None = None, cwd=None,
         check: bool = True, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0", LC_ALL="C")
    if git_dir is not None:
        env.update(GIT_DIR=str(git_dir), GIT_WORK_TREE=str(work_tree))
    proc = subprocess.run(["git", *_GIT_IDENTITY, *args], cwd=cwd, env=env, capture_output=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    if check and proc.returncode != 0:
        raise SandboxError(f"git {' '.join(args[:3])} failed (exit {proc.returncode}): "
                           f"{proc.stderr.decode(errors='replace').strip()[:1000]}")
    return proc


_rmtree = _limits.rmtree
remove_scratch = _limits.remove_scratch


class Sandbox(ExecutionMixin):
    """A scratch git copy of ``repo`` (an empty repository when ``None``) and isolated execution in it.

    Use as a context manager (``close()`` deletes the copy). Limits on each command:

    * ``time_limit`` (s, wall clock) and ``cpu_time_limit`` (s of CPU of all its processes; None: only
      the wall clock bounds it);
    * ``memory_limit_mb``: all its processes together (a cgroup), or each process's address space
      (``RLIMIT_AS``) where no cgroup can be made; files written into the scratch copy, the home,
      ``/tmp`` and ``/dev/shm`` are tmpfs pages and count too;
    * ``pids_limit``: processes and threads at once (a cgroup; none without one);
    * ``disk_limit_mb``: what the scratch copy and the home may hold (a size-capped tmpfs, made
      when running as root; else each file is capped at ``max_file_mb`` only);
    * ``open_files`` and ``max_file_mb``: per process (rlimits).

    :attr:`limits` says which mechanism holds each. Limits below what can start a shell are refused
    (:func:`check_limits`). ``max_output_chars`` bounds the output returned. ``extra_ro_paths``:
    host folders or files shown read-only (at their own paths) besides the system folders and this
    Python. ``allow_unisolated=True`` accepts running without namespaces where they are not
    available; ``isolation="none"`` asks for that explicitly (it still needs ``allow_unisolated``).
    Only files git would track are copied: ignored files (build outputs, virtualenvs) are not.

    ``display_root`` (default ``/testbed``) is where commands see the copy when isolated: they start
    there, ``HOME`` is ``/.sandbox/home`` and ``GIT_DIR`` ``/.sandbox/git`` (see :data:`PRIVATE_DIR`),
    so no output shows the random scratch path. The top-level folder of ``display_root`` is the
    copy's own inside the sandbox, so it may not be a system folder (``/usr``, ``/tmp``...) nor hold
    this Python. With ``display_root=None`` commands see the copy at its real path.
    ``display_root`` (the attribute) is the path to tell an agent: the fixed path when isolated, the
    real scratch path ``str(root)`` when commands run unisolated or with ``display_root=None``.
    """

    def __init__(self, repo: str | Path | None = None, *, time_limit: float = 30.0, memory_limit_mb: int | None = 1024,
                 max_output_chars: int = 10_000, allow_unisolated: bool = False, scratch_parent=None,
                 isolation: str = "auto", max_file_mb: int = 512, display_root: str | None = DEFAULT_DISPLAY_ROOT,
                 pids_limit: int | None = 512, disk_limit_mb: int | None = 2048, cpu_time_limit: float | None = None,
                 open_files: int = 1024, extra_ro_paths=(), max_diff_mb: float = 10.0, max_diff_files: int = 5000,
                 diff_time_limit: float = 120.0):
        if time_limit is None or isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) \
                or not 0 < time_limit < float("inf"):
            raise input_error("Sandbox", "time_limit", "a finite number of seconds > 0", time_limit)
        check_limits(memory_limit_mb=memory_limit_mb, pids_limit=pids_limit, disk_limit_mb=disk_limit_mb,
                     cpu_time_limit=cpu_time_limit, open_files=open_files)
        check_int("Sandbox", "max_output_chars", max_output_chars, low=100)
        check_int("Sandbox", "max_file_mb", max_file_mb, low=1)
        check_finite("Sandbox", "max_diff_mb", max_diff_mb, positive=True)
        check_int("Sandbox", "max_diff_files", max_diff_files, low=1)
        check_finite("Sandbox", "diff_time_limit", diff_time_limit, positive=True)
        if not isinstance(allow_unisolated, bool):
            raise InputTypeError("Sandbox", "allow_unisolated", "a bool", allow_unisolated)
        if scratch_parent is not None and (not isinstance(scratch_parent, (str, os.PathLike))
                                           or not os.path.isdir(scratch_parent)):
            raise input_error("Sandbox", "scratch_parent", "None or an existing folder", scratch_parent)
        if repo is not None and not isinstance(repo, (str, os.PathLike)):
            raise InputTypeError("Sandbox", "repo", "None or the path of a git repository",
                                 described(type(repo).__name__))
        if isolation not in ("auto", "namespaces", "none"):
            raise input_error("Sandbox", "isolation", "'auto', 'namespaces' or 'none'", isolation)
        if isolation == "none" and not allow_unisolated:
            raise input_error("Sandbox", "isolation", "'auto' or 'namespaces' unless allow_unisolated=True confirms "
                              "that commands run without network or filesystem isolation", isolation)
        if isinstance(extra_ro_paths, (str, os.PathLike)) or not all(
                isinstance(p, (str, os.PathLike)) and os.path.isabs(p) and os.path.exists(p) for p in extra_ro_paths):
            raise input_error("Sandbox", "extra_ro_paths", "a list of absolute paths that exist", extra_ro_paths)
        _refuse_special_files(extra_ro_paths)
        fixed = _check_display_root(display_root)
        if fixed is not None:
            _hides(fixed, {"this Python": os.path.dirname(sys.executable), "its prefix": sys.prefix,
                           "its base prefix": sys.base_prefix})
        if shutil.which("git") is None:
            raise SandboxError("git is not installed; the sandbox needs it to copy the repository and diff changes")
        self.time_limit = float(time_limit)
        self.memory_limit_mb = memory_limit_mb
        self.pids_limit = pids_limit
        self.disk_limit_mb = disk_limit_mb
        self.cpu_time_limit = None if cpu_time_limit is None else float(cpu_time_limit)
        self.open_files = int(open_files)
        self.max_output_chars = int(max_output_chars)
        self.max_file_mb = int(max_file_mb)
        self.max_diff_mb = float(max_diff_mb)
        self.max_diff_files = int(max_diff_files)
        self.diff_time_limit = float(diff_time_limit)
        self.extra_ro_paths = tuple(os.path.abspath(p) for p in extra_ro_paths)
        self._bash = shutil.which("bash") or "/bin/sh"

        self._mode: str | None = None
        if isolation != "none":
            self._mode, reason = isolation_support()
            if self._mode is None:
                if isolation == "namespaces" or not allow_unisolated:
                    raise SandboxError(
                        "cannot isolate sandboxed commands (new network, mount and PID namespaces and a new root "
                        f"are needed): {reason}. Run as root or enable unprivileged user namespaces, or pass "
                        "allow_unisolated=True to run commands without network and filesystem isolation")
                shown = "" if fixed is None else f" (and at the scratch path, not at {fixed})"
                warnings.warn(f"sandbox runs commands WITHOUT network or filesystem isolation{shown}: {reason}",
                              RuntimeWarning, stacklevel=2)
        self.isolated = self._mode is not None
        self._seccomp = _seccomp.filter_program()[0] if self.isolated else None
        self._fixed = self.isolated and fixed is not None

        source = None
        if repo is not None:
            source = Path(repo).expanduser()
            if not source.is_dir():
                raise SandboxError(f"repository {str(repo)!r} is not a folder")
            probe = _git(["rev-parse", "--show-toplevel"], cwd=source, check=False)
            if probe.returncode != 0:
                raise SandboxError(f"{str(repo)!r} is not a git repository (git rev-parse: "
                                   f"{probe.stderr.decode(errors='replace').strip()})")
            source = Path(probe.stdout.decode().strip())
        self.source = source

        # what killed owners left behind: their commands' cgroups (and what still runs in them) and their
        # size-capped mounts
        self._cgroups = _limits.cgroup_support()
        _limits.reap_dead_cgroups(self._cgroups)
        if os.geteuid() == 0:
            _limits.reap_stale()
        self._dir = Path(tempfile.mkdtemp(prefix="icml26-sandbox-", dir=scratch_parent)).resolve()
        self._space_mounted = False
        self._closed = True
        try:
            space = self._dir / "space"  # the copy and the home: the size-capped part
            space.mkdir()
            disk_note = self._mount_space(space)
            self.root = space / "repo"
            self.git_dir = self._dir / "git"  # outside the cap: the host's git must always be able to write
            self.home = space / "home"
            # the paths commands see (the real ones when there is no fixed root)
            self.display_root = fixed if self._fixed else str(self.root)
            self._inside_home = PRIVATE_DIR + "/home" if self._fixed else str(self.home)
            self._inside_git = PRIVATE_DIR + "/git" if self._fixed else str(self.git_dir)
            for folder in (self.root, self.home / "tmp"):
                folder.mkdir(parents=True)
            if source is not None:
                self._copy_worktree(source)
            _git(["init", "--quiet", "--initial-branch=main", f"--separate-git-dir={self.git_dir}", str(self.root)])
            (self.root / ".git").unlink()  # the work tree must not point at (or contain) the metadata
            (self.git_dir / "info").mkdir(exist_ok=True)
            (self.git_dir / "info" / "exclude").write_text("__pycache__/\n*.pyc\n.pytest_cache/\n")
            self._git(["add", "-A"])
            self._git(["commit", "--quiet", "--allow-empty", "--no-verify", "-m", "sandbox base"])
            self.base = self._git(["rev-parse", "HEAD"]).stdout.decode().strip()
        except BaseException:
            self._unmount_space()
            _rmtree(self._dir)
            raise
        self._closed = False
        self.limits = self._describe_limits(disk_note)
        weak = [name for name in ("memory", "pids", "disk") if getattr(self, _LIMIT_ATTR[name]) is not None
                and self.limits[name].scope != "command"]
        if weak and self.isolated:
            _warn_once("sandbox limits " + ", ".join(f"{n} ({self.limits[n].note})" for n in weak) +
                       " are not on the whole command here")

    # -- setup --------------------------------------------------------------------------------------

    def _mount_space(self, space: Path) -> str:
        """Put a size-capped tmpfs on ``space``; ``""`` when done, else why not."""
        if self.disk_limit_mb is None:
            return "no disk limit was asked"
        if os.geteuid() != 0:
            return "a size-capped tmpfs for the scratch copy needs root"
        (self._dir / "owner").write_text(_limits.owner_stamp(os.getpid()))  # before the mount: see _reap_stale
        try:
            _launcher.mount("tmpfs", str(space), "tmpfs", _launcher.MS_NOSUID | _launcher.MS_NODEV,
                            f"mode=0700,size={int(self.disk_limit_mb)}m")
        except OSError as exc:
            return f"the size-capped tmpfs was refused: {exc}"
        self._space_mounted = True
        return ""

    def _unmount_space(self) -> None:
        if self._space_mounted:
            try:
                _launcher.umount(str(self._dir / "space"))
            except OSError:
                pass
            self._space_mounted = False

    def _describe_limits(self, disk_note: str) -> dict[str, Limit]:
        cg = self._cgroups
        found = {"wall_time": Limit(self.time_limit, "command", "wall clock")}
        if self.memory_limit_mb is None:
            found["memory"] = Limit(None, "none", "none")
        elif "memory" in cg:
            found["memory"] = Limit(self.memory_limit_mb, "command", f"cgroup {cg['memory'][0]}", _limits.where(cg["memory"]))
        else:
            found["memory"] = Limit(self.memory_limit_mb, "process", "RLIMIT_AS", "no writable memory cgroup")
        if self.pids_limit is None:
            found["pids"] = Limit(None, "none", "none")
        elif "pids" in cg:
            found["pids"] = Limit(self.pids_limit, "command", f"cgroup {cg['pids'][0]}", _limits.where(cg["pids"]))
        else:
            found["pids"] = Limit(None, "none", "none", "no writable pids cgroup")
        if self.cpu_time_limit is None:
            found["cpu_time"] = Limit(None, "none", "none", "bounded by the wall clock only")
        elif "cpu" in cg:
            found["cpu_time"] = Limit(self.cpu_time_limit, "command", f"cgroup {cg['cpu'][0]}", _limits.where(cg["cpu"]))
        else:
            found["cpu_time"] = Limit(self.cpu_time_limit, "process", "RLIMIT_CPU", "no writable cpu cgroup")
        if self._space_mounted:
            found["disk"] = Limit(self.disk_limit_mb, "command", "tmpfs")
        else:
            found["disk"] = Limit(self.max_file_mb, "process", "RLIMIT_FSIZE", disk_note)
        found["open_files"] = Limit(self.open_files, "process", "RLIMIT_NOFILE")
        found["file_size"] = Limit(self.max_file_mb, "process", "RLIMIT_FSIZE")
        return found

    def _copy_worktree(self, source: Path) -> None:
        listing = _git(["ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=source).stdout
        for rel in sorted(set(filter(None, listing.decode("utf-8", "surrogateescape").split("\0")))):
            src, dst = source / rel, self.root / rel
            if not os.path.lexists(src):  # deleted in the working tree but still in the index
                continue
            dst.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink():
                os.symlink(os.readlink(src), dst)
            elif src.is_dir():  # a submodule: copy its files, not its git metadata
                shutil.copytree(src, dst, symlinks=True, ignore=shutil.ignore_patterns(".git"), dirs_exist_ok=True)
            else:
                shutil.copy2(src, dst)

    def _git(self, args: list[str], check: bool = True) -> subprocess.CompletedProcess:
        return _git(args, git_dir=self.git_dir, work_tree=self.root, cwd=self.root, check=check)

    # -- lifecycle ----------------------------------------------------------------------------------

    def close(self) -> None:
        if not getattr(self, "_closed", True):
            self._closed = True
            self._unmount_space()
            _rmtree(self._dir)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        return f"Sandbox(root={str(self.root)!r}, display_root={self.display_root!r}, isolated={self.isolated})"

    # -- git views ----------------------------------------------------------------------------------

    def nested_repositories(self) -> list[str]:
        """Folders of the copy (relative paths) holding a ``.git`` of their own: repositories or
        submodules a command made. Their files are left out of :meth:`diff`; :meth:`reset` removes them."""
        self._check_open()
        return sorted(os.path.relpath(folder, self.root) for folder in _git_entries(self.root, top=False))

    def diff(self) -> str:
        """Unified diff of the scratch copy against the base commit, new files included (files inside
        :meth:`nested_repositories` left out: git cannot stage them as plain files), that ``git apply``
        turns the base into the copy byte for byte: the tree's attributes neutralised, new files taken by
        the base commit's ignore rules, binary files as binary patches (:mod:`icml26.agents.sandbox_diff`).
        Past ``max_diff_files``, ``max_diff_mb`` or ``diff_time_limit``, or for a file name that is not
        UTF-8, it raises :class:`PatchRefused` (a :class:`SandboxError`) before anything is staged."""
        self._check_open()
        return _diff.diff(self)

    def reset(self) -> None:
        """Back to the base commit: edits reverted, new files removed (nested repositories, any ``.git``,
        FIFOs and sockets a command made included), the home emptied."""
        self._check_open()
        for folder in _git_entries(self.root, top=True):
            entry = os.path.join(folder, ".git")
            if os.path.isdir(entry) and not os.path.islink(entry):
                _rmtree(Path(entry))
            else:
                os.unlink(entry)
        _diff.neutralise_attributes(self.git_dir)  # a .gitattributes must not convert what the checkout writes
        self._git(["reset", "--quiet", "--hard", self.base])
        self._git(["clean", "-ffdxq"])
        for path in _special_files(self.root):  # FIFOs, sockets: git neither tracks nor cleans them
            os.unlink(path)
        for entry in list(self.home.iterdir()):
            if entry.is_dir() and not entry.is_symlink():
                _rmtree(entry)
            else:
                entry.unlink()
        (self.home / "tmp").mkdir()

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")

    # -- execution (the machinery under it: sandbox_exec.ExecutionMixin) ----------------------------

    def run(self, command: str, *, timeout: float | None = None, env: dict | None = None) -> ExecResult:
        """Run ``command`` with bash in the scratch copy; never raises for the command's own failure
        (a failure of the isolation machinery, after which the command did not run, is a SandboxError)."""
        if not isinstance(command, str):
            raise InputTypeError("Sandbox.run", "command", "a bash command (a str)", described(type(command).__name__))
        if "\0" in command:
            raise input_error("Sandbox.run", "command", "a bash command without NUL bytes (bash cannot run one)",
                              described(f"a command with a NUL byte at character {command.index(chr(0))}"))
        # a time-out of 0 or less would start the command only to report it timed out
        limit = self.time_limit if timeout is None else check_finite("Sandbox.run", "timeout", timeout, positive=True)
        if env is not None and (not isinstance(env, dict) or not all(isinstance(k, str) and k and "=" not in k
                                                                     for k in env)):
            raise input_error("Sandbox.run", "env", "None or a dict of environment variables (names without '=')",
                              described(f"{env!r:.80}"))
        self._check_open()
        memory = None if self.memory_limit_mb is None else int(self.memory_limit_mb) << 20
        group = None
        if self._cgroups and (memory or self.pids_limit or self.cpu_time_limit):
            try:
                group = _limits.CommandCgroup.create(self._cgroups, memory_bytes=memory, pids=self.pids_limit)
            except OSError as exc:
                raise SandboxError(f"the command's cgroup could not be made, so it did not run: {exc}") from exc
        try:
            return self._run(command, limit, env, group)
        finally:
            if group is not None:
                group.remove()

    def run_python(self, code: str, *, timeout: float | None = None, args: list[str] | tuple = ()) -> ExecResult:
        """Run Python ``code`` (this interpreter) in the scratch copy, with ``args`` as ``sys.argv[1:]``."""
        if not isinstance(code, str):
            raise InputTypeError("Sandbox.run_python", "code", "Python source (a str)", described(type(code).__name__))
        if timeout is not None:
            check_finite("Sandbox.run_python", "timeout", timeout, positive=True)
        if isinstance(args, (str, bytes)) or not isinstance(args, (list, tuple)):
            raise InputTypeError("Sandbox.run_python", "args", "a list of arguments", described(type(args).__name__))
        self._check_open()
        fd, script = tempfile.mkstemp(prefix="snippet-", suffix=".py", dir=self.home)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(code)
        try:
            inside = f"{self._inside_home}/{os.path.basename(script)}"
            command = " ".join(shlex.quote(part) for part in [sys.executable, inside, *map(str, args)])
            return self.run(command, timeout=timeout)
        finally:
            try:
                os.unlink(script)
            except OSError:
                pass


_LIMIT_ATTR = {"memory": "memory_limit_mb", "pids": "pids_limit", "disk": "disk_limit_mb"}


@functools.cache
def _warn_once(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _special_files(root: Path) -> list[str]:
    """What is neither a regular file, a folder nor a symlink under ``root`` (symlinks not followed)."""
    found = []
    for current, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(current, name)
            mode = os.lstat(path).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
                found.append(path)
    return found


def _git_entries(root: Path, *, top: bool) -> list[str]:
    """Folders under ``root`` (``root`` itself when ``top``) holding a ``.git`` entry of any kind;
    symlinks are not followed."""
    found = []
    for current, dirs, files in os.walk(root):
        if ".git" in dirs or ".git" in files:
            if top or current != str(root):
                found.append(current)
            if ".git" in dirs:
                dirs.remove(".git")
    return found
