"""``icml26 bench tfmixer``: TFMixer's training throughput, peak memory and step-time breakdown on
PhysioNet 2012 batches (``tpatchgnn`` protocol, batch 64), beside mTAN.

Each model trains in a fresh process (its own peak memory, no allocator state carried over) for
``steps`` optimiser steps with one torch thread, then with two. A step is timed in four parts
(collate, forward, backward, optimiser), and the forward per top-level module (forward hooks), so
the top costs are read off the JSON. Resident memory is sampled every 10 steps of the long run:
``memory_growth_gb`` is its last sample minus its first after warm-up (flat memory: close to 0).

Rows: ``tfmixer-defaults`` is :class:`~icml26.models.tfmixer.modeling.TFMixerConfig`'s default size with dense
decoding and the pooled loss (the model the 50-78 series/s figure was measured on), ``tfmixer`` the
PhysioNet configuration of the experiment (:data:`icml26.eval.experiments.tfmixer.PHYSIONET_CONFIG`),
``mtan`` the mTAN baseline trained the same way. Without the PhysioNet file (``ICML26_PHYSIONET`` or
the repository's ``../shared/data``), synthetic series of the same shape stand in and the rows say so.
"""

from __future__ import annotations

import time

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: steps per timing (after ``warmup``); ``memory_steps``: the long one-thread run of ``tfmixer``
SIZES = {"quick": {"steps": 60, "warmup": 5, "memory_steps": 1000, "defaults_steps": 20},
         "full": {"steps": 200, "warmup": 10, "memory_steps": 3000, "defaults_steps": 60}}
BATCH = 64
TARGET_SERIES_PER_S = 500.0  # the 10x over 50-78 series/s, one thread
TARGET_PEAK_GB = 1.5


def _rss_gb() -> float:
    import os

    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e9


def _peak_gb() -> float:
    import resource
    import sys

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 1e9 if sys.platform == "darwin" else peak * 1024 / 1e9


def _build(name: str, splits):
    import torch

    from icml26.eval.experiments.tfmixer import build_physionet_model
    from icml26.models.tfmixer import TFMixerConfig, TFMixerForForecasting

    torch.manual_seed(0)
    if name == "tfmixer-defaults":
        return TFMixerForForecasting(TFMixerConfig(num_channels=splits.train.num_channels))
    return build_physionet_model(name, splits)


def _time_steps(model, splits, steps: int, warmup: int, threads: int, sample_memory: bool) -> dict:
    """Train ``warmup + steps`` steps; return the timings of the last ``steps``."""
    import torch

    from icml26.models.tfmixer import IMTSCollator
    from icml26.training.tfmixer import PAD_TO

    torch.set_num_threads(threads)
    collate = IMTSCollator(pad_to_multiple_of=PAD_TO)  # as train_forecaster
    gen = torch.Generator().manual_seed(threads)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4, fused=True)  # as train_forecaster
    model.train()
    modules = {}
    for name, child in model.named_children():  # the blocks of a ModuleList, the decoder's parts (decoder.at skips forward)
        if isinstance(child, torch.nn.ModuleList) or name == "decoder":
            modules.update({f"{name}.{sub}": m for sub, m in child.named_children()})
        else:
            modules[name] = child
    spent: dict[str, float] = {}
    hooks = []
    for name, module in modules.items():
        hooks.append(module.register_forward_pre_hook(lambda m, a, n=name: spent.__setitem__(n, spent.get(n, 0.0) - time.perf_counter())))
        hooks.append(module.register_forward_hook(lambda m, a, o, n=name: spent.__setitem__(n, spent[n] + time.perf_counter())))
    parts = dict.fromkeys(("collate", "forward", "backward", "optimizer"), 0.0)
    memory = []
    try:
        for step in range(warmup + steps):
            if step == warmup:
                parts = dict.fromkeys(parts, 0.0)
                spent.clear()
            t0 = time.perf_counter()
            batch = collate([splits.train[i] for i in torch.randint(len(splits.train), (BATCH,), generator=gen).tolist()])
            t1 = time.perf_counter()
            loss = model(**batch).loss
            t2 = time.perf_counter()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            t3 = time.perf_counter()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0, foreach=True)
            opt.step()
            t4 = time.perf_counter()
            for key, seconds in zip(parts, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)):
                parts[key] += seconds
            if sample_memory and step >= warmup and (step - warmup) % 10 == 0:
                memory.append(round(_rss_gb(), 4))
    finally:
        for hook in hooks:
            hook.remove()
    total = sum(parts.values())
    forward_modules = {name: round(seconds / parts["forward"], 3) for name, seconds in
                       sorted(spent.items(), key=lambda kv: -kv[1]) if parts["forward"] > 0}
    return {"threads": threads, "steps": steps, "series_per_s": round(steps * BATCH / total, 1),
            "ms_per_step": round(1e3 * total / steps, 1),
            **{f"share_{k}": round(v / total, 3) for k, v in parts.items()},
            "forward_share_by_module": forward_modules, "memory_samples_gb": memory}


def _load(data: dict):
    from icml26.eval.tasks.tfmixer import SyntheticIMTSConfig, load_physionet2012, make_synthetic_imts

    if data["source"] == "physionet":
        return load_physionet2012(data["path"], "tpatchgnn")
    import torch

    splits = make_synthetic_imts(tuple(data["sizes"]), SyntheticIMTSConfig(num_channels=data["channels"]), seed=0)
    values = torch.cat([s["values"] for s in splits.train])
    mask = torch.cat([s["mask"] for s in splits.train])
    splits.info["train_mean"] = (torch.where(mask, values, 0).sum(0) / mask.sum(0).clamp(min=1)).numpy()
    return splits


def _child(job: dict) -> dict:
    """One model in its own process: throughput at 1 and 2 threads, the long run, peak memory."""
    import torch

    from icml26.utils import fix_malloc_mmap_threshold

    malloc_fixed = fix_malloc_mmap_threshold() if job["fix_malloc"] else False
    splits = _load(job["data"])
    model = _build(job["name"], splits)
    out = {"model": job["name"], "parameters": sum(p.numel() for p in model.parameters()),
           "malloc_threshold_pinned": malloc_fixed, "data": job["data"]["label"]}
    rows = [_time_steps(model, splits, job["steps"], job["warmup"], threads, False) for threads in (1, 2)]
    out["runs"] = rows
    if job["memory_steps"]:
        long = _time_steps(model, splits, job["memory_steps"], job["warmup"], 1, True)
        samples = long.pop("memory_samples_gb")
        out.update(memory_steps=job["memory_steps"], memory_first_gb=samples[0], memory_last_gb=samples[-1],
                   memory_growth_gb=round(samples[-1] - samples[0], 4), memory_samples_gb=samples[::10],
                   long_run_series_per_s=long["series_per_s"])
    out["peak_rss_gb"] = round(_peak_gb(), 3)
    torch.set_num_threads(1)
    return out


def _data_spec(path) -> dict:
    from icml26.eval.tasks.tfmixer import default_physionet_path

    path = path or default_physionet_path()
    if path is not None:
        return {"source": "physionet", "path": str(path), "label": "physionet2012 tpatchgnn"}
    return {"source": "synthetic", "sizes": [600, 100, 100], "channels": 41,
            "label": "synthetic, 41 channels (PhysioNet file not found)"}


def _run_child(job: dict) -> dict:
    """``_child(job)`` in a fresh interpreter (``python -m``: its own memory and allocator state)."""
    import json
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", __name__, json.dumps(job)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"bench tfmixer: the {job['name']} run failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@benchmark("tfmixer", title="TFMixer training on PhysioNet batches: series/s (1 and 2 threads), peak memory, "
           "step breakdown, beside mTAN", paper="tfmixer")
def run(config, sizes: dict | None = None, data: dict | None = None,
        models: tuple[str, ...] = ("tfmixer", "tfmixer-defaults", "mtan"), fix_malloc: bool = False):
    size = (sizes or SIZES)["full" if config.mode == "full" else "quick"]
    spec = data or _data_spec(config.data)
    source = spec["label"]
    jobs = [{"name": name, "data": spec, "warmup": size["warmup"], "fix_malloc": fix_malloc,
             "steps": size["defaults_steps"] if name == "tfmixer-defaults" else size["steps"],
             "memory_steps": size["memory_steps"] if name == "tfmixer" else 0} for name in models]
    rows = [_run_child(job) for job in jobs]  # one at a time: each owns the cores while it is timed
    metrics = {}
    for row in rows:
        for run_ in row["runs"]:
            metrics[f"{row['model']}/series_per_s_{run_['threads']}_threads"] = run_["series_per_s"]
        metrics[f"{row['model']}/peak_rss_gb"] = row["peak_rss_gb"]
        metrics[f"{row['model']}/step_shares_1_thread"] = {k[6:]: v for k, v in row["runs"][0].items()
                                                          if k.startswith("share_")}
        metrics[f"{row['model']}/forward_share_by_module_1_thread"] = row["runs"][0]["forward_share_by_module"]
    table = [{"model": r["model"], "parameters": r["parameters"], "data": r["data"],
              **{f"series/s {x['threads']} thread(s)": x["series_per_s"] for x in r["runs"]},
              **{f"ms/step {x['threads']} thread(s)": x["ms_per_step"] for x in r["runs"]},
              "peak RSS GB": r["peak_rss_gb"], "memory growth GB": r.get("memory_growth_gb")} for r in rows]
    result = Result(metrics=metrics, tables={"throughput": table, "runs": rows})
    main = next((r for r in rows if r["model"] == "tfmixer"), None)
    if main is not None:
        one, two = (x["series_per_s"] for x in main["runs"])
        metrics["tfmixer/memory_growth_gb"] = main.get("memory_growth_gb")
        result.add_claim(Claim.at_least(f"TFMixer training series/s, batch {BATCH}, one torch thread ({source})", one,
                                        TARGET_SERIES_PER_S))
        result.add_claim(Claim.at_least("two threads no slower than one (series/s)", two, one))
        result.add_claim(Claim.at_most("peak resident memory of the TFMixer process (GB)", main["peak_rss_gb"],
                                       TARGET_PEAK_GB))
        if main.get("memory_growth_gb") is not None:
            result.add_claim(Claim.at_most(f"resident memory growth over {main['memory_steps']} steps (GB)",
                                           main["memory_growth_gb"], 0.05))
    from icml26.training.tfmixer import PAD_TO

    pinned = "pinned (icml26.utils.fix_malloc_mmap_threshold)" if fix_malloc else "left to glibc"
    result.notes = (f"Each model in a fresh process, glibc's mmap threshold {pinned}; batches padded to multiples "
                    f"of {PAD_TO} as in training. Shares: of the step time (collate, forward, backward, optimizer) "
                    "and of the forward time by top-level module. On a shared machine the rates fall with the "
                    "other load.")
    return result


if __name__ == "__main__":  # the child of _run_child
    import json
    import sys

    print(json.dumps(_child(json.loads(sys.argv[1]))))
