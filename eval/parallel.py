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
