"""``icml26 bench dp_select``: Scheffé evaluations, time and peak memory of the private selectors against ``n``.

Private hypothesis selection (ICML 2026, "Fast and Optimal Algorithms for Private Hypothesis Selection"):
full private MDE (``n (n - 1)`` evaluations), lazy private MDE (the same law) and StrongSetEM (the
reconstructed strong-set mechanism) on the Gaussian cover of :mod:`icml26.eval.tasks.dp_select`
(200 bins, realizable truth, ``s = 2000``, ``epsilon = 1``), ``n`` up to 4000. CPU time is
``time.process_time`` (the machine may be shared); peak memory is the highest traced numpy allocation
of one fit above what was allocated before (``tracemalloc``): a Scheffé table is computed in blocks of
``CHUNK_PAIRS`` pairs, so it stays ``O(chunk x D + n)`` whatever ``n``.
"""

from __future__ import annotations

import time

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: Problem sizes; the tests shrink them.
SIZES = {"ns": (500, 1000, 2000, 4000), "s": 2000, "epsilon": 1.0, "reps": 3}
SELECTORS = ("full private MDE", "lazy private MDE", "StrongSetEM")


def _make(name, epsilon, seed):
    from icml26.training.dp_select import PrivateMDE, StrongSetEM

    if name == "full private MDE":
        return PrivateMDE(epsilon, lazy=False, random_state=seed)
    if name == "lazy private MDE":
        return PrivateMDE(epsilon, random_state=seed)
    return StrongSetEM(epsilon, random_state=seed)


def _peak_mb(fn) -> float:
    import tracemalloc

    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        fn()
        return (tracemalloc.get_traced_memory()[1] - base) / 2**20
    finally:
        tracemalloc.stop()


@benchmark("dp_select", title="Private selection: Scheffé evaluations, CPU time and peak memory vs n (to 4000)",
           paper="dp_select")
def run(config, sizes: dict | None = None) -> Result:
    import numpy as np

    from icml26.eval.tasks.dp_select import draw_problem, make_class
    from icml26.training.dp_select.selection import CHUNK_PAIRS

    size = {**SIZES, **(sizes or {})}
    ns, seed = tuple(size["ns"]), config.seeds[0]
    rows = []
    for n in ns:
        cover = make_class("gaussian", n)
        problem = draw_problem(cover, "realizable", size["s"], (seed, n))
        for name in SELECTORS:
            reps = 1 if name == "full private MDE" else size["reps"]
            evals, cpu = [], []
            for rep in range(reps):
                sel = _make(name, size["epsilon"], (seed + 1) * 1000 + rep)
                start = time.process_time()
                sel.fit(cover, problem.samples)
                cpu.append(time.process_time() - start)
                evals.append(sel.n_scheffe_evals_)
            peak = _peak_mb(lambda: _make(name, size["epsilon"], seed).fit(cover, problem.samples))
            rows.append({"n": n, "selector": name, "scheffe_evals": int(np.median(evals)),
                         "cpu_ms": round(1e3 * float(np.median(cpu)), 2), "peak_mb": round(peak, 2)})
    result = Result(tables={"selectors vs n": rows})
    get = {(r["n"], r["selector"]): r for r in rows}
    for r in rows:
        result.metrics[f"{r['selector'].replace(' ', '_')}_n{r['n']}_cpu_ms"] = r["cpu_ms"]
        result.metrics[f"{r['selector'].replace(' ', '_')}_n{r['n']}_evals"] = r["scheffe_evals"]
        result.metrics[f"{r['selector'].replace(' ', '_')}_n{r['n']}_peak_mb"] = r["peak_mb"]
    lo, hi = ns[0], ns[-1]
    full_hi = get[(hi, "full private MDE")]
    for name in ("lazy private MDE", "StrongSetEM"):
        result.add_claim(Claim.at_most(f"n = {hi}: {name} CPU time <= full private MDE's / 10 (ms)",
                                       get[(hi, name)]["cpu_ms"], full_hi["cpu_ms"], factor=0.1, unit="ms"))
    result.add_claim(Claim.at_most(f"full private MDE peak memory at n = {hi} <= 2x at n = {lo} (blocked tables; MiB)",
                                   full_hi["peak_mb"], get[(lo, "full private MDE")]["peak_mb"], factor=2.0, unit="MiB"))
    result.notes = (f"Gaussian cover (200 bins), realizable truth, s = {size['s']}, eps = {size['epsilon']:g}; CPU "
                    f"time median of {size['reps']} fits (the full mechanism: one); chunk = {CHUNK_PAIRS} pairs; "
                    "numpy (BLAS threads as the environment sets them).")
    return result
