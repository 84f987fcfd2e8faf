"""The sandbox's launcher: runs inside the new namespaces, before the command, and then execs it.

:class:`icml26.agents.sandbox.Sandbox` starts it as ``python -I -S sandbox_launcher.py --icml26-sandbox-launch
SPEC`` under util-linux's ``unshare``. It remounts every mount read-only, puts private tmpfs on ``/tmp``,
``/var/tmp`` and ``/dev/shm``, binds the sandbox's own folders back (or builds a new root and ``pivot_root``s
into it when the copy must appear at a fixed path), brings up loopback, drops every capability, sets
``no_new_privs`` and the rlimits, and execs the command. A setup failure is written on the status pipe and
ends the process with :data:`SETUP_FAILED`.

Standard library only, and nothing of icml26: it runs in an isolated interpreter (``-I -S``) whose import
path may not reach the package (``tests/test_agents_sandbox.py`` checks what importing it loads).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys

LAUNCH_FLAG = "--icml26-sandbox-launch"
#: exit status of the launcher when the isolation could not be set up (the command never started)
SETUP_FAILED = 125
#: folders that become private, empty tmpfs in every sandbox
TMPFS = ("/tmp", "/var/tmp", "/dev/shm")


_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_NOATIME, _MS_NODIRATIME, _MS_BIND = 32, 1024, 2048, 4096
_MS_REC, _MS_RELATIME, _MS_STRICTATIME = 16384, 1 << 21, 1 << 24
_MOUNT_OPTION_FLAGS = {"nosuid": _MS_NOSUID, "nodev": _MS_NODEV, "noexec": _MS_NOEXEC, "noatime": _MS_NOATIME,
                       "nodiratime": _MS_NODIRATIME, "relatime": _MS_RELATIME, "strictatime": _MS_STRICTATIME}


def set_limits(memory_bytes: int, fsize_bytes: int) -> None:
    import resource

    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    if fsize_bytes:
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_bytes, fsize_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def launch(spec: dict) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]

    def mount(source, target, fstype, flags, data=None):
        enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
        if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount {source} -> {target} (flags {flags:#x}): {os.strerror(err)}")

    def prctl(option, arg2=0):
        if libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({option}, {arg2}): {os.strerror(err)}")

    def bind(fd, target, read_only):
        os.makedirs(target, exist_ok=True)
        mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND | _MS_REC)
        mount(None, target, None, _MS_REMOUNT | _MS_BIND | _MS_NOSUID | _MS_NODEV | (_MS_RDONLY if read_only else 0))

    keep: dict[str, int] = {}
    for source, _target, _read_only in spec["binds"]:
        if source not in keep:
            keep[source] = os.open(source, os.O_PATH | os.O_DIRECTORY)
    # 1. every existing mount read-only (keeping its per-mount flags: some are locked in user namespaces)
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        mounts = [line.split() for line in handle]
    for fields in mounts:
        point = fields[4].encode().decode("unicode_escape")  # \040 for spaces
        flags = _MS_REMOUNT | _MS_BIND | _MS_RDONLY
        for option in fields[5].split(","):
            flags |= _MOUNT_OPTION_FLAGS.get(option, 0)
        try:
            mount(None, point, None, flags)
        except OSError as exc:
            if os.path.exists(point) and os.path.ismount(point):
                raise
            del exc  # a mount hidden under another one is not reachable anyway
    # 2. private, empty temporary folders
    for point in TMPFS:
        if os.path.isdir(point):
            mount("tmpfs", point, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=512m")
    # 3. the sandbox's own folders, visible again at their paths (they may have been under /tmp)...
    if not spec["new_root"]:
        for source, target, read_only in spec["binds"]:
            bind(keep[source], target, read_only)
    else:  # ...or in a new root, where the copy is at a fixed path
        _pivot_into_new_root(mount, libc, spec, keep, bind)
    for fd in keep.values():
        os.close(fd)
    _loopback_up()
    # 4. no way back: drop every capability, forbid gaining new ones, die with the parent
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        prctl(24, cap)  # PR_CAPBSET_DROP
    prctl(47, 4)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2 words): all empty
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    set_limits(spec["memory_bytes"], spec["fsize_bytes"])
    os.chdir(spec["cwd"])
    if spec.get("status_fd") is not None:
        os.set_inheritable(spec["status_fd"], False)  # closed by a successful exec: the command cannot use it
    os.execvpe(spec["argv"][0], spec["argv"], os.environ)


# pivot_root(2) has no libc wrapper: its system call number per architecture
_PIVOT_ROOT_NR = {"x86_64": 155, "amd64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "loongarch64": 41,
                  "ppc64le": 203, "ppc64": 203, "s390x": 217, "i386": 217, "i686": 217, "armv7l": 218, "armv8l": 218}
_MNT_DETACH = 2
_STAGING, _OLD_ROOT = "/tmp/.new-root", ".old-root"


def _pivot_into_new_root(mount, libc, spec: dict, keep: dict, bind) -> None:
    """Make a tmpfs the root: every top-level host folder bound into it (read-only already, and with
    the private ``/var/tmp`` and ``/dev/shm`` under them), a fresh private ``/tmp``, the folders of
    ``spec["binds"]`` at their targets; then ``pivot_root`` into it and detach the old root."""
    machine = os.uname().machine
    if machine not in _PIVOT_ROOT_NR:
        raise OSError(f"pivot_root: no system call number known for this architecture ({machine})")
    if not os.path.ismount("/tmp"):
        raise OSError("no private /tmp to build the new root in")
    new = _STAGING
    os.mkdir(new, 0o755)
    mount("tmpfs", new, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=16m")
    hidden = {"tmp", _OLD_ROOT, *spec["hide"]}
    for name in sorted(os.listdir("/")):
        source, target = "/" + name, f"{new}/{name}"
        if name in hidden:
            continue
        if os.path.islink(source):
            os.symlink(os.readlink(source), target)
        elif os.path.isdir(source):
            os.mkdir(target)
            mount(source, target, None, _MS_BIND | _MS_REC)  # keeps the source's read-only flag
        elif os.path.isfile(source):
            open(target, "x").close()
            mount(source, target, None, _MS_BIND)
    os.mkdir(f"{new}/tmp")
    mount("tmpfs", f"{new}/tmp", "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=1777,size=512m")
    masks = [new + point for point in spec.get("mask", ()) if os.path.isdir(new + point)]
    for point in masks:  # the scratch folder, when it is not under /tmp (see Sandbox._mounts)
        mount("tmpfs", point, "tmpfs", _MS_NOSUID | _MS_NODEV, "mode=0755,size=64k")
    for source, target, read_only in spec["binds"]:
        bind(keep[source], new + target, read_only)
    for point in masks:  # read-only once the folders of this Python under it are bound back
        mount(None, point, None, _MS_REMOUNT | _MS_NOSUID | _MS_NODEV | _MS_RDONLY, "mode=0755,size=64k")
    os.mkdir(f"{new}/{_OLD_ROOT}")
    if libc.syscall(ctypes.c_long(_PIVOT_ROOT_NR[machine]), os.fsencode(new), os.fsencode(f"{new}/{_OLD_ROOT}")) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root {new}: {os.strerror(err)}")
    os.chdir("/")
    if libc.umount2(os.fsencode("/" + _OLD_ROOT), _MNT_DETACH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"detaching the old root: {os.strerror(err)}")
    os.rmdir("/" + _OLD_ROOT)
    mount(None, "/", None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | _MS_NOSUID | _MS_NODEV)


def _loopback_up() -> None:
    """Bring ``lo`` up in the new network namespace (servers on 127.0.0.1 inside still work)."""
    import fcntl
    import socket
    import struct

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            request = struct.pack("16sH22x", b"lo", 0)
            flags = struct.unpack("16sH22x", fcntl.ioctl(sock, 0x8913, request))[1]  # SIOCGIFFLAGS
            fcntl.ioctl(sock, 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
    except OSError:
        pass


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == LAUNCH_FLAG:
    try:
        launch(json.loads(sys.argv[2]))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        message = f"icml26 sandbox setup failed: {type(exc).__name__}: {exc}\n"
        sys.stderr.write(message)
        try:
            status_fd = json.loads(sys.argv[2]).get("status_fd")
            if status_fd is not None:
                os.write(status_fd, message.encode("utf-8", "replace"))
        except (ValueError, AttributeError, TypeError, OSError):
            pass
        sys.exit(SETUP_FAILED)
