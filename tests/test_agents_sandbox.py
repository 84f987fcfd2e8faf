"""The sandbox: escapes tried for real (network, writes outside the scratch copy, runaway time and
memory, privileges), the scratch git copy, diff/reset, and the errors for bad setups.

Escape tests need the namespaces; where the OS refuses them (a container without CAP_SYS_ADMIN or
user namespaces) they are skipped with the probe's reason, and the refusal itself is tested.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path

import pytest

from icml26.agents import sandbox as sandbox_module
from icml26.agents import sandbox_root
from icml26.agents.sandbox import ExecResult, Sandbox, SandboxError, isolation_support

_PREFIX, _REASON = isolation_support()
needs_isolation = pytest.mark.skipif(_PREFIX is None, reason=f"no namespace isolation here: {_REASON}")


@pytest.fixture
def repo(tmp_path, make_git_repo):
    """A small git repository with a commit, a modified tracked file, an untracked and an ignored file."""
    root = make_git_repo(tmp_path / "project", {"pkg/mod.py": "def f():\n    return 1\n", "README": "readme\n",
                                                ".gitignore": "build/\n"})
    (root / "README").write_text("readme, edited\n")
    (root / "notes.txt").write_text("untracked\n")
    (root / "build").mkdir()
    (root / "build" / "big.bin").write_text("ignored\n")
    return root


@pytest.fixture
def box(repo):
    with Sandbox(repo, time_limit=20, memory_limit_mb=512) as sandbox:
        yield sandbox


# ---------------------------------------------------------------------------------------------------
# escapes


@needs_isolation
def test_no_network_even_to_the_hosts_loopback(box):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    threading.Thread(target=lambda: listener.accept(), daemon=True).start()
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()  # reachable from the host
        result = box.run_python(
            "import socket, sys\n"
            "for host, port in [('127.0.0.1', int(sys.argv[1])), ('1.1.1.1', 80), ('8.8.8.8', 53)]:\n"
            "    try:\n"
            "        socket.create_connection((host, port), timeout=3).close()\n"
            "        print('CONNECTED', host)\n"
            "    except OSError as exc:\n"
            "        print('refused', host, exc.errno)\n", args=[str(port)])
    finally:
        listener.close()
    assert result.returncode == 0, result.output
    assert "CONNECTED" not in result.output
    assert result.output.count("refused") == 3


@needs_isolation
def test_cannot_write_outside_the_scratch_copy(box, repo):
    # Targets on the root file system (outside /tmp, which the sandbox replaces by a private tmpfs).
    try:
        host_dir = Path(tempfile.mkdtemp(prefix="icml26-sandbox-test-", dir=Path.home()))
    except OSError as exc:
        pytest.skip(f"no writable home folder for the test target: {exc}")
    etc_target = Path("/etc/icml26-sandbox-escape-test")
    try:
        result = box.run(f"echo pwned > {host_dir}/outside.txt; echo rc=$?; echo pwned > {etc_target}; echo rc=$?; "
                         f"touch {box._inside_git}/hooks/post-checkout; echo rc=$?; "  # where commands see the git folder

                         "mount -o remount,rw / 2>/dev/null; echo rc=$?; "
                         "echo inside > in_repo.txt && echo ok; echo tmp > /tmp/t.txt && cat /tmp/t.txt")
        assert result.output.count("rc=0") == 0, result.output
        assert result.output.count("Read-only file system") == 2, result.output  # the home folder is not even there
        assert "outside.txt: No such file or directory" in result.output, result.output
        assert not (host_dir / "outside.txt").exists() and not etc_target.exists()
    finally:
        shutil.rmtree(host_dir, ignore_errors=True)
        etc_target.unlink(missing_ok=True)
    assert not (box.git_dir / "hooks" / "post-checkout").exists()
    assert (box.root / "in_repo.txt").read_text() == "inside\n"
    assert "tmp" in result.output.splitlines()  # a private /tmp works...
    assert not Path("/tmp/t.txt").exists() or Path("/tmp/t.txt").read_text() != "tmp\n"  # ...and stays private
    assert (repo / "README").read_text() == "readme, edited\n"


@needs_isolation
def test_privileges_are_dropped(box):
    result = box.run("grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status; grep NoNewPrivs /proc/self/status")
    lines = dict(line.split(":") for line in result.output.strip().splitlines())
    assert {k: v.strip() for k, v in lines.items()} == {
        "CapPrm": "0000000000000000", "CapEff": "0000000000000000", "CapBnd": "0000000000000000",
        "CapAmb": "0000000000000000", "NoNewPrivs": "1"}


@needs_isolation
def test_runaway_loop_and_its_daemons_are_killed(box):
    result = box.run("(setsid bash -c 'sleep 2; echo late > late.txt' &) ; while true; do :; done", timeout=1)
    assert result.timed_out and result.returncode != 0
    assert "time limit of 1 s" in result.output
    time.sleep(3)  # the detached child would have written by now
    assert not (box.root / "late.txt").exists()


def test_runaway_loop_is_stopped_even_unisolated(repo):
    with Sandbox(repo, isolation="none", allow_unisolated=True) as box:
        result = box.run("while true; do :; done", timeout=1)
    assert result.timed_out and result.returncode != 0


def test_memory_hog_is_stopped(box):
    result = box.run_python("buffers = [bytearray(64 << 20) for _ in range(64)]\nprint('allocated 4 GB')")
    assert result.returncode != 0 and result.memory_exceeded, result.output
    assert "allocated" not in result.output
    assert not result.timed_out


def test_output_is_truncated_head_and_tail(repo):
    with Sandbox(repo, max_output_chars=1000) as box:
        result = box.run("echo FIRST; yes filler | head -c 2000000; echo; echo LAST")
    assert result.truncated and result.returncode == 0
    assert len(result.output) < 1200
    assert result.output.startswith("FIRST") and result.output.rstrip().endswith("LAST")
    assert "output truncated: 2000" in result.output


# ---------------------------------------------------------------------------------------------------
# the scratch copy


def test_scratch_copy_is_the_working_tree(box):
    assert (box.root / "pkg" / "mod.py").read_text() == "def f():\n    return 1\n"
    assert (box.root / "README").read_text() == "readme, edited\n"  # uncommitted edits included
    assert (box.root / "notes.txt").exists()  # untracked files included
    assert not (box.root / "build").exists()  # ignored files not
    assert not (box.root / ".git").exists()  # metadata lives outside the copy
    assert box.diff() == ""


def test_diff_and_reset(box, repo):
    result = box.run("sed -i 's/return 1/return 2/' pkg/mod.py && echo new > added.py && rm notes.txt")
    assert result.returncode == 0, result.output
    patch = box.diff()
    assert "-    return 1\n+    return 2" in patch
    assert "diff --git a/added.py b/added.py" in patch and "+new" in patch
    assert "deleted file mode" in patch and "notes.txt" in patch
    assert (repo / "pkg" / "mod.py").read_text() == "def f():\n    return 1\n"  # the source is untouched
    box.run("python -c 'import pkg.mod'")  # bytecode caches must not show up in diffs
    assert "__pycache__" not in box.diff()
    box.reset()
    assert box.diff() == ""
    assert not (box.root / "added.py").exists() and (box.root / "notes.txt").exists()


def test_git_works_inside_for_the_agent(box):
    box.run("echo x >> README")
    result = box.run("git status --short && git diff --stat")
    assert result.returncode == 0, result.output
    assert "README" in result.output


def test_run_python_arguments_and_exit_codes(box):
    result = box.run_python("import sys, os\nprint(sys.argv[1:], os.getcwd())\nsys.exit(3)", args=["a b", "c"])
    assert result.returncode == 3
    assert f"['a b', 'c'] {box.display_root}" in result.output
    assert isinstance(result, ExecResult) and result.duration_s > 0


def test_empty_sandbox_without_repo():
    with Sandbox() as box:
        assert list(box.root.iterdir()) == []
        box.run("echo hi > a.txt")
        assert "+hi" in box.diff()
        root = box.root
    assert not root.exists()  # close() removed it
    with pytest.raises(SandboxError, match="closed"):
        box.run("true")


# ---------------------------------------------------------------------------------------------------
# bad setups


def test_not_a_git_repository(tmp_path):
    (tmp_path / "plain").mkdir()
    with pytest.raises(SandboxError, match="is not a git repository"):
        Sandbox(tmp_path / "plain")
    with pytest.raises(SandboxError, match="is not a folder"):
        Sandbox(tmp_path / "missing")


def test_refuses_to_run_unisolated_unless_allowed(monkeypatch, repo):
    monkeypatch.setattr(sandbox_module, "isolation_support", lambda: (None, "unshare: Operation not permitted"))
    with pytest.raises(SandboxError, match="cannot isolate.*Operation not permitted.*allow_unisolated=True"):
        Sandbox(repo)
    with pytest.warns(RuntimeWarning, match="WITHOUT network or filesystem isolation"):
        box = Sandbox(repo, allow_unisolated=True)
    with box:
        assert not box.isolated
        assert box.run("cat README").output == "readme, edited\n"
    with pytest.raises(SandboxError, match="cannot isolate"):
        Sandbox(repo, isolation="namespaces", allow_unisolated=True)


@pytest.mark.parametrize("kwargs, match", [
    (dict(time_limit=0), "time_limit"),
    (dict(time_limit=float("nan")), "Sandbox: time_limit: expected a finite number of seconds > 0, got nan"),
    (dict(memory_limit_mb=float("nan")), "Sandbox: memory_limit_mb: expected an integer >= 64 MB"),
    (dict(memory_limit_mb=1), "memory_limit_mb"),
    (dict(max_output_chars=5), "max_output_chars"),
    (dict(isolation="docker"), "isolation"),
    (dict(isolation="none"), "allow_unisolated=True"),
])
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Sandbox(**kwargs)


# ---------------------------------------------------------------------------------------------------
# the fixed path (display_root): commands see the copy at /testbed, never at the random scratch path


@needs_isolation
def test_commands_see_the_copy_at_testbed(box):
    assert box.display_root == "/testbed" and str(box.root) != "/testbed"
    result = box.run("pwd; ls /testbed; echo $HOME $GIT_DIR $GIT_WORK_TREE; git rev-parse --show-toplevel; "
                     "cd ~ && pwd")
    assert result.returncode == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "/testbed"
    assert {"README", "notes.txt", "pkg"} <= set(lines[1:4])
    assert lines[4] == "/.sandbox/home /.sandbox/git /testbed"
    assert lines[5:] == ["/testbed", "/.sandbox/home"]
    assert str(box.root) not in result.output and str(box._dir) not in result.output
    assert "icml26-sandbox-" not in result.output


@needs_isolation
def test_writes_at_testbed_land_in_the_copy_and_the_diff(box):
    result = box.run("echo new > /testbed/x && sed -i 's/return 1/return 2/' /testbed/pkg/mod.py && "
                     "echo home > ~/h.txt && cat /testbed/x ~/h.txt")
    assert result.returncode == 0 and result.output == "new\nhome\n", result.output
    assert (box.root / "x").read_text() == "new\n" and (box.home / "h.txt").read_text() == "home\n"
    patch = box.diff()
    assert "diff --git a/x b/x" in patch and "+new" in patch and "+    return 2" in patch
    box.reset()
    assert box.diff() == "" and not (box.root / "x").exists()


@needs_isolation
def test_fixed_root_keeps_the_isolation(box):
    targets = ["/etc/x", "/x", "/usr/x", "/.sandbox/x", "/.sandbox/git/hooks/pre-commit", "/testbed-other"]
    result = box.run(f"for t in {' '.join(targets)}; do (echo pwned > $t) 2>/dev/null; echo rc=$?; done; "
                     "git config core.fsmonitor 'touch /tmp/p' 2>/dev/null; echo rc=$?; "
                     "echo t > /tmp/t.txt && cat /tmp/t.txt; find /var/tmp /dev/shm -mindepth 1 | wc -l; "
                     "tr '\\0' ' ' < /proc/1/cmdline; echo; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    lines = result.output.splitlines()
    assert lines[:6] == ["rc=1"] * 6 and lines[6] not in ("rc=0", ""), result.output  # all read-only
    assert lines[7:9] == ["t", "0"], result.output  # private /tmp, /var/tmp and /dev/shm
    assert lines[9].startswith(f"{box._bash} -c "), result.output  # PID 1 is the command: a new PID namespace
    assert lines[10:] == ["CapEff:\t0000000000000000", "NoNewPrivs:\t1"], result.output
    assert not (box.git_dir / "hooks" / "pre-commit").exists()
    assert not Path("/x").exists() and not Path("/etc/x").exists() and not Path("/testbed-other").exists()
    assert "fsmonitor" not in (box.git_dir / "config").read_text()
    network = box.run_python("import socket\ntry:\n    socket.create_connection(('1.1.1.1', 80), timeout=3)\n"
                             "    print('CONNECTED')\nexcept OSError:\n    print('refused')\n")
    assert network.output.strip() == "refused", network.output


@needs_isolation
def test_fixed_root_time_and_memory_limits(box):
    late = box.run("(setsid bash -c 'sleep 2; echo late > /testbed/late.txt' &) ; while true; do :; done", timeout=1)
    assert late.timed_out and "time limit of 1 s" in late.output
    hog = box.run_python("buffers = [bytearray(64 << 20) for _ in range(64)]\nprint('allocated 4 GB')")
    assert hog.returncode != 0 and hog.memory_exceeded, hog.output
    time.sleep(2.5)
    assert not (box.root / "late.txt").exists()


@needs_isolation
def test_real_scratch_path_is_hidden_and_other_display_roots(repo):
    with Sandbox(repo, time_limit=20, display_root="/work_area/project/") as box:
        assert box.display_root == "/work_area/project"
        result = box.run(f"pwd; cat README; ls /work_area; ls {box.root} || echo hidden; echo /tmp:; ls -A /tmp")
        assert result.output.splitlines()[:3] == ["/work_area/project", "readme, edited", "project"], result.output
        assert "hidden" in result.output, result.output
        # a private /tmp: empty but for this Python's prefix when it lies there (a virtualenv under /tmp)
        runtime = {p.split("/")[2] for p in sandbox_root.python_folders() if p.startswith("/tmp/")}
        assert set(result.output.split("/tmp:\n", 1)[1].split()) == runtime, result.output
    with Sandbox(repo, time_limit=20, display_root=None) as box:
        assert box.display_root == str(box.root)
        assert box.run("pwd").output.strip() == str(box.root)


@pytest.fixture
def outside_tmp():
    """A writable folder outside /tmp, /var/tmp and /dev/shm (where SERA's ``out/.scratch`` may lie)."""
    for base in (Path.home() / ".cache", Path.cwd()):
        real = os.path.realpath(base)
        if any(real == t or real.startswith(t + "/") for t in ("/tmp", "/var/tmp", "/dev/shm")):
            continue
        try:
            base.mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix="icml26-test-scratch-", dir=base))
        except OSError:
            continue
        yield folder
        shutil.rmtree(folder, ignore_errors=True)
        return
    pytest.skip("no writable folder outside /tmp, /var/tmp and /dev/shm for the scratch copies")


@needs_isolation
def test_scratch_outside_tmp_is_covered_in_the_sandbox(repo, outside_tmp):
    with Sandbox(repo, time_limit=20, scratch_parent=outside_tmp) as box, \
            Sandbox(repo, time_limit=20, scratch_parent=outside_tmp) as other:
        assert box.root.is_relative_to(outside_tmp) and other.root.is_relative_to(outside_tmp)
        result = box.run(f"ls -A {outside_tmp} | wc -l; cat {other.root}/README || echo unreadable; "
                         f"echo x > {box.root}/leak.txt || echo unwritable; cat README; python -c 'print(6 * 7)'")
        lines = result.output.splitlines()
        assert "No such file or directory" in lines[0], result.output  # neither sandbox nor the sibling is there
        assert "unreadable" in lines and "unwritable" in lines and "readme, edited" in lines and "42" in lines, \
            result.output
        assert not (box.root / "leak.txt").exists()
        assert box.run("echo y > inside.txt").returncode == 0 and (box.root / "inside.txt").read_text() == "y\n"


def test_unisolated_sandbox_reports_the_real_path(repo, monkeypatch):
    with Sandbox(repo, isolation="none", allow_unisolated=True) as box:
        assert box.display_root == str(box.root) and not box.isolated
        assert box.run("pwd").output.strip() == str(box.root)
    monkeypatch.setattr(sandbox_module, "isolation_support", lambda: (None, "unshare: Operation not permitted"))
    with pytest.warns(RuntimeWarning, match="at the scratch path, not at /testbed"):
        box = Sandbox(repo, allow_unisolated=True)
    with box:
        assert box.display_root == str(box.root)


def test_a_failing_new_root_is_a_clear_error(repo, monkeypatch):
    monkeypatch.setattr(sandbox_module, "isolation_support", lambda: (None, "pivot_root: Operation not permitted"))
    with pytest.raises(SandboxError, match=r"new root.*pivot_root: Operation not permitted.*allow_unisolated=True"):
        Sandbox(repo)


@needs_isolation
def test_setup_failure_at_run_time_raises(box):
    spoof = box.run("echo 'icml26 sandbox setup failed: not really'; exit 125")  # the command's own exit
    assert spoof.returncode == 125
    shutil.rmtree(box.home)  # the launcher cannot bind it any more
    with pytest.raises(SandboxError, match="could not be set up.*did not run.*No such file"):
        box.run("echo ran > /testbed/ran.txt")
    assert not (box.root / "ran.txt").exists()


@pytest.mark.parametrize("value, error, match", [
    ("testbed", ValueError, "absolute path"),
    ("/", ValueError, "it cannot be '/'"),
    ("/usr/testbed", ValueError, "system folder /usr"),
    ("/tmp", ValueError, "system folder /tmp"),
    ("/etc", ValueError, "system folder /etc"),
    ("/.sandbox/repo", ValueError, "system folder /.sandbox"),
    ("/testbed/../etc", ValueError, "'..'"),
    ("/test bed", ValueError, "spaces"),
    (5, TypeError, "display_root must be a path"),
])
def test_bad_display_roots(value, error, match):
    with pytest.raises(error, match=match):
        Sandbox(display_root=value)


def test_display_root_may_not_hide_what_the_sandbox_needs():
    with pytest.raises(ValueError, match=r"would hide /srv.*this Python \(/srv/env/bin\)"):
        sandbox_module._hides("/srv/repo", {"this Python": "/srv/env/bin"})
    sandbox_module._hides("/testbed", {"this Python": "/srv/env/bin", "scratch": "/tmp"})  # no overlap: fine


@needs_isolation
def test_editor_maps_testbed_onto_the_copy(box):
    from icml26.agents.toolcalls import ToolCall
    from icml26.agents.tools import ToolExecutor

    ex = ToolExecutor(box)

    def edit(**arguments):
        return ex.execute(ToolCall(id="t", name="str_replace_editor", arguments=arguments, raw=""))

    out = edit(command="view", path="/testbed/pkg/mod.py")
    assert out.startswith("Here's the result of running `cat -n` on pkg/mod.py") and "return 1" in out
    assert "README" in edit(command="view", path="/testbed")
    assert "File created" in edit(command="create", path="/testbed/pkg/new.py", file_text="A\n")
    assert (box.root / "pkg" / "new.py").read_text() == "A\n"
    for path in ("/etc/passwd", "/testbed/../etc/passwd", "/testbedx/pkg/mod.py"):
        refused = edit(command="view", path=path)
        assert "outside the repository (/testbed)" in refused, (path, refused)
    failed = edit(command="create", path="/testbed/README/inner.py", file_text="x")  # README is a file
    assert failed.startswith("Error:") and "/testbed/README" in failed, failed
    for observation in (out, refused, failed):
        assert str(box.root) not in observation and "icml26-sandbox-" not in observation


def test_launcher_imports_only_the_standard_library():
    """The launcher runs as ``python -I -S sandbox_launcher.py`` inside the sandbox, where the package and
    site-packages may be out of reach: importing it must load standard-library modules only."""
    import json
    import sys

    from icml26.agents import sandbox_launcher

    probe = (
        "import importlib.util, json, sys\n"
        "before = set(sys.modules)\n"
        f"spec = importlib.util.spec_from_file_location('sandbox_launcher', {sandbox_launcher.__file__!r})\n"
        "module = importlib.util.module_from_spec(spec)\n"
        "sys.modules['sandbox_launcher'] = module\n"
        "spec.loader.exec_module(module)\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", probe], capture_output=True, text=True, timeout=60,
                          check=True)
    added = json.loads(proc.stdout)
    outside = [m for m in added if m != "sandbox_launcher" and m.split(".")[0] not in sys.stdlib_module_names]
    assert not outside, outside
    assert "sandbox_launcher" in added and not [m for m in added if m.startswith("icml26")]


# ---------------------------------------------------------------------------------------------------
# limits, nested repositories, failures of the machinery


@pytest.mark.parametrize("kwargs, match", [
    (dict(memory_limit_mb=8), "Sandbox: memory_limit_mb: expected an integer >= 64 MB"),
    (dict(pids_limit=2), "Sandbox: pids_limit: expected an integer >= 8 processes"),
    (dict(disk_limit_mb=1), "Sandbox: disk_limit_mb: expected an integer >= 8 MB"),
    (dict(cpu_time_limit=0), "Sandbox: cpu_time_limit: expected a number >= 0.1 s"),
    (dict(open_files=3), "Sandbox: open_files: expected an integer >= 64 files"),
    (dict(extra_ro_paths="/usr"), "Sandbox: extra_ro_paths: expected a list of absolute paths"),
    (dict(extra_ro_paths=["/no/such/folder"]), "extra_ro_paths"),
])
def test_limits_below_a_shell_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        Sandbox(**kwargs)


def test_the_smallest_limits_still_start_a_shell(repo):
    from icml26.agents import sandbox_limits

    with Sandbox(repo, memory_limit_mb=sandbox_limits.MIN_MEMORY_MB, pids_limit=sandbox_limits.MIN_PIDS,
                 disk_limit_mb=sandbox_limits.MIN_DISK_MB, allow_unisolated=True) as box:
        result = box.run("echo hi | cat")
    assert result.returncode == 0 and result.output == "hi\n", result.output


def test_sera_generate_refuses_a_tiny_memory_limit_up_front(run_cli, repo, tmp_path):
    result = run_cli(["sera", "generate", "--repo", str(repo), "--backend", "scripted", "--out", str(tmp_path / "o"),
                      "--memory-mb", "8", "--no-progress"])
    assert result.returncode == 2, result.stderr
    assert "generate: memory_limit_mb: expected an integer >= 64 MB (or None for no limit), got 8" in result.stderr
    assert not (tmp_path / "o" / "ledger.jsonl").exists()


def test_limits_report_their_mechanism(box):
    assert set(box.limits) >= {"memory", "pids", "cpu_time", "wall_time", "disk", "open_files", "file_size"}
    for name, limit in box.limits.items():
        assert limit.scope in ("command", "process", "none"), (name, limit)
        assert limit.scope == "none" or limit.mechanism, (name, limit)
    assert box.limits["wall_time"].value == 20


def test_cpu_time_limit_ends_the_command(repo):
    with Sandbox(repo, time_limit=20, cpu_time_limit=0.5, allow_unisolated=True) as box:
        result = box.run("while true; do :; done")
    assert result.timed_out and result.duration_s < 10, result
    assert "CPU time limit of 0.5 s" in result.output or box.limits["cpu_time"].scope == "process", result.output


@needs_isolation
def test_a_failing_unshare_is_a_sandbox_error(box, monkeypatch):
    """Without the launch server (it cannot start) the launcher runs for the command alone; a launcher
    that fails before the command starts is a SandboxError with what it said."""
    from icml26.agents import sandbox_exec

    def no_server(*args):
        raise OSError("no server here")

    monkeypatch.setattr(sandbox_exec._Server, "send", no_server)
    assert box.run("echo ran").output == "ran\n"  # the fallback works
    monkeypatch.setattr(sandbox_exec, "_launcher_argv",
                        lambda spec: ["/bin/sh", "-c", "echo 'unshare: fork failed: no room' >&2; exit 1"])
    with pytest.raises(SandboxError, match="did not run.*exited with 1 before the command started.*no room"):
        box.run("echo ran")


@needs_isolation
def test_a_root_that_cannot_be_built_is_a_sandbox_error(box, monkeypatch):
    monkeypatch.setattr(box, "_root_steps", lambda: [["no-such-step", "/x"]])
    with pytest.raises(SandboxError, match="did not run.*unknown root step 'no-such-step'"):
        box.run("touch ran")
    assert not (box.root / "ran").exists()


def test_nested_repositories_diff_reset_and_submit(box):
    from icml26.agents.toolcalls import ToolCall
    from icml26.agents.tools import ToolExecutor

    result = box.run("unset GIT_DIR GIT_WORK_TREE; git init -q sub && echo inner > sub/f.txt && echo x > empty.txt && "
                     "git init -q empty && "
                     "echo changed >> README && mkdir -p pkg2 && echo y > pkg2/g.txt && "
                     "git -C pkg2 init -q && git -C pkg2 add -A && "
                     "git -C pkg2 -c user.name=a -c user.email=a@b commit -qm m && echo ok")
    assert result.output.strip().endswith("ok"), result.output
    assert box.nested_repositories() == ["empty", "pkg2", "sub"]
    patch = box.diff()  # no SandboxError: the nested repositories are left out, the rest is there
    assert "+changed" in patch and "empty.txt" in patch and "sub/f.txt" not in patch and "pkg2" not in patch
    executor = ToolExecutor(box)
    refused = executor.execute(ToolCall(id="s", name="submit", arguments={}, raw=""))
    assert not executor.submitted and "nested git repositories" in refused and "sub" in refused, refused
    box.reset()
    assert box.diff() == "" and box.nested_repositories() == []
    assert not (box.root / "sub").exists() and not (box.root / "pkg2").exists()


def test_reset_undoes_symlinked_and_replaced_folders_and_empties_the_home(box):
    result = box.run("rm -rf pkg && ln -s /etc pkg && echo h > ~/left.txt && rm README && mkdir README && "
                     "echo z > README/inner && mkfifo fifo && mkdir -p locked && chmod 000 locked && echo ok")
    assert result.output.strip() == "ok", result.output
    patch = box.diff()
    assert "pkg/mod.py" in patch and "README/inner" in patch
    box.reset()
    assert (box.root / "pkg").is_dir() and not (box.root / "pkg").is_symlink()
    assert (box.root / "pkg" / "mod.py").read_text() == "def f():\n    return 1\n"
    assert (box.root / "README").read_text() == "readme, edited\n" and not (box.home / "left.txt").exists()
    assert not os.path.lexists(box.root / "fifo") and not (box.root / "locked").exists()
    assert box.diff() == ""


def test_scorer_does_not_leak_files_between_programs():
    from icml26.agents.optminer.scorer import Scorer

    with Scorer(allow_unisolated=True, time_limit=20) as scorer:
        first = scorer.score_code("import os, subprocess\nos.makedirs('n', exist_ok=True)\n"
                                  "subprocess.run(['git', 'init', '-q', 'n'], env={'PATH': os.environ['PATH']})\n"
                                  "open('n/leak.txt', 'w').write('x')\nopen(os.path.expanduser('~/h.txt'), 'w')"
                                  ".write('x')\nprint('Optimal objective: 1')", 1.0)
        second = scorer.score_code("import os\nprint(os.path.exists('n/leak.txt'), "
                                   "os.path.exists(os.path.expanduser('~/h.txt')))\nprint('Optimal objective: 1')", 1.0)
    assert first.correct, first.output
    assert second.output.splitlines()[0] == "False False", second.output


def test_editor_refuses_large_files_and_reads_within_the_output_limit(box):
    import tracemalloc

    from icml26.agents import tools
    from icml26.agents.toolcalls import ToolCall

    (box.root / "big.txt").write_text("x" * 100 + "\n" + "y\n" * ((tools.MAX_FILE_BYTES // 2) + 10))
    (box.root / "ok.txt").write_text("line\n" * (tools.MAX_FILE_BYTES // 8))  # 2 MB
    executor = tools.ToolExecutor(box)

    def view(path):
        return executor.execute(ToolCall(id="v", name="str_replace_editor", arguments={"command": "view", "path": path},
                                         raw=""))

    refused = view("big.txt")
    assert "over the editor's limit of 4 MB" in refused and "sed -n" in refused, refused
    tracemalloc.start()
    try:
        shown = view("ok.txt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "output truncated" in shown and len(shown) < box.max_output_chars + 200
    assert peak < 5 * (tools.MAX_FILE_BYTES // 2), peak  # a few times the file, not ~47x


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_command_cgroup_writes_the_limits_of_its_version(tmp_path, version):
    """The files a per-command cgroup writes, on a stand-in folder tree (this machine may lack the other version)."""
    from icml26.agents import sandbox_limits

    parents = {c: tmp_path / (c if version == "v1" else "unified") for c in ("memory", "pids", "cpu")}
    for folder in parents.values():
        folder.mkdir(exist_ok=True)
    support = {c: (version, str(folder)) for c, folder in parents.items()}
    group = sandbox_limits.CommandCgroup.create(support, memory_bytes=64 << 20, pids=32)
    memory, pids = Path(group.dirs["memory"][1]), Path(group.dirs["pids"][1])
    assert memory.parent == parents["memory"] and pids.parent == parents["pids"]
    if version == "v2":
        assert memory == pids and len(group.procs) == 1
        assert (memory / "memory.max").read_text() == str(64 << 20) and (memory / "pids.max").read_text() == "32"
        assert (memory / "memory.oom.group").read_text() == "1"
        (memory / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
        (memory / "cpu.stat").write_text("usage_usec 2500000\nuser_usec 2000000\n")
        assert group.cpu_seconds() == 2.5
    else:
        assert len(group.procs) == 3
        assert (memory / "memory.limit_in_bytes").read_text() == str(64 << 20)
        assert (pids / "pids.max").read_text() == "32"
        (memory / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n")
    assert group.check() == (True, False)
    (pids / "pids.events").write_text("max 5\n")
    assert group.check() == (True, True)


@needs_isolation
def test_every_mount_is_nosuid_and_nodev_and_noexec_where_nothing_runs(box):
    table = box.run("cat /proc/self/mountinfo").output.splitlines()
    mounts = {fields[4]: set(fields[5].split(",")) for fields in (line.split() for line in table)}
    devices = {f"/dev/{name}" for name in ("null", "zero", "full", "random", "urandom", "tty")}
    for point, options in mounts.items():
        assert "nosuid" in options, (point, options)
        assert "nodev" in options or point in devices, (point, options)
    for point in ("/", "/dev", "/proc", "/.sandbox/git", "/dev/shm"):
        assert {"noexec"} <= mounts[point], (point, mounts[point])
    for point in ("/", "/usr", "/proc", "/.sandbox/git", "/dev"):
        assert "ro" in mounts[point], (point, mounts[point])
    assert "rw" in mounts["/testbed"] and "rw" in mounts["/tmp"] and "rw" in mounts["/.sandbox/home"]
    assert not any(p.startswith(("/sys", "/run", "/home", "/mnt")) for p in mounts), sorted(mounts)


@needs_isolation
def test_extra_read_only_paths(repo, tmp_path):
    shared = tmp_path / "shared-tools"
    shared.mkdir()
    (shared / "tool.sh").write_text("echo tool ran\n")
    with Sandbox(repo, time_limit=20, extra_ro_paths=[shared]) as box:
        result = box.run(f"bash {shared}/tool.sh; echo x > {shared}/new || echo read-only; ls {tmp_path}")
    assert "tool ran" in result.output and "read-only" in result.output, result.output
    assert result.output.strip().splitlines()[-1] == "shared-tools", result.output  # nothing beside it
    assert not (shared / "new").exists()


def test_without_a_writable_cgroup_limits_fall_back_per_process(repo, monkeypatch):
    from icml26.agents import sandbox_limits

    monkeypatch.setattr(sandbox_limits, "cgroup_support", lambda: {})
    monkeypatch.setattr(sandbox_module, "_warn_once", lambda message: warnings.warn(message, RuntimeWarning))
    with pytest.warns(RuntimeWarning, match="not on the whole command"):
        box = Sandbox(repo, time_limit=20, memory_limit_mb=256, allow_unisolated=True)
    with box:
        if not box.isolated:
            pytest.skip("no isolation: the warning about isolation comes first")
        assert box.limits["memory"] == sandbox_limits.Limit(256, "process", "RLIMIT_AS", "no writable memory cgroup")
        assert box.limits["pids"].scope == "none"
        hog = box.run_python("buffers = [bytearray(64 << 20) for _ in range(64)]\nprint('allocated 4 GB')")
    assert hog.returncode != 0 and hog.memory_exceeded and "allocated" not in hog.output, hog.output


def test_cgroups_of_killed_processes_are_reaped(tmp_path):
    """The owner (pid and start time) is in a cgroup's name: a dead owner's cgroups go, a live one's stay
    (even one whose pid was reused: the start time differs), whatever else is there stays."""
    from icml26.agents import sandbox_limits

    gone = subprocess.Popen(["true"])
    gone.wait()
    me = sandbox_limits.owner_stamp(os.getpid()).split()
    names = [f"icml26-sandbox-{gone.pid}-3", f"icml26-sandbox-{gone.pid}-123-3", f"icml26-sandbox-{me[0]}-{me[1]}-3",
             f"icml26-sandbox-{me[0]}-{int(me[1]) + 1}-3", f"icml26-sandbox-{os.getpid()}-3", "other-group"]
    for name in names:
        (tmp_path / name).mkdir()
    removed = sandbox_limits.reap_dead_cgroups({"memory": ("v1", str(tmp_path))})
    kept = [f"icml26-sandbox-{me[0]}-{me[1]}-3", f"icml26-sandbox-{os.getpid()}-3", "other-group"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept)
    assert sorted(os.path.basename(p) for p in removed) == sorted(set(names) - set(kept))


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_a_command_dies_with_a_run_that_is_sigkilled(repo, tmp_path, isolation):
    """A caller's time-out SIGKILLs the Python running the sandbox: its time limit dies with it, so the command
    must too (parent-death signal on the child; --kill-child and the PID namespace take the rest down)."""
    import subprocess
    import sys
    import time

    from orphans import processes_with, survivors_of_sigkill

    if isolation == "auto" and _PREFIX is None:
        pytest.skip(f"no namespace isolation here: {_REASON}")
    marker = f"{os.getpid()}.{time.monotonic_ns() % 10**6}"  # a sleep length no other process uses
    started = tmp_path / "started"
    code = (f"from icml26.agents.sandbox import Sandbox\n"
            f"box = Sandbox({str(repo)!r}, time_limit=120, isolation={isolation!r}, allow_unisolated=True)\n"
            f"open({str(started)!r}, 'w').close()\n"
            f"box.run('sleep 7{marker}')\n")
    run = subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE)
    command = f"7{marker}"
    assert survivors_of_sigkill(run, lambda: processes_with(command) if started.exists() else []) == []


def test_without_libseccomp_isolation_is_refused_with_the_reason(monkeypatch):
    """No binding (or no libseccomp): the filter cannot be built, so isolation is refused, saying what to
    install, and Sandbox() says why unless unisolated commands are accepted."""
    import sys

    from icml26.agents import sandbox as sandbox_module
    from icml26.agents import sandbox_exec, sandbox_seccomp

    monkeypatch.setitem(sys.modules, "pyseccomp", None)  # import pyseccomp -> ImportError
    sandbox_seccomp.filter_program.cache_clear()
    sandbox_exec.isolation_support.cache_clear()
    try:
        program, reason = sandbox_seccomp.filter_program()
        assert program is None and "pip install pyseccomp" in reason
        mode, why = sandbox_exec.isolation_support()
        assert mode is None and "pyseccomp" in why
        monkeypatch.setattr(sandbox_module, "isolation_support", sandbox_exec.isolation_support)
        with pytest.raises(SandboxError, match="cannot isolate sandboxed commands.*pyseccomp"):
            Sandbox()
    finally:
        monkeypatch.undo()
        sandbox_seccomp.filter_program.cache_clear()
        sandbox_exec.isolation_support.cache_clear()
    assert sandbox_seccomp.filter_program()[0] is not None or _PREFIX is None
