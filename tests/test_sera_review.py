"""SERA pipeline details: the submit review step in both rollouts, and a duplicate-P1 check whose outcome
does not depend on the number of workers or on thread timing."""

from __future__ import annotations

import json
import re
import time

from icml26.agents.loop import run_agent
from icml26.agents.sandbox import Sandbox
from icml26.agents.sera import ScriptedTeacher, export, generate, plan_instances
from icml26.agents.sera.prompts import (
    UPSTREAM_SENTENCE,
    VAGUE_TEMPLATES,
    extract_pr_description,
    render_instruction,
    render_vague_issue,
)
from icml26.agents.sera.verification import changed_lines, tool_response_tokens
from icml26.agents.tools import REVIEW_PREFIX, is_review_observation

SMALL = {
    "shop/cart.py": '''
        LIMIT = 10


        def total(prices: list, discount=0):
            subtotal = sum(prices)
            result = subtotal - discount
            return round(result * 100, 2)


        class Cart:
            def add(self, item, count: int):
                self.items.append((item, count))
                return total([count])
    ''',
}


ISSUE = ("Passing `None` as `item` to `Cart.add` is not rejected; it should raise `ValueError` with the "
         "message `item is required`.")


def _names_and_observations(messages):
    answers = {m["tool_call_id"]: m["content"] for m in messages if m["role"] == "tool"}
    return [(c["function"]["name"], answers[c["id"]]) for m in messages if m["role"] == "assistant"
            for c in m.get("tool_calls") or []]


def test_teacher_removes_a_leftover_file_at_the_review_and_submits_again(tmp_path, make_git_repo):
    repo = make_git_repo(tmp_path / "repo", SMALL)
    with Sandbox(repo) as sandbox:
        (sandbox.root / "reproduce_issue.py").write_text("from shop.cart import Cart\nCart().add(None, 1)\n")
        traj = run_agent(ScriptedTeacher(q=1.0).backend(), sandbox, render_instruction(ISSUE, sandbox.display_root),
                         review_submit=True)
        assert not (sandbox.root / "reproduce_issue.py").exists()
    calls = _names_and_observations(traj.messages)
    names = [n for n, _ in calls]
    assert names[-3:] == ["submit", "bash", "submit"] and names.count("submit") == 2
    review = calls[-3][1]
    assert is_review_observation(review) and "reproduce_issue.py" in review and "+        if item is None:" in review
    assert json.loads([c for m in traj.messages if m["role"] == "assistant" for c in m.get("tool_calls") or []][-2]
                      ["function"]["arguments"])["command"].startswith("rm -f ")
    assert calls[-1][1] == "Submitted." and traj.submitted
    assert "reproduce_issue.py" not in traj.patch  # the patch is taken at the final submit
    assert changed_lines(traj.patch) == ["+        if item is None:", '+            raise ValueError("item is required")']


def test_pipeline_rollouts_end_with_the_review_and_the_filter_skips_it(tmp_path, make_git_repo):
    repo = make_git_repo(tmp_path / "repo", SMALL)
    out = tmp_path / "out"
    summary = generate(repo, ScriptedTeacher(seed=2, q=1.0), out, limit=2, progress=False, judge=False)
    records = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
    done = [r for r in records if r["status"] == "done"]
    assert done and summary.kept["T2"] == len(done)
    for record in done:
        for stage in ("t1", "t2"):
            traj = record[stage]
            calls = _names_and_observations(traj["messages"])
            assert [n for n, _ in calls[-2:]] == ["submit", "submit"]
            assert calls[-2][1].startswith(REVIEW_PREFIX) and calls[-1][1] == "Submitted."
            assert traj["submitted"] and traj["exit_reason"] == "submitted"
            # the review quotes the final patch (nothing was cleaned up in between) and is not counted
            assert calls[-2][1].split("<diff>\n", 1)[1].split("\n</diff>")[0] == traj["patch"].rstrip("\n")
            counted = tool_response_tokens(traj["messages"])
            assert len(counted) == len(calls) - 2
        assert record["recall"] == 1.0
    # with the review turned off, the first submit ends each rollout
    plain = tmp_path / "plain"
    generate(repo, ScriptedTeacher(seed=2, q=1.0), plain, limit=2, progress=False, judge=False, review_submit=False)
    for line in (plain / "ledger.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["status"] == "done":
            names = [n for n, _ in _names_and_observations(record["t1"]["messages"])]
            assert names.count("submit") == 1 and names[-1] == "submit"


# ------------------------------------------------------------------------------- duplicate P1s

class _SameEditPolicy:
    """Every instance of a function makes the same one-line change, so P1s repeat across instances.

    The first rollout of the instance with index i waits (n - i) * delay before editing, so with
    several workers later instances reach the duplicate check first: only an order-independent
    check gives the one-worker result.
    """

    def __init__(self, repo, n, delay=0.25):
        self.index_of = {}
        for inst in plan_instances(repo, insts_per_fn=n // 2, limit=n):
            self.index_of.setdefault(render_vague_issue(VAGUE_TEMPLATES[inst.template], inst.function, inst.file),
                                     inst.index)
        self.n, self.delay = n, delay

    def __call__(self, messages, tools=None):
        users = [m["content"] for m in messages if m["role"] == "user"]
        if tools is None:  # synthetic issue or judge
            if "<demonstration>" in users[-1]:
                name = re.search(r"# note on ([\w.]+)", users[-1]).group(1)
                return {"role": "assistant", "content": f"<issue>\nPlease document `{name}`.\n</issue>"}
            return {"role": "assistant", "content": "yes"}
        pr = extract_pr_description(users[0])
        name = re.search(r"`([A-Za-z_][\w.]*)`", pr).group(1)
        turn = sum(m["role"] == "assistant" for m in messages)
        call_id = f"call_{turn}"
        if turn == 0:
            if UPSTREAM_SENTENCE.format(start_fn=name) in pr:
                time.sleep((self.n - self.index_of[pr]) * self.delay)
            command = f"echo '# note on {name}' >> shop/cart.py"
            return {"role": "assistant", "content": "Adding the note.", "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "bash",
                                                                  "arguments": json.dumps({"command": command})}}]}
        return {"role": "assistant", "content": "Done.", "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": "submit", "arguments": "{}"}}]}


def test_duplicate_first_patches_keep_the_lowest_index_with_any_number_of_workers(tmp_path, make_git_repo):
    from icml26.agents.backends import ScriptedBackend

    repo = make_git_repo(tmp_path / "repo", SMALL)  # two seed functions: total and Cart.add
    n = 6
    results = {}
    for workers in (1, 3):
        out = tmp_path / f"w{workers}"
        summary = generate(repo, ScriptedBackend(_SameEditPolicy(repo, n)), out, limit=n, insts_per_fn=n // 2,
                           workers=workers, progress=False)
        records = {r["id"]: r for r in map(json.loads, (out / "ledger.jsonl").read_text().splitlines())}
        status = {d["id"]: d["status"] for d in summary.instances}
        kept = sorted(json.loads(line)["id"] for line in (out / "trajectories.jsonl").read_text().splitlines())
        results[workers] = (kept, status, summary.status_counts, summary.kept)
        # of each group of identical P1s, the lowest index is the one whose second rollout is exported
        groups = {}
        for r in records.values():
            groups.setdefault(r["t1"]["patch"], []).append(r)
        assert len(groups) == 2 and all(len(g) == n // 2 for g in groups.values())
        for group in groups.values():
            group.sort(key=lambda r: r["index"])
            assert group[0]["status"] == "done" and group[0]["t2"] is not None
            assert f"{group[0]['id']}-T2" in kept
            assert all(status[r["id"]] == "duplicate" and f"{r['id']}-T2" not in kept for r in group[1:])
        # a new export from the ledger gives the same answer
        assert export(out).status_counts == summary.status_counts
    assert results[1] == results[3]
    assert results[1][2] == {"done": 2, "duplicate": n - 2}


def test_a_rollout_stopped_at_the_review_is_not_submitted_and_is_filtered(tmp_path, make_git_repo):
    from icml26.agents.sera.verification import filter_trajectory

    repo = make_git_repo(tmp_path / "repo", SMALL)
    with Sandbox(repo) as sandbox:
        task = render_instruction(ISSUE, sandbox.display_root)
        full = run_agent(ScriptedTeacher(q=1.0).backend(), sandbox, task, review_submit=True)
        sandbox.reset()
        # stop right after the first submit: the review was shown, nothing was submitted
        cut = run_agent(ScriptedTeacher(q=1.0).backend(), sandbox, task, review_submit=True, max_steps=full.steps - 1)
    assert full.submitted and (cut.submitted, cut.exit_reason) == (False, "step_limit")
    assert is_review_observation(cut.messages[-1]["content"]) and cut.patch == full.patch
    assert filter_trajectory(cut.messages, cut.patch, cut.submitted).reasons == ["not_submitted"]
    assert filter_trajectory(full.messages, full.patch, full.submitted).keep


def test_resolve_duplicates_rules():
    from icml26.agents.sera.exporter import resolve_duplicates

    patch = "diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1 +1 @@\n-a\n+b\n"

    def rec(i, status, claimed=True, p=patch):
        return {"id": f"i{i}", "index": i, "status": status, "p1_claimed": claimed, "t1": {"patch": p},
                "t2": {"patch": p} if status == "done" else None, "recall": 1.0 if status == "done" else None,
                "synthetic_pr": "x", "judge_ok": True, "duplicate": status == "duplicate"}

    # a failure before the check (rollout 1) holds nothing; the lowest index that claimed keeps the P1
    out = resolve_duplicates([rec(0, "error", None), rec(1, "judged_invalid"), rec(2, "done"),
                              rec(3, "duplicate", False), rec(4, "done", p=patch.replace("+b", "+c"))])
    assert [r["status"] for r in out] == ["error", "judged_invalid", "duplicate", "duplicate", "done"]
    assert out[2]["t2"] is None and out[2]["recall"] is None and out[2]["judge_ok"] is None
    # a failure after claiming (pull request, judge, rollout 2) held the P1 at run time: it still does
    # at export, as a one-worker run would have had it, and stays "error" (retried on resume)
    out = resolve_duplicates([rec(0, "error"), rec(1, "judged_invalid"), rec(2, "done")])
    assert [r["status"] for r in out] == ["error", "duplicate", "duplicate"]
    assert out[0]["t2"] is None and out[0]["synthetic_pr"] == "x"
    # runs without the check (dedupe=False) are left as they are
    same = [rec(0, "done", None), rec(1, "done", None)]
    assert resolve_duplicates(same) == same
