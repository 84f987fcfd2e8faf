import re
from pathlib import Path

from icml26.papers import PAPERS, TABLE_BEGIN, TABLE_END, markdown_table

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _between(text: str, begin: str, end: str) -> str:
    assert begin in text and end in text, f"README lacks the markers {begin!r} ... {end!r}"
    return text.split(begin, 1)[1].split(end, 1)[0]


def test_paper_table_is_generated_from_the_catalogue():
    assert _between(README, TABLE_BEGIN, TABLE_END).strip() == markdown_table().strip(), (
        "README paper table is stale: regenerate it with `python -m icml26.papers`")
    assert len(PAPERS) == 19


def test_ci_runs_the_quickstart_commands_in_a_fresh_venv():
    block = _between(README, "<!-- quickstart:begin -->", "<!-- quickstart:end -->")
    commands = [line for line in re.sub(r"```\w*", "", block).splitlines() if line.strip()]
    assert len(commands) == 2, commands
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    venv = [i for i, line in enumerate(ci) if re.search(r"-m venv\b", line)]
    activate = [i for i, line in enumerate(ci) if re.match(r"(source|\.) .*/bin/activate\"?$", line)]
    assert venv and activate and venv[0] < activate[0], "CI must create and activate its own venv first"
    assert "system-site-packages" not in " ".join(ci)
    where = [ci.index(command) for command in commands]  # ValueError: a quick-start command is not in CI
    assert activate[0] < where[0] < where[1], "CI must run the quick-start commands in order, inside the venv"
    # Nothing after the venv lines but the commands themselves, the strict docs build, the lint and CI's
    # own timing lines.
    extra = [line for line in ci[activate[0] + 1:] if line not in commands]
    assert all(line.startswith(("t0=", "mark", "trap", "sphinx-build -W ", "ruff check ")) for line in extra), extra
    assert any(line.startswith("sphinx-build -W ") for line in extra) and any(line.startswith("ruff check ") for line in extra)


def test_every_working_paper_has_an_experiment():
    from icml26.registry import entries

    registered = entries("experiment")
    for paper in PAPERS:
        if paper.status == "working":
            assert paper.key in registered, f"{paper.key} is working but has no registered experiment"


def test_planned_papers_are_not_shown_as_paths():
    table = _between(README, TABLE_BEGIN, TABLE_END)
    for line in table.splitlines():
        if line.endswith("| planned |"):
            assert "`models/" not in line and "`training/" not in line and "`eval/" not in line, line
