"""UHM's continuous maze (PointMaze2D): dynamics, the navigate collector, the success measure and the
oracle controller's values that the PointMaze2D study compares each critic's start-state value with."""

import gymnasium as gym
import numpy as np
import pytest

from icml26 import InputError
from icml26.eval.tasks import uhm as mazes

G = 0.99


@pytest.fixture(scope="module")
def env():
    return mazes.PointMaze2D(size=15, seed=3)


def _to_goal(env):
    steer = mazes._BFSController(env, [env.grid.goal])
    return lambda pos: steer(pos, np.zeros(len(pos), dtype=int))


def test_is_a_gymnasium_env_whose_walls_hold_and_goal_absorbs(env):
    assert isinstance(env, gym.Env)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (2,) and env.free(obs[None])[0]
    rng = np.random.default_rng(0)
    pos = np.repeat(np.array(env.grid.cells, dtype=float), 5, axis=0)
    for _ in range(50):
        pos = env.step_batch(pos, rng.uniform(-1, 1, pos.shape), rng)
        assert env.free(pos).all()
    goal = np.repeat(env.goal[None], 8, axis=0)
    assert np.array_equal(env.step_batch(goal, rng.uniform(-1, 1, goal.shape), rng), goal)
    _, reward, terminated, truncated, info = env.step(np.zeros(2))
    assert reward in (0.0, 1.0) and not terminated and isinstance(info["is_success"], bool)


def test_navigate_data_rewards_are_the_goal_indicator_of_the_state(env):
    data = mazes.collect_pointmaze_navigate(env, 3000, episode_length=300, seed=1)
    assert data["observations"].shape == data["next_observations"].shape == data["actions"].shape == (3000, 2)
    assert np.array_equal(data["rewards"], env.in_goal(data["observations"]).astype(float))
    assert np.abs(data["actions"]).max() <= 1.0
    step = np.linalg.norm(data["next_observations"] - data["observations"], axis=1)
    assert step.max() <= np.sqrt(2) * env.step_size + 6 * env.noise


def test_the_shortest_path_controller_succeeds_and_standing_still_does_not(env):
    assert mazes.pointmaze_success(env, _to_goal(env), horizon=400) == 1.0
    assert mazes.pointmaze_success(env, lambda pos: np.zeros_like(pos), horizon=400) == 0.0


def test_oracle_values_closed_forms():
    """In the goal the value is 1 / (1 - gamma); without noise it is gamma^T / (1 - gamma) with T between
    the steps a 0.4-per-step Manhattan move needs and five steps per cell of the BFS path."""
    quiet = mazes.PointMaze2D(size=15, seed=3, noise=0.0)
    v = mazes.pointmaze_oracle_values(quiet, G, rollouts=1)
    d = mazes.bfs_distances(quiet.grid.layout, quiet.grid.cells[quiet.grid.goal])
    k = np.array([d[tuple(quiet.grid.cells[s])] for s in quiet.grid.start_states])
    T = np.log(v * (1 - G)) / np.log(G)
    assert np.allclose(T, np.rint(T), atol=1e-6)
    assert (T >= (k - 0.5) / 0.4 - 1e-9).all() and (T <= 5 * k).all()
    quiet.start_states = quiet.goal[None].copy()
    assert mazes.pointmaze_oracle_values(quiet, G, rollouts=1) == pytest.approx([1 / (1 - G)], rel=1e-12)
    # the value falls with the distance to the goal (noise kept)
    noisy = mazes.PointMaze2D(size=15, seed=3)
    v = mazes.pointmaze_oracle_values(noisy, G, rollouts=8, seed=0)
    assert np.corrcoef(k, v)[0, 1] < -0.9


@pytest.mark.parametrize("kwargs, name", [({"gamma": 1.0}, "gamma"), ({"horizon": 0}, "horizon"),
                                          ({"rollouts": 0}, "rollouts")])
def test_oracle_values_bad_input(env, kwargs, name):
    with pytest.raises(InputError, match=name):
        mazes.pointmaze_oracle_values(env, **{"gamma": G, **kwargs})


def test_simulate_horizons_is_the_true_n_step_law():
    """Row i lands where ``horizons[i]`` steps of the dynamics take it: ``n = 1`` is one ``step_batch`` on the
    same noise stream; without noise each row matches its own step-by-step rollout, and ``n`` matters."""
    env = mazes.PointMaze2D(size=9, seed=1)
    pos = np.repeat(env.start_states[:4], 2, axis=0)
    first = np.tile([[0.5, -0.5], [1.0, 1.0]], (4, 1))
    ones = np.ones(len(pos), dtype=int)
    act = lambda p: np.tile([[0.3, 0.9]], (len(p), 1))  # noqa: E731
    got = mazes.simulate_horizons(env, pos, first, ones, act, np.random.default_rng(3))
    assert np.array_equal(got, env.step_batch(pos, first, np.random.default_rng(3)))
    quiet = mazes.PointMaze2D(size=9, seed=1, noise=0.0)
    n = np.arange(1, len(pos) + 1)
    got = mazes.simulate_horizons(quiet, pos, first, n, act, np.random.default_rng(0))
    for i in range(len(pos)):
        p, a = pos[i:i + 1], first[i:i + 1]
        for _ in range(n[i]):
            p = quiet.step_batch(p, a, np.random.default_rng(0))
            a = act(p)
        assert np.allclose(got[i], p[0])
    assert not np.allclose(got, mazes.simulate_horizons(quiet, pos, first, ones, act, np.random.default_rng(0)))
    assert quiet.free(got).all()
