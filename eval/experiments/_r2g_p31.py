"""The secondary setting of experiment ``r2g``: a + b mod 31, cross-entropy vs R2G vs Grokfast-EMA at equal steps.

Run it with ``run_p31(config, P31_SETTINGS[mode])`` or through the experiment with
``dataclasses.replace(SETTINGS[mode], task="p31")`` (:mod:`icml26.eval.experiments.r2g`). At this size no
arm groks within its budget: the main setting is Grokfast's task.

The paper (R2G, ICLR 2026 submission #10469, OpenReview ``yiSic9R2r8``, its modular-addition
experiments) reports the share of seeds that grok at P=500; Grokfast (arXiv 2405.20233) is the
gradient-filter baseline its reviewers asked for. Reconstruction: a scaled-down comparison at equal
steps on a small prime, read before any arm has grokked.

Setup: ``a + b mod 31``, half of the 961 pairs for training (seeded split), the 1-layer d=64
GPT-2-style decoder of :func:`icml26.eval.tasks.r2g.modular.small_decoder`, full-batch AdamW (lr 1e-3,
weight decay 1, betas 0.9/0.98). Arms: plain cross-entropy, R2G (Euclidean, mean over pairs,
alpha 0.08, operand positions), Grokfast-EMA (alpha 0.98, lambda 2, same AdamW) and, in full mode,
the angular R2G. The arms train in :func:`~icml26.training.r2g.train_grokking` (a full-batch loop
around the same ``R2GLoss`` the trainers use), one process per arm on CPU.

Quick mode: 1500 steps, 1 seed (about a minute on 2 cores). Full mode: up to 20k steps per arm,
3 seeds, stopping an arm once it is past the 1500-step budget and at 95% test accuracy. Sizes live
in :data:`P31_SETTINGS` (tests shrink them with ``dataclasses.replace``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from icml26.eval.parallel import map_jobs

P, TRAIN_FRACTION, BUDGET, FULL_STEPS, TARGET = 31, 0.5, 1500, 20_000, 0.95


@dataclass(frozen=True)
class P31Settings:
    """Sizes of one mode. ``steps``: optimizer steps per arm; ``budget``: the step the claims are read
    at (at most ``steps``); ``early_stop``: an arm stops once past ``budget`` and at 95% test accuracy."""

    steps: int
    budget: int
    arms: tuple[str, ...]
    eval_every: int
    early_stop: bool


ARMS = {
    "cross-entropy": {},
    "R2G": {"r2g": {"alpha": 0.08, "distance": "euclidean", "reduction": "mean"}},
    "Grokfast-EMA": {"grokfast": {"alpha": 0.98, "lamb": 2.0}},
    "R2G-angular": {"r2g": {"alpha": 0.08, "distance": "angular", "reduction": "mean"}},
}
COLORS = {"cross-entropy": "tab:gray", "R2G": "tab:red", "Grokfast-EMA": "tab:blue", "R2G-angular": "tab:purple"}
P31_SETTINGS = {
    "quick": P31Settings(steps=BUDGET, budget=BUDGET, arms=("cross-entropy", "R2G", "Grokfast-EMA"), eval_every=50,
                         early_stop=False),
    "full": P31Settings(steps=FULL_STEPS, budget=BUDGET, arms=tuple(ARMS), eval_every=100, early_stop=True),
}


def _train_arm(job: tuple) -> tuple[str, int, dict]:
    arm, seed, steps, stop_at, min_steps, device, eval_every = job
    import torch

    if str(device) == "cpu":
        torch.set_num_threads(1)  # one process per arm: threads would only fight over the cores
    from icml26.eval.tasks.r2g import modular_dataset, small_decoder
    from icml26.training.r2g.loops import train_grokking

    data = modular_dataset(P, "add", TRAIN_FRACTION, seed=seed)
    model = small_decoder(P, seed=seed)
    history = train_grokking(model, data, steps=steps, eval_every=eval_every, stop_at=stop_at,
                             min_steps=min_steps, seed=seed, device=device, phase_name=f"{arm}, seed {seed}",
                             **ARMS[arm])
    return arm, seed, history


def _median(values):
    import statistics

    return statistics.median(values)


def _figures(results: dict, arms: list[str]):
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    acc, ax = plt.subplots(figsize=(7, 4))
    for arm in arms:
        for i, (seed, h) in enumerate(sorted(results[arm].items())):
            ax.plot(h.step, h.test_acc, color=COLORS[arm], label=f"{arm} test" if i == 0 else None)
            ax.plot(h.step, h.train_acc, color=COLORS[arm], ls=":", alpha=0.6,
                    label=f"{arm} train" if i == 0 else None)
    ax.axhline(TARGET, color="k", lw=0.5)
    ax.set(xlabel="step", ylabel="accuracy", title=f"a + b mod {P}, train fraction {TRAIN_FRACTION}", ylim=(0, 1.02))
    ax.legend(fontsize=7, ncol=2)
    geo, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    for arm in arms:
        for i, (seed, h) in enumerate(sorted(results[arm].items())):
            for a, key in zip(axes, ("angular_dist", "v_norm", "fourier_gini")):
                a.plot(h.step, getattr(h, key), color=COLORS[arm], label=arm if i == 0 else None)
    for a, title in zip(axes, ("mean pairwise cosine distance of operand V", "mean ||V|| of operands",
                               "Fourier Gini of token embeddings")):
        a.set(xlabel="step", title=title)
    axes[0].legend(fontsize=7)
    geo.tight_layout()
    return {"accuracy_curves": acc, "geometry": geo}


def run_p31(config, settings: P31Settings | None = None):
    """The experiment with its sizes exposed (``run`` uses :data:`P31_SETTINGS` of ``config.mode``)."""
    import json
    import math

    from icml26.eval.tasks.r2g import steps_to
    from icml26.results import Claim, Result, to_jsonable

    s = settings or P31_SETTINGS[config.mode]
    full = not config.quick
    steps, budget, arms, eval_every = s.steps, min(s.budget, s.steps), list(s.arms), s.eval_every
    device = config.torch_device()
    jobs = [(arm, seed, steps, TARGET if s.early_stop else None, budget, str(device), eval_every)
            for seed in config.seeds for arm in arms]
    results: dict[str, dict[int, Any]] = {arm: {} for arm in arms}
    for arm, seed, history in map_jobs(_train_arm, jobs, device, phase_name="arms"):
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
        summary[arm] = {key: _median([r[key] for r in per_seed.values()])
                        for key in next(iter(per_seed.values())) if key != "seconds"}

    metrics = {"steps": steps, "budget": budget, "seeds": list(config.seeds), "p": P, "train_fraction": TRAIN_FRACTION}
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
        f"Claims 1-2 are read at step {budget}, before any arm has grokked: test accuracy there sits on an early "
        "plateau whose level varies strongly with the seed and the initialisation scale, so a one-seed verdict on "
        "claim 1 is weak evidence either way (--full: 3 seeds, medians). Euclidean R2G can lower 1/D by inflating "
        f"||V||: at step {budget} the operand V norm is {r2g['v_norm_budget']:.1f} with R2G vs "
        f"{ce['v_norm_budget']:.1f} with cross-entropy, so the angular panel (cosine distance, blind to norms) is "
        "the one that tests the 'angle, not radius' reading."
    )
    if full:
        unreached = [arm for arm in arms if not math.isfinite(summary[arm]["steps_to_95"])]
        if unreached:
            notes += (f" Arms that did not reach {TARGET:.0%} test accuracy within {steps} steps: "
                      f"{', '.join(unreached)}; their final test accuracies: "
                      + ", ".join(f"{arm} {summary[arm]['test_acc_final']:.3f}" for arm in unreached)
                      + ". At p=31 (480 training pairs) this decoder memorises fast and generalises slowly; "
                      "the paper's grokking speed-up is a claim about runs that do grok.")
    return Result(metrics=metrics, tables={"arms": rows}, figures=_figures(results, arms), claims=claims,
                  notes=notes)
