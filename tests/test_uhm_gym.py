"""UHM's mazes as registered gymnasium environments, custom cell maps, and the tabular horizon models as
scikit-learn estimators (clone, get_params/set_params, parameters validated in fit)."""

from __future__ import annotations

import subprocess
import sys

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from sklearn.base import clone

from icml26 import InputError
from icml26.eval.tasks import uhm as mazes
from icml26.training import uhm
from icml26.training.uhm import targets as tg


@pytest.mark.parametrize("env_id, cls", [("icml26/GridMaze-v0", mazes.GridMaze),
                                         ("icml26/PointMaze2D-v0", mazes.PointMaze2D)])
def test_registered_ids_make_envs_that_pass_check_env_and_take_constructor_kwargs(env_id, cls):
    env = gymnasium.make(env_id, size=9, seed=3)
    assert isinstance(env.unwrapped, cls)
    check_env(env.unwrapped, skip_render_check=True)
    grid = env.unwrapped if cls is mazes.GridMaze else env.unwrapped.grid
    same = mazes.GridMaze(size=9, seed=3)
    assert np.array_equal(grid.layout, same.layout) and grid.goal == same.goal
    assert not np.array_equal(grid.layout, mazes.GridMaze(size=9, seed=4).layout)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert "is_success" in info and not terminated
    limited = gymnasium.make(env_id, size=7, max_episode_steps=3)  # gymnasium's TimeLimit on top
    limited.reset(seed=0)
    assert [limited.step(limited.action_space.sample())[3] for _ in range(3)] == [False, False, True]


def test_the_module_prefix_registers_without_importing_the_task_module_first():
    code = ("import sys, gymnasium\n"
            "env = gymnasium.make('icml26.eval.tasks.uhm:icml26/GridMaze-v0', size=7)\n"
            "print(type(env.unwrapped).__name__, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["GridMaze", "False"]  # registering pulls in no torch


def test_a_custom_layout_and_goal():
    layout = np.zeros((3, 6), dtype=bool)
    layout[1, 1:5] = True  # a corridor of 4 cells
    env = mazes.GridMaze(layout=layout, goal=(1, 1), n_starts=3, slip=0.0)
    assert env.n_states == 4 and env.cells[env.goal] == (1, 1)
    assert sorted(env.distance.tolist()) == [0, 1, 2, 3]
    q = mazes.value_iteration(env.P, env.R, 0.9)
    assert mazes.success_rate(env, mazes.greedy_policy(q), horizon=3) == 1.0
    point = mazes.PointMaze2D(layout=layout, goal=(1, 4))
    assert point.observation_space.high.tolist() == [6.0, 6.0] and point.goal.tolist() == [1.0, 4.0]
    check_env(point, skip_render_check=True)


def test_a_single_transition_and_a_single_action_are_valid_data():
    data = {"observations": np.array([0]), "actions": np.array([0]), "next_observations": np.array([1])}
    model = uhm.TabularUHM(3).fit(data, np.ones((2, 1)))
    assert model.distribution(3).shape == (2, 1, 2)
    assert model.distribution(1)[0, 0].tolist() == [0.0, 1.0] and model.distribution(1)[1, 0].tolist() == [0.0, 1.0]


@pytest.mark.parametrize("estimator, params", [(uhm.TabularUHM(7), {"k_max": 7}),
                                               (uhm.TabularGHM(0.5), {"beta": 0.5}),
                                               (tg.TabularOneStepModel(), {})])
def test_tabular_models_are_scikit_learn_estimators(estimator, params):
    """``check_estimator`` does not apply (they fit transitions under a policy, not ``(X, y)``): clone and the
    parameter round trip do, and the parameters are validated in ``fit``, not in the constructor."""
    assert estimator.get_params() == params
    copy = clone(estimator)
    assert copy is not estimator and copy.get_params() == params
    for name in params:
        copy.set_params(**{name: 0})  # accepted until fit, as scikit-learn's estimators
        assert copy.get_params()[name] == 0
    env = mazes.GridMaze(size=7)
    data = mazes.collect_explore(env, 200, 20, seed=0)
    pi = np.full((env.n_states, env.n_actions), 0.2)
    args = (data, pi) if params else (data, env.n_states, env.n_actions)
    fitted = estimator.fit(*args)
    assert fitted is estimator and not hasattr(clone(fitted), "covered_")
    if params:
        bad = clone(estimator).set_params(**{next(iter(params)): -1})
        with pytest.raises(InputError, match=next(iter(params))):
            bad.fit(*args)
