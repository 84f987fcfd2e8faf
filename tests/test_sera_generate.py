"""SERA's SVG pipeline: seeds, prompts, the scripted teacher's edits, end-to-end generation, resume."""

import json
import random
import re
import signal
import subprocess
import sys
import time

import pytest

from icml26.agents.sera import (
    RepoError,
    ScriptedTeacher,
    export,
    find_seed_functions,
    generate,
    make_git_repo_from_package,
    plan_instances,
    run_instance,
)
from icml26.agents.sera import cli as sera_cli
from icml26.agents.sera.exporter import Ledger
from icml26.agents.sera.prompts import (
    CATEGORIES,
    UPSTREAM_SENTENCE,
    VAGUE_TEMPLATES,
    load_demonstrations,
    render_vague_issue,
)
from icml26.agents.sera.scripted.edits import FAMILIES, EditSpec, apply_edit, candidates, parse_fact, parse_function
from icml26.agents.sera.scripted.teacher import demonstration_style, render_issue
from icml26.agents.sera.verification import changed_lines

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
    "shop/tests/test_cart.py": "def test_total():\n    assert True\n",
    "a/b/c/d/deep.py": "def deep():\n    x = 1\n    return x\n",
}


@pytest.fixture(scope="module")
def package_repo(tmp_path_factory):
    """A real pure-Python package (packaging, a dependency of transformers) as a one-commit git repo."""
    return make_git_repo_from_package("packaging", tmp_path_factory.mktemp("pkg") / "repo")


# ---------------------------------------------------------------------------------- seeds and prompts

def test_seed_functions_and_call_graph(tmp_path, make_git_repo):
    repo = make_git_repo(tmp_path, SMALL)
    fns = {f.qualname: f for f in find_seed_functions(repo)}
    assert set(fns) == {"total", "Cart.add"}  # tests/ and folders deeper than 3 are skipped
    assert fns["total"].file == "shop/cart.py" and fns["total"].lineno == 5
    assert "shop/cart.py::total" in fns["Cart.add"].callees
    assert "shop/cart.py::Cart.add" in fns["total"].callers


def test_not_a_git_repository_is_a_clear_error(tmp_path, run_cli):
    (tmp_path / "m.py").write_text("def f():\n    return 1\n")
    with pytest.raises(RepoError, match="generate: repo: expected the root of a git repository.*not under git"):
        generate(tmp_path, "scripted", tmp_path / "out", limit=1, progress=False)
    result = run_cli(["sera", "generate", "--repo", str(tmp_path), "--backend", "scripted", "--out",
                      str(tmp_path / "out")], cwd=tmp_path)
    assert result.returncode == 2 and "--repo: expected the root of a git repository" in result.stderr
    assert "not under git" in result.stderr
    with pytest.raises(RepoError, match="find_seed_functions: repo: .* which is not a folder"):
        find_seed_functions(tmp_path / "missing")


def test_make_git_repo_from_package_is_reproducible(tmp_path, package_repo):
    again = make_git_repo_from_package("packaging", tmp_path / "again")
    head = lambda p: subprocess.run(["git", "-C", str(p), "rev-parse", "HEAD"], capture_output=True,
                                    text=True).stdout
    assert head(again) == head(package_repo) and (again / "packaging" / "version.py").is_file()
    with pytest.raises(RepoError, match="name: expected the import name .* not installed"):
        make_git_repo_from_package("no_such_package_xyz", tmp_path / "x")


def test_templates_and_demonstrations(tmp_path):
    assert len(VAGUE_TEMPLATES) >= 20 and {c for c, _ in VAGUE_TEMPLATES} == set(CATEGORIES)
    for template in VAGUE_TEMPLATES:
        text = render_vague_issue(template, "Parser.parse", "pkg/parser.py")
        assert "`Parser.parse`" in text and "`pkg/parser.py`" in text
        assert text.endswith(UPSTREAM_SENTENCE.format(start_fn="Parser.parse"))
    demos = load_demonstrations()
    assert 5 <= len(demos) <= 10 and all(len(d.split()) > 10 for d in demos)
    (tmp_path / "one.md").write_text("My issue")
    (tmp_path / "issues.jsonl").write_text(json.dumps({"problem_statement": "A"}) + "\n" + json.dumps("B") + "\n")
    assert load_demonstrations(tmp_path / "one.md") == ["My issue"]
    assert load_demonstrations(tmp_path / "issues.jsonl") == ["A", "B"]
    with pytest.raises(ValueError, match="load_demonstrations: source: .* which does not exist"):
        load_demonstrations(tmp_path / "nope")
    (tmp_path / "bad.json").write_text(json.dumps([{"title": "x"}]))
    with pytest.raises(ValueError, match="problem_statement"):
        load_demonstrations(tmp_path / "bad.json")


def test_plan_is_stable_and_ids_unique(tmp_path, make_git_repo):
    repo = make_git_repo(tmp_path, SMALL)
    plan = plan_instances(repo, seed=3, insts_per_fn=3)
    assert plan == plan_instances(repo, seed=3, insts_per_fn=3)
    assert len({i.id for i in plan}) == len(plan) == 6
    assert plan_instances(repo, seed=3, insts_per_fn=3, limit=4) == plan[:4]


# ---------------------------------------------------------------------------------- teacher pieces

FUNCTION = '''\
    def resize(self, image, width: int, scale=1.5):
        ratio = width / image.width
        height = int(image.height * ratio * scale)
        out = self.backend.scale(image, width, height)
        return Frame(out, width + 3)
'''


def test_every_edit_family_applies_and_round_trips():
    fs = parse_function(FUNCTION.splitlines(), "resize")
    specs = candidates(fs, "Viewer.resize")
    assert {s.family for s in specs} == set(FAMILIES) - {"extract_helper"}  # methods get no module helper
    for spec in specs:
        new = apply_edit(fs, spec)
        assert new != fs.text and parse_function(new.splitlines(), "resize") is not None
        assert parse_fact(spec.fact()) == spec
        noisy = apply_edit(fs, spec, q=0.0, rng=random.Random(0))
        added_clean = {l for l in new.splitlines() if l.strip()} - set(fs.lines)
        added_noisy = {l for l in noisy.splitlines() if l.strip()} - set(fs.lines)
        assert added_clean and not added_clean & added_noisy  # q = 0 rewrites every new (non-blank) line
    fs_top = parse_function([l[4:] for l in FUNCTION.splitlines()], "resize")
    helper = [s for s in candidates(fs_top, "resize") if s.family == "extract_helper"]
    assert helper and "def _resize_result(out, width):\n    return Frame(out, width + 3)" in apply_edit(fs_top, helper[0])


def test_issue_follows_the_demonstration_and_states_the_problem():
    spec = EditSpec("guard_none", "Table.merge", {"param": "other", "message": "other must not be None"})
    structured, terse = load_demonstrations()[1], load_demonstrations()[3]
    text = render_issue(spec, demonstration_style(structured), "tablekit.table", random.Random(0))
    assert "### Expected behavior" in text and "### Steps to reproduce" in text
    short = render_issue(spec, demonstration_style(terse), "tablekit.table", random.Random(0))
    assert "\n" not in short and "###" not in short
    for issue in (text, short):
        assert parse_fact(issue) == spec
        assert not re.search(r"\bdiff\b|\btests?\b|raise ValueError\(", issue, re.I)


def test_teacher_acts_from_a_hand_written_issue(tmp_path, make_git_repo):
    """No side channel: an issue the pipeline never wrote drives the second-rollout behaviour."""
    from icml26.agents.loop import run_agent
    from icml26.agents.sandbox import Sandbox
    from icml26.agents.sera.prompts import render_instruction

    repo = make_git_repo(tmp_path, SMALL)
    issue = "Passing `None` as `item` to `Cart.add` is not rejected; it should raise `ValueError` with the " \
            "message `item is required`."
    with Sandbox(repo) as sandbox:
        traj = run_agent(ScriptedTeacher(q=1.0).backend(), sandbox, render_instruction(issue, sandbox.display_root))
    assert traj.submitted and changed_lines(traj.patch) == ["+        if item is None:",
                                                             '+            raise ValueError("item is required")']
    names = [c["name"] for c in traj.tool_calls()]
    assert names[0] == "bash" and "str_replace_editor" in names and names[-1] == "submit"


# ------------------------------------------------------------------------------------- end to end

def test_generate_end_to_end(tmp_path, package_repo):
    out = tmp_path / "out"
    summary = generate(package_repo, ScriptedTeacher(seed=1, q=(0.2, 1.0)), out, threshold=0.5, limit=5,
                       progress=False)
    assert summary.planned == summary.completed == 5 and "error" not in summary.status_counts
    from datasets import load_from_disk

    ds = load_from_disk(str(out / "dataset"))
    rows = [json.loads(l) for l in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len(ds) == len(rows) == summary.kept["T1"] + summary.kept["T2"] > 0
    assert {"id", "stage", "messages", "tools", "recall", "patch", "n_changed_lines", "submitted", "function",
            "category", "repo", "prompt_tokens", "completion_tokens", "truncation_ratio"} <= set(ds.column_names)
    assert len({r["id"] for r in rows}) == len(rows)
    for row in ds:
        assert row["submitted"] and row["n_changed_lines"] > 0 and row["truncation_ratio"] == 1.0
        assert [m["role"] for m in row["messages"][:2]] == ["system", "user"]
        calls = [c for m in row["messages"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert calls[-1]["function"]["name"] == "submit"
        assert all(isinstance(c["function"]["arguments"], dict) for c in calls)  # TRL-ready: objects
        wire = [c for m in row["messages_openai"] if m["role"] == "assistant" for c in m.get("tool_calls") or []]
        assert [json.loads(c["function"]["arguments"]) for c in wire] == [c["function"]["arguments"] for c in calls]
        answered = {m["tool_call_id"] for m in row["messages"] if m["role"] == "tool"}
        assert answered == {c["id"] for c in calls}
        if row["stage"] == "T2":
            assert row["recall"] >= 0.5 and "<pr_description>" in row["messages"][1]["content"]
            assert "upstream/downstream" not in row["messages"][1]["content"]
        else:
            assert row["recall"] is None and "upstream/downstream" in row["messages"][1]["content"]
    # every second rollout carries its recall, kept or not, and yields at any threshold follow
    recalls = [i["recall"] for i in summary.instances if i["status"] == "done"]
    assert recalls and all(r is not None for r in recalls)
    saved = json.loads((out / "summary.json").read_text())
    assert saved["tokens"]["total"] > 0 and saved["by_threshold"]["0.5"]["kept"] == len(rows)
    assert summary.kept_per_token(0.5) >= summary.kept_per_token(1.0) > 0
    hard = export(out, threshold=1.0)
    assert hard.kept["T2"] == sum(r == 1.0 for r in recalls) <= summary.kept["T2"]


def test_same_seed_gives_the_same_trajectories(tmp_path, package_repo):
    # The sandbox's scratch folder has a random name that appears in every task: it must not leak
    # into the scripted teacher's choices.
    kept = []
    for run in ("a", "b"):
        generate(package_repo, ScriptedTeacher(seed=3, q=(0.2, 1.0)), tmp_path / run, limit=4, progress=False)
        rows = [json.loads(l) for l in (tmp_path / run / "trajectories.jsonl").read_text().splitlines()]
        kept.append(sorted((r["id"], r["recall"], r["patch"]) for r in rows))
    assert kept[0] == kept[1] and kept[0]


def test_recall_follows_the_teacher_noise(tmp_path, package_repo):
    exact = generate(package_repo, ScriptedTeacher(q=1.0), tmp_path / "a", limit=2, progress=False, judge=False)
    assert [i["recall"] for i in exact.instances if i["status"] == "done"] == [1.0] * 2
    noisy = generate(package_repo, ScriptedTeacher(q=0.0), tmp_path / "b", limit=2, progress=False, judge=False)
    # q = 0 rewrites every added line: only removed lines can still match
    for inst in noisy.instances:
        assert inst["status"] == "done" and inst["recall"] < 1.0


def test_duplicate_first_patches_are_dropped(package_repo):
    inst = plan_instances(package_repo, limit=1)[0]
    seen = set()

    def claim(patch):
        if patch in seen:
            return False
        seen.add(patch)
        return True

    backend = ScriptedTeacher().backend()
    kw = dict(demonstrations=load_demonstrations(), claim_patch=claim, judge=False)
    first = run_instance(inst, package_repo, backend, **kw)
    second = run_instance(inst, package_repo, backend, **kw)
    assert first["status"] == "done" and second["status"] == "duplicate" and second["t2"] is None


def test_resume_after_kill_loses_and_duplicates_nothing(tmp_path, package_repo):
    out = tmp_path / "out"
    args = [sys.executable, "-m", "icml26", "sera", "generate", "--repo", str(package_repo), "--backend", "scripted",
            "--out", str(out), "--limit", "8", "--workers", "2", "--no-progress", "--no-judge"]
    proc = subprocess.Popen(args, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ledger = out / "ledger.jsonl"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if ledger.exists() and ledger.read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the run ended before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    text = ledger.read_text()
    before = text[:text.rfind("\n") + 1].splitlines()  # complete lines (a kill may tear the last one)
    assert 2 <= len(before) < 8
    with open(ledger, "a") as handle:  # what a kill in the middle of a write leaves
        handle.write('{"id": "torn", "status": "do')
    result = subprocess.run(args, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = ledger.read_text().splitlines()
    assert lines[:len(before)] == before  # finished work is kept as it was
    ids = [json.loads(l)["id"] for l in lines]
    planned = [i.id for i in plan_instances(package_repo, limit=8)]
    assert sorted(ids) == sorted(planned)  # no loss, no duplicate, no torn record
    rows = [json.loads(l) for l in (out / "trajectories.jsonl").read_text().splitlines()]
    assert len({r["id"] for r in rows}) == len(rows) and {r["instance_id"] for r in rows} <= set(planned)
    assert json.loads((out / "summary.json").read_text())["completed"] == 8
    assert not any((out / ".scratch").glob("*"))


def test_ledger_tolerates_a_torn_line_and_out_dir_is_locked(tmp_path):
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append({"id": "a", "status": "done"})
    with open(ledger.path, "a") as handle:
        handle.write('{"id": "b", "sta')
    assert set(ledger.records()) == {"a"}
    assert ledger.repair() > 0
    ledger.append({"id": "c", "status": "done"})
    assert set(ledger.records()) == {"a", "c"}

    from icml26.agents.sera.pipeline import _OutDirLock

    lock = _OutDirLock(tmp_path)
    with pytest.raises(RuntimeError, match="another generation run"):
        _OutDirLock(tmp_path)
    lock.release()
    _OutDirLock(tmp_path).release()


def test_generate_rejects_bad_options_before_any_work(tmp_path, make_git_repo):
    from icml26.agents.sera import generate

    repo = make_git_repo(tmp_path, SMALL)
    with pytest.raises(ValueError, match="generate: workers: expected an int >= 1, got 0"):
        generate(repo, "scripted", tmp_path / "out", workers=0, progress=False)
    with pytest.raises(TypeError, match="review_submit: expected True or False, got str 'no'"):
        generate(repo, "scripted", tmp_path / "out", review_submit="no", progress=False)
    assert not (tmp_path / "out").exists()


# -------------------------------------------------------------------------------------------- CLI

def test_cli_train_passes_its_command_line_through(monkeypatch):
    seen = {}  # a stand-in trainer: the real one (tested in test_sera_sft.py) needs a model
    monkeypatch.setattr(sera_cli, "main_train", lambda argv: seen.update(argv=argv) or {"final_loss": 1.0,
                                                                                         "output_dir": "o"})
    from icml26.cli import build_parser

    argv = ["--data", "d", "--model", "m", "--out", "o", "--learning_rate", "1e-4", "--use_peft", "--lora_r", "8",
            "--config", "sft.yaml"]
    args = build_parser().parse_args(["sera", "train", *argv])
    assert args.train_argv == argv  # untouched: TRL's parser reads them (see test_sera_cli.py)
    assert sera_cli.run(args) == 0 and seen["argv"] == argv
    assert build_parser().parse_args(["sera", "train", "--help"]).train_argv == ["--help"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["sera", "generate", "--repo", "r", "--backend", "scripted", "--out", "o",
                                   "--threshold", "2"])


@pytest.mark.slow
def test_generate_with_a_local_model_backend(tmp_path, package_repo):
    """The same pipeline with a model instead of the scripted teacher (a random tiny model: nothing is kept,
    but every stage runs and the ledger records what the model did)."""
    from icml26.tiny import build_tiny_model

    summary = generate(package_repo, str(build_tiny_model("qwen3")), tmp_path / "out", limit=1, max_steps=2,
                       sampling={"max_tokens": 16}, progress=False)
    assert summary.completed == 1 and "error" not in summary.status_counts
    record = json.loads((tmp_path / "out" / "ledger.jsonl").read_text())
    assert record["t1"]["messages"][2]["role"] == "assistant" and record["usage"]["T1"]["completion_tokens"] > 0


def test_cli_no_review_submit_finishes_at_the_first_submit(tmp_path, package_repo, run_cli):
    out = tmp_path / "out"
    result = run_cli(["sera", "generate", "--repo", str(package_repo), "--backend", "scripted", "--out", str(out),
                      "--limit", "1", "--no-progress", "--no-judge", "--no-review-submit"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads((out / "summary.json").read_text())["extra"]["review_submit"] is False
    ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines() if line.strip()]
    tool_texts = [m.get("content") or "" for m in ledger[0]["t1"]["messages"] if m["role"] == "tool"]
    assert tool_texts and not any(t.startswith("Thank you for your work") for t in tool_texts)
