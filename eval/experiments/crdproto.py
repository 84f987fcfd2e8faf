"""CRDProto (ICML 2026, "Rank-guided Diffusion for Noise Few-Shot Learning"; reconstructed): do rank anomalies find
the noisy shots of a few-shot support set, and do rank-guided replacements give better prototypes than the mean?

Setting (the issue's; the paper's data and code are not available): scikit-learn's digits, l2-normalised pixels as
features; base classes 0-4 train the feature prior and choose ``lam`` and the guidance scale on noisy base episodes;
novel classes 5-9 give 5-way 5-shot episodes with 15 queries, their support sets noised by the TraNFS protocol
(:mod:`icml26.eval.tasks.crdproto`). Arms on the same episodes: ProtoNet's mean, the median prototype (TraNFS),
filter-only (flag and drop), CRD (flag and replace by guided samples), CRD with ``s = 0`` (unguided samples), the
per-class sparse-energy score, and the oracle (the true clean shots).

Claims, at 40% symmetric swap (paired over episodes; several seeds: medians):

1. CRD's accuracy is above the mean prototype's and above the median prototype's, each with the lower end of the
   paired 95% interval above 0 (the paper: errors "significantly" reduced with up to 40% noise).
2. Detection: the relative rank score's AUROC for the noisy shots is above a rank-free detector's (1 - cosine to the
   leave-one-out class mean) on the same rows; the noise mask is used only to score.
3. Guidance: guided replacements are closer (cosine) to their class's true mean (all its images) than unguided ones
   drawn with the same noise, for most flagged rows: one-sided sign test p < 0.01.

Reported: CRD minus filter-only, the unguided and per-class-score arms, the cost at 0% noise; full mode adds the
swapped split (base 5-9, novel 0-4), 20% noise, pair swap and outliers (base-class digits), with 600 episodes.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any

from icml26.registry import experiment
from icml26.results import Claim, Result
from icml26.utils import inner_seed

ARMS = ("mean", "median", "filter-only", "CRD", "CRD (s = 0)", "CRD (sparse-energy score)", "oracle")
SPLITS = {"base 0-4": (0, 1, 2, 3, 4), "base 5-9": (5, 6, 7, 8, 9)}


@dataclass(frozen=True)
class CRDProtoSettings:
    """Sizes of one mode.

    ``episodes`` novel episodes per condition, in ``jobs`` parallel chunks; ``conditions`` the ``(kind, fraction)``
    noise settings (the first is the claims'); ``splits`` the base-class sets; ``prior_steps`` of the feature DDPM;
    ``select_episodes`` base episodes per ``(lam, s)`` of ``lams`` x ``scales``.
    """

    episodes: int = 200
    jobs: int = 2
    conditions: tuple[tuple[str, float], ...] = (("sym_swap", 0.4), ("sym_swap", 0.0))
    splits: tuple[str, ...] = ("base 0-4",)
    prior_steps: int = 1500
    select_episodes: int = 20
    lams: tuple[float | None, ...] = (None, 1.0)
    scales: tuple[float, ...] = (30.0, 100.0, 300.0)


SETTINGS = {"quick": CRDProtoSettings()}
SETTINGS["full"] = dataclasses.replace(
    SETTINGS["quick"], episodes=600, jobs=4, splits=tuple(SPLITS), select_episodes=40,
    conditions=(("sym_swap", 0.4), ("sym_swap", 0.0), ("sym_swap", 0.2), ("pair_swap", 0.4), ("pair_swap", 0.2),
                ("outlier", 0.4), ("outlier", 0.2)))


def _digits():
    import numpy as np
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    return X / np.linalg.norm(X, axis=1, keepdims=True), y


# ----------------------------------------------------------------------------------------------
# jobs
# ----------------------------------------------------------------------------------------------
def _episodes_job(job) -> dict[str, Any]:
    """One chunk of episodes of one noise condition: per episode, each arm's query accuracy; per support row, the
    scores and the noise mask; per flagged row, the guided and unguided replacements' cosines to the true mean."""
    import numpy as np
    import torch

    from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise
    from icml26.models.crdproto import (
        FeatureDiffusionConfig,
        FeatureDiffusionModel,
        MeanPrototypes,
        MedianPrototypes,
        OraclePrototypes,
        RankGuidedPrototypes,
    )

    split, (kind, fraction), chunk, n_episodes, state, chosen, seed = job
    X, y = _digits()
    base = np.isin(y, SPLITS[split])
    Z = torch.as_tensor(X, dtype=torch.float32)
    prior = FeatureDiffusionModel(FeatureDiffusionConfig(feature_dim=X.shape[1]))
    prior.load_state_dict(state)
    prior.eval()
    sampler = EpisodeSampler(y, 5, 5, 15, seed=inner_seed(seed, 10, chunk),
                             classes=[c for c in range(10) if c not in SPLITS[split]])
    noise = SupportNoise(kind, fraction, seed=inner_seed(seed, 11, chunk))
    true_means = {c: torch.nn.functional.normalize(Z[y == c].mean(0), dim=0) for c in np.unique(y)}
    lam, scale = chosen
    out: dict[str, Any] = {"accuracy": {a: [] for a in ARMS}, "relative": [], "rank_free": [], "mask": [],
                           "guided_cos": [], "unguided_cos": []}
    for i in range(n_episodes):
        ep = noise(sampler.sample(), y, outliers=np.flatnonzero(base))
        S, labels = Z[ep.support.reshape(-1)], torch.as_tensor(ep.support_labels.reshape(-1))
        Q = Z[ep.query.reshape(-1)]
        truth = torch.arange(5).repeat_interleave(ep.query.shape[1])
        mask = torch.as_tensor(ep.mask.reshape(-1))
        sampler_seed = inner_seed(seed, 12, chunk, i, bits=31)
        models = {"mean": MeanPrototypes(), "median": MedianPrototypes(),
                  "filter-only": RankGuidedPrototypes(None, lam=lam),
                  "CRD": RankGuidedPrototypes(prior, lam=lam, guidance_scale=scale, seed=sampler_seed),
                  "CRD (s = 0)": RankGuidedPrototypes(prior, lam=lam, guidance_scale=0.0, seed=sampler_seed),
                  "CRD (sparse-energy score)": RankGuidedPrototypes(prior, lam=lam, score="sparse_energy",
                                                                    guidance_scale=scale, seed=sampler_seed),
                  "oracle": OraclePrototypes()}
        for arm, model in models.items():
            if arm == "oracle":
                model.process_support_set(S, labels, mask)
            else:
                model.process_support_set(S, labels)
            with torch.no_grad():
                out["accuracy"][arm].append(float((model(Q).argmax(1) == truth).float().mean()))
        out["relative"] += models["CRD"].last_repair.scores.tolist()   # the relative score CRD flagged by
        for r in range(len(labels)):
            others = (labels == labels[r]).clone()
            others[r] = False
            out["rank_free"].append(1 - float(torch.nn.functional.cosine_similarity(S[r], S[others].mean(0), dim=0)))
        out["mask"] += mask.tolist()
        guided, unguided = models["CRD"].last_repair, models["CRD (s = 0)"].last_repair
        for r in torch.nonzero(guided.flagged).flatten().tolist():
            target = true_means[int(ep.classes[int(labels[r])])]
            out["guided_cos"].append(float(torch.nn.functional.cosine_similarity(guided.features[r], target, dim=0)))
            out["unguided_cos"].append(float(torch.nn.functional.cosine_similarity(unguided.features[r], target,
                                                                                   dim=0)))
    return out


def _prior_job(job) -> dict[str, Any]:
    """The feature prior on the base classes, and the choice of ``lam`` and ``s`` on noisy base episodes."""
    import numpy as np

    from icml26.training.crdproto import fit_feature_prior, select_hyperparameters

    split, s, seed = job
    X, y = _digits()
    base = np.flatnonzero(np.isin(y, SPLITS[split]))
    prior, fit = fit_feature_prior(X[base], y[base], steps=s.prior_steps, seed=inner_seed(seed, 1, bits=31))
    chosen = select_hyperparameters(X[base], y[base], prior, lams=s.lams, guidance_scales=s.scales,
                                    episodes=s.select_episodes, seed=inner_seed(seed, 2, bits=31))
    return {"state": {k: v.clone() for k, v in prior.state_dict().items()}, "selection": chosen.to_dict(),
            "seconds": fit.seconds}


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
@experiment("crdproto", title="CRDProto: rank anomalies flag noisy shots and rank-guided feature diffusion repairs "
                              "the prototypes (reconstructed)", paper="crdproto")
def run(config) -> Result:
    return run_experiment(config)


def run_experiment(config, settings: CRDProtoSettings | None = None) -> Result:
    """The experiment with its sizes exposed; several seeds decide claims on the median over seeds."""
    from icml26.results import over_seeds

    s = settings or SETTINGS[config.mode]
    return over_seeds(config.seeds, lambda seed: _run_seed(config, s, seed))


def _paired(a, b) -> dict[str, float]:
    """Mean, standard error and 95% interval of the paired differences ``a - b`` (in accuracy points)."""
    import numpy as np

    from icml26.eval.measure import paired_difference

    return paired_difference(100 * (np.asarray(a) - np.asarray(b)), 0.0)


def _merge(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"accuracy": {a: [] for a in ARMS}}
    for c in chunks:
        for a in ARMS:
            out["accuracy"][a] += c["accuracy"][a]
        for key in ("relative", "rank_free", "mask", "guided_cos", "unguided_cos"):
            out.setdefault(key, []).extend(c[key])
    return out


def _run_seed(config, s: CRDProtoSettings, seed: int) -> Result:
    import numpy as np
    import torch
    from scipy.stats import binomtest
    from sklearn.metrics import roc_auc_score

    from icml26.eval.parallel import map_jobs

    start = time.perf_counter()
    priors = map_jobs(_prior_job, [(split, s, seed) for split in s.splits], torch.device("cpu"),
                      phase_name="feature priors")
    per = -(-s.episodes // s.jobs)
    jobs = []
    for split, prior in zip(s.splits, priors):
        sel = prior["selection"]
        for cond in s.conditions:
            for chunk in range(s.jobs):
                n = min(per, s.episodes - chunk * per)
                if n > 0:
                    jobs.append((split, cond, chunk, n, prior["state"], (sel["lam"], sel["guidance_scale"]), seed))
    chunks = map_jobs(_episodes_job, jobs, torch.device("cpu"), phase_name="episodes")
    runs: dict[tuple[str, tuple[str, float]], list] = {}
    for job, chunk in zip(jobs, chunks):
        runs.setdefault((job[0], job[1]), []).append(chunk)
    merged = {key: _merge(v) for key, v in runs.items()}

    result = Result()
    m = result.metrics
    m["selection"] = {split: p["selection"] for split, p in zip(s.splits, priors)}
    rows = []
    for (split, (kind, fraction)), r in merged.items():
        acc = {a: 100 * float(np.mean(v)) for a, v in r["accuracy"].items()}
        row = {"split": split, "noise": f"{kind} {fraction:.0%}", "episodes": len(r["accuracy"]["mean"]),
               **{a: round(v, 2) for a, v in acc.items()}}
        crd = r["accuracy"]["CRD"]
        for other in ("mean", "median", "filter-only"):
            d = _paired(crd, r["accuracy"][other])
            row[f"CRD - {other} (95% CI)"] = f"{d['mean']:+.2f} ({d['lo']:+.2f}, {d['hi']:+.2f})"
        if any(r["mask"]):
            row["AUROC relative / rank-free"] = (f"{roc_auc_score(r['mask'], r['relative']):.3f} / "
                                                 f"{roc_auc_score(r['mask'], r['rank_free']):.3f}")
        rows.append(row)
        m[f"{split} / {kind} {fraction:g}"] = {"accuracy": acc}
    result.tables["query accuracy (%) per arm, paired over episodes"] = rows

    # the claims, on the first split and the first (claims') condition
    claim_key = (s.splits[0], s.conditions[0])
    kind, fraction = s.conditions[0]
    r = merged[claim_key]
    label = f"{kind.replace('_', ' ')} {fraction:.0%}, {len(r['accuracy']['mean'])} episodes"
    for other in ("mean", "median"):
        d = _paired(r["accuracy"]["CRD"], r["accuracy"][other])
        m[f"CRD_minus_{other}"] = d
        result.add_claim(Claim.greater(f"{label}: CRD's accuracy is above the {other} prototype's (measured: the "
                                       "lower end of the paired 95% interval of the difference, in points)",
                                       d["lo"], 0.0))
    auroc = {"relative": float(roc_auc_score(r["mask"], r["relative"])),
             "rank_free": float(roc_auc_score(r["mask"], r["rank_free"]))}
    m["auroc"] = auroc
    result.add_claim(Claim.greater(f"{label}: the relative rank score finds the noisy shots better (AUROC) than a "
                                   "rank-free detector (1 - cosine to the leave-one-out class mean)",
                                   auroc["relative"], auroc["rank_free"]))
    guided, unguided = np.asarray(r["guided_cos"]), np.asarray(r["unguided_cos"])
    closer = int((guided > unguided).sum())
    p = float(binomtest(closer, len(guided), 0.5, alternative="greater").pvalue) if len(guided) else 1.0
    m["guidance"] = {"flagged_rows": len(guided), "guided_closer": closer, "sign_test_p": p,
                     "guided_cos": float(guided.mean()) if len(guided) else None,
                     "unguided_cos": float(unguided.mean()) if len(guided) else None}
    result.add_claim(Claim.less(f"{label}: guided replacements are closer (cosine) to the class's true mean than "
                                f"unguided ones from the same noise ({closer} of {len(guided)} flagged rows; "
                                "measured: the one-sided sign test's p)", p, 0.01))
    m["seconds"] = time.perf_counter() - start
    result.figures = {"accuracy": _accuracy_figure(rows), "guidance": _guidance_figure(guided, unguided)}
    sel = m["selection"][s.splits[0]]
    result.notes = (
        f"Mode {config.mode}, seed {seed} (the prior's weights and batches, the base episodes of the selection, the "
        "novel episodes, the noise and the sampler noise drawn from it by SeedSequence). Digits (scikit-learn), "
        "l2-normalised pixels; 5-way 5-shot, 15 queries per class; TraNFS support noise. The feature DDPM (T = "
        f"100, linear betas) trained {s.prior_steps} steps on the base classes; lam and s chosen on "
        f"{s.select_episodes} noisy base episodes per pair: lam = {sel['lam']}, s = {sel['guidance_scale']:g}. "
        "Everything beyond the abstract is a RECONSTRUCTION (the paper's code could not be read): the Outlier "
        "Pursuit model, the relative score, the DPS guidance and the energy.")
    return result


def _accuracy_figure(rows):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 3.8), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    width = 0.8 / len(ARMS)
    for j, arm in enumerate(ARMS):
        ax.bar([i + (j - len(ARMS) / 2) * width for i in range(len(rows))], [r[arm] for r in rows], width=width,
               label=arm)
    ax.set_xticks(range(len(rows)), [f"{r['split']}\n{r['noise']}" for r in rows], fontsize=7)
    ax.set_ylabel("query accuracy (%)")
    ax.set_ylim(min(r["mean"] for r in rows) - 10, 100)
    ax.legend(fontsize=7, ncol=4)
    return fig


def _guidance_figure(guided, unguided):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.5, 4.2), layout="constrained")
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(unguided, guided, s=4, alpha=0.5)
    lo = float(min(guided.min(), unguided.min())) if len(guided) else 0.0
    ax.plot([lo, 1], [lo, 1], "k--", lw=0.8)
    ax.set_xlabel("cosine to the true class mean, unguided (s = 0)")
    ax.set_ylabel("... guided")
    ax.set_title("replacements of flagged rows (same noise)", fontsize=9)
    return fig
