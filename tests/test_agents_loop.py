"""The tools (bash, str_replace_editor, submit) and the agent loop: step limit, exit reasons and the
trajectory's OpenAI chat format."""

from __future__ import annotations

import json
import os

import pytest

from icml26.agents.backends import BackendError, ScriptedBackend, to_template_messages
from icml26.agents.loop import Trajectory, run_agent
from icml26.agents.sandbox import Sandbox, isolation_support
from icml26.agents.toolcalls import ToolCall
from icml26.agents.tools import BASH_TOOL, EDITOR_TOOL, SUBMIT_TOOL, ToolExecutor, default_tools


@pytest.fixture
def box(tmp_path, make_git_repo):
    repo = make_git_repo(tmp_path / "repo", {"src/app.py": "def add(a, b):\n    return a - b\n\n\nprint(add(1, 2))\n",
                                             "src/dup.py": "x = 1\nx = 1\n"}, commit=False)  # untracked: copied too
    # allow_unisolated: these tests are about the tools, not isolation (tested in test_agents_sandbox)
    with Sandbox(repo, time_limit=20, allow_unisolated=True) as sandbox:
        yield sandbox


def call(name, **arguments):
    return ToolCall(id="t", name=name, arguments=arguments, raw=json.dumps(arguments))


def edit(executor, **arguments):
    return executor.execute(call("str_replace_editor", **arguments))


# ---------------------------------------------------------------------------------------------------
# editor


def test_view_file_and_range(box):
    ex = ToolExecutor(box)
    out = edit(ex, command="view", path="src/app.py")
    assert out.startswith("Here's the result of running `cat -n` on src/app.py")
    assert "     1\tdef add(a, b):\n     2\t    return a - b" in out
    part = edit(ex, command="view", path=str(box.root / "src" / "app.py"), view_range=[2, 2])
    assert "     2\t    return a - b" in part and "def add" not in part
    assert "     5\tprint(add(1, 2))" in edit(ex, command="view", path="src/app.py", view_range=[5, -1])
    assert "outside the file's lines" in edit(ex, command="view", path="src/app.py", view_range=[0, 2])
    assert "must be -1 or within" in edit(ex, command="view", path="src/app.py", view_range=[3, 99])
    assert "two integers" in edit(ex, command="view", path="src/app.py", view_range="1-2")


def test_view_directory(box):
    (box.root / "src" / "deep" / "deeper" / "deepest").mkdir(parents=True)
    (box.root / ".hidden").write_text("")
    out = edit(ToolExecutor(box), command="view", path=".")
    assert out.splitlines()[1:] == [".", "src", "src/app.py", "src/deep", "src/dup.py"]  # like find -maxdepth 2


def test_create_refuses_to_overwrite(box):
    ex = ToolExecutor(box)
    assert "File created successfully at: pkg/new.py" in edit(ex, command="create", path="pkg/new.py", file_text="A\n")
    assert (box.root / "pkg" / "new.py").read_text() == "A\n"
    assert "already exists" in edit(ex, command="create", path="pkg/new.py", file_text="B\n")
    assert (box.root / "pkg" / "new.py").read_text() == "A\n"


def test_str_replace_unique_missing_and_ambiguous(box):
    ex = ToolExecutor(box)
    out = edit(ex, command="str_replace", path="src/app.py", old_str="return a - b", new_str="return a + b")
    assert "has been edited" in out and "     2\t    return a + b" in out
    assert "return a + b" in (box.root / "src" / "app.py").read_text()
    assert "did not appear verbatim" in edit(ex, command="str_replace", path="src/app.py", old_str="nope", new_str="x")
    ambiguous = edit(ex, command="str_replace", path="src/dup.py", old_str="x = 1", new_str="x = 2")
    assert "occurs 2 times, in lines [1, 2]" in ambiguous
    assert (box.root / "src" / "dup.py").read_text() == "x = 1\nx = 1\n"
    deleted = edit(ex, command="str_replace", path="src/dup.py", old_str="x = 1\nx = 1\n")  # new_str omitted
    assert "has been edited" in deleted and (box.root / "src" / "dup.py").read_text() == ""


def test_insert_and_undo(box):
    ex = ToolExecutor(box)
    out = edit(ex, command="insert", path="src/app.py", insert_line=0, new_str="import os")
    assert "     1\timport os" in out
    assert (box.root / "src" / "app.py").read_text().startswith("import os\ndef add")
    edit(ex, command="insert", path="src/app.py", insert_line="2", new_str="    # doc")  # int given as text
    assert (box.root / "src" / "app.py").read_text().splitlines()[2] == "    # doc"
    assert "outside the file's lines" in edit(ex, command="insert", path="src/app.py", insert_line=99, new_str="x")
    assert "undone" in edit(ex, command="undo_edit", path="src/app.py")
    assert "undone" in edit(ex, command="undo_edit", path="src/app.py")
    assert (box.root / "src" / "app.py").read_text().startswith("def add")
    assert "no edit history" in edit(ex, command="undo_edit", path="src/app.py")
    edit(ex, command="create", path="made.txt", file_text="x")
    assert "removed" in edit(ex, command="undo_edit", path="made.txt")
    assert not (box.root / "made.txt").exists()


def test_editor_stays_inside_the_repository(box, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host file\n")
    os.symlink(secret, box.root / "link.txt")
    ex = ToolExecutor(box)
    for path in (str(secret), "../../etc/passwd", "link.txt", "/etc/passwd"):
        out = edit(ex, command="view", path=path)
        assert "outside the repository" in out, (path, out)
    assert "outside the repository" in edit(ex, command="str_replace", path="link.txt", old_str="host", new_str="x")
    assert "outside the repository" in edit(ex, command="create", path="../escape.txt", file_text="x")
    assert secret.read_text() == "host file\n"
    assert not (box.root.parent / "escape.txt").exists()


@pytest.mark.parametrize("arguments, match", [
    ({"command": "view"}, "missing required argument `path`"),
    ({"path": "src/app.py"}, "missing required argument `command`"),
    ({"command": "delete", "path": "src/app.py"}, "unknown editor command 'delete'"),
    ({"command": "create", "path": "a.py"}, "missing required argument `file_text`"),
    ({"command": "create", "path": "a.py", "file_text": 5}, "`file_text` must be str"),
    ({"command": "insert", "path": "src/app.py", "insert_line": True, "new_str": "x"}, "`insert_line` must be int"),
    ({"command": "view", "path": "src/missing.py"}, "does not exist"),
    ({"command": "str_replace", "path": "src", "old_str": "a", "new_str": "b"}, "is a directory"),
])
def test_editor_input_errors_are_observations(box, arguments, match):
    out = ToolExecutor(box).execute(call("str_replace_editor", **arguments))
    assert out.startswith("Error:") and match in out


def test_binary_files_are_not_shown(box):
    (box.root / "blob.bin").write_bytes(b"\x00\x01\x02")
    assert "binary file" in edit(ToolExecutor(box), command="view", path="blob.bin")


# ---------------------------------------------------------------------------------------------------
# bash, submit, malformed calls


def test_bash_tool_reports_output_exit_code_and_timeout(box):
    ex = ToolExecutor(box)
    assert ex.execute(call("bash", command="python src/app.py")) == "-1\n"
    failing = ex.execute(call("bash", command="echo oops >&2; exit 4"))
    assert failing == "oops\n\n[exit code 4]"
    assert ex.execute(call("bash", command="true")) == "[no output]"
    box.time_limit = 1
    assert "exceeded its time limit of 1 s" in ex.execute(call("bash", command="sleep 30"))
    assert "`command` is empty" in ex.execute(call("bash", command="  "))


def test_malformed_and_unknown_calls(box):
    ex = ToolExecutor(box)
    bad = ToolCall(id="x", name="bash", arguments=None, raw="{oops", error="malformed tool call: invalid JSON")
    out = ex.execute(bad)
    assert out.startswith("Error: malformed tool call: invalid JSON") and "available tools: bash" in out
    assert "unknown tool 'rm_rf'" in ex.execute(call("rm_rf"))
    limited = ToolExecutor(box, tools=[BASH_TOOL])
    assert "unknown tool 'str_replace_editor'" in limited.execute(call("str_replace_editor", command="view", path="."))


def test_submit_records_the_patch(box):
    ex = ToolExecutor(box)
    edit(ex, command="str_replace", path="src/app.py", old_str="a - b", new_str="a + b")
    assert ex.execute(call("submit")) == "Submitted."
    assert ex.submitted and "+    return a + b" in ex.patch


def test_tool_schemas():
    names = [t["function"]["name"] for t in default_tools()]
    assert names == ["bash", "str_replace_editor", "submit"]
    assert EDITOR_TOOL["function"]["parameters"]["properties"]["command"]["enum"] == [
        "view", "create", "str_replace", "insert", "undo_edit"]
    assert SUBMIT_TOOL["function"]["parameters"]["required"] == []
    default_tools()[0]["function"]["name"] = "changed"
    assert BASH_TOOL["function"]["name"] == "bash"  # copies, not the module's schemas


# ---------------------------------------------------------------------------------------------------
# the loop


def _bash(command, call_id=None):
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id or f"c{abs(hash(command)) % 1000}", "type": "function",
         "function": {"name": "bash", "arguments": json.dumps({"command": command})}}]}


def test_fix_and_submit_trajectory_format(box):
    script = [
        'I will run it.\n<tool_call>\n{"name": "bash", "arguments": {"command": "python src/app.py"}}\n</tool_call>',
        '<tool_call>\n{"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "src/app.py", '
        '"old_str": "a - b", "new_str": "a + b"}}\n</tool_call>',
        "<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": </tool_call>",  # malformed
        '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
    ]
    traj = run_agent(ScriptedBackend(script), box, "Fix add().", max_steps=10)
    assert (traj.exit_reason, traj.submitted, traj.steps) == ("submitted", True, 4)
    assert "+    return a + b" in traj.patch
    assert traj.tools == default_tools()
    roles = [m["role"] for m in traj.messages]
    assert roles == ["system", "user"] + ["assistant", "tool"] * 4
    assert traj.messages[1] == {"role": "user", "content": "Fix add()."}
    for assistant, tool in zip(traj.messages[2::2], traj.messages[3::2]):
        (tool_call,) = assistant["tool_calls"]
        assert tool_call["type"] == "function" and isinstance(tool_call["function"]["arguments"], str)
        assert tool["tool_call_id"] == tool_call["id"] and tool["name"] == tool_call["function"]["name"]
    assert traj.messages[2]["content"] == "I will run it."
    assert traj.messages[3]["content"] == "-1\n"
    assert traj.messages[7]["content"].startswith("Error: malformed tool call")
    assert [c["name"] for c in traj.tool_calls()] == ["bash", "str_replace_editor", "bash", "submit"]
    assert traj.usage.prompt_tokens > 0 and traj.usage.completion_tokens > 0
    data = json.loads(json.dumps(traj.to_dict()))
    assert Trajectory.from_dict(data).to_dict() == traj.to_dict()
    assert data["exit_reason"] == "submitted" and data["usage"]["total_tokens"] == traj.usage.total_tokens


def test_step_limit(box):
    backend = ScriptedBackend(lambda messages, tools: _bash("echo step"))
    traj = run_agent(backend, box, "Loop forever.", max_steps=3)
    assert (traj.exit_reason, traj.steps, traj.submitted) == ("step_limit", 3, False)
    assert len(backend.calls) == 3
    assert [m["role"] for m in traj.messages].count("tool") == 3
    assert traj.patch == ""


def test_no_tool_call_ends_the_run_or_gets_reminders(box):
    traj = run_agent(ScriptedBackend(["I give up."]), box, "Task.")
    assert (traj.exit_reason, traj.steps) == ("no_tool_call", 1)
    assert traj.messages[-1] == {"role": "assistant", "content": "I give up."}
    backend = ScriptedBackend(["Hmm.", '<tool_call>{"name": "submit", "arguments": {}}</tool_call>'])
    traj = run_agent(backend, box, "Task.", no_tool_call_retries=1)
    assert traj.exit_reason == "submitted" and traj.steps == 2
    assert traj.messages[3]["role"] == "user" and "did not call a tool" in traj.messages[3]["content"]


def test_backend_error_is_recorded(box):
    traj = run_agent(ScriptedBackend([_bash("echo hi > x.txt")]), box, "Task.")
    assert traj.exit_reason == "backend_error" and "ran out of responses" in traj.error
    assert traj.steps == 1 and "+hi" in traj.patch


def test_calls_after_submit_are_not_executed(box):
    reply = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "s", "type": "function", "function": {"name": "submit", "arguments": "{}"}},
        {"id": "b", "type": "function", "function": {"name": "bash", "arguments": '{"command": "echo late > late.txt"}'}}]}
    traj = run_agent(ScriptedBackend([reply]), box, "Task.")
    assert traj.exit_reason == "submitted"
    assert traj.messages[-1] == {"role": "tool", "tool_call_id": "b", "name": "bash",
                                 "content": "Not executed: the task was already submitted."}
    assert not (box.root / "late.txt").exists()


def test_sampling_and_system_prompt_reach_the_backend(box):
    backend = ScriptedBackend(['<tool_call>{"name": "submit", "arguments": {}}</tool_call>'])
    run_agent(backend, box, "Task.", system_prompt="Be brief.", tools=[SUBMIT_TOOL],
              sampling={"temperature": 0.6, "max_tokens": 32})
    request = backend.calls[0]
    assert request["messages"][0] == {"role": "system", "content": "Be brief."}
    assert request["tools"] == [SUBMIT_TOOL] and request["sampling"] == {"temperature": 0.6, "max_tokens": 32}


def test_trajectory_renders_with_a_chat_template(box, tiny_llama_path):
    from transformers import AutoTokenizer

    traj = run_agent(ScriptedBackend([_bash("ls src", "c1"), '<tool_call>{"name": "submit"}</tool_call>']), box, "T.")
    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_path)
    text = tokenizer.apply_chat_template(to_template_messages(traj.messages), tools=traj.tools, tokenize=False)
    assert '"arguments": {"command": "ls src"}' in text
    assert "<tool_response>\napp.py\ndup.py\n" in text


@pytest.mark.parametrize("kwargs, match", [
    (dict(task=""), "task"),
    (dict(task="t", max_steps=0), "max_steps"),
])
def test_bad_loop_arguments(box, kwargs, match):
    with pytest.raises(ValueError, match=match):
        run_agent(ScriptedBackend([]), box, **kwargs)


def test_scripted_backend_error_type():
    assert issubclass(BackendError, RuntimeError)


# ---------------------------------------------------------------------------------------------------
# submit with SWE-agent's review step


def test_review_submit_shows_the_diff_then_submits_the_final_state(box):
    from icml26.agents.tools import REVIEW_PREFIX, is_review_observation

    ex = ToolExecutor(box, review_submit=True)
    edit(ex, command="str_replace", path="src/app.py", old_str="a - b", new_str="a + b")
    edit(ex, command="create", path="reproduce.py", file_text="print('repro')\n")
    review = ex.execute(call("submit"))
    assert review.startswith(REVIEW_PREFIX) and is_review_observation(review)
    assert not ex.submitted and ex.patch is None
    diff = review.split("<diff>\n", 1)[1].split("\n</diff>", 1)[0]
    assert diff == box.diff().rstrip("\n") and "+    return a + b" in diff and "reproduce.py" in diff
    assert "reproduction script" in review and "submit" in review
    # the revert command the review suggests works in the sandbox (its git metadata is read-only)
    (box.root / "src" / "dup.py").write_text("x = 2\n")
    assert "git show HEAD:path/to/test_file.py > path/to/test_file.py" in review
    ex.execute(call("bash", command="git show HEAD:src/dup.py > src/dup.py"))
    assert (box.root / "src" / "dup.py").read_text() == "x = 1\nx = 1\n"
    ex.execute(call("bash", command="rm reproduce.py"))
    assert ex.execute(call("submit")) == "Submitted."
    assert ex.submitted and "+    return a + b" in ex.patch and "reproduce.py" not in ex.patch
    assert not is_review_observation("Submitted.") and not is_review_observation(None)
    with pytest.raises(TypeError, match="ToolExecutor: review_submit: expected a bool"):
        ToolExecutor(box, review_submit="yes")


def test_run_agent_with_review_submit(box):
    script = [
        '<tool_call>\n{"name": "str_replace_editor", "arguments": {"command": "str_replace", "path": "src/app.py", '
        '"old_str": "a - b", "new_str": "a + b"}}\n</tool_call>',
        '<tool_call>\n{"name": "bash", "arguments": {"command": "echo x > scratch.py"}}\n</tool_call>',
        '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
        '<tool_call>\n{"name": "bash", "arguments": {"command": "rm scratch.py"}}\n</tool_call>',
        '<tool_call>\n{"name": "submit", "arguments": {}}\n</tool_call>',
    ]
    traj = run_agent(ScriptedBackend(script), box, "Fix add().", max_steps=10, review_submit=True)
    assert (traj.exit_reason, traj.submitted, traj.steps) == ("submitted", True, 5)
    observations = [c["observation"] for c in traj.tool_calls()]
    assert observations[2].startswith("Thank you for your work on this issue.") and "scratch.py" in observations[2]
    assert observations[-1] == "Submitted." and "scratch.py" not in traj.patch and "+    return a + b" in traj.patch
    # without the option (the default) the first submit ends the run, as before
    box.reset()
    plain = run_agent(ScriptedBackend(script[:3]), box, "Fix add().", max_steps=10)
    assert plain.submitted and plain.steps == 3 and "scratch.py" in plain.patch


# ---------------------------------------------------------------------------------------------------
# the fixed path: trajectories quote /testbed, never the random scratch folder

_needs_isolation = pytest.mark.skipif(isolation_support()[0] is None, reason="no namespace isolation here")


@_needs_isolation
def test_scripted_teacher_trajectory_uses_only_the_fixed_path(tmp_path, make_git_repo):
    from icml26.agents.sera import ScriptedTeacher
    from icml26.agents.sera.prompts import render_instruction
    from icml26.agents.sera.verification import changed_lines

    repo = make_git_repo(tmp_path / "repo", {"shop/cart.py": "class Cart:\n    def add(self, item, count: int):\n"
                                             "        self.items.append((item, count))\n        return count\n"},
                         commit=False)
    issue = ("Passing `None` as `item` to `Cart.add` is not rejected; it should raise `ValueError` with the "
             "message `item is required`.")
    with Sandbox(repo, time_limit=20) as sandbox:
        assert sandbox.display_root == "/testbed"
        (sandbox.root / "reproduce_issue.py").write_text("from shop.cart import Cart\nCart().add(None, 1)\n")
        traj = run_agent(ScriptedTeacher(q=1.0).backend(), sandbox, render_instruction(issue, sandbox.display_root),
                         review_submit=True)
        assert not (sandbox.root / "reproduce_issue.py").exists()  # the review's `rm -f /testbed/...` worked
        scratch = str(sandbox.root)
    assert traj.submitted and changed_lines(traj.patch) == ["+        if item is None:",
                                                            '+            raise ValueError("item is required")']
    dump = json.dumps(traj.to_dict())
    assert "/testbed/shop/cart.py" in dump  # the search, the outline and the edit used the fixed path
    assert scratch not in dump and "icml26-sandbox-" not in dump


def test_editor_errors_do_not_show_the_scratch_path(box):
    ex = ToolExecutor(box)
    out = edit(ex, command="create", path=f"{box.display_root}/src/app.py/inner.py", file_text="x")  # a file
    assert out.startswith("Error: str_replace_editor failed: FileExistsError"), out
    assert f"{box.display_root}/src/app.py" in out
    if box.display_root != str(box.root):  # isolated: the fixed path is all an agent sees
        assert str(box.root) not in out
