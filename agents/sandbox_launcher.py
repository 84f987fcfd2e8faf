"""The sandbox's launcher: makes the namespaces, builds the command's root, and watches its deadline.

:class:`icml26.agents.sandbox.Sandbox` starts it as ``python -I -S sandbox_launcher.py --icml26-sandbox-launch
SPEC``. The launcher (the *warden*) calls ``unshare(2)`` for new mount, network, PID, IPC and UTS namespaces
(and a user namespace mapping the caller to root where the caller is not root), makes every mount private,
and forks the command's first process, PID 1 of the new PID namespace. That process joins the command's
cgroups, builds a new root from nothing following the ordered steps of ``spec["root"]`` (made by the
sandbox: which host folders to bind where, read-only or not, which tmpfs, which files to write),
``pivot_root``s into it and detaches the old root, brings up loopback, joins a fresh anonymous session
keyring, drops every capability, sets ``no_new_privs``, the rlimits and the seccomp filter
(``spec["seccomp"]``, a BPF program libseccomp made on the host: see
:mod:`icml26.agents.sandbox_seccomp`), reports on the status pipe that the command starts, and execs it.

The warden stays outside the PID namespace and holds the wall-clock deadline (``spec["deadline"]`` seconds):
past it, it kills PID 1, which ends every process of the namespace. So the limit holds without the host: a
host that is stopped or hung cannot leave a command running past its deadline. The warden also watches the
host (a pidfd): when the host dies it ends the command at once (PID 1 dies with the warden too:
``PR_SET_PDEATHSIG``). The warden exits as the command did
(its status, or the signal that ended it). A setup failure is written on the status pipe and ends the
process with :data:`SETUP_FAILED`.

Standard library only, and nothing of icml26: it runs in an isolated interpreter (``-I -S``) whose import
path may not reach the package (``tests/test_agents_sandbox.py`` checks what importing it loads).
"""

from __future__ import annotations

import ctypes
import marshal
import os
import sys

LAUNCH_FLAG = "--icml26-sandbox-launch"
SERVE_FLAG = "--icml26-sandbox-serve"
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


_CLONE_NEWNS, _CLONE_NEWUTS, _CLONE_NEWIPC = 0x00020000, 0x04000000, 0x08000000
_CLONE_NEWUSER, _CLONE_NEWPID, _CLONE_NEWNET = 0x10000000, 0x20000000, 0x40000000
_MS_PRIVATE = 1 << 18
_PR_SET_PDEATHSIG, _PR_SET_DUMPABLE, _PR_CAPBSET_DROP, _PR_SET_NO_NEW_PRIVS, _PR_CAP_AMBIENT = 1, 4, 24, 38, 47
_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 22, 2
_KEYCTL_JOIN_SESSION_KEYRING = 1
# keyctl(2) has no libc wrapper either
_KEYCTL_NR = {"x86_64": 250, "amd64": 250, "aarch64": 219, "arm64": 219, "riscv64": 219, "loongarch64": 219,
              "ppc64le": 288, "ppc64": 288, "s390x": 280, "i386": 288, "i686": 288, "armv7l": 311, "armv8l": 311}


def _prctl(libc, option, arg2=0):
    if libc.prctl(option, ctypes.c_ulong(arg2), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}, {arg2}): {os.strerror(err)}")


def launch(spec: dict) -> None:
    """The warden: new namespaces (``spec["isolate"]``, the default), the command's first process
    (:func:`_command`; :func:`_plain` without isolation), then the deadline and the host's life.
    Never returns: exits as the command did."""
    import select
    import time

    libc = _libc()
    # the host's life: a pidfd that turns readable when it dies, so the warden can end the command first
    # (a parent-death signal would kill the warden before it could; it is the fallback without pidfds).
    # A host that died before the watch began is gone already.
    host, host_fd, served = spec.get("parent"), None, spec.get("served", False)
    if host is not None:
        try:
            host_fd = os.pidfd_open(host)
        except ProcessLookupError:
            os._exit(SETUP_FAILED)
        except (AttributeError, OSError):
            if served:  # started by the server, not by the host: no parent-death signal can stand in
                raise OSError("cannot watch the host without pidfd_open") from None
            _prctl(libc, _PR_SET_PDEATHSIG, 9)
        if not served and os.getppid() != host:
            os._exit(SETUP_FAILED)
    status = spec.get("status_fd")
    isolate = spec.get("isolate", True)
    if isolate:
        uid, gid = os.getuid(), os.getgid()
        flags = _CLONE_NEWNS | _CLONE_NEWUTS | _CLONE_NEWIPC | _CLONE_NEWPID | _CLONE_NEWNET
        if spec.get("userns"):
            flags |= _CLONE_NEWUSER
        if libc.unshare(flags) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare: {os.strerror(err)}")
        if spec.get("userns"):  # what util-linux's `unshare --map-root-user` writes
            for name, text in (("setgroups", "deny"), ("uid_map", f"0 {uid} 1"), ("gid_map", f"0 {gid} 1")):
                with open(f"/proc/self/{name}", "w", encoding="ascii") as handle:
                    handle.write(text)
        # no mount made from here on may reach the host's mount namespace
        mount(None, "/", None, _MS_REC | _MS_PRIVATE, None, libc)
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        try:
            (_command if isolate else _plain)(spec, libc)
        except BaseException as exc:  # noqa: BLE001 - reported to the host, which decides
            _report_failure(exc, status)
        os._exit(SETUP_FAILED)
    # the warden keeps no end of the command's pipes: their readers see EOF when the command's processes end
    for fd in {1, spec.get("script_fd"), status} - {None}:
        os.close(fd)
    deadline = start + float(spec.get("deadline", 1e9))
    try:
        child = os.pidfd_open(pid)
    except (AttributeError, OSError):
        child = None
    watched = [fd for fd in (child, host_fd) if fd is not None]
    code = None
    while code is None:
        left = deadline - time.monotonic()
        ready = []
        if left > 0 and child is not None:
            ready = select.select(watched, [], [], left)[0]
            if child in ready:
                code = os.waitpid(pid, 0)[1]
        elif left > 0:  # no pidfds: poll
            time.sleep(min(left, 0.02))
            done, status_code = os.waitpid(pid, os.WNOHANG)
            code = status_code if done else None
        if code is None and (left <= 0 or host_fd in ready):  # past the deadline, or the host is gone
            _end(pid, spec, isolate)
    signum = os.WTERMSIG(code) if os.WIFSIGNALED(code) else 0
    _report(spec, f"signal {signum}" if signum else f"exit {os.WEXITSTATUS(code)}")
    if signum and not served:
        libc.signal(signum, ctypes.c_void_p(0))  # SIG_DFL: Python ignores SIGPIPE, for one
        os.kill(os.getpid(), signum)
    os._exit(_exit_code(code))


def _report(spec: dict, line: str) -> None:
    """Tell the host (on ``spec["report_fd"]``, when there is one) how the command ended."""
    fd = spec.get("report_fd")
    if fd is not None:
        try:
            os.write(fd, (line + "\n").encode())
        except OSError:
            pass


def _end(pid: int, spec: dict, isolate: bool) -> None:
    """Kill the command: PID 1 of its namespace (every process of the namespace goes with it), what is
    left in its cgroups, and (without isolation) its process group, this warden included."""
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
    for procs in spec.get("cgroup_procs", ()):
        try:
            with open(procs, encoding="ascii") as handle:
                pids = handle.read().split()
        except OSError:
            pids = []
        for other in pids:
            try:
                os.kill(int(other), 9)
            except (ProcessLookupError, PermissionError, ValueError):
                pass
    _report(spec, "deadline")
    if not isolate:
        os.killpg(0, 9)
    os._exit(137)


def _plain(spec: dict, libc) -> None:
    """Without isolation: the cgroups, the rlimits, exec (the warden still holds the deadline)."""
    _prctl(libc, _PR_SET_PDEATHSIG, 9)  # dies with the warden
    for path in spec.get("cgroup_procs", ()):
        with open(path, "w", encoding="ascii") as handle:
            handle.write("0")
    set_limits(spec.get("rlimits", {}))
    os.chdir(spec["cwd"])
    _exec(spec)


def _exit_code(status: int) -> int:
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


def _command(spec: dict, libc) -> None:
    """PID 1 of the new namespaces: the cgroups, the root, the keyring, no privileges, the filter, exec."""
    _prctl(libc, _PR_SET_PDEATHSIG, 9)  # dies with the warden, and the whole namespace with it
    for path in spec.get("cgroup_procs", ()):  # the command's cgroup, before anything else runs: "0" is this process
        with open(path, "w", encoding="ascii") as handle:
            handle.write("0")
    _build_root(spec["root"], libc)
    _loopback_up()
    libc.sethostname(b"sandbox", 7)
    machine = os.uname().machine
    if machine in _KEYCTL_NR:  # a keyring of its own: the caller's session keyring is out of reach
        libc.syscall(ctypes.c_long(_KEYCTL_NR[machine]), ctypes.c_long(_KEYCTL_JOIN_SESSION_KEYRING),
                     ctypes.c_void_p(0))
    # no way back: drop every capability, forbid gaining new ones
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):
        _prctl(libc, _PR_CAPBSET_DROP, cap)
    _prctl(libc, _PR_CAP_AMBIENT, 4)  # PR_CAP_AMBIENT_CLEAR_ALL
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()  # effective, permitted, inheritable (x2 words): all empty
    if libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset")
    _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1)
    set_limits(spec.get("rlimits", {}))
    os.chdir(spec["cwd"])
    program = spec.get("seccomp")
    if program:  # last: the filter refuses keyctl, which joining the keyring above needed
        _load_filter(program, libc)
    _exec(spec)


def _exec(spec: dict) -> None:
    if spec.get("report_fd") is not None:
        os.close(spec["report_fd"])  # the warden's alone
    status = spec.get("status_fd")
    if status is not None:
        os.write(status, STARTED.encode())
        os.close(status)  # the command cannot use it
    os.dup2(1, 2)  # the command's stderr joins its stdout; the launcher's own went to the machinery's pipe
    try:
        os.execvpe(spec["argv"][0], spec["argv"], spec.get("env", os.environ))
    except OSError as exc:
        raise OSError(exc.errno, f"cannot execute {spec['argv'][0]}: {exc.strerror}") from None


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _load_filter(program: bytes, libc) -> None:
    """Install ``program`` (a classic BPF program of 8-byte instructions, as ``seccomp_export_bpf`` writes
    it) as this process's seccomp filter; every process the command starts inherits it."""
    if len(program) % 8 or not 0 < len(program) // 8 < 65536:
        raise OSError(f"the seccomp program is {len(program)} bytes, not a whole number of instructions")
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    if libc.prctl(_PR_SET_SECCOMP, ctypes.c_ulong(_SECCOMP_MODE_FILTER), ctypes.byref(fprog),
                  ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp filter refused: {os.strerror(err)}")


def _report_failure(exc: BaseException, status_fd) -> None:
    message = f"icml26 sandbox setup failed: {type(exc).__name__}: {exc}\n"
    try:
        sys.stderr.write(message)
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    if status_fd is not None:
        try:
            os.write(status_fd, message.encode("utf-8", "replace"))
        except OSError:
            pass


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
    * ``["ro", target]``: remount a tmpfs read-only once filled;
    * ``["mask", target]``: hide ``target`` where it exists (``/dev/null`` bound over a file on a
      ``nodev`` mount, so opening it is refused; an empty read-only tmpfs over a folder), as container
      runtimes mask parts of ``/proc``.

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
            elif kind == "mask":  # hide a file or folder of /proc: an empty read-only view over it
                if os.path.isdir(target):
                    mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k", libc)
                elif os.path.exists(target):  # /dev/null, on a nodev mount: opening it is refused
                    mount(new + "/dev/null", target, None, _MS_BIND, None, libc)
                    mount(None, target, None, _MS_REMOUNT | _MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                          None, libc)
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


#: the descriptors a served warden gets, in this order, and where it puts them
SERVED_FDS = ("stdout", "stderr", "script_fd", "status_fd", "report_fd")
_SERVED_AT = (1, 2, 3, 4, 5)


def serve(sock_fd: int) -> None:
    """The launch server: one per host process, started once, so that a command costs a ``fork`` of this
    small process rather than the start of a new interpreter. It reads requests from the host on a
    ``SOCK_SEQPACKET`` socket (``sock_fd``): a marshalled spec and, as ``SCM_RIGHTS``, the descriptors of
    :data:`SERVED_FDS`; for each it forks a warden that runs :func:`launch` (which watches the host itself).
    It exits when the host closes the socket (the host died, or closed it)."""
    import signal
    import socket

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the kernel reaps the wardens
    sock = socket.socket(fileno=sock_fd)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1 << 22, len(SERVED_FDS))
        except InterruptedError:
            continue
        except OSError:
            break
        if not message:
            break
        if len(fds) != len(SERVED_FDS):
            for fd in fds:
                os.close(fd)
            continue
        if os.fork() == 0:
            status = None
            try:
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # the warden waits for its child
                sock.close()
                os.setsid()  # the host ends a warden and its command by this process group
                _arrange(fds)
                spec = marshal.loads(message)
                spec.update(script_fd=3, status_fd=4, report_fd=5, served=True)
                status = 4
                os.write(5, f"pid {os.getpid()}\n".encode())
                launch(spec)
            except BaseException as exc:  # noqa: BLE001 - reported to the host, which decides
                _report_failure(exc, status)
                _report({"report_fd": 5}, f"exit {SETUP_FAILED}")
            os._exit(SETUP_FAILED)
        for fd in fds:
            os.close(fd)
    os._exit(0)


def _arrange(fds: list[int]) -> None:
    """Put ``fds`` at descriptors 1 to 5 (see :data:`SERVED_FDS`) and close every other one but 0."""
    import fcntl

    high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
    keep = set(_SERVED_AT) | {0}
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) not in keep and int(fd) not in high:
            try:
                os.close(int(fd))
            except OSError:
                pass
    for fd, target in zip(high, _SERVED_AT):
        os.dup2(fd, target)
        os.close(fd)


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == SERVE_FLAG:
    serve(int(sys.argv[2]))

if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == LAUNCH_FLAG:
    try:
        _spec = decode(sys.argv[2])
        launch(_spec)
    except Exception as exc:  # noqa: BLE001 - reported to the parent, which decides
        try:
            _status = decode(sys.argv[2]).get("status_fd")
        except (ValueError, EOFError, AttributeError, TypeError):
            _status = None
        _report_failure(exc, _status)
        sys.exit(SETUP_FAILED)
