"""SERA's soft-verified generation (SVG): agent trajectories from any Python repository, no tests needed.

SERA is arXiv 2601.20789; the stages follow its pipeline in allenai/SERA (``sera/main.py``: generate,
distill stage one and two, eval, postprocess).

For each seed function of the repository (:func:`find_seed_functions`):

1. **rollout 1**: the teacher gets a SWE-agent style instruction whose issue is a vague template
   naming the function, its file and a category; it works in a fresh sandbox and submits patch P1
   (SWE-agent's submit review: the first ``submit`` shows the diff and asks to rerun and remove the
   reproduction script, the second one submits);
2. **synthetic issue**: the teacher turns its own fix steps and P1 into an issue written in the
   style of a demonstration (without explaining the fix or mentioning tests); a judge call asks
   whether P1 is a valid fix for the vague task; duplicate P1s are dropped (the instance with the
   lowest index keeps one, whatever the number of workers);
3. **rollout 2**: from the synthetic issue alone, on a clean copy, the teacher produces P2;
4. **soft verification**: recall of P1's changed lines in P2 (:func:`patch_recall`); T2 is kept
   when recall >= threshold;
5. **filters and export**: submitted only, <= 40 changed lines, <= 600 tokens per tool response on
   average, a token budget with truncation; rows in OpenAI chat format with tool calls, saved as a
   ``datasets.Dataset`` and JSONL.

Any :class:`~icml26.agents.backends.ChatBackend` is the teacher: an OpenAI-compatible server
(``"http://host:8000/v1"`` with a model name, e.g. vLLM), a local model path, or the offline
:class:`~icml26.agents.sera.scripted.ScriptedTeacher`. Finished instances go to an fsynced ledger,
so a killed run resumes where it stopped with nothing lost or duplicated.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import random
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icml26.errors import InputError, InputTypeError, described, input_error
from icml26.validation import check_int

from .exporter import GenerateSummary, Ledger, export
from .prompts import (
    SYSTEM_PROMPT,
    VAGUE_TEMPLATES,
    load_demonstrations,
    parse_judge_answer,
    parse_pr_answer,
    render_instruction,
    render_judge_request,
    render_pr_request,
    render_vague_issue,
    summarize_steps,
)
from .scripted.teacher import ScriptedTeacher
from .seeds import (
    RepoError,
    SeedFunction,
    check_git_repo,
    find_seed_functions,
    head_commit,
    make_git_repo_from_package,
)
from .verification import (
    FilterConfig,
    changed_lines,
    check_threshold,
    count_changed_lines,
    filter_trajectory,
    patch_recall,
    token_counter,
    verify,
)

__all__ = ["Instance", "GenerateSummary", "FilterConfig", "ScriptedTeacher", "RepoError", "SeedFunction",
           "changed_lines", "count_changed_lines", "export", "filter_trajectory", "find_seed_functions", "generate",
           "make_git_repo_from_package", "patch_recall", "plan_instances", "resolve_backend", "run_instance", "verify"]

FAIL_FAST_ERRORS = 3
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Instance:
    """One task seed: a function, a vague template (and so a category) and a demonstration."""

    id: str
    index: int
    function: str      # qualified name
    file: str
    category: str
    template: int      # index into the templates
    demo: int          # index into the demonstrations
    repo: str          # "<folder name>@<commit>"


def _repo_key(root: Path) -> str:
    return f"{root.name}@{head_commit(root)[:12]}"


def plan_instances(repo: str | os.PathLike, *, seed: int = 0, limit: int | None = None, insts_per_fn: int = 1,
                   max_functions: int = 5000, max_folder_depth: int = 3, n_templates: int = len(VAGUE_TEMPLATES),
                   n_demos: int = 1) -> list[Instance]:
    """The instances of a run, in a seeded order; the same arguments always give the same list and ids."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise input_error("plan_instances", "limit", "a positive integer or None", limit)
    if isinstance(insts_per_fn, bool) or not isinstance(insts_per_fn, int) or insts_per_fn < 1:
        raise input_error("plan_instances", "insts_per_fn", "a positive integer", insts_per_fn)
    root = check_git_repo(repo, function="plan_instances")
    functions = find_seed_functions(root, max_folder_depth=max_folder_depth, max_functions=max_functions)
    if not functions:
        raise RepoError("plan_instances", "repo", f"a repository with Python functions (tracked .py files outside "
                        f"tests/docs, at most {max_folder_depth} folders deep)",
                        described(f"{str(root)!r}, which has none"))
    key = _repo_key(root)
    order = list(functions)
    random.Random(f"order|{seed}").shuffle(order)
    out = []
    for k in range(insts_per_fn):
        for fn in order:
            rng = random.Random(f"{seed}|{fn.key}|{k}")
            template = rng.randrange(n_templates)
            category = VAGUE_TEMPLATES[template][0] if n_templates == len(VAGUE_TEMPLATES) else f"template{template}"
            digest = hashlib.sha256(f"{key}|{fn.key}|{category}|{k}".encode()).hexdigest()[:16]
            out.append(Instance(digest, len(out), fn.qualname, fn.file, category, template, rng.randrange(n_demos), key))
            if limit is not None and len(out) >= limit:
                return out
    return out


def resolve_backend(backend: Any, model: str | None = None, *, seed: int = 0, q=0.8, **kw):
    """A ChatBackend from an object, ``"scripted"`` (the offline teacher), a URL or a local model path."""
    if hasattr(backend, "chat"):
        return backend
    if isinstance(backend, ScriptedTeacher):
        return backend.backend()
    if isinstance(backend, str) and backend == "scripted":
        return ScriptedTeacher(seed=seed, q=q).backend()
    if isinstance(backend, str):
        from icml26.agents.backends import backend_from_spec

        return backend_from_spec(backend, model, **kw)
    raise InputTypeError("resolve_backend", "backend", "a ChatBackend, a ScriptedTeacher, 'scripted', a URL or a "
                         "model path", described(type(backend).__name__))


def _usage(usage) -> dict:
    return {"prompt_tokens": int(usage.prompt_tokens), "completion_tokens": int(usage.completion_tokens)}


def run_instance(inst: Instance, repo: Path, backend, *, demonstrations: Sequence[str], templates=VAGUE_TEMPLATES,
                 max_steps: int = 115, sampling: dict | None = None, judge: bool = True, sandbox_kwargs=None,
                 claim_patch=None, review_submit: bool = True) -> dict:
    """Run one instance end to end and return its ledger record (never raises for the model's mistakes).

    ``review_submit`` (default on, as in SERA's SWE-agent configuration): the first ``submit`` of
    each rollout answers with the diff and a cleanup request, the second one submits; P1 and P2 are
    the diffs at the final submit.

    ``claim_patch(p1) -> bool`` returns False when an identical P1 was already seen (a duplicate);
    the answer is kept as ``p1_claimed`` (None when there was no check), which tells the export that
    the instance took part in the duplicate check (see ``resolve_duplicates`` in :mod:`icml26.agents.sera.exporter`).
    """
    from icml26.agents.loop import run_agent
    from icml26.agents.sandbox import Sandbox
    from icml26.agents.tools import default_tools

    sampling = dict(sampling or {})
    sandbox_kwargs = dict(sandbox_kwargs or {})
    record = {"id": inst.id, "index": inst.index, "function": inst.function, "file": inst.file,
              "category": inst.category, "template": inst.template, "demo": inst.demo, "repo": inst.repo,
              "status": "error", "error": None, "t1": None, "t2": None, "synthetic_pr": None, "judge_ok": None,
              "duplicate": False, "p1_claimed": None, "recall": None, "usage": {}, "seconds": None}
    start = time.monotonic()
    issue = render_vague_issue(templates[inst.template], inst.function, inst.file)
    try:
        with Sandbox(repo, **sandbox_kwargs) as sandbox:
            t1 = run_agent(backend, sandbox, render_instruction(issue, sandbox.display_root), system_prompt=SYSTEM_PROMPT,
                           tools=default_tools(), max_steps=max_steps, sampling=sampling,
                           review_submit=review_submit)
        record["t1"], record["usage"]["T1"] = t1.to_dict(), _usage(t1.usage)
        if t1.exit_reason == "backend_error":
            record["error"] = f"rollout 1: {t1.error}"
            return record
        if not changed_lines(t1.patch):
            record["status"] = "empty_p1"
            return record
        if claim_patch is not None:
            record["p1_claimed"] = bool(claim_patch(t1.patch))
            if not record["p1_claimed"]:
                record["status"], record["duplicate"] = "duplicate", True
                return record
        demo = demonstrations[inst.demo % len(demonstrations)]
        reply = backend.chat(render_pr_request(demo, issue, summarize_steps(t1.messages), t1.patch), None, **sampling)
        record["usage"]["pr"] = _usage(reply.usage)
        record["synthetic_pr"] = parse_pr_answer(reply.content)
        if judge:
            verdict = backend.chat(render_judge_request(issue, t1.patch), None, **sampling)
            record["usage"]["judge"] = _usage(verdict.usage)
            record["judge_ok"] = parse_judge_answer(verdict.content)
            if not record["judge_ok"]:
                record["status"] = "judged_invalid"
                return record
        if not record["synthetic_pr"]:
            record["status"] = "empty_pr"
            return record
        with Sandbox(repo, **sandbox_kwargs) as sandbox:
            t2 = run_agent(backend, sandbox, render_instruction(record["synthetic_pr"], sandbox.display_root),
                           system_prompt=SYSTEM_PROMPT, tools=default_tools(), max_steps=max_steps, sampling=sampling,
                           review_submit=review_submit)
        record["t2"], record["usage"]["T2"] = t2.to_dict(), _usage(t2.usage)
        if t2.exit_reason == "backend_error":
            record["error"] = f"rollout 2: {t2.error}"
            return record
        record["recall"] = patch_recall(t1.patch, t2.patch)
        record["status"] = "done"
    except Exception as exc:  # a broken instance must not stop the run; the ledger says what happened
        record["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        record["seconds"] = round(time.monotonic() - start, 3)
    return record


class _OutDirLock:
    """Exclusive lock on ``out_dir`` so two runs never append to one ledger (released even on kill -9)."""

    def __init__(self, out_dir: Path):
        out_dir.mkdir(parents=True, exist_ok=True)
        self.handle = open(out_dir / ".lock", "w")
        try:
            fcntl.flock(self.handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.handle.close()
            raise RuntimeError(f"another generation run is using {out_dir}; wait for it or pick another --out") from None

    def release(self):
        fcntl.flock(self.handle, fcntl.LOCK_UN)
        self.handle.close()


def generate(repo: str | os.PathLike, backend: Any, out_dir: str | os.PathLike, *, threshold: float = 0.5,
             workers: int = 1, limit: int | None = None, seed: int = 0, model: str | None = None,
             insts_per_fn: int = 1, max_steps: int = 115, sampling: dict | None = None, judge: bool = True,
             dedupe: bool = True, demonstrations: str | os.PathLike | Sequence[str] | None = None,
             filters: FilterConfig | None = None, tokenizer: Any = None, sandbox_kwargs: dict | None = None,
             max_functions: int = 5000, teacher_q=0.8, progress: bool = True,
             review_submit: bool = True) -> GenerateSummary:
    """Generate SERA trajectories from ``repo`` into ``out_dir``; resumes from ``out_dir/ledger.jsonl``.

    Args:
        repo: a git repository of Python code (its committed files are copied into each sandbox).
        backend: the teacher: a ChatBackend, ``"scripted"``, an OpenAI-compatible URL (with ``model``)
            or a local model path.
        threshold: soft-verification threshold on patch recall (1 = hard, 0 = none).
        workers: instances run concurrently (threads; each has its own sandbox).
        limit: number of instances (default: every seed function, ``insts_per_fn`` times).
        sampling: passed to every chat call (SERA distils at temperature 0.6).
        demonstrations: issue texts (a list, a folder, or a .json/.jsonl/.txt file); default: bundled.
        filters / tokenizer: the filters and the tokenizer used to count tokens (default: words).
        sandbox_kwargs: for :class:`~icml26.agents.sandbox.Sandbox` (time_limit, memory_limit_mb, ...).
        teacher_q: recall knob of the scripted teacher (only with ``backend="scripted"``).
        review_submit: SWE-agent's submit review in both rollouts (the first ``submit`` shows the diff
            and asks to rerun and remove the reproduction script; the second one submits).

    With ``dedupe``, of several instances whose P1 is identical the one with the lowest index keeps
    it (the others become ``"duplicate"``), whatever the number of workers and the thread timing.
    """
    name = "generate"
    threshold = check_threshold(threshold, function=name)
    workers = check_int(name, "workers", workers, low=1)
    limit = None if limit is None else check_int(name, "limit", limit, low=1)
    seed = check_int(name, "seed", seed)
    insts_per_fn = check_int(name, "insts_per_fn", insts_per_fn, low=1)
    max_steps = check_int(name, "max_steps", max_steps, low=1)
    max_functions = check_int(name, "max_functions", max_functions, low=1)
    for flag, value in (("judge", judge), ("dedupe", dedupe), ("progress", progress), ("review_submit", review_submit)):
        if not isinstance(value, bool):
            raise InputTypeError(name, flag, "True or False", described(f"{type(value).__name__} {value!r}"))
    for option, value, kind in (("sampling", sampling, dict), ("sandbox_kwargs", sandbox_kwargs, dict),
                                ("filters", filters, FilterConfig)):
        if value is not None and not isinstance(value, kind):
            raise InputTypeError(name, option, f"None or a {kind.__name__}", described(type(value).__name__))
    _check_backend(backend, name)
    root = check_git_repo(repo, function=name)
    if isinstance(demonstrations, (list, tuple)):
        demos = list(demonstrations)
    else:
        try:
            demos = load_demonstrations(demonstrations)
        except InputError as exc:
            raise InputError(name, "demonstrations", exc.expected, exc.got) from None
    if not demos or not all(isinstance(d, str) and d.strip() for d in demos):
        raise input_error(name, "demonstrations", "non-empty issue texts", described(f"{demos!r:.80}"))
    from icml26.agents.sandbox import check_limits

    check_limits(**{k: v for k, v in (sandbox_kwargs or {}).items()  # before any work: every instance would fail
                    if k in ("memory_limit_mb", "pids_limit", "disk_limit_mb", "cpu_time_limit", "open_files")},
                 function=name)
    if isinstance(backend, str) and backend == "scripted":
        try:
            ScriptedTeacher(seed=seed, q=teacher_q)  # teacher_q is checked here, before any work
        except InputError as exc:
            raise InputError(name, "teacher_q", exc.expected, exc.got) from None
    count_tokens = token_counter(tokenizer, function=name)  # loads a tokenizer path once, and fails early
    out = _checked_out_dir(out_dir, name)
    instances = plan_instances(root, seed=seed, limit=limit, insts_per_fn=insts_per_fn, max_functions=max_functions,
                               n_demos=len(demos))
    logger.info("SERA generate: %d instances planned from %s", len(instances), root)
    chat = resolve_backend(backend, model, seed=seed, q=teacher_q)
    lock = _OutDirLock(out)
    try:
        scratch = out / ".scratch"
        from icml26.agents.sandbox import remove_scratch

        remove_scratch(scratch)  # sandboxes left by a killed run (their size-capped folders unmounted)
        scratch.mkdir(parents=True)
        sandbox_kwargs = {"time_limit": 300.0, "scratch_parent": str(scratch), **(sandbox_kwargs or {})}
        ledger = Ledger(out / "ledger.jsonl")
        ledger.repair()
        done = ledger.records()
        held: dict[str, int] = {}
        for r in done.values():
            if r.get("t1") and r["status"] not in ("error", "duplicate", "empty_p1"):
                digest = _digest(r["t1"]["patch"])
                held[digest] = min(held.get(digest, r["index"]), r["index"])
        todo = [i for i in instances if i.id not in done or done[i.id]["status"] == "error"]
        if len(todo) < len(instances):
            logger.info("SERA generate: resuming %s; %d of %d instances left to run", out, len(todo), len(instances))
        claims = _FirstByIndex(held)

        def work(inst: Instance) -> dict:
            claim = (lambda patch: claims.claim(inst.index, patch)) if dedupe else None
            return run_instance(inst, root, chat, demonstrations=demos, max_steps=max_steps, sampling=sampling,
                                judge=judge, sandbox_kwargs=sandbox_kwargs, claim_patch=claim,
                                review_submit=review_submit)

        _run_pool(todo, work, ledger, workers=workers, progress=progress)
        extra = {"repo_path": str(root), "model": model or (backend if isinstance(backend, str) else type(chat).__name__),
                 "seed": seed, "workers": workers, "limit": limit, "judge": judge, "review_submit": review_submit,
                 "filters": vars(filters or FilterConfig())}
        summary = export(out, threshold=threshold, filters=filters, tokenizer=count_tokens, planned=len(instances),
                         extra=extra)
        shutil.rmtree(scratch, ignore_errors=True)
        return summary
    finally:
        lock.release()


def _check_backend(backend: Any, function: str) -> None:
    """Refuse a teacher that cannot be one before any work (a local model path is loaded only later)."""
    if hasattr(backend, "chat") or isinstance(backend, ScriptedTeacher):
        return
    if not isinstance(backend, (str, os.PathLike)):
        raise InputTypeError(function, "backend", "a ChatBackend, a ScriptedTeacher, 'scripted', an http(s) URL or a "
                             "local model path", described(type(backend).__name__))
    text = os.fspath(backend)
    if text != "scripted" and not text.startswith(("http://", "https://")) and not Path(text).expanduser().exists():
        raise input_error(function, "backend", "'scripted', an http(s) URL or an existing local model path", text)


def _checked_out_dir(out_dir: Any, function: str) -> Path:
    """``out_dir`` as a folder that exists (created here) and can be written: checked before any work."""
    from icml26.validation import check_output_dir

    if not isinstance(out_dir, (str, os.PathLike)):
        raise InputTypeError(function, "out_dir", "a folder path", described(type(out_dir).__name__))
    return check_output_dir(function, "out_dir", out_dir)


def _digest(patch: str) -> str:
    return hashlib.sha256(patch.encode()).hexdigest()


class _FirstByIndex:
    """The run-time duplicate-P1 check: an identical P1 belongs to the instance with the lowest index.

    ``claim(index, patch)`` is False when a lower index already holds the same P1 (this instance is
    a duplicate and stops). Otherwise it takes the P1, from a higher index too: threads finish
    their first rollouts in any order, so a higher index may have claimed first and already gone
    on; :func:`~icml26.agents.sera.exporter.resolve_duplicates` then shows that one as a duplicate at
    export, so the result is the one-worker result whatever the timing, and no worker ever waits.
    """

    def __init__(self, held: dict[str, int]):
        self._held = dict(held)
        self._lock = threading.Lock()

    def claim(self, index: int, patch: str) -> bool:
        digest = _digest(patch)
        with self._lock:
            owner = self._held.get(digest)
            if owner is not None and owner < index:
                return False
            self._held[digest] = index
            return True


def _run_pool(todo: list[Instance], work, ledger: Ledger, *, workers: int, progress: bool) -> None:
    from tqdm.auto import tqdm

    from icml26.progress import phase

    bar = tqdm(total=len(todo), desc="SERA instances", unit="inst", disable=not progress)
    errors, successes, first_error = 0, 0, None
    pending_iter = iter(todo)
    with phase("generation", total=len(todo)) as tracker, ThreadPoolExecutor(max_workers=workers) as pool:
        running = set()
        try:
            for inst in pending_iter:  # keep at most `workers` in flight so a kill loses little
                running.add(pool.submit(work, inst))
                if len(running) < workers:
                    continue
                finished, running = wait(running, return_when=FIRST_COMPLETED)
                for fut in finished:
                    errors, successes, first_error = _record(fut.result(), ledger, (bar, tracker), errors,
                                                             successes, first_error)
            for fut in list(running):
                errors, successes, first_error = _record(fut.result(), ledger, (bar, tracker), errors, successes,
                                                         first_error)
                running.discard(fut)
        finally:
            for fut in running:
                fut.cancel()
            bar.close()


def _record(record: dict, ledger: Ledger, bars, errors: int, successes: int, first_error):
    ledger.append(record)
    bar, tracker = bars
    bar.update(1)
    tracker.update()
    if record["status"] == "error":
        logger.warning("SERA instance %s (%s in %s) failed: %s", record["id"], record.get("function"),
                       record.get("file"), record.get("error"))
        errors += 1
        first_error = first_error or record["error"]
        if successes == 0 and errors >= FAIL_FAST_ERRORS:
            raise RuntimeError(f"the first {errors} instances all failed; first error: {first_error}")
    else:
        successes += 1
    bar.set_postfix(errors=errors, ok=successes)
    return errors, successes, first_error
