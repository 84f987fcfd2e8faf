"""Training neural universal horizon models (arXiv 2605.15603): the loops the UHM experiment runs.

- :func:`train_categorical_uhm`: a categorical-head :class:`~icml26.models.uhm.UniversalHorizonModel` on a tabular
  data set by :func:`~icml26.training.uhm.categorical_uhm_loss` (horizons uniform on ``1..k_max``; ``k_max = 1``
  is the one-step model);
- :class:`TDFlowUpdater`: Adam steps of a flow-head model by :func:`~icml26.training.uhm.td_flow_loss`, each
  followed by the EMA update of its target network (the model half of the PointMaze2D actor-critic).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from icml26.errors import InputTypeError, described, input_error
from icml26.models.uhm import UHMConfig, UniversalHorizonModel
from icml26.training.uhm.actor_critic import categorical_uhm_loss, ema_update, td_flow_loss
from icml26.training.uhm.data import check_policy, transition_arrays
from icml26.training.uhm.horizons import HorizonWeights, td_lambda
from icml26.validation import check_finite, check_int

__all__ = ["TDFlowUpdater", "train_categorical_uhm"]


def train_categorical_uhm(data: dict[str, np.ndarray], n_states: int, n_actions: int, policy: np.ndarray,
                          k_max: int, *, gamma: float, lam: float, steps: int, batch_size: int, lr: float,
                          hidden_size: int, tau: float, seed: int) -> UniversalHorizonModel:
    """Adam on :func:`categorical_uhm_loss` with an EMA target; horizons uniform on ``1..k_max``.

    Args:
        data: ``observations``, ``actions``, ``next_observations`` as integer arrays (cells and actions).
        n_states: the number of cells (the one-hot state size and the categorical output size).
        n_actions: the number of actions (the one-hot action size).
        policy: ``[n_states, n_actions]`` action probabilities of the evaluated policy.
        k_max: the largest horizon (1: the one-step model).
        gamma: the discount of the horizon measure (only its uniform proposal is used here).
        lam: the lambda of the horizon measure.
        steps: Adam steps.
        batch_size: transitions per step.
        lr: Adam's learning rate.
        hidden_size: the trunk's width (3 layers).
        tau: the EMA rate of the target network.
        seed: the model's initialisation and the batches (local generators; the global RNG is untouched).

    Returns the trained model.
    """
    fn = "train_categorical_uhm"
    n_states, n_actions = check_int(fn, "n_states", n_states, low=2), check_int(fn, "n_actions", n_actions, low=1)
    k_max = check_int(fn, "k_max", k_max, low=1)
    steps, batch_size = check_int(fn, "steps", steps, low=0), check_int(fn, "batch_size", batch_size, low=1)
    hidden_size, seed = check_int(fn, "hidden_size", hidden_size, low=1), check_int(fn, "seed", seed, low=0)
    lr = check_finite(fn, "lr", lr, positive=True)
    tau = check_finite(fn, "tau", tau, low=0, high=1)
    policy = check_policy(fn, policy, n_states, n_actions)
    s, a, s2 = transition_arrays(fn, data, n_states, n_actions, "data")
    data = {"observations": s.astype(np.int64), "actions": a.astype(np.int64), "next_observations": s2.astype(np.int64)}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        cfg = UHMConfig(state_dim=n_states, action_dim=n_actions, output="categorical", num_cells=n_states,
                        hidden_size=hidden_size, num_layers=3, k_max=k_max)
        model = UniversalHorizonModel(cfg)
    target = copy.deepcopy(model).requires_grad_(False)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    horizons = td_lambda(gamma, lam, k_max)  # only its uniform p_H is used here
    gen = torch.Generator().manual_seed(seed)
    st, ac, nx = (torch.from_numpy(data[k]) for k in ("observations", "actions", "next_observations"))
    pt = torch.from_numpy(policy).float()
    for _ in range(steps):
        idx = torch.randint(0, len(st), (batch_size,), generator=gen)
        batch = {"states": F.one_hot(st[idx], n_states).float(), "actions": F.one_hot(ac[idx], n_actions).float(),
                 "next_cells": nx[idx]}
        loss = categorical_uhm_loss(model, target, batch, pt, horizons, generator=gen)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        ema_update(target, model, tau)
    return model


class TDFlowUpdater:
    """Adam on :func:`td_flow_loss` for a flow-head model, with its EMA target network.

    Args:
        model: a :class:`UniversalHorizonModel` with ``output="flow"``; trained in place.
        weights: the horizon measure of the targets (e.g. :func:`~icml26.training.uhm.winsorized`).
        lr: Adam's learning rate.
        tau: the EMA rate of the target network (``target_model``).
    """

    def __init__(self, model: UniversalHorizonModel, weights: HorizonWeights, *, lr: float = 3e-4,
                 tau: float = 0.005) -> None:
        if not isinstance(model, UniversalHorizonModel) or model.config.output != "flow":
            raise input_error("TDFlowUpdater", "model", "a UniversalHorizonModel with output='flow'",
                              described(f"output={model.config.output!r}" if isinstance(model, UniversalHorizonModel)
                                        else type(model).__name__))
        if not isinstance(weights, HorizonWeights):
            raise InputTypeError("TDFlowUpdater", "weights", "HorizonWeights (winsorized(...))",
                                 described(type(weights).__name__))
        lr = check_finite("TDFlowUpdater", "lr", lr, positive=True)
        tau = check_finite("TDFlowUpdater", "tau", tau, low=0, high=1)
        self.model, self.weights, self.tau = model, weights, tau
        self.target_model = copy.deepcopy(model).requires_grad_(False)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=lr)

    def update(self, batch: dict[str, torch.Tensor], policy: Callable[[torch.Tensor], torch.Tensor],
               generator: torch.Generator) -> float:
        """One step on ``batch`` (``states``, ``actions``, ``next_states``); returns the loss."""
        loss = td_flow_loss(self.model, self.target_model, batch, policy, self.weights, generator=generator)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        self.optimizer.step()
        ema_update(self.target_model, self.model, self.tau)
        return float(loss.detach())
