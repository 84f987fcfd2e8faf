"""``icml26 bench pbto``: what the PBTO persistence audit costs on CPU (one thread), on the digits streams.

- seconds per 5-task iCaRL trajectory (30 epochs per task, memory 100, herding and NME means included);
- milliseconds per PGD step and checkpoint: the trigger's step over the whole proxy trajectory with Gram anchoring
  (``full``: 3 checkpoints, lambda 1) and over the last checkpoint alone without it (``no_sim_no_align``);
- seconds per refinement round (retrain the 3-task proxy trajectory, then 100 PGD steps over its checkpoints).

The claim: averaging over the trajectory and anchoring cost at most 1.5x per checkpoint what a plain
single-checkpoint step costs (the reference path adds no per-checkpoint overhead beyond the forward and backward).
"""

from __future__ import annotations

import time

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: The sizes; the tests shrink them.
SIZES = {"epochs": 30, "pgd_steps": 20, "repeats": 3, "warmup": 1}
PER_CHECKPOINT_OVERHEAD = 1.5


@benchmark("pbto", title="PBTO audit: seconds per trajectory, per PGD step and checkpoint, per refinement round",
           paper="pbto")
def run(config, sizes: dict | None = None) -> Result:
    import torch

    from icml26.eval.measure import interleaved_median_ms
    from icml26.eval.tasks.pbto import AnchoredTrigger, digits_streams, train_stream
    from icml26.training.pbto import CILConfig, ICaRL

    size = dict(SIZES, **(sizes or {}))
    seed = config.seeds[0]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        victim, proxy = digits_streams(seed=seed)
        first = victim.tasks[0]
        source = first.x_train[first.y_train != victim.target]

        def factory():
            return ICaRL(CILConfig(epochs=size["epochs"], seed=seed))

        start = time.perf_counter()
        trajectory = train_stream(factory(), victim)
        trajectory_s = time.perf_counter() - start
        start = time.perf_counter()
        proxy_learner = train_stream(factory(), proxy)
        proxy_s = time.perf_counter() - start
        arms = {name: AnchoredTrigger.preset(name, steps=size["pgd_steps"], seed=seed)
                for name in ("full", "no_sim_no_align")}
        reference = proxy.tasks[0].x_train[proxy.tasks[0].y_train == proxy.target][:32]
        delta = torch.zeros(source.shape[1:])

        def steps(trigger):
            return lambda: trigger.optimise(proxy_learner, reference, source, proxy.target, delta)

        ms = interleaved_median_ms({name: steps(t) for name, t in arms.items()}, torch.device("cpu"),
                                   warmup=size["warmup"], repeats=size["repeats"])
        checkpoints = {"full": len(proxy_learner.checkpoints), "no_sim_no_align": 1}
        per = {name: ms[name] / size["pgd_steps"] / checkpoints[name] for name in arms}
        start = time.perf_counter()
        AnchoredTrigger.preset("full", rounds=0, seed=seed).fit(factory, proxy, source)
        round_s = time.perf_counter() - start
    finally:
        torch.set_num_threads(threads)
    result = Result(tables={"cost (one thread)": [
        {"what": "5-task iCaRL trajectory (victim)", "value": round(trajectory_s, 2), "unit": "s"},
        {"what": f"{len(proxy)}-task iCaRL trajectory (proxy)", "value": round(proxy_s, 2), "unit": "s"},
        {"what": "PGD step per checkpoint, full (trajectory, anchored)", "value": round(per["full"], 3),
         "unit": "ms"},
        {"what": "PGD step per checkpoint, no_sim_no_align", "value": round(per["no_sim_no_align"], 3),
         "unit": "ms"},
        {"what": "refinement round (proxy trajectory + 100 PGD steps)", "value": round(round_s, 2), "unit": "s"}]})
    m = result.metrics
    m.update({"trajectory_s": trajectory_s, "proxy_trajectory_s": proxy_s, "round_s": round_s,
              "pgd_ms_per_step_checkpoint": per, "victim_test_accuracy": float(
                  (trajectory.predict(victim.seen_test(len(victim) - 1)[0]) == victim.seen_test(len(victim) - 1)[1])
                  .float().mean())})
    result.add_claim(Claim.at_most(
        f"a PGD step over the trajectory with Gram anchoring costs at most {PER_CHECKPOINT_OVERHEAD:g}x per "
        "checkpoint what a single-checkpoint step without it costs", per["full"], per["no_sim_no_align"],
        factor=PER_CHECKPOINT_OVERHEAD, unit="ms"))
    result.notes = (f"CPU, one torch thread; digits streams (seed {seed}); {size['epochs']} epochs per task; PGD "
                    f"batch 64, median of {size['repeats']} interleaved rounds of {size['pgd_steps']} steps after "
                    f"{size['warmup']} warm-up round(s).")
    return result
