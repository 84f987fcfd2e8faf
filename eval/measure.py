"""Timing and peak-memory measurement shared by the benchmarks (``icml26 bench``), and the small
summaries their tables and claims are built from (errors against a reference, NaN-aware max, geometric mean,
paired differences)."""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from typing import Any


def sync(device) -> None:
    """Wait for queued GPU work, so wall-clock times cover it."""
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)


def median_ms(fn: Callable[[], Any], device, *, warmup: int = 1, repeats: int = 5) -> float:
    """Median wall time of ``fn()`` in milliseconds, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    sync(device)
    times = []
    for _ in range(max(repeats, 1)):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def interleaved_median_ms(fns: dict[str, Callable[[], Any]], device, *, warmup: int = 1,
                          repeats: int = 5) -> dict[str, float]:
    """Median wall time in milliseconds of each of ``fns``, timed in rounds (one call of each per round).

    For ratios between implementations: a slow spell of a shared machine lands on all of them
    rather than on whichever happened to be timed then.
    """
    for _ in range(warmup):
        for fn in fns.values():
            fn()
    sync(device)
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(max(repeats, 1)):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            sync(device)
            times[name].append((time.perf_counter() - start) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def minor_faults_per_call(fn: Callable[[], Any], device, *, calls: int = 3) -> float | None:
    """Minor page faults of this process per call of ``fn`` (``None`` where ``resource`` is missing).

    On CPU a forward whose large temporaries glibc hands back to the system pays a page fault per
    fresh 4 KiB page on the next call; this count shows how much of a latency is that.
    """
    try:
        import resource
    except ImportError:  # not on Unix
        return None
    fn()
    sync(device)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(calls):
        fn()
    sync(device)
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / calls


def peak_alloc_mb(fn: Callable[[], Any], device) -> float:
    """Peak bytes allocated during one call of ``fn`` above what was allocated before it, in MiB.

    CUDA: ``torch.cuda.max_memory_allocated``. CPU: the highest running sum of the allocation and
    free events that ``torch.profiler(profile_memory=True)`` records from torch's CPU allocator on
    the calling thread (with one intra-op thread that is every allocation of the call; intra-op
    worker threads only use the allocations of the caller).
    """
    import torch

    if getattr(device, "type", str(device)) == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return (torch.cuda.max_memory_allocated(device) - before) / 2**20
    from torch.profiler import ProfilerActivity, profile

    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # read when kineto starts: silences its start/stop lines
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    cpu = torch.autograd.DeviceType.CPU
    events = sorted((e for e in prof.profiler.kineto_results.events()
                     if e.name() == "[memory]" and e.device_type() == cpu), key=lambda e: e.start_ns())
    current = peak = 0
    for event in events:
        current += event.nbytes()
        peak = max(peak, current)
    return peak / 2**20


def max_abs_error(a, b) -> float:
    """The largest absolute difference between two tensors, compared in fp32."""
    return (a.float() - b.float()).abs().max().item()


def error_text(exc: BaseException) -> str:
    """The first line of ``type: message`` of an exception (at most 300 characters), for a table's error column."""
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    return (text[0] if text else type(exc).__name__)[:300]


def nanmax(values) -> float:
    """The largest of ``values``; NaN when there are none or any is NaN (a measurement that is missing
    makes the claim built on it fail)."""
    values = list(values)
    if not values or any(math.isnan(x) for x in values):
        return float("nan")
    return max(values)


def geomean(values) -> float:
    """The geometric mean of ``values``; NaN when there are none, or any is NaN or not positive."""
    values = list(values)
    if not values or any(math.isnan(x) or x <= 0 for x in values):
        return float("nan")
    return math.exp(sum(math.log(x) for x in values) / len(values))


def paired_difference(a, b) -> dict[str, float]:
    """Mean, standard error and normal 95% interval (``lo``, ``hi``) of the paired differences ``a - b``
    (the experiments' paired comparisons over held-out rows, episodes or samples)."""
    import numpy as np

    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(len(d)))
    return {"mean": mean, "se": se, "lo": mean - 1.959964 * se, "hi": mean + 1.959964 * se}
