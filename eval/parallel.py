"""Run independent training jobs of an experiment side by side."""

from __future__ import annotations

from typing import Any, Callable, Sequence


def _worker_init() -> None:
    """Forked workers use one thread and leave Ctrl-C and termination to the parent."""
    import signal

    import torch

    torch.set_num_threads(1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def map_jobs(fn: Callable[[Any], Any], jobs: Sequence[Any], device) -> list[Any]:
    """``[fn(job) for job in jobs]``: each job in its own forked process on CPU, in turn on a GPU.

    On CPU the pool has one worker more than the cores, so 3 jobs on 2 cores take 1.5 job-times
    rather than 2. ``fn`` and the jobs must be picklable (module-level functions, plain tuples).
    """
    import multiprocessing
    import os

    if device.type != "cpu" or len(jobs) == 1:
        return [fn(job) for job in jobs]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    pool = multiprocessing.get_context("fork").Pool(min(len(jobs), cores + 1), initializer=_worker_init)
    try:
        results = pool.map(fn, jobs, chunksize=1)
        pool.close()
        return results
    finally:
        pool.terminate()
        pool.join()
