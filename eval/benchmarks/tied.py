"""``icml26 bench tied``: TIED's speed against K, M, H and cached vs fresh forward paths.

Images: SE(2)-transformed held-out digits (20x20, the experiment's preprocessing) with the PPCA energy / 50 plus
the boundary penalty (fitted on the training digits, no classifier needed); images per second of
:meth:`~icml26.models.tied.sampler.TIEDSampler.sample` from the base setting ``K = 30, M = 2, H = 8`` varied one
knob at a time, and with fresh paths at every step. SO(3): draws per second of ``sample_density`` on
``exp(10 X11^2)`` with per-sample paths, cached vs fresh, where the reference's ``O(K^2 M)`` path simulation
shows. CI keeps SO(n) at n <= 5.
"""

from __future__ import annotations

import time

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: Sizes; the tests shrink them.
SIZES = {"images": 32, "steps": (10, 30), "paths": (2, 4), "hypotheses": (4, 8), "so_draws": 200, "so_steps": 30,
         "so_paths": 8}
CPU_THREADS = 1


def _seconds(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


@benchmark("tied", title="TIED: images/s against K, M, H; cached vs fresh forward paths", paper="tied")
def run(config, sizes: dict | None = None) -> Result:
    import torch

    from icml26.eval.tasks.tied import fit_ppca, load_digit_images, random_transforms
    from icml26.models.tied import SO, BoundaryPenalty, PPCAEnergy, TIEDConfig, TIEDSampler, act

    size = {**SIZES, **(sizes or {})}
    repeats = 1 if config.quick else 3
    threads = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    try:
        data = load_digit_images(0)
        energy = PPCAEnergy.from_sklearn(fit_ppca(data.x_train, 20), 50.0) + BoundaryPenalty()
        group, g_star = random_transforms("se2", size["images"], seed=1)
        xt = act(g_star, data.x_test[: size["images"]])
        base = dict(steps=max(size["steps"]), gamma_min=0.1, gamma_max=1.0, clip=100.0, mc_paths=min(size["paths"]),
                    hypotheses=max(size["hypotheses"]))
        settings = [dict(base)]
        settings += [dict(base, steps=k) for k in size["steps"] if k != base["steps"]]
        settings += [dict(base, mc_paths=m) for m in size["paths"] if m != base["mc_paths"]]
        settings += [dict(base, hypotheses=h) for h in size["hypotheses"] if h != base["hypotheses"]]
        settings += [dict(base, cache_paths=False)]
        rows = []
        for s in settings:
            cfg = TIEDConfig(**s)
            sampler = TIEDSampler(group, energy, cfg)
            sec = _seconds(lambda: sampler.sample(xt), repeats)
            rows.append({"K": cfg.steps, "M": cfg.mc_paths, "H": cfg.hypotheses, "paths": "cached" if cfg.cache_paths
                         else "fresh", "images_per_s": round(len(xt) / sec, 2), "seconds": round(sec, 3),
                         "energy_evaluations_per_image": cfg.energy_evaluations})
        so_rows = {}
        for cached in (True, False):
            cfg = TIEDConfig(steps=size["so_steps"], mc_paths=size["so_paths"], dtype="float64", per_sample_paths=True,
                             cache_paths=cached)
            sampler = TIEDSampler(SO(3), None, cfg)
            sec = _seconds(lambda: sampler.sample_density(lambda g: 10 * g[:, 0, 0] ** 2, size["so_draws"]), repeats)
            so_rows["cached" if cached else "fresh"] = {"K": cfg.steps, "M": cfg.mc_paths, "draws": size["so_draws"],
                                                       "paths": "cached" if cached else "fresh",
                                                       "draws_per_s": round(size["so_draws"] / sec, 1),
                                                       "seconds": round(sec, 3)}
    finally:
        torch.set_num_threads(threads)
    result = Result(tables={"digits SE(2), PPCA energy": rows, "SO(3) exp(10 X11^2), per-sample paths": list(so_rows.values())})
    result.metrics.update({f"images_per_s_K{r['K']}_M{r['M']}_H{r['H']}_{r['paths']}": r["images_per_s"] for r in rows})
    result.metrics.update({f"so3_draws_per_s_{k}": v["draws_per_s"] for k, v in so_rows.items()})
    result.add_claim(Claim.less(f"SO(3) sampling with cached forward paths takes less time than with fresh ones "
                                f"(K = {size['so_steps']}, M = {size['so_paths']}, {size['so_draws']} draws; s)",
                                so_rows["cached"]["seconds"], so_rows["fresh"]["seconds"], unit="s"))
    result.notes = (f"CPU, {CPU_THREADS} thread, best of {repeats} runs. Images: {size['images']} SE(2)-transformed "
                    "digits, gamma 0.1 -> 1.0, clip 100, shared Monte-Carlo paths. Fresh paths re-simulate a length-t "
                    "path at every reverse step (the reference's O(K^2 M)); cached reuse one set (O(K M)).")
    return result
