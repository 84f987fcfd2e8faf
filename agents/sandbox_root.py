"""What a sandboxed command sees: the steps the launcher follows to build its root.

:func:`system_steps` lists, for :func:`icml26.agents.sandbox_launcher._build_root`, what every
sandbox of this process shares: read-only binds of the system folders and of this Python's
prefixes, a generated minimal ``/etc``, size-capped ``/tmp`` and ``/var/tmp``, a fresh ``/dev`` and
a read-only ``/proc`` (its key lists and kernel internals masked); :class:`~icml26.agents.sandbox.Sandbox` adds its own folders (the copy, the
home, the git metadata) and the generated ``/etc/passwd``.
"""

from __future__ import annotations

import functools
import os
import sys

from . import sandbox_launcher as _launcher

__all__ = ["RO", "RO_EXEC", "RW", "RW_EXEC", "python_folders", "system_steps", "within"]

RO = _launcher.MS_RDONLY | _launcher.MS_NOSUID | _launcher.MS_NODEV | _launcher.MS_NOEXEC
RO_EXEC = _launcher.MS_RDONLY | _launcher.MS_NOSUID | _launcher.MS_NODEV
RW_EXEC = _launcher.MS_NOSUID | _launcher.MS_NODEV
RW = RW_EXEC | _launcher.MS_NOEXEC
_SYSTEM_FOLDERS = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# what of /proc a command does not see (as container runtimes mask it): the keys and key users the
# caller's credentials can view, the kernel's memory image and timers, ACPI, SCSI and sound
_PROC_MASKED = ("keys", "key-users", "kcore", "timer_list", "sched_debug", "latency_stats", "sysrq-trigger", "acpi",
                "scsi", "asound")
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
# what of the host's /etc commands see (read-only); passwd, group, hosts, resolv.conf are generated
_ETC_SHARED = ("ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "ld.so.cache", "ld.so.conf",
               "ld.so.conf.d", "localtime", "timezone", "protocols", "services", "mime.types", "os-release",
               "debian_version", "gai.conf", "bash.bashrc", "inputrc", "profile")
_ETC_FILES = {"group": "root:x:0:\nnogroup:x:65534:\n",
              "hosts": "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
              "resolv.conf": "# no network inside the sandbox\n",
              "nsswitch.conf": "passwd: files\ngroup: files\nshadow: files\nhosts: files\nnetworks: files\n"
                               "protocols: files\nservices: files\n",
              "hostname": "sandbox\n"}




def python_folders() -> list[str]:
    """The folders of the Python that runs commands: its prefix and base prefix (exactly those), and
    the folder of the interpreter when it lies outside both. Nothing else of ``sys.path``: what a
    ``.pth`` file or the host adds there is not needed to start Python."""
    folders = [sys.prefix, sys.base_prefix, os.path.dirname(sys.executable),
               os.path.dirname(os.path.realpath(sys.executable))]
    found: list[str] = []
    for folder in folders:
        folder = os.path.abspath(folder)
        if os.path.isdir(folder) and folder != "/" and not any(within(folder, f) for f in found):
            found = [f for f in found if not within(f, folder)] + [folder]
    return found


def within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


@functools.cache
def system_steps(extra_ro: tuple[str, ...], tmp_bytes: int) -> tuple:
    """The launcher's steps (see :func:`icml26.agents.sandbox_launcher._build_root`) common to every
    sandbox of this process: system folders, ``/etc``, ``/tmp``, ``/dev``, ``/proc``, this Python."""
    steps: list = []
    for name in _SYSTEM_FOLDERS:
        path = "/" + name
        if os.path.islink(path):
            steps.append(["link", path, os.readlink(path)])
        elif os.path.isdir(path):
            steps.append(["bind", path, path, RO_EXEC])
    steps.append(["dir", "/etc", 0o755])
    for name, text in _ETC_FILES.items():
        steps.append(["file", f"/etc/{name}", text, 0o644])
    for name in _ETC_SHARED:
        path = f"/etc/{name}"
        if os.path.islink(path):
            steps.append(["link", path, os.readlink(path)])
        elif os.path.exists(path):
            steps.append(["bind", path, path, RO])
    size = f"size={max(tmp_bytes >> 10, 1024)}k"
    steps += [["tmpfs", "/tmp", RW_EXEC, f"mode=1777,{size}"], ["tmpfs", "/var/tmp", RW_EXEC, f"mode=1777,{size}"],
              ["tmpfs", "/dev", RW, "mode=0755,size=64k"]]
    steps += [["bind", f"/dev/{name}", f"/dev/{name}", _launcher.MS_NOSUID | _launcher.MS_NOEXEC]
              for name in _DEVICES if os.path.exists(f"/dev/{name}")]
    steps += [["devpts", "/dev/pts", RW, "newinstance,ptmxmode=0666,mode=0620"], ["link", "/dev/ptmx", "pts/ptmx"],
              ["link", "/dev/fd", "/proc/self/fd"], ["link", "/dev/stdin", "/proc/self/fd/0"],
              ["link", "/dev/stdout", "/proc/self/fd/1"], ["link", "/dev/stderr", "/proc/self/fd/2"],
              ["tmpfs", "/dev/shm", RW, f"mode=1777,{size}"], ["ro", "/dev"],
              ["proc", "/proc", RO]]
    steps += [["mask", f"/proc/{name}"] for name in _PROC_MASKED]
    shown = {"/" + n for n in _SYSTEM_FOLDERS}
    extra = [os.path.abspath(p) for p in extra_ro]
    for folder in sorted(dict.fromkeys(python_folders() + extra), key=lambda p: (p.count("/"), p)):
        if not any(within(os.path.realpath(folder), s) or within(folder, s) for s in shown):
            steps.append(["bind", folder, folder, RO_EXEC])
    return tuple(steps)
