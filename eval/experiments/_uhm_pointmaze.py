"""The UHM experiment's continuous part (full mode): PointMaze2D with "navigate" data, a flow-matching
UHM trained by TD-flow jointly with a ReBRAC-style actor-critic, against the same actor-critic with
1-step TD (arXiv 2605.15603's ReBRAC-dagger vs UHM rows, at CPU scale).

Positions are standardised (``(x - centre) / scale``) for the networks; the reward is the known sparse
goal reward evaluated on de-standardised imagined states. Reconstruction: the joint schedule (one
TD-flow step per critic step, the model's ``a'`` from the current target actor), the horizon
distribution (the winsorized ``p_H``) and the networks' sizes (3 x 256 SiLU flow, 2 x 256 critics).
"""

from __future__ import annotations

import copy
import time
from typing import Any


def pointmaze_study(s, seed: int) -> dict[str, Any]:
    import numpy as np
    import torch

    from icml26.eval.experiments.uhm import inner_seed
    from icml26.eval.tasks import mazes
    from icml26.models.uhm import UHMConfig, UniversalHorizonModel
    from icml26.progress import phase
    from icml26.training.uhm import winsorized
    from icml26.training.uhm_actor_critic import (ActorCriticConfig, OfflineActorCritic, TorchOneStepTD,
                                                  TorchUHMTarget, ema_update, td_flow_loss)

    env = mazes.PointMaze2D(size=s.maze_size, seed=inner_seed(seed, 0) % 2 ** 31)
    data = mazes.collect_pointmaze_navigate(env, s.pm_transitions, seed=inner_seed(seed, 7))
    centre, scale = s.maze_size / 2.0, s.maze_size / 4.0
    norm = lambda x: (torch.as_tensor(x, dtype=torch.float32) - centre) / scale  # noqa: E731
    S, A, S2 = norm(data["observations"]), torch.as_tensor(data["actions"], dtype=torch.float32), norm(data["next_observations"])
    R = torch.as_tensor(data["rewards"], dtype=torch.float32)
    reward_fn = lambda x: torch.as_tensor(env.reward_fn((x * scale + centre).numpy()), dtype=torch.float32)  # noqa: E731
    weights = winsorized(s.gamma, s.lam, s.k_max)
    rows, metrics = [], {}
    with phase("PointMaze2D actor-critic", total=2) as bar:
        for name in ("1-step TD", "UHM"):
            start = time.process_time()
            gen = torch.Generator().manual_seed(inner_seed(seed, 8))
            ac = OfflineActorCritic(2, 2, ActorCriticConfig(gamma=s.gamma), seed=inner_seed(seed, 9) % 2 ** 31)
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
            calls = 0
            for _ in range(s.pm_updates):
                idx = torch.randint(0, len(S), (256,), generator=gen)
                batch = {"states": S[idx], "actions": A[idx], "next_states": S2[idx], "rewards": R[idx]}
                if model is not None:
                    loss = td_flow_loss(model, target_model, batch, lambda x: ac.act(x).detach(), weights, generator=gen)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    ema_update(target_model, model, 0.005)
                calls += ac.update(batch, critic_target)["model_calls"]
            with torch.no_grad():
                act = lambda p: ac.act(norm(p)).numpy()  # noqa: E731
                success = mazes.pointmaze_success(env, act, seed=inner_seed(seed, 12))
            rows.append({"critic target": name, "success": round(success, 3), "updates": s.pm_updates,
                         "model calls per target": calls / max(s.pm_updates, 1),
                         "CPU s": round(time.process_time() - start, 1)})
            metrics[f"{name.replace(' ', '_').replace('-', '')}_success"] = success
            bar.update()
    return {"rows": rows, "metrics": metrics}
