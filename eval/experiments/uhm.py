"""Universal horizon models for offline RL (arXiv 2605.15603, ICML 2026) on generated mazes.

OGBench (the paper's benchmark) downloads its datasets, so everything runs on
:mod:`icml26.eval.tasks.uhm`: a 15 x 15 GridMaze (about 100 cells, 5 actions, slip 0.1, sparse goal
reward 1 at the absorbing goal, gamma 0.99) with "explore" data (uniform random actions, episodes of
200 steps, 50k transitions), exact ground truth (``Q*`` by value iteration, ``P_pi^n`` by matrix powers,
greedy success by exact propagation). Each seed draws the maze, the data and every learner from
``numpy.random.SeedSequence(seed)``.

Claims (each names the model it uses):

1. Learned models, compounding error: a categorical UHM network (learned by the bootstrapped recursion on
   horizons ``1..neural_k_max``) has a lower direct TV error to ``P_pi^n`` at ``n = neural_k_max`` (mean over
   covered (s, a), uniform explore policy) than a learned categorical 1-step network of the same size,
   steps and data composed ``n`` times (the exact law of its ``n``-step sampled rollouts); median over
   ``neural_reps`` replications. Quick mode runs it on an 11 x 11 maze (55 cells, ``n = 20``), full mode on
   the 15 x 15 one (``n = 30``).
2. Value learning with the *tabular* UHM (the closed-form recursion over the empirical 1-step model): tabular
   critics at equal updates and batch for 1-step TD (ReBRAC-dagger), DTD(lambda), MBTD(lambda), GHM and
   UHM-winsorized (the control loop in :class:`UHMSettings`); at the calibrated budget UHM's greedy success
   beats 1-step TD's by >= 0.15, with lower mean |Q - Q*| over covered pairs. This is a claim on the speed of
   value propagation: the budget sweep (reported, not claimed) shows 1-step TD catching up at a few times
   the budget, and MBTD(lambda) on the same empirical model matching UHM.
3. Winsorization: the exact variance of the one-sample target (true model, explore policy, ``Q = Q^pi``,
   mean over pairs) is lower for the winsorized target at ``k_max = 10`` than for the uncapped geometric
   one with the same ``lambda gamma``.

Full mode adds 4. PointMaze2D: a learned flow UHM inside a ReBRAC-style actor-critic against 1-step TD
(see :func:`pointmaze_study`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from typing import Any

from icml26.registry import experiment
from icml26.results import Claim, Result
from icml26.utils import inner_seed

METHODS = ("1-step TD", "DTD(lambda)", "MBTD(lambda)", "GHM", "UHM")


@dataclass(frozen=True)
class UHMSettings:
    """Sizes of one mode.

    Maze and data: ``maze_size``, ``transitions``, ``episode_length``, ``datasets`` ("explore", "navigate"),
    ``gamma``, ``lam``, ``k_max``. Control loop (every tabular critic the same): ``update_factor`` x the median
    BFS distance of the start states to the goal critic updates (the calibration that puts 1-step TD near
    30-50% success whatever the maze's size; claim 2 is decided there) of ``batch_size`` dataset transitions at
    step size ``lr``; every ``improve_every`` updates the policy becomes greedy in Q (ties uniform) and UHM/GHM
    are refitted for it; the loop runs on to ``max(sweep_factors)`` x that budget and every update is evaluated
    (the budget sweep: success at each factor x the budget, reported); ``trace_batch`` is the batch of the
    trace-based DTD/MBTD (smaller in quick mode for time, reported); success = the exact probability that the
    greedy policy is at the goal after ``success_horizon`` steps from the maze's 10 named start states.
    Variance: ``variance_k_max`` (``claim_k_max`` decides claim 3). Neural (claim 1): ``neural`` (run it), on a
    maze of its own (``neural_maze_size``, ``neural_transitions`` explore transitions), ``neural_reps``
    replications of ``neural_steps`` Adam steps at ``neural_lr`` of batch ``neural_batch``, trunk
    ``neural_hidden``, EMA ``neural_tau``, horizons uniform on ``1..neural_k_max`` and TV at ``neural_k_max``;
    ``tv_horizon``: the tabular recursion check. PointMaze2D: ``pointmaze`` (run it), ``pm_transitions``,
    ``pm_updates``, ``pm_model_steps`` (the flow model's warm-up before the joint phase), ``pm_flow_tau`` (the EMA
    rate of the flow model's target network, which TD-flow bootstraps horizon ``n`` from: 0.05, not the 0.005 of
    the critics, because each horizon level waits on the EMA lag ``1 / tau``, so ``k_max`` levels need about
    ``k_max / tau`` model steps; at 0.005 the model's samples at ``n >= 10`` sat cells away from the true ones,
    many inside walls, after the full budget), ``pm_critic_layer_norm`` (LayerNorm in every arm's critics, as
    ReBRAC's: without it a critic queried at a learned model's samples outside the maze can diverge), ``pm_alpha`` (the
    actor's BC weight), ``pm_eval_every``, ``pm_claim_updates`` (the two budgets of the control claim; each
    is evaluated), ``pm_oracle`` (add the reference arm whose horizon model is the true
    simulator: what the UHM target does with a perfect model).
    """

    maze_size: int
    transitions: int
    episode_length: int
    datasets: tuple[str, ...]
    gamma: float
    lam: float
    k_max: int
    update_factor: float
    batch_size: int
    trace_batch: int
    lr: float
    improve_every: int
    sweep_factors: tuple[int, ...]
    success_horizon: int
    variance_k_max: tuple[int, ...]
    claim_k_max: int
    neural: bool
    neural_reps: int
    neural_steps: int
    neural_lr: float
    neural_batch: int
    neural_hidden: int
    neural_tau: float
    neural_k_max: int
    neural_maze_size: int
    neural_transitions: int
    tv_horizon: int
    pointmaze: bool
    pm_transitions: int
    pm_updates: int
    pm_model_steps: int
    pm_flow_tau: float
    pm_alpha: float
    pm_critic_layer_norm: bool
    pm_eval_every: int
    pm_claim_updates: tuple[int, ...]
    pm_oracle: bool


#: Per-mode settings; tests shrink them with ``dataclasses.replace``.
SETTINGS = {
    "quick": UHMSettings(maze_size=15, transitions=50_000, episode_length=200, datasets=("explore",), gamma=0.99,
                         lam=0.95, k_max=50, update_factor=1.5, batch_size=100_000, trace_batch=10_000, lr=0.15,
                         improve_every=2, sweep_factors=(1, 2, 4), success_horizon=100, variance_k_max=(5, 10, 20, 50),
                         claim_k_max=10, neural=True, neural_reps=1, neural_steps=1500, neural_lr=3e-3,
                         neural_batch=256, neural_hidden=128, neural_tau=0.1, neural_k_max=20, neural_maze_size=11,
                         neural_transitions=20_000, tv_horizon=30, pointmaze=False, pm_transitions=100_000,
                         pm_updates=20_000, pm_model_steps=5_000, pm_flow_tau=0.05, pm_alpha=0.01,
                         pm_critic_layer_norm=True, pm_eval_every=2_000, pm_claim_updates=(10_000, 20_000),
                         pm_oracle=False),
}
SETTINGS["full"] = dataclasses.replace(SETTINGS["quick"], datasets=("explore", "navigate"), trace_batch=100_000,
                                       sweep_factors=(1, 2, 4, 8), variance_k_max=(5, 10, 20, 50, 100, 200),
                                       neural_reps=3, neural_steps=3000, neural_batch=512, neural_hidden=256,
                                       neural_k_max=30, neural_maze_size=15, neural_transitions=50_000, pointmaze=True,
                                       pm_oracle=True)


def make_maze(s: UHMSettings, seed: int, dataset: str = "explore", neural: bool = False):
    """The seed's maze, its dataset and the exact ground truth the evaluation (never the learners) uses
    (``neural``: the neural study's maze, ``neural_maze_size`` with ``neural_transitions``)."""
    import numpy as np

    from icml26.eval.tasks import uhm as mazes
    size, transitions = (s.neural_maze_size, s.neural_transitions) if neural else (s.maze_size, s.transitions)
    env = mazes.GridMaze(size=size, seed=inner_seed(seed, 0, bits=31))
    collect = mazes.collect_explore if dataset == "explore" else mazes.collect_navigate
    data = collect(env, transitions, s.episode_length, seed=inner_seed(seed, 1, len(dataset)))
    _, covered = mazes.empirical_model(data, env.n_states, env.n_actions)
    q_star = mazes.value_iteration(env.P, env.R, s.gamma)
    return env, data, covered, q_star, np.full((env.n_states, env.n_actions), 1.0 / env.n_actions)


# ----------------------------------------------------------------------------------------------
# claim 2 and the budget sweep: tabular critics at equal updates
# ----------------------------------------------------------------------------------------------
def updates_for(env, s: UHMSettings) -> int:
    """The number of critic updates: ``update_factor`` x the median start distance (the same for every target)."""
    import numpy as np

    return int(math.ceil(s.update_factor * float(np.median(env.distance[env.start_states]))))


def control_study(s: UHMSettings, seed: int, dataset: str = "explore") -> dict[str, Any]:
    """Every tabular critic target on the seed's maze: one run of ``max(sweep_factors)`` x the calibrated
    budget, evaluated after every update, so the success at each budget is read off one run (the loop does
    not depend on its length: the run at budget ``b`` is the first ``b`` updates of the longer one)."""
    import numpy as np

    from icml26.eval.tasks import uhm as mazes
    from icml26.progress import phase
    from icml26.training import uhm
    from icml26.training.uhm import targets as tg
    env, data, covered, q_star, _ = make_maze(s, seed, dataset)
    S, A, g = env.n_states, env.n_actions, s.gamma
    updates = updates_for(env, s)
    total = updates * max(s.sweep_factors)
    rf = env.reward_fn  # the known reward of a state: all the learners get besides the data
    uhm_model, ghm_model = uhm.TabularUHM(s.k_max), uhm.TabularGHM(s.lam * g)
    one_step = tg.TabularOneStepModel().fit(data, S, A)
    trace_w = uhm.td_lambda(g, s.lam, s.k_max)
    targets = {
        "1-step TD": (tg.OneStepTD(g, inner_seed(seed, 2, 0)), None, s.batch_size),
        "DTD(lambda)": (tg.DatasetTDLambda(data, trace_w, rf, inner_seed(seed, 2, 1)), None, s.trace_batch),
        "MBTD(lambda)": (tg.RolloutTDLambda(one_step, trace_w, rf, inner_seed(seed, 2, 2)), None, s.trace_batch),
        "GHM": (tg.GHMTarget(ghm_model, uhm.geometric(g, s.lam), rf, inner_seed(seed, 2, 3)),
                lambda p: ghm_model.fit(data, p, S, A), s.batch_size),
        "UHM": (tg.UHMTarget(uhm_model, uhm.winsorized(g, s.lam, s.k_max), rf, inner_seed(seed, 2, 4)),
                lambda p: uhm_model.fit(data, p, S, A), s.batch_size),
    }

    def evaluate(Q, policy):
        greedy = mazes.greedy_policy(Q, seed=inner_seed(seed, 3))
        return {"success": mazes.success_rate(env, greedy, s.success_horizon),
                "q_error": float(np.abs(Q - q_star)[covered].mean())}

    out = {}
    with phase(f"tabular critics ({dataset})", total=len(targets)) as bar:
        for name, (target, refit, batch) in targets.items():
            # every update is evaluated: exact and cheap (a 100-step propagation), and the budgets need no grid
            cfg = tg.TabularControlConfig(updates=total, batch_size=batch, lr=s.lr, improve_every=s.improve_every,
                                          eval_every=1, seed=inner_seed(seed, 4))
            start = time.process_time()
            fit = tg.fit_tabular_critic(data, target, S, A, cfg, refit=refit, evaluate=evaluate)
            at = {r["update"]: r for r in fit["history"]}
            out[name] = {"success": at[updates]["success"], "q_error": at[updates]["q_error"],
                         "sweep": {f: at[f * updates]["success"] for f in s.sweep_factors},
                         "sweep_q_error": {f: at[f * updates]["q_error"] for f in s.sweep_factors},
                         "history": fit["history"], "model_calls_per_update": fit["model_calls"] / total,
                         "batch": batch, "cpu_ms_per_update": 1000 * (time.process_time() - start) / total}
            bar.update()
    out["maze"] = mazes.describe(env)
    out["updates"] = updates
    out["covered_pairs"] = int(covered.sum())
    out["q_star_mean"] = float(q_star[covered].mean())
    return out


# ----------------------------------------------------------------------------------------------
# claim 3: exact target variance against k_max
# ----------------------------------------------------------------------------------------------
def variance_study(s: UHMSettings, seed: int) -> dict[str, Any]:
    import numpy as np

    from icml26.eval.tasks import uhm as mazes
    from icml26.training import uhm
    env, data, covered, _, explore = make_maze(s, seed)
    q_pi = mazes.policy_q(env.P, env.R, explore, s.gamma)
    pairs = np.argwhere(covered)
    geo = uhm.target_moments(q_pi, env.P, env.R, explore, uhm.geometric(s.gamma, s.lam), pairs[:, 0], pairs[:, 1])
    rows = []
    for k in s.variance_k_max:
        win = uhm.target_moments(q_pi, env.P, env.R, explore, uhm.winsorized(s.gamma, s.lam, k), pairs[:, 0], pairs[:, 1])
        rows.append({"k_max": k, "winsorized_var": float(win["var"].mean()), "geometric_var": float(geo["var"].mean()),
                     "winsorized_mean_minus_q_pi": float(np.abs(win["mean"] - q_pi[covered]).max())})
    return {"rows": rows, "q_pi_mean": float(q_pi[covered].mean())}


# ----------------------------------------------------------------------------------------------
# recursion check and claim 1: compounding error of a neural 1-step model against a direct neural UHM
# ----------------------------------------------------------------------------------------------
def recursion_study(s: UHMSettings, seed: int) -> dict[str, Any]:
    """TV of the tabular UHM (from the data) to ``P_pi^n`` for the explore policy, n = 1..tv_horizon."""
    from icml26.eval.tasks import uhm as mazes
    from icml26.training import uhm
    env, data, covered, _, explore = make_maze(s, seed)
    truth = mazes.horizon_distributions(env.P, explore, s.tv_horizon)
    model = uhm.TabularUHM(s.tv_horizon).fit(data, explore, env.n_states, env.n_actions)
    return {"tv": [float(mazes.tv_distance(model.M_[n], truth[n])[covered].mean()) for n in range(s.tv_horizon)]}


def compounding_study(s: UHMSettings, seed: int) -> dict[str, Any]:
    """Claim 1 on the neural study's maze: a categorical UHM trained by the bootstrapped recursion on
    horizons ``1..neural_k_max`` against a categorical 1-step model of the same size, steps and data whose
    ``n``-step law is its own ``n``-fold composition (the exact law of its sampled rollouts), both scored by
    their TV to the true ``P_pi^n`` of the explore policy, mean over the covered pairs."""
    import numpy as np

    from icml26.eval.tasks import uhm as mazes
    from icml26.progress import phase
    from icml26.training.uhm import train_categorical_uhm
    from icml26.training.uhm.diagnosis import model_table

    train = functools.partial(train_categorical_uhm, gamma=s.gamma, lam=s.lam, steps=s.neural_steps, lr=s.neural_lr,
                              batch_size=s.neural_batch, hidden_size=s.neural_hidden, tau=s.neural_tau)
    env, data, covered, _, explore = make_maze(s, seed, neural=True)
    S, A, K = env.n_states, env.n_actions, s.neural_k_max
    truth = mazes.horizon_distributions(env.P, explore, K)
    ns = sorted({1, 5, 10, 20, K} & set(range(1, K + 1)))
    rows = []
    with phase("neural horizon models", total=s.neural_reps) as bar:
        for rep in range(s.neural_reps):
            start = time.process_time()
            direct = train(data, S, A, explore, K, seed=inner_seed(seed, 5, rep))
            one = train(data, S, A, explore, 1, seed=inner_seed(seed, 6, rep))
            composed = mazes.horizon_distributions(model_table(one, S, A, 1), explore, K)
            rows.append({"rep": rep, "cpu_seconds": time.process_time() - start,
                         "direct": {n: float(mazes.tv_distance(model_table(direct, S, A, n), truth[n - 1])[covered].mean())
                                    for n in ns},
                         "composed": {n: float(mazes.tv_distance(composed[n - 1], truth[n - 1])[covered].mean())
                                      for n in ns}})
            bar.update()
    return {"rows": rows, "cells": S, "horizon": K,
            "direct_median": float(np.median([r["direct"][K] for r in rows])),
            "composed_median": float(np.median([r["composed"][K] for r in rows])),
            "direct_n1_median": float(np.median([r["direct"][1] for r in rows])),
            "composed_n1_median": float(np.median([r["composed"][1] for r in rows]))}


@experiment("uhm", title="UHM: winsorized nu-targets propagate value faster than 1-step TD; exact target variance; "
                         "direct vs composed horizon models", paper="uhm")
def run(config) -> Result:
    return run_experiment(config)


def run_experiment(config, settings: UHMSettings | None = None) -> Result:
    """The experiment with its sizes exposed (``run`` uses :data:`SETTINGS` of ``config.mode``).

    Each seed of ``config.seeds`` runs the whole study; with several seeds the claims are decided on the
    median over seeds (table "claims per seed")."""
    from icml26.results import over_seeds

    s = settings or SETTINGS[config.mode]
    return over_seeds(config.seeds, lambda seed: _run_seed(config, s, seed))


def _run_seed(config, s: UHMSettings, seed: int) -> Result:
    result = Result()
    m = result.metrics
    start = time.process_time()

    # 2. value learning (tabular UHM) and the budget sweep
    control = {d: control_study(s, seed, d) for d in s.datasets}
    for d, out in control.items():
        result.tables[f"tabular critics, GridMaze-{d} ({out['updates']} updates)"] = [
            {"target": name, "success": round(out[name]["success"], 3), "mean |Q - Q*|": round(out[name]["q_error"], 2),
             "batch": out[name]["batch"], "model calls per target": out[name]["model_calls_per_update"],
             "CPU ms per update": round(out[name]["cpu_ms_per_update"], 1)} for name in METHODS]
        result.tables[f"budget sweep, GridMaze-{d}: greedy success after k x {out['updates']} updates"] = [
            {"updates": f * out["updates"], "k": f, **{name: round(out[name]["sweep"][f], 3) for name in METHODS}}
            for f in s.sweep_factors]
        for name in METHODS:
            key = name.split("(")[0].replace(" ", "_").replace("-", "").lower()
            m[f"{d}_{key}_success"] = out[name]["success"]
            m[f"{d}_{key}_q_error"] = out[name]["q_error"]
            m[f"{d}_{key}_sweep_success"] = {f * out["updates"]: out[name]["sweep"][f] for f in s.sweep_factors}
    ex = control["explore"]
    m["maze"] = ex["maze"]
    top = max(s.sweep_factors)
    model = "tabular UHM (the closed-form recursion over the empirical 1-step model, no network)"
    result.add_claim(Claim.at_least(
        f"GridMaze-explore, {ex['updates']} updates (the calibrated budget: a value-propagation-speed claim), {model}: "
        f"UHM-winsorized greedy success - 1-step TD's (DTD {ex['DTD(lambda)']['success']:.2f}, MBTD "
        f"{ex['MBTD(lambda)']['success']:.2f}, GHM {ex['GHM']['success']:.2f}; at {top} x the budget UHM "
        f"{ex['UHM']['sweep'][top]:.2f}, 1-step TD {ex['1-step TD']['sweep'][top]:.2f})",
        ex["UHM"]["success"] - ex["1-step TD"]["success"], 0.15))
    result.add_claim(Claim.less(f"GridMaze-explore, {ex['updates']} updates, tabular UHM: mean |Q - Q*| over covered "
                                "pairs < 1-step TD's", ex["UHM"]["q_error"], ex["1-step TD"]["q_error"]))

    # 3. target variance
    var = variance_study(s, seed)
    result.tables["exact one-sample target variance (explore policy, Q = Q^pi, mean over covered pairs)"] = [
        {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in var["rows"]]
    row = next(r for r in var["rows"] if r["k_max"] == s.claim_k_max)
    m["variance_winsorized"], m["variance_geometric"] = row["winsorized_var"], row["geometric_var"]
    result.add_claim(Claim.less(
        f"exact target variance (true model), winsorized at k_max = {s.claim_k_max} < uncapped geometric (same "
        f"lambda gamma; gap {row['geometric_var'] - row['winsorized_var']:.1f})", row["winsorized_var"],
        row["geometric_var"]))

    # recursion check (no claim) and 1. compounding error of learned models
    rec = recursion_study(s, seed)
    m["tabular_uhm_tv"] = {n: rec["tv"][n - 1] for n in (1, 10, s.tv_horizon)}
    comp = compounding_study(s, seed) if s.neural else None
    if comp is not None:
        K = comp["horizon"]
        m["neural_direct_tv"], m["neural_composed_tv"] = comp["direct_median"], comp["composed_median"]
        m["neural_direct_tv_n1"], m["neural_composed_tv_n1"] = comp["direct_n1_median"], comp["composed_n1_median"]
        result.tables[f"learned categorical models ({comp['cells']}-cell maze): TV to P_pi^n (mean over covered pairs)"] = [
            {"rep": r["rep"], **{f"direct UHM n={n}": round(v, 4) for n, v in r["direct"].items()},
             **{f"composed 1-step n={n}": round(v, 4) for n, v in r["composed"].items()},
             "CPU s": round(r["cpu_seconds"], 1)} for r in comp["rows"]]
        result.add_claim(Claim.less(
            f"learned categorical UHM (a network trained by the bootstrapped recursion on n = 1..{K}, "
            f"{comp['cells']}-cell maze): direct TV to P_pi^{K} < the learned 1-step network composed {K} times "
            f"(median of {s.neural_reps}; at n = 1 the 1-step network is closer: {comp['composed_n1_median']:.3f} vs "
            f"{comp['direct_n1_median']:.3f})", comp["direct_median"], comp["composed_median"]))

    if s.pointmaze:

        pm = pointmaze_study(s, seed)
        result.tables["PointMaze2D (navigate data): flow UHM + ReBRAC-style actor-critic"] = pm["rows"]
        m["pointmaze"] = pm["metrics"]
        td_err, uhm_err = pm["metrics"]["1step_TD_start_value_error"], pm["metrics"]["UHM_start_value_error"]
        result.add_claim(Claim.less(
            f"PointMaze2D, {s.pm_updates} updates: UHM critic's mean |Q(s_0, pi(s_0)) - V_oracle(s_0)| at the named "
            f"starts < 1-step TD's (greedy success {pm['metrics']['UHM_success']:.2f} vs "
            f"{pm['metrics']['1step_TD_success']:.2f}, reported)", uhm_err, td_err))
        at = {name: {r["update"]: r["success"] for r in curve} for name, curve in pm["history"].items()}
        for b in s.pm_claim_updates:
            if b not in at["UHM"]:
                continue  # a budget beyond pm_updates (shrunk settings): nothing measured there
            ref = f"; true-simulator UHM {at['UHM, true simulator'][b]:.2f}" if s.pm_oracle else ""
            m["pointmaze"][f"success_at_{b}"] = {name: a[b] for name, a in at.items()}
            result.add_claim(Claim.greater(
                f"PointMaze2D, {b} updates, learned flow UHM (TD-flow, trained jointly with the actor-critic): greedy "
                f"success > 1-step TD's (the paper's control claim{ref})", at["UHM"][b], at["1-step TD"][b]))
        result.tables["PointMaze2D over updates"] = [{"critic target": name, **{k: round(v, 3) for k, v in r.items()}}
                                                    for name, curve in pm["history"].items() for r in curve]
        if pm["quality"] is not None:
            result.tables["PointMaze2D: learned flow UHM vs the true dynamics under the final actor (cell units)"] = [
                {k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in pm["quality"]]

    m["cpu_seconds"] = time.process_time() - start
    result.figures = {"budget_sweep": _control_figure(ex, s), "target_variance_vs_k_max": _variance_figure(var),
                      "tv_vs_horizon": _tv_figure(rec, comp, s)}
    if s.pointmaze:
        result.figures["pointmaze_success_and_start_value"] = pointmaze_figure(pm)
    result.notes = (
        f"Mode {config.mode}, seed {seed} (maze, data and learners drawn from it). GridMaze {ex['maze']['cells']} cells, "
        f"goal {ex['maze']['goal']}, start distances {ex['maze']['start_distances']}; {s.transitions} transitions "
        f"({', '.join(s.datasets)}), sparse reward (1 at the absorbing goal), gamma {s.gamma}, lambda {s.lam}, "
        f"k_max {s.k_max}. Control loop: {ex['updates']} updates ({s.update_factor} x the median start distance; "
        f"the sweep runs on to {max(s.sweep_factors)} x), batch {s.batch_size} (DTD/MBTD {s.trace_batch}), "
        f"step size {s.lr} towards each pair's mean target, policy greedy in Q (ties uniform) and UHM/GHM refitted "
        f"every {s.improve_every} updates; success = exact P(at goal after {s.success_horizon} steps) of the greedy "
        "policy from the 10 named start states. Learners see dataset transitions and the reward function only. "
        "The control claim's UHM is the tabular one (exactly the empirical 1-step model's n-step law, so MBTD(lambda) "
        "on the same model carries the same information); the learned-model claim is the neural one. "
        "Variance: exact in the true model for the explore policy. "
        + (f"Neural: {s.neural_maze_size} x {s.neural_maze_size} maze, {s.neural_transitions} explore transitions, "
           f"{s.neural_steps} Adam steps (lr {s.neural_lr}, batch {s.neural_batch}, trunk 3 x {s.neural_hidden}, "
           f"EMA {s.neural_tau}) per model." if s.neural else "Neural models: not run."))
    return result


# ----------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------
def _control_figure(ex, s):
    """Greedy success and ``|Q - Q*|`` after every update of the sweep, per target, with markers at each
    budget of ``sweep_factors`` and a line at the claim's budget: where each target wins."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    budgets = [f * ex["updates"] for f in s.sweep_factors]
    for i, (key, label) in enumerate((("success", "greedy success"), ("q_error", "mean |Q - Q*| (covered pairs)"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for name in METHODS:
            h = ex[name]["history"]
            line, = ax.plot([r["update"] for r in h], [r[key] for r in h], lw=1.2, label=name)
            at = {r["update"]: r[key] for r in h}
            ax.plot(budgets, [at[b] for b in budgets], "o", ms=4, color=line.get_color())
        ax.axvline(ex["updates"], color="k", ls=":", lw=1, label=f"claim budget ({ex['updates']})")
        ax.set_xlabel("critic updates (budget sweep)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
    return fig


def _variance_figure(var):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ks = [r["k_max"] for r in var["rows"]]
    ax.plot(ks, [r["winsorized_var"] for r in var["rows"]], marker="o", label="winsorized")
    ax.plot(ks, [r["geometric_var"] for r in var["rows"]], ls="--", label="uncapped geometric (GHM)")
    ax.set_xscale("log")
    ax.set_xlabel("k_max")
    ax.set_ylabel("exact Var of the one-sample target")
    ax.legend()
    return fig


def _tv_figure(rec, comp, s):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    ax.plot(range(1, s.tv_horizon + 1), rec["tv"], label=f"tabular UHM (= composed empirical model), {s.maze_size} x "
            f"{s.maze_size} maze")
    if comp is not None:
        r = comp["rows"][0]
        where = f"{s.neural_maze_size} x {s.neural_maze_size} maze"
        ax.plot(list(r["direct"]), list(r["direct"].values()), marker="o", label=f"learned UHM, direct ({where})")
        ax.plot(list(r["composed"]), list(r["composed"].values()), marker="s",
                label=f"learned 1-step model, composed ({where})")
    ax.set_xlabel("horizon n")
    ax.set_ylabel("TV to P_pi^n (mean over covered pairs)")
    ax.legend(fontsize=8)
    return fig


# ----------------------------------------------------------------------------------------------
# PointMaze2D (full mode): flow UHM by TD-flow + ReBRAC-style actor-critic vs 1-step TD
# ----------------------------------------------------------------------------------------------
def pointmaze_study(s, seed: int) -> dict[str, Any]:
    """PointMaze2D with "navigate" data: a flow-matching UHM trained by TD-flow jointly with a ReBRAC-style
    actor-critic, against the same actor-critic with 1-step TD (arXiv 2605.15603's ReBRAC-dagger vs UHM rows, at
    CPU scale).

    Positions are standardised (``(x - centre) / scale``) for the networks; the reward is the known sparse
    goal reward evaluated on de-standardised imagined states. Reconstruction: the joint schedule (one
    TD-flow step per critic step, the model's ``a'`` from the current target actor), the horizon
    distribution (the winsorized ``p_H``), the networks' sizes (3 x 256 SiLU flow, 2 x 256 critics), the actor's
    BC weight ``pm_alpha`` (0.01: ReBRAC's OGBench navigate runs use actor BC weights of this order, not
    TD3+BC's D4RL 2.5, under which the BC term swamps the normalised Q term in a 100-step task) and the
    model's warm-up. Every ``pm_eval_every`` updates each arm records its greedy success and its value at the
    start states, ``min(Q1, Q2)(s_0, pi(s_0))`` averaged over them, against the Monte-Carlo value of the
    shortest-path controller (:func:`~icml26.eval.tasks.uhm.pointmaze_oracle_values`): how far the critic's
    value has propagated from the goal, which is what the horizon model is meant to speed up.

    Diagnosis (``pm_oracle``): a third arm draws ``s_e`` from the true dynamics instead of the learned flow
    (:class:`~icml26.training.uhm.diagnosis.SimulatorUHMTarget`), which separates the model's error from the
    target's variance and the actor-critic; :func:`~icml26.training.uhm.diagnosis.flow_quality` compares the
    learned model's samples with simulated rollouts of the final actor.
    """
    import numpy as np
    import torch

    from icml26.eval.tasks import uhm as mazes
    from icml26.models.uhm import UHMConfig, UniversalHorizonModel
    from icml26.progress import phase
    from icml26.training.uhm import (
        ActorCriticConfig,
        OfflineActorCritic,
        TDFlowUpdater,
        TorchOneStepTD,
        TorchUHMTarget,
        winsorized,
    )
    from icml26.training.uhm.diagnosis import SimulatorUHMTarget, flow_quality

    env = mazes.PointMaze2D(size=s.maze_size, seed=inner_seed(seed, 0, bits=31))
    data = mazes.collect_pointmaze_navigate(env, s.pm_transitions, seed=inner_seed(seed, 7))
    centre, scale = s.maze_size / 2.0, s.maze_size / 4.0
    norm = lambda x: (torch.as_tensor(x, dtype=torch.float32) - centre) / scale  # noqa: E731
    S, A, S2 = norm(data["observations"]), torch.as_tensor(data["actions"], dtype=torch.float32), norm(data["next_observations"])
    R = torch.as_tensor(data["rewards"], dtype=torch.float32)
    reward_fn = lambda x: torch.as_tensor(env.reward_fn((x * scale + centre).numpy()), dtype=torch.float32)  # noqa: E731
    weights = winsorized(s.gamma, s.lam, s.k_max)
    oracle = mazes.pointmaze_oracle_values(env, s.gamma, seed=inner_seed(seed, 13))
    starts = norm(env.start_states)
    rows, metrics, history = [], {"oracle_start_value": float(oracle.mean())}, {}

    def evaluate(ac, update: int) -> dict[str, float]:
        with torch.no_grad():
            success = mazes.pointmaze_success(env, lambda p: ac.act(norm(p)).numpy(), seed=inner_seed(seed, 12))
            q = ac._q_target(starts, ac.act(starts)).numpy()
        return {"update": update, "success": success, "start_value": float(q.mean()),
                "start_value_error": float(np.abs(q - oracle).mean())}

    arms = ("1-step TD", "UHM") + (("UHM, true simulator",) if s.pm_oracle else ())
    quality = None
    with phase("PointMaze2D actor-critic", total=len(arms)) as bar:
        for name in arms:
            start = time.process_time()
            gen = torch.Generator().manual_seed(inner_seed(seed, 8))
            config = ActorCriticConfig(gamma=s.gamma, alpha=s.pm_alpha, critic_layer_norm=s.pm_critic_layer_norm)
            ac = OfflineActorCritic(2, 2, config, seed=inner_seed(seed, 9, bits=31))
            flow = None
            if name == "UHM":
                with torch.random.fork_rng():
                    torch.manual_seed(inner_seed(seed, 10, bits=31))
                    model = UniversalHorizonModel(UHMConfig(state_dim=2, action_dim=2, k_max=s.k_max))
                flow = TDFlowUpdater(model, weights, lr=3e-4, tau=s.pm_flow_tau)
                critic_target = TorchUHMTarget(flow.target_model, weights, reward_fn, seed=inner_seed(seed, 11))
                # warm-up of the model alone (the critic's imagined states need a usable model)
                for _ in range(s.pm_model_steps):
                    idx = torch.randint(0, len(S), (256,), generator=gen)
                    flow.update({"states": S[idx], "actions": A[idx], "next_states": S2[idx]},
                                lambda x: ac.act(x).detach(), gen)
            elif name == "UHM, true simulator":
                critic_target = SimulatorUHMTarget(env, weights, norm, scale, centre, reward_fn, inner_seed(seed, 11),
                                                   mazes.simulate_horizons)
            else:
                critic_target = TorchOneStepTD(s.gamma)
            calls, curve = 0, []
            for u in range(1, s.pm_updates + 1):
                idx = torch.randint(0, len(S), (256,), generator=gen)
                batch = {"states": S[idx], "actions": A[idx], "next_states": S2[idx], "rewards": R[idx]}
                if flow is not None:
                    flow.update(batch, lambda x: ac.act(x).detach(), gen)
                calls += ac.update(batch, critic_target)["model_calls"]
                if u % s.pm_eval_every == 0 or u == s.pm_updates or u in s.pm_claim_updates:
                    curve.append(evaluate(ac, u))
            last = curve[-1]
            rows.append({"critic target": name, "success": round(last["success"], 3), "updates": s.pm_updates,
                         "value at starts": round(last["start_value"], 2),
                         "oracle value at starts": round(float(oracle.mean()), 2),
                         "mean abs(Q - V_oracle) at starts": round(last["start_value_error"], 2),
                         "model calls per target": calls / max(s.pm_updates, 1),
                         "CPU s": round(time.process_time() - start, 1)})
            if flow is not None:
                quality = flow_quality(env, flow.target_model, ac, S, A, norm, scale, centre, s.k_max,
                                       inner_seed(seed, 14), mazes.simulate_horizons)
            key = name.replace(' ', '_').replace('-', '').replace(',', '')
            metrics[f"{key}_success"] = last["success"]
            metrics[f"{key}_start_value_error"] = last["start_value_error"]
            history[name] = curve
            bar.update()
    return {"rows": rows, "metrics": metrics, "history": history, "oracle": oracle.tolist(), "quality": quality}


def pointmaze_figure(pm):
    """Greedy success and the mean value at the start states over critic updates, per arm, with the
    oracle controller's value as a reference line."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.2), layout="constrained")
    for i, (key, label) in enumerate((("success", "greedy success (named starts)"),
                                      ("start_value", "mean min(Q1, Q2)(s_0, pi(s_0))"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for name, curve in pm["history"].items():
            ax.plot([r["update"] for r in curve], [r[key] for r in curve], marker="o", ms=3, label=name)
        if key == "start_value":
            ax.axhline(sum(pm["oracle"]) / len(pm["oracle"]), color="k", ls=":", label="shortest-path controller")
        ax.set_xlabel("critic updates")
        ax.set_ylabel(label)
        ax.legend()
    return fig
