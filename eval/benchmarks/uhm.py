"""``icml26 bench uhm``: time per critic update against ``k_max``, model calls per second, peak memory.

One update of :class:`icml26.training.uhm.targets.TabularCritic` on a GridMaze "explore" dataset
(arXiv 2605.15603's cost claim: one model call per UHM/GHM target at any horizon, ``k_max`` calls
for MBTD(lambda)): draw a batch, build the targets, move the table. UHM at ``k_max`` in
``K_MAX = (10, 50, 200)`` against MBTD(lambda) at the same ``k_max`` and 1-step TD; times in
interleaved rounds (a slow spell of a shared machine lands on every method); peak memory is what one
update allocates (``tracemalloc``, numpy). The target is the issue's: UHM at ``k_max = 200`` within
1.5x of ``k_max = 10`` (its model is fitted once, outside the timed update).
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

K_MAX = (10, 50, 200)
#: Problem sizes; the tests shrink them.
SIZES = {"batch": 4096, "transitions": 50_000}
TARGET_RATIO = 1.5
GAMMA, LAM = 0.99, 0.95


def _updates(sizes, k_values, seed):
    import numpy as np

    from icml26.eval.tasks import uhm as mazes
    from icml26.training import uhm
    from icml26.training.uhm import targets as tg
    env = mazes.GridMaze(seed=seed)
    S, A = env.n_states, env.n_actions
    data = mazes.collect_explore(env, sizes["transitions"], 200, seed=seed)
    policy = np.full((S, A), 1.0 / A)
    one = tg.TabularOneStepModel().fit(data, S, A)
    rng = np.random.default_rng(seed)
    steps, calls = {}, {}

    def make(name, target):
        critic = tg.TabularCritic(S, A)

        def step():
            idx = rng.integers(len(data["observations"]), size=sizes["batch"])
            batch = {k: v[idx] for k, v in data.items()}
            targets, c = target(batch, critic.q, policy)
            critic.update(batch["observations"], batch["actions"], targets, 0.1)
            calls[name] = c
        steps[name] = step

    make("1-step TD", tg.OneStepTD(GAMMA, seed))
    for k in k_values:
        model = uhm.TabularUHM(k).fit(data, policy, S, A)
        make(f"UHM k={k}", tg.UHMTarget(model, uhm.winsorized(GAMMA, LAM, k), env.reward_fn, seed))
        make(f"MBTD k={k}", tg.RolloutTDLambda(one, uhm.td_lambda(GAMMA, LAM, k), env.reward_fn, seed))
    return steps, calls


def _peak_mb(fn) -> float:
    import tracemalloc

    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / 2 ** 20
    finally:
        tracemalloc.stop()


@benchmark("uhm", title="UHM critic update: time vs k_max (UHM, MBTD(lambda), 1-step TD), model calls/s, peak memory",
           paper="uhm")
def run(config, sizes: dict | None = None, k_values=K_MAX) -> Result:
    from threadpoolctl import threadpool_limits

    from icml26.eval.measure import interleaved_median_ms

    size = dict(sizes or SIZES)
    repeats = 7 if config.quick else 30
    with threadpool_limits(1):
        steps, calls = _updates(size, k_values, config.seeds[0])
        ms = interleaved_median_ms(steps, "cpu", warmup=2, repeats=repeats)
        rows = [{"target": name, "k_max": int(name.split("k=")[1]) if "k=" in name else 1,
                 "update_ms": round(ms[name], 3), "model_calls_per_target": calls[name],
                 "model_calls_per_s": round(calls[name] * size["batch"] / (ms[name] / 1e3), 1),
                 "peak_mb": round(_peak_mb(steps[name]), 2)} for name in steps]
    result = Result(tables={"critic update": rows},
                    metrics={f"{r['target'].replace(' ', '_')}_{key}": r[key] for r in rows
                             for key in ("update_ms", "model_calls_per_target", "peak_mb")})
    lo, hi = min(k_values), max(k_values)
    result.add_claim(Claim.at_most(f"UHM update time at k_max = {hi} within {TARGET_RATIO}x of k_max = {lo} "
                                   f"(batch {size['batch']}; ms)", ms[f"UHM k={hi}"], ms[f"UHM k={lo}"],
                                   factor=TARGET_RATIO, unit="ms"))
    result.add_claim(Claim.greater(f"MBTD(lambda) update time grows with k_max: k = {hi} > {TARGET_RATIO}x k = {lo} (ms)",
                                   ms[f"MBTD k={hi}"], ms[f"MBTD k={lo}"], factor=TARGET_RATIO, unit="ms"))
    result.notes = (f"CPU, 1 BLAS thread; median of {repeats} interleaved rounds after 2 warm-up rounds. An update: "
                    f"a batch of {size['batch']} from {size['transitions']} explore transitions of GridMaze, its targets "
                    "(tabular models fitted once beforehand), the table step. Model calls per target: 1 for UHM at "
                    "any k_max, k_max for MBTD(lambda), 0 for 1-step TD.")
    return result
