"""R2G on Grokfast's task: does repelling attention values make a transformer grok sooner?

The paper (R2G, ICLR 2026 submission #10469, OpenReview ``yiSic9R2r8``; the ICML 2026 version's arXiv id
is not public) claims its repulsion term ``alpha / D`` (:mod:`icml26.training.r2g.loss`) makes transformers
grok sooner. Its reviewers asked for a comparison with Grokfast (arXiv 2405.20233), so the main setting
is Grokfast's own (ironjr/grokfast ``main.py``): ``a * b mod 97``, half of the 9,312 pairs for training
(its seeded ``randperm``), its 2-layer width-128 decoder (built as a GPT-2 from a config, with Grokfast's
initial weights, :func:`~icml26.eval.tasks.r2g.modular.anchor_decoder`), minibatches of 512, Adam lr 1e-3,
betas (0.9, 0.98), its 10-step warm-up and its evaluation after every epoch. Grokfast reports 910 steps
to 95% validation accuracy with its EMA filter (alpha 0.98, lambda 2, coupled L2 weight decay 0.005)
and 39,890 for the unfiltered baseline (Adam, no decay).

Arms (all from the same initial weights and split at a given seed; ``seed`` is Grokfast's ``--seed``):

- ``baseline``: Grokfast's baseline (Adam, no weight decay, no filter);
- ``R2G`` / ``R2G-angular``: the baseline plus ``alpha / D`` (Euclidean / angular distance, mean over
  pairs, every layer's value projection at the two operand positions);
- ``Grokfast-EMA``: the filter with weight decay 0.005 (coupled L2, as Grokfast's ``torch.optim.Adam``);
- ``R2G + Grokfast``: both.

Reconstruction: R2G's alpha is chosen on a selection split carved from the training pairs (the test
pairs are never looked at): :func:`select_alpha` trains the R2G arm on 90% of the training pairs for
:data:`SELECTION_STEPS` steps at seed 0 for each alpha of :data:`ALPHA_GRID` and keeps the one that
reaches 95% selection accuracy first (else the highest selection accuracy). Both modes use the
result committed in :data:`SELECTED_ALPHA`; ``R2GSettings(select=True)`` reruns the selection and records it.

Quick mode (about 2 minutes per seed on 2 cores, one process per arm): Grokfast-EMA, baseline and R2G at
one seed for :data:`BUDGET` steps, an arm stopping once it reaches 95% test accuracy; its R2G claim is a
direction (R2G's test accuracy at the budget above the baseline's): the magnitude needs the grokking step.
Full mode (about 90 minutes on 2 cores, :data:`CAP` steps per run): R2G (the selected alpha) and the
baseline at every seed, R2G-angular and Grokfast-EMA at the first seed beside them, two processes at a
time, longest runs first, through ``torch.compile``; every run checkpoints every 1,000 steps and writes its
result to ``runs/`` in the experiment folder as it finishes, so a rerun with the same ``--out`` resumes
and a kill loses at most one checkpoint interval. Steps to 95% are right-censored at the cap (reported as
"> 25,000"; medians by :func:`~icml26.eval.tasks.r2g.censored_median`). The alpha selection
(:func:`select_alpha`) and the grokking-fraction runs are optional studies (``R2GSettings(select=True,
fraction_seeds=5)``) that do not fit that sitting. The p = 31 setting of the previous version stays
available as ``task="p31"`` (:func:`run_p31`, at the end of this module).
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from icml26.errors import input_error
from icml26.eval.parallel import CHECKPOINT_SUFFIX, map_jobs, map_saved_jobs
from icml26.registry import experiment

TARGET = 0.95
#: Grokfast's README: steps to 95% validation accuracy (EMA filter; unfiltered baseline).
GROKFAST_EMA_STEPS, GROKFAST_BASELINE_STEPS = 910, 39_890
#: Grokfast's own code rerun on this CPU at seeds 0, 1, 2: 910, 1370, 920 steps (median 920).
CALIBRATION_STEPS = 920
#: Calibration bands: the median over seeds 0-2 within 30% of 920, each seed within 60%.
MEDIAN_BAND, SEED_BAND = 0.3, 0.6
BUDGET = 1500  # quick: steps per arm; above every seed's band (920 x 1.6 = 1472)
CAP = 25_000  # full: steps per run (the cap; Grokfast's baseline needs 39,890)
#: The order full-mode runs start in: the longest expected first, so two processes finish together.
LONGEST_FIRST = ("baseline", "R2G-angular", "R2G + Grokfast", "R2G", "Grokfast-EMA")
GROKFAST = {"alpha": 0.98, "lamb": 2.0}
GROKFAST_WD = 0.005

ALPHA_GRID = {"euclidean": (0.01, 0.1, 1.0, 3.0, 10.0, 30.0, 100.0, 1000.0),
              "angular": (0.01, 0.1, 1.0, 10.0, 100.0, 300.0, 1000.0)}
SELECTION_FRACTION, SELECTION_STEPS, SELECTION_SEED = 0.1, 1000, 0
#: The alphas :func:`select_alpha` chose (reproduce with
#: ``python -c "from icml26.eval.experiments.r2g import select_alpha; print(select_alpha())"``, about 25 min on
#: 2 cores). Selection accuracy after 1008 steps (Adam without decay: 0.103), no run reaching 95%:
#: Euclidean 0.01 / 0.1 / 1 / 3 / 10 / 30 / 100 / 1000 -> 0.099 / 0.079 / 0.084 / 0.264 / 0.255 / 0.253 / 0.204 /
#: 0.131; angular 0.01 / 0.1 / 1 / 10 / 100 / 300 / 1000 -> 0.103 / 0.101 / 0.159 / 0.238 / 0.313 / 0.322 / 0.296.
SELECTED_ALPHA = {"euclidean": 3.0, "angular": 300.0}

COLORS = {"baseline": "tab:gray", "R2G": "tab:red", "R2G-angular": "tab:purple", "Grokfast-EMA": "tab:blue",
          "R2G + Grokfast": "tab:orange"}


def arm_settings(arm: str, alphas: dict[str, float]) -> dict[str, Any]:
    """Keyword arguments of :func:`~icml26.training.r2g.train_anchor` for ``arm``."""
    euclidean = {"alpha": alphas["euclidean"], "distance": "euclidean", "reduction": "mean"}
    angular = {"alpha": alphas["angular"], "distance": "angular", "reduction": "mean"}
    arms = {
        "baseline": {"weight_decay": 0.0},
        "R2G": {"weight_decay": 0.0, "r2g": euclidean},
        "R2G-angular": {"weight_decay": 0.0, "r2g": angular},
        "Grokfast-EMA": {"weight_decay": GROKFAST_WD, "grokfast": GROKFAST},
        "R2G + Grokfast": {"weight_decay": GROKFAST_WD, "grokfast": GROKFAST, "r2g": euclidean},
    }
    if arm not in arms:
        raise input_error("arm_settings", "arm", f"one of {list(arms)}", arm)
    return arms[arm]

P31_P, P31_TRAIN_FRACTION, P31_FULL_STEPS = 31, 0.5, 20_000


@dataclass(frozen=True)
class P31Settings:
    """Sizes of one mode. ``steps``: optimizer steps per arm; ``budget``: the step the claims are read
    at (at most ``steps``); ``early_stop``: an arm stops once past ``budget`` and at 95% test accuracy."""

    steps: int
    budget: int
    arms: tuple[str, ...]
    eval_every: int
    early_stop: bool


P31_ARMS = {
    "cross-entropy": {},
    "R2G": {"r2g": {"alpha": 0.08, "distance": "euclidean", "reduction": "mean"}},
    "Grokfast-EMA": {"grokfast": {"alpha": 0.98, "lamb": 2.0}},
    "R2G-angular": {"r2g": {"alpha": 0.08, "distance": "angular", "reduction": "mean"}},
}
P31_COLORS = {"cross-entropy": "tab:gray", "R2G": "tab:red", "Grokfast-EMA": "tab:blue", "R2G-angular": "tab:purple"}
P31_SETTINGS = {
    "quick": P31Settings(steps=BUDGET, budget=BUDGET, arms=("cross-entropy", "R2G", "Grokfast-EMA"), eval_every=50,
                         early_stop=False),
    "full": P31Settings(steps=P31_FULL_STEPS, budget=BUDGET, arms=tuple(P31_ARMS), eval_every=100, early_stop=True),
}


@dataclass(frozen=True)
class R2GSettings:
    """Sizes of one mode.

    ``arms``: the arms run at every seed; ``side_arms``: those run at the first seed only (reported, not
    claimed); ``task``: ``"anchor"`` (Grokfast's task) or ``"p31"`` (the secondary setting, sized by
    ``p31``); ``p``, ``op``: the anchor task; ``steps``: steps per arm (quick: the budget the claims are
    read at; full: the cap); ``stop_at_target``: an arm stops at 95% test accuracy; ``processes``: CPU
    processes at a time (None: one more than the cores); ``compile``: train through ``torch.compile``
    (:func:`~icml26.training.r2g.train_anchor`); ``select``: rerun the
    alpha selection (else :data:`SELECTED_ALPHA`); ``selection_grid``, ``selection_steps``: its size;
    ``fraction_seeds``, ``fraction``, ``fraction_steps``: the grokking-fraction runs (0 seeds: none);
    ``geometry_every``: epochs between geometry measurements.
    """

    arms: tuple[str, ...]
    steps: int
    side_arms: tuple[str, ...] = ()
    task: str = "anchor"
    p: int = 97
    op: str = "mul"
    stop_at_target: bool = True
    select: bool = False
    selection_grid: tuple[tuple[str, tuple[float, ...]], ...] = tuple(ALPHA_GRID.items())
    selection_steps: int = SELECTION_STEPS
    fraction_seeds: int = 0
    fraction: float = 0.3
    fraction_steps: int = 50_000
    geometry_every: int = 10
    processes: int | None = None
    compile: bool = False
    p31: P31Settings | None = None


SETTINGS = {
    "quick": R2GSettings(arms=("Grokfast-EMA", "baseline", "R2G"), steps=BUDGET, p31=P31_SETTINGS["quick"]),
    "full": R2GSettings(arms=("baseline", "R2G"), side_arms=("R2G-angular", "Grokfast-EMA"), steps=CAP,
                        processes=2, compile=True, p31=P31_SETTINGS["full"]),
}


# -- one training run (a worker process) -------------------------------------------------------
def _train(job: dict) -> dict:
    """Train one arm at one seed; write the result to ``job["path"]`` (when given) and return it."""
    import torch

    from icml26.eval.tasks.r2g import anchor_dataset, anchor_decoder
    from icml26.training.r2g.loops import train_anchor

    if job["device"] == "cpu":
        torch.set_num_threads(1)
    data = anchor_dataset(job["p"], job["op"], job["fraction"], seed=job["seed"],
                          selection_fraction=SELECTION_FRACTION if job["selection"] else 0.0)
    if job["selection"]:
        data = data.for_selection()
    model = anchor_decoder(job["p"], job["op"], seed=job["seed"])
    path = Path(job["path"]) if job.get("path") else None
    # A long run checkpoints as it goes, so a killed full-mode run resumes inside its runs too.
    checkpoint = path.with_suffix(CHECKPOINT_SUFFIX) if path is not None else None
    history = train_anchor(model, data, steps=job["steps"], target=TARGET, stop_at_target=job["stop"],
                           geometry_every=job["geometry_every"], seed=job["seed"], device=job["device"],
                           phase_name=job["name"], checkpoint=checkpoint, checkpoint_every=100,
                           compile=job.get("compile", False), **job["train"])
    return {"name": job["name"], "arm": job["arm"], "seed": job["seed"], "train": job["train"],
            "history": history.to_dict()}


def _job_key(job: dict) -> Any:
    """What decides a run's result (all but its name, file, device and kernels), as JSON would return it."""
    return json.loads(json.dumps({k: v for k, v in job.items() if k not in ("name", "path", "device", "compile")}))


def run_jobs(jobs: list[dict], device, folder: Path | None = None, phase_name: str = "runs",
             processes: int | None = None) -> dict[str, dict]:
    """Each job's result by name: loaded from ``folder/<name>.json`` when a previous run wrote it
    (the same settings, checked), else trained (in parallel on CPU, ``processes`` at a time, in the
    order given) and written there."""
    from icml26.training.r2g.loops import AnchorHistory

    done = map_saved_jobs(_train, jobs, device, folder, settings_of=_job_key, phase_name=phase_name,
                          processes=processes)
    return {name: {**out, "history": AnchorHistory.from_dict(out["history"])} for name, out in done.items()}


def _job(name: str, arm: str, seed: int, train: dict, s: R2GSettings, device, *, steps: int | None = None,
         fraction: float = 0.5, selection: bool = False) -> dict:
    return {"name": name, "arm": arm, "seed": seed, "train": train, "p": s.p, "op": s.op, "fraction": fraction,
            "selection": selection, "steps": steps or s.steps, "stop": s.stop_at_target,
            "geometry_every": s.geometry_every, "compile": s.compile, "device": str(device)}


def select_alpha(settings: R2GSettings | None = None, device: str = "cpu", folder: Path | None = None
                 ) -> tuple[dict[str, float], list[dict]]:
    """Choose R2G's alpha per distance on the selection split (training pairs only).

    The R2G arm (Adam, no decay, plus ``alpha / D``) trains on the training pairs minus
    :data:`SELECTION_FRACTION` of them at seed :data:`SELECTION_SEED` for ``selection_steps`` steps,
    per alpha of the grid, and "test" accuracy is read on the held-out training pairs. Returns the
    chosen alpha per distance and one row per run.
    """
    import torch

    s = settings or SETTINGS["full"]
    device = torch.device(device)
    jobs = [_job(f"select-{distance}-{alpha:g}", "R2G", SELECTION_SEED,
                 {"weight_decay": 0.0, "r2g": {"alpha": alpha, "distance": distance, "reduction": "mean"}},
                 s, device, steps=s.selection_steps, selection=True)
            for distance, grid in s.selection_grid for alpha in grid]
    results = run_jobs(jobs, device, folder, phase_name="alpha selection")
    chosen, rows = {}, []
    for distance, grid in s.selection_grid:
        runs = {alpha: results[f"select-{distance}-{alpha:g}"]["history"] for alpha in grid}
        # Higher is better: reaching 95% (sooner better), then the last selection accuracy.
        chosen[distance] = max(grid, key=lambda a: (runs[a].steps_to_target is not None,
                                                    -(runs[a].steps_to_target or 0), runs[a].test_acc[-1]))
        rows += [{"distance": distance, "alpha": a, "selection_steps_to_95": h.steps_to_target,
                  "selection_acc_last": h.test_acc[-1], "steps_trained": h.step[-1], "chosen": a == chosen[distance]}
                 for a, h in runs.items()]
    return chosen, rows


# -- summaries, claims, figures ---------------------------------------------------------------
def _reported(h, cap: int) -> str:
    """Steps to 95% as the tables show them: ``"10,950"``, or ``"> 25,000"`` for a run censored at the cap."""
    return f"{h.steps_to_target:,}" if h.steps_to_target is not None else f"> {max(cap, h.step[-1]):,}"


def _arm_row(arm: str, seed: int, h, budget: int) -> dict[str, Any]:
    return {"arm": arm, "seed": seed, "steps_to_95": _reported(h, budget), "steps_trained": h.step[-1],
            "test_acc_budget": h.at("test_acc", budget), "train_acc_budget": h.at("train_acc", budget),
            "gap_budget": h.at("train_acc", budget) - h.at("test_acc", budget),
            "angular_dist_end": h.angular_dist[-1], "v_norm_end": h.v_norm[-1],
            "angular_dist_start": h.angular_dist[0], "v_norm_start": h.v_norm[0],
            "seconds_per_step": h.seconds_per_step}


def _figures(results: dict[str, dict[int, Any]], cap: int):
    """Test accuracy vs steps for every arm and seed (line style per seed, the cap marked), steps to 95%
    per run, and the operand geometry."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    acc, ax = plt.subplots(figsize=(8, 4.6))
    styles = ("-", "--", ":", "-.")
    for arm, runs in results.items():
        for seed, h in sorted(runs.items()):
            ax.plot(h.step, h.test_acc, color=COLORS[arm], ls=styles[seed % len(styles)], lw=1.1,
                    label=f"{arm}, seed {seed} ({_reported(h, cap)} steps)")
    for x, text in ((GROKFAST_EMA_STEPS, "Grokfast README: EMA 910"), (GROKFAST_BASELINE_STEPS, "baseline 39,890"),
                    (cap, f"cap {cap:,}")):
        ax.axvline(x, color="k", lw=1.2 if x == cap else 0.6, ls="-" if x == cap else "--")
        ax.text(x, 0.5, text, rotation=90, fontsize=7, va="center", ha="right")
    ax.axhline(TARGET, color="k", lw=0.4)
    ax.set(xscale="log", xlabel="optimizer step", ylabel="test accuracy", ylim=(0, 1.02),
           xlim=(10, max(GROKFAST_BASELINE_STEPS, cap) * 1.1), title="a * b mod 97, 50% train (Grokfast's task)")
    ax.legend(fontsize=6.5, ncol=2, loc="upper left")
    bars, bx = plt.subplots(figsize=(7, 3.6))
    arms = list(results)
    for i, arm in enumerate(arms):
        for seed, h in sorted(results[arm].items()):
            y = h.steps_to_target if h.steps_to_target is not None else h.step[-1]
            bx.scatter(i + 0.08 * (seed - 1), y, color=COLORS[arm], marker="o" if h.steps_to_target else "^")
    bx.axhline(GROKFAST_EMA_STEPS, color="tab:blue", lw=0.6, ls="--")
    bx.axhline(cap, color="k", lw=1.0)
    bx.set(xticks=range(len(arms)), xticklabels=arms, yscale="log", ylabel="steps to 95% test (^: > the cap)",
           title="steps to 95% test accuracy per arm and seed")
    geo, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    for arm, runs in results.items():
        for i, (_seed, h) in enumerate(sorted(runs.items())):
            axes[0].plot(h.geo_step, h.angular_dist, color=COLORS[arm], label=arm if i == 0 else None)
            axes[1].plot(h.geo_step, h.v_norm, color=COLORS[arm])
    axes[0].set(xlabel="step", title="angular spread (mean pairwise cosine distance) of operand V")
    axes[1].set(xlabel="step", title="mean ||V|| of operands", yscale="log")
    axes[0].legend(fontsize=7)
    geo.tight_layout()
    return {"accuracy_curves": acc, "steps_to_95": bars, "angular_spread": geo}


def _band_claim(statement: str, steps: float, band: float) -> Any:
    from icml26.results import Claim

    return Claim.close(statement, steps, CALIBRATION_STEPS, rtol=band, unit="steps")


def _notes(s: R2GSettings, alphas: dict, device, extra: str = "") -> str:
    return (
        f"Grokfast's task: a {'*' if s.op == 'mul' else s.op} b mod {s.p}, 50% train split (its seeded randperm), "
        "its 2-layer width-128 4-head decoder as a GPT-2 from GPT2Config with its initial weights (422,784 "
        "parameters at p=97, as its Decoder), minibatches of 512, Adam lr 1e-3 betas (0.9, 0.98), 10-step warm-up, "
        "test accuracy after every epoch. Reconstruction: GPT-2's pre-LayerNorm blocks where Grokfast's block "
        "normalises the residual stream. Grokfast's README: 910 steps (EMA) and 39,890 (baseline); its code rerun on "
        "this CPU at seeds 0/1/2: 910/1370/920. Baseline: Adam without weight decay (Grokfast's baseline); Grokfast "
        f"arms: EMA alpha 0.98, lambda 2, coupled L2 {GROKFAST_WD}. R2G: alpha / D (mean over pairs, both layers' value "
        f"projections, operand positions 0 and 2), alpha {alphas} chosen on a selection split of the training pairs "
        f"(grid {dict(s.selection_grid)}, {s.selection_steps} steps at seed {SELECTION_SEED}). On {device}. {extra}"
    ).strip()


def _quick_seed(config, s: R2GSettings, seed: int):
    from icml26.results import Claim, Result

    device = config.torch_device()
    alphas = dict(SELECTED_ALPHA)
    jobs = [_job(f"{arm}-seed{seed}", arm, seed, arm_settings(arm, alphas), s, device) for arm in s.arms]
    out = run_jobs(jobs, device, phase_name=f"arms, seed {seed}")
    results = {arm: {seed: out[f"{arm}-seed{seed}"]["history"]} for arm in s.arms}
    budget = s.steps
    rows = [_arm_row(arm, seed, runs[seed], budget) for arm, runs in results.items()]
    row = {r["arm"]: r for r in rows}
    metrics: dict[str, Any] = {"seed": seed, "budget": budget, "alpha": alphas, "p": s.p, "op": s.op}
    for r in rows:
        for key, value in r.items():
            if key not in ("arm", "seed"):
                metrics[f"{r['arm']}/{key}"] = value
    claims = []
    if "Grokfast-EMA" in results:
        claims.append(_band_claim(
            f"Grokfast-EMA reaches 95% test accuracy within the anchor's per-seed band, 920 x (1 +- {SEED_BAND}) "
            f"steps (not reached in {budget} = inf)", results["Grokfast-EMA"][seed].steps_to_target or math.inf, SEED_BAND))
    if "R2G" in results and "baseline" in results:
        claims.append(Claim.greater(
            f"test accuracy at step {budget} (an arm at 95% stops there), R2G vs baseline (the direction only: the "
            "magnitude is the full mode's steps to 95%)", row["R2G"]["test_acc_budget"],
            row["baseline"]["test_acc_budget"]))
        claims.append(Claim.greater(
            "angular spread (mean pairwise cosine distance) of the operand value vectors at the end, R2G vs "
            "baseline", row["R2G"]["angular_dist_end"], row["baseline"]["angular_dist_end"]))
    notes = _notes(s, alphas, device, f"Quick mode: seed {seed}, {budget} steps per arm, an arm stops at 95% test "
                   "accuracy. The R2G claim compares test accuracy at the budget (the steps to 95% are in the table).")
    return Result(metrics=metrics, tables={"arms": rows}, figures=_figures(results, budget), claims=claims, notes=notes)


def _full(config, s: R2GSettings):
    from icml26.eval.tasks.r2g import censored_median
    from icml26.results import Claim, Result

    device = config.torch_device()
    folder = config.out_dir / "runs"
    tables: dict[str, list] = {}
    if s.select:
        chosen, tables["alpha selection"] = select_alpha(s, str(device), folder)
        alphas = {**SELECTED_ALPHA, **chosen}
    else:
        alphas = dict(SELECTED_ALPHA)
    seeds = list(config.seeds)
    runs_of = dict.fromkeys(s.arms, seeds) | {arm: seeds[:1] for arm in s.side_arms if arm not in s.arms}
    order = sorted(runs_of, key=lambda arm: LONGEST_FIRST.index(arm))
    jobs = [_job(f"{arm}-seed{seed}", arm, seed, arm_settings(arm, alphas), s, device)
            for arm in order for seed in runs_of[arm]]
    out = run_jobs(jobs, device, folder, phase_name="arms", processes=s.processes)
    results = {arm: {seed: out[f"{arm}-seed{seed}"]["history"] for seed in runs_of[arm]} for arm in runs_of}
    rows = [_arm_row(arm, seed, h, s.steps) for arm, runs in results.items() for seed, h in sorted(runs.items())]
    tables["arms"] = rows
    metrics: dict[str, Any] = {"seeds": seeds, "cap": s.steps, "alpha": alphas, "p": s.p, "op": s.op}
    median = {}
    for arm, runs in results.items():
        value, censored = median[arm] = censored_median([h.steps_to_target for h in runs.values()], s.steps)
        metrics[f"{arm}/median_steps_to_95"] = f"> {value:,.0f}" if censored else value
        metrics[f"{arm}/median_seconds_per_step"] = statistics.median(h.seconds_per_step for h in runs.values())
        metrics[f"{arm}/seconds"] = sum(h.seconds for h in runs.values())
    claims = []
    if "R2G" in median and "baseline" in median:
        # A censored R2G median never holds (inf); a censored baseline counts as the cap (its lower bound).
        r2g = math.inf if median["R2G"][1] else median["R2G"][0]
        claims.append(Claim.at_most(
            f"steps to 95% test accuracy, R2G vs baseline, by a factor 0.5 (median over seeds "
            f"{', '.join(map(str, seeds))}; runs capped at {s.steps:,} steps; a censored baseline median counts as "
            "the cap, a censored R2G median as inf)", r2g, median["baseline"][0], factor=0.5, unit="steps"))
    if s.fraction_seeds:
        _fraction_study(s, alphas, device, folder, tables, metrics, claims)
    beside = [arm for arm in s.side_arms if arm not in s.arms]
    notes = _notes(s, alphas, device, f"Full mode: {', '.join(s.arms)} at seeds {seeds}"
                   + (f", {', '.join(beside)} at seed {seeds[0]} (reported, not claimed)" if beside else "")
                   + f"; every run to 95% test accuracy or {s.steps:,} steps, {s.processes or 'cores + 1'} processes "
                   f"at a time{', through torch.compile' if s.compile else ''}. Runs censored at the cap show "
                   f"'> {s.steps:,}'. Results per run in {folder.name}/ (a rerun with the same --out resumes; each run "
                   "checkpoints every 1,000 steps).")
    return Result(metrics=metrics, tables=tables, figures=_figures(results, s.steps), claims=claims, notes=notes)


def _fraction_study(s: R2GSettings, alphas: dict, device, folder: Path, tables: dict, metrics: dict,
                    claims: list) -> None:
    """The optional grokking-fraction study (``fraction_seeds > 0``): adds its table, metrics and claim."""
    from icml26.results import Claim

    fraction_jobs = [_job(f"fraction{s.fraction:g}-{arm}-seed{seed}", arm, seed, arm_settings(arm, alphas), s,
                          device, steps=s.fraction_steps, fraction=s.fraction)
                     for seed in range(s.fraction_seeds) for arm in ("baseline", "R2G")]
    fr = run_jobs(fraction_jobs, device, folder, phase_name="grokking fraction", processes=s.processes)
    share = {arm: sum(fr[f"fraction{s.fraction:g}-{arm}-seed{seed}"]["history"].steps_to_target is not None
                      for seed in range(s.fraction_seeds)) / s.fraction_seeds for arm in ("baseline", "R2G")}
    tables["grokking fraction"] = [{"arm": o["arm"], "seed": o["seed"], "steps_to_95": o["history"].steps_to_target,
                                    "test_acc_last": o["history"].test_acc[-1]} for o in fr.values()]
    metrics.update({f"{arm}/grokking_fraction": v for arm, v in share.items()})
    claims.append(Claim.greater(
        f"share of {s.fraction_seeds} seeds reaching 95% test accuracy within {s.fraction_steps} steps at a "
        f"{s.fraction:.0%} data fraction, R2G vs baseline", share["R2G"], share["baseline"]))


def run_experiment(config, settings: R2GSettings | None = None):
    """The experiment with its sizes exposed (``run`` uses :data:`SETTINGS` of ``config.mode``)."""
    from icml26.results import over_seeds

    s = settings or SETTINGS[config.mode]
    if s.task == "p31":
        return run_p31(config, s.p31)
    if s.task != "anchor":
        raise input_error("run_experiment", "settings.task", "'anchor' or 'p31'", s.task)
    if config.quick:
        return over_seeds(config.seeds, lambda seed: _quick_seed(config, s, seed))
    return _full(config, s)


@experiment("r2g", title="R2G vs baseline and Grokfast-EMA on Grokfast's task (a * b mod 97)", paper="r2g")
def run(config):
    return run_experiment(config)


# ----------------------------------------------------------------------------------------------
# The secondary setting (``task="p31"``): a + b mod 31, cross-entropy vs R2G vs Grokfast-EMA at equal steps.
# At this size no arm groks within its budget: the main setting is Grokfast's task. Setup: half of the 961
# pairs for training (seeded split), the 1-layer d=64 decoder of :func:`icml26.eval.tasks.r2g.small_decoder`,
# full-batch AdamW (lr 1e-3, weight decay 1, betas 0.9/0.98) in :func:`icml26.training.r2g.train_grokking`, one
# process per arm. Quick: 1500 steps, 1 seed; full: up to 20k steps per arm, 3 seeds, an arm stopping once past
# the 1500-step budget and at 95% test accuracy. Reconstruction: a scaled-down comparison at equal steps on a
# small prime, read before any arm has grokked (the paper reports the share of seeds that grok at P=500).
# ----------------------------------------------------------------------------------------------


def _p31_train_arm(job: tuple) -> tuple[str, int, dict]:
    arm, seed, steps, stop_at, min_steps, device, eval_every = job
    import torch

    if str(device) == "cpu":
        torch.set_num_threads(1)  # one process per arm: threads would only fight over the cores
    from icml26.eval.tasks.r2g import modular_dataset, small_decoder
    from icml26.training.r2g.loops import train_grokking

    data = modular_dataset(P31_P, "add", P31_TRAIN_FRACTION, seed=seed)
    model = small_decoder(P31_P, seed=seed)
    history = train_grokking(model, data, steps=steps, eval_every=eval_every, stop_at=stop_at,
                             min_steps=min_steps, seed=seed, device=device, phase_name=f"{arm}, seed {seed}",
                             **P31_ARMS[arm])
    return arm, seed, history



def _p31_figures(results: dict, arms: list[str]):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    acc, ax = plt.subplots(figsize=(7, 4))
    for arm in arms:
        for i, (_seed, h) in enumerate(sorted(results[arm].items())):
            ax.plot(h.step, h.test_acc, color=P31_COLORS[arm], label=f"{arm} test" if i == 0 else None)
            ax.plot(h.step, h.train_acc, color=P31_COLORS[arm], ls=":", alpha=0.6,
                    label=f"{arm} train" if i == 0 else None)
    ax.axhline(TARGET, color="k", lw=0.5)
    ax.set(xlabel="step", ylabel="accuracy", title=f"a + b mod {P31_P}, train fraction {P31_TRAIN_FRACTION}", ylim=(0, 1.02))
    ax.legend(fontsize=7, ncol=2)
    geo, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for arm in arms:
        for i, (_seed, h) in enumerate(sorted(results[arm].items())):
            for a, key in zip(axes, ("angular_dist", "v_norm", "fourier_gini")):
                a.plot(h.step, getattr(h, key), color=P31_COLORS[arm], label=arm if i == 0 else None)
    for a, title in zip(axes, ("mean pairwise cosine distance of operand V", "mean ||V|| of operands",
                               "Fourier Gini of token embeddings")):
        a.set(xlabel="step", title=title)
    axes[0].legend(fontsize=7)
    geo.tight_layout()
    return {"accuracy_curves": acc, "geometry": geo}


def run_p31(config, settings: P31Settings | None = None):
    """The experiment with its sizes exposed (``run`` uses :data:`P31_SETTINGS` of ``config.mode``)."""
    from icml26.eval.tasks.r2g import steps_to
    from icml26.results import Claim, Result, to_jsonable

    s = settings or P31_SETTINGS[config.mode]
    full = not config.quick
    steps, budget, arms, eval_every = s.steps, min(s.budget, s.steps), list(s.arms), s.eval_every
    device = config.torch_device()
    jobs = [(arm, seed, steps, TARGET if s.early_stop else None, budget, str(device), eval_every)
            for seed in config.seeds for arm in arms]
    results: dict[str, dict[int, Any]] = {arm: {} for arm in arms}
    for arm, seed, history in map_jobs(_p31_train_arm, jobs, device, phase_name="arms"):
        results[arm][seed] = history

    rows, summary = [], {}
    for arm in arms:
        per_seed = {}
        for seed, h in sorted(results[arm].items()):
            reached = steps_to(h.step, h.test_acc, TARGET)
            per_seed[seed] = {
                "test_acc_budget": h.at("test_acc", budget), "train_acc_budget": h.at("train_acc", budget),
                "angular_dist_budget": h.at("angular_dist", budget), "v_norm_budget": h.at("v_norm", budget),
                "fourier_gini_budget": h.at("fourier_gini", budget), "r2g_term_budget": h.at("r2g_term", budget),
                "test_acc_final": h.test_acc[-1],
                "steps_trained": h.step[-1], "steps_to_95": math.inf if reached is None else reached,
                "seconds": h.seconds}
            rows.append({"arm": arm, "seed": seed, **{k: (None if v == math.inf else v)
                                                       for k, v in per_seed[seed].items()}})
        summary[arm] = {key: statistics.median([r[key] for r in per_seed.values()])
                        for key in next(iter(per_seed.values())) if key != "seconds"}

    metrics = {"steps": steps, "budget": budget, "seeds": list(config.seeds), "p": P31_P, "train_fraction": P31_TRAIN_FRACTION}
    for arm in arms:
        for key, value in summary[arm].items():
            metrics[f"{arm}/{key}"] = None if value == math.inf else value
    curves = {arm: {str(seed): h.curves() for seed, h in results[arm].items()}
              for arm in arms}
    config.out_dir.mkdir(parents=True, exist_ok=True)
    (config.out_dir / "curves.json").write_text(json.dumps(to_jsonable(curves)))  # NaN -> null
    metrics["curves_file"] = "curves.json"
    ce, r2g = summary["cross-entropy"], summary["R2G"]
    what = "median over seeds" if len(config.seeds) > 1 else f"seed {config.seeds[0]}"
    claims = [
        Claim.greater(f"test accuracy at step {budget}, R2G vs cross-entropy ({what})",
                      r2g["test_acc_budget"], ce["test_acc_budget"]),
        Claim.greater(f"mean angular (cosine) distance of the operand V vectors at step {budget}, "
                      f"R2G vs cross-entropy ({what})", r2g["angular_dist_budget"], ce["angular_dist_budget"]),
    ]
    if full:
        claims.append(Claim.less(f"steps to {TARGET:.0%} test accuracy, R2G vs cross-entropy ({what}; "
                                 f"not reached in {steps} = inf)", r2g["steps_to_95"], ce["steps_to_95"], unit="steps"))
        if "Grokfast-EMA" in summary:
            gf = summary["Grokfast-EMA"]["steps_to_95"]
            metrics["steps_to_95_ratio_R2G_over_Grokfast"] = (
                r2g["steps_to_95"] / gf if math.isfinite(gf) and math.isfinite(r2g["steps_to_95"]) else None)

    notes = (
        f"{'Full' if full else 'Quick'} mode: {steps} full-batch AdamW steps per arm (lr 1e-3, weight decay 1, "
        f"betas 0.9/0.98), seeds {list(config.seeds)}, on {device}"
        f"{'; an arm stops once past step ' + str(budget) + ' and at 95% test accuracy' if s.early_stop else ''}. "
        "Model: a 1-layer GPT-2 from GPT2Config (d=64, 4 heads, d_mlp=256, ReLU) without LayerNorm, embeddings "
        "N(0, 1/sqrt(d)), linear layers at PyTorch's default U(+-1/sqrt(fan_in)) (Nanda-style). R2G hooks the value "
        "third of the fused c_attn at the two operand positions; r2g_term is the 1/D each arm would pay (logged for "
        "every arm). R2G: alpha=0.08 (the paper's P=113 addition value), mean over pairs instead of the code's sum "
        "(a sum over a full batch of ~480 makes 1/D ~480x smaller than over the code's batch of 8), pairs along a "
        "random cycle. Grokfast-EMA: its paper's alpha 0.98, lambda 2, on the same AdamW (its paper: Adam, weight "
        "decay 0.005). Not reproduced at this scale: the paper's headline metric (share of seeds that grok, P=500). "
        f"Claims 1-2 are read at step {budget}, before any arm has grokked, on a plateau whose level varies with the "
        f"seed. Operand V norm at step {budget}: R2G {r2g['v_norm_budget']:.1f}, cross-entropy "
        f"{ce['v_norm_budget']:.1f} (Euclidean R2G can lower 1/D by inflating ||V||; the angular panel is blind to it)."
    )
    if full:
        unreached = [arm for arm in arms if not math.isfinite(summary[arm]["steps_to_95"])]
        if unreached:
            notes += (f" Not at {TARGET:.0%} test accuracy within {steps} steps (final test accuracy): "
                      + ", ".join(f"{arm} {summary[arm]['test_acc_final']:.3f}" for arm in unreached) + ".")
    return Result(metrics=metrics, tables={"arms": rows}, figures=_p31_figures(results, arms), claims=claims,
                  notes=notes)
