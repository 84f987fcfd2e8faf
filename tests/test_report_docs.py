"""``icml26 report RUN_DIR --docs DIR``: results pages generated from a run folder, never typed."""

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from icml26 import Claim, InputError, Result
from icml26.cli import main
from icml26.docs_results import dumps, regenerate, render_results_page, write_results_pages
from icml26.papers import PAPERS
from icml26.registry import Entry
from icml26.runner import run_all, source_revision

REPO = Path(__file__).resolve().parents[1]
# docs/results/K.json (the reference quick runs) and docs/results/full/K.json (full-mode studies)
COMMITTED_PAGES = sorted((REPO / "docs" / "results").rglob("*.json"))


def _seeded(config):
    """Claims that vary with the seed (seed 1 fails the first alone), a table whose columns are not sorted."""
    from matplotlib.figure import Figure

    from icml26.results import over_seeds

    def one(seed):
        fig = Figure(figsize=(2, 2))
        fig.add_subplot().plot([0, 1], [seed, 1])
        return Result(metrics={"value": [1.0, 3.0, 1.5][seed], "curve": list(range(12))},
                      tables={"arms": [{"zeta": "method", "alpha": 0.5}, {"zeta": "base|line", "alpha": 0.9,
                                                                             "beta": None}]},
                      figures={"curve": fig},
                      claims=[Claim.less("value below 2", [1.0, 3.0, 1.5][seed], 2.0, unit="s"),
                              Claim.greater("never reached beats 5", math.inf, 5.0)],
                      notes="Scaled down:\nsee *the paper*.")

    return over_seeds(config.seeds, one)


def _raises(config):
    raise RuntimeError("deliberate")


SEEDED = Entry("experiment", "t_docs", "test: a results page", _seeded, None, __name__)
RAISES = Entry("experiment", "t_docs_raise", "test: raises", _raises, None, __name__)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder written by the real runner: t_docs at seeds 0, 1, 2, and one experiment that raised."""
    out = tmp_path_factory.mktemp("run")
    run_all("experiment", [SEEDED, RAISES], seeds=(0, 1, 2), run_dir=out, progress=False, echo=lambda _: None,
            command="icml26 reproduce t_docs t_docs_raise --seeds 3 --out 'a run'")
    return out


def _report(run_dir, docs, *extra):
    return main(["report", str(run_dir), "--docs", str(docs), "--key", "t_docs", *extra])


def test_results_json_records_provenance(run_dir):
    record = json.loads((run_dir / "results.json").read_text())
    assert record["command"] == "icml26 reproduce t_docs t_docs_raise --seeds 3 --out 'a run'"
    assert record["versions"]["icml26"] and record["versions"]["python"]
    assert record["machine"]["platform"] and record["machine"]["cpu_count"] >= 1
    assert all(e["seconds"] > 0 for e in record["experiments"])
    if shutil.which("git") and (REPO / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{40}", record["git_commit"]) and isinstance(record["git_dirty"], bool)
        report = (run_dir / "report.md").read_text()
        assert f"- git commit: `{record['git_commit']}`" in report
        assert f"- uncommitted changes: {'yes' if record['git_dirty'] else 'no'}" in report


def test_source_revision_is_none_outside_git_or_without_git(tmp_path, monkeypatch, make_git_repo):
    assert source_revision(tmp_path) is None
    repo = make_git_repo(tmp_path / "repo", {"pkg/__init__.py": ""})
    found = source_revision(repo / "pkg")
    assert re.fullmatch(r"[0-9a-f]{40}", found["commit"]) and found["dirty"] is False
    (repo / "pkg" / "new.py").write_text("")
    assert source_revision(repo / "pkg")["dirty"] is True
    (repo / "untracked").mkdir()
    assert source_revision(repo / "untracked") is None  # not that repository's code
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # git missing
    assert source_revision(repo / "pkg") is None


def test_report_writes_json_markdown_and_figures(run_dir, tmp_path, capsys):
    docs = tmp_path / "docs"
    (docs / "t_docs").mkdir(parents=True)
    (docs / "t_docs" / "stale.png").write_bytes(b"old")
    assert _report(run_dir, docs) == 0
    assert sorted(capsys.readouterr().out.split()) == sorted(
        str(docs / p) for p in ("t_docs/curve.png", "t_docs.json", "t_docs.md"))
    assert sorted(p.name for p in (docs / "t_docs").iterdir()) == ["curve.png"]  # the stale figure went
    assert (docs / "t_docs" / "curve.png").read_bytes() == (run_dir / "t_docs" / "curve.png").read_bytes()

    text = (docs / "t_docs.json").read_text()
    data = json.loads(text)
    assert text == dumps(data)  # sorted keys, stable layout
    record = json.loads((run_dir / "results.json").read_text())
    assert data["schema"] == 1 and data["kind"] == "experiment" and data["key"] == "t_docs"
    assert data["title"] == "test: a results page" and data["mode"] == "quick" and data["seeds"] == [0, 1, 2]
    assert data["command"] == "icml26 reproduce t_docs --quick --seeds 3"
    assert data["git"] == {"commit": record["git_commit"], "dirty": record["git_dirty"]} if record["git_commit"] \
        else data["git"] is None
    assert data["versions"] == record["versions"]
    assert data["machine"] == record["machine"] and data["date"] == record["finished"][:10]
    assert data["seconds"] == round(record["experiments"][0]["seconds"], 1)
    claims = data["claims"]
    assert [(c["measured"], c["reference"], c["relation"], c["holds"]) for c in claims] == [
        (1.5, 2.0, "less", True), ("inf", 5.0, "greater", True)]
    assert [(s["seed"], s["measured"], s["holds"]) for s in claims[0]["per_seed"]] == [
        (0, 1.0, True), (1, 3.0, False), (2, 1.5, True)]
    assert claims[0]["per_seed"][0]["statement"] == "value below 2"
    assert data["tables"] == [{"name": "arms", "columns": ["zeta", "alpha", "beta"],
                               "rows": [{"zeta": "method", "alpha": 0.5},
                                        {"zeta": "base|line", "alpha": 0.9, "beta": None}]}]
    assert data["figures"] == [{"name": "curve", "file": "t_docs/curve.png"}]
    assert data["metrics"]["value"] == 1.0 and data["notes"].startswith("Scaled down")

    md = (docs / "t_docs.md").read_text()
    assert md == render_results_page(data)
    first = md.splitlines()[0]
    assert re.fullmatch(r"\*\*Reference run\*\*: quick mode, seeds 0, 1, 2, commit [0-9a-f]{7}( with uncommitted "
                        r"changes)?, \d{4}-\d\d-\d\d, \d+ s", first), first
    for piece in ("icml26 reproduce t_docs --quick --seeds 3", "| # | claim | measured | reference | test | holds |",
                  "| 1 | value below 2 (median over seeds 0, 1, 2) | 1.5 s | 2 s | measured < reference | yes |",
                  "| # | seed 0 | seed 1 | seed 2 |", "3 s vs 2 s: NO", "| zeta | alpha | beta |",
                  "| base\\|line | 0.9 | n/a |", "![curve](t_docs/curve.png)", "**Claims**: 2 of 2 hold",
                  "**Notes**: Scaled down: see *the paper*."):
        assert piece in md, piece


def test_rendering_is_deterministic_and_regenerate_restores_pages(run_dir, tmp_path):
    docs = tmp_path / "docs"
    assert _report(run_dir, docs) == 0
    md = docs / "t_docs.md"
    first = md.read_bytes()
    data = json.loads((docs / "t_docs.json").read_text())
    assert render_results_page(data) == render_results_page(json.loads(dumps(data))) == first.decode()
    assert regenerate(docs) == []
    md.write_text(first.decode().replace("yes", "YES"))  # a hand edit
    assert regenerate(docs) == [md] and md.read_bytes() == first
    data["title"] = "another title"
    (docs / "t_docs.json").write_text(dumps(data))
    assert regenerate(docs) == [md] and "another title" in md.read_text()
    assert main(["report", "--regenerate", str(docs)]) == 0


def test_old_run_folders_without_provenance_still_report(run_dir, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    record = json.loads((old / "results.json").read_text())
    for name in ("git_commit", "git_dirty", "machine"):
        del record[name]
    (old / "results.json").write_text(json.dumps(record))
    write_results_pages(old, tmp_path / "docs", ["t_docs"])
    data = json.loads((tmp_path / "docs" / "t_docs.json").read_text())
    assert data["git"] is None and data["machine"] is None
    md = (tmp_path / "docs" / "t_docs.md").read_text()
    assert "commit unknown" in md.splitlines()[0] and "Run on an unrecorded machine" in md


def test_results_of_0_2_0_with_a_nested_git_record_are_still_read(run_dir, tmp_path):
    from icml26.report import render_markdown, run_source

    old = tmp_path / "old"
    shutil.copytree(run_dir, old)
    record = json.loads((old / "results.json").read_text())
    del record["git_commit"], record["git_dirty"]
    record["git"] = {"commit": "ab" * 20, "dirty": True}  # what 0.2.0 wrote
    (old / "results.json").write_text(json.dumps(record))
    assert run_source(record) == {"commit": "ab" * 20, "dirty": True}
    assert "- git commit: `" + "ab" * 20 + "`" in render_markdown(record)
    assert "- uncommitted changes: yes" in render_markdown(record)
    write_results_pages(old, tmp_path / "docs", ["t_docs"])
    data = json.loads((tmp_path / "docs" / "t_docs.json").read_text())
    assert data["git"] == {"commit": "ab" * 20, "dirty": True}
    assert "commit abababa with uncommitted changes" in (tmp_path / "docs" / "t_docs.md").read_text()


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("args, message", [
    (["report", "<tmp>", "--docs", "<tmp>/d"], "report: RUN_DIR: expected a run folder holding results.json"),
    (["report", "<run>", "--docs", "<tmp>/d", "--key", "nope"], "report: --key: expected keys of experiments in"),
    (["report", "<run>", "--docs", "<tmp>/d"], "report: RUN_DIR: expected experiments that finished (status ok; "
                                               "pick others with --key), got t_docs_raise (error)"),
    (["report", "<run>"], "report: --docs: expected the folder the pages go to"),
    (["report"], "report: RUN_DIR: expected a run folder (or --regenerate DIR)"),
    (["report", "<run>", "--regenerate", "<tmp>"], "report: --regenerate: expected no RUN_DIR, --docs or --key"),
    (["report", "--regenerate", "<tmp>/none"], "regenerate: docs_dir: expected a folder of results pages"),
])
def test_bad_input_is_one_line_with_exit_2(run_dir, tmp_path, capsys, args, message):
    args = [a.replace("<tmp>", str(tmp_path)).replace("<run>", str(run_dir)) for a in args]
    assert main(args) == 2
    line = _one_error_line(capsys)
    assert line.startswith("icml26 report: error: ") and message in line, line
    assert not (tmp_path / "d").exists()  # nothing written before the input was checked


def test_a_forged_verdict_or_a_missing_figure_is_refused(run_dir, tmp_path):
    forged = tmp_path / "forged"
    shutil.copytree(run_dir, forged)
    record = json.loads((forged / "results.json").read_text())
    record["experiments"][0]["result"]["claims"][0]["holds"] = False
    (forged / "results.json").write_text(json.dumps(record))
    with pytest.raises(InputError, match="claims whose stored verdict matches their values"):
        write_results_pages(forged, tmp_path / "d", ["t_docs"])
    shutil.copy(run_dir / "results.json", forged / "results.json")
    (forged / "t_docs" / "curve.png").unlink()
    with pytest.raises(InputError, match="a run folder holding its figures"):
        write_results_pages(forged, tmp_path / "d", ["t_docs"])
    assert not (tmp_path / "d").exists()


def test_render_refuses_what_is_not_a_results_page():
    with pytest.raises(InputError, match="render_results_page: data: expected a results page of schema 1"):
        render_results_page({"schema": 99})
    with pytest.raises(InputError, match="every field of schema 1, got one without kind, key, title"):
        render_results_page({"schema": 1})


@pytest.mark.parametrize("source", COMMITTED_PAGES,
                         ids=[str(p.relative_to(REPO / "docs" / "results").with_suffix("")) for p in COMMITTED_PAGES])
def test_committed_results_page_is_what_its_json_renders(source):
    """Every docs/results/K.md is exactly what K.json renders to (rerun `icml26 report --regenerate docs/results`)."""
    page = source.with_suffix(".md")
    assert page.is_file(), f"{page} is missing: run icml26 report --regenerate {source.parent}"
    data = json.loads(source.read_text(encoding="utf-8"))
    assert page.read_bytes() == render_results_page(data).encode("utf-8"), (
        f"{page} differs from what {source.name} renders: run icml26 report --regenerate {source.parent}")
    for figure in data["figures"]:
        assert (source.parent / figure["file"]).is_file(), figure


@pytest.mark.parametrize("paper", [p for p in PAPERS if p.status == "working"], ids=lambda p: p.key)
def test_every_working_method_page_shows_its_generated_reference_run(paper):
    """Measured numbers reach a method page only through its generated results file (and every page has one)."""
    docs = Path(__file__).resolve().parents[1] / "docs"
    page = (docs / "methods" / f"{paper.key}.md").read_text()
    assert f"```{{include}} ../results/{paper.key}.md" in page, f"docs/methods/{paper.key}.md does not include its results"
    data = json.loads((docs / "results" / f"{paper.key}.json").read_text())
    assert data["key"] == paper.key and data["claims"] and data["seeds"] == [0, 1, 2], data.get("seeds")
    assert data["git"] and not data["git"]["dirty"], "a reference run comes from a committed, clean tree"
