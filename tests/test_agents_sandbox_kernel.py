"""The kernel's shared parts and limits that must not need the host: attacks with host-side witnesses.

Each attack runs the way SERA's tools run commands (``ToolExecutor`` -> ``bash``, or ``Sandbox.run``) and
is checked from the host: a vsock port the host binds, a key in the caller's session keyring and in
root's user keyring, the processes, cgroups and mounts a killed or stopped host leaves. Where the same
attack works without the filter (an unisolated sandbox: the negative control), the test shows it, so a
witness that cannot see the attack would fail. Everything a test plants it removes (keys are
invalidated, ports closed, processes killed).
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from orphans import processes_with

from icml26.agents.sandbox import Sandbox, isolation_support
from icml26.agents.toolcalls import ToolCall
from icml26.agents.tools import ToolExecutor

_MODE, _REASON = isolation_support()
pytestmark = pytest.mark.skipif(_MODE is None, reason=f"no namespace isolation here: {_REASON}")

_LIBC = ctypes.CDLL(None, use_errno=True)
_KEY_SPEC_SESSION, _KEY_SPEC_USER = -3, -4
_KEYCTL_SEARCH, _KEYCTL_READ, _KEYCTL_INVALIDATE = 10, 11, 21


def _nr(name: str) -> int:
    import pyseccomp

    return pyseccomp.resolve_syscall(pyseccomp.Arch.NATIVE, name)


def _keyctl(*args) -> int:
    return _LIBC.syscall(ctypes.c_long(_nr("keyctl")), *[ctypes.c_long(a) if isinstance(a, int) else a for a in args])


def _add_key(description: str, payload: bytes, keyring: int) -> int:
    serial = _LIBC.syscall(ctypes.c_long(_nr("add_key")), b"user", description.encode(), payload,
                           ctypes.c_size_t(len(payload)), ctypes.c_long(keyring))
    if serial < 0:
        pytest.skip(f"the kernel keeps no keys here: {os.strerror(ctypes.get_errno())}")
    return serial


def _search(keyring: int, description: str) -> int:
    """The serial of a ``user`` key called ``description`` reachable from ``keyring``, or -errno."""
    found = _keyctl(_KEYCTL_SEARCH, keyring, b"user", description.encode(), 0)
    return found if found >= 0 else -ctypes.get_errno()


def bash(box: Sandbox, command: str) -> str:
    return ToolExecutor(box).execute(ToolCall(id="attack", name="bash", arguments={"command": command}, raw=""))


@pytest.fixture
def repo(tmp_path, make_git_repo):
    return make_git_repo(tmp_path / "project", {"mod.py": "x = 1\n"})


@pytest.fixture
def box(repo):
    with Sandbox(repo, time_limit=20, memory_limit_mb=512) as sandbox:
        yield sandbox


#: each refused call, made from Python inside (ctypes), and the errno the filter answers with
_PROBE = r"""
import ctypes, json, os, socket, sys
libc = ctypes.CDLL(None, use_errno=True)
numbers = json.loads(sys.argv[1])
def call(name, *args):
    result = libc.syscall(ctypes.c_long(numbers[name]), *[ctypes.c_long(a) for a in args])
    return "ok" if result >= 0 else os.strerror(ctypes.get_errno())
out = {}
try:
    socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
    out["vsock"] = "ok"
except OSError as exc:
    out["vsock"] = os.strerror(exc.errno)
out["add_key"] = call("add_key", 0, 0, 0, 0, -4)
out["keyctl"] = call("keyctl", 0, -3, 0)
out["request_key"] = call("request_key", 0, 0, 0, 0)
out["io_uring_setup"] = call("io_uring_setup", 1, 0)
out["io_uring_enter"] = call("io_uring_enter", -1, 0, 0, 0, 0, 0)
out["io_uring_register"] = call("io_uring_register", -1, 0, 0, 0)
out["userfaultfd"] = call("userfaultfd", 0)
out["bpf"] = call("bpf", 0, 0, 0)
out["perf_event_open"] = call("perf_event_open", 0, 0, -1, -1, 0)
out["kexec_load"] = call("kexec_load", 0, 0, 0, 0)
out["kexec_file_load"] = call("kexec_file_load", -1, -1, 0, 0, 0)
out["unshare_user"] = call("unshare", 0x10000000)
out["clone_user"] = call("clone", 0x10000000 | 17, 0, 0, 0, 0)
out["clone3"] = call("clone3", 0, 0)
print(json.dumps(out))
"""
_NAMES = ["add_key", "keyctl", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register", "userfaultfd",
          "bpf", "perf_event_open", "kexec_load", "kexec_file_load", "unshare", "clone", "clone3"]
_EPERM, _ENOSYS, _EAFNOSUPPORT = (os.strerror(e) for e in (errno.EPERM, errno.ENOSYS, errno.EAFNOSUPPORT))


def _probe(box: Sandbox) -> dict:
    numbers = {name: _nr(name) for name in _NAMES}
    result = box.run_python(_PROBE, args=[json.dumps(numbers)])
    assert result.returncode == 0, result.output
    return json.loads(result.output.strip().splitlines()[-1])


def test_refused_system_calls_fail_with_a_readable_errno(box, repo):
    seen = _probe(box)
    expected = dict.fromkeys(seen, _EPERM)
    expected.update(vsock=_EAFNOSUPPORT, clone3=_ENOSYS)
    assert seen == expected, seen
    # the negative control: without the filter the same calls get other answers (the probe can see it)
    with Sandbox(repo, isolation="none", allow_unisolated=True) as plain:
        unfiltered = _probe(plain)
    assert unfiltered["vsock"] != _EAFNOSUPPORT and unfiltered["clone3"] != _ENOSYS, unfiltered
    assert unfiltered["io_uring_setup"] != _EPERM and unfiltered["keyctl"] != _EPERM, unfiltered


def test_no_nested_user_namespace_from_a_shell(box):
    out = bash(box, "unshare --user --map-root-user true && echo NESTED; echo done")
    assert "NESTED" not in out and "done" in out, out


def test_a_host_vsock_port_stays_bindable_while_a_sandbox_runs(box):
    port = 20000 + secrets.randbelow(20000)
    try:
        host_socket = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
    except OSError as exc:
        pytest.skip(f"no vsock on this host: {exc}")
    with host_socket:
        # the command would take the port (and keep it) if it could open a vsock socket
        grab = (f"python3 -c 'import socket, time\ns = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n"
                f"s.bind((socket.VMADDR_CID_ANY, {port})); s.listen(); print(\"BOUND\", flush=True); time.sleep(3)' "
                "2>&1 | tail -1")
        out = bash(box, grab)
        assert "BOUND" not in out and "Address family not supported" in out, out
        host_socket.bind((socket.VMADDR_CID_ANY, port))  # EADDRINUSE if the sandbox shared the port space


def test_the_callers_session_secret_is_out_of_reach(box, token=None):
    description, secret = f"icml26-session-{secrets.token_hex(4)}", secrets.token_hex(16)
    serial = _add_key(description, secret.encode(), _KEY_SPEC_SESSION)
    try:
        assert _search(_KEY_SPEC_SESSION, description) == serial  # the witness: the host finds it
        out = bash(box, f"cat /proc/keys 2>&1; grep -r {description} /proc/keys 2>&1; "
                        f"python3 -c 'import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                        f"r = libc.syscall({_nr('keyctl')}, {_KEYCTL_READ}, {serial}, 0, 0)\n"
                        f"print(\"READ\", r, os.strerror(ctypes.get_errno()))'")
        assert secret not in out and description not in out, out
        assert "READ -1 Operation not permitted" in out, out
    finally:
        _keyctl(_KEYCTL_INVALIDATE, serial)


def test_a_key_planted_from_inside_never_reaches_the_host(repo):
    description = f"icml26-planted-{secrets.token_hex(4)}"
    plant = (f"python3 -c 'import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n"
             f"r = libc.syscall({_nr('add_key')}, b\"user\", b\"{description}\", b\"x\", 1, {_KEY_SPEC_USER})\n"
             f"print(\"ADD\", r, os.strerror(ctypes.get_errno()))'")
    with Sandbox(repo, time_limit=20) as box:
        out = bash(box, plant)
    assert "ADD -1 Operation not permitted" in out, out
    assert _search(_KEY_SPEC_USER, description) == -errno.ENOKEY
    with Sandbox(repo, time_limit=20) as later:  # and the next sandbox does not see one either
        assert "ENOKEY" in bash(later, f"python3 -c 'import ctypes, errno\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                       f"r = libc.syscall({_nr('keyctl')}, {_KEYCTL_SEARCH}, {_KEY_SPEC_USER}, b\"user\", "
                                       f"b\"{description}\", 0)\nprint(\"ENOKEY\" if r < 0 else \"FOUND\")'")
    # the negative control: unfiltered, the same command plants it (then it is removed again)
    with Sandbox(repo, isolation="none", allow_unisolated=True) as plain:
        out = plain.run(plant).output
    planted = _search(_KEY_SPEC_USER, description)
    if planted > 0:
        _keyctl(_KEYCTL_INVALIDATE, planted)
    assert planted > 0, out


# ---------------------------------------------------------------------------------------------------
# limits that do not need the host


_HOST = """
import sys
from icml26.agents.sandbox import Sandbox
box = Sandbox({repo!r}, time_limit={limit})
print(box.limits["memory"].mechanism, flush=True)
sys.stdout.write("ready\\n"); sys.stdout.flush()
box.run("exec -a {marker} sleep 90")
"""


def _with(marker: str) -> list[int]:
    return processes_with(marker, at_start=True)


def _leftovers(pid: int) -> dict[str, list[str]]:
    """The per-command cgroups named after ``pid`` and the size-capped mounts it stamped."""
    from icml26.agents import sandbox_limits

    groups = []
    for _, parent in sandbox_limits.cgroup_support().values():
        groups += [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(f"icml26-sandbox-{pid}-")]
    mounts = []
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            point = line.split()[4]
            owner = Path(point).parent / "owner"
            if point.endswith("/space") and owner.exists() and owner.read_text().split()[:1] == [str(pid)]:
                mounts.append(point)
    return {"cgroups": sorted(set(groups)), "mounts": mounts}


def _start_host(repo, limit: float):
    marker = f"icml26-{secrets.token_hex(5)}"
    host = subprocess.Popen([sys.executable, "-c", _HOST.format(repo=str(repo), limit=limit, marker=marker)],
                            stdout=subprocess.PIPE, text=True)
    assert host.stdout.readline() and host.stdout.readline() == "ready\n"
    start = time.monotonic()
    while not _with(marker):
        assert time.monotonic() - start < 10, "the command did not start"
        time.sleep(0.05)
    return host, marker, start


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSTOP"])
def test_a_command_ends_by_its_deadline_whatever_happens_to_the_host(repo, how):
    """kill -9 of the host 3 s into `sleep 90` with a 5 s limit: 0 processes by the deadline plus 1 s.
    A stopped host (SIGSTOP: alive, so no parent-death signal) too: the launcher holds the deadline."""
    host, marker, start = _start_host(repo, limit=5)
    try:
        time.sleep(max(0.0, 3 - (time.monotonic() - start)))
        assert _with(marker), "the witness: the command runs before the host goes"
        os.kill(host.pid, getattr(signal, how))
        while _with(marker) and time.monotonic() - start < 5 + 1:
            time.sleep(0.05)
        assert _with(marker) == [], f"the command outlived its deadline with the host {how}ed"
    finally:
        for pid in _with(marker):
            os.kill(pid, signal.SIGKILL)
        host.kill()
        host.wait()
        host.stdout.close()
    if how == "SIGKILL":
        left = _leftovers(host.pid)
        if os.geteuid() == 0:
            assert left["mounts"], "the witness: a killed host leaves its size-capped mount"
        assert left["cgroups"] or not Sandbox(repo)._cgroups, "the witness: a killed host leaves its cgroups"
        Sandbox(repo).close()  # the next sandbox reaps what dead owners left
        assert _leftovers(host.pid) == {"cgroups": [], "mounts": []}


def test_extra_read_only_folders_with_sockets_or_fifos_are_refused(tmp_path):
    shared = tmp_path / "shared"
    (shared / "deep").mkdir(parents=True)
    (shared / "data.txt").write_text("ok")
    Sandbox(extra_ro_paths=[str(shared)]).close()  # a plain folder is fine
    os.mkfifo(shared / "deep" / "pipe")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(shared / "control.sock"))
    try:
        with pytest.raises(ValueError, match="extra_ro_paths: expected folders without sockets or FIFOs") as caught:
            Sandbox(extra_ro_paths=[str(shared)])
        assert "control.sock (a socket)" in str(caught.value) and "pipe (a FIFO)" in str(caught.value)
    finally:
        server.close()


def test_a_megabyte_heredoc_runs(box):
    body = "".join(f"line {i:07d} " + "x" * 88 + "\n" for i in range(10_000))
    result = box.run(f"cat > big.txt <<'EOF'\n{body}EOF\nwc -c < big.txt; tail -1 big.txt | cut -c1-12")
    assert result.returncode == 0 and result.output.split("\n")[:2] == [str(len(body)), "line 0009999"], result.output
    assert (box.root / "big.txt").read_text() == body


def test_a_nul_byte_in_a_command_is_refused_before_it_runs(box):
    with pytest.raises(ValueError, match="Sandbox.run: command: expected a bash command without NUL bytes"):
        box.run("echo a\0; touch ran")
    assert not (box.root / "ran").exists()
