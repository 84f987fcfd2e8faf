"""The sandbox's launcher: runs inside the new namespaces, before the command, and then execs it.

:class:`icml26.agents.sandbox.Sandbox` starts it as ``python -I -S sandbox_launcher.py --icml26-sandbox-launch
SPEC`` under util-linux's ``unshare``. It builds a new root from nothing, following the ordered steps of
``spec["root"]`` (made by the sandbox: which host folders to bind where, read-only or not, which tmpfs, which
files to write), ``pivot_root``s into it and detaches the old root, so nothing of the host is visible but
what was bound. It brings up loopback, drops every capability, sets ``no_new_privs`` and the rlimits,
reports on the status pipe that the command starts, and execs it. A setup failure is written on the status
pipe and ends the process with :data:`SETUP_FAILED`.

Standard library only, and nothing of icml26: it runs in an isolated interpreter (``-I -S``) whose import
path may not reach the package (``tests/test_agents_sandbox.py`` checks what importing it loads).
"""

from __future__ import annotations

import ctypes
import marshal
import os
import sys

LAUNCH_FLAG = "--icml26-sandbox-launch"
#: exit status of the launcher when the isolation could not be set up (the command never started)
SETUP_FAILED = 125
#: written on the status pipe just before the command is executed
STARTED = "started\n"

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_REC = 32, 4096, 16384
MNT_DETACH = 2
# statvfs flags a bind remount keeps from its source: the atime ones and the restrictive ones are locked
# in a user namespace (clearing one fails), and keeping a restriction never loosens anything
_KEPT = {os.ST_NOATIME: 1024, os.ST_NODIRATIME: 2048, os.ST_RELATIME: 1 << 21, os.ST_RDONLY: MS_RDONLY,
         os.ST_NOSUID: MS_NOSUID, os.ST_NODEV: MS_NODEV, os.ST_NOEXEC: MS_NOEXEC}
_RLIMITS = {"as": "RLIMIT_AS", "fsize": "RLIMIT_FSIZE", "nofile": "RLIMIT_NOFILE", "cpu": "RLIMIT_CPU",
            "core": "RLIMIT_CORE"}


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    return libc


def mount(source, target, fstype, flags, data=None, libc=None) -> None:
    """mount(2); an OSError that names the mount when it fails."""
    libc = libc or _libc()
    enc = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    if libc.mount(enc(source), enc(target), enc(fstype), flags, enc(data)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} -> {target} (flags {flags:#x}): {os.strerror(err)}")


def umount(target, flags=MNT_DETACH, libc=None) -> None:
    libc = libc or _libc()
    if libc.umount2(os.fsencode(target), flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"umount {target}: {os.strerror(err)}")


def encode(spec: dict) -> str:
    """``spec`` as one command-line argument. ``marshal`` (built in, nothing to import, unlike ``json``
    and the ``re`` it pulls in) is enough: the same interpreter writes and reads it."""
    return marshal.dumps(spec).hex()


def decode(text: str) -> dict:
    return marshal.loads(bytes.fromhex(text))


def set_limits(limits: dict) -> None:
    """Set the rlimits named in ``limits`` (``{"as": bytes, "fsize": bytes, "nofile": n, "cpu": s}``)."""
    import resource

    for key, value in limits.items():
        if value is not None:
            resource.setrlimit(getattr(resource, _RLIMITS[key]), (int(value), int(value)))


def launch(spec: dict) -> None:
    libc = _libc()

    def prctl(option, arg2=0):
        if libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"prctl({option}, {arg2}): {os.strerror(err)}")

    for path in spec.get("cgroup_procs", ()):  # the command's cgroup, before anything else runs: "0" is this process
        with open(path, "w", encoding="ascii") as handle:
            handle.write("0")
    _build_root(spec["root"], libc)
    _loopback_up()
    # no way back: drop every capability, forbid gaining new ones, die with the parent
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        prctl(24, cap)  # PR_CAPBSET_DROP
    prctl(47, 4)  # PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2 words): all empty
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    prctl(38, 1)  # PR_SET_NO_NEW_PRIVS
    prctl(1, 9)  # PR_SET_PDEATHSIG, SIGKILL (the signal module would import enum)
    set_limits(spec.get("rlimits", {}))
    os.chdir(spec["cwd"])
    status = spec.get("status_fd")
    if status is not None:
        os.set_inheritable(status, False)  # closed by a successful exec: the command cannot use it
        os.write(status, STARTED.encode())
    os.dup2(1, 2)  # the command's stderr joins its stdout; the launcher's own went to the machinery's pipe
    try:
        os.execvpe(spec["argv"][0], spec["argv"], os.environ)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot execute {spec['argv'][0]}: {exc.strerror}") from None


# pivot_root(2) has no libc wrapper: its system call number per architecture
_PIVOT_ROOT_NR = {"x86_64": 155, "amd64": 155, "aarch64": 41, "arm64": 41, "riscv64": 41, "loongarch64": 41,
                  "ppc64le": 203, "ppc64": 203, "s390x": 217, "i386": 217, "i686": 217, "armv7l": 218, "armv8l": 218}
_STAGING, _OLD_ROOT = "/tmp", ".old-root"


def _build_root(steps: list, libc) -> None:
    """Build the new root on a tmpfs over ``/tmp`` (private to this mount namespace), step by step:

    * ``["bind", source, target, flags]``: bind ``source`` (a host path, opened before anything is
      mounted) at ``target``, then remount it with ``flags`` (``MS_RDONLY|MS_NOSUID|...``), never
      recursively (submounts of the source stay out);
    * ``["tmpfs", target, flags, options]``, ``["proc", target, flags]``, ``["devpts", target, flags, options]``
      (a devpts that may be refused: then skipped);
    * ``["dir", target, mode]``, ``["file", target, text, mode]``, ``["link", target, points_to]``;
    * ``["ro", target]``: remount a tmpfs read-only once filled.

    then ``pivot_root`` into it, detach the old root and remount ``/`` read-only."""
    machine = os.uname().machine
    if machine not in _PIVOT_ROOT_NR:
        raise OSError(f"pivot_root: no system call number known for this architecture ({machine})")
    sources = {}
    for step in steps:
        if step[0] == "bind" and step[1] not in sources:
            sources[step[1]] = os.open(step[1], os.O_PATH | os.O_CLOEXEC)
    new = _STAGING
    mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755,size=4m", libc)
    try:
        for step in steps:
            kind, target = step[0], new + (step[2] if step[0] == "bind" else step[1])
            if kind == "bind":
                _bind(sources[step[1]], target, step[3], libc)
            elif kind == "tmpfs":
                os.makedirs(target, exist_ok=True)
                mount("tmpfs", target, "tmpfs", step[2], step[3], libc)
            elif kind == "proc":
                os.makedirs(target, exist_ok=True)
                mount("proc", target, "proc", step[2], None, libc)
            elif kind == "devpts":
                os.makedirs(target, exist_ok=True)
                try:
                    mount("devpts", target, "devpts", step[2], step[3], libc)
                except OSError:
                    pass
            elif kind == "dir":
                os.makedirs(target, mode=step[2], exist_ok=True)
            elif kind == "file":
                os.makedirs(os.path.dirname(target), exist_ok=True)
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, step[3])
                with os.fdopen(fd, "w", encoding="utf-8") as handle:
                    handle.write(step[2])
            elif kind == "link":
                os.makedirs(os.path.dirname(target), exist_ok=True)
                os.symlink(step[2], target)
            elif kind == "ro":
                mount(None, target, None, _MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None, libc)
            else:
                raise OSError(f"unknown root step {kind!r}")
    finally:
        for fd in sources.values():
            os.close(fd)
    os.mkdir(f"{new}/{_OLD_ROOT}")
    if libc.syscall(ctypes.c_long(_PIVOT_ROOT_NR[machine]), os.fsencode(new), os.fsencode(f"{new}/{_OLD_ROOT}")) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pivot_root {new}: {os.strerror(err)}")
    os.chdir("/")
    umount("/" + _OLD_ROOT, MNT_DETACH, libc)
    os.rmdir("/" + _OLD_ROOT)
    mount(None, "/", None, _MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, None, libc)


def _bind(fd: int, target: str, flags: int, libc) -> None:
    if os.path.isdir(f"/proc/self/fd/{fd}"):
        os.makedirs(target, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if not os.path.lexists(target):
            os.close(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    mount(f"/proc/self/fd/{fd}", target, None, _MS_BIND, None, libc)
    kept = os.statvfs(target).f_flag
    flags |= sum(bit for st, bit in _KEPT.items() if kept & st)
    mount(None, target, None, _MS_REMOUNT | _MS_BIND | flags, None, libc)


def _loopback_up() -> None:
    """Bring ``lo`` up in the new network namespace (servers on 127.0.0.1 inside still work)."""
    import _socket  # the C module: ``socket`` costs milliseconds of imports per command
    import fcntl
    import struct

    try:
        sock = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        try:
            request = struct.pack("16sH22x", b"lo", 0)
            flags = struct.unpack("16sH22x", fcntl.ioctl(sock.fileno(), 0x8913, request))[1]  # SIOCGIFFLAGS
            fcntl.ioctl(sock.fileno(), 0x8914, struct.pack("16sH22x", b"lo", flags | 1))  # SIOCSIFFLAGS, IFF_UP
        finally:
            sock.close()
    except OSError:
        pass


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == LAUNCH_FLAG:
    try:
        launch(decode(sys.argv[2]))
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        message = f"icml26 sandbox setup failed: {type(exc).__name__}: {exc}\n"
        sys.stderr.write(message)
        try:
            status_fd = decode(sys.argv[2]).get("status_fd")
            if status_fd is not None:
                os.write(status_fd, message.encode("utf-8", "replace"))
        except (ValueError, EOFError, AttributeError, TypeError, OSError):
            pass
        sys.exit(SETUP_FAILED)
