"""Attacks on the sandbox, run the way SERA's tools run commands (``ToolExecutor`` -> ``bash``).

Each test plants something on the host (a server that logs connections, a canary file whose
content is checked afterwards, a sacrificial process) and asserts the host-side witness: nothing
reached the host. Everything a test creates it removes; nothing touches existing host devices,
sockets or files (the loop device is one the test attaches to its own small file), memory probes
stay at a few hundred MiB against a small limit, and the process-count probe is bounded and runs
only when the whole-command process limit is in force. Where the kernel refuses a feature the
test is skipped with the reason, never passed silently.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from icml26.agents.sandbox import Sandbox, isolation_support
from icml26.agents.toolcalls import ToolCall
from icml26.agents.tools import ToolExecutor

_PREFIX, _REASON = isolation_support()
pytestmark = pytest.mark.skipif(_PREFIX is None, reason=f"no namespace isolation here: {_REASON}")
REPO_CHECKOUT = Path(__file__).resolve().parents[1]


def bash(box: Sandbox, command: str) -> str:
    """The observation SERA's agent would get for ``command``."""
    return ToolExecutor(box).execute(ToolCall(id="attack", name="bash", arguments={"command": command}, raw=""))


def edit(box: Sandbox, **arguments) -> str:
    return ToolExecutor(box).execute(ToolCall(id="attack", name="str_replace_editor", arguments=arguments, raw=""))


@pytest.fixture
def token():
    return "icml26-attack-" + secrets.token_hex(6)


@pytest.fixture
def secret():
    """Content no output may show (paths may carry ``token``; contents carry this)."""
    return "icml26-secret-" + secrets.token_hex(8)


@pytest.fixture
def host_dir(token):
    """A host folder outside /tmp (which every sandbox replaces) for sockets, FIFOs and canaries."""
    for base in ("/run", str(Path.home()), "/var/tmp"):
        try:
            folder = Path(tempfile.mkdtemp(prefix=token + "-", dir=base))
        except OSError:
            continue
        folder.chmod(0o755)
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
        return
    pytest.skip("no writable host folder outside /tmp for the witnesses")


@pytest.fixture
def repo(tmp_path, make_git_repo):
    return make_git_repo(tmp_path / "project", {"pkg/mod.py": "def f():\n    return 1\n", "README": "readme\n"})


@pytest.fixture
def box(repo):
    with Sandbox(repo, time_limit=20, memory_limit_mb=512) as sandbox:
        yield sandbox


class Server(threading.Thread):
    """A host server that logs every connection (stream) or datagram it gets."""

    def __init__(self, family, kind, address):
        super().__init__(daemon=True)
        self.sock = socket.socket(family, kind)
        if family != socket.AF_UNIX:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(address)
        self.address = self.sock.getsockname() if family != socket.AF_UNIX else address
        if kind == socket.SOCK_STREAM:
            self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.kind, self.family, self.hits, self.stopped = kind, family, [], False
        self.start()

    def run(self):
        while not self.stopped:
            try:
                if self.kind == socket.SOCK_STREAM:
                    conn, peer = self.sock.accept()
                    self.hits.append(peer)
                    conn.close()
                else:
                    self.hits.append(self.sock.recvfrom(4096))
            except (TimeoutError, OSError):
                continue

    def probe_from_host(self):
        """Check the witness works (the host itself reaches it), then forget that hit."""
        with socket.socket(self.family, self.kind) as client:
            client.settimeout(3)
            client.connect(self.address)
            if self.kind == socket.SOCK_DGRAM:
                client.send(b"host")
        deadline = time.monotonic() + 3
        while not self.hits and time.monotonic() < deadline:
            time.sleep(0.01)
        assert self.hits, "the host could not reach its own witness server"
        self.hits.clear()

    def close(self):
        self.stopped = True
        self.join(2)
        self.sock.close()


CONNECT = """import socket, sys
for spec in sys.argv[1:]:
    family, kind, address = spec.split('|', 2)
    fam = getattr(socket, family)
    addr = address if fam == socket.AF_UNIX else (address.rsplit(':', 1)[0], int(address.rsplit(':', 1)[1]))
    if address.startswith('@'):
        addr = '\\0' + address[1:]
    try:
        s = socket.socket(fam, getattr(socket, kind)); s.settimeout(3)
        s.connect(addr)
        if kind == 'SOCK_DGRAM':
            s.send(b'pwned'); s.send(b'pwned')
        print('CONNECTED', spec)
    except OSError as exc:
        print('refused', spec, exc.errno)
"""


def connect_all(box, specs: list[str]) -> str:
    quoted = " ".join(f"'{s}'" for s in specs)
    return bash(box, f"cat > ~/c.py <<'EOF'\n{CONNECT}\nEOF\npython ~/c.py {quoted}")


class Tree(threading.Thread):
    """Samples the processes below this test process (host /proc): peak count and peak private memory."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peak_count = self.peak_rss = 0
        self.stopped = False
        self.before = self.snapshot()[2]  # processes of earlier tests (a server fixture...) do not count
        self.start()

    @staticmethod
    def snapshot(ignore=frozenset()):
        """``(count, private memory, pids)`` of the sandboxed process trees: the children of this process
        running ``unshare`` and everything below them (other children, a server an earlier test left, its
        forks, do not count)."""
        parent, rss, command = {}, {}, {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as handle:
                    fields = handle.read().rsplit(b")", 1)[1].split()
                with open(f"/proc/{name}/statm", "rb") as handle:
                    pages = handle.read().split()
                command[int(name)] = Path(f"/proc/{name}/cmdline").read_bytes()
            except OSError:
                continue
            parent[int(name)] = int(fields[1])
            # private memory (resident minus shared pages): what the process alone holds
            rss[int(name)] = (int(pages[1]) - int(pages[2])) * os.sysconf("SC_PAGE_SIZE")
        me = os.getpid()
        below = {pid for pid, ppid in parent.items() if ppid == me and b"unshare" in command[pid].split(b"\0")[0]}
        changed = True
        while changed:
            changed = False
            for pid, ppid in parent.items():
                if pid not in below and ppid in below:
                    below.add(pid)
                    changed = True
        below -= ignore
        return len(below), sum(rss[p] for p in below), frozenset(below)

    def run(self):
        while not self.stopped:
            count, rss, _ = self.snapshot(self.before)
            self.peak_count, self.peak_rss = max(self.peak_count, count), max(self.peak_rss, rss)
            time.sleep(0.02)

    def stop(self):
        self.stopped = True
        self.join(2)


def whole_command(box, name: str) -> None:
    limit = box.limits[name]
    if limit.scope != "command":
        pytest.skip(f"no whole-command {name} limit on this machine ({limit.mechanism}): {limit.note}")


# ---------------------------------------------------------------------------------------------------
# E1-E4 and reads: what the command can see of the host


def test_e1_unix_socket_on_a_host_folder(box, host_dir):
    server = Server(socket.AF_UNIX, socket.SOCK_STREAM, str(host_dir / "host.sock"))
    try:
        server.probe_from_host()
        out = connect_all(box, [f"AF_UNIX|SOCK_STREAM|{host_dir}/host.sock"]) + bash(box, "ls -A /run")
    finally:
        server.close()
    assert server.hits == [], out  # host-side witness: no connection reached the server
    assert "\nCONNECTED" not in "\n" + out and "cannot access '/run'" in out, out


def _attach_loop(backing: Path) -> str:
    if shutil.which("losetup") is None:
        pytest.skip("losetup is not installed: no loop device for the block-device attack")
    proc = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, timeout=30)
    if proc.returncode != 0 or not proc.stdout.strip().startswith("/dev/loop"):
        pytest.skip(f"the kernel refused a loop device (losetup: {proc.stderr.strip() or proc.returncode})")
    return proc.stdout.strip()


def test_e2_block_device_of_the_host(box, tmp_path):
    backing = tmp_path / "disk.img"
    canary = (b"CANARY" * 1000)[:4096] * 256  # 1 MiB
    backing.write_bytes(canary)
    device = _attach_loop(backing)  # our own device, on our own file
    try:
        minor = os.minor(os.stat(device).st_rdev)
        out = bash(box, f"printf pwned | dd of={device} conv=notrunc,fsync 2>&1; "
                        f"mknod /tmp/blk b 7 {minor} && printf pwned | dd of=/tmp/blk conv=notrunc,fsync 2>&1; "
                        "ls -A /dev | tr '\\n' ' '")
    finally:
        subprocess.run(["losetup", "--detach", device], capture_output=True, timeout=30)
    assert backing.read_bytes() == canary, out  # host-side witness: the backing file is untouched
    shown = set(out.strip().splitlines()[-1].split())
    assert shown <= {"null", "zero", "full", "random", "urandom", "tty", "pts", "ptmx", "shm", "fd", "stdin",
                     "stdout", "stderr"}, out
    assert os.path.basename(device) not in shown, out


def _kmsg_reader():
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return None, str(exc)
    os.lseek(fd, 0, os.SEEK_END)
    return fd, ""


def _kmsg_new(fd) -> str:
    records = []
    while True:
        try:
            records.append(os.read(fd, 8192).decode("utf-8", "replace"))
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno == errno.EPIPE:  # a record was overwritten while reading: keep going
                continue
            break
    return "".join(records)


def test_e3_host_fifo_and_kernel_log(box, host_dir, token):
    fifo = host_dir / "host.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # a host reader waiting on the FIFO
    kmsg, why = _kmsg_reader()
    try:
        out = bash(box, f"timeout 3 sh -c 'echo {token} > {fifo}'; echo rc=$?; "
                        f"echo {token} > /dev/kmsg; echo rc=$?")
        time.sleep(0.2)
        try:
            got = os.read(reader, 4096)
        except BlockingIOError:
            got = b""
        logged = "" if kmsg is None else _kmsg_new(kmsg)
    finally:
        os.close(reader)
        if kmsg is not None:
            os.close(kmsg)
    assert token.encode() not in got, out  # host-side witnesses: nothing arrived on the FIFO...
    assert token not in logged, out  # ...nor in the kernel log
    assert "rc=0" not in out, out
    if kmsg is None:
        pytest.skip(f"the FIFO holds; /dev/kmsg cannot be read on the host to witness the log ({why})")


def test_e4_folder_on_sys_path_under_tmp(repo, monkeypatch, token, secret):
    base = Path(tempfile.mkdtemp(prefix=token + "-syspath-", dir="/tmp"))
    try:
        (base / "lib").mkdir()
        (base / "lib" / "inside.txt").write_text(f"lib-{secret}\n")
        (base / "secret.txt").write_text(f"beside-{secret}\n")
        monkeypatch.syspath_prepend(str(base / "lib"))
        server = Server(socket.AF_UNIX, socket.SOCK_STREAM, str(base / "lib" / "s.sock"))
        try:
            server.probe_from_host()
            with Sandbox(repo, time_limit=20) as box:
                out = bash(box, f"ls -A {base} {base}/lib; cat {base}/secret.txt {base}/lib/inside.txt") + \
                    connect_all(box, [f"AF_UNIX|SOCK_STREAM|{base}/lib/s.sock"]) + bash(box, "python -c 'print(6*7)'")
        finally:
            server.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert server.hits == [], out
    assert secret not in out and "\nCONNECTED" not in "\n" + out, out
    assert "42" in out, out  # the Python that runs commands still works


def test_root_only_files_and_other_checkouts_are_invisible(box, token, secret):
    key = Path.home() / f".{token}-key"
    key.write_text(f"{secret}\n")
    key.chmod(0o600)
    try:
        out = bash(box, f"cat {key}; ls -A {Path.home()}; cat {REPO_CHECKOUT}/pyproject.toml; "
                        f"ls -A {REPO_CHECKOUT.parent}; cat /etc/shadow; ls -A /home /mnt /media /srv /run /opt /var; "
                        "ls -A /")
    finally:
        key.unlink()
    assert secret not in out, out
    assert "[project]" not in out and "build-system" not in out, out
    top = set(out.strip().splitlines()[-1].split()) if "\n" in out.strip() else set()
    allowed = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "tmp", "var",
               "testbed", ".sandbox", "root", "work", "opt", "home"}
    visible = {p.split("/")[1] for p in {sys.base_prefix, sys.prefix} if p.count("/") >= 1}
    assert REPO_CHECKOUT.name not in out.strip().splitlines()[-1], out
    assert top and top <= allowed | visible, out


# ---------------------------------------------------------------------------------------------------
# E5: limits on the whole command


def test_e5_memory_of_all_processes_together(repo):
    with Sandbox(repo, time_limit=30, memory_limit_mb=192) as box:
        whole_command(box, "memory")
        tree = Tree()
        try:  # 8 x 50 MiB touched = 400 MiB, each far below the limit alone
            out = bash(box, "for i in $(seq 8); do python -c \"import time; b = b'x' * (50 << 20); "
                            "print('held', flush=True); time.sleep(3)\" & done; wait")
        finally:
            tree.stop()
    assert tree.peak_rss < (192 + 64) << 20, (tree.peak_rss >> 20, out)  # host-side witness
    assert "memory limit of 192 MB" in out, out


def test_e5_fork_bomb_is_bounded(repo):
    with Sandbox(repo, time_limit=30, pids_limit=48) as box:
        whole_command(box, "pids")
        tree = Tree()
        try:  # bounded: at most 300 sleeps, ended at the limit
            start = time.monotonic()
            out = bash(box, "for i in $(seq 300); do sleep 5 & done 2>/dev/null; wait")
            took = time.monotonic() - start
        finally:
            tree.stop()
    assert tree.peak_count <= 48 + 2, (tree.peak_count, out)  # host-side witness
    assert "process limit" in out and took < 5, out


def test_e5_disk_written_into_the_scratch_copy(repo):
    with Sandbox(repo, time_limit=30, disk_limit_mb=32) as box:
        whole_command(box, "disk")
        out = bash(box, "dd if=/dev/zero of=big bs=1M count=64 2>&1; echo more > more.txt")
        used = sum(os.lstat(os.path.join(d, f)).st_blocks * 512 for d, _, files in os.walk(box.root) for f in files)
        after = bash(box, "rm big && echo freed > small.txt && cat small.txt")  # the agent can clean up
    assert used <= 33 << 20, (used >> 20, out)  # host-side witness: what landed in the copy
    assert "disk limit" in out, out
    assert after.strip() == "freed", after


# ---------------------------------------------------------------------------------------------------
# attacks that already held: they must keep holding


def test_no_network_tcp_udp_ipv6_abstract_dns(box, token):
    servers = [Server(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", 0)),
               Server(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 0)),
               Server(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + token)]
    try:
        servers.append(Server(socket.AF_INET6, socket.SOCK_STREAM, ("::1", 0)))
    except OSError:
        pass  # no IPv6 loopback on the host: nothing to reach
    try:
        for server in servers:
            server.probe_from_host()
        specs = [f"AF_INET|SOCK_STREAM|127.0.0.1:{servers[0].address[1]}",
                 f"AF_INET|SOCK_DGRAM|127.0.0.1:{servers[1].address[1]}", f"AF_UNIX|SOCK_STREAM|@{token}"]
        if len(servers) > 3:
            specs.append(f"AF_INET6|SOCK_STREAM|::1:{servers[3].address[1]}")
        out = connect_all(box, specs) + bash(box, "getent hosts example.com || echo no-dns; "
                                                  "python -c \"import socket; socket.getaddrinfo('example.com', 80)\"")
        time.sleep(0.3)
    finally:
        for server in servers:
            server.close()
    assert [s.hits for s in servers] == [[]] * len(servers), out  # host-side witnesses
    assert "no-dns" in out and "gaierror" in out, out


def test_writes_outside_do_not_reach_the_host(box, repo, host_dir, token):
    canaries = [Path.home() / f".{token}-canary", Path(tempfile.gettempdir()) / f"{token}-canary",
                host_dir / "canary", repo / "README"]
    for path in canaries[:3]:
        path.write_text("canary\n")
    before = {path: path.read_text() for path in canaries}
    try:
        attacks = []
        for i, path in enumerate(canaries):
            attacks += [f"echo pwned > {path}", f"ln -s {path} link{i} && echo pwned > link{i}",
                        f"ln {path} hard{i} && echo pwned > hard{i}", f"echo pwned > /proc/self/root{path}",
                        f"echo pwned > /proc/1/root{path}", f"echo pwned > /proc/1/cwd/../../..{path}"]
        out = bash(box, "; ".join(f"({a}) 2>/dev/null" for a in attacks))
        out += edit(box, command="str_replace", path="/testbed/link0", old_str="canary", new_str="pwned")
        out += edit(box, command="view", path="/testbed/link1")
        after = {path: path.read_text() for path in canaries}
    finally:
        for path in canaries[:3]:
            path.unlink(missing_ok=True)
    assert after == before, out  # host-side witness: every canary intact
    assert "outside the repository" in out, out


def test_remount_and_nested_user_namespaces(box, token):
    def host_mounts():
        with open("/proc/self/mountinfo") as handle:
            return [line for line in handle if token in line or "/usr" == line.split()[4]]

    hostname = socket.gethostname()
    before = host_mounts()
    out = bash(box, f"mount -o remount,rw /usr; mount -t tmpfs {token} /mnt; umount -l /testbed; umount -l /etc; "
                    f"unshare -Urm sh -c 'mount -o remount,rw,bind /usr; touch /usr/{token}; "
                    f"mount -t tmpfs {token} /usr' ; "
                    f"unshare -Urmpf --mount-proc sh -c 'echo {hostname} > /proc/sys/kernel/hostname; "
                    "mount -t sysfs s /sys 2>&1; ls /sys | head -3'; echo done")
    assert host_mounts() == before, out  # host-side witness: the host's mount table
    assert not Path(f"/usr/{token}").exists() and socket.gethostname() == hostname, out
    assert "done" in out, out


def test_git_hooks_and_fsmonitor_for_the_hosts_git(box, host_dir):
    witness = host_dir / "hook-ran"
    hook = f"#!/bin/sh\ntouch {witness}\n"
    out = bash(box, f"""mkdir -p .git/hooks sub
for h in pre-commit post-checkout post-commit pre-auto-gc reference-transaction post-index-change fsmonitor-watchman; do
  printf '{hook}' > .git/hooks/$h; chmod +x .git/hooks/$h; done
printf '[core]\\n\\tfsmonitor = touch {witness}\\n\\thooksPath = .git/hooks\\n' > .git/config
echo 'ref: refs/heads/main' > .git/HEAD; mkdir -p .git/objects .git/refs
git config core.fsmonitor 'touch {witness}'; echo rc=$?
printf '* filter=pwn\\n' > .gitattributes
printf 'gitdir: {host_dir}\\n' > sub/.git
echo change >> README""")
    executor = ToolExecutor(box)
    submitted = executor.execute(ToolCall(id="s", name="submit", arguments={}, raw=""))
    box.diff()
    box.reset()
    assert not witness.exists(), (out, submitted)  # host-side witness: no hook or monitor ran on the host
    assert "fsmonitor" not in (box.git_dir / "config").read_text()
    assert not (box.root / ".git").exists() and not (box.root / "sub").exists()


def test_daemons_do_not_outlive_the_call(box, token):
    out = bash(box, f"(setsid bash -c 'exec -a {token}-a sleep 300' &); "
                    f"nohup bash -c 'exec -a {token}-b sleep 300' >/dev/null 2>&1 & "
                    f"python -c \"import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
                    f"        os.execvp('bash', ['bash', '-c', 'exec -a {token}-c sleep 300'])\n\"; "
                    "sleep 0.3; echo started")

    def alive():
        found = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            try:
                if token.encode() in Path(f"/proc/{name}/cmdline").read_bytes():
                    found.append(name)
            except OSError:
                pass
        return found

    deadline = time.monotonic() + 3
    while alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "started" in out, out
    assert alive() == [], out  # host-side witness: no process of the command is left


def test_cannot_kill_signal_or_ptrace_host_processes(box):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        out = bash(box, f"kill -9 {victim.pid} {os.getpid()}; echo rc=$?; "
                        f"python -c \"import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
                        f"print('ptrace', libc.ptrace(16, {victim.pid}, 0, 0), ctypes.get_errno())\"; "
                        f"cat /proc/{victim.pid}/status 2>&1 | head -2; echo done; kill -9 $PPID 1")
        time.sleep(0.2)
        assert victim.poll() is None, out  # host-side witness: the victim lives...
        tracer = [line for line in Path(f"/proc/{victim.pid}/status").read_text().splitlines()
                  if line.startswith("TracerPid")]
        assert tracer == ["TracerPid:\t0"], out  # ...untraced
        assert "ptrace -1" in out and "done" in out, out
    finally:
        victim.kill()
        victim.wait()


def test_host_environment_is_not_visible(box, monkeypatch, token):
    monkeypatch.setenv("ICML26_ATTACK_SECRET", token)  # only the environment carries it
    out = bash(box, "env; cat /proc/1/environ /proc/*/environ 2>/dev/null | tr '\\0' '\\n'; "
                    f"cat /proc/{os.getpid()}/environ 2>&1")
    assert token not in out, out


def test_special_files_are_refused_by_the_editor(box):
    """The editor reads on the host: a FIFO the command made must not hang it, a device not be read."""
    bash(box, "mkfifo pipe; ln -s /dev/zero zero; python -c \"import socket; s = socket.socket(socket.AF_UNIX); "
              "s.bind('sock')\"")
    answers = {}

    def view():
        for name in ("pipe", "sock", "zero"):
            answers[name] = edit(box, command="view", path=f"/testbed/{name}")

    worker = threading.Thread(target=view, daemon=True)
    worker.start()
    worker.join(10)
    if worker.is_alive():  # unblock the hung reader before failing
        with open(box.root / "pipe", "w"):
            pass
        worker.join(5)
        pytest.fail("the editor hung on a FIFO")
    assert "FIFO" in answers["pipe"] and "socket" in answers["sock"], answers
    assert "outside the repository" in answers["zero"], answers
    assert stat.S_ISFIFO(os.lstat(box.root / "pipe").st_mode)


def test_user_namespace_mode_holds_too(box, secret):
    """What a non-root caller gets (a user namespace mapping it to root inside, as ``unshare
    --map-root-user`` does), tried here when root can make it."""
    from icml26.agents.sandbox import SandboxError

    if os.geteuid() != 0 or _PREFIX == "user":
        pytest.skip("runs in user-namespace mode already (or cannot choose the mode as non-root)")
    key = Path.home() / f".icml26-userns-{secrets.token_hex(4)}"
    key.write_text(secret)
    try:
        box._mode = "user"
        try:
            box.run("true")
        except SandboxError as exc:
            pytest.skip(f"the kernel refuses user namespaces here: {exc}")
        out = bash(box, f"cat {key}; ls -A /run /home; cat /proc/self/uid_map; echo in > inside.txt; "
                        "grep CapEff /proc/self/status; mount -o remount,rw /usr && echo REMOUNTED")
    finally:
        key.unlink()
    assert secret not in out and "REMOUNTED" not in out, out
    assert "CapEff:\t0000000000000000" in out and (box.root / "inside.txt").read_text() == "in\n", out
