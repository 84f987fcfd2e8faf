"""Every ```python block of README.md and docs/**/*.md runs, each on its own, in a fresh process.

One test per block, named by the file and the line of its opening fence (``README.md:123``,
``docs/kernels/nudft.md:52``). A block runs with this Python (``sys.executable``) in a new process
whose working folder is an empty scratch folder, under a timeout of :data:`TIMEOUT_S` seconds, in this
session's environment (so ``ICML26_CACHE``, which the test session points at one shared temporary
folder, caches the tiny models the blocks build with ``icml26.tiny``), offline (``HF_HUB_OFFLINE=1``).
Tracebacks name the Markdown file and its line numbers.

A block therefore has to be complete: its own imports and data, nothing from an earlier block. One that
cannot run carries a marker in an HTML comment on the line just above its fence (other HTML comments,
such as the README's ``<!-- snippet:NAME -->``, may sit between the marker and the fence):

- ``<!-- example: skip (REASON) -->``: not run, reported as skipped with REASON; the reason is required;
- ``<!-- example: slow -->``: runs only with ``pytest -m slow``.

Any other ``example:`` comment, a skip without a reason, or a marker above a block that is not Python
fails, so a typo cannot silently drop a block. ``docs/_build`` and ``docs/results`` (generated) are not
read.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
GENERATED = (DOCS / "_build", DOCS / "results")
TIMEOUT_S = 300
OUTPUT_TAIL = 6000  # characters of a failing block's output shown in the report

_OPEN = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
_COMMENT = re.compile(r"^\s*<!--(?P<body>.*)-->\s*$")
_MARKER = re.compile(r"^\s*example\s*:(?P<what>.*)$", re.S)
_SKIP = re.compile(r"^skip\s*\((?P<reason>.*)\)$", re.S)

# Runs one block: the source is padded so that its line numbers are those of the Markdown file, and
# compiled under that file's name, so a traceback points at (and shows) the line of the page.
_RUNNER = """\
import sys
def _run(path, name, first_line):
    import __main__
    with open(path, encoding="utf-8") as f:
        source = "\\n" * (first_line - 1) + f.read()
    code = compile(source, name, "exec")
    sys.argv = [name]
    namespace = __main__.__dict__
    del namespace["_run"], namespace["sys"]
    exec(code, namespace)
_run(sys.argv[1], sys.argv[2], int(sys.argv[3]))
"""


@dataclass(frozen=True)
class Example:
    """A fenced block of a Markdown file: where it is, its code, and what its markers say."""

    file: str  # relative to the repository root, as in the test id
    line: int  # 1-based line of the opening fence
    code: str
    language: str
    skip: str | None = None  # the reason, when marked skip
    slow: bool = False
    problem: str | None = None  # a bad marker: the test fails with this message

    @property
    def id(self) -> str:
        return f"{self.file}:{self.line}"


def _markers(lines: list[str], fence_index: int) -> tuple[str | None, bool, str | None]:
    """``(skip reason, slow, problem)`` from the HTML comment lines just above a fence."""
    skip, slow, problems = None, False, []
    i = fence_index - 1
    while i >= 0 and (comment := _COMMENT.match(lines[i])):
        i -= 1
        marker = _MARKER.match(comment["body"].strip())
        if marker is None:
            continue
        what = " ".join(marker["what"].split())
        if what == "slow":
            slow = True
        elif skipped := _SKIP.match(what):
            if skipped["reason"].strip():
                skip = skipped["reason"].strip()
            else:
                problems.append("the skip marker has an empty reason: write <!-- example: skip (why it cannot run) -->")
        elif what.startswith("skip"):
            problems.append(f"the skip marker {comment.group(0).strip()!r} has no reason: write "
                            "<!-- example: skip (why it cannot run) -->")
        else:
            problems.append(f"unknown example marker {comment.group(0).strip()!r}: expected "
                            "<!-- example: skip (REASON) --> or <!-- example: slow -->")
    return skip, slow, "; ".join(problems) or None


def examples_in(text: str, file: str) -> list[Example]:
    """Every fenced code block of a Markdown ``text`` whose language is ``python`` (CommonMark fences:
    backticks or tildes, any indent, closed by a fence of the same character at least as long), plus a
    failing entry for each example marker put above a block in another language."""
    lines = text.splitlines()
    found: list[Example] = []
    i = 0
    while i < len(lines):
        opening = _OPEN.match(lines[i])
        if opening is None:
            i += 1
            continue
        fence, indent = opening["fence"], len(opening["indent"])
        closing = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not closing.match(lines[end]):
            end += 1
        language = (opening["info"].split() or [""])[0]
        skip, slow, problem = _markers(lines, i)
        # an indented fence (in a list item): its body loses up to that much indentation, as CommonMark says
        body = [line[min(indent, len(line) - len(line.lstrip())):] for line in lines[i + 1:end]]
        if language == "python":
            found.append(Example(file, i + 1, "\n".join(body) + "\n", language, skip, slow, problem))
        elif skip is not None or slow or problem:
            found.append(Example(file, i + 1, "", language, problem=(
                problem or f"an example marker sits above a {language or 'plain'} block; only python blocks run")))
        i = end + 1
    return found


def markdown_files() -> list[Path]:
    files = [ROOT / "README.md"] if (ROOT / "README.md").is_file() else []
    if DOCS.is_dir():
        files += sorted(p for p in DOCS.rglob("*.md") if not any(p.is_relative_to(g) for g in GENERATED))
    return files


def collect() -> list[Example]:
    return [example for path in markdown_files()
            for example in examples_in(path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix())]


def _param(example: Example):
    marks = []
    if example.problem is None and example.skip is not None:
        marks.append(pytest.mark.skip(reason=f"{example.id}: {example.skip}"))
    if example.slow:
        marks.append(pytest.mark.slow)
    return pytest.param(example, id=example.id, marks=marks)


EXAMPLES = collect()


def _environment() -> dict[str, str]:
    env = dict(os.environ)  # ICML26_CACHE: this session's shared cache of tiny models
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("MPLBACKEND", "Agg")
    env.pop("TRITON_INTERPRET", None)  # the tests' own setting: a block that wants the interpreter sets it
    return env


def _stop(process: subprocess.Popen) -> None:
    """End whatever the block left running in its process group (servers, workers)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@pytest.mark.parametrize("example", [_param(e) for e in EXAMPLES])
def test_example_runs(example: Example, tmp_path: Path):
    if example.problem:
        pytest.fail(f"{example.id}: {example.problem}", pytrace=False)
    script = tmp_path / "example.py"
    script.write_text(example.code, encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    command = [sys.executable, "-c", _RUNNER, str(script), str(ROOT / example.file), str(example.line + 1)]
    process = subprocess.Popen(command, cwd=scratch, env=_environment(), stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                               errors="replace", start_new_session=True)
    try:
        output, _ = process.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _stop(process)
        output, _ = process.communicate()
        pytest.fail(f"{example.id}: still running after {TIMEOUT_S} s\n{output[-OUTPUT_TAIL:]}", pytrace=False)
    finally:
        _stop(process)
    if process.returncode != 0:
        pytest.fail(f"{example.id}: exit status {process.returncode} (run alone, in an empty folder)\n"
                    f"{output[-OUTPUT_TAIL:]}", pytrace=False)


# -- the collector itself ----------------------------------------------------------------------------


def test_every_markdown_file_is_read_and_the_readme_has_python_blocks():
    files = {path.relative_to(ROOT).as_posix() for path in markdown_files()}
    assert "README.md" in files
    assert not any(name.startswith(("docs/_build/", "docs/results/")) for name in files), files
    assert any(e.file == "README.md" for e in EXAMPLES)


def test_collector_reads_fences_and_markers():
    text = "\n".join([
        "# Page",                                          # 1
        "```python",                                       # 2: runs
        "print(1)",
        "```",
        "<!-- example: skip (needs a GPU) -->",            # 5
        "<!-- snippet:name -->",
        "```python",                                       # 7: skipped, the reason kept
        "import torch",
        "```",
        "<!-- example: slow -->",
        "```python title",                                 # 11: slow; only the first info word counts
        "pass",
        "```",
        "<!-- example: skip -->",
        "```python",                                       # 15: a skip without a reason fails
        "```",
        "<!-- example: skip () -->",
        "```python",                                       # 18: an empty reason fails too
        "```",
        "<!-- example: slwo -->",
        "```python",                                       # 21: a typo fails
        "```",
        "````markdown",                                    # 23: a fence inside a longer one is text
        "```python",
        "not run",
        "```",
        "````",
        "<!-- example: slow -->",
        "```bash",                                         # 29: a marker above another language fails
        "ls",
        "```",
        "- a list item:",
        "",
        "  ```python",                                     # 34: indented fence, body dedented
        "  if True:",
        "      x = 1",
        "  ```",
        "```{code-block} python",                          # 38: a MyST directive is not a python block
        "x",
        "```",
        "~~~python",                                       # 41: tildes; indentation inside a block is kept
        "if True:",
        "    y = 2",
        "~~~",
    ])
    found = {e.line: e for e in examples_in(text, "page.md")}
    assert sorted(found) == [2, 7, 11, 15, 18, 21, 29, 34, 41]
    assert found[2].code == "print(1)\n" and found[2].id == "page.md:2"
    assert found[2].skip is None and not found[2].slow and found[2].problem is None
    assert found[7].skip == "needs a GPU" and found[7].problem is None
    assert found[11].slow and found[11].skip is None
    assert "no reason" in found[15].problem and "empty reason" in found[18].problem
    assert "unknown example marker" in found[21].problem
    assert "bash" in found[29].problem
    assert found[34].code == "if True:\n    x = 1\n"
    assert found[41].code == "if True:\n    y = 2\n"


def test_a_failing_block_names_the_markdown_line(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\nraise RuntimeError('from the page')\n```\n")
    (example,) = examples_in(page.read_text(), "page.md")
    script = tmp_path / "example.py"
    script.write_text(example.code)
    done = subprocess.run([sys.executable, "-c", _RUNNER, str(script), str(page), str(example.line + 1)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert f'File "{page}", line 5' in done.stderr and "raise RuntimeError('from the page')" in done.stderr
