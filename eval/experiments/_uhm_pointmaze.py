"""The UHM experiment's continuous part (full mode): PointMaze2D with "navigate" data, a flow-matching
UHM trained by TD-flow jointly with a ReBRAC-style actor-critic, against the same actor-critic with
1-step TD (arXiv 2605.15603's ReBRAC-dagger vs UHM rows, at CPU scale).

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
"""

from __future__ import annotations

import copy
import time
from typing import Any


def pointmaze_study(s, seed: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from icml26.eval.experiments.uhm import inner_seed
    from icml26.eval.tasks import uhm as mazes
    from icml26.models.uhm import UHMConfig, UniversalHorizonModel
    from icml26.progress import phase
    from icml26.training.uhm import winsorized
    from icml26.training.uhm import (ActorCriticConfig, OfflineActorCritic, TorchOneStepTD,
                                                  TorchUHMTarget, ema_update, td_flow_loss)

    env = mazes.PointMaze2D(size=s.maze_size, seed=inner_seed(seed, 0) % 2 ** 31)
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

    with phase("PointMaze2D actor-critic", total=2) as bar:
        for name in ("1-step TD", "UHM"):
            start = time.process_time()
            gen = torch.Generator().manual_seed(inner_seed(seed, 8))
            ac = OfflineActorCritic(2, 2, ActorCriticConfig(gamma=s.gamma, alpha=s.pm_alpha), seed=inner_seed(seed, 9) % 2 ** 31)
            model = target_model = opt = None
            if name == "UHM":
                with torch.random.fork_rng():
                    torch.manual_seed(inner_seed(seed, 10) % 2 ** 31)
                    model = UniversalHorizonModel(UHMConfig(state_dim=2, action_dim=2, k_max=s.k_max))
                target_model = copy.deepcopy(model).requires_grad_(False)
                opt = torch.optim.Adam(model.parameters(), lr=3e-4)
                critic_target = TorchUHMTarget(target_model, weights, reward_fn, seed=inner_seed(seed, 11))
                # warm-up of the model alone (the critic's imagined states need a usable model)
                for _ in range(s.pm_model_steps):
                    idx = torch.randint(0, len(S), (256,), generator=gen)
                    batch = {"states": S[idx], "actions": A[idx], "next_states": S2[idx]}
                    loss = td_flow_loss(model, target_model, batch, lambda x: ac.act(x).detach(), weights, generator=gen)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    ema_update(target_model, model, 0.005)
            else:
                critic_target = TorchOneStepTD(s.gamma)
            calls, curve = 0, []
            for u in range(1, s.pm_updates + 1):
                idx = torch.randint(0, len(S), (256,), generator=gen)
                batch = {"states": S[idx], "actions": A[idx], "next_states": S2[idx], "rewards": R[idx]}
                if model is not None:
                    loss = td_flow_loss(model, target_model, batch, lambda x: ac.act(x).detach(), weights, generator=gen)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    ema_update(target_model, model, 0.005)
                calls += ac.update(batch, critic_target)["model_calls"]
                if u % s.pm_eval_every == 0 or u == s.pm_updates:
                    curve.append(evaluate(ac, u))
            last = curve[-1]
            rows.append({"critic target": name, "success": round(last["success"], 3), "updates": s.pm_updates,
                         "value at starts": round(last["start_value"], 2),
                         "oracle value at starts": round(float(oracle.mean()), 2),
                         "mean abs(Q - V_oracle) at starts": round(last["start_value_error"], 2),
                         "model calls per target": calls / max(s.pm_updates, 1),
                         "CPU s": round(time.process_time() - start, 1)})
            key = name.replace(' ', '_').replace('-', '')
            metrics[f"{key}_success"] = last["success"]
            metrics[f"{key}_start_value_error"] = last["start_value_error"]
            history[name] = curve
            bar.update()
    return {"rows": rows, "metrics": metrics, "history": history, "oracle": oracle.tolist()}


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
