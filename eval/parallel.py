"""Run independent training jobs of an experiment side by side, with their progress.

:func:`map_jobs` reports a phase counting finished jobs and relays the phases that the jobs
themselves report (:func:`icml26.progress.phase`, ``trainer_callback``) from the forked workers to
the parent process, where ``icml26 reproduce`` shows them; a worker never reports on its own (it
would write the parent's ``results.json`` from another process).

Workers die with the run: each asks for a parent-death signal (:func:`icml26.processes.die_with_parent`),
so a run killed with SIGKILL (a caller's time-out) leaves no worker behind, and the pool is terminated
on every way out of :func:`map_jobs` (a result, an exception, Ctrl-C).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from icml26.validation import check_int

#: Seconds between two relayed step counts of one phase (opening and closing always go through).
RELAY_INTERVAL = 0.5
#: A job of :func:`map_saved_jobs` checkpoints to its result file with this suffix.
CHECKPOINT_SUFFIX = ".ckpt"


def _worker_init(events, parent_pid: int) -> None:
    """Forked workers die with the parent, use one thread, leave Ctrl-C and termination to the parent,
    and send their phases to the parent through ``events`` instead of the listeners they inherited."""
    import os
    import signal

    from icml26.processes import die_with_parent

    die_with_parent(parent_pid)  # first: a parent killed from now on takes this worker with it

    import torch

    from icml26 import progress

    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    pid, last = os.getpid(), {}

    def relay(tracker, event: str) -> None:
        now = time.monotonic()
        if event == "update" and now - last.get(id(tracker), 0.0) < RELAY_INTERVAL:
            return
        last[id(tracker)] = now
        events.put((pid, id(tracker), event, tracker.name, tracker.total, tracker.n))
        if event == "close":
            last.pop(id(tracker), None)

    progress.reset_listeners(relay)  # the parent's listeners (bars, results.json) belong to the parent


def _run_indexed(task: tuple) -> tuple[int, Any]:
    fn, index, job = task
    return index, fn(job)


class _Relay:
    """The parent's side: each worker phase becomes a phase of the parent."""

    def __init__(self) -> None:
        self.open: dict[tuple[int, int], tuple[Any, Any]] = {}

    def drain(self, events) -> None:
        import queue

        from icml26.progress import phase

        while True:
            try:
                pid, key, event, name, total, n = events.get_nowait()
            except queue.Empty:
                return
            slot = self.open.get((pid, key))
            if slot is None:
                if event == "close":
                    continue
                context = phase(name, total)
                slot = self.open[(pid, key)] = (context, context.__enter__())
            context, tracker = slot
            if tracker.n != n or tracker.total != total:
                tracker.set(n, total)
            if event == "close":
                del self.open[(pid, key)]
                context.__exit__(None, None, None)

    def close(self) -> None:
        for context, _ in self.open.values():
            context.__exit__(None, None, None)
        self.open.clear()


def map_jobs(fn: Callable[[Any], Any], jobs: Sequence[Any], device, *, phase_name: str = "jobs",
             processes: int | None = None) -> list[Any]:
    """``[fn(job) for job in jobs]``: each job in its own forked process on CPU, in turn on a GPU.

    On CPU the pool has one worker more than the cores, so 3 jobs on 2 cores take 1.5 job-times
    rather than 2; ``processes`` sets the pool's size instead (e.g. one per core for long jobs given
    longest first, which then start in the order given). ``fn`` and the jobs must be picklable
    (module-level functions, plain tuples).
    The phase ``phase_name`` counts the finished jobs; the jobs' own phases show beside it.
    """
    import multiprocessing
    import os

    from icml26.progress import phase

    if processes is not None:
        check_int("map_jobs", "processes", processes, low=1)
    with phase(phase_name, total=len(jobs)) as done:
        if device.type != "cpu" or len(jobs) == 1:
            results = []
            for job in jobs:
                results.append(fn(job))
                done.update()
            return results
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        context = multiprocessing.get_context("fork")
        events = context.Queue()
        relay = _Relay()
        pool = context.Pool(min(len(jobs), processes or cores + 1), initializer=_worker_init,
                            initargs=(events, os.getpid()))
        try:
            results: list[Any] = [None] * len(jobs)
            finished = pool.imap_unordered(_run_indexed, [(fn, i, job) for i, job in enumerate(jobs)], chunksize=1)
            while done.n < len(jobs):
                try:
                    index, result = finished.next(timeout=RELAY_INTERVAL)
                except multiprocessing.TimeoutError:
                    relay.drain(events)
                    continue
                results[index] = result
                relay.drain(events)
                done.update()
            pool.close()
            # A job's last events can still be in its worker's queue buffer when its result arrives:
            # workers flush it as they exit, so wait for them before the last drain.
            pool.join()
            relay.drain(events)
            return results
        finally:
            relay.drain(events)
            relay.close()
            pool.terminate()
            pool.join()
            events.close()


def _saved_call(item: tuple) -> Any:
    """Run ``fn(job)`` in a worker and keep its result in ``job["path"]`` at once (atomically), so a run
    killed later keeps every job that finished."""
    import json
    from pathlib import Path

    from icml26.utils import atomic_write_text

    fn, job, settings = item
    result = fn(job)
    if job.get("path"):
        path = Path(job["path"])
        atomic_write_text(path, json.dumps({"name": job["name"], "settings": settings, "result": result}))
        path.with_suffix(CHECKPOINT_SUFFIX).unlink(missing_ok=True)  # kept: the job's checkpoint is spent
    return result


def map_saved_jobs(fn: Callable[[dict], Any], jobs: Sequence[dict], device, folder=None, *,
                   settings_of: Callable[[dict], Any], phase_name: str = "jobs",
                   processes: int | None = None) -> dict[str, Any]:
    """Each job's result by its ``"name"``: read from ``folder/<name>.json`` when an earlier run wrote it with
    the same settings, else ``fn(job)`` through :func:`map_jobs` (in the order given) and written there as
    soon as it returns, so a killed run resumes where it stopped.

    ``settings_of(job)`` is what decides a job's result (JSON-serialisable; not its device or file): a
    saved result of other settings is recomputed. Each job reaches ``fn`` with ``"path"`` set to its file
    (``None`` without ``folder``); ``fn`` may keep a checkpoint at that path with the suffix
    :data:`CHECKPOINT_SUFFIX`, removed once the result is written. ``fn``'s result must be
    JSON-serialisable: a loaded result is what ``json`` returns.
    """
    import json
    from pathlib import Path

    done, todo = {}, []
    for job in jobs:
        slug = "".join(c if c.isalnum() or c in "-." else "_" for c in job["name"])
        path = Path(folder) / f"{slug}.json" if folder is not None else None
        job = {**job, "path": str(path) if path is not None else None}
        settings = json.loads(json.dumps(settings_of(job)))
        if path is not None and path.is_file():
            try:
                saved = json.loads(path.read_text())
            except ValueError:  # not a result file of ours: computed again, and replaced
                saved = {}
            if isinstance(saved, dict) and saved.get("settings") == settings and "result" in saved:
                done[job["name"]] = saved["result"]
                continue
        todo.append((fn, job, settings))
    if folder is not None and todo:
        Path(folder).mkdir(parents=True, exist_ok=True)
    results = map_jobs(_saved_call, todo, device, phase_name=phase_name, processes=processes) if todo else []
    done.update({job["name"]: result for (_, job, _), result in zip(todo, results)})
    return {job["name"]: done[job["name"]] for job in jobs}
