"""Processes that die with the run that started them.

A run killed from outside (``kill -9``, a caller's time-out, an out-of-memory kill) cannot clean up, so
every long-lived process it starts must end by itself when its parent goes: on Linux the kernel does
that for a process that asked for a parent-death signal (``prctl(PR_SET_PDEATHSIG)``, see ``man 2
PR_SET_PDEATHSIG``). :func:`die_with_parent` asks for it; call it first thing in a worker (a
``multiprocessing`` or ``concurrent.futures`` initializer) or in a ``subprocess.Popen`` ``preexec_fn``::

    import multiprocessing, os
    from concurrent.futures import ProcessPoolExecutor
    from icml26.processes import die_with_parent

    pool = ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("fork"),
                               initializer=die_with_parent, initargs=(os.getpid(),))

The signal is sent when the *thread* that forked the process ends, so fork workers from a thread that
lives as long as the pool (the main thread, as ``multiprocessing.Pool`` does). With the ``forkserver``
or ``spawn`` start methods the parent is the fork server (or the pool's owner through it): pass
``parent_pid=None`` there, and the fork server's own death (it exits when the owner does) ends them.

Short-lived programs started often (a solver per instance) go through :func:`popen_dying_with_parent`,
which asks for the same signal without a ``preexec_fn`` (see there why that matters).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import signal
import subprocess
import sys

__all__ = ["die_with_parent", "popen_dying_with_parent"]

_PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(parent_pid: int | None = None, sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` (SIGKILL) to this process when its parent dies.

    ``parent_pid`` is the pid of the process that started this one, read before the fork
    (``os.getpid()`` in the parent): a parent that died between the fork and this call would never
    deliver the signal (this process was re-parented already), so when ``os.getppid()`` is no longer
    ``parent_pid`` this process exits at once. With ``parent_pid=None`` only the signal is set.

    Returns whether the signal was set: False off Linux (nothing to do there; such a platform has no
    parent-death signal), where only the check of the parent holds.
    """
    if parent_pid is not None:
        from .validation import check_int

        parent_pid = check_int("die_with_parent", "parent_pid", parent_pid, low=1)
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            armed = libc.prctl(_PR_SET_PDEATHSIG, ctypes.c_ulong(int(sig)), ctypes.c_ulong(0), ctypes.c_ulong(0),
                               ctypes.c_ulong(0)) == 0
        except (OSError, AttributeError):
            armed = False
    # The race: the parent may have died before the prctl took effect, and the kernel only signals a
    # death that comes after it. Re-parented already means orphaned already: go now.
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
    return armed


@functools.lru_cache(maxsize=1)
def _setpriv() -> str | None:
    """util-linux's ``setpriv`` when it has ``--pdeathsig`` (util-linux >= 2.33), else None."""
    path = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if path is None:
        return None
    try:
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in usage else None


def popen_dying_with_parent(args: list[str], **kwargs) -> subprocess.Popen:
    """``subprocess.Popen(args, **kwargs)`` for a program that must die (SIGKILL) when this process does.

    Written here because the standard library has no parent-death option, and its only hook, a
    ``preexec_fn`` calling :func:`die_with_parent`, makes ``Popen`` fork the whole interpreter instead of
    spawning (``vfork``): the child then tears down a copy of this process's address space when it
    execs, CPU billed to the child. From a synthesis worker with HiGHS and SciPy loaded that was about
    7 ms per start, more than the CBC solve it started. So on Linux with util-linux's ``setpriv``
    (>= 2.33) the program is exec'd through ``setpriv --pdeathsig KILL --``, which ``Popen`` spawns
    without a fork of this process; elsewhere the ``preexec_fn`` path is used. With ``setpriv`` the
    signal is armed a moment after ``Popen`` returns (once ``setpriv`` runs): a parent killed in that
    window leaves the program to its own limits (pass it one, e.g. a solver's time limit).
    """
    if "preexec_fn" in kwargs:
        raise TypeError("popen_dying_with_parent sets its own parent-death hook; pass no preexec_fn")
    setpriv = _setpriv()
    if setpriv is not None:
        return subprocess.Popen([setpriv, "--pdeathsig", "KILL", "--", *args], **kwargs)
    parent = os.getpid()
    return subprocess.Popen(args, preexec_fn=lambda: die_with_parent(parent), **kwargs)
