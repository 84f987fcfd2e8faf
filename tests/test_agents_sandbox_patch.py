"""The patch is exactly the agent's change, bounded on the host, and the tool layer never raises.

Each accepted case is checked the way the patch is used: ``git apply`` of ``Sandbox.diff()`` in a clean
clone of the original repository must reproduce the agent's tree byte for byte (contents, symlink targets,
the executable bit). The caps are checked by host-side witnesses: the host process's peak memory, the
growth of the sandbox's git objects, the time a refusal takes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

from icml26.agents.backends import ScriptedBackend
from icml26.agents.loop import run_agent
from icml26.agents.sandbox import PatchRefused, Sandbox, SandboxError, isolation_support
from icml26.agents.sandbox_limits import rmtree
from icml26.agents.toolcalls import ToolCall
from icml26.agents.tools import REVIEW_PREFIX, ToolExecutor, review_message

_PREFIX, _REASON = isolation_support()
needs_isolation = pytest.mark.skipif(_PREFIX is None, reason=f"no namespace isolation here: {_REASON}")
_CLEAN_GIT = dict(os.environ, GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1")


@pytest.fixture
def repo(tmp_path, make_git_repo):
    """A committed repository (so a clone of it is the sandbox's base), with ignore rules at two depths."""
    root = make_git_repo(tmp_path / "project", {
        "pkg/mod.py": "def f():\n    return 1\n", "pkg/data.txt": "one\ntwo\n", "README": "readme\n",
        "old_name.txt": "moved\n", "gone.txt": "deleted\n", "crlf.txt": "a\r\nb\r\n", "tail.txt": "no newline",
        ".gitignore": "build/\n*.log\n", "sub/.gitignore": "!keep.log\n*.tmp\n/only_here\n",
        "sub/x.txt": "x\n"})
    (root / "latin1.txt").write_bytes(b"caf\xe9\n")  # not UTF-8 in the base
    os.symlink("README", root / "link")
    subprocess.run(["git", "-C", str(root), "add", "-A"], check=True, env=_CLEAN_GIT)
    subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "more"],
                   check=True, env=_CLEAN_GIT)
    return root


@pytest.fixture
def box(repo):
    with Sandbox(repo, time_limit=20, memory_limit_mb=512, allow_unisolated=True) as sandbox:
        yield sandbox


def sh(box: Sandbox, command: str) -> str:
    result = box.run(command)
    assert result.returncode == 0, result.output
    return result.output


def tree(root: Path, skip=()) -> dict[str, tuple]:
    """Every file and symlink under ``root`` (not ``.git``): its bytes or target and its executable bit."""
    found = {}
    for current, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        for name in files + [d for d in dirs if os.path.islink(os.path.join(current, d))]:
            path = os.path.join(current, name)
            rel = os.path.relpath(path, root)
            if rel in skip:
                continue
            if os.path.islink(path):
                found[rel] = ("link", os.readlink(path))
            else:
                found[rel] = ("file", Path(path).read_bytes(), bool(os.stat(path).st_mode & 0o100))
    return found


def apply_in_clean_clone(repo: Path, patch: str, tmp_path: Path) -> Path:
    clone = tmp_path / f"clone-{len(list(tmp_path.iterdir()))}"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True, env=_CLEAN_GIT)
    (tmp_path / "agent.patch").write_bytes(patch.encode("utf-8"))
    if patch:
        done = subprocess.run(["git", "-C", str(clone), "apply", str(tmp_path / "agent.patch")], env=_CLEAN_GIT,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr + "\n" + patch[:3000]
    return clone


def assert_round_trip(box: Sandbox, repo: Path, tmp_path: Path, skip=()) -> str:
    patch = box.diff()
    assert isinstance(patch, str) and "\ufffd" not in patch
    clone = apply_in_clean_clone(repo, patch, tmp_path)
    assert tree(clone, skip) == tree(box.root, skip)
    return patch


def submit(executor: ToolExecutor) -> str:
    return executor.execute(ToolCall(id="s", name="submit", arguments={}, raw=""))


def bash(executor: ToolExecutor, command: str) -> str:
    return executor.execute(ToolCall(id="b", name="bash", arguments={"command": command}, raw=""))


# ---------------------------------------------------------------------------------------------------
# the patch is the change


def test_an_ordinary_change_round_trips(box, repo, tmp_path):
    sh(box, "sed -i 's/return 1/return 2/' pkg/mod.py && echo new > pkg/new.py && rm gone.txt && "
            "mv old_name.txt new_name.txt && chmod +x pkg/data.txt && ln -s pkg/mod.py modlink && "
            "ln -sfn pkg link && printf 'c\\r\\n' >> crlf.txt && printf ' more' >> tail.txt && "
            "mkdir -p deep/er && printf 'nested\\n' > deep/er/file.txt")
    patch = assert_round_trip(box, repo, tmp_path)
    assert "+    return 2" in patch and "new mode 100755" in patch and "deleted file mode" in patch


def test_a_gitattributes_does_not_hide_or_convert_the_change(box, repo, tmp_path):
    sh(box, "printf '*.py -diff\\n*.txt filter=hide ident\\nREADME binary\\n' > .gitattributes && "
            "sed -i 's/return 1/return 2/' pkg/mod.py && printf '$Id$\\n' >> pkg/data.txt && echo two >> README")
    patch = assert_round_trip(box, repo, tmp_path)
    assert "-    return 1\n+    return 2" in patch  # a text diff, not "Binary files differ"
    assert "+$Id$" in patch and "+two" in patch


def test_a_gitignore_of_everything_hides_no_new_file(box, repo, tmp_path):
    sh(box, "echo '*' > .gitignore && echo '*' > sub/.gitignore && echo hi > added.txt && echo n > pkg/new.py && "
            "mkdir -p build sub/deeper && echo o > build/out.o && echo l > run.log && echo k > sub/keep.log && "
            "echo l > sub/deeper/other.log && echo t > sub/a.tmp && echo t > sub/deeper/b.tmp && echo o > sub/only_here "
            "&& echo o > sub/deeper/only_here && mkdir -p __pycache__ && echo c > __pycache__/m.pyc")
    # the base's rules decide: build/, *.log (sub/keep.log re-included), sub's *.tmp at any depth below sub,
    # sub/only_here only at sub's top; the sandbox's own exclude leaves bytecode out
    ignored = {"build/out.o", "run.log", "sub/deeper/other.log", "sub/a.tmp", "sub/deeper/b.tmp", "sub/only_here",
               "__pycache__/m.pyc"}
    patch = assert_round_trip(box, repo, tmp_path, skip=ignored)
    for name in ("added.txt", "pkg/new.py", "sub/keep.log", "sub/deeper/only_here"):
        assert f"diff --git a/{name} b/{name}" in patch, name
    for name in ignored:
        assert name not in patch, name


def test_content_that_is_not_utf8_and_binary_files_round_trip(box, repo, tmp_path):
    sh(box, "printf 'na\\xefve\\n' > new_latin1.txt && printf 'x\\0y\\377' > blob.bin && "
            "printf 'caf\\xc3\\xa9\\n' > latin1.txt && printf 'one\\n\\xff\\xfe\\n' >> pkg/data.txt && "
            "head -c 3000 /dev/urandom > noise.bin && echo text >> README")
    patch = assert_round_trip(box, repo, tmp_path)
    assert "GIT binary patch" in patch and "+text" in patch  # the rest stays readable text


def test_names_git_quotes_or_globs_round_trip(box, repo, tmp_path):
    odd = ['sp ace b/x "q" \\ *[x]?.txt', "tab\tand\nnewline é.txt", "-dash", ":(glob)*.py", "#hash", "!bang"]
    for name in odd:
        (box.root / name).parent.mkdir(exist_ok=True)
        (box.root / "sub" / name).parent.mkdir(exist_ok=True)
        (box.root / name).write_bytes(b"latin \xe9 text\n")  # not UTF-8: each becomes a binary patch by name
        (box.root / "sub" / name).write_text("plain\n")
    patch = assert_round_trip(box, repo, tmp_path)
    assert patch.count("GIT binary patch") == len(odd)


def test_a_name_that_is_not_utf8_is_refused_naming_it(box):
    sh(box, "echo x > $'caf\\xe9.txt' && echo fine > fine.txt")
    with pytest.raises(PatchRefused, match=r"b'caf\\xe9.txt'"):
        box.diff()
    executor = ToolExecutor(box)
    observation = submit(executor)
    assert observation.startswith("Error:") and r"b'caf\xe9.txt'" in observation and not executor.submitted
    sh(box, "mv $'caf\\xe9.txt' cafe.txt")
    assert submit(executor) == "Submitted." and "cafe.txt" in executor.patch


def test_a_tracked_file_turned_fifo_is_refused_and_new_fifos_left_out(box, repo, tmp_path):
    sh(box, "rm README && mkfifo README && mkfifo new_fifo && echo x >> pkg/data.txt")
    with pytest.raises(PatchRefused, match="README is no longer a regular file"):
        box.diff()
    sh(box, "rm README && echo back > README")
    assert_round_trip(box, repo, tmp_path, skip={"new_fifo"})


@pytest.mark.parametrize("review", [False, True])
def test_working_tree_encoding_gives_an_observation_and_an_exact_patch(box, repo, tmp_path, review):
    executor = ToolExecutor(box, review_submit=review)
    bash(executor, "printf '* working-tree-encoding=UTF-16\\n*.py text eol=crlf\\n' > .gitattributes && "
                   "echo more >> README && sed -i 's/return 1/return 3/' pkg/mod.py")
    observation = submit(executor)
    if review:
        assert observation.startswith(REVIEW_PREFIX) and "+    return 3" in observation
        observation = submit(executor)
    assert observation == "Submitted.", observation
    clone = apply_in_clean_clone(repo, executor.patch, tmp_path)
    assert tree(clone) == tree(box.root)
    before = tree(repo)
    box.reset()  # the checkout writes the base's bytes, not UTF-16 or CRLF conversions of them
    assert tree(box.root) == before


# ---------------------------------------------------------------------------------------------------
# the caps


_MEASURE = textwrap.dedent("""
    import json, os, sys, time
    from icml26.agents.sandbox import Sandbox
    from icml26.agents.toolcalls import ToolCall
    from icml26.agents.tools import ToolExecutor

    def status(key):
        for line in open("/proc/self/status"):
            if line.startswith(key + ":"):
                return int(line.split()[1]) // 1024  # MiB

    def size(folder):
        return sum(os.lstat(os.path.join(d, f)).st_size for d, _, fs in os.walk(folder) for f in fs) / 2**20

    with Sandbox(sys.argv[1], time_limit=60, memory_limit_mb=1024, allow_unisolated=True) as box:
        executor = ToolExecutor(box)
        out = executor.execute(ToolCall(id="b", name="bash", arguments={"command": sys.argv[2]}, raw=""))
        git_before, rss_before = size(box.git_dir), status("VmRSS")
        try:
            with open("/proc/self/clear_refs", "w") as handle:
                handle.write("5")  # the peak (VmHWM) starts again from here
        except OSError:
            rss_before = status("VmHWM")  # the peak so far: growth past it is the submit's
        start = time.monotonic()
        observation = executor.execute(ToolCall(id="s", name="submit", arguments={}, raw=""))
        seconds = time.monotonic() - start
        print(json.dumps({"bash": out, "observation": observation, "seconds": seconds, "limit": box.max_output_chars,
                          "rss_growth_mb": status("VmHWM") - rss_before, "git_growth_mb": size(box.git_dir) - git_before,
                          "cap_mb": box.max_diff_mb, "submitted": executor.submitted}))
""")


def _measure_submit(repo: Path, command: str) -> dict:
    """Submit after ``command`` in a fresh process, so its peak memory is the submit's alone."""
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(repo), command], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_150_mib_file_is_refused_without_costing_the_host(repo):
    found = _measure_submit(repo, "head -c 157286400 /dev/zero > big.bin && echo small > note.txt && echo ok")
    assert found["bash"].strip() == "ok", found
    observation = found["observation"]
    assert not found["submitted"] and observation.startswith("Error:")
    assert "big.bin (150.0 MB)" in observation and "max_diff_mb" in observation, observation
    assert len(observation) <= found["limit"]
    assert found["rss_growth_mb"] < 50, found
    assert found["git_growth_mb"] <= found["cap_mb"], found


def test_100000_small_files_are_refused_quickly(repo):
    found = _measure_submit(repo, "mkdir many && cd many && seq 100000 | xargs touch && echo ok")
    assert found["bash"].strip() == "ok", found
    observation = found["observation"]
    assert not found["submitted"] and "max_diff_files" in observation and "many/" in observation, observation
    assert len(observation) <= found["limit"] and found["seconds"] < 15, found
    assert found["git_growth_mb"] <= found["cap_mb"], found


def test_a_diff_past_the_cap_is_refused_while_streaming(repo, tmp_path):
    big = "".join(f"line {i}\n" for i in range(200_000))  # about 2.2 MB of old content
    (repo / "big.txt").write_text(big)
    with Sandbox(repo, max_diff_mb=1, allow_unisolated=True) as box:
        os.unlink(box.root / "big.txt")  # deleting costs no new bytes, but the patch holds the old ones
        with pytest.raises(PatchRefused, match="larger than 1.0 MB"):
            box.diff()
        (box.root / "big.txt").write_text(big + "one more\n")  # 2.2 MB on disk is over the cap as well
        with pytest.raises(PatchRefused, match=r"big.txt \(2.2 MB\)"):
            box.diff()
    with Sandbox(repo, max_diff_mb=3, allow_unisolated=True) as box:
        (box.root / "big.txt").write_text(big + "one more\n")
        assert "+one more" in box.diff()


def test_the_time_limit_refuses_with_a_message(repo):
    with Sandbox(repo, diff_time_limit=1e-9, allow_unisolated=True) as box:
        (box.root / "README").write_text("changed\n")
        with pytest.raises(PatchRefused, match="diff_time_limit"):
            box.diff()
        executor = ToolExecutor(box)
        assert "diff_time_limit" in submit(executor) and not executor.submitted


def test_a_refused_patch_ends_run_agent_without_one(repo):
    with Sandbox(repo, max_diff_files=2, allow_unisolated=True) as box:
        backend = ScriptedBackend(['<tool_call>{"name": "bash", "arguments": {"command": '
                                   '"touch a b c d"}}</tool_call>'])
        traj = run_agent(backend, box, "Task.", max_steps=1)
    assert traj.patch == "" and not traj.submitted and "max_diff_files" in traj.error


# ---------------------------------------------------------------------------------------------------
# the tool layer never raises on agent input, and every observation fits


def test_a_nul_byte_is_refused_and_the_session_goes_on(box):
    executor = ToolExecutor(box)
    observation = bash(executor, "echo a\0b > f.txt")
    assert observation.startswith("Error:") and "NUL" in observation and "did not run" in observation
    assert not (box.root / "f.txt").exists()
    assert bash(executor, "echo works").strip() == "works"


def test_sandbox_errors_become_observations(box, monkeypatch):
    executor = ToolExecutor(box)

    def broken(command, **kwargs):
        raise SandboxError(f"the command's cgroup could not be made under {box.root}, so it did not run")

    monkeypatch.setattr(box, "run", broken)
    observation = bash(executor, "echo x")
    assert observation.startswith("Error: bash failed:") and "did not run" in observation
    assert str(box.root) not in observation  # the scratch path is not shown
    monkeypatch.undo()
    assert bash(executor, "echo back").strip() == "back"


def test_every_observation_fits_max_output_chars(repo):
    with Sandbox(repo, max_output_chars=1600, allow_unisolated=True) as box:
        executor = ToolExecutor(box, review_submit=True)
        long_edit = executor.execute(ToolCall(id="e", name="str_replace_editor", raw="", arguments={
            "command": "str_replace", "path": "README", "old_str": "no such text " * 200, "new_str": "x"}))
        failing = bash(executor, "yes line | head -n 2000; echo the end; exit 3")
        bash(executor, "seq 1 5000 > numbers.txt")
        review = submit(executor)
        for observation in (long_edit, failing, review):
            assert len(observation) <= 1600, observation
        assert failing.rstrip().endswith("[exit code 3]") and "the end" in failing  # head and tail kept
        assert "git status" in review and "numbers.txt" in review
        status = bash(executor, "git status --short && git diff --stat HEAD")  # how to see the rest, inside
        assert "numbers.txt" in status and "[exit code" not in status, status
        assert submit(executor) == "Submitted." and "+5000" in executor.patch


def test_review_message_cuts_only_the_diff():
    diff = "".join(f"+line {i}\n" for i in range(1000))
    full = review_message(diff)
    assert len(full) > 2000 and review_message(diff, len(full)) == full
    short = review_message(diff, 2000)
    assert len(short) <= 2000 and short.startswith(REVIEW_PREFIX) and "+line 0" in short
    assert "more characters" in short and short.rstrip().endswith("</diff>")


# ---------------------------------------------------------------------------------------------------
# cleanup never follows a symlink


def test_rmtree_never_changes_a_symlink_target(tmp_path):
    """A read-only folder holding a symlink to a 0600 file outside, and an unreadable folder: removed,
    the target's mode kept. Run as an unprivileged user (root would need no retry at all)."""
    base = Path(tempfile.mkdtemp(prefix="icml26-rmtree-", dir="/tmp"))
    try:
        target = base / "outside.txt"
        target.write_text("secret\n")
        target.chmod(0o600)
        tree_root = base / "tree"
        (tree_root / "locked").mkdir(parents=True)
        os.symlink(target, tree_root / "locked" / "link")
        os.symlink(base, tree_root / "locked" / "dirlink")
        (tree_root / "hidden" / "inner").mkdir(parents=True)
        (tree_root / "hidden" / "inner" / "f").write_text("f")
        user = {}
        if os.geteuid() == 0:
            nobody = 65534
            for path in (base, target, *tree_root.rglob("*"), tree_root):
                os.lchown(path, nobody, nobody)
            user = {"user": nobody, "group": nobody}
        base.chmod(0o755)
        (tree_root / "locked").chmod(0o500)
        (tree_root / "hidden").chmod(0o000)
        pid = os.fork()
        if pid == 0:  # the child drops to the folder's owner, removes it, and reports by its exit status
            code = 1
            try:
                if user:
                    os.setgroups([])
                    os.setgid(user["group"])
                    os.setuid(user["user"])
                rmtree(tree_root)
                code = 0
            finally:
                os._exit(code)
        assert os.waitpid(pid, 0)[1] == 0
        assert oct(target.stat().st_mode & 0o777) == oct(0o600) and oct(base.stat().st_mode & 0o777) == oct(0o755)
        assert not tree_root.exists()
    finally:
        for current, dirs, _files in os.walk(base):
            for name in dirs:
                path = os.path.join(current, name)
                if not os.path.islink(path):
                    os.chmod(path, 0o700)
        rmtree(base)
