"""Prompts of SERA's soft-verified generation: the agent instruction, the vague first-rollout issues,
the synthetic pull-request request, the patch judge, and the demonstration issues.

SERA is arXiv 2601.20789. Reconstruction: the vague templates are written for this toolkit (SERA had an LLM
write 51 of them); each names
``{start_fn}`` in ``{start_fn_file}`` and a category, and always ends by saying the issue may be in
``{start_fn}`` or a function upstream/downstream of it. The bundled demonstrations are fictional
issues written for this toolkit; users pass their own repository's issues instead
(:func:`load_demonstrations`).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from icml26.errors import InputTypeError, described, input_error

SYSTEM_PROMPT = ("You are a software engineering agent working in a code repository. You act only through the "
                 "tools you are given: run shell commands with `bash`, read and edit files with "
                 "`str_replace_editor`, and call `submit` when your change is complete.")

INSTRUCTION_TEMPLATE = """<uploaded_files>
{working_dir}
</uploaded_files>
I've uploaded a Python code repository in the directory {working_dir}. Consider the following PR description:

<pr_description>
{problem_statement}
</pr_description>

Can you help me implement the necessary changes to the repository so that the requirements in the <pr_description> are met?
Any changes to test files described in the <pr_description> are already taken care of, so you DON'T need to modify the tests or the testing logic in any way.
Your task is to make the minimal changes to non-test files in the {working_dir} directory so that the <pr_description> is satisfied.
Follow these steps to resolve the issue:
1. As a first step, find and read the code relevant to the <pr_description>
2. Create a script that reproduces the problem and run it with `python <filename.py>` using the bash tool, to confirm it
3. Edit the source code of the repository to resolve the issue
4. Rerun your reproduction script and confirm that the problem is gone
5. Think about edge cases and make sure your change handles them as well
When you are done, remove your reproduction script and call `submit`."""

UPSTREAM_SENTENCE = "The issue may be in `{start_fn}` or a function upstream/downstream of it."

CATEGORIES = (
    "possible bug", "resource cleanup", "data validation", "error handling", "state management", "configuration",
    "concurrency", "API contracts", "performance", "dependency management", "control flow",
    "data transformation", "async", "edge cases", "maintainability/docs", "security", "modularity",
    "observability", "platform compatibility", "business logic", "robustness",
)

# (category, body); the upstream/downstream sentence is appended by render_vague_issue.
VAGUE_TEMPLATES: tuple[tuple[str, str], ...] = (
    ("possible bug", "Possible bug related to `{start_fn}` in `{start_fn_file}`. When I call `{start_fn}` the "
                     "result is not what I would expect from its name and signature."),
    ("possible bug", "Something looks off in `{start_fn}` (`{start_fn_file}`): for some inputs it returns a value "
                     "that disagrees with how the rest of the library uses it."),
    ("resource cleanup", "Resources handled around `{start_fn}` in `{start_fn_file}` may not be released "
                         "properly when something goes wrong halfway through."),
    ("resource cleanup", "I suspect a cleanup problem near `{start_fn}` in `{start_fn_file}`: after a failure, "
                         "state or handles acquired earlier can be left behind."),
    ("data validation", "`{start_fn}` in `{start_fn_file}` seems to accept inputs it should reject. Bad values "
                        "slip through and only fail much later, far from the call."),
    ("data validation", "Input checking around `{start_fn}` (`{start_fn_file}`) looks incomplete: invalid "
                        "arguments are not reported clearly."),
    ("error handling", "Errors raised inside `{start_fn}` in `{start_fn_file}` are confusing: the exception a "
                       "caller sees does not say what went wrong or where."),
    ("error handling", "Failure handling in `{start_fn}` (`{start_fn_file}`) could be better: some failures "
                       "escape with low-level exceptions instead of a meaningful error."),
    ("state management", "State handled by `{start_fn}` in `{start_fn_file}` may become inconsistent: values "
                         "computed in one place do not match what later code assumes."),
    ("state management", "Variables and intermediate state inside `{start_fn}` (`{start_fn_file}`) are hard to "
                         "follow, which makes its behaviour easy to get wrong."),
    ("configuration", "A setting or hard-coded value used by `{start_fn}` in `{start_fn_file}` looks wrong for "
                      "common use and gives surprising results."),
    ("configuration", "Defaults used around `{start_fn}` (`{start_fn_file}`) seem misconfigured; a limit or "
                      "constant there does not match the documented behaviour."),
    ("concurrency", "`{start_fn}` in `{start_fn_file}` may not behave well when used from several threads or "
                    "called repeatedly; its assumptions about shared data are not stated."),
    ("concurrency", "There might be a race or re-entrancy problem involving `{start_fn}` in `{start_fn_file}`."),
    ("API contracts", "The contract of `{start_fn}` in `{start_fn_file}` is unclear: what it accepts and what it "
                      "promises to callers is not enforced."),
    ("API contracts", "Callers of `{start_fn}` (`{start_fn_file}`) can pass arguments of the wrong type without "
                      "any error, which breaks the API's promises."),
    ("performance", "`{start_fn}` in `{start_fn_file}` does more work than needed or repeats a computation that "
                    "could be shared."),
    ("performance", "Performance near `{start_fn}` (`{start_fn_file}`) could be improved; part of its logic "
                    "would be better factored so it can be reused and optimised."),
    ("dependency management", "`{start_fn}` in `{start_fn_file}` relies on other components in a fragile way; "
                              "when one of them fails the error is not handled."),
    ("dependency management", "Interaction between `{start_fn}` (`{start_fn_file}`) and the functions it calls "
                              "is brittle when a dependency misbehaves."),
    ("control flow", "The control flow of `{start_fn}` in `{start_fn_file}` misses a case: some inputs take a "
                     "path they should never reach."),
    ("control flow", "An early exit or guard seems to be missing in `{start_fn}` (`{start_fn_file}`)."),
    ("data transformation", "The value computed by `{start_fn}` in `{start_fn_file}` looks off by a small "
                            "amount for some inputs."),
    ("data transformation", "The transformation done in `{start_fn}` (`{start_fn_file}`) is tangled with the rest "
                            "of the function and hard to check on its own."),
    ("async", "Code paths around `{start_fn}` in `{start_fn_file}` may misbehave when called from asynchronous "
              "or callback-driven code, where failures are easy to lose."),
    ("edge cases", "`{start_fn}` in `{start_fn_file}` does not handle edge cases well: empty, missing or "
                   "boundary values lead to odd behaviour."),
    ("edge cases", "I hit an edge case in `{start_fn}` (`{start_fn_file}`): a missing value is not handled and "
                   "the failure is obscure."),
    ("maintainability/docs", "`{start_fn}` in `{start_fn_file}` is hard to understand and maintain; its purpose "
                             "and behaviour are not documented."),
    ("maintainability/docs", "Readability of `{start_fn}` (`{start_fn_file}`) could be improved: names and "
                             "structure make it hard to follow."),
    ("security", "`{start_fn}` in `{start_fn_file}` trusts its inputs too much; unexpected values should be "
                 "rejected early rather than processed."),
    ("security", "Untrusted data reaching `{start_fn}` (`{start_fn_file}`) is not checked, which could be "
                 "abused or cause surprising behaviour."),
    ("modularity", "`{start_fn}` in `{start_fn_file}` mixes several responsibilities; part of it should be a "
                   "separate, reusable unit."),
    ("modularity", "The logic in `{start_fn}` (`{start_fn_file}`) would be easier to reuse and check if a piece "
                   "of it were factored out."),
    ("observability", "When `{start_fn}` in `{start_fn_file}` fails it is hard to tell why: errors carry too "
                      "little context to debug."),
    ("observability", "Diagnosing problems in `{start_fn}` (`{start_fn_file}`) is difficult; failures should "
                      "say which operation failed."),
    ("platform compatibility", "`{start_fn}` in `{start_fn_file}` may behave differently across platforms or "
                               "Python versions; errors from the environment are not handled."),
    ("platform compatibility", "Portability of `{start_fn}` (`{start_fn_file}`) is questionable: an environment "
                               "difference surfaces as an unhelpful error."),
    ("business logic", "The rule implemented by `{start_fn}` in `{start_fn_file}` does not match what the "
                       "library promises; a value in it looks wrong."),
    ("business logic", "Results of `{start_fn}` (`{start_fn_file}`) disagree with the intended behaviour for "
                       "ordinary inputs."),
    ("robustness", "`{start_fn}` in `{start_fn_file}` is not robust to unexpected input: it crashes with an "
                   "unclear error instead of failing cleanly."),
    ("robustness", "Make `{start_fn}` (`{start_fn_file}`) more robust: invalid or missing arguments should be "
                   "reported with a clear exception."),
    ("robustness", "`{start_fn}` in `{start_fn_file}` can fail in surprising ways when one of its steps "
                   "raises; the failure should be reported cleanly."),
)


def render_vague_issue(template: tuple[str, str] | str, start_fn: str, start_fn_file: str) -> str:
    """The first rollout's ``pr_description``: a template body plus the upstream/downstream sentence."""
    body = template[1] if isinstance(template, tuple) else template
    text = body + " " + UPSTREAM_SENTENCE
    return text.format(start_fn=start_fn, start_fn_file=start_fn_file)


def render_instruction(problem_statement: str, working_dir: str) -> str:
    return INSTRUCTION_TEMPLATE.format(problem_statement=problem_statement.strip(), working_dir=working_dir)


def extract_pr_description(task: str) -> str:
    """The text inside ``<pr_description>`` (the whole task when the tags are absent)."""
    match = re.search(r"<pr_description>\s*(.*?)\s*</pr_description>", task, re.S)
    return match.group(1) if match else task


# ------------------------------------------------------------------------------ synthetic PR + judge

PR_SYSTEM_PROMPT = ("You write GitHub issues for a Python project. You imitate the style of the example you "
                    "are shown and never reveal how a problem was or should be fixed in code.")

PR_TEMPLATE = """A developer changed a repository while working on a vague task. Below are the steps they took and the final diff.
Write the GitHub issue that this change resolves, as a user or maintainer of the project would have reported it before the change existed.

Rules:
- Mimic the demonstration's style, length and formatting (title, headings, lists, code blocks).
- Describe the problem as it is observed: what happens and what is expected instead.
- Do NOT explain the fix, name the lines to change, or paste any part of the diff.
- Do NOT mention tests.
- Include reproduction steps or code only if the demonstration does.
- Answer with the issue text only, inside <issue> and </issue>.

<demonstration>
{demonstration}
</demonstration>

<task>
{task}
</task>

<fix_steps>
{fix_steps}
</fix_steps>

<diff>
{patch}
</diff>"""

JUDGE_TEMPLATE = """Below are a task given to a software agent and the final diff it submitted.
Is the final fix valid with respect to the initial task, i.e. a sensible, self-contained change that addresses it? Answer with a single word: yes or no.

<task>
{task}
</task>

<diff>
{patch}
</diff>"""


def render_pr_request(demonstration: str, task: str, fix_steps: str, patch: str) -> list[dict]:
    return [{"role": "system", "content": PR_SYSTEM_PROMPT},
            {"role": "user", "content": PR_TEMPLATE.format(demonstration=demonstration.strip(), task=task.strip(),
                                                           fix_steps=fix_steps.strip(), patch=patch.strip())}]


def render_judge_request(task: str, patch: str) -> list[dict]:
    return [{"role": "user", "content": JUDGE_TEMPLATE.format(task=task.strip(), patch=patch.strip())}]


def strip_think(text: str | None) -> str:
    """Drop ``<think>...</think>`` reasoning (and an unclosed leading one) from a completion."""
    text = re.sub(r"<think>.*?</think>", "", text or "", flags=re.S)
    return re.sub(r"^\s*<think>.*", "", text, flags=re.S).strip()


def parse_pr_answer(text: str | None) -> str:
    """The issue text of a synthetic-PR answer: inside ``<issue>`` tags when present."""
    text = strip_think(text)
    match = re.search(r"<issue>\s*(.*?)\s*(</issue>|$)", text, re.S)
    return (match.group(1) if match else text).strip()


def parse_judge_answer(text: str | None) -> bool:
    """True when the judge's first yes/no word is yes."""
    match = re.search(r"\b(yes|no)\b", strip_think(text).lower())
    return bool(match) and match.group(1) == "yes"


def summarize_steps(messages: list[dict], max_chars: int = 600) -> str:
    """The first rollout's actions as numbered steps: the agent's words and its tool calls."""
    lines, step = [], 0
    for message in messages:
        if message.get("role") != "assistant":
            continue
        step += 1
        text = (message.get("content") or "").strip()
        calls = []
        for call in message.get("tool_calls") or ():
            fn = call.get("function", {})
            args = fn.get("arguments", "")
            calls.append(f"{fn.get('name')}({args if len(args) <= max_chars else args[:max_chars] + ' ...'})")
        lines.append(f"{step}. {text}" + (("\n   -> " + "\n   -> ".join(calls)) if calls else ""))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ demonstrations

DATA_DIR = Path(__file__).resolve().parent / "data"


def _json_demonstrations(path: Path) -> list[str]:
    """The issue texts of a ``.json`` list or a ``.jsonl`` file (strings or objects with a text field)."""
    name = "load_demonstrations"
    raw = path.read_text(encoding="utf-8")
    try:
        if path.suffix == ".json":
            items = json.loads(raw)
        else:
            items = []
            for n, line in enumerate(raw.splitlines(), 1):
                if line.strip():
                    where = n
                    items.append(json.loads(line))
    except json.JSONDecodeError as exc:
        at = f"line {where}" if path.suffix == ".jsonl" else f"line {exc.lineno}"
        raise input_error(name, "source", "valid JSON" if path.suffix == ".json" else "one JSON value a line",
                          described(f"{str(path)!r}, {at}: {exc.msg}")) from None
    if not isinstance(items, list):
        raise input_error(name, "source", "a JSON list of issues", described(f"a {type(items).__name__} in {str(path)!r}"))
    texts = []
    for item in items:
        if isinstance(item, dict):
            item = next((item[k] for k in ("problem_statement", "body", "text") if item.get(k)), None)
        if not isinstance(item, str):
            raise input_error(name, "source", "issues as strings or objects with problem_statement, body or text",
                              described(f"{item!r:.80} in {str(path)!r}"))
        texts.append(item)
    return texts


def load_demonstrations(source: str | Path | None = None) -> list[str]:
    """Issue texts used as style demonstrations.

    ``source`` None: the bundled ones. A folder: every ``.txt``/``.md`` file in it (sorted). A file:
    ``.txt``/``.md`` (one issue), ``.json`` (a list of strings or of objects with
    ``problem_statement``/``body``/``text``) or ``.jsonl`` (one such object or string a line).
    """
    name = "load_demonstrations"
    if source is not None and not isinstance(source, (str, os.PathLike)):
        raise InputTypeError(name, "source", "None or a path", described(type(source).__name__))
    path = Path(source) if source is not None else DATA_DIR
    expected = "a folder of .txt/.md issues or a .txt, .md, .json or .jsonl file"
    if not path.exists():
        raise input_error(name, "source", expected, described(f"{str(path)!r}, which does not exist"))
    try:
        if path.is_dir():
            texts = [p.read_text(encoding="utf-8") for p in sorted(path.iterdir()) if p.suffix in (".txt", ".md")]
        elif path.suffix in (".txt", ".md"):
            texts = [path.read_text(encoding="utf-8")]
        elif path.suffix in (".json", ".jsonl"):
            texts = _json_demonstrations(path)
        else:
            raise input_error(name, "source", expected, described(repr(str(path))))
    except (OSError, UnicodeDecodeError) as exc:
        raise input_error(name, "source", "readable UTF-8 text files",
                          described(f"{str(path)!r} ({getattr(exc, 'strerror', None) or exc})")) from None
    texts = [t.strip() for t in texts if t.strip()]
    if not texts:
        raise input_error("load_demonstrations", "source", "a source holding demonstration issues",
                          described(f"none in {str(path)!r}"))
    return texts
