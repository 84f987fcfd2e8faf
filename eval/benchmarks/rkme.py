"""``icml26 bench rkme``: fit time and peak memory of :class:`icml26.training.rkme.spec.RKMESpecification`
against n (records) and m (reduced points).

Data: standard normal features, d = 64 (digits' width). Peak memory is traced with ``tracemalloc``
(numpy registers its buffers there) above what was allocated before the fit, after one warm-up fit (imports
and first-call allocations). Kernels are evaluated in row blocks (``KERNEL_CHUNK``), so memory grows as
O(n m) plus O(chunk^2), never O(n^2): the claim checks that the largest n at the largest m costs less than
(n ratio)^1.5 times the smallest n's memory (O(n^2) would be the square of the n ratio).
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: (n, m) grid; the tests shrink it.
SIZES = {"n": (1000, 4000, 16000), "m": (10, 100), "d": 64, "steps": 3}


def _fit_once(n: int, m: int, d: int, steps: int, seed: int) -> tuple[float, float]:
    import time
    import tracemalloc

    import numpy as np

    from icml26.training.rkme import RKMESpecification

    X = np.random.default_rng(seed).standard_normal((n, d))
    spec = RKMESpecification(n_points=m, steps=steps, gamma=1.0 / (2 * d), random_state=seed)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    start = time.process_time()
    spec.fit(X)
    seconds = time.process_time() - start
    peak = tracemalloc.get_traced_memory()[1] - base
    tracemalloc.stop()
    return seconds, peak / 2**20


@benchmark("rkme", title="RKME specification: fit CPU time and peak memory against n and m", paper="rkme")
def run(config, sizes: dict | None = None) -> Result:
    from threadpoolctl import threadpool_limits

    size = dict(SIZES, **(sizes or {}))
    rows = []
    with threadpool_limits(1):
        _fit_once(200, 5, size["d"], 1, config.seeds[0])  # warm-up: imports and first-call buffers
        for m in size["m"]:
            for n in size["n"]:
                seconds, peak = _fit_once(n, m, size["d"], size["steps"], config.seeds[0])
                rows.append({"n": n, "m": m, "d": size["d"], "fit_cpu_s": round(seconds, 4),
                             "peak_mb": round(peak, 2), "data_mb": round(n * size["d"] * 8 / 2**20, 2)})
    result = Result(tables={"fit": rows})
    result.metrics.update({f"fit_cpu_s_n{r['n']}_m{r['m']}": r["fit_cpu_s"] for r in rows})
    result.metrics.update({f"peak_mb_n{r['n']}_m{r['m']}": r["peak_mb"] for r in rows})
    m_hi = max(size["m"])
    big = [r for r in rows if r["m"] == m_hi]
    lo, hi = big[0], big[-1]
    ratio_n = hi["n"] / lo["n"]
    result.add_claim(Claim.less(f"peak memory at n = {hi['n']} vs n = {lo['n']} (m = {m_hi}): grows slower than "
                                f"n^1.5 ({ratio_n:g}x n; O(n^2) would give {ratio_n ** 2:g}x)",
                                hi["peak_mb"], lo["peak_mb"], factor=ratio_n ** 1.5, unit="MB"))
    result.notes = (f"One BLAS thread; CPU seconds of fit (k-means start, {size['steps']} alternations of a "
                    f"backtracking Z step and the Clarabel simplex QP); d = {size['d']}, gamma = 1/(2d), N(0, I) "
                    "data; peak memory traced by tracemalloc above the input.")
    return result
