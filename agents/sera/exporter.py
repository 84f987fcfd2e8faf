"""SERA export (arXiv 2601.20789, the postprocessing into SFT data): the append-only ledger of finished
instances, and the SFT dataset built from it.

Every finished instance is one JSON line in ``ledger.jsonl`` (fsynced), holding both rollouts,
the synthetic issue, the judge's answer, the recall and the token usage. The dataset, the JSONL
exports and ``summary.json`` are all recomputed from the ledger, so a different threshold or filter
needs no new generation (:func:`export`), and a killed run loses only the instances in flight.

An export folder holds the same kept rows three times, in the forms their readers want:

- ``dataset/`` (``Dataset.save_to_disk``): ``messages`` ready for TRL, ``messages_openai`` the wire form;
- ``trajectories.jsonl`` (:data:`TRL_JSONL`): ``messages`` ready for TRL (tool-call arguments as JSON
  objects), so ``load_dataset("json", data_files=...)`` feeds ``SFTTrainer`` and each call renders once;
- ``trajectories.openai.jsonl`` (:data:`OPENAI_JSONL`): ``messages`` in the OpenAI wire format (arguments as
  JSON strings), as the agent exchanged them with the teacher; a chat template renders those strings
  JSON-encoded a second time, so this file is for OpenAI-style tooling, not for ``SFTTrainer``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import threading
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from icml26.agents.backends import to_template_messages
from icml26.errors import InputTypeError, described, input_error
from icml26.utils import atomic_write_json, atomic_write_text

from .verification import FilterConfig, changed_lines, check_threshold, filter_trajectory, is_verified, token_counter

logger = logging.getLogger(__name__)
REPORT_THRESHOLDS = (0.0, 0.5, 1.0)
#: The JSONL export for TRL (``messages`` with tool-call arguments as objects).
TRL_JSONL = "trajectories.jsonl"
#: The JSONL export in the OpenAI wire format (``messages`` with tool-call arguments as JSON strings).
OPENAI_JSONL = "trajectories.openai.jsonl"
TOKEN_STAGES = ("T1", "pr", "judge", "T2")


class Ledger:
    """``ledger.jsonl``: one JSON object per finished instance, appended under a lock with fsync.

    Reading keeps the last record of each id and ignores a torn last line (a killed writer);
    :meth:`repair` cuts that torn tail so new lines start on a line boundary.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()

    def repair(self) -> int:
        """Drop an incomplete last line; returns the number of bytes removed."""
        if not self.path.exists():
            return 0
        with open(self.path, "rb+") as handle:
            data = handle.read()
            cut = data.rfind(b"\n") + 1
            if cut == len(data):
                return 0
            handle.truncate(cut)
            handle.flush()
            os.fsync(handle.fileno())
            return len(data) - cut

    def records(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        if not self.path.exists():
            return out
        with open(self.path, encoding="utf-8") as handle:
            for line in handle:
                if not line.endswith("\n"):
                    break  # torn by a kill: that instance was not finished
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("id"), str):
                    out[record["id"]] = record
        return out

    def append(self, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(line)
                handle.flush()
                os.fsync(handle.fileno())


@dataclass
class GenerateSummary:
    """What a generation run produced; ``to_dict()`` is ``summary.json``.

    ``instances`` has one entry per finished instance with its recall (every second rollout, kept
    or not), whether each rollout passed the filters, and its tokens per stage, so yields at any
    threshold can be recomputed: see :meth:`kept_per_token`.
    """

    out_dir: str
    repo: str
    threshold: float
    planned: int
    completed: int
    status_counts: dict
    kept: dict                   # {"T1": n, "T2": n} at ``threshold``
    tokens: dict                 # {"prompt", "completion", "total", "by_stage": {stage: {...}}}
    by_threshold: dict           # "0.5" -> {"T2_verified", "T2_kept", "kept", "tokens_per_kept", ...}
    filter_drops: dict
    instances: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def tokens_per_kept_trajectory(self) -> float | None:
        return self.by_threshold[_tkey(self.threshold)]["tokens_per_kept"]

    def kept_per_token(self, threshold: float, *, completion_only: bool = False) -> float:
        """Trajectories kept (T1 + T2 verified at ``threshold`` and filtered) per generated token."""
        threshold = check_threshold(threshold)
        kept = sum(i["t1_kept"] for i in self.instances) + sum(
            bool(i["t2_passes_filters"] and is_verified(i["recall"], threshold, p2_nonempty=i["p2_lines"] > 0))
            for i in self.instances)
        tokens = self.tokens["completion" if completion_only else "total"]
        return kept / tokens if tokens else 0.0

    def to_dict(self) -> dict:
        data = asdict(self)
        data["tokens_per_kept_trajectory"] = self.tokens_per_kept_trajectory
        return data

    def describe(self) -> str:
        t = self.by_threshold[_tkey(self.threshold)]
        per = f"{t['tokens_per_kept']:.0f}" if t["tokens_per_kept"] is not None else "n/a"
        return (f"{self.completed}/{self.planned} instances done; kept {self.kept['T1']} T1 + {self.kept['T2']} T2 "
                f"(threshold {self.threshold:g}); tokens: {self.tokens['prompt']} prompt + "
                f"{self.tokens['completion']} completion = {self.tokens['total']}; {per} tokens per kept trajectory")


def _tkey(threshold: float) -> str:
    return f"{float(threshold):g}"


def _usage(record: dict, stage: str) -> dict:
    usage = (record.get("usage") or {}).get(stage) or {}
    return {"prompt_tokens": int(usage.get("prompt_tokens", 0)), "completion_tokens": int(usage.get("completion_tokens", 0))}


def _row(record: dict, stage: str, result, recall) -> dict:
    traj = record[stage.lower()]
    usage = _usage(record, stage)
    return {"id": f"{record['id']}-{stage}", "instance_id": record["id"], "stage": stage,
            "messages": result.messages, "tools": traj.get("tools") or [], "recall": recall,
            "patch": traj.get("patch") or "", "n_changed_lines": result.n_changed_lines,
            "submitted": bool(traj.get("submitted")), "exit_reason": traj.get("exit_reason") or "",
            "function": record["function"], "file": record["file"], "category": record["category"],
            "repo": record["repo"], "synthetic_pr": record.get("synthetic_pr") if stage == "T2" else None,
            **usage, "truncation_ratio": result.truncation_ratio}


def resolve_duplicates(records: list[dict]) -> list[dict]:
    """Ledger records with the duplicate-P1 rule applied: of identical P1s, the lowest index keeps it.

    During generation worker threads reach the duplicate check in any order, and a lower index takes
    an identical P1 over from a higher one that claimed it first (which may already have finished
    its second rollout). Here each such superseded record is shown as a one-worker run would have
    written it: status ``"duplicate"``, no synthetic issue, judge answer, second rollout or recall
    (its token usage, really spent, stays). Only records that went through the check take part
    (``p1_claimed`` not None: not runs with ``dedupe=False``). A failed record (``error``) holds its P1
    when it claimed it before failing (``p1_claimed`` True: the pull request, judge or second rollout
    failed), as it did at run time, but keeps its ``error`` status: it is retried on resume.
    """
    def key(record):
        t1 = record.get("t1") or {}
        claimed = record.get("p1_claimed", True)
        if (record.get("status") == "empty_p1" or claimed is None
                or (record.get("status") == "error" and claimed is not True) or not changed_lines(t1.get("patch"))):
            return None
        return hashlib.sha256(t1["patch"].encode()).hexdigest()

    owners: dict[str, tuple] = {}
    for record in records:
        digest = key(record)
        if digest is not None:
            rank = (record.get("index", 0), record["id"])
            owners[digest] = min(owners.get(digest, rank), rank)
    out = []
    for record in records:
        digest = key(record)
        if digest is not None and record["status"] not in ("duplicate", "error") \
                and owners[digest] != (record.get("index", 0), record["id"]):
            record = {**record, "status": "duplicate", "duplicate": True, "synthetic_pr": None, "judge_ok": None,
                      "t2": None, "recall": None}
        out.append(record)
    return out


def rows_from_records(records: list[dict], *, threshold: float, filters: FilterConfig | None = None,
                      count_tokens=None) -> tuple[list[dict], list[dict], Counter, Counter]:
    """Dataset rows (kept T1 and verified T2) and per-instance details, from ledger records.

    T1 is exported when it changed something, the judge accepted it, and it passes the filters;
    T2 when its recall reaches ``threshold`` (:func:`~icml26.agents.sera.verification.is_verified`) and it
    passes the filters.
    """
    threshold = check_threshold(threshold)
    filters = filters or FilterConfig()
    count = count_tokens or token_counter(None)
    rows, details, drops1, drops2 = [], [], Counter(), Counter()
    for record in records:
        detail = {"id": record["id"], "function": record["function"], "file": record["file"],
                  "category": record["category"], "status": record["status"], "recall": record.get("recall"),
                  "p1_lines": len(changed_lines((record.get("t1") or {}).get("patch"))),
                  "p2_lines": len(changed_lines((record.get("t2") or {}).get("patch"))),
                  "t1_kept": False, "t2_passes_filters": False, "t2_kept": False,
                  "tokens": {s: _usage(record, s) for s in TOKEN_STAGES}}
        details.append(detail)
        t1 = record.get("t1")
        if t1 and record["status"] != "error":
            result = filter_trajectory(t1["messages"], t1.get("patch"), t1.get("submitted", False),
                                       tools=t1.get("tools"), config=filters, count_tokens=count)
            reasons = list(result.reasons)
            if not detail["p1_lines"]:
                reasons.append("empty_patch")
            if record.get("judge_ok") is False:
                reasons.append("judged_invalid")
            drops1.update(reasons)
            if not reasons:
                detail["t1_kept"] = True
                rows.append(_row(record, "T1", result, None))
        t2 = record.get("t2")
        if t2 and record["status"] == "done":
            result = filter_trajectory(t2["messages"], t2.get("patch"), t2.get("submitted", False),
                                       tools=t2.get("tools"), config=filters, count_tokens=count)
            drops2.update(result.reasons)
            detail["t2_passes_filters"] = result.keep
            if not is_verified(record.get("recall"), threshold, p2_nonempty=detail["p2_lines"] > 0):
                drops2.update(["unverified"])
            elif result.keep:
                detail["t2_kept"] = True
                rows.append(_row(record, "T2", result, record.get("recall")))
    return rows, details, drops1, drops2


def trl_messages(messages: list[dict], row_id: Any = None) -> list[dict]:
    """OpenAI-wire messages as ``SFTTrainer`` (a chat template) consumes them: tool-call arguments as objects.

    A call whose arguments are not a JSON object (the model wrote bad JSON) becomes
    ``{"invalid_arguments": <raw text>}``, as it was shown back to the model during generation;
    ``None`` content becomes ``""`` and ``None``-valued keys are dropped
    (:func:`~icml26.agents.backends.to_template_messages`, then its strict form).
    """
    return to_template_messages(to_template_messages(messages), strict=True, row_id=row_id)


def dataset_features():
    """``messages``: TRL-ready (arguments as objects); ``messages_openai``: the same turns in the OpenAI wire
    format (arguments as JSON strings), as the agent exchanged them; both one ``Json`` per message."""
    from datasets import Features, Json, List, Value

    s, i, f = Value("string"), Value("int64"), Value("float64")
    return Features({"id": s, "instance_id": s, "stage": s, "messages": List(Json()),
                     "messages_openai": List(Json()), "tools": List(Json()),
                     "recall": f, "patch": s, "n_changed_lines": i, "submitted": Value("bool"), "exit_reason": s,
                     "function": s, "file": s, "category": s, "repo": s, "synthetic_pr": s, "prompt_tokens": i,
                     "completion_tokens": i, "truncation_ratio": f})


def write_dataset(rows: list[dict], path: str | os.PathLike):
    """Save rows (OpenAI-wire ``messages``) as a ``datasets.Dataset`` via ``save_to_disk``, ready for TRL.

    ``messages`` become TRL-ready (:func:`trl_messages`) and the wire form is kept as ``messages_openai``
    (:func:`dataset_features`), so ``SFTTrainer(train_dataset=load_from_disk(path))`` trains on it as it is.
    """
    from datasets import Dataset

    features = dataset_features()
    from datasets.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    rows = [{**r, "messages": trl_messages(r["messages"], r["id"]), "messages_openai": r["messages"]} for r in rows]
    ds = Dataset.from_dict({k: [r[k] for r in rows] for k in features}, features=features)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    was_disabled = are_progress_bars_disabled()
    disable_progress_bars()  # one shard of a few rows: the bar would only clutter the run's own progress
    try:
        ds.save_to_disk(str(tmp))
    finally:
        if not was_disabled:
            enable_progress_bars()
    shutil.rmtree(path, ignore_errors=True)
    os.replace(tmp, path)
    return ds


def summarize(records: list[dict], details: list[dict], rows: list[dict], drops1: Counter, drops2: Counter, *,
              out_dir, repo: str, threshold: float, planned: int, extra: dict | None = None) -> GenerateSummary:
    by_stage = {s: {"prompt_tokens": sum(d["tokens"][s]["prompt_tokens"] for d in details),
                    "completion_tokens": sum(d["tokens"][s]["completion_tokens"] for d in details)}
                for s in TOKEN_STAGES}
    prompt = sum(v["prompt_tokens"] for v in by_stage.values())
    completion = sum(v["completion_tokens"] for v in by_stage.values())
    kept_t1 = sum(d["t1_kept"] for d in details)
    by_threshold = {}
    for t in sorted({*REPORT_THRESHOLDS, threshold}):
        verified = sum(is_verified(d["recall"], t, p2_nonempty=d["p2_lines"] > 0) for d in details
                       if d["status"] == "done")
        kept_t2 = sum(d["t2_passes_filters"] and is_verified(d["recall"], t, p2_nonempty=d["p2_lines"] > 0)
                      for d in details if d["status"] == "done")
        kept = kept_t1 + kept_t2
        by_threshold[_tkey(t)] = {"T2_verified": verified, "T2_kept": kept_t2, "kept": kept,
                                  "tokens_per_kept": (prompt + completion) / kept if kept else None,
                                  "completion_tokens_per_kept": completion / kept if kept else None}
    return GenerateSummary(
        out_dir=str(out_dir), repo=repo, threshold=threshold, planned=planned, completed=len(records),
        status_counts=dict(Counter(r["status"] for r in records)),
        kept={"T1": kept_t1, "T2": sum(r["stage"] == "T2" for r in rows)},
        tokens={"prompt": prompt, "completion": completion, "total": prompt + completion, "by_stage": by_stage},
        by_threshold=by_threshold, filter_drops={"T1": dict(drops1), "T2": dict(drops2)}, instances=details,
        extra=dict(extra or {}))


def _jsonl(rows) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


def export(out_dir: str | os.PathLike, *, threshold: float = 0.5, filters: FilterConfig | None = None,
           tokenizer: Any = None, planned: int | None = None, extra: dict | None = None) -> GenerateSummary:
    """(Re)build ``dataset/``, ``trajectories.jsonl`` (TRL-ready), ``trajectories.openai.jsonl`` (the wire form)
    and ``summary.json`` from ``out_dir/ledger.jsonl`` (see the module docstring for the three forms).

    Duplicate P1s are settled here (:func:`resolve_duplicates`), so the export does not depend on the
    number of workers or on thread timing.
    """
    threshold = check_threshold(threshold, function="export")
    if filters is not None and not isinstance(filters, FilterConfig):
        raise InputTypeError("export", "filters", "None or a FilterConfig", described(type(filters).__name__))
    if not isinstance(out_dir, (str, os.PathLike)):
        raise InputTypeError("export", "out_dir", "the folder of a generate run", described(type(out_dir).__name__))
    out_dir = Path(out_dir)
    ledger = Ledger(out_dir / "ledger.jsonl")
    if not ledger.path.is_file():
        raise input_error("export", "out_dir", "the folder of a generate run (holding ledger.jsonl)",
                          described(f"{str(out_dir)!r}, which has no ledger.jsonl"))
    count_tokens = token_counter(tokenizer, function="export")
    records = resolve_duplicates(sorted(ledger.records().values(), key=lambda r: (r.get("index", 0), r["id"])))
    rows, details, drops1, drops2 = rows_from_records(records, threshold=threshold, filters=filters,
                                                      count_tokens=count_tokens)
    logger.info("SERA export: %d of %d instances give %d rows at threshold %g in %s", len({r["instance_id"] for r in rows}),
                len(records), len(rows), threshold, out_dir)
    rows.sort(key=lambda r: (r["id"]))
    atomic_write_text(out_dir / TRL_JSONL, _jsonl({**r, "messages": trl_messages(r["messages"], r["id"])} for r in rows))
    atomic_write_text(out_dir / OPENAI_JSONL, _jsonl(rows))
    write_dataset(rows, out_dir / "dataset")
    repo = records[0]["repo"] if records else ""
    summary = summarize(records, details, rows, drops1, drops2, out_dir=out_dir, repo=repo, threshold=threshold,
                        planned=planned if planned is not None else len(records), extra=extra)
    atomic_write_json(out_dir / "summary.json", summary.to_dict())
    return summary
