"""``icml26 bench mol_diffusion``: the cost of each stage of the two-stage procedure at the experiment's sizes.

- training steps per second of a specialist (2x64 after an 8 -> 1 bottleneck, batch 128) and of the generalist
  (4x256 with a task one-hot, batch 256), by the plain loop :func:`~icml26.training.mol_diffusion.fit_dsm`;
- the generalist's steps per second through :class:`~icml26.training.mol_diffusion.DSMTrainer` (the
  ``transformers.Trainer`` path: its data loader, collation and callbacks);
- pseudo-samples per second: the specialist's 50-step DDIM on 4096 conditions (one task's condition-only set).

Training is timed at two lengths (``steps`` and ``long_steps``) so the marginal cost of a step is separated from
the setup (the ``Trainer``'s construction, the data loader's first batch). The claim: the Trainer path's marginal
cost per generalist step is less than twice the plain loop's (what a user pays for the ``Trainer``'s loop, logging
and accelerate at this model size).
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: The sizes; the tests shrink them.
SIZES = {"steps": 50, "long_steps": 400, "conditions": 4096, "sampler_steps": 50, "repeats": 3, "warmup": 1}
TRAINER_OVERHEAD = 2.0


def _closures(size: dict, seed: int, out_dir, steps: int):
    import numpy as np
    import torch

    from icml26.eval.tasks.mol_diffusion import ConditionalTasks
    from icml26.models.mol_diffusion import EpsMLP, EpsMLPConfig
    from icml26.training.mol_diffusion import DSMConfig, DSMTrainer, ddim_sample, fit_dsm, noise_scheduler

    tasks, rng = ConditionalTasks(8, seed=seed), np.random.default_rng(seed)
    cond = tasks.conditions(size["conditions"], rng)
    target = np.concatenate([tasks.sample(0, cond[: len(cond) // 2], rng), tasks.sample(1, cond[len(cond) // 2:], rng)])
    task = np.repeat([0, 1], [len(cond) // 2, len(cond) - len(cond) // 2])
    data = {"x0": torch.as_tensor(target, dtype=torch.float32), "cond": torch.as_tensor(cond, dtype=torch.float32),
            "task": torch.as_tensor(task)}
    sch = noise_scheduler()
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        spec = EpsMLP(EpsMLPConfig(cond_bottleneck=1, hidden_size=64, num_layers=2))
        gen = EpsMLP(EpsMLPConfig(num_tasks=2, hidden_size=256, num_layers=4))
        gen_hf = EpsMLP(gen.config)
    import datasets

    rows = datasets.Dataset.from_dict({"cond": cond.tolist(), "target": target.tolist(), "task": task.tolist()})
    args = DSMConfig(output_dir=str(out_dir / "dsm_trainer"), max_steps=steps, per_device_train_batch_size=256,
                     learning_rate=1e-3, report_to="none", save_strategy="no", logging_strategy="no",
                     disable_tqdm=True, use_cpu=True, dataloader_drop_last=True, seed=seed)

    def trainer_run():
        DSMTrainer(model=gen_hf, args=args, train_dataset=rows).train()

    spec_data = {"x0": data["x0"], "cond": data["cond"]}
    return {
        "specialist": lambda: fit_dsm(spec, sch, spec_data, steps, batch_size=128, seed=seed),
        "generalist": lambda: fit_dsm(gen, sch, data, steps, batch_size=256, seed=seed),
        "generalist (DSMTrainer)": trainer_run,
        "pseudo-samples": lambda: ddim_sample(spec, sch, data["cond"], steps=size["sampler_steps"],
                                              generator=torch.Generator().manual_seed(seed), clip_sample=1.5),
    }


@benchmark("mol_diffusion", title="Two-stage multi-objective diffusion: training steps per second per stage, the "
                                  "Trainer path, pseudo-samples per second", paper="mol_diffusion")
def run(config, sizes: dict | None = None) -> Result:
    from icml26.eval.measure import interleaved_median_ms

    size = dict(SIZES, **(sizes or {}))
    device = config.torch_device()
    short, long = size["steps"], size["long_steps"]
    if long <= short:
        raise ValueError(f"bench mol_diffusion: sizes: expected long_steps > steps, got {long} and {short}")
    seed, n = config.seeds[0], size["conditions"]
    fns = {f"{name} @ {s}": fn for s in (short, long)
           for name, fn in _closures(size, seed, config.out_dir, s).items() if s == short or name != "pseudo-samples"}
    ms = interleaved_median_ms(fns, device, warmup=size["warmup"], repeats=size["repeats"])
    rows, m = [], {}
    for name in ("specialist", "generalist", "generalist (DSMTrainer)"):
        step_ms = (ms[f"{name} @ {long}"] - ms[f"{name} @ {short}"]) / (long - short)
        setup_ms = ms[f"{name} @ {short}"] - short * step_ms
        m[f"{name} ms/step"], m[f"{name} setup ms"] = step_ms, setup_ms
        rows.append({"stage": name, "ms per step": round(step_ms, 3), "steps/s": round(1e3 / step_ms),
                     "setup ms": round(setup_ms, 1)})
    sample_ms = ms[f"pseudo-samples @ {short}"]
    m["pseudo-samples/s"] = n / sample_ms * 1e3
    rows.append({"stage": f"pseudo-samples ({n} conditions, {size['sampler_steps']} DDIM steps)",
                 "ms per call": round(sample_ms, 1), "samples/s": round(m["pseudo-samples/s"])})
    result = Result(tables={"cost per stage": rows}, metrics=m)
    result.add_claim(Claim.less(f"the DSMTrainer path's marginal cost per generalist step (batch 256) is less than "
                                f"{TRAINER_OVERHEAD:g}x the plain loop's", m["generalist (DSMTrainer) ms/step"],
                                m["generalist ms/step"], factor=TRAINER_OVERHEAD, unit="ms"))
    m["device"] = str(device)
    result.notes = (f"Device {device}; median of {size['repeats']} interleaved rounds after {size['warmup']} warm-up "
                    f"round(s); each stage trained for {short} and {long} steps, the marginal cost per step is the "
                    f"difference over {long - short} steps and the setup the rest; sampling is one batch of {n} "
                    "conditions; torch's default threads.")
    return result
