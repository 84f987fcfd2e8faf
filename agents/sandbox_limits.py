"""Limits on a whole sandboxed command: a cgroup per command, a size-capped scratch folder, rlimits.

:class:`~icml26.agents.sandbox.Sandbox` asks :func:`cgroup_support` once per process which
cgroup controllers it may use, and for each command creates a :class:`CommandCgroup` below the
caller's own cgroup (read from ``/proc/self/cgroup``; never elsewhere in the hierarchy), joins
the command's first process to it before it executes anything, and removes it afterwards:

* **cgroup v2** (a unified hierarchy whose ``cgroup.subtree_control`` in the caller's cgroup
  enables ``memory`` and ``pids``): ``memory.max``, ``memory.swap.max = 0``, ``memory.oom.group``,
  ``pids.max``; CPU time from ``cpu.stat``;
* **cgroup v1** (separate ``memory``, ``pids`` and ``cpuacct`` hierarchies):
  ``memory.limit_in_bytes``, ``memory.memsw.limit_in_bytes`` (where swap is accounted),
  ``pids.max``; CPU time from ``cpuacct.usage``.

Where neither is writable, the limits fall back to per-process rlimits (``RLIMIT_AS`` for memory,
``RLIMIT_CPU`` for CPU time; the number of processes is then not limited) and the sandbox warns.
:attr:`Sandbox.limits <icml26.agents.sandbox.Sandbox.limits>` says which mechanism holds each limit.

The disk cap is a size-capped tmpfs the sandbox mounts on the host for the copy and the home (as
root). A mount outlives a killed process: an owner stamp (pid and start time) beside each lets
:func:`reap_stale` unmount those whose process is gone, once per process and in
:func:`remove_scratch`.
"""

from __future__ import annotations

import functools
import itertools
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from .sandbox_launcher import umount

__all__ = ["MIN_DISK_MB", "MIN_MEMORY_MB", "MIN_PIDS", "CommandCgroup", "Limit", "cgroup_support",
           "owner_stamp", "reap_dead_cgroups", "reap_stale", "remove_scratch", "rmtree"]

#: the smallest limits a sandbox accepts: below them not even the launcher and a shell start
MIN_MEMORY_MB = 64
MIN_PIDS = 8
MIN_DISK_MB = 8


@dataclass(frozen=True)
class Limit:
    """One limit in force: its ``value`` (None: none), ``scope`` (``"command"``: all processes of a
    command together; ``"process"``: each process alone; ``"none"``), the ``mechanism`` holding it,
    and a ``note``: why, when it is weaker than asked; where, for a cgroup."""

    value: float | int | None
    scope: str
    mechanism: str
    note: str = ""


def _own_cgroups() -> dict[str, str]:
    """``{controller or "": path}`` from ``/proc/self/cgroup`` (``""`` is the v2 hierarchy)."""
    found = {}
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as handle:
            for line in handle:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for name in controllers.split(",") if controllers else [""]:
                    found[name] = path
    except OSError:
        pass
    return found


def _mounts() -> list[tuple[str, str, set[str]]]:
    """``(mount point, fstype, super options)`` of the cgroup file systems."""
    found = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                left, right = line.split(" - ", 1)
                fstype, _source, options = right.split()[:3]
                if fstype in ("cgroup", "cgroup2"):
                    point = left.split()[4].encode().decode("unicode_escape")
                    found.append((point, fstype, set(options.split(","))))
    except OSError:
        pass
    return found


def _writable_parent(path: str) -> bool:
    """Whether a child cgroup can be made (and removed) in ``path``."""
    probe = os.path.join(path, f"icml26-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except OSError:
        return False
    try:
        os.rmdir(probe)
    except OSError:
        pass
    return True


@functools.cache
def cgroup_support() -> dict[str, tuple[str, str]]:
    """``{"memory" | "pids" | "cpu": (version, parent folder)}`` for each controller a per-command
    cgroup can use here; missing keys are controllers that cannot be used. Probed once per process;
    :func:`reap_dead_cgroups` removes what killed processes left there."""
    return _cgroup_parents()


def where(support_entry: tuple[str, str]) -> str:
    """Where the per-command cgroups of one controller go, for :attr:`Sandbox.limits`: said when the
    caller's own cgroup is the top of its hierarchy (they are then made at the top level)."""
    _, parent = support_entry
    top = any(os.path.normpath(point) == parent for point, _, _ in _mounts())
    return f"made in {parent}" + (" (this process's own cgroup is the top of that hierarchy)" if top else "")


def _owner_alive(pid: str, start: str | None) -> bool:
    if not pid.isdigit():
        return False
    if start is None:  # a name without the start time (older releases): the pid alone decides
        return os.path.exists(f"/proc/{pid}")
    return owner_stamp(int(pid)).split(" ")[-1] == start


def reap_dead_cgroups(support: dict | None = None) -> list[str]:
    """Kill what is left in the per-command cgroups of processes that are gone (killed between making
    one and removing it) and remove those cgroups; a cgroup of a live process is left alone, even while
    it is empty. Returns the folders removed. Each :class:`~icml26.agents.sandbox.Sandbox` calls it."""
    support = cgroup_support() if support is None else support
    removed = []
    for parent in sorted({parent for _, parent in support.values()}):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            parts = name.split("-")
            if len(parts) not in (4, 5) or parts[:2] != ["icml26", "sandbox"]:
                continue
            if _owner_alive(parts[2], parts[3] if len(parts) == 5 else None):
                continue
            CommandCgroup.adopt(os.path.join(parent, name)).remove()  # kills what it still holds, then removes it
            if not os.path.exists(os.path.join(parent, name)):
                removed.append(os.path.join(parent, name))
    return removed


def _cgroup_parents() -> dict[str, tuple[str, str]]:
    own, mounts = _own_cgroups(), _mounts()
    found: dict[str, tuple[str, str]] = {}
    for point, fstype, _ in mounts:  # v2 first: one cgroup holds every limit
        if fstype != "cgroup2" or "" not in own:
            continue
        parent = os.path.normpath(point + own[""])
        try:
            with open(os.path.join(parent, "cgroup.subtree_control"), encoding="utf-8") as handle:
                enabled = set(handle.read().split())
        except OSError:
            continue
        if {"memory", "pids"} <= enabled and _writable_parent(parent):
            found = {"memory": ("v2", parent), "pids": ("v2", parent), "cpu": ("v2", parent)}
            return found
    for controller, v1_name in (("memory", "memory"), ("pids", "pids"), ("cpu", "cpuacct")):
        for point, fstype, options in mounts:
            if fstype == "cgroup" and v1_name in options and v1_name in own:
                parent = os.path.normpath(point + own[v1_name])
                if _writable_parent(parent):
                    found[controller] = ("v1", parent)
                break
    return found


_counter = itertools.count()
_owners: dict[int, str] = {}


def _owner() -> str:
    """This process's owner stamp (a forked child has its own)."""
    pid = os.getpid()
    if pid not in _owners:
        _owners[pid] = owner_stamp(pid) or f"{pid} 0"
    return _owners[pid]


def _write(path: str, value) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(str(value))


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as handle:
            return handle.read()
    except OSError:
        return ""


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] == name and parts[1].isdigit():
            return int(parts[1])
    return 0


class CommandCgroup:
    """The cgroup(s) of one command, made by :meth:`create` with the limits written in.

    ``procs`` are the ``cgroup.procs`` files the command's first process writes its pid to (before
    it execs anything, so every descendant is inside); :meth:`check` reads which limit was hit;
    :meth:`remove` kills whatever is left and deletes the folders.
    """

    def __init__(self):
        self.dirs: dict[str, tuple[str, str]] = {}  # controller -> (version, folder)
        self._made: list[str] = []

    @classmethod
    def create(cls, support: dict, *, memory_bytes: int | None, pids: int | None) -> CommandCgroup:
        group = cls()
        # the owner (pid and start time) in the name: reap_dead_cgroups knows whose it is after a kill -9
        name = f"icml26-sandbox-{_owner().replace(' ', '-')}-{next(_counter)}"
        try:
            for controller in ("memory", "pids", "cpu"):
                if controller not in support:
                    continue
                version, parent = support[controller]
                folder = os.path.join(parent, name)
                if folder not in group._made:
                    os.mkdir(folder)
                    group._made.append(folder)
                group.dirs[controller] = (version, folder)
            if memory_bytes and "memory" in group.dirs:
                version, folder = group.dirs["memory"]
                if version == "v2":
                    _write(f"{folder}/memory.max", memory_bytes)
                    if os.path.exists(f"{folder}/memory.swap.max"):
                        _write(f"{folder}/memory.swap.max", 0)
                    _write(f"{folder}/memory.oom.group", 1)
                else:
                    _write(f"{folder}/memory.limit_in_bytes", memory_bytes)
                    if os.path.exists(f"{folder}/memory.memsw.limit_in_bytes"):
                        _write(f"{folder}/memory.memsw.limit_in_bytes", memory_bytes)
            if pids and "pids" in group.dirs:
                _write(f"{group.dirs['pids'][1]}/pids.max", pids)
        except BaseException:
            group.remove()
            raise
        return group

    @classmethod
    def adopt(cls, folder: str) -> CommandCgroup:
        """An existing cgroup folder (a dead owner's), to :meth:`kill` and :meth:`remove`."""
        group = cls()
        group._made.append(folder)
        return group

    @property
    def procs(self) -> list[str]:
        return [f"{folder}/cgroup.procs" for folder in self._made]

    def check(self) -> tuple[bool, bool]:
        """``(memory exceeded, process limit hit)`` so far."""
        memory = pids = False
        if "memory" in self.dirs:
            version, folder = self.dirs["memory"]
            if version == "v2":
                memory = _field(_read(f"{folder}/memory.events"), "oom_kill") > 0
            else:
                memory = _field(_read(f"{folder}/memory.oom_control"), "oom_kill") > 0
        if "pids" in self.dirs:
            pids = _field(_read(f"{self.dirs['pids'][1]}/pids.events"), "max") > 0
        return memory, pids

    def peak_memory_bytes(self) -> int | None:
        """The most memory all processes held at once (v1 ``memory.max_usage_in_bytes``, v2 ``memory.peak``)."""
        if "memory" not in self.dirs:
            return None
        version, folder = self.dirs["memory"]
        text = _read(f"{folder}/{'memory.peak' if version == 'v2' else 'memory.max_usage_in_bytes'}").strip()
        return int(text) if text.isdigit() else None

    def cpu_seconds(self) -> float | None:
        if "cpu" not in self.dirs:
            return None
        version, folder = self.dirs["cpu"]
        if version == "v2":
            return _field(_read(f"{folder}/cpu.stat"), "usage_usec") / 1e6
        text = _read(f"{folder}/cpuacct.usage").strip()
        return int(text) / 1e9 if text.isdigit() else None

    def kill(self) -> None:
        """SIGKILL every process still in the command's cgroups."""
        for folder in self._made:
            if os.path.exists(f"{folder}/cgroup.kill"):
                try:
                    _write(f"{folder}/cgroup.kill", 1)
                    continue
                except OSError:
                    pass
            for pid in _read(f"{folder}/cgroup.procs").split():
                try:
                    os.kill(int(pid), 9)
                except (ProcessLookupError, PermissionError, ValueError):
                    pass

    def remove(self) -> None:
        for folder in reversed(self._made):
            for attempt in range(200):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:  # processes still exiting
                    self.kill()
                    time.sleep(0.005 if attempt < 20 else 0.05)
        self._made.clear()
        self.dirs.clear()


# --------------------------------------------------------------------------------------------------
# the disk cap: a size-capped tmpfs on the host, which outlives a killed process


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def rmtree(path: Path) -> None:
    """Remove ``path`` and everything under it, also where a command made folders read-only (a retry
    makes the folder in the way ``0700``). Symlinks are never followed: the retry changes the mode of
    real folders inside ``path`` only, never a symlink's target (which may lie outside the tree), nor a
    file (a hard link may share its inode with a file outside)."""
    top = os.path.abspath(path)

    def loosen(p: str) -> bool:
        if (p == top or p.startswith(top.rstrip("/") + "/")) and not os.path.islink(p) and os.path.isdir(p):
            os.chmod(p, 0o700)
            return True
        return False

    opened = set()

    def retry(func, p, _exc):  # a command may have made folders read-only, or unreadable
        try:
            loosen(os.path.dirname(p))
            if func in (os.open, os.scandir, os.listdir):
                if p not in opened and loosen(p):
                    opened.add(p)
                    shutil.rmtree(p, onerror=retry)  # a folder that could not be opened still holds its files
            elif func not in (os.path.islink, os.lstat):
                func(p)
        except OSError:
            pass

    shutil.rmtree(path, onerror=retry)


def owner_stamp(pid: int) -> str:
    """``"pid start-time"``: names one process for good (a pid alone may be reused)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            start = handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return ""
    return f"{pid} {start}"


def reap_stale(under: str | None = None) -> list[str]:
    """Unmount the size-capped folders of sandboxes whose process is gone (killed before ``close()``:
    a mount outlives its process), only below ``under`` when given; their folders are removed too.
    Returns the folders removed."""
    removed = []
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            points = [line.split()[4].encode().decode("unicode_escape") for line in handle]
    except OSError:
        return removed
    for point in points:
        folder = os.path.dirname(point)
        if os.path.basename(point) != "space" or not os.path.basename(folder).startswith("icml26-sandbox-"):
            continue
        if under is not None and not _within(point, os.path.realpath(under)):
            continue
        try:
            stamp = Path(folder, "owner").read_text()
        except OSError:
            continue  # not ours, or being made
        pid = stamp.split()[0] if stamp.split() else ""
        if pid.isdigit() and owner_stamp(int(pid)) == stamp:
            continue  # its process lives
        try:
            umount(point)
        except OSError:
            continue
        rmtree(Path(folder))
        removed.append(folder)
    return removed



def remove_scratch(folder) -> None:
    """Remove a folder that held scratch copies (``scratch_parent``) left by a killed run, unmounting
    the size-capped folders of sandboxes whose process is gone first."""
    if os.path.isdir(folder):
        reap_stale(str(folder))
    shutil.rmtree(folder, ignore_errors=True)
