"""Bad input to UHM's library API (mazes, gymnasium ids, data, policies, horizon weights, targets, models and
training configs): each probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks import uhm as mazes
from icml26.models.uhm import UHMConfig, UniversalHorizonModel
from icml26.training import uhm
from icml26.training.uhm import targets as tg

ENV = mazes.GridMaze(size=7, seed=0)
S, A = ENV.n_states, ENV.n_actions
DATA = mazes.collect_explore(ENV, 400, 50, seed=0)
PI = np.full((S, A), 1.0 / A)
W = uhm.winsorized(0.9, 0.9, 5)
FITTED = uhm.TabularUHM(5).fit(DATA, PI)
POINT = mazes.PointMaze2D(size=7, seed=0)
FLOW = UniversalHorizonModel(UHMConfig(state_dim=2, action_dim=2, hidden_size=8, num_layers=1, k_max=5))
CATEGORICAL = UniversalHorizonModel(UHMConfig(state_dim=S, action_dim=A, output="categorical", num_cells=S,
                                              hidden_size=8, num_layers=1, k_max=5))
BATCH = {"states": torch.zeros(4, 2), "actions": torch.zeros(4, 2), "next_states": torch.zeros(4, 2)}


def _with(data: dict, **changes) -> dict:
    return {**data, **changes}


def _walled_off() -> np.ndarray:
    layout = np.zeros((5, 5), dtype=bool)
    layout[1, 1:3] = True
    layout[3, 3] = True  # no free neighbour
    return layout


def _simulate(**changes):
    start = np.repeat(POINT.start_states[:1], 2, axis=0)
    args = {"env": POINT, "positions": start, "actions": np.zeros((2, 2)), "horizons": np.array([1, 3]),
            "act": lambda p: np.zeros_like(p), "rng": np.random.default_rng(0), **changes}
    return mazes.simulate_horizons(**args)


def _reset(env, state):
    env.reset(seed=0, options={"state": state})


PROBES = [
    # mazes and their gymnasium ids
    Probe("GridMaze-size-even", lambda: mazes.GridMaze(size=8), "size"),
    Probe("GridMaze-size-too-small", lambda: mazes.GridMaze(size=3), "size"),
    Probe("GridMaze-slip-nan", lambda: mazes.GridMaze(size=7, slip=float("nan")), "slip"),
    Probe("GridMaze-reward-unknown", lambda: mazes.GridMaze(size=7, reward="dense"), "reward"),
    Probe("GridMaze-n_starts-zero", lambda: mazes.GridMaze(size=7, n_starts=0), "n_starts"),
    Probe("GridMaze-seed-negative", lambda: mazes.GridMaze(size=7, seed=-1), "seed"),
    Probe("GridMaze-layout-walled-off-cell", lambda: mazes.GridMaze(layout=_walled_off()), "layout"),
    Probe("GridMaze-layout-int-array", lambda: mazes.GridMaze(layout=np.ones((5, 5), dtype=int)), "layout"),
    Probe("GridMaze-goal-in-a-wall", lambda: mazes.GridMaze(size=7, goal=(0, 0)), "goal"),
    Probe("GridMaze.reset-start-state-out-of-range", lambda: _reset(mazes.GridMaze(size=7), 10_000), "state"),
    Probe("GridMaze.step-action-out-of-range", lambda: ENV.step(7), "action"),
    Probe("gymnasium.make-GridMaze-size-negative", lambda: gymnasium.make("icml26/GridMaze-v0", size=-3), "size"),
    Probe("PointMaze2D-step_size-zero", lambda: mazes.PointMaze2D(size=7, step_size=0), "step_size"),
    Probe("PointMaze2D-noise-negative", lambda: mazes.PointMaze2D(size=7, noise=-0.1), "noise"),
    Probe("PointMaze2D-goal-in-a-wall", lambda: mazes.PointMaze2D(size=7, goal=(0, 0)), "goal"),
    Probe("PointMaze2D.reset-start-in-a-wall", lambda: _reset(mazes.PointMaze2D(size=7), [0.0, 0.0]), "state"),
    Probe("PointMaze2D.step-action-three-numbers", lambda: POINT.step(np.zeros(3)), "action"),
    # data collection and exact ground truth
    Probe("collect_explore-n_transitions-zero", lambda: mazes.collect_explore(ENV, 0), "n_transitions"),
    Probe("collect_explore-env-not-a-maze", lambda: mazes.collect_explore("GridMaze", 10), "env"),
    Probe("collect_navigate-epsilon-above-one", lambda: mazes.collect_navigate(ENV, 10, epsilon=1.5), "epsilon"),
    Probe("collect_pointmaze_navigate-episode_length-zero",
          lambda: mazes.collect_pointmaze_navigate(POINT, 10, episode_length=0), "episode_length"),
    Probe("policy_q-policy-rows-sum-to-2", lambda: mazes.policy_q(ENV.P, ENV.R, PI * 2, 0.9), "policy"),
    Probe("horizon_distributions-policy-negative-entry",
          lambda: mazes.horizon_distributions(ENV.P, np.where(np.arange(A) == 0, -0.5, 1.5 / (A - 1)) * np.ones((S, 1)),
                                              3), "policy"),
    Probe("value_iteration-gamma-one", lambda: mazes.value_iteration(ENV.P, ENV.R, 1.0), "gamma"),
    Probe("value_iteration-P-rows-not-distributions", lambda: mazes.value_iteration(ENV.P * 2, ENV.R, 0.9), "P"),
    Probe("success_rate-horizon-negative", lambda: mazes.success_rate(ENV, PI, horizon=-1), "horizon"),
    Probe("pointmaze_success-act-not-callable", lambda: mazes.pointmaze_success(POINT, np.zeros(2)), "act"),
    Probe("simulate_horizons-position-in-a-wall", lambda: _simulate(positions=np.zeros((2, 2))), "positions"),
    Probe("simulate_horizons-actions-wrong-shape", lambda: _simulate(actions=np.zeros((2, 3))), "actions"),
    Probe("simulate_horizons-horizon-zero", lambda: _simulate(horizons=np.array([1, 0])), "horizons"),
    Probe("simulate_horizons-horizons-float", lambda: _simulate(horizons=np.array([1.0, 2.0])), "horizons"),
    Probe("simulate_horizons-act-array", lambda: _simulate(act=np.zeros(2)), "act"),
    Probe("simulate_horizons-rng-int", lambda: _simulate(rng=0), "rng"),
    Probe("simulate_horizons-env-gridmaze", lambda: _simulate(env=ENV), "env"),
    # tabular horizon models (scikit-learn estimators: parameters checked in fit)
    Probe("TabularUHM.fit-policy-rows-sum-to-2", lambda: uhm.TabularUHM(5).fit(DATA, PI * 2), "policy"),
    Probe("TabularUHM.fit-k_max-zero", lambda: uhm.TabularUHM(0).fit(DATA, PI), "k_max"),
    Probe("TabularUHM.fit-observations-float",
          lambda: uhm.TabularUHM(5).fit(_with(DATA, observations=DATA["observations"] + 0.5), PI), "observations"),
    Probe("TabularUHM.fit-empty-data", lambda: uhm.TabularUHM(5).fit({k: v[:0] for k, v in DATA.items()}, PI),
          "transitions"),
    Probe("TabularUHM.fit-policy-wrong-shape", lambda: uhm.TabularUHM(5).fit(DATA, PI, n_states=S + 1), "policy"),
    Probe("TabularUHM.sample-horizon-zero",
          lambda: FITTED.sample(np.array([0]), np.array([0]), np.array([0]), np.random.default_rng(0)), "horizons"),
    Probe("TabularUHM.sample-rng-int",
          lambda: FITTED.sample(np.array([0]), np.array([0]), np.array([1]), 0), "rng"),
    Probe("TabularGHM.fit-beta-one", lambda: uhm.TabularGHM(1.0).fit(DATA, PI), "beta"),
    Probe("TabularOneStepModel.fit-next_observations-out-of-range",
          lambda: tg.TabularOneStepModel().fit(_with(DATA, next_observations=DATA["next_observations"] + S), S, A),
          "next_observations"),
    # horizon weights and targets
    Probe("winsorized-lam-above-one", lambda: uhm.winsorized(0.9, 1.5, 5), "lam"),
    Probe("n_step-n-zero", lambda: uhm.n_step(0), "n"),
    Probe("HorizonWeights.weights-horizon-beyond-k_max", lambda: W.weights(np.array([6])), "n"),
    Probe("nu_target-shapes-differ", lambda: uhm.nu_target(np.zeros(3), np.zeros(3), np.zeros(2),
                                                           np.ones(3, dtype=int), W), "r, reward_e, q_e, n"),
    Probe("UHMTarget-weights-geometric", lambda: tg.UHMTarget(FITTED, uhm.geometric(0.9, 0.9), ENV.reward_fn),
          "weights"),
    Probe("UHMTarget-reward_fn-array", lambda: tg.UHMTarget(FITTED, W, ENV.R), "reward_fn"),
    Probe("OneStepTD-gamma-above-one", lambda: tg.OneStepTD(gamma=1.5), "gamma"),
    Probe("TabularControlConfig-lr-zero", lambda: tg.TabularControlConfig(lr=0.0), "lr"),
    Probe("fit_tabular_critic-data-without-rewards",
          lambda: tg.fit_tabular_critic({k: v for k, v in DATA.items() if k != "rewards"}, tg.OneStepTD(0.9), S, A,
                                        tg.TabularControlConfig(updates=1)), "rewards"),
    # neural model, losses and actor-critic
    Probe("UHMConfig-num_layers-zero", lambda: UHMConfig(num_layers=0), "num_layers"),
    Probe("UniversalHorizonModel-horizons-float",
          lambda: FLOW(BATCH["states"], BATCH["actions"], torch.ones(4), x_t=torch.zeros(4, 2), t=torch.zeros(4)),
          "horizons"),
    Probe("td_flow_loss-variant-unknown",
          lambda: uhm.td_flow_loss(FLOW, FLOW, BATCH, lambda s: torch.zeros(len(s), 2), W, variant="td3"), "variant"),
    Probe("td_flow_loss-batch-without-next_states",
          lambda: uhm.td_flow_loss(FLOW, FLOW, {"states": BATCH["states"], "actions": BATCH["actions"]},
                                   lambda s: torch.zeros(len(s), 2), W), "batch"),
    Probe("categorical_uhm_loss-flow-model", lambda: uhm.categorical_uhm_loss(
        FLOW, FLOW, {}, torch.from_numpy(PI), W), "model"),
    Probe("ActorCriticConfig-tau-zero", lambda: uhm.ActorCriticConfig(tau=0.0), "tau"),
    Probe("OfflineActorCritic-state_dim-zero", lambda: uhm.OfflineActorCritic(0, 2), "state_dim"),
    Probe("ema_update-tau-two", lambda: uhm.ema_update(FLOW, FLOW, 2.0), "tau"),
    Probe("TDFlowUpdater-categorical-model", lambda: uhm.TDFlowUpdater(CATEGORICAL, W), "model"),
    Probe("train_categorical_uhm-policy-rows-sum-to-2", lambda: uhm.train_categorical_uhm(
        DATA, S, A, PI * 2, 3, gamma=0.9, lam=0.9, steps=1, batch_size=4, lr=1e-3, hidden_size=8, tau=0.1, seed=0),
        "policy"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
