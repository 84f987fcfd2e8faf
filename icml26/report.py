"""Render a run (the content of ``results.json``) as ``report.md`` and as a terminal summary."""

from __future__ import annotations

from typing import Any


def format_value(value: Any) -> str:
    """A value as a report shows it: floats to 4 significant digits, None as n/a, long lists cut."""
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        if len(value) > 8:
            return f"[{', '.join(format_value(v) for v in value[:8])}, ... ({len(value)} values)]"
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return str(value)


def _cell(value: Any) -> str:
    return format_value(value).replace("|", "\\|").replace("\n", " ")


def table_columns(rows: list[dict[str, Any]]) -> list[str]:
    """Every key of ``rows``, in first-seen order: the columns of their table."""
    columns: list[str] = []
    for row in rows:
        columns += [c for c in row if c not in columns]
    return columns


def markdown_table(rows: list[dict[str, Any]], columns: list[str] | None = None) -> str:
    """A list of dicts as a markdown table: ``columns`` in that order, else every key in first-seen order."""
    if not rows:
        return "_(empty)_"
    if columns is None:
        columns = table_columns(rows)
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(lines)


def claim_value(value: Any, unit: str) -> str:
    """A claim's measured or reference value with its unit."""
    return format_value(value) + (f" {unit}" if unit and value is not None else "")


def verdict(claim: dict[str, Any]) -> str:
    """``yes`` or ``NO``: the verdict of a claim as stored (``holds``)."""
    return "yes" if claim["holds"] else "NO"


def run_source(run: dict[str, Any]) -> dict[str, Any] | None:
    """``{"commit", "dirty"}`` of a run record, or None when it has none: read from ``git_commit`` / ``git_dirty``
    (written since 0.3.0) or from the nested ``git`` of older ``results.json`` files."""
    if run.get("git_commit"):
        return {"commit": run["git_commit"], "dirty": run.get("git_dirty")}
    nested = run.get("git")
    return dict(nested) if isinstance(nested, dict) and nested.get("commit") else None


def commit_text(git: dict[str, Any] | None) -> str:
    """The full commit in backticks, or ``unknown`` (not a git checkout, git missing, or an old record)."""
    return f"`{git['commit']}`" if git and git.get("commit") else "unknown"


def dirty_text(dirty: Any) -> str:
    """``yes`` / ``no`` / ``unknown``: whether a run's tree had uncommitted changes."""
    return "unknown" if dirty is None else "yes" if dirty else "no"


def source_text(git: dict[str, Any] | None, length: int = 40) -> str:
    """``commit 1a2b3c4`` (``length`` hex digits), noting uncommitted changes; a run without git info says so."""
    if not git or not git.get("commit"):
        return "commit unknown"  # not run from a git checkout, git missing, or a run from before it was recorded
    return f"commit {git['commit'][:length]}" + (" with uncommitted changes" if git.get("dirty") else "")


def claim_rows(run: dict[str, Any]) -> list[dict[str, str]]:
    """One row per claim (and one per experiment that did not finish) for summaries."""
    rows = []
    for exp in run["experiments"]:
        if exp["status"] != "ok":
            detail = exp.get("error_summary") or exp["status"]
            rows.append({"experiment": exp["key"], "claim": f"({exp['status']}) {detail}", "measured": "",
                         "reference": "", "holds": ""})
            continue
        claims = exp["result"]["claims"]
        if not claims:
            rows.append({"experiment": exp["key"], "claim": "(no claims)", "measured": "", "reference": "",
                         "holds": ""})
        for c in claims:
            rows.append({
                "experiment": exp["key"],
                "claim": c["statement"],
                "measured": claim_value(c["measured"], c["unit"]),
                "reference": claim_value(c["reference"], c["unit"]),
                "holds": f"{verdict(c)} ({c['comparison']})",
            })
    return rows


def summary_text(run: dict[str, Any], width: int = 48) -> str:
    """A fixed-width text table for the terminal."""
    rows = claim_rows(run)
    if not rows:
        return f"no {run['kind']}s were run"
    columns = ["experiment", "claim", "measured", "reference", "holds"]

    def clip(text: str, n: int) -> str:
        return text if len(text) <= n else text[: n - 1] + "…"

    cells = [[clip(r[c], width) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(columns)]
    line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths)).rstrip()  # noqa: E731
    out = [line(columns), line(["-" * w for w in widths])]
    out += [line(row) for row in cells]
    return "\n".join(out)


def render_markdown(run: dict[str, Any]) -> str:
    """The full ``report.md`` of a run."""
    kind = run["kind"]
    lines = [
        f"# icml26 {'reproduction' if kind == 'experiment' else 'benchmark'} report",
        "",
        f"- state: **{run['state']}**",
        f"- mode: {run['mode']}, seeds: {run['seeds']}, device: {run['device']}",
        f"- started: {run['started']}" + (f", finished: {run['finished']}" if run.get("finished") else ""),
        f"- command: `{run['command']}`",
        f"- git commit: {commit_text(run_source(run))}",
        f"- uncommitted changes: {dirty_text((run_source(run) or {}).get('dirty'))}",
        "- versions: " + ", ".join(f"{k} {v}" for k, v in run.get("versions", {}).items()),
        "",
        "## Summary",
        "",
        markdown_table(claim_rows(run)) if run["experiments"] else f"_no {kind}s_",
        "",
    ]
    for exp in run["experiments"]:
        lines += [f"## `{exp['key']}`: {exp['title']}", ""]
        meta = f"status: **{exp['status']}**"
        if exp.get("seconds") is not None:
            meta += f", {exp['seconds']:.1f} s"
        if exp.get("paper"):
            meta += f", paper: `{exp['paper']}`"
        lines += [meta, ""]
        if exp.get("error"):
            lines += ["```text", exp["error"].rstrip(), "```", ""]
        result = exp.get("result")
        if not result:
            continue
        if result["claims"]:
            lines += ["### Claims", "", markdown_table([
                {"claim": c["statement"], "measured": claim_value(c["measured"], c["unit"]),
                 "reference": claim_value(c["reference"], c["unit"]), "test": c["comparison"],
                 "holds": verdict(c)} for c in result["claims"]]), ""]
        if result["metrics"]:
            lines += ["### Metrics", "", markdown_table(
                [{"metric": k, "value": v} for k, v in result["metrics"].items()]), ""]
        for name, rows in result["tables"].items():
            lines += [f"### {name}", "", markdown_table(rows), ""]
        for name, path in result["figures"].items():
            lines += [f"![{name}]({path})", ""]
        if result["notes"]:
            lines += ["### Notes", "", result["notes"].strip(), ""]
    return "\n".join(lines).rstrip() + "\n"
