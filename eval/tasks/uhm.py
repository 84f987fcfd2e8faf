"""Generated mazes for offline RL with universal horizon models (UHM, arXiv 2605.15603).

OGBench's mazes (the paper's benchmark) download their datasets at run time, so the UHM experiment
builds its own: a tabular :class:`GridMaze` with exact ground truth (``P``, ``Q*``, ``Q^pi``,
``P_pi^n``, greedy success) and a continuous :class:`PointMaze2D` in numpy on the same cell map,
both ``gymnasium.Env``. Datasets are collected by an "explore" (uniform random actions) and a
"navigate" (BFS towards random subgoals with epsilon action noise, as OGBench's navigate data)
collector and returned as dicts of numpy arrays, the only thing the learners see.

Reconstruction: the maze generator (a seeded depth-first-search maze on a ``(size - 1) / 2`` grid
of rooms with a few extra openings, so there are loops), the slip model (with probability ``slip`` the
action is replaced by a uniformly random one), the goal (an end of the maze's longest shortest
path) and the named start states (free cells at evenly spaced BFS distances from the goal).

Rewards are functions of the state, as in OGBench's singletask tasks: ``reward="sparse"`` (the one the
UHM claims use) is ``1`` at the goal and ``0`` elsewhere, ``reward="step"`` is ``-1`` off the goal and
``0`` at it. The goal is absorbing. With ``w_xi ~= 16`` (winsorized weights at gamma 0.99, lambda 0.95)
dense ``-1`` rewards make one-sample targets noisy (SD ~13 at ``|Q| ~ 25``); the sparse reward keeps
``R(s_e) = 0`` off the goal.
"""

from __future__ import annotations

from collections import deque
from typing import Any

import gymnasium as gym
import numpy as np

from icml26.errors import InputError, InputTypeError, described, input_error
from icml26.errors import describe as describe_value

# The checks of tabular inputs and the policies of a Q table are shared with the learners; importable from here too.
from icml26.training.uhm.data import ROW_TOL as ROW_TOL
from icml26.training.uhm.data import check_layout, check_policy, check_position, transition_arrays
from icml26.training.uhm.data import greedy_policy as greedy_policy
from icml26.training.uhm.data import uniform_tie_policy as uniform_tie_policy
from icml26.training.uhm.exact import horizon_distributions as horizon_distributions
from icml26.training.uhm.exact import policy_q as policy_q
from icml26.training.uhm.exact import value_iteration as value_iteration
from icml26.validation import check_choice, check_finite, check_int

#: Actions of GridMaze: stay, up, down, left, right (row, column moves).
MOVES = np.array([(0, 0), (-1, 0), (1, 0), (0, -1), (0, 1)])
REWARDS = ("sparse", "step")
#: The gymnasium ids under which importing this module registers the mazes (see :func:`register_envs`).
ENV_IDS = {"GridMaze": "icml26/GridMaze-v0", "PointMaze2D": "icml26/PointMaze2D-v0"}


def _layout_arguments(function: str, size: Any, seed: Any, extra_openings: Any) -> tuple[int, int, int]:
    """The checked ``size`` (odd, >= 5: rooms sit at odd coordinates), ``seed`` and ``extra_openings``."""
    size = check_int(function, "size", size, low=5)
    if size % 2 == 0:
        raise input_error(function, "size", "an odd int >= 5 (rooms sit at odd coordinates)", size)
    return size, check_int(function, "seed", seed, low=0), check_int(function, "extra_openings", extra_openings, low=0)


def generate_layout(size: int = 15, seed: int = 0, extra_openings: int = 6) -> np.ndarray:
    """A ``size x size`` boolean maze (True = free): seeded DFS over rooms at odd coordinates, plus
    ``extra_openings`` removed inner walls between two rooms (loops)."""
    size, seed, extra_openings = _layout_arguments("generate_layout", size, seed, extra_openings)
    rng = np.random.default_rng(seed)
    free = np.zeros((size, size), dtype=bool)
    rooms = (size - 1) // 2
    seen = np.zeros((rooms, rooms), dtype=bool)
    stack = [(0, 0)]
    seen[0, 0] = True
    free[1, 1] = True
    while stack:
        r, c = stack[-1]
        options = [(r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
                   if 0 <= r + dr < rooms and 0 <= c + dc < rooms and not seen[r + dr, c + dc]]
        if not options:
            stack.pop()
            continue
        nr, nc = options[rng.integers(len(options))]
        seen[nr, nc] = True
        free[2 * nr + 1, 2 * nc + 1] = True
        free[r + nr + 1, c + nc + 1] = True
        stack.append((nr, nc))
    walls = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)
             if not free[r, c] and (r % 2) != (c % 2)]
    for i in rng.permutation(len(walls))[:extra_openings]:
        free[walls[i]] = True
    return free


def bfs_distances(free: np.ndarray, source: tuple[int, int]) -> np.ndarray:
    """Shortest-path lengths (4-neighbour moves) from ``source`` to every cell; -1 where unreachable."""
    dist = np.full(free.shape, -1, dtype=np.int64)
    dist[source] = 0
    queue = deque([source])
    while queue:
        r, c = queue.popleft()
        for dr, dc in MOVES[1:]:
            nr, nc = r + dr, c + dc
            if 0 <= nr < free.shape[0] and 0 <= nc < free.shape[1] and free[nr, nc] and dist[nr, nc] < 0:
                dist[nr, nc] = dist[r, c] + 1
                queue.append((nr, nc))
    return dist


class GridMaze(gym.Env):
    """A tabular maze: ``S`` free cells (about 100 at ``size=15``), 5 actions, slip, absorbing goal.

    ``P[s, a, s']``, ``R[s, a]`` (state-based, see the module docstring), ``goal`` (a cell index),
    ``start_states`` (``n_starts`` cells at evenly spaced BFS distances from the goal), ``distance``
    (BFS distance of every cell to the goal) and ``cells`` (the ``(row, col)`` of each index).
    The cell map is :func:`generate_layout` ``(size, seed, extra_openings)`` unless ``layout`` (a 2-d boolean
    array, True = free, its free cells connected) is given; ``goal`` (a free ``(row, col)``) replaces the
    default goal, an end of the maze's longest shortest path.
    As a ``gymnasium.Env``: ``Discrete(S)`` observations, ``Discrete(5)`` actions; ``reset`` starts
    at a uniformly random free cell (or ``options={"state": s}``); the episode never terminates
    (the goal is absorbing) and is truncated at ``max_episode_steps``; ``info["is_success"]`` says
    whether the new state is the goal.
    """

    metadata = {"render_modes": []}

    def __init__(self, size: int = 15, seed: int = 0, slip: float = 0.1, reward: str = "sparse",
                 extra_openings: int = 6, n_starts: int = 10, max_episode_steps: int = 200, *,
                 layout=None, goal: tuple[int, int] | None = None) -> None:
        slip = check_finite("GridMaze", "slip", slip, low=0, high=1, high_open=True)
        check_choice("GridMaze", "reward", reward, REWARDS)
        n_starts = check_int("GridMaze", "n_starts", n_starts, low=1)
        max_episode_steps = check_int("GridMaze", "max_episode_steps", max_episode_steps, low=1)
        if layout is None:
            self.layout = generate_layout(*_layout_arguments("GridMaze", size, seed, extra_openings))
        else:
            self.layout = check_layout("GridMaze", layout)
        self.slip, self.reward_kind, self.max_episode_steps = float(slip), reward, int(max_episode_steps)
        self.cells = [tuple(int(v) for v in rc) for rc in np.argwhere(self.layout)]
        self.index = {rc: i for i, rc in enumerate(self.cells)}
        S, A = len(self.cells), len(MOVES)
        self.n_states, self.n_actions = S, A
        # the goal: one end of the maze's longest shortest path (farthest from the cell farthest from the centre)
        height, width = self.layout.shape
        centre = min(self.cells, key=lambda rc: abs(rc[0] - height // 2) + abs(rc[1] - width // 2))
        from_centre = bfs_distances(self.layout, centre)
        far = max(self.cells, key=lambda rc: (from_centre[rc], rc))
        from_far = bfs_distances(self.layout, far)
        if goal is None:
            self.goal = self.index[max(self.cells, key=lambda rc: (from_far[rc], rc))]
        else:
            try:
                cell = tuple(int(v) for v in goal)
            except (TypeError, ValueError):
                cell = None
            if cell is None or cell not in self.index:
                raise input_error("GridMaze", "goal", "the (row, col) of a free cell of the layout", goal)
            self.goal = self.index[cell]
        dist = bfs_distances(self.layout, self.cells[self.goal])
        self.distance = np.array([dist[rc] for rc in self.cells])
        # Deterministic moves, then slip: with probability `slip` the action is a uniformly random one.
        move = np.zeros((S, A), dtype=np.int64)
        for s, (r, c) in enumerate(self.cells):
            for a, (dr, dc) in enumerate(MOVES):
                move[s, a] = self.index.get((r + dr, c + dc), s)
        move[self.goal] = self.goal
        self.move = move
        det = np.zeros((S, A, S))
        det[np.arange(S)[:, None], np.arange(A)[None, :], move] = 1.0
        self.P = (1 - self.slip) * det + self.slip * det.mean(axis=1, keepdims=True)
        at_goal = (np.arange(S) == self.goal).astype(float)
        self.R = np.repeat((at_goal if reward == "sparse" else at_goal - 1.0)[:, None], A, axis=1)
        others = np.flatnonzero(np.arange(S) != self.goal)
        order = others[np.argsort(self.distance[others], kind="stable")]
        picks = np.unique(np.linspace(0, len(order) - 1, n_starts + 1).round().astype(int)[1:])
        self.start_states = order[picks]
        self.observation_space = gym.spaces.Discrete(S)
        self.action_space = gym.spaces.Discrete(A)
        self._state, self._t = 0, 0

    def reward_fn(self, states, actions=None) -> np.ndarray:
        """``R(s, a)`` at (imagined) states: the known reward function the learners may call."""
        return self.R[np.asarray(states), 0 if actions is None else np.asarray(actions)]

    # -- gymnasium ----------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        state = (options or {}).get("state")
        if state is not None:
            state = check_int("GridMaze.reset", "options['state']", state, low=0, high=self.n_states - 1)
        super().reset(seed=seed)
        self._state = int(self.np_random.integers(self.n_states)) if state is None else int(state)
        self._t = 0
        return self._state, {}

    def step(self, action):
        """One slippery move: returns ``(state, reward, terminated, truncated, info)``.

        The reward is ``R(s, a)`` of the state the move starts from; ``terminated`` is always False
        (the goal is absorbing); ``truncated`` is True once ``max_episode_steps`` steps are taken;
        ``info["is_success"]`` says whether the new state is the goal.
        """
        if not self.action_space.contains(action):
            raise input_error("GridMaze.step", "action", f"an int in [0, {self.n_actions - 1}]", action)
        s, a = self._state, int(action)
        reward = float(self.R[s, a])
        self._state = int(self.np_random.choice(self.n_states, p=self.P[s, a]))
        self._t += 1
        return self._state, reward, False, self._t >= self.max_episode_steps, {"is_success": self._state == self.goal}


# ----------------------------------------------------------------------------------------------
# datasets
# ----------------------------------------------------------------------------------------------
def _check_collect(function: str, env: Any, kind: type, n_transitions: Any, episode_length: Any,
                   seed: Any) -> tuple[int, int]:
    if not isinstance(env, kind):
        raise InputTypeError(function, "env", f"a {kind.__name__}", described(type(env).__name__))
    if seed is not None:
        check_int(function, "seed", seed, low=0)
    return (check_int(function, "n_transitions", n_transitions, low=1),
            check_int(function, "episode_length", episode_length, low=1))


def _episodes(env: GridMaze, n_transitions: int, episode_length: int, choose, seed) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n_ep = -(-n_transitions // episode_length)
    S = env.n_states
    cdf = np.cumsum(env.P, axis=-1)
    obs = np.empty((n_ep, episode_length), dtype=np.int64)
    act = np.empty_like(obs)
    nxt = np.empty_like(obs)
    s = rng.integers(S, size=n_ep)
    context = {"subgoal": rng.integers(S, size=n_ep)}
    for t in range(episode_length):
        a = choose(s, t, rng, context)
        u = rng.random(n_ep)
        s2 = np.minimum((cdf[s, a] < u[:, None]).sum(axis=1), S - 1)
        obs[:, t], act[:, t], nxt[:, t] = s, a, s2
        s = s2
    keep = slice(0, n_transitions)
    episode = np.repeat(np.arange(n_ep), episode_length)
    timestep = np.tile(np.arange(episode_length), n_ep)
    flat = {"observations": obs.reshape(-1), "actions": act.reshape(-1), "next_observations": nxt.reshape(-1),
            "episode": episode, "timestep": timestep}
    out = {k: v[keep].copy() for k, v in flat.items()}
    out["rewards"] = env.R[out["observations"], out["actions"]]
    # the last transition of an episode (also one cut by n_transitions) has no successor in the data
    last = np.ones(len(out["episode"]), dtype=bool)
    last[:-1] = out["episode"][1:] != out["episode"][:-1]
    out["episode_end"] = last
    return out


def collect_explore(env: GridMaze, n_transitions: int = 50_000, episode_length: int = 200,
                    seed: int = 0) -> dict[str, np.ndarray]:
    """"explore" data: uniformly random actions, episodes of ``episode_length`` from uniform starts."""
    n_transitions, episode_length = _check_collect("collect_explore", env, GridMaze, n_transitions, episode_length,
                                                   seed)
    return _episodes(env, n_transitions, episode_length,
                     lambda s, t, rng, ctx: rng.integers(env.n_actions, size=len(s)), seed)


def collect_navigate(env: GridMaze, n_transitions: int = 50_000, episode_length: int = 200,
                     epsilon: float = 0.3, seed: int = 0) -> dict[str, np.ndarray]:
    """"navigate" data: BFS moves towards a random subgoal (a new one when reached), with
    probability ``epsilon`` a uniformly random action instead (OGBench's navigate, tabular)."""
    n_transitions, episode_length = _check_collect("collect_navigate", env, GridMaze, n_transitions, episode_length,
                                                   seed)
    epsilon = check_finite("collect_navigate", "epsilon", epsilon, low=0, high=1)
    S = env.n_states
    rows, cols = np.array(env.cells).T
    dist_to = np.stack([bfs_distances(env.layout, env.cells[g])[rows, cols] for g in range(S)])
    best = np.argmin(dist_to[:, env.move], axis=-1)  # [goal, s]: the move that gets closest to goal

    def choose(s, t, rng, ctx):
        reached = s == ctx["subgoal"]
        ctx["subgoal"][reached] = rng.integers(S, size=int(reached.sum()))
        a = best[ctx["subgoal"], s]
        noisy = rng.random(len(s)) < epsilon
        a[noisy] = rng.integers(env.n_actions, size=int(noisy.sum()))
        return a

    return _episodes(env, n_transitions, episode_length, choose, seed)


# ----------------------------------------------------------------------------------------------
# exact ground truth: value_iteration, policy_q, horizon_distributions (icml26.training.uhm.exact)
# ----------------------------------------------------------------------------------------------
def success_rate(env: GridMaze, policy, horizon: int = 100, starts=None) -> float:
    """Exact probability of being at the (absorbing) goal after ``horizon`` steps, averaged over
    ``starts`` (default ``env.start_states``): no rollout noise."""
    if not isinstance(env, GridMaze):
        raise InputTypeError("success_rate", "env", "a GridMaze", described(type(env).__name__))
    policy = check_policy("success_rate", policy, env.n_states, env.n_actions)
    horizon = check_int("success_rate", "horizon", horizon, low=0)
    starts = env.start_states if starts is None else np.asarray(starts)
    if starts.ndim != 1 or starts.size == 0 or not np.issubdtype(starts.dtype, np.integer) \
            or starts.min() < 0 or starts.max() >= env.n_states:
        raise input_error("success_rate", "starts", f"a non-empty 1-d array of states in [0, {env.n_states - 1}]",
                          describe_value(starts) if starts.ndim != 1 or not starts.size else starts.tolist())
    kernel = np.einsum("sa,sax->sx", policy, env.P)
    d = np.zeros((len(starts), env.n_states))
    d[np.arange(len(starts)), starts] = 1.0
    for _ in range(horizon):
        d = d @ kernel
    return float(d[:, env.goal].mean())


def empirical_model(data: dict[str, np.ndarray], n_states: int, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """Counts ``N[s, a, s']`` of the data's transitions and the covered mask ``N[s, a].sum() > 0``."""
    n_states = check_int("empirical_model", "n_states", n_states, low=1)
    n_actions = check_int("empirical_model", "n_actions", n_actions, low=1)
    s, a, s2 = transition_arrays("empirical_model", data, n_states, n_actions, "data")
    counts = np.zeros((n_states, n_actions, n_states))
    np.add.at(counts, (s, a, s2), 1.0)
    return counts, counts.sum(-1) > 0


def tv_distance(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Total-variation distance ``0.5 sum |p - q|`` over the last axis."""
    return 0.5 * np.abs(np.asarray(p) - np.asarray(q)).sum(-1)


def describe(env: GridMaze) -> dict[str, Any]:
    """Size, goal and start states of a maze, for reports."""
    return {"cells": env.n_states, "goal": env.cells[env.goal], "max_distance": int(env.distance.max()),
            "start_states": [env.cells[s] for s in env.start_states],
            "start_distances": [int(env.distance[s]) for s in env.start_states]}


# ----------------------------------------------------------------------------------------------
# continuous maze
# ----------------------------------------------------------------------------------------------
class PointMaze2D(gym.Env):
    """A point mass in GridMaze's cell map (numpy, no physics engine): position ``(row, col)`` in cell
    units (a free cell ``c`` is the square of side 1 around ``c``), action ``a in [-1, 1]^2`` moved by
    ``step_size * a + N(0, noise^2)``; a move into a wall is undone per axis. The goal region is the goal
    cell's disc of radius ``goal_radius``, absorbing (the point stops there); the sparse reward
    ``1[in goal]`` is a function of the state. ``start_states`` are the GridMaze's named start cells.

    ``size``, ``seed``, ``layout`` and ``goal`` make the cell map as :class:`GridMaze` does.

    Reconstruction: OGBench's pointmaze runs in MuJoCo; this is its geometry at CPU scale.
    """

    metadata = {"render_modes": []}

    def __init__(self, size: int = 15, seed: int = 0, step_size: float = 0.2, noise: float = 0.05,
                 goal_radius: float = 0.5, max_episode_steps: int = 500, *, layout=None,
                 goal: tuple[int, int] | None = None) -> None:
        fn = "PointMaze2D"
        self.step_size = check_finite(fn, "step_size", step_size, positive=True)
        self.noise = check_finite(fn, "noise", noise, non_negative=True)
        self.goal_radius = check_finite(fn, "goal_radius", goal_radius, positive=True)
        self.max_episode_steps = check_int(fn, "max_episode_steps", max_episode_steps, low=1)
        if layout is None:
            size, seed, _ = _layout_arguments(fn, size, seed, 6)
        else:
            layout = check_layout(fn, layout)
        try:
            self.grid = GridMaze(size=size, seed=seed, layout=layout, goal=goal)
        except InputError as exc:  # the same argument of this constructor
            raise input_error(fn, exc.argument, exc.expected, exc.got) from None
        self.layout = self.grid.layout
        self.goal = np.array(self.grid.cells[self.grid.goal], dtype=float)
        self.start_states = np.array([self.grid.cells[s] for s in self.grid.start_states], dtype=float)
        hi = float(max(self.layout.shape))
        self.observation_space = gym.spaces.Box(0.0, hi, shape=(2,), dtype=np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, shape=(2,), dtype=np.float64)
        self._pos, self._t = self.start_states[0].copy(), 0

    def free(self, pos: np.ndarray) -> np.ndarray:
        """Whether positions ``[..., 2]`` lie in free cells."""
        cell = np.rint(pos).astype(int)
        inside = (cell >= 0).all(-1) & (cell < np.array(self.layout.shape)).all(-1)
        cell = np.clip(cell, 0, np.array(self.layout.shape) - 1)
        return inside & self.layout[cell[..., 0], cell[..., 1]]

    def in_goal(self, pos) -> np.ndarray:
        return np.linalg.norm(np.asarray(pos) - self.goal, axis=-1) < self.goal_radius

    def reward_fn(self, states, actions=None) -> np.ndarray:
        """The sparse reward ``1[state in the goal disc]`` (vectorised)."""
        return self.in_goal(states).astype(float)

    def step_batch(self, pos: np.ndarray, actions: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Vectorised dynamics for positions ``[B, 2]`` and actions ``[B, 2]``."""
        a = np.clip(actions, -1.0, 1.0)
        move = self.step_size * a + self.noise * rng.standard_normal(pos.shape)
        new = pos.copy()
        for axis in (0, 1):
            trial = new.copy()
            trial[:, axis] += move[:, axis]
            ok = self.free(trial)
            new[ok] = trial[ok]
        stuck = self.in_goal(pos)
        new[stuck] = pos[stuck]
        return new

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        state = (options or {}).get("state")
        if state is not None:
            pos = check_position("PointMaze2D.reset", "options['state']", state)
            if not self.free(pos[None])[0]:
                raise input_error("PointMaze2D.reset", "options['state']", "a position (row, col) in a free cell",
                                  pos.tolist())
        super().reset(seed=seed)
        if state is None:
            cells = np.array(self.grid.cells, dtype=float)
            pos = cells[self.np_random.integers(len(cells))]
        self._pos, self._t = np.asarray(pos, dtype=float).copy(), 0
        return self._pos.copy(), {}

    def step(self, action):
        """One noisy move: returns ``(position, reward, terminated, truncated, info)``.

        The reward is ``1[in goal]`` of the position the move starts from; ``terminated`` is always
        False (the goal region is absorbing); ``truncated`` is True once ``max_episode_steps`` steps are
        taken; ``info["is_success"]`` says whether the new position is in the goal region.
        """
        action = check_position("PointMaze2D.step", "action", action)
        reward = float(self.in_goal(self._pos))
        self._pos = self.step_batch(self._pos[None], action[None], self.np_random)[0]
        self._t += 1
        return self._pos.copy(), reward, False, self._t >= self.max_episode_steps, {"is_success": bool(self.in_goal(self._pos))}


class _BFSController:
    """Steer a PointMaze2D position towards the centre of the next cell on a shortest cell path to a
    target cell: the "navigate" collector's controller (random subgoals) and, towards the goal without
    noise, the oracle of :func:`pointmaze_oracle_values`."""

    def __init__(self, env: PointMaze2D, targets) -> None:
        grid = self.grid = env.grid
        self.step_size = env.step_size
        rows, cols = np.array(grid.cells).T
        dist_to = np.stack([bfs_distances(grid.layout, grid.cells[g])[rows, cols] for g in targets])
        self.best = np.argmin(dist_to[:, grid.move], axis=-1)  # [target, cell] -> action
        self.centres = np.array(grid.cells, dtype=float)

    def cell(self, pos: np.ndarray) -> np.ndarray:
        return np.array([self.grid.index.get(tuple(c), 0) for c in np.rint(pos).astype(int)])

    def __call__(self, pos: np.ndarray, target: np.ndarray, cell: np.ndarray | None = None) -> np.ndarray:
        """Actions ``[B, 2]`` for positions ``[B, 2]``; ``target[B]`` indexes the controller's targets;
        ``cell``: the positions' cell indices when the caller has them already."""
        cell = self.cell(pos) if cell is None else cell
        goal_centre = self.centres[self.grid.move[cell, self.best[target, cell]]]
        return np.clip((goal_centre - pos) / self.step_size, -1, 1)


def pointmaze_oracle_values(env: PointMaze2D, gamma: float = 0.99, horizon: int = 1000, rollouts: int = 16,
                            seed: int = 0) -> np.ndarray:
    """Monte-Carlo values ``E[sum_t gamma^t 1[s_t in goal]]`` of the shortest-cell-path controller (no
    action noise, the environment's own noise kept) from each named start state: the reference for how
    far a critic's value has propagated. The controller is near-optimal, not optimal (it steers towards
    the next cell centre on a shortest cell path, not along the shortest continuous path), so its value
    is a slight underestimate of V*. The goal is
    absorbing, so the tail after ``horizon`` steps is ``gamma^horizon / (1 - gamma)`` for rollouts in it."""
    fn = "pointmaze_oracle_values"
    if not isinstance(env, PointMaze2D):
        raise InputTypeError(fn, "env", "a PointMaze2D", described(type(env).__name__))
    gamma = check_finite(fn, "gamma", gamma, low=0, high=1, low_open=True, high_open=True)
    horizon = check_int(fn, "horizon", horizon, low=1)
    rollouts = check_int(fn, "rollouts", rollouts, low=1)
    steer = _BFSController(env, [env.grid.goal])
    rng = np.random.default_rng(seed)
    pos = np.repeat(env.start_states, rollouts, axis=0)
    to_goal = np.zeros(len(pos), dtype=int)
    value = np.zeros(len(pos))
    for t in range(horizon):
        value += gamma ** t * env.in_goal(pos)
        pos = env.step_batch(pos, steer(pos, to_goal), rng)
    value += gamma ** horizon / (1.0 - gamma) * env.in_goal(pos)
    return value.reshape(len(env.start_states), rollouts).mean(1)


def collect_pointmaze_navigate(env: PointMaze2D, n_transitions: int = 100_000, episode_length: int = 500,
                               epsilon: float = 0.3, action_noise: float = 0.2, seed: int = 0) -> dict[str, np.ndarray]:
    """"navigate" data for PointMaze2D: head for the centre of the next BFS cell towards a random subgoal
    cell (a new subgoal when reached), with Gaussian action noise and, with probability ``epsilon``, a
    uniformly random action."""
    fn = "collect_pointmaze_navigate"
    n_transitions, episode_length = _check_collect(fn, env, PointMaze2D, n_transitions, episode_length, seed)
    epsilon = check_finite(fn, "epsilon", epsilon, low=0, high=1)
    action_noise = check_finite(fn, "action_noise", action_noise, non_negative=True)
    grid = env.grid
    rng = np.random.default_rng(seed)
    S = grid.n_states
    steer = _BFSController(env, range(S))
    centres = steer.centres
    n_ep = -(-n_transitions // episode_length)
    pos = centres[rng.integers(S, size=n_ep)]
    subgoal = rng.integers(S, size=n_ep)
    obs, act, nxt = (np.empty((n_ep, episode_length, 2)) for _ in range(3))
    for t in range(episode_length):
        cell = steer.cell(pos)
        reached = cell == subgoal
        subgoal[reached] = rng.integers(S, size=int(reached.sum()))
        a = steer(pos, subgoal, cell) + action_noise * rng.standard_normal(pos.shape)
        rand = rng.random(n_ep) < epsilon
        a[rand] = rng.uniform(-1, 1, size=(int(rand.sum()), 2))
        a = np.clip(a, -1, 1)
        new = env.step_batch(pos, a, rng)
        obs[:, t], act[:, t], nxt[:, t] = pos, a, new
        pos = new
    out = {"observations": obs.reshape(-1, 2)[:n_transitions], "actions": act.reshape(-1, 2)[:n_transitions],
           "next_observations": nxt.reshape(-1, 2)[:n_transitions],
           "episode": np.repeat(np.arange(n_ep), episode_length)[:n_transitions]}
    out["rewards"] = env.reward_fn(out["observations"])
    return out


def pointmaze_success(env: PointMaze2D, act, horizon: int = 300, rollouts: int = 4, seed: int = 0) -> float:
    """Share of rollouts of ``act(positions [B, 2]) -> actions [B, 2]`` from the named start cells that end
    in the goal disc within ``horizon`` steps (the goal is absorbing)."""
    fn = "pointmaze_success"
    if not isinstance(env, PointMaze2D):
        raise InputTypeError(fn, "env", "a PointMaze2D", described(type(env).__name__))
    if not callable(act):
        raise InputTypeError(fn, "act", "a callable positions [B, 2] -> actions [B, 2]", described(type(act).__name__))
    horizon = check_int(fn, "horizon", horizon, low=0)
    rollouts = check_int(fn, "rollouts", rollouts, low=1)
    rng = np.random.default_rng(seed)
    pos = np.repeat(env.start_states, rollouts, axis=0)
    for _ in range(horizon):
        actions = np.asarray(act(pos), dtype=float)
        if actions.shape != pos.shape:
            raise input_error(fn, "act", f"a callable returning actions of shape {pos.shape}",
                              described(f"an output {describe_value(actions)}"))
        pos = env.step_batch(pos, actions, rng)
    return float(env.in_goal(pos).mean())


def simulate_horizons(env: PointMaze2D, positions, actions, horizons, act, rng: np.random.Generator) -> np.ndarray:
    """Positions ``n`` steps after ``(s, a)`` in the true dynamics: the first move takes ``actions``, the
    next ``n - 1`` take ``act(positions)``. A draw from the true ``m^pi(. | s, a, n)`` of the policy ``act``
    (the quantity a universal horizon model learns, arXiv 2605.15603), for diagnosing a learned model and
    for an oracle reference arm; the learners never call it.

    Args:
        env: the PointMaze2D whose dynamics are simulated.
        positions: ``[B, 2]`` start positions ``s`` (row, col) in free cells.
        actions: ``[B, 2]`` first actions ``a`` (clipped to ``[-1, 1]`` as :meth:`PointMaze2D.step_batch` does).
        horizons: ``[B]`` integers ``n >= 1``.
        act: the policy, a callable ``positions [m, 2] -> actions [m, 2]``.
        rng: a ``numpy.random.Generator`` for the dynamics' noise.

    Returns ``[B, 2]`` positions, row ``i`` after ``horizons[i]`` steps.
    """
    fn = "simulate_horizons"
    if not isinstance(env, PointMaze2D):
        raise InputTypeError(fn, "env", "a PointMaze2D", described(type(env).__name__))
    pos = np.asarray(positions, dtype=float) if not isinstance(positions, (str, bytes)) else None
    if pos is None or pos.ndim != 2 or pos.shape[1] != 2 or not len(pos) or not np.isfinite(pos).all():
        raise input_error(fn, "positions", "finite positions of shape (B, 2), B >= 1", describe_value(positions))
    if not env.free(pos).all():
        raise input_error(fn, "positions", "positions in free cells", described(f"{int((~env.free(pos)).sum())} in walls"))
    first = np.asarray(actions, dtype=float) if not isinstance(actions, (str, bytes)) else None
    if first is None or first.shape != pos.shape or not np.isfinite(first).all():
        raise input_error(fn, "actions", f"finite actions of shape {pos.shape}", describe_value(actions))
    n = np.asarray(horizons)
    if n.shape != (len(pos),) or not np.issubdtype(n.dtype, np.integer) or n.min() < 1:
        raise input_error(fn, "horizons", f"{len(pos)} integers >= 1",
                          described(f"values in [{n.min()}, {n.max()}]") if n.shape == (len(pos),)
                          and np.issubdtype(n.dtype, np.integer) else describe_value(horizons))
    if not callable(act):
        raise InputTypeError(fn, "act", "a callable positions [B, 2] -> actions [B, 2]", described(type(act).__name__))
    if not isinstance(rng, np.random.Generator):
        raise InputTypeError(fn, "rng", "a numpy.random.Generator", described(type(rng).__name__))
    out = np.empty_like(pos)
    a = first
    for k in range(1, int(n.max()) + 1):
        pos = env.step_batch(pos, a, rng)
        done = n == k
        out[done] = pos[done]
        if k < n.max():
            a = np.asarray(act(pos), dtype=float)
            if a.shape != pos.shape:
                raise input_error(fn, "act", f"a callable returning actions of shape {pos.shape}",
                                  described(f"an output {describe_value(a)}"))
    return out


# ----------------------------------------------------------------------------------------------
# gymnasium registration
# ----------------------------------------------------------------------------------------------
def register_envs() -> None:
    """Register the mazes with gymnasium as :data:`ENV_IDS` (importing this module does): keyword arguments of
    ``gymnasium.make`` go to the constructor; ``gymnasium.make("icml26.eval.tasks.uhm:icml26/GridMaze-v0")`` imports
    this module itself (gymnasium 1.x has no plugin entry points). The mazes truncate at their own
    ``max_episode_steps``; ``gymnasium.make(..., max_episode_steps=k)`` adds a ``TimeLimit`` on top."""
    for name, env_id in ENV_IDS.items():
        if env_id not in gym.registry:
            gym.register(id=env_id, entry_point=f"{__name__}:{name}")


register_envs()
