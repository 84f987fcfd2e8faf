"""Multi-objective diffusion with scarce pairs (ICML 2026, "Multi-Objective Learning for Diffusion Models: A
Statistical Theory under Semi-Supervised Learning", arXiv 2605.25210): does a generalist distilled from lightweight
specialists' pseudo-samples beat a generalist trained on the scarce pairs alone?

Setting (the issue's; the paper's experiments are not public): two conditional 2-D tasks
(:class:`~icml26.eval.tasks.mol_diffusion.ConditionalTasks`) whose noised conditionals are Gaussian mixtures, so the
exact epsilon (the DSM floor) is known; ``n`` pairs and ``m`` condition-only rows per task. Arms, all on the same
pairs:

- **two-stage** (:class:`~icml26.training.mol_diffusion.TwoStageMOL`): a 2x64 specialist after a linear 8 -> 1
  bottleneck per task, 50-step DDIM pseudo-samples at the ``m`` conditions, a 4x256 generalist with a task one-hot
  distilled by the linear scalarisation (``lambda = 1/2``);
- **labelled-only** (:func:`~icml26.training.mol_diffusion.fit_labeled_only`): the same generalist on the pairs,
  weight decay 1e-4 and early stopping on 20% of them.

Evaluation with common random numbers: held-out DSM on 4000 fresh pairs per task (the same timesteps and noise for
every model), its excess over the exact epsilon's DSM, and the energy distance of 256 samples against 256 true
draws at 16 conditions (the same sampler noise for every model). Claims, per seed (several seeds: medians):

1. The scalarised held-out DSM (the tasks' mean) of the two-stage generalist is below the labelled-only one's by
   more than 3 paired standard errors.
2. Energy distance: two-stage below labelled-only, on each task.
3. (full, ``n = 1024``) The gain needs scarce pairs: labelled-only's scalarised DSM is at most the two-stage one's.

Reported: per-task DSM and excess, two-stage / specialist ratios; full mode adds the bottleneck-free control
(generic specialists: the theory predicts no gain), the score-regression variant, the Pareto front of a task-agnostic
generalist over ``lambda`` beside its analytic optimum, and the point-mass diffusion-policy study.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from icml26.registry import experiment
from icml26.results import Claim, Result
from icml26.utils import inner_seed

EVAL_ROWS = 4000       # held-out pairs per task
ED_CONDITIONS = 16     # conditions of the energy distance
ED_SAMPLES = 256       # samples per condition
POLICY_DEMOS = 5       # expert demonstrations per environment (the point-mass study)
POLICY_EPISODES = 50   # evaluation episodes per environment
POLICY_ROLLOUTS = 100  # state-collecting rollouts per environment
STATE_SOURCES = ("specialist_rollouts", "on_policy")


@dataclass(frozen=True)
class MOLDiffusionSettings:
    """Sizes of one mode.

    ``n_pairs`` pairs per task of the claim runs, ``n_unlabeled`` condition-only rows per task; ``steps`` of each
    stage (AdamW ``lr``; batch ``batch_size`` for specialists and the labelled-only model, ``generalist_batch`` in
    stage 2); ``sampler_steps`` of DDIM; ``large_n`` the crossover's pairs per task (``None``: not run);
    ``control`` runs the bottleneck-free specialists and the score-regression variant; ``lambdas`` the Pareto sweep
    of a task-agnostic generalist (empty: none); ``policy`` runs the point-mass study.
    """

    n_pairs: int = 64
    n_unlabeled: int = 4096
    steps: int = 3000
    generalist_steps: int = 4000
    pseudo_draws: int = 4
    ema_decay: float | None = 0.999
    lr: float = 1e-3
    batch_size: int = 128
    generalist_batch: int = 256
    sampler_steps: int = 50
    large_n: int | None = None
    control: bool = False
    lambdas: tuple[float, ...] = ()
    policy: bool = False


SETTINGS = {"quick": MOLDiffusionSettings()}
SETTINGS["full"] = dataclasses.replace(SETTINGS["quick"], large_n=1024, control=True,
                                       lambdas=(0.0, 0.25, 0.5, 0.75, 1.0), policy=True)


def _configs(bottleneck: bool = True, one_hot: bool = True):
    from icml26.models.mol_diffusion import EpsMLPConfig

    specialist = EpsMLPConfig(cond_bottleneck=1 if bottleneck else None, hidden_size=64, num_layers=2)
    generalist = EpsMLPConfig(num_tasks=2 if one_hot else 0, hidden_size=256, num_layers=4)
    return specialist, generalist


def _pairs(tasks, n: int, seed: int, *stream: int) -> dict[str, Any]:
    """``n`` pairs per task (float64 columns ``cond``, ``target``, int ``task``)."""
    import numpy as np

    rng = np.random.default_rng(inner_seed(seed, *stream))
    cond, target, task = [], [], []
    for k in range(2):
        c = tasks.conditions(n, rng)
        cond.append(c)
        target.append(tasks.sample(k, c, rng))
        task.append(np.full(n, k))
    return {"cond": np.concatenate(cond), "target": np.concatenate(target), "task": np.concatenate(task)}


# ----------------------------------------------------------------------------------------------
# evaluation with common random numbers
# ----------------------------------------------------------------------------------------------
def _held_out(tasks, seed: int) -> dict[str, Any]:
    """Per task: ``EVAL_ROWS`` fresh pairs, their timesteps and noise, and the energy distance's conditions,
    truths and sampler noise (every model of a seed meets the same)."""
    import numpy as np
    import torch

    out = {}
    for k in range(2):
        rng = np.random.default_rng(inner_seed(seed, 20, k))
        cond = tasks.conditions(EVAL_ROWS, rng)
        g = torch.Generator().manual_seed(inner_seed(seed, 21, k, bits=31))
        ed_cond = [tasks.conditions(1, rng).repeat(ED_SAMPLES, 0) for _ in range(ED_CONDITIONS)]
        out[k] = {"cond": cond, "x0": tasks.sample(k, cond, rng), "t": torch.randint(0, 100, (EVAL_ROWS,), generator=g),
                  "noise": torch.randn((EVAL_ROWS, 2), generator=g, dtype=torch.float64),
                  "ed_cond": ed_cond, "ed_truth": [tasks.sample(k, c, rng) for c in ed_cond],
                  "ed_noise": [torch.randn((ED_SAMPLES, 2), generator=g) for _ in ed_cond]}
    return out


def _evaluate(model, tasks, held, clip: float | None, *, task_input: bool, energy: bool = True) -> dict[str, Any]:
    """Per task: the per-row held-out DSM and (``energy``) the mean energy distance. ``task_input``: the model
    reads the task id (a generalist with a one-hot); a specialist is called with no task."""
    import numpy as np
    import torch

    from icml26.eval.tasks.mol_diffusion import energy_distance
    from icml26.training.mol_diffusion import ddim_sample, dsm_loss, noise_scheduler

    scheduler = noise_scheduler()
    out = {}
    for k, h in held.items():
        cond = torch.as_tensor(h["cond"], dtype=torch.float32)
        task = torch.full((len(cond),), k) if task_input else None
        with torch.no_grad():
            rows = dsm_loss(model, scheduler, torch.as_tensor(h["x0"], dtype=torch.float32), cond, task, h["t"],
                            h["noise"].float(), reduction="none")
        entry = {"dsm_rows": rows.double().numpy()}
        if energy:
            eds = []
            for c, truth, noise in zip(h["ed_cond"], h["ed_truth"], h["ed_noise"]):
                ct = torch.as_tensor(c, dtype=torch.float32)
                kt = torch.full((len(ct),), k) if task_input else None
                sample = ddim_sample(model, scheduler, ct, kt, x_T=noise, clip_sample=clip)
                if not eds:
                    entry["samples"] = sample.tolist()  # the first condition's, for the figure
                eds.append(energy_distance(sample, truth))
            entry["energy"] = float(np.mean(eds))
        out[k] = entry
    return out


def _floor(tasks, held) -> dict[int, Any]:
    """Per task, the per-row DSM of the exact epsilon (the floor no model goes below in expectation)."""
    import torch

    from icml26.training.mol_diffusion import noise_scheduler

    scheduler = noise_scheduler()
    out = {}
    for k, h in held.items():
        x0 = torch.as_tensor(h["x0"], dtype=torch.float64)
        x_t = scheduler.add_noise(x0, h["noise"], h["t"])
        eps = tasks.true_epsilon(k, h["cond"], x_t, scheduler.alphas_cumprod[h["t"]].double())
        out[k] = (eps - h["noise"]).square().sum(1).numpy()
    return out


# ----------------------------------------------------------------------------------------------
# jobs (picklable arguments, plain results)
# ----------------------------------------------------------------------------------------------
def _job(job) -> dict[str, Any]:

    from icml26.eval.tasks.mol_diffusion import ConditionalTasks
    from icml26.progress import phase
    from icml26.training.mol_diffusion import TwoStageMOL, fit_labeled_only

    kind, n, s, seed, options = job
    if kind == "policy":
        return _policy_job(n, s, seed, options["state_source"])
    tasks = ConditionalTasks(8, seed=inner_seed(seed, 1, bits=31))
    paired = _pairs(tasks, n, seed, 2, n)
    held = _held_out(tasks, seed)
    spec_cfg, gen_cfg = _configs(bottleneck=options.get("bottleneck", True), one_hot=options.get("one_hot", True))
    start = time.perf_counter()
    out: dict[str, Any] = {"kind": kind, "n": n, "options": options}
    with phase(f"{kind} n={n} {options}".strip(), total=None):
        if kind == "labeled_only":
            model, fit = fit_labeled_only(gen_cfg, paired, steps=s.steps, batch_size=s.batch_size, lr=s.lr,
                                          ema_decay=s.ema_decay, seed=inner_seed(seed, 3, n, bits=31))
            clip = float(abs(paired["target"]).max())
            out["labeled_only"] = _evaluate(model, tasks, held, clip, task_input=True)
            out["best_step"] = fit.best_step
        else:
            unlabeled = _pairs(tasks, s.n_unlabeled, seed, 4)
            unlabeled["target"][:] = float("nan")  # stage 2 must never read these
            lam = options.get("lambda")
            mol = TwoStageMOL(spec_cfg, gen_cfg, sampler_steps=s.sampler_steps, seed=inner_seed(seed, 5, n, bits=31),
                              variant=options.get("variant", "pseudo_samples"), specialist_steps=s.steps,
                              generalist_steps=s.generalist_steps, batch_size=s.batch_size,
                              generalist_batch_size=s.generalist_batch, pseudo_draws=s.pseudo_draws, lr=s.lr,
                              ema_decay=s.ema_decay, task_weights=None if lam is None else (1 - lam, lam))
            mol.fit(paired, unlabeled)
            energy = lam is None
            out["two_stage"] = _evaluate(mol.generalist_, tasks, held, mol.clip_range_, task_input=gen_cfg.num_tasks > 0,
                                         energy=energy)
            if lam is None:
                out["specialist"] = {k: _evaluate(mol.specialists_[k], tasks, {k: held[k]}, mol.clip_range_,
                                                  task_input=False)[k] for k in range(2)}
            if lam is not None:
                out["optimum"] = _lambda_optimum(tasks, held, lam)
    out["seconds"] = time.perf_counter() - start
    return out


def _lambda_optimum(tasks, held, lam: float) -> dict[int, float]:
    """Per task, the held-out DSM of the exact minimiser of ``(1 - lam) L_0 + lam L_1`` over task-agnostic models
    (the analytic Pareto front)."""
    import torch

    from icml26.training.mol_diffusion import noise_scheduler

    scheduler = noise_scheduler()
    out = {}
    for k, h in held.items():
        x_t = scheduler.add_noise(torch.as_tensor(h["x0"], dtype=torch.float64), h["noise"], h["t"])
        eps = tasks.scalarized_epsilon((1 - lam, lam), h["cond"], x_t, scheduler.alphas_cumprod[h["t"]].double())
        out[k] = float((eps - h["noise"]).square().sum(1).mean())
    return out


def _policy_job(demos: int, s: MOLDiffusionSettings, seed: int, state_source: str | None) -> dict[str, Any]:
    """The point-mass study, one arm: ``state_source=None`` fits the specialists and the labelled-only generalist
    on the demonstrations; otherwise the two-stage generalist with that state source. Returns the success rate per
    environment over ``POLICY_EPISODES`` episodes (the same start noise for every arm)."""
    import numpy as np

    from icml26.eval.tasks.mol_diffusion import LAYOUTS, expert_demos, run_episodes
    from icml26.models.mol_diffusion import EpsMLPConfig
    from icml26.training.mol_diffusion import DiffusionPolicy, TwoStageMOL, fit_labeled_only, fit_two_stage_policy

    start = time.perf_counter()
    envs = range(len(LAYOUTS))
    rng = np.random.default_rng(inner_seed(seed, 30))
    parts = [expert_demos(k, demos, rng) for k in envs]
    paired = {"cond": np.concatenate([p["cond"] for p in parts]), "target": np.concatenate([p["target"] for p in parts]),
              "task": np.concatenate([np.full(len(p["cond"]), k) for k, p in zip(envs, parts)])}
    dim = paired["target"].shape[1]
    spec = EpsMLPConfig(sample_dim=dim, cond_dim=8, hidden_size=128, num_layers=2)
    gen = EpsMLPConfig(sample_dim=dim, cond_dim=8, num_tasks=len(LAYOUTS), hidden_size=256, num_layers=4)
    mol = TwoStageMOL(spec, gen, sampler_steps=10, num_train_timesteps=50, clip_sample=1.0, specialist_steps=s.steps,
                      generalist_steps=s.generalist_steps, batch_size=s.batch_size, generalist_batch_size=s.generalist_batch,
                      lr=s.lr, ema_decay=0.999, seed=inner_seed(seed, 31, bits=31))

    def success(policy_for) -> dict[int, float]:
        return {k: float(run_episodes(k, policy_for(k), POLICY_EPISODES,
                                      np.random.default_rng(inner_seed(seed, 32, k)))["success"].mean()) for k in envs}

    out: dict[str, Any] = {"kind": "policy", "n": demos, "options": {"state_source": state_source}}
    if state_source is None:
        mol.fit_specialists(paired)
        out["specialists"] = success(lambda k: DiffusionPolicy(mol, mol.specialists_[k], seed=k))
        model, fit = fit_labeled_only(gen, paired, steps=s.steps, batch_size=s.batch_size, lr=s.lr,
                                      num_train_timesteps=50, seed=inner_seed(seed, 33, bits=31))
        out["labelled-only"] = success(lambda k: DiffusionPolicy(mol, model, task=k, seed=k))
    else:
        def collect(policy_for):
            return {k: run_episodes(k, policy_for(k), POLICY_ROLLOUTS,
                                    np.random.default_rng(inner_seed(seed, 34, k)))["states"] for k in envs}

        fit_two_stage_policy(mol, paired, collect, state_source=state_source)
        out[f"two-stage ({state_source})"] = success(lambda k: DiffusionPolicy(mol, mol.generalist_, task=k, seed=k))
        out["pseudo_pairs"] = len(mol.pseudo_)
    out["pairs"] = len(paired["task"])
    out["seconds"] = time.perf_counter() - start
    return out


def _policy_table(runs) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    metrics, table = {}, []
    for r in runs:
        for arm, rates in r.items():
            if isinstance(rates, dict) and arm != "options":
                metrics[arm] = {"per_env": rates, "mean": sum(rates.values()) / len(rates)}
                table.append({"arm": arm, **{f"env {k}": round(v, 3) for k, v in rates.items()},
                              "mean": round(metrics[arm]["mean"], 3)})
    metrics["demo_pairs"] = runs[0]["pairs"]
    return metrics, table


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
@experiment("mol_diffusion", title="Multi-objective diffusion with scarce pairs: a generalist distilled from "
                                   "specialists' pseudo-samples beats the labelled-only generalist (reconstructed)",
            paper="mol_diffusion")
def run(config) -> Result:
    return run_experiment(config)


def run_experiment(config, settings: MOLDiffusionSettings | None = None) -> Result:
    """The experiment with its sizes exposed; several seeds decide claims on the median over seeds."""
    from icml26.results import over_seeds

    s = settings or SETTINGS[config.mode]
    return over_seeds(config.seeds, lambda seed: _run_seed(config, s, seed))


def _paired(a, b) -> tuple[float, float]:
    """Mean and standard error of the paired differences ``a - b``."""
    from icml26.eval.measure import paired_difference

    d = paired_difference(a, b)
    return d["mean"], d["se"]


def _scalarised(rows: dict) -> float:
    """The linear scalarisation at lambda = 1/2 of per-task held-out DSM rows."""
    return 0.5 * sum(float(rows[k]["dsm_rows"].mean()) for k in (0, 1))


def _run_seed(config, s: MOLDiffusionSettings, seed: int) -> Result:
    import torch

    from icml26.eval.parallel import map_jobs
    from icml26.eval.tasks.mol_diffusion import ConditionalTasks

    start = time.perf_counter()
    n = s.n_pairs
    jobs = [("two_stage", n, s, seed, {}), ("labeled_only", n, s, seed, {})]
    if s.large_n is not None:
        jobs += [("two_stage", s.large_n, s, seed, {}), ("labeled_only", s.large_n, s, seed, {})]
    if s.control:
        jobs += [("two_stage", n, s, seed, {"bottleneck": False}), ("two_stage", n, s, seed,
                                                                      {"variant": "score_regression"})]
    jobs += [("two_stage", n, s, seed, {"one_hot": False, "lambda": lam}) for lam in s.lambdas]
    if s.policy:  # first: the longest jobs
        jobs = [("policy", POLICY_DEMOS, s, seed, {"state_source": src}) for src in (*STATE_SOURCES, None)] + jobs
    runs = map_jobs(_job, jobs, torch.device("cpu"), phase_name="training runs")
    policy = [r for r in runs if r["kind"] == "policy"]
    runs = [r for r in runs if r["kind"] != "policy"]
    tasks = ConditionalTasks(8, seed=inner_seed(seed, 1, bits=31))
    held = _held_out(tasks, seed)
    floor = _floor(tasks, held)
    two, lab = runs[0]["two_stage"], runs[1]["labeled_only"]
    spec = runs[0]["specialist"]

    result = Result()
    m = result.metrics
    m["floor"] = {k: float(floor[k].mean()) for k in (0, 1)}
    for name, arm in (("specialist", spec), ("labeled_only", lab), ("two_stage", two)):
        m[name] = {f"task {k}": {"dsm": float(arm[k]["dsm_rows"].mean()),
                                 "excess": float(arm[k]["dsm_rows"].mean() - floor[k].mean()),
                                 "energy": arm[k]["energy"]} for k in (0, 1)}
    m["labeled_only"]["best_step"] = runs[1]["best_step"]
    m["two_stage_over_specialist"] = {f"task {k}": m["two_stage"][f"task {k}"]["dsm"] / m["specialist"][f"task {k}"]["dsm"]
                                      for k in (0, 1)}

    # 1. semi-supervised beats labelled-only on the scalarised risk
    diffs = [_paired(lab[k]["dsm_rows"], two[k]["dsm_rows"]) for k in (0, 1)]
    margin = 0.5 * (diffs[0][0] + diffs[1][0])
    se = 0.5 * math.sqrt(diffs[0][1] ** 2 + diffs[1][1] ** 2)
    m["claim1"] = {"labeled_only": _scalarised(lab), "two_stage": _scalarised(two), "margin": margin, "se": se}
    result.add_claim(Claim.greater(
        f"n = {n} pairs per task: the scalarised held-out DSM (lambda = 1/2) of the two-stage generalist is below "
        "the labelled-only generalist's by more than 3 paired standard errors (measured: labelled-only minus "
        "two-stage; reference: 3 SE)", margin, 3 * se))
    # 2. energy distance, each task
    for k in (0, 1):
        result.add_claim(Claim.less(f"energy distance, task {k}: two-stage below labelled-only", two[k]["energy"],
                                    lab[k]["energy"]))
    rows = []
    for name, arm in (("specialist (per task)", spec), ("labelled-only generalist", lab), ("two-stage generalist", two)):
        for k in (0, 1):
            rows.append({"n": n, "model": name, "task": k, "held-out DSM": round(float(arm[k]["dsm_rows"].mean()), 4),
                         "excess over the floor": round(float(arm[k]["dsm_rows"].mean() - floor[k].mean()), 4),
                         "energy distance": round(arm[k]["energy"], 4)})

    # 3. (full) the crossover at many pairs
    if s.large_n is not None:
        two_l, lab_l = runs[2]["two_stage"], runs[3]["labeled_only"]
        m["large_n"] = {"n": s.large_n, "labeled_only": _scalarised(lab_l), "two_stage": _scalarised(two_l),
                        "labeled_only_best_step": runs[3]["best_step"]}
        result.add_claim(Claim.at_most(
            f"n = {s.large_n} pairs per task: the labelled-only generalist's scalarised DSM is at most the two-stage "
            "one's (the gain needs scarce pairs)", _scalarised(lab_l), _scalarised(two_l)))
        for name, arm in (("labelled-only generalist", lab_l), ("two-stage generalist", two_l)):
            for k in (0, 1):
                rows.append({"n": s.large_n, "model": name, "task": k,
                             "held-out DSM": round(float(arm[k]["dsm_rows"].mean()), 4),
                             "excess over the floor": round(float(arm[k]["dsm_rows"].mean() - floor[k].mean()), 4),
                             "energy distance": round(arm[k]["energy"], 4)})
    result.tables["held-out DSM (common random numbers) and energy distance"] = rows
    if s.control:
        control = []
        for r in runs:
            if r["kind"] == "two_stage" and r["options"] and "lambda" not in r["options"]:
                label = ("bottleneck-free specialists" if r["options"].get("bottleneck") is False
                         else "score-regression variant")
                m[label] = {f"task {k}": float(r["two_stage"][k]["dsm_rows"].mean()) for k in (0, 1)}
                for k in (0, 1):
                    control.append({"run": label, "task": k,
                                    "two-stage DSM": round(float(r["two_stage"][k]["dsm_rows"].mean()), 4),
                                    "its specialist's DSM": round(float(r["specialist"][k]["dsm_rows"].mean()), 4),
                                    "labelled-only DSM": round(float(lab[k]["dsm_rows"].mean()), 4),
                                    "energy distance": round(r["two_stage"][k]["energy"], 4)})
        result.tables["controls (reported): generic specialists, score regression"] = control
    front = [r for r in runs if "lambda" in r["options"]]
    if front:
        m["pareto"] = [{"lambda": r["options"]["lambda"], "L0": float(r["two_stage"][0]["dsm_rows"].mean()),
                        "L1": float(r["two_stage"][1]["dsm_rows"].mean()), "L0_optimum": r["optimum"][0],
                        "L1_optimum": r["optimum"][1]} for r in front]
        result.tables["Pareto front (reported): a task-agnostic generalist, weights (1 - lambda, lambda)"] = [
            {k: round(v, 4) for k, v in p.items()} for p in m["pareto"]]
    if policy:
        m["policy"], table = _policy_table(policy)
        result.tables["point-mass diffusion policies (reported): success rate per environment"] = table
    m["seconds"] = {f"{r['kind']} n={r['n']} {r['options']}": round(r["seconds"], 1) for r in runs}
    m["total_seconds"] = time.perf_counter() - start
    result.figures = {"held_out_dsm": _dsm_figure(m, n), "samples": _sample_figure(runs[0], runs[1], held)}
    if front:
        result.figures["pareto_front"] = _pareto_figure(m["pareto"])
    result.notes = (
        f"Mode {config.mode}, seed {seed} (task directions, pairs, condition-only rows, initial weights, batches and "
        f"evaluation noise drawn from it by SeedSequence). n = {n} pairs and m = {s.n_unlabeled} condition-only rows "
        f"per task; AdamW lr {s.lr:g}, {s.steps} steps per stage (batch {s.batch_size}; {s.generalist_batch} in stage "
        f"2); {s.sampler_steps}-step DDIM (trailing spacing, eta 0, predicted x0 clipped to the pairs' range). "
        f"The labelled-only baseline stopped at step {runs[1]['best_step']} (weight decay 1e-4, 20% of the pairs "
        f"held out). Floors (the exact epsilon's held-out DSM): {m['floor'][0]:.3f} / {m['floor'][1]:.3f}. "
        "The two-stage procedure follows the paper; its specialist class, sampler and settings are a "
        "RECONSTRUCTION (the paper's code and experiments are not public).")
    return result


# ----------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------
def _dsm_figure(m, n: int):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 3.6), layout="constrained")
    arms = ("specialist", "labeled_only", "two_stage")
    for i, (key, title) in enumerate((("excess", f"held-out DSM excess over the floor (n = {n})"),
                                      ("energy", "energy distance to the truth"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for j, arm in enumerate(arms):
            values = [m[arm][f"task {k}"][key] for k in (0, 1)]
            ax.bar([k + (j - 1) * 0.27 for k in (0, 1)], values, width=0.27, label=arm.replace("_", "-"))
        ax.set_xticks([0, 1], ["task 0", "task 1"])
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
    return fig


def _sample_figure(two_run, lab_run, held):
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 5.2), layout="constrained")
    panels = (("truth", None), ("specialist", two_run["specialist"]), ("labelled-only", lab_run["labeled_only"]),
              ("two-stage", two_run["two_stage"]))
    for k in (0, 1):
        for j, (name, arm) in enumerate(panels):
            ax = fig.add_subplot(2, 4, 4 * k + j + 1)
            pts = np.asarray(held[k]["ed_truth"][0] if arm is None else arm[k]["samples"])
            ax.scatter(pts[:, 0], pts[:, 1], s=3, alpha=0.5, color="C7" if arm is None else f"C{j}")
            ax.set_xlim(-1.6, 1.6)
            ax.set_ylim(-1.6, 1.6)
            ax.set_aspect("equal")
            ax.set_title(f"task {k}: {name}", fontsize=8)
    fig.suptitle("256 samples at one held-out condition per task (the same sampler noise for every model)",
                 fontsize=9)
    return fig


def _pareto_figure(front):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5, 4), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([p["L0"] for p in front], [p["L1"] for p in front], "o-", label="trained, task-agnostic")
    ax.plot([p["L0_optimum"] for p in front], [p["L1_optimum"] for p in front], "s--", label="analytic optimum")
    for p in front:
        ax.annotate(f"{p['lambda']:g}", (p["L0"], p["L1"]), fontsize=7)
    ax.set_xlabel("held-out DSM, task 0")
    ax.set_ylabel("held-out DSM, task 1")
    ax.legend(fontsize=7)
    ax.set_title("Pareto front over lambda (weight on task 1)", fontsize=9)
    return fig
