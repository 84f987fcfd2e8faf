"""Results pages for the docs, generated from a run folder: ``icml26 report RUN_DIR --docs DIR``.

Measured numbers reach a docs page only through here. For each experiment of a run, :func:`write_results_pages`
writes ``DIR/K.json`` (everything the page shows, self-contained, sorted keys), copies its figures to
``DIR/K/<name>.png`` and writes ``DIR/K.md``, a Markdown fragment rendered from ``K.json`` alone by
:func:`render_results_page`, for a page to include (MyST: ``{include}`` with ``:relative-images:``).
Rendering is deterministic, so :func:`regenerate` (and a test) can prove that every committed ``K.md`` is
what its ``K.json`` renders to.

``K.json`` (schema 1)::

    schema      1
    kind        "experiment" | "benchmark"
    key, title  the registered key and title; paper: the paper's key or null
    mode        "quick" | "full";  seeds: [0, 1, ...];  device: what the run was given ("auto", "cpu", ...)
    command     the command line that reproduces it, e.g. "icml26 reproduce rhi --quick --seeds 3"
    seconds     wall time of this experiment (all its seeds), to 0.1 s
    date        UTC date the run finished (or started, for a run that never closed), "YYYY-MM-DD"
    git         {"commit": full hash, "dirty": bool} or null (run outside a git checkout, or before it was recorded)
    versions    {"python": ..., "icml26": ..., "torch": ..., ...} as results.json recorded them
    machine     {"platform", "cpu_count", "torch_threads", "cuda"} or null
    claims      [{statement, measured, reference, relation, comparison, factor, rtol, atol, unit, holds,
                  per_seed}] in the run's order: the verdicts the runner computed (on the median over
                  seeds when there are several); per_seed is [{seed, statement, measured, reference,
                  holds}] (the same relation and test), or null when the experiment handled its seeds itself
    tables      [{name, columns, rows}] in the run's order (rows are objects; columns keep the order)
    metrics     {name: value} of the first seed
    figures     [{name, file}], file relative to DIR ("rhi/residual_vs_k.png")
    notes       the experiment's notes
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .errors import described, input_error
from .report import claim_value, markdown_table, run_source, source_text, table_columns, verdict
from .results import CLAIMS_PER_SEED_TABLE, Claim
from .utils import atomic_write_bytes, atomic_write_text

SCHEMA = 1
_KEYS = ("schema", "kind", "key", "title", "paper", "mode", "seeds", "device", "command", "seconds", "date", "git",
         "versions", "machine", "claims", "tables", "metrics", "figures", "notes")


def dumps(data: dict[str, Any]) -> str:
    """``K.json``'s text: sorted keys, two-space indents, strict JSON, UTF-8 kept readable, one final newline."""
    return json.dumps(data, indent=2, sort_keys=True, allow_nan=False, ensure_ascii=False) + "\n"


def load_run(run_dir: str | os.PathLike) -> dict[str, Any]:
    """The record ``results.json`` of a run folder (``icml26 reproduce`` or ``icml26 bench``)."""
    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise input_error("report", "RUN_DIR", "a run folder holding results.json (from icml26 reproduce)",
                          str(run_dir))
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise input_error("report", "RUN_DIR", "a readable results.json", described(f"{path}: {exc}")) from None
    if not isinstance(record, dict) or not isinstance(record.get("experiments"), list) or "mode" not in record:
        raise input_error("report", "RUN_DIR", "a results.json written by icml26 reproduce",
                          described(f"{path} without 'mode' and 'experiments'"))
    return record


def reproduce_command(kind: str, key: str, mode: str, seeds: Sequence[int], device: str = "auto") -> str:
    """The command line that reruns one experiment as it was run (seeds 0..N-1 are all the CLI can ask for)."""
    seeds = list(seeds)
    if seeds != list(range(len(seeds))):
        raise input_error("report", "RUN_DIR", "a run of seeds 0..N-1 (what `--seeds N` runs)", seeds)
    command = f"icml26 {'reproduce' if kind == 'experiment' else 'bench'} {key} --{mode} --seeds {len(seeds)}"
    return command + ("" if device == "auto" else f" --device {device}")


def _per_seed(claims: list[dict[str, Any]], tables: dict[str, Any], seeds: list[int]) -> list[Any]:
    """Each claim's own verdict at every seed: from the table ``over_seeds`` writes, or the claim itself (one seed)."""
    if len(seeds) == 1:
        return [[{"seed": seeds[0], "statement": c["statement"], "measured": c["measured"],
                  "reference": c["reference"], "holds": c["holds"]}] for c in claims]
    rows = tables.get(CLAIMS_PER_SEED_TABLE)
    if not rows or len(rows) != len(claims) * len(seeds):
        return [None] * len(claims)
    out = []
    for index in range(len(claims)):
        group = rows[index * len(seeds):(index + 1) * len(seeds)]
        if [r.get("seed") for r in group] != seeds:
            return [None] * len(claims)
        out.append([{"seed": r["seed"], "statement": r["claim"], "measured": r["measured"],
                     "reference": r["reference"], "holds": r["holds"]} for r in group])
    return out


def page_data(record: dict[str, Any], experiment: dict[str, Any]) -> dict[str, Any]:
    """What ``K.json`` holds for one finished experiment of a run record (figure files not copied here)."""
    key = experiment["key"]
    if experiment.get("status") != "ok" or not experiment.get("result"):
        raise input_error("report", "RUN_DIR", f"experiment {key!r} finished (status ok)",
                          described(f"status {experiment.get('status')!r}"))
    result = experiment["result"]
    seeds = list(record["seeds"])
    claims = []
    for claim, per_seed in zip(result["claims"], _per_seed(result["claims"], result["tables"], seeds)):
        if Claim.from_dict(claim).holds != claim["holds"]:  # the stored verdict must be what the values give
            raise input_error("report", "RUN_DIR", "claims whose stored verdict matches their values",
                              described(f"{key}: {claim['statement']!r} says holds={claim['holds']}"))
        claims.append({name: claim[name] for name in ("statement", "measured", "reference", "relation", "comparison",
                                                      "factor", "rtol", "atol", "unit", "holds")}
                      | {"per_seed": per_seed})
    tables = []
    for name, rows in result["tables"].items():
        if name == CLAIMS_PER_SEED_TABLE:
            continue
        tables.append({"name": name, "columns": table_columns(rows), "rows": rows})
    seconds = experiment.get("seconds")
    when = record.get("finished") or record.get("started") or ""
    return {
        "schema": SCHEMA,
        "kind": record.get("kind", "experiment"),
        "key": key,
        "title": experiment["title"],
        "paper": experiment.get("paper"),
        "mode": record["mode"],
        "seeds": seeds,
        "device": record.get("device", "auto"),
        "command": reproduce_command(record.get("kind", "experiment"), key, record["mode"], seeds,
                                     record.get("device", "auto")),
        "seconds": None if seconds is None else round(seconds, 1),
        "date": when[:10] or None,
        "git": run_source(record),
        "versions": record.get("versions", {}),
        "machine": record.get("machine"),
        "claims": claims,
        "tables": tables,
        "metrics": result["metrics"],
        "figures": [{"name": name, "file": f"{key}/{name}.png"} for name in result["figures"]],
        "notes": result.get("notes", ""),
    }


def _check_page(data: Any) -> None:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        got = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise input_error("render_results_page", "data", f"a results page of schema {SCHEMA} (K.json)",
                          described(f"schema {got!r}"))
    missing = [k for k in _KEYS if k not in data]
    if missing:
        raise input_error("render_results_page", "data", f"a results page with every field of schema {SCHEMA}",
                          described(f"one without {', '.join(missing)}"))


def _label(data: dict[str, Any]) -> str:
    seeds = ", ".join(map(str, data["seeds"]))
    seconds = "time unknown" if data["seconds"] is None else f"{data['seconds']:.0f} s"
    return (f"**Reference run**: {data['mode']} mode, seed{'s' if len(data['seeds']) > 1 else ''} {seeds}, "
            f"{source_text(data['git'], 7)}, {data['date'] or 'date unknown'}, {seconds}")


def _seed_cell(entry: dict[str, Any], unit: str) -> str:
    return f"{claim_value(entry['measured'], unit)} vs {claim_value(entry['reference'], unit)}: {verdict(entry)}"


def _machine_text(data: dict[str, Any]) -> str:
    machine = data["machine"] or {}
    parts = [machine.get("platform") or "an unrecorded machine"]
    if machine.get("cpu_count"):
        parts.append(f"{machine['cpu_count']} CPUs")
    if machine.get("torch_threads"):
        parts.append(f"{machine['torch_threads']} torch thread{'s' if machine['torch_threads'] > 1 else ''}")
    if machine.get("cuda"):
        parts.append("GPU " + ", ".join(machine["cuda"]))
    parts.append(f"device {data['device']}")
    first = [n for n in ("python", "icml26") if n in data["versions"]]
    names = first + sorted(n for n in data["versions"] if n not in first)
    versions = ", ".join(f"{n} {data['versions'][n]}" for n in names if data["versions"][n] != "not installed")
    return f"Run on {', '.join(parts)}; {versions or 'versions not recorded'}."


def render_results_page(data: dict[str, Any]) -> str:
    """The Markdown fragment ``K.md`` of a results page, from ``K.json`` (as loaded) alone.

    The same data always gives the same text. It has no headings of its own (bold captions instead), so a page
    can include it under a heading of any level; figures are linked as ``K/<name>.png``, relative to the file.
    """
    _check_page(data)
    key, claims, n_seeds = data["key"], data["claims"], len(data["seeds"])
    verb = "reproduce" if data["kind"] == "experiment" else "bench"
    lines = [_label(data), "",
             f"{'Experiment' if verb == 'reproduce' else 'Benchmark'} `{key}`: {data['title']}. Rerun it with:", "",
             "```bash", data["command"], "```", ""]
    if claims:
        holding = sum(bool(c["holds"]) for c in claims)
        lines += [f"**Claims**: {holding} of {len(claims)} hold"
                  + (f", each decided on the median over seeds {', '.join(map(str, data['seeds']))}" if n_seeds > 1
                     else "") + ".", "",
                  markdown_table([{"#": i, "claim": c["statement"], "measured": claim_value(c["measured"], c["unit"]),
                                   "reference": claim_value(c["reference"], c["unit"]), "test": c["comparison"],
                                   "holds": verdict(c)} for i, c in enumerate(claims, 1)]), ""]
        if n_seeds > 1 and all(c["per_seed"] for c in claims):
            columns = ["#"] + [f"seed {s}" for s in data["seeds"]]
            rows = [{"#": i, **{f"seed {e['seed']}": _seed_cell(e, c["unit"]) for e in c["per_seed"]}}
                    for i, c in enumerate(claims, 1)]
            lines += ["**Claims per seed** (measured vs reference: holds at that seed alone):", "",
                      markdown_table(rows, columns), ""]
    else:
        lines += ["This run makes no claims.", ""]
    of_seed = f" (seed {data['seeds'][0]})" if n_seeds > 1 else ""
    for table in data["tables"]:
        lines += [f"**{table['name']}**{of_seed}", "", markdown_table(table["rows"], table["columns"]), ""]
    if data["metrics"]:
        lines += [f"**Metrics**{of_seed}", "",
                  markdown_table([{"metric": k, "value": v} for k, v in data["metrics"].items()]), ""]
    for figure in data["figures"]:
        lines += [f"![{figure['name']}]({figure['file']})", ""]
    if data["notes"].strip():
        lines += [f"**Notes**: {' '.join(data['notes'].split())}", ""]
    lines += [_machine_text(data), "",
              f"<!-- Generated by `icml26 report` from {key}.json: edit the run or the renderer, not this file. -->"]
    return "\n".join(lines) + "\n"


def write_results_pages(run_dir: str | os.PathLike, docs_dir: str | os.PathLike,
                        keys: Sequence[str] | None = None) -> list[Path]:
    """Write ``K.json``, ``K.md`` and ``K/<figure>.png`` into ``docs_dir`` for each experiment of a run.

    ``keys`` picks experiments of the run (default: all of them); every one picked must have finished.
    Figures of an earlier page of the same key that this run does not have are removed. Returns the files
    written.
    """
    run_dir, docs_dir = Path(run_dir), Path(docs_dir)
    record = load_run(run_dir)
    by_key = {e["key"]: e for e in record["experiments"]}
    if keys:
        unknown = [k for k in keys if k not in by_key]
        if unknown:
            raise input_error("report", "--key", f"keys of experiments in {run_dir} ({', '.join(by_key) or 'none'})",
                              unknown[0])
        chosen = [by_key[k] for k in dict.fromkeys(keys)]
    else:
        chosen = list(by_key.values())
    if not chosen:
        raise input_error("report", "RUN_DIR", "a run folder with at least one experiment", str(run_dir))
    unfinished = [f"{e['key']} ({e['status']})" for e in chosen if e.get("status") != "ok"]
    if unfinished:
        raise input_error("report", "RUN_DIR", "experiments that finished (status ok; pick others with --key)",
                          described(", ".join(unfinished)))
    pages = [page_data(record, e) for e in chosen]  # validate everything before writing anything
    for page, experiment in zip(pages, chosen):
        for name, path in experiment["result"]["figures"].items():
            if not (run_dir / path).is_file():
                raise input_error("report", "RUN_DIR", "a run folder holding its figures",
                                  described(f"no {run_dir / path} (figure {name!r} of {page['key']})"))
    try:
        docs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise input_error("report", "--docs", "a folder that can be written", f"{docs_dir}: {exc.strerror}") from None
    written: list[Path] = []
    for page, experiment in zip(pages, chosen):
        key = page["key"]
        figure_dir = docs_dir / key
        kept = set()
        for figure, path in zip(page["figures"], experiment["result"]["figures"].values()):
            target = docs_dir / figure["file"]
            atomic_write_bytes(target, (run_dir / path).read_bytes())
            kept.add(target.name)
            written.append(target)
        if figure_dir.is_dir():
            for stale in figure_dir.glob("*.png"):
                if stale.name not in kept:
                    stale.unlink()
            if not any(figure_dir.iterdir()):
                shutil.rmtree(figure_dir)
        text = dumps(page)
        atomic_write_text(docs_dir / f"{key}.json", text)
        atomic_write_text(docs_dir / f"{key}.md", render_results_page(json.loads(text)))
        written += [docs_dir / f"{key}.json", docs_dir / f"{key}.md"]
    return written


def regenerate(docs_dir: str | os.PathLike) -> list[Path]:
    """Re-render every ``K.md`` of ``docs_dir`` from its ``K.json``; returns the ``.md`` files that changed."""
    docs_dir = Path(docs_dir)
    if not docs_dir.is_dir():
        raise input_error("regenerate", "docs_dir", "a folder of results pages (K.json)", str(docs_dir))
    changed = []
    for source in sorted(docs_dir.glob("*.json")):
        try:
            data = json.loads(source.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise input_error("regenerate", "docs_dir", "results pages that are valid JSON",
                              described(f"{source}: {exc}")) from None
        text = render_results_page(data)
        target = source.with_suffix(".md")
        if not target.is_file() or target.read_bytes() != text.encode("utf-8"):
            atomic_write_text(target, text)
            changed.append(target)
    return changed
