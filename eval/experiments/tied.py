"""TIED (arXiv 2602.08267): training-free inversion of data transformations by diffusion sampling on Lie groups.

Three studies (the paper's affNIST / homNIST / PDE benchmarks need downloads and checkpoints; the digits study
stands in for them and its numbers are never the paper's):

1. **A sampler, not an optimiser.** The density ``exp(10 X11^2)`` on ``SO(n)`` (Haar base measure) has the
   closed-form marginal ``exp(10 x^2) (1 - x^2)^{(n-3)/2}`` of ``X11``. TIED's raw draws (no selection,
   per-sample Monte-Carlo paths) are compared with it by a Kolmogorov-Smirnov test. Kinetic Langevin from Haar
   draws runs beside (reported): from starts spread over both basins it samples this symmetric target as well.
2. **Mode weights** (a posterior sampler must put each mode's mass right; the paper's SO(10) histograms set TIED
   against kinetic Langevin on a bimodal target). On SO(3) the target ``0.8 e^{20 X11} + 0.2 e^{-20 X11}`` puts 80% of its mass on ``X11 > 0``; a
   barrier ``e^{-20}`` separates the modes, so a local sampler keeps the mode weights of its starts. TIED's
   mode-weight error ``|share - exact|`` against kinetic Langevin on TIED's gradient evaluations per draw
   (``K M``) started from Haar draws and from TIED's own initial draws ``W_K``; and TIED's consistency: its
   error and KS fall along a ladder of ``(K, M)``. At a fixed ``K = 50`` a larger ``M`` helps from 16 to 64 and
   little beyond (full mode reports it): the reverse SDE's discretisation then dominates (its Euler steps are largest
   at the top of the geometric schedule, coefficient variance ``gamma_max^2 / K`` each), and a larger ``K``
   removes it.
3. **Digits under SE(2)** (rotations to +-60 degrees, small shifts; full mode also mild homographies): a small
   CNN trained on clean digits, the PPCA energy at ``T = 50`` plus the boundary penalty, 400 held-out digits.
   TIED against no inversion, random best-of-N from the forward marginal at a matched energy-evaluation
   budget, LieLAC (Adam) and kinetic Langevin, with the oracle inverse as ceiling. Before any TIED accuracy
   the energy must be aligned (``E(act(g*^-1, x~)) < E(x~)`` on >= 90% of items); otherwise the accuracy is
   refused (NaN). The small CNN's free energy is run through the same check and its outcome recorded.

Claims (quick: SO(3), the mode weights and SE(2); full adds SO(5), SO(10) reported, a longer ladder and
homographies; 3 seeds in full mode): symmetric SO(3) KS <= 0.06 and positive share in [0.44, 0.56]; on the
two-mode target TIED's mode-weight error <= 0.10 at K = 200, M = 16, kinetic Langevin's >= 0.20 from Haar draws
and from TIED's initial draws at the same 3,200 gradient evaluations per draw; TIED's error and KS fall at every
step of the ladder (K, M) = (50, 4) -> (100, 8) -> (200, 16) (full: -> (400, 32)); SE(2) TIED accuracy >= 0.85,
>= random best-of-N + 0.08 and >= no inversion + 0.45; full: SO(5) KS <= 0.12, homographies TIED >= 0.80 and
>= random best-of-N + 0.08.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from icml26.models.tied.targets import (  # the analytic SO(n) targets
    MODE_SHARPNESS,
    MODE_WEIGHT,
    analytic_mean_abs_x11,
    haar_so,
    two_mode_log_density,
    two_mode_marginal,
    x11_marginal,
)
from icml26.registry import experiment
from icml26.results import Claim, Result
from icml26.utils import inner_seed


@dataclass(frozen=True)
class TIEDSettings:
    """Sizes of one mode.

    Symmetric SO(n) study: ``so_dims`` with per-n ``(K, M, draws)`` in ``so_budget``; ``gamma`` range 0.01 -> 10.
    Mode-weight study (SO(3), ``0.8 e^{20 X11} + 0.2 e^{-20 X11}``): TIED's claimed ``(K, M)`` in ``mode_budget``,
    ``mode_draws`` raw draws, the ladder ``mode_ladder`` of ``(K, M)`` along which the error must fall (it holds
    ``mode_budget``), ``mode_extra`` more ``(K, M)`` reported only (full mode: ``M`` alone and ``K`` alone grown)
    and ``mode_chunk`` draws per sampler call (the cached paths take ``chunk K M`` matrices).
    Digits: ``image_size``, ``epochs`` of the CNN, ``test_items`` held-out digits, ``transforms``, TIED's
    ``steps`` K and ``hypotheses`` H (``homography_hypotheses`` for homographies), ``baseline_items`` digits
    for LieLAC and Langevin, ``free_energy_items`` digits and ``free_energy_hypotheses`` for the free-energy
    check, ``n_seeds`` seeds in a run of one given seed (full mode: 3).
    """

    so_dims: tuple[int, ...]
    so_budget: tuple[tuple[int, int, int], ...]
    mode_budget: tuple[int, int]
    mode_draws: int
    mode_ladder: tuple[tuple[int, int], ...]
    mode_extra: tuple[tuple[int, int], ...]
    mode_chunk: int
    image_size: int
    epochs: int
    test_items: int
    transforms: tuple[str, ...]
    steps: int
    hypotheses: int
    homography_hypotheses: int
    baseline_items: int
    free_energy_items: int
    free_energy_hypotheses: int
    n_seeds: int


SETTINGS = {
    "quick": TIEDSettings(so_dims=(3,), so_budget=((50, 16, 1000),), mode_budget=(200, 16), mode_draws=1000,
                          mode_ladder=((50, 4), (100, 8), (200, 16)), mode_extra=(), mode_chunk=500,
                          image_size=20, epochs=15, test_items=400, transforms=("se2",), steps=30, hypotheses=8,
                          homography_hypotheses=16, baseline_items=100, free_energy_items=50, free_energy_hypotheses=4,
                          n_seeds=1),
}
SETTINGS["full"] = dataclasses.replace(
    SETTINGS["quick"], so_dims=(3, 5, 10), so_budget=((50, 16, 1000), (50, 16, 1000), (100, 32, 2000)),
    mode_ladder=((50, 4), (100, 8), (200, 16), (400, 32)),
    mode_extra=((50, 16), (50, 64), (50, 256), (100, 16), (400, 16)),
    transforms=("se2", "homography"), hypotheses=16, baseline_items=400, free_energy_items=400,
    free_energy_hypotheses=16, n_seeds=3)

#: PPCA energy temperature and components (calibrated on clean training digits).
PPCA_TEMPERATURE, PPCA_COMPONENTS = 50.0, 20
#: TIED's image settings per transformation: (gamma_min, gamma_max, M, clip).
IMAGE_TIED = {"se2": (0.1, 1.0, 2, 100.0), "homography": (0.1, 0.5, 4, 100.0)}
ALIGNMENT_SHARE = 0.9
#: Thresholds of the mode-weight claims (issue 46, fixed before any measurement): TIED's error at most 0.10, a
#: third of the 0.30 that a sampler keeping the balanced weights of its starts makes; kinetic Langevin's at least
#: 0.20, two thirds of that 0.30.
TIED_MODE_ERROR, LANGEVIN_MODE_ERROR = 0.10, 0.20
#: Kinetic Langevin on SO(n) (the official SO(10) synthetic setting's step and friction).
LANGEVIN_STEP, LANGEVIN_FRICTION = 0.01, 5.0


# ----------------------------------------------------------------------------------------------
# 1. SO(n): a sampler, not an optimiser
# ----------------------------------------------------------------------------------------------
def _x11_stats(X, xs, cdf) -> dict[str, Any]:
    import numpy as np
    from scipy.stats import kstest

    v = X[:, 0, 0].numpy()
    return {"ks": float(kstest(v, lambda u: np.interp(u, xs, cdf)).statistic), "positive": float((v > 0).mean()),
            "mean_abs": float(np.abs(v).mean()), "x11": v}


def _so_config(K: int, M: int, seed: int, per_sample_paths: bool = True):
    from icml26.models.tied.sampler import TIEDConfig

    return TIEDConfig(steps=K, gamma_min=0.01, gamma_max=10.0, mc_paths=M, dtype="float64",
                      per_sample_paths=per_sample_paths, seed=seed)


def _langevin(group, steps: int, seed: int):
    from icml26.models.tied.baselines import KineticLangevin

    return KineticLangevin(group, steps=steps, step_size=LANGEVIN_STEP, friction=LANGEVIN_FRICTION, clip=None,
                           seed=seed, dtype="float64")


def so_study(n: int, K: int, M: int, draws: int, seed: int) -> dict[str, Any]:
    """TIED's raw draws of the symmetric ``exp(10 X11^2)`` on SO(n) against its closed-form marginal (KS, shares).

    Up to n = 5 every chain has its own Monte-Carlo paths and kinetic Langevin from Haar draws runs beside on
    the same gradient budget (reported: from starts spread over both basins it samples this symmetric target
    as well as TIED, so the symmetric target tells the two apart by nothing); above, the paths are shared by
    the batch (a per-chain cache of SO(10) paths would take gigabytes) and Langevin is skipped.
    """
    import torch

    from icml26.models.tied.groups import SO
    from icml26.models.tied.sampler import TIEDSampler

    group = SO(n)
    xs, cdf, _ = x11_marginal(n)

    def log_density(g):
        return 10 * g[..., 0, 0] ** 2

    out = {"n": n, "K": K, "M": M, "draws": draws, "analytic_mean_abs": analytic_mean_abs_x11(n)}
    small = n <= 5
    config = _so_config(K, M, inner_seed(seed, 1, n, bits=31), per_sample_paths=small)
    out["per_sample_paths"] = small
    start = time.process_time()
    X = TIEDSampler(group, None, config).sample_density(log_density, draws)
    out["tied"] = {**_x11_stats(X, xs, cdf), "cpu_seconds": time.process_time() - start,
                   "orthogonality_error": float((X @ X.transpose(1, 2) - torch.eye(n, dtype=X.dtype)).abs().max())}
    if small:
        haar = haar_so(n, draws, torch.Generator().manual_seed(inner_seed(seed, 6, n, bits=31)))
        lang = _langevin(group, K * M, inner_seed(seed, 2, n, bits=31))
        out["langevin_haar"] = _x11_stats(lang.sample_density(log_density, haar), xs, cdf)
    return out


def mode_study(s: TIEDSettings, seed: int) -> dict[str, Any]:
    """Mode weights on SO(3): the target ``0.8 e^{20 X11} + 0.2 e^{-20 X11}`` puts 80% of its mass on X11 > 0.

    TIED's raw draws at every ``(K, M)`` of ``s.mode_ladder`` and ``s.mode_extra`` (the mode-weight error
    ``|share X11 > 0 - exact|`` and KS to the closed-form marginal of ``X11``); kinetic Langevin with ``K M``
    steps (TIED's gradient evaluations per draw at ``s.mode_budget``) from Haar draws and from TIED's own
    initial draws ``W_K``. Local samplers keep the mode weights of their starts: a barrier ``e^{-20}`` separates
    the modes.
    """
    import torch

    from icml26.models.tied.groups import SO
    from icml26.models.tied.sampler import TIEDSampler, forward_paths

    group = SO(3)
    xs, cdf, _ = two_mode_marginal(3)
    exact = float(1 - cdf[len(xs) // 2])
    log_density = two_mode_log_density()
    draws, chunk = s.mode_draws, s.mode_chunk
    out: dict[str, Any] = {"exact_share": exact, "draws": draws, "budget": s.mode_budget, "runs": {}}

    def stats(X):
        st = _x11_stats(X, xs, cdf)
        return {**st, "error": abs(st["positive"] - exact)}

    def tied(K, M):
        # chunks of draws, each with its own sampler seed: the cached paths hold chunk * K * M matrices
        start = time.process_time()
        parts = [TIEDSampler(group, None, _so_config(K, M, inner_seed(seed, 7, K, M, i, bits=31))).sample_density(
            log_density, min(chunk, draws - lo)) for i, lo in enumerate(range(0, draws, chunk))]
        return {**stats(torch.cat(parts)), "cpu_seconds": time.process_time() - start, "K": K, "M": M}

    for K, M in dict.fromkeys(s.mode_ladder + s.mode_extra + (s.mode_budget,)):
        out["runs"][(K, M)] = tied(K, M)
    K, M = s.mode_budget
    out["tied"] = out["runs"][(K, M)]
    # TIED's initial states at the claimed budget: W_K of one forward path per chain (as its sampler draws them)
    init = torch.cat([forward_paths(group, (min(chunk, draws - lo),), K, _so_config(K, M, 0),
                                    torch.Generator().manual_seed(inner_seed(seed, 7, K, M, i, bits=31)))[0][:, -1]
                      for i, lo in enumerate(range(0, draws, chunk))])
    haar = haar_so(3, draws, torch.Generator().manual_seed(inner_seed(seed, 8, bits=31)))
    out["init"], out["haar"] = stats(init), stats(haar)
    for name, start_at, stream in (("langevin_haar", haar, 9), ("langevin_init", init, 10)):
        t0 = time.process_time()
        X = _langevin(group, K * M, inner_seed(seed, stream, bits=31)).sample_density(log_density, start_at)
        out[name] = {**stats(X), "cpu_seconds": time.process_time() - t0}
    return out


# ----------------------------------------------------------------------------------------------
# 2. digits under transformations
# ----------------------------------------------------------------------------------------------
def digits_study(s: TIEDSettings, seed: int, kind: str, data, model, energy) -> dict[str, Any]:
    """Every method on ``s.test_items`` transformed held-out digits."""
    from icml26.eval.tasks.tied import accuracy, random_transforms
    from icml26.models.tied.baselines import KineticLangevin, LieLAC, RandomBestOfN
    from icml26.models.tied.energies import BoundaryPenalty, ClassifierFreeEnergy, evaluate_energy
    from icml26.models.tied.groups import act
    from icml26.models.tied.sampler import TIEDConfig, TIEDSampler

    x, y = data.x_test[: s.test_items], data.y_test[: s.test_items]
    group, g_star = random_transforms(kind, len(y), inner_seed(seed, 10, len(kind), bits=31))
    xt = act(g_star, x)
    gmin, gmax, M, clip = IMAGE_TIED[kind]
    H = s.hypotheses if kind == "se2" else s.homography_hypotheses
    config = TIEDConfig(steps=s.steps, gamma_min=gmin, gamma_max=gmax, clip=clip, mc_paths=M, hypotheses=H,
                        seed=inner_seed(seed, 11, len(kind), bits=31))
    out: dict[str, Any] = {"kind": kind, "items": len(y), "hypotheses": H, "mc_paths": M, "steps": s.steps,
                           "budget": config.energy_evaluations, "acc": {}, "cpu_seconds": {}}
    out["acc"]["none"] = accuracy(model, xt, y)
    out["acc"]["oracle"] = accuracy(model, act(group.inverse(g_star), xt), y)
    out["acc"]["swapped g / g^-1"] = accuracy(model, act(g_star, xt), y)

    def timed(name, fn):
        start = time.process_time()
        r = fn()
        out["cpu_seconds"][name] = time.process_time() - start
        return r

    tied = timed("tied", lambda: TIEDSampler(group, energy, config).sample(xt))
    e_input = evaluate_energy(energy, xt, None, function="tied experiment")
    out["aligned_share"] = float((tied.energy < e_input).float().mean())
    out["aligned"] = out["aligned_share"] >= ALIGNMENT_SHARE
    x_canon = act(group.inverse(tied.g), xt)
    # refused unless the energy is aligned: an energy that prefers warped inputs would make the number meaningless
    out["acc"]["TIED"] = accuracy(model, x_canon, y) if out["aligned"] else math.nan
    out["energies_per_step"] = tied.energies_per_step.mean(0).tolist()
    rnd = timed("random best-of-N", lambda: RandomBestOfN.matched(group, energy, config).sample(xt))
    out["acc"]["random best-of-N"] = accuracy(model, act(group.inverse(rnd.g), xt), y)
    nb = s.baseline_items
    per_hyp = config.energy_evaluations // H
    lielac = timed("LieLAC", lambda: LieLAC(group, energy, steps=per_hyp, hypotheses=H,
                                            seed=inner_seed(seed, 12, len(kind), bits=31)).sample(xt[:nb]))
    out["acc"]["LieLAC"] = accuracy(model, act(group.inverse(lielac.g), xt[:nb]), y[:nb])
    lang = timed("kinetic Langevin", lambda: KineticLangevin(group, energy, steps=per_hyp - 1, hypotheses=H,
                                                             seed=inner_seed(seed, 13, len(kind), bits=31)).sample(xt[:nb]))
    out["acc"]["kinetic Langevin"] = accuracy(model, act(group.inverse(lang.g), xt[:nb]), y[:nb])
    out["acc"]["TIED on the baseline subset"] = accuracy(model, x_canon[:nb], y[:nb]) if out["aligned"] else math.nan
    # the small CNN's free energy through the same check (recorded, not asserted)
    nf = s.free_energy_items
    free = ClassifierFreeEnergy(model) + BoundaryPenalty()
    for p in model.parameters():
        p.requires_grad_(False)
    fe = timed("tied, CNN free energy", lambda: TIEDSampler(group, free, dataclasses.replace(
        config, hypotheses=s.free_energy_hypotheses)).sample(xt[:nf]))
    fe_input = evaluate_energy(free, xt[:nf], None, function="tied experiment")
    out["free_energy_aligned_share"] = float((fe.energy < fe_input).float().mean())
    out["free_energy_tied_acc"] = accuracy(model, act(group.inverse(fe.g), xt[:nf]), y[:nf])
    out["free_energy_none_acc"] = accuracy(model, xt[:nf], y[:nf])
    out["examples"] = {"transformed": xt[:8, 0].tolist(), "canonical": x_canon[:8, 0].tolist(),
                       "clean": x[:8, 0].tolist()}
    return out


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
@experiment("tied", title="TIED: diffusion sampling on Lie groups inverts transformations without training",
            paper="tied")
def run(config) -> Result:
    return run_experiment(config)


def run_experiment(config, settings: TIEDSettings | None = None) -> Result:
    """The experiment with its sizes exposed; with ``n_seeds > 1`` and one seed given, that many consecutive
    seeds run and the claims are decided on their medians."""
    from icml26.results import over_seeds

    s = settings or SETTINGS[config.mode]
    seeds = list(config.seeds)
    if len(seeds) == 1 and s.n_seeds > 1:
        seeds = [seeds[0] + i for i in range(s.n_seeds)]
    return over_seeds(seeds, lambda seed: _run_seed(config, s, seed))


def _run_seed(config, s: TIEDSettings, seed: int) -> Result:
    from icml26.eval.tasks.tied import accuracy, fit_ppca, load_digit_images
    from icml26.models.tied.energies import BoundaryPenalty, PPCAEnergy
    from icml26.progress import phase
    from icml26.training.tied import train_classifier

    result = Result()
    m = result.metrics
    start_all = time.perf_counter()
    cpu_all = time.process_time()
    with phase("TIED studies", total=len(s.so_dims) + 2 + len(s.transforms)) as done:
        so = []
        for n, (K, M, draws) in zip(s.so_dims, s.so_budget):
            so.append(so_study(n, K, M, draws, seed))
            done.update()
        modes = mode_study(s, seed)
        done.update()
        start = time.process_time()
        data = load_digit_images(inner_seed(seed, 3, bits=31), size=s.image_size)
        model = train_classifier(data.x_train, data.y_train, epochs=s.epochs, seed=inner_seed(seed, 4, bits=31))
        pca = fit_ppca(data.x_train, PPCA_COMPONENTS, seed=inner_seed(seed, 5, bits=31))
        energy = PPCAEnergy.from_sklearn(pca, PPCA_TEMPERATURE) + BoundaryPenalty()
        m["classifier_clean_accuracy"] = accuracy(model, data.x_test, data.y_test)
        m["classifier_cpu_seconds"] = time.process_time() - start
        done.update()
        digits = {}
        for kind in s.transforms:
            digits[kind] = digits_study(s, seed, kind, data, model, energy)
            done.update()
    m["wall_seconds"] = time.perf_counter() - start_all
    m["cpu_seconds"] = time.process_time() - cpu_all

    # 1. SO(n), the symmetric target: TIED alone against the closed form
    rows = []
    for r in so:
        names = ("tied", "langevin_haar") if "langevin_haar" in r else ("tied",)
        for name in names:
            rows.append({"n": r["n"], "method": {"tied": "TIED", "langevin_haar": "kinetic Langevin (Haar starts)"}[name],
                         "K x M": f"{r['K']} x {r['M']}", "draws": r["draws"], "KS": round(r[name]["ks"], 4),
                         "share X11 > 0": round(r[name]["positive"], 3),
                         "mean |X11|": round(r[name]["mean_abs"], 4), "analytic mean |X11|": round(r["analytic_mean_abs"], 4)})
            m[f"so{r['n']}_{name}_ks"] = r[name]["ks"]
            m[f"so{r['n']}_{name}_positive"] = r[name]["positive"]
        m[f"so{r['n']}_tied_cpu_seconds"] = r["tied"]["cpu_seconds"]
        m[f"so{r['n']}_tied_orthogonality_error"] = r["tied"]["orthogonality_error"]
    result.tables["SO(n): X11 under exp(10 X11^2), raw draws (no selection)"] = rows
    r3 = next((r for r in so if r["n"] == 3), None)
    if r3 is not None:
        t3 = r3["tied"]
        result.add_claim(Claim.at_most(f"SO(3), symmetric target exp(10 X11^2): KS distance of TIED's X11 to the "
                                       f"closed-form marginal (K = {r3['K']}, M = {r3['M']}, {r3['draws']} raw draws)",
                                       t3["ks"], 0.06))
        result.add_claim(Claim.at_least("SO(3), symmetric target: TIED's share of X11 > 0 (both modes)", t3["positive"],
                                        0.44))
        result.add_claim(Claim.at_most("SO(3), symmetric target: TIED's share of X11 > 0 (both modes)", t3["positive"],
                                       0.56))
    if any(r["n"] == 5 for r in so):
        t5 = next(r for r in so if r["n"] == 5)["tied"]
        result.add_claim(Claim.at_most("SO(5): KS distance of TIED's X11 to the closed-form marginal", t5["ks"], 0.12))
        result.add_claim(Claim.at_least("SO(5): TIED's share of X11 > 0", t5["positive"], 0.44))
        result.add_claim(Claim.at_most("SO(5): TIED's share of X11 > 0", t5["positive"], 0.56))

    # 1b. SO(3), mode weights: the asymmetric target
    K, M = s.mode_budget
    exact = modes["exact_share"]
    target = f"{MODE_WEIGHT:g} e^({MODE_SHARPNESS:g} X11) + {1 - MODE_WEIGHT:g} e^(-{MODE_SHARPNESS:g} X11)"
    mode_rows = []
    for name, label in (("tied", f"TIED (K = {K}, M = {M})"),
                        ("langevin_haar", f"kinetic Langevin from Haar draws ({K * M} steps)"),
                        ("langevin_init", f"kinetic Langevin from TIED's initial draws ({K * M} steps)"),
                        ("haar", "Haar draws (Langevin's starts)"), ("init", "TIED's initial draws W_K")):
        r = modes[name]
        mode_rows.append({"method": label, "share X11 > 0": round(r["positive"], 3), "exact share": round(exact, 3),
                          "mode-weight error": round(r["error"], 3), "KS": round(r["ks"], 4)})
        m[f"modes_{name}_error"] = r["error"]
        m[f"modes_{name}_ks"] = r["ks"]
        m[f"modes_{name}_positive"] = r["positive"]
    result.tables[f"SO(3): mode weights under {target}, raw draws"] = mode_rows
    ladder_rows = []
    for (k, mm), r in modes["runs"].items():
        ladder_rows.append({"K": k, "M": mm, "gradient evaluations per draw": k * mm,
                            "in the ladder": (k, mm) in s.mode_ladder, "share X11 > 0": round(r["positive"], 3),
                            "mode-weight error": round(r["error"], 3), "KS": round(r["ks"], 4),
                            "cpu_seconds": round(r["cpu_seconds"], 2)})
        m[f"modes_K{k}_M{mm}_error"] = r["error"]
        m[f"modes_K{k}_M{mm}_ks"] = r["ks"]
    result.tables["SO(3) mode weights: TIED as K and M grow"] = ladder_rows
    m["modes_exact_share"] = exact
    m["modes_tied_cpu_seconds"] = modes["tied"]["cpu_seconds"]
    m["modes_langevin_cpu_seconds"] = modes["langevin_haar"]["cpu_seconds"] + modes["langevin_init"]["cpu_seconds"]
    head = f"SO(3), target {target} (exact share of X11 > 0: {exact:.3f}, {modes['draws']} raw draws)"
    result.add_claim(Claim.at_most(f"{head}: TIED's mode-weight error |share - exact| at K = {K}, M = {M} "
                                   f"(threshold {TIED_MODE_ERROR:g}, fixed before measuring)",
                                   modes["tied"]["error"], TIED_MODE_ERROR))
    for name, start in (("langevin_haar", "Haar draws"), ("langevin_init", "TIED's own initial draws")):
        result.add_claim(Claim.at_least(
            f"{head}: kinetic Langevin's mode-weight error at TIED's {K * M} gradient evaluations per draw, started "
            f"from {start} (h = {LANGEVIN_STEP:g}, friction {LANGEVIN_FRICTION:g}; threshold {LANGEVIN_MODE_ERROR:g})",
            modes[name]["error"], LANGEVIN_MODE_ERROR))
    for (k0, m0), (k1, m1) in zip(s.mode_ladder, s.mode_ladder[1:]):
        lo, hi = modes["runs"][(k1, m1)], modes["runs"][(k0, m0)]
        for stat, label in (("error", "mode-weight error"), ("ks", "KS distance to the closed form")):
            result.add_claim(Claim.less(f"SO(3) two-mode target, consistency: TIED's {label} falls from (K, M) = "
                                        f"({k0}, {m0}) to ({k1}, {m1})", lo[stat], hi[stat]))

    # 2. digits
    table = []
    for kind, d in digits.items():
        for method, acc in d["acc"].items():
            items = s.baseline_items if method in ("LieLAC", "kinetic Langevin", "TIED on the baseline subset") else d["items"]
            cpu = d["cpu_seconds"].get(method if method != "TIED" else "tied")
            table.append({"transformation": kind, "method": method, "accuracy": round(acc, 4), "items": items,
                          "cpu_seconds": None if cpu is None else round(cpu, 2)})
        for method, acc in d["acc"].items():
            m[f"{kind}_acc_{method.replace(' ', '_').replace('/', '')}"] = acc
        m[f"{kind}_aligned_share"] = d["aligned_share"]
        m[f"{kind}_free_energy_aligned_share"] = d["free_energy_aligned_share"]
        m[f"{kind}_free_energy_tied_acc"] = d["free_energy_tied_acc"]
        m[f"{kind}_free_energy_none_acc"] = d["free_energy_none_acc"]
        m[f"{kind}_cpu_seconds"] = d["cpu_seconds"]
        m[f"{kind}_energy_evaluations_per_input"] = d["budget"]
    result.tables["digits: accuracy per method"] = table
    result.tables["energy alignment (share of items with E(act(g*^-1, x~)) < E(x~); >= 0.9 required)"] = [
        {"transformation": kind, "energy": name, "share": round(share, 3), "passes": share >= ALIGNMENT_SHARE,
         "TIED accuracy": round(acc, 4), "no inversion": round(none, 4), "items": items}
        for kind, d in digits.items() for name, share, acc, none, items in (
            (f"PPCA / {PPCA_TEMPERATURE:g} + boundary", d["aligned_share"], d["acc"]["TIED"], d["acc"]["none"], d["items"]),
            ("small-CNN free energy + boundary", d["free_energy_aligned_share"], d["free_energy_tied_acc"],
             d["free_energy_none_acc"], s.free_energy_items))]
    if "se2" in digits:
        a = digits["se2"]["acc"]
        result.add_claim(Claim.at_least(f"digits SE(2) +-60 deg: TIED accuracy ({digits['se2']['items']} held-out; NaN "
                                        "if the energy is not aligned)", a["TIED"], 0.85))
        result.add_claim(Claim.at_least(f"digits SE(2): TIED accuracy - random best-of-N's at a matched budget "
                                        f"({digits['se2']['budget']} energy evaluations per input)",
                                        a["TIED"] - a["random best-of-N"], 0.08))
        result.add_claim(Claim.at_least("digits SE(2): TIED accuracy - no inversion's", a["TIED"] - a["none"], 0.45))
    if "homography" in digits:
        a = digits["homography"]["acc"]
        result.add_claim(Claim.at_least("digits mild homographies: TIED accuracy", a["TIED"], 0.80))
        result.add_claim(Claim.at_least("digits mild homographies: TIED accuracy - random best-of-N's (matched budget)",
                                        a["TIED"] - a["random best-of-N"], 0.08))

    result.figures = {"so_x11_histograms": _so_figure(so, modes),
                      "mode_weight_consistency": _consistency_figure(modes, s.mode_ladder),
                      "digits_accuracy": _accuracy_figure(digits), "digits_canonicalised": _examples_figure(digits), "energy_per_step": _energy_figure(digits)}
    result.notes = (
        f"Mode {config.mode}, seed {seed} (every sampler, transform, split and model seed drawn from it). SO(n): "
        "gamma 0.01 -> 10, per-sample Monte-Carlo paths, float64, raw final draws; KS against the closed-form "
        "marginal exp(10 x^2)(1 - x^2)^((n-3)/2) of the symmetric target, and against that of "
        f"{MODE_WEIGHT:g} e^(20 x) + {1 - MODE_WEIGHT:g} e^(-20 x) (uniform Haar X11 on SO(3)) for the mode weights. "
        "Kinetic Langevin: h = 0.01, friction 5, K M steps (TIED's gradient evaluations per draw), from Haar draws "
        "(QR of Gaussian matrices) or from TIED's own initial draws W_K; on the symmetric target it is as good as "
        "TIED from such starts, so that target is claimed for TIED alone. On the two-mode target every local "
        "sampler keeps the mode weights of its starts (a barrier e^-20 separates the modes); TIED's error falls as "
        "K and M grow, and at a fixed K = 50 a larger M helps from 16 to 64 and little beyond (not at every seed): "
        "the reverse SDE's discretisation dominates (its Euler steps are largest at the top of the schedule, "
        "coefficient variance gamma_max^2 / K per step), and a larger K removes it (see the ladder table). Digits "
        f"(the stand-in for affNIST/homNIST, never the paper's numbers): load_digits /16, padded 8 -> 12, "
        f"{s.image_size}x{s.image_size}, a small CNN trained {s.epochs} epochs on the clean training split "
        f"(clean held-out accuracy {m['classifier_clean_accuracy']:.3f}); PPCA (q = {PPCA_COMPONENTS}) energy / "
        f"{PPCA_TEMPERATURE:g} plus the boundary penalty. TIED: K = {s.steps}, H = {s.hypotheses} (homographies "
        f"{s.homography_hypotheses}), SE(2) gamma 0.1 -> 1.0 with M = 2, homographies 0.1 -> 0.5 with M = 4, clip 100, "
        "cached paths, linearised exponential. Random best-of-N draws exp of N(0, sigma^2) with sigma the "
        "forward marginal's spread, as many draws per hypothesis as TIED's energy evaluations; LieLAC (Adam, lr "
        "0.01, init std 0.3) and kinetic Langevin (h = 2e-4, friction 1, clip 20, init I; the official image "
        f"settings, which at this budget barely move) get the same budget per hypothesis, on the first "
        f"{s.baseline_items} items. The small CNN's free-energy alignment is recorded, not asserted"
        + "".join(f" ({kind}: aligned on {d['free_energy_aligned_share']:.0%} of {s.free_energy_items} items, yet TIED "
                  f"with it reaches {d['free_energy_tied_acc']:.3f} against {d['free_energy_none_acc']:.3f} without "
                  "inversion: a decreasing energy does not prove an aligned one)" for kind, d in digits.items())
        + ".")
    return result


# ----------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------
def _so_figure(so, modes):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(4.2 * (len(so) + 1), 3.6), layout="constrained")
    for i, r in enumerate(so):
        ax = fig.add_subplot(1, len(so) + 1, i + 1)
        xs, _, dens = x11_marginal(r["n"], 2001)
        ax.hist(r["tied"]["x11"], bins=40, range=(-1, 1), density=True, alpha=0.6, label="TIED")
        if "langevin_haar" in r:
            ax.hist(r["langevin_haar"]["x11"], bins=40, range=(-1, 1), density=True, alpha=0.4,
                    label="kinetic Langevin (Haar starts)")
        ax.plot(xs, dens, "k", lw=1.5, label="closed form")
        ax.set_title(f"SO({r['n']}): X11 under exp(10 X11^2)")
        ax.set_xlabel("X11")
        ax.legend(fontsize=7)
    ax = fig.add_subplot(1, len(so) + 1, len(so) + 1)
    xs, _, dens = two_mode_marginal(3, grid=2001)
    K, M = modes["budget"]
    ax.hist(modes["tied"]["x11"], bins=40, range=(-1, 1), density=True, alpha=0.6,
            label=f"TIED (share > 0: {modes['tied']['positive']:.2f})")
    ax.hist(modes["langevin_haar"]["x11"], bins=40, range=(-1, 1), density=True, alpha=0.4,
            label=f"kinetic Langevin, Haar starts ({modes['langevin_haar']['positive']:.2f})")
    ax.plot(xs, dens, "k", lw=1.5, label=f"closed form ({modes['exact_share']:.2f})")
    ax.set_yscale("log")
    ax.set_ylim(1e-2, None)
    ax.set_title(f"SO(3): X11 under {MODE_WEIGHT:g}/{1 - MODE_WEIGHT:g} modes, K = {K}, M = {M}")
    ax.set_xlabel("X11")
    ax.legend(fontsize=7)
    return fig


def _consistency_figure(modes, ladder):
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    fig = Figure(figsize=(9, 3.6), layout="constrained")
    runs = modes["runs"]
    series = {"K and M grow (the claimed ladder)": list(ladder)}
    ks_only = sorted(k for k in runs if k[1] == 16)
    ms_only = sorted(k for k in runs if k[0] == 50)
    if len(ks_only) > 1:
        series["K grows, M = 16"] = ks_only
    if len(ms_only) > 1:
        series["M grows, K = 50"] = ms_only
    for j, (stat, label) in enumerate((("error", "mode-weight error |share - exact|"), ("ks", "KS to the closed form"))):
        ax = fig.add_subplot(1, 2, j + 1)
        for name, keys in series.items():
            ax.plot([k * m for k, m in keys], [runs[k][stat] for k in keys], "o-", label=name)
            for k in keys:
                ax.annotate(f"{k[0]}x{k[1]}", (k[0] * k[1], runs[k][stat]), fontsize=6)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ticks = sorted({k * m for keys in series.values() for k, m in keys})
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticks(ticks, [str(t) for t in ticks], fontsize=7)
        ax.set_xlabel("gradient evaluations per draw (K M)")
        ax.set_ylabel(label)
        ax.legend(fontsize=7)
    fig.suptitle("TIED on SO(3), 0.8 / 0.2 modes: consistency as K and M grow")
    return fig


def _accuracy_figure(digits):
    import numpy as np
    from matplotlib.figure import Figure

    fig = Figure(figsize=(5.5 * len(digits), 4), layout="constrained")
    for i, (kind, d) in enumerate(digits.items()):
        ax = fig.add_subplot(1, len(digits), i + 1)
        names = [k for k in d["acc"] if k != "TIED on the baseline subset"]
        vals = [d["acc"][k] for k in names]
        ax.barh(np.arange(len(names)), [0 if math.isnan(v) else v for v in vals])
        ax.set_yticks(np.arange(len(names)), names)
        ax.set_xlim(0, 1)
        ax.set_xlabel("held-out accuracy")
        ax.set_title(f"digits, {kind}")
    return fig


def _examples_figure(digits):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3 * len(digits)), layout="constrained")
    rows = [(kind, which) for kind in digits for which in ("clean", "transformed", "canonical")]
    for r, (kind, which) in enumerate(rows):
        images = digits[kind]["examples"][which]
        for c, img in enumerate(images):
            ax = fig.add_subplot(len(rows), len(images), r * len(images) + c + 1)
            ax.imshow(img, cmap="gray", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if c == 0:
                ax.set_ylabel(f"{kind}\n{which}", fontsize=7)
    return fig


def _energy_figure(digits):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4), layout="constrained")
    ax = fig.add_subplot()
    for kind, d in digits.items():
        ax.plot(d["energies_per_step"], label=kind)
    ax.set_xlabel("reverse step (0: initial W_K)")
    ax.set_ylabel("mean over items of the lowest current energy")
    ax.set_yscale("log")
    ax.legend()
    return fig
