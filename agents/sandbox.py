"""One sandbox for every command an agent runs: a scratch git copy, limits, no network, no escape.

A :class:`Sandbox` copies a git repository (its tracked and untracked, non-ignored files, as in the
working tree) into a scratch folder, commits it as the *base*, and runs commands there:

* **network**: each command runs in a new network namespace (only a loopback interface);
* **filesystem**: in a new mount namespace every existing mount is remounted read-only, ``/tmp``,
  ``/var/tmp`` and ``/dev/shm`` become private tmpfs, and only the scratch copy and a private home
  are writable; the git metadata lives *outside* the scratch copy and is read-only to commands, so
  a command cannot plant hooks or config (``core.fsmonitor``...) that the host's own ``git diff``
  would later execute;
* **privileges**: all capabilities are dropped (bounding set included) and ``no_new_privs`` is
  set, so the read-only mounts cannot be undone and setuid binaries give nothing back;
* **processes**: a new PID namespace, so killing its first process at the time limit takes every
  descendant with it (daemonised ones too); ``RLIMIT_AS`` bounds memory, ``RLIMIT_FSIZE`` file size;
* **output**: stdout and stderr interleaved, read as a stream and truncated (head and tail kept);
* **fixed path**: with ``display_root`` (default ``/testbed``, where SWE-style containers keep the
  repository) each command sees the scratch copy at that path and starts there: the launcher builds
  a new root (a tmpfs holding read-only binds of every top-level host folder, a fresh private
  ``/tmp``, the copy at ``display_root``, the git metadata and home at :data:`PRIVATE_DIR`) and
  moves into it with ``pivot_root``, so trajectories never quote the random scratch path. The host side
  (:meth:`Sandbox.diff`, :meth:`Sandbox.reset`, ``Sandbox.root``) keeps using the real path.

Namespaces come from util-linux's ``unshare`` (as root; otherwise with ``--map-root-user`` where
unprivileged user namespaces are allowed); the mount, capability and rlimit steps run in a small
launcher (:mod:`icml26.agents.sandbox_launcher`, executed as a script) because no common tool does all of them: ``bwrap`` does,
but is rarely installed and needs the same kernel features. Whether isolation works is probed once
per process when a sandbox is built; when it does not (a plain container without ``CAP_SYS_ADMIN``
or user namespaces), :class:`SandboxError` says why, unless ``allow_unisolated=True``, which runs
commands as plain subprocesses with only the limits (and a warning).
"""

from __future__ import annotations

import collections
import functools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from icml26.errors import described, input_error

from . import sandbox_launcher as _launcher

__all__ = ["DEFAULT_DISPLAY_ROOT", "PRIVATE_DIR", "ExecResult", "Sandbox", "SandboxError", "isolation_support"]

_GIT_IDENTITY = ("-c", "user.name=icml26 sandbox", "-c", "user.email=sandbox@icml26.invalid",
                 "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false",
                 "-c", "color.ui=false", "-c", "diff.noprefix=false", "-c", "diff.external=",
                 "-c", "core.autocrlf=false", "-c", "core.quotepath=false")
_MEMORY_MARKERS = ("MemoryError", "Cannot allocate memory", "std::bad_alloc", "out of memory")
DEFAULT_DISPLAY_ROOT = "/testbed"
PRIVATE_DIR = "/.sandbox"  # inside a fixed-path sandbox: the git metadata (``git``) and the home (``home``)
# top-level folders a display root may not replace: the system's own (whether or not they exist here)
_SYSTEM_TOP = frozenset({"bin", "boot", "dev", "etc", "home", "lib", "lib32", "lib64", "libx32", "lost+found",
                         "media", "mnt", "nix", "opt", "proc", "root", "run", "sbin", "snap", "srv", "sys", "tmp",
                         "usr", "var", PRIVATE_DIR.strip("/")})


class SandboxError(RuntimeError):
    """The sandbox cannot be built as asked: no git repository, no isolation, no git/bash..."""


@dataclass
class ExecResult:
    returncode: int
    output: str
    timed_out: bool
    truncated: bool
    duration_s: float
    memory_exceeded: bool = False


# --------------------------------------------------------------------------------------------------
# capability probe


@functools.lru_cache(maxsize=None)
def isolation_support() -> tuple[tuple[str, ...] | None, str]:
    """``(unshare argv prefix, "")`` when namespaced execution works here, else ``(None, reason)``.

    Probed once per process by running the launcher for real: user-namespace mode is tried when
    the root mode is refused.
    """
    if sys.platform != "linux":
        return None, f"namespaces need Linux (this is {sys.platform})"
    unshare = shutil.which("unshare")
    if unshare is None:
        return None, "the `unshare` command (util-linux) is not installed"
    base = (unshare, "--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc")
    modes = [base] if os.geteuid() == 0 else []
    modes.append(base[:1] + ("--user", "--map-root-user") + base[1:])
    reasons = []
    with tempfile.TemporaryDirectory(prefix="icml26-sandbox-probe-") as tmp:
        spec = {"binds": [[tmp, tmp, False]], "new_root": False, "hide": [], "cwd": tmp, "memory_bytes": 0,
                "fsize_bytes": 0, "argv": ["/bin/sh", "-c", "echo ok > probe && cat probe"]}
        for prefix in modes:
            cmd = [*prefix, sys.executable, "-I", "-S", _launcher.__file__, _launcher.LAUNCH_FLAG, json.dumps(spec)]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            except (OSError, subprocess.TimeoutExpired) as exc:
                reasons.append(f"{' '.join(prefix[1:3])}: {exc}")
                continue
            if proc.returncode == 0 and proc.stdout.strip() == "ok":
                return tuple(prefix), ""
            why = (proc.stderr or proc.stdout).strip().splitlines()
            reasons.append(f"`unshare {' '.join(prefix[1:])}` failed "
                           f"(exit {proc.returncode}): {why[-1] if why else 'no message'}")
    return None, "; ".join(reasons)


@functools.lru_cache(maxsize=None)
def _fixed_root_support(prefix: tuple[str, ...]) -> str:
    """``""`` when the launcher can build a new root and ``pivot_root`` into it with this ``unshare``
    prefix, else why not. Probed once per process, the first time a fixed-path sandbox is built."""
    target = PRIVATE_DIR + "/probe"
    with tempfile.TemporaryDirectory(prefix="icml26-sandbox-probe-") as tmp:
        spec = {"binds": [[tmp, target, False]], "new_root": True, "hide": [PRIVATE_DIR.strip("/")], "cwd": target,
                "memory_bytes": 0, "fsize_bytes": 0, "argv": ["/bin/sh", "-c", "echo ok > probe && cat probe && pwd"]}
        cmd = [*prefix, sys.executable, "-I", "-S", _launcher.__file__, _launcher.LAUNCH_FLAG, json.dumps(spec)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return f"the launcher could not run: {exc}"
        if proc.returncode == 0 and proc.stdout.split() == ["ok", target]:
            return ""
        why = (proc.stderr or proc.stdout).strip().splitlines()
        return f"building the new root failed (exit {proc.returncode}): {why[-1] if why else 'no message'}"


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


def _rmtree(path: Path) -> None:
    def retry(func, p, _exc):  # a command may have made files or folders read-only
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


class Sandbox:
    """A scratch git copy of ``repo`` (an empty repository when ``None``) and isolated execution in it.

    Use as a context manager (``close()`` deletes the copy). ``time_limit`` (s) and
    ``memory_limit_mb`` apply to each command (the address-space limit: interpreters that map
    large arenas, e.g. ``import torch``, need several GB); ``max_output_chars`` bounds the output
    returned. ``allow_unisolated=True`` accepts running without namespaces where they are not
    available; ``isolation="none"`` asks for that explicitly (it still needs ``allow_unisolated``).
    Only files git would track are copied: ignored files (build outputs, virtualenvs) are not.

    ``display_root`` (default ``/testbed``) is where commands see the copy when isolated: they start
    there, ``HOME`` is ``/.sandbox/home`` and ``GIT_DIR`` ``/.sandbox/git`` (see :data:`PRIVATE_DIR`),
    so no output shows the random scratch path, and commands cannot open it (nor the scratch copies
    of other sandboxes beside it: their folder is covered by an empty tmpfs). The top-level folder
    of ``display_root`` is replaced inside the sandbox, so it may not be a system folder (``/usr``,
    ``/tmp``...) nor hold the scratch folder or this Python.
    ``display_root`` (the attribute) is the path to tell an agent: the fixed path when isolated, the
    real scratch path ``str(root)`` when commands run unisolated (``allow_unisolated`` fallback or
    ``isolation="none"``) or when ``display_root=None`` was passed.
    """

    def __init__(self, repo: str | Path | None = None, *, time_limit: float = 30.0, memory_limit_mb: int = 1024,
                 max_output_chars: int = 10_000, allow_unisolated: bool = False, scratch_parent=None,
                 isolation: str = "auto", max_file_mb: int = 512, display_root: str | None = DEFAULT_DISPLAY_ROOT):
        if time_limit is None or isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) \
                or not 0 < time_limit < float("inf"):
            raise input_error("Sandbox", "time_limit", "a finite number of seconds > 0", time_limit)
        if memory_limit_mb is not None and not memory_limit_mb >= 16:
            raise input_error("Sandbox", "memory_limit_mb", ">= 16 (or None for no limit)", memory_limit_mb)
        if not max_output_chars >= 100:
            raise input_error("Sandbox", "max_output_chars", ">= 100", max_output_chars)
        if isolation not in ("auto", "namespaces", "none"):
            raise input_error("Sandbox", "isolation", "'auto', 'namespaces' or 'none'", isolation)
        if isolation == "none" and not allow_unisolated:
            raise input_error("Sandbox", "isolation", "'auto' or 'namespaces' unless allow_unisolated=True confirms "
                              "that commands run without network or filesystem isolation", isolation)
        fixed = _check_display_root(display_root)
        if fixed is not None:
            _hides(fixed, {"the scratch folder": scratch_parent or tempfile.gettempdir(),
                           "this Python": os.path.dirname(sys.executable), "its prefix": sys.prefix,
                           "its base prefix": sys.base_prefix})
        if shutil.which("git") is None:
            raise SandboxError("git is not installed; the sandbox needs it to copy the repository and diff changes")
        self.time_limit = float(time_limit)
        self.memory_limit_mb = memory_limit_mb
        self.max_output_chars = int(max_output_chars)
        self.max_file_mb = int(max_file_mb)
        self._bash = shutil.which("bash") or "/bin/sh"

        self._unshare: tuple[str, ...] | None = None
        if isolation != "none":
            self._unshare, reason = isolation_support()
            if self._unshare is None:
                if isolation == "namespaces" or not allow_unisolated:
                    raise SandboxError(
                        "cannot isolate sandboxed commands (new network, mount and PID namespaces are needed): "
                        f"{reason}. Run as root or enable unprivileged user namespaces, or pass "
                        "allow_unisolated=True to run commands without network and filesystem isolation")
                shown = "" if fixed is None else f" (and at the scratch path, not at {fixed})"
                warnings.warn(f"sandbox runs commands WITHOUT network or filesystem isolation{shown}: {reason}",
                              RuntimeWarning, stacklevel=2)
        self.isolated = self._unshare is not None
        self._fixed = self.isolated and fixed is not None
        if self._fixed:
            why = _fixed_root_support(self._unshare)
            if why:
                raise SandboxError(f"cannot show the repository at display_root={fixed!r}: {why}. "
                                   "Pass display_root=None to run commands at the scratch path instead")

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

        self._dir = Path(tempfile.mkdtemp(prefix="icml26-sandbox-", dir=scratch_parent)).resolve()
        try:
            self.root = self._dir / "repo"
            self.git_dir = self._dir / "git"
            self.home = self._dir / "home"
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
            _rmtree(self._dir)
            raise
        self._closed = False

    # -- setup --------------------------------------------------------------------------------------

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
            _rmtree(self._dir)

    def __enter__(self) -> "Sandbox":
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

    def diff(self) -> str:
        """Unified diff of the scratch copy against the base commit, new files included."""
        self._check_open()
        self._git(["add", "-A"])
        return self._git(["diff", "--cached", "--no-ext-diff", "--no-color", self.base, "--"]).stdout.decode(
            "utf-8", "replace")

    def reset(self) -> None:
        """Back to the base commit: edits reverted, new files removed."""
        self._check_open()
        self._git(["reset", "--quiet", "--hard", self.base])
        self._git(["clean", "-fdxq"])

    def _check_open(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")

    # -- execution ----------------------------------------------------------------------------------

    def _env(self, extra: dict | None) -> dict:
        path = os.pathsep.join(dict.fromkeys([os.path.dirname(sys.executable),
                                              *os.environ.get("PATH", "/usr/bin:/bin").split(os.pathsep)]))
        env = {"PATH": path, "HOME": self._inside_home, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
               "TMPDIR": "/tmp" if self.isolated else str(self.home / "tmp"), "TERM": "dumb", "PAGER": "cat",
               "GIT_PAGER": "cat", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
               "GIT_DIR": self._inside_git, "GIT_WORK_TREE": self.display_root, "GIT_CONFIG_NOSYSTEM": "1",
               "PIP_DISABLE_PIP_VERSION_CHECK": "1", "OMP_NUM_THREADS": "1"}
        if extra:
            env.update({str(k): str(v) for k, v in extra.items()})
        return env

    def run(self, command: str, *, timeout: float | None = None, env: dict | None = None) -> ExecResult:
        """Run ``command`` with bash in the scratch copy; never raises for the command's own failure."""
        self._check_open()
        if not isinstance(command, str):
            raise TypeError(f"command must be a string, got {type(command).__name__}")
        limit = self.time_limit if timeout is None else float(timeout)
        memory = 0 if self.memory_limit_mb is None else int(self.memory_limit_mb) << 20
        fsize = int(self.max_file_mb) << 20
        argv = [self._bash, "-c", command]
        status_read = status_write = None
        process_env = self._env(env)
        if self._unshare is not None:
            spec = {**self._mounts(), "memory_bytes": memory, "fsize_bytes": fsize, "argv": argv}
            # the launcher reports a failed setup on this pipe (closed at exec, so the command cannot write to it)
            status_read, status_write = os.pipe()
            spec["status_fd"] = status_write
            argv = [*self._unshare, sys.executable, "-I", "-S", _launcher.__file__, _launcher.LAUNCH_FLAG,
                    json.dumps(spec)]
            preexec = None
        else:
            def preexec():
                _launcher.set_limits(memory, fsize)

        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, cwd=self.root, env=process_env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=preexec, pass_fds=() if status_write is None else (status_write,))
        except BaseException:
            for fd in (status_read, status_write):
                if fd is not None:
                    os.close(fd)
            raise
        if status_write is not None:
            os.close(status_write)
        try:
            reader = _OutputReader(proc.stdout, self.max_output_chars)
            timed_out = False
            try:
                proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                if proc.poll() is None or timed_out:
                    _kill_group(proc.pid)
                    proc.wait()
            reader.join(5.0)
            duration = time.monotonic() - start
            failure, status_read = ("" if status_read is None else _read_status(status_read)), None  # closes it
        finally:
            if status_read is not None:  # interrupted before the status was read
                os.close(status_read)
        if failure:
            raise SandboxError(f"the sandbox could not be set up for the command, which did not run: {failure}")
        output, truncated = reader.text()
        if timed_out:
            output += f"\n[killed: the command exceeded its time limit of {limit:g} s]"
        returncode = proc.returncode
        memory_exceeded = returncode != 0 and not timed_out and any(m in output for m in _MEMORY_MARKERS)
        return ExecResult(returncode, output, timed_out, truncated, duration, memory_exceeded)

    def run_python(self, code: str, *, timeout: float | None = None, args: list[str] | tuple = ()) -> ExecResult:
        """Run Python ``code`` (this interpreter) in the scratch copy, with ``args`` as ``sys.argv[1:]``."""
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

    def _mounts(self) -> dict:
        """The launcher's view: what is bound where (``[source, target, read_only]``), and the cwd."""
        real = [[str(self.root), str(self.root), False], [str(self.home), str(self.home), False],
                [str(self.git_dir), str(self.git_dir), True]]
        if not self._fixed:
            runtime = [[path, path, True] for path in _hidden_runtime()]
            return {"binds": real + runtime, "new_root": False, "hide": [], "cwd": str(self.root)}
        # In the new root the scratch copies are not mounted at their real paths: under /tmp, /var/tmp
        # or /dev/shm they are behind the private tmpfs already; elsewhere (SERA's ``out/.scratch``, a
        # ``scratch_parent`` in the home folder) an empty tmpfs covers their folder. Commands cannot
        # open or write them there, nor see the other sandboxes beside this one (the path's name can
        # still be read in /proc/self/mountinfo, as the source of the binds below).
        mask = _scratch_mask(self._dir)
        runtime = [[path, path, True] for path in _hidden_runtime(_launcher.TMPFS + tuple(mask))]
        shown = [[str(self.root), self.display_root, False], [str(self.home), self._inside_home, False],
                 [str(self.git_dir), self._inside_git, True]]
        binds = sorted(shown + runtime, key=lambda b: (b[1].count("/"), b[1]))  # parents first
        return {"binds": binds, "new_root": True, "cwd": self.display_root, "mask": mask,
                "hide": sorted({self.display_root.split("/")[1], PRIVATE_DIR.strip("/")})}


def _scratch_mask(scratch: Path) -> list[str]:
    """What to cover with an empty tmpfs in the new root so that ``scratch`` (this sandbox's folder)
    and its siblings are out of sight: nothing when it lies in a private temporary folder, else its
    parent, or the folder itself when the parent is ``/`` or a top-level folder like ``/home``."""
    real = os.path.realpath(scratch)
    if any(real == t or real.startswith(t + "/") for t in _launcher.TMPFS):
        return []
    parent = os.path.dirname(real)
    return [parent if parent.count("/") >= 2 else real]


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


def _hidden_runtime(hidden: tuple[str, ...] | list[str] = _launcher.TMPFS) -> list[str]:
    """Folders of this Python (prefix, import path) that a tmpfs over ``hidden`` (the private
    temporary folders, a masked scratch folder) would hide (a virtualenv under /tmp, say): they are
    bound back, read-only, so ``python`` works inside the sandbox."""
    found: list[str] = []
    for entry in sorted({sys.prefix, sys.base_prefix, os.path.dirname(sys.executable), *sys.path}):
        if not entry or not os.path.isdir(entry):
            continue
        real = os.path.realpath(entry)
        if any(real == t or real.startswith(t + "/") for t in hidden) and \
                not any(real == f or real.startswith(f + "/") for f in found):
            found = [f for f in found if not f.startswith(real + "/")] + [real]
    return found


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
