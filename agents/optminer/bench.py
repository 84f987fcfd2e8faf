"""Optimisation-modelling benchmarks: loading, the solving agent, evaluation with resumable logs.

Benchmarks use the convention of the SIRL project's cleaned test sets: one JSON record per line
with the problem in ``en_question`` and the optimal objective in ``en_answer`` (a number, or
"No Best Solution" when the problem has no optimum). ``.jsonl`` files are JSON lines; ``.json``
files may be a JSON array of records or JSON lines (IndustryOR's file is the latter despite its
name). Any file in that convention is a benchmark, so users can add their own.

Reconstruction: the agent (:func:`solve_problem`) is our reading of Opt-Miner's loop: the model may call
``search(query)`` over a document corpus (when one is given) and ends with a model and solver code
in a ``python`` block; :class:`~.scorer.Scorer` runs it and compares the objective.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from icml26.errors import described, input_error

from .retrieval import MissingPathError
from .scorer import BRANCHES, Scorer, Tolerance, benchmark_rounding, parse_answer

ENV_FOLDER = "ICML26_OPTBENCH"
SUFFIXES = (".jsonl", ".json")
PROMPT_SOLVERS = ("PuLP (its bundled CBC)", "scipy.optimize (milp / linprog, HiGHS)", "highspy (HiGHS)")
"""The solvers the system prompt names; each is a dependency of icml26, and a test runs each in the sandbox."""
SYSTEM_PROMPT = (
    "You are an expert in operations research. Read the optimisation problem, write its mathematical model "
    "(decision variables, objective, constraints), then write one self-contained Python program in a ```python "
    f"code block that solves it with {', '.join(PROMPT_SOLVERS[:-1])} or {PROMPT_SOLVERS[-1]}. The program's last "
    "line of output must be `OBJECTIVE: <value>` with the optimal objective value as a plain number, or "
    "`OBJECTIVE: INFEASIBLE` / `OBJECTIVE: UNBOUNDED` when the problem has no optimum.")
SEARCH_HINT = (" A `search` tool looks up technical documents (standards, schedules, modelling techniques); "
               "use it when the problem refers to knowledge it does not state.")


@dataclass
class BenchItem:
    id: str
    question: str
    answer: float | None      # None: the problem has no optimum
    raw_answer: str
    benchmark: str


def bench_folder(folder: str | os.PathLike | None = None) -> Path | None:
    """The benchmark folder: ``folder``, else the ``ICML26_OPTBENCH`` environment variable, else None."""
    value = folder if folder is not None else os.environ.get(ENV_FOLDER)
    return Path(value).expanduser() if value else None


def _records(path: Path) -> list[tuple[int, object]]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None  # JSON lines in a .json file
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None) or [data]
        if isinstance(data, list):
            return list(enumerate(data, 1))
    records = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            records.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            raise input_error("load_benchmark", f"{path.name} line {number}", "one JSON object per line",
                              described(f"invalid JSON ({exc.msg})")) from None
    return records


def load_benchmark(path: str | os.PathLike, *, question_field: str = "en_question", answer_field: str = "en_answer",
                   name: str | None = None) -> list[BenchItem]:
    """Read a benchmark file (``.jsonl`` or ``.json``) into :class:`BenchItem` s."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise input_error("load_benchmark", path.name, f"a file ending in one of {SUFFIXES} (JSON records with "
                          f"{question_field!r} and {answer_field!r})", path.suffix or described("no suffix"))
    if not path.is_file():
        raise MissingPathError("load_benchmark", "path", "an existing benchmark file",
                               described(f"{str(path)!r}, which does not exist"))
    name = name or path.stem
    items = []
    for number, record in _records(path):
        if not isinstance(record, dict):
            raise input_error("load_benchmark", f"{path.name} record {number}", "a JSON object",
                              described(type(record).__name__))
        for field in (question_field, answer_field):
            if field not in record:
                raise input_error("load_benchmark", f"{path.name} record {number}", f"the {field!r} field (pass "
                                  "question_field=/answer_field= for other names)",
                                  described(f"a record missing the {field!r} field, with {sorted(record)}"))
        try:
            answer = parse_answer(record[answer_field])
        except ValueError:
            raise input_error("load_benchmark", f"{path.name} record {number}: {answer_field}",
                              "a finite number or 'No Best Solution'", record[answer_field]) from None
        item_id = str(record.get("id", number))
        items.append(BenchItem(f"{name}/{item_id}", str(record[question_field]), answer,
                               str(record[answer_field]).strip(), name))
    if not items:
        raise input_error("load_benchmark", path.name, "a benchmark file with records", described("none"))
    return items


def discover(folder: str | os.PathLike) -> dict[str, Path]:
    """Benchmark files (``*.jsonl``, ``*.json``) in ``folder``, by name (the file stem)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingPathError("discover", "folder", "an existing folder of benchmark files",
                               described(f"{str(folder)!r}, which does not exist"))
    found = {p.stem: p for p in sorted(folder.iterdir()) if p.suffix.lower() in SUFFIXES and p.is_file()}
    if not found:
        raise input_error("discover", "folder", f"a folder with benchmark files ({', '.join(SUFFIXES)})", str(folder))
    return found


# -- the agent -------------------------------------------------------------------------------------
def solve_problem(backend, question: str, *, search: Callable[[str], str] | None = None, max_turns: int = 4,
                  sampling: dict | None = None, system_prompt: str = SYSTEM_PROMPT) -> tuple[str, list[dict], dict]:
    """Ask ``backend`` to model and solve ``question``; tool calls to ``search`` are executed.

    Returns ``(answer_text, messages, usage)``; ``answer_text`` joins the assistant's contents
    (the scorer takes its last code block).
    """
    from icml26.agents.backends import Usage

    tools = None
    if search is not None:
        from transformers.utils import get_json_schema

        tools = [get_json_schema(search)]
        system_prompt = system_prompt + SEARCH_HINT
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": question}]
    usage, texts = Usage(), []
    for _ in range(max_turns):
        reply = backend.chat(messages, tools=tools, **(sampling or {}))
        usage = usage + reply.usage
        messages.append(reply.to_openai())
        texts.append(reply.content or "")
        if not reply.tool_calls or search is None:
            break
        for call in reply.tool_calls:
            query = (call.arguments or {}).get("query")
            if call.name != "search" or not isinstance(query, str):
                observation = (f"error: unknown or malformed tool call ({call.error or call.name!r}); "
                               "call search with {\"query\": \"...\"}")
            else:
                observation = search(query)
            messages.append({"role": "tool", "tool_call_id": call.id, "name": call.name or "", "content": observation})
    return "\n".join(t for t in texts if t), messages, usage.to_dict()


INFRA_ERROR = "infra_error"


def _done_ids(path: Path) -> dict[str, dict]:
    done = {}
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off by an interrupted run
            if record.get("status") not in (INFRA_ERROR, "backend_error"):  # those are asked again
                done[record["id"]] = record
    return done


def evaluate(backend, items: Sequence[BenchItem], out_path: str | os.PathLike, *, scorer: Scorer,
             search: Callable[[str], str] | None = None, sampling: dict | None = None, max_turns: int = 4,
             resume: bool = True, progress: bool = True, stop_on_infra_error: bool = True) -> dict:
    """Run the agent on ``items``, score each answer, append every generation to ``out_path`` (JSONL).

    A backend, network or sandbox failure is recorded with status ``infra_error``: it is not the
    model's answer, so it counts in neither ``correct`` nor ``scored`` (the accuracy's denominator),
    and with ``stop_on_infra_error`` it ends the run (``"stopped"`` holds the reason). With
    ``resume`` the items already in ``out_path`` are not asked again (infrastructure failures are).
    Returns ``{"n", "scored", "correct", "accuracy" (None when nothing was scored), "infra_errors",
    "tolerance", "rounding" (the benchmark's :data:`~.scorer.BENCHMARK_ROUNDING` entry), "tolerance_branches"
    (:func:`tolerance_branches`), "widened_references" (its ``rounded_half_ulp`` count), "statuses"}`` (plus
    ``"stopped"``).
    """
    from tqdm.auto import tqdm

    from icml26.agents.backends import BackendError
    from icml26.agents.sandbox import SandboxError

    out_path = Path(out_path)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    done = _done_ids(out_path) if resume else {}
    if not resume and out_path.exists():
        out_path.unlink()
    stopped = None
    with out_path.open("a", encoding="utf-8") as log:
        for item in tqdm(items, desc=items[0].benchmark if items else "eval", disable=not progress, unit="q"):
            if item.id in done:
                continue
            record = {"id": item.id, "benchmark": item.benchmark, "question": item.question,
                      "reference": item.raw_answer, "tolerance": scorer.tolerance.name}
            try:
                text, messages, usage = solve_problem(backend, item.question, search=search, max_turns=max_turns,
                                                      sampling=sampling)
            except BackendError as exc:
                record.update(status=INFRA_ERROR, correct=False, reward=0.0, error=f"backend: {exc}")
            else:
                record.update(completion=text, messages=messages, usage=usage)
                try:
                    score = scorer.score(text, item.raw_answer, benchmark=item.benchmark)
                except (SandboxError, OSError) as exc:
                    record.update(status=INFRA_ERROR, correct=False, reward=0.0, error=f"sandbox: {exc}")
                else:
                    record.update(status=score.status, correct=score.correct, reward=score.reward,
                                  predicted=score.predicted, answer_source=score.answer_source,
                                  relative_error=score.relative_error, program_output=score.output[-2000:])
            log.write(json.dumps(record, ensure_ascii=False) + "\n")
            log.flush()
            done[item.id] = record
            if record["status"] == INFRA_ERROR and stop_on_infra_error:
                stopped = f"{item.id}: {record['error']}"
                break
    records = [done[i.id] for i in items if i.id in done]
    statuses: dict[str, int] = {}
    for r in records:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    correct = sum(bool(r["correct"]) for r in records)
    infra = statuses.get(INFRA_ERROR, 0)
    scored = len(records) - infra
    summary = {"n": len(items), "scored": scored, "correct": correct,
               "accuracy": correct / scored if scored else None, "infra_errors": infra,
               "tolerance": scorer.tolerance.to_dict(),
               "rounding": dict(vars(benchmark_rounding(items[0].benchmark))) if items else None,
               "tolerance_branches": (branches := tolerance_branches(items, scorer.tolerance)),
               "widened_references": branches["rounded_half_ulp"], "statuses": statuses}
    if stopped:
        summary["stopped"] = stopped
    return summary


def tolerance_branches(items: Sequence[BenchItem], tolerance: Tolerance | None = None) -> dict[str, int]:
    """How many references of ``items`` each tolerance branch decides (:data:`~.scorer.BRANCHES`, plus
    ``no_optimum`` for "No Best Solution"), under ``tolerance`` (default: the default rule) and each item's
    benchmark rounding rule."""
    tolerance = tolerance or Tolerance()
    counts = dict.fromkeys(BRANCHES + ("no_optimum",), 0)
    for item in items:
        key = "no_optimum" if item.answer is None else tolerance.branch(
            item.answer, item.raw_answer, rounds=benchmark_rounding(item.benchmark).rounds)
        counts[key] += 1
    return counts


def evaluate_folder(backend, folder: str | os.PathLike, out_dir: str | os.PathLike, *,
                    benchmarks: Sequence[str] | None = None, limit: int | None = None,
                    scorer: Scorer | None = None, **kwargs) -> dict:
    """:func:`evaluate` on every benchmark file in ``folder`` (or those named); ``summary.json`` in ``out_dir``.

    Without ``scorer`` a default one (the default tolerance rule) is built. Stops after a benchmark
    that :func:`evaluate` stopped on an infrastructure failure.
    """
    from icml26.utils import atomic_write_json

    found = discover(folder)
    names = list(benchmarks) if benchmarks else list(found)
    unknown = [n for n in names if n not in found]
    if unknown:
        raise input_error("evaluate_folder", "benchmarks", f"names among {sorted(found)} (the files in {folder})",
                          unknown)
    out_dir = Path(out_dir)
    own = scorer is None
    scorer = scorer or Scorer()
    summary = {}
    try:
        for name in names:
            items = load_benchmark(found[name])[:limit] if limit else load_benchmark(found[name])
            summary[name] = evaluate(backend, items, out_dir / f"{name}.jsonl", scorer=scorer, **kwargs)
            atomic_write_json(out_dir / "summary.json", summary)
            if "stopped" in summary[name]:
                break
    finally:
        if own:
            scorer.close()
    return summary


def infra_failure(summary: dict) -> str | None:
    """One line naming the first infrastructure failure of an :func:`evaluate_folder` summary, else None."""
    for name, s in summary.items():
        if s.get("infra_errors"):
            return (f"{s['infra_errors']} infrastructure failure(s) in {name}, first: "
                    f"{s.get('stopped', 'see ' + name + '.jsonl')}").replace("\n", " ")
    return None


def format_summary(summary: dict) -> str:
    lines = ["| benchmark | n | scored | correct | accuracy | infra errors | unparsed | tolerance | references by "
             "branch (integer exact / zero / rounded half-ulp / relative) |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, s in summary.items():
        accuracy = "n/a" if not s["scored"] else f"{100 * s['accuracy']:.1f}%"
        lines.append(f"| {name} | {s['n']} | {s['scored']} | {s['correct']} | {accuracy} | {s['infra_errors']} "
                     f"| {s['statuses'].get('unparsed', 0)} | {s['tolerance']['rule']} | {_branches(s)} |")
    return "\n".join(lines)


def _branches(summary: dict) -> str:
    counts = summary.get("tolerance_branches") or {}
    text = " / ".join(str(counts.get(b, 0)) for b in BRANCHES)
    rounding = summary.get("rounding")
    return text + ("" if rounding is None else " (rounds)" if rounding["rounds"] else " (exact)")
