"""Tasks of the multi-objective diffusion experiment (arXiv 2605.25210, reconstructed): conditional 2-D tasks whose
noised conditionals are Gaussian mixtures, so the exact epsilon (the DSM minimiser) and so the excess risk of any
model are known; the energy distance between sample sets; and a point-mass control environment for the
diffusion-policy study.

The 2-D tasks (the issue's): a condition ``c ~ N(0, I_d)``; task ``k`` reads only ``s_k = clamp(c . u_k, -1, 1)`` for
a fixed random unit vector ``u_k``. Task 0: two Gaussians at ``(s, +-0.8)``, sd 0.1. Task 1: eight Gaussians on a
circle of radius ``0.5 + 0.3 s``, sd 0.05 (Reconstruction: the spec's ring, made a mixture so the excess risk is
exact). Each is a mixture with equal weights of isotropic Gaussians ``N(mu_j(c), sd^2 I)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import gymnasium as gym
import numpy as np
import torch

from icml26.errors import describe, input_error
from icml26.validation import check_int

NUM_TASKS = 2


@dataclass(frozen=True)
class ConditionalTasks:
    """The two conditional 2-D tasks, fixed by ``seed`` (the directions ``u_k``).

    Args:
        cond_dim: the condition's dimension.
        seed: draws the unit vectors ``u_k``.
    """

    cond_dim: int = 8
    seed: int = 0

    def __post_init__(self) -> None:
        check_int("ConditionalTasks", "cond_dim", self.cond_dim, low=1)
        check_int("ConditionalTasks", "seed", self.seed, low=0)

    @cached_property
    def directions(self) -> np.ndarray:
        """``[K, cond_dim]`` unit vectors ``u_k``."""
        u = np.random.default_rng(self.seed).standard_normal((NUM_TASKS, self.cond_dim))
        return u / np.linalg.norm(u, axis=1, keepdims=True)

    def _task(self, task: int, fn: str) -> int:
        if isinstance(task, bool) or not isinstance(task, (int, np.integer)) or not 0 <= task < NUM_TASKS:
            raise input_error(fn, "task", f"a task id in [0, {NUM_TASKS})", task)
        return int(task)

    def _cond(self, cond, fn: str) -> np.ndarray:
        c = np.asarray(cond.detach().cpu() if isinstance(cond, torch.Tensor) else cond, dtype=np.float64)
        if c.ndim != 2 or c.shape[1] != self.cond_dim:
            raise input_error(fn, "cond", f"[n, {self.cond_dim}] conditions", describe(cond))
        return c

    def conditions(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """``n`` conditions ``c ~ N(0, I)`` (float64)."""
        return rng.standard_normal((check_int("ConditionalTasks.conditions", "n", n, low=0), self.cond_dim))

    def mixture(self, task: int, cond) -> tuple[np.ndarray, float]:
        """The conditional of ``task`` at each condition: means ``[n, M, 2]`` of its ``M`` equally weighted
        components, and their common standard deviation."""
        fn = "ConditionalTasks.mixture"
        task, c = self._task(task, fn), self._cond(cond, fn)
        s = np.clip(c @ self.directions[task], -1.0, 1.0)
        if task == 0:
            means = np.stack([np.stack([s, np.full_like(s, y)], 1) for y in (0.8, -0.8)], 1)
            return means, 0.1
        angles = 2 * math.pi * np.arange(8) / 8
        radius = (0.5 + 0.3 * s)[:, None]
        return np.stack([radius * np.cos(angles), radius * np.sin(angles)], 2), 0.05

    def sample(self, task: int, cond, rng: np.random.Generator) -> np.ndarray:
        """One target ``x ~ p_task(. | c)`` per condition, ``[n, 2]``."""
        means, sd = self.mixture(task, cond)
        pick = rng.integers(0, means.shape[1], size=means.shape[0])
        return means[np.arange(means.shape[0]), pick] + sd * rng.standard_normal((means.shape[0], 2))

    def true_epsilon(self, task: int, cond, x_t: torch.Tensor, alpha_bar: torch.Tensor) -> torch.Tensor:
        """The exact ``E[eps | x_t, c]`` of ``task``: the minimiser of its DSM risk at each timestep.

        ``x_t`` ``[n, 2]``; ``alpha_bar`` ``[n]`` the schedule's ``alphas_cumprod`` at each row's timestep. Computed
        in the dtype of ``x_t`` (float64 for tests)."""
        means, sd = self.mixture(task, cond)
        return mixture_epsilon(torch.as_tensor(means, dtype=x_t.dtype), sd, x_t, alpha_bar)

    def scalarized_epsilon(self, weights, cond, x_t: torch.Tensor, alpha_bar: torch.Tensor) -> torch.Tensor:
        """The minimiser of ``sum_k weights_k L_k`` over task-agnostic models (every task's conditions are
        ``N(0, I)``): the exact epsilon of the ``weights``-mixture of the tasks' conditionals."""
        w = np.asarray(weights, dtype=np.float64)
        if w.shape != (NUM_TASKS,) or (w < 0).any() or not math.isclose(w.sum(), 1.0, abs_tol=1e-9):
            raise input_error("ConditionalTasks.scalarized_epsilon", "weights", f"{NUM_TASKS} weights on the simplex",
                              weights)
        parts = [(self.mixture(k, cond), w[k]) for k in range(NUM_TASKS) if w[k] > 0]
        means = [torch.as_tensor(m, dtype=x_t.dtype) for (m, _), _ in parts]
        sds = [torch.full(m.shape[:2], sd, dtype=x_t.dtype) for (m, sd), _ in parts]
        logw = [torch.full(m.shape[:2], math.log(wk / m.shape[1]), dtype=x_t.dtype) for (m, _), wk in parts]
        return mixture_epsilon(torch.cat(means, 1), torch.cat(sds, 1), x_t, alpha_bar, torch.cat(logw, 1))


def mixture_epsilon(means: torch.Tensor, sd, x_t: torch.Tensor, alpha_bar: torch.Tensor,
                    log_weights: torch.Tensor | None = None) -> torch.Tensor:
    """``E[eps | x_t]`` when ``x_0`` is the Gaussian mixture ``sum_j w_j N(means_j, sd_j^2 I)`` and
    ``x_t = sqrt(abar) x_0 + sqrt(1 - abar) eps``: ``-sqrt(1 - abar) grad log p_t(x_t)``, with ``p_t`` the mixture
    of ``N(sqrt(abar) mu_j, (abar sd_j^2 + 1 - abar) I)``.

    Args:
        means: ``[n, M, D]`` component means per row.
        sd: a float or ``[n, M]`` component standard deviations.
        x_t: ``[n, D]`` noised samples.
        alpha_bar: ``[n]`` cumulative alphas.
        log_weights: ``[n, M]`` log mixture weights (default: equal).
    """
    ab = alpha_bar.to(x_t.dtype)[:, None]
    var = ab * torch.as_tensor(sd, dtype=x_t.dtype) ** 2 + (1 - ab)          # [n, M] (or [n, 1])
    diff = x_t[:, None, :] - ab.sqrt()[:, :, None] * means                 # [n, M, D]
    d = x_t.shape[1]
    logp = -0.5 * diff.square().sum(2) / var - 0.5 * d * torch.log(var)
    if log_weights is not None:
        logp = logp + log_weights
    post = torch.softmax(logp, dim=1)                                      # component responsibilities
    score = -(post[:, :, None] * diff / var[:, :, None]).sum(1)
    return -(1 - ab).sqrt() * score


def energy_distance(a, b) -> float:
    """The energy distance ``2 E|X - Y| - E|X - X'| - E|Y - Y'|`` between two sample sets ``[n, D]`` and ``[m, D]``
    (the V-statistic; 0 for identical sets). Written here because scipy's covers one dimension only."""
    a = torch.as_tensor(np.asarray(a), dtype=torch.float64)
    b = torch.as_tensor(np.asarray(b), dtype=torch.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1] or not len(a) or not len(b):
        raise input_error("energy_distance", "a, b", "two non-empty [n, D] sample sets of one dimension",
                          f"{describe(a)} and {describe(b)}")
    return float(2 * torch.cdist(a, b).mean() - torch.cdist(a, a).mean() - torch.cdist(b, b).mean())


# ----------------------------------------------------------------------------------------------
# the point mass (the diffusion-policy study)
# ----------------------------------------------------------------------------------------------
#: Per layout: start, goal, obstacle centre, obstacle radius (Reconstruction of the spec's "K = 3 environments
#: differing in goal location and obstacle layout").
LAYOUTS = (
    ((-0.8, 0.0), (0.8, 0.0), (0.0, 0.0), 0.25),
    ((0.0, -0.8), (0.0, 0.8), (0.0, 0.05), 0.25),
    ((-0.7, -0.6), (0.7, 0.6), (0.05, 0.0), 0.3),
)
DT, DAMPING, MAX_ACCEL = 0.1, 1.0, 3.0
GOAL_RADIUS, MAX_STEPS, ARENA = 0.1, 80, 1.2
OBS_STEPS, HORIZON, ACTION_STEPS = 2, 8, 4   # observation history, action chunk, actions executed per chunk


def point_mass_step(pos: np.ndarray, vel: np.ndarray, action: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One step of the damped point mass for a batch (``[n, 2]`` each): ``action`` in ``[-1, 1]^2`` is the
    acceleration over ``MAX_ACCEL``; ``v += dt (MAX_ACCEL a - DAMPING v)``, ``p += dt v``."""
    vel = vel + DT * (MAX_ACCEL * np.clip(action, -1.0, 1.0) - DAMPING * vel)
    return pos + DT * vel, vel


class PointMassEnv(gym.Env):
    """A 2-D point mass that must reach a goal around a round obstacle within ``MAX_STEPS`` steps.

    Observation: position and velocity ``(4,)``; action: normalised acceleration in ``[-1, 1]^2``. The episode
    ends with success (within ``GOAL_RADIUS`` of the goal: reward 1), a collision or leaving the arena
    (terminated, reward 0), or after ``MAX_STEPS`` steps (truncated). ``info["success"]`` and
    ``info["collision"]`` say which.

    Args:
        layout: which of the three :data:`LAYOUTS`.
    """

    metadata = {"render_modes": []}

    def __init__(self, layout: int = 0) -> None:
        if isinstance(layout, bool) or not isinstance(layout, (int, np.integer)) or not 0 <= layout < len(LAYOUTS):
            raise input_error("PointMassEnv", "layout", f"an int in [0, {len(LAYOUTS)})", layout)
        self.layout = int(layout)
        # positions end an episode beyond the arena; speeds stay below the terminal MAX_ACCEL / DAMPING
        bound = np.array([ARENA + 1.0, ARENA + 1.0, MAX_ACCEL / DAMPING, MAX_ACCEL / DAMPING])
        self.observation_space = gym.spaces.Box(-bound, bound, (4,), np.float64)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """A new episode: the layout's start plus uniform noise of +-0.05, at rest; returns ``(obs, {})``."""
        super().reset(seed=seed)
        start = np.asarray(LAYOUTS[self.layout][0])
        self.pos = start + self.np_random.uniform(-0.05, 0.05, 2)
        self.vel = np.zeros(2)
        self.t = 0
        return np.concatenate([self.pos, self.vel]), {}

    def step(self, action):
        """One step of :func:`point_mass_step`; returns ``(obs, reward, terminated, truncated, info)``."""
        pos, vel = point_mass_step(self.pos[None], self.vel[None], np.asarray(action, dtype=np.float64)[None])
        self.pos, self.vel, self.t = pos[0], vel[0], self.t + 1
        success, collision = (bool(v[0]) for v in episode_status(self.layout, pos))
        obs = np.concatenate([self.pos, self.vel])
        info = {"success": success, "collision": collision}
        return obs, float(success), success or collision, self.t >= MAX_STEPS and not (success or collision), info


def episode_status(layout: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(success, collision)`` of a batch of positions ``[n, 2]`` in ``layout`` (leaving the arena counts as a
    collision)."""
    _, goal, centre, radius = LAYOUTS[layout]
    success = np.linalg.norm(pos - np.asarray(goal), axis=1) < GOAL_RADIUS
    collision = (np.linalg.norm(pos - np.asarray(centre), axis=1) < radius) | (np.abs(pos) > ARENA).any(1)
    return success & ~collision, collision


class ScriptedExpert:
    """The multimodal expert: PD control to a waypoint beside the obstacle (left or right, drawn per episode),
    then to the goal; its actions in ``[-1, 1]^2`` (Reconstruction of the spec's "PD control plus a random
    left/right detour")."""

    def __init__(self, layout: int, side: np.ndarray) -> None:
        start, goal, centre = (np.asarray(v, dtype=np.float64) for v in LAYOUTS[layout][:3])
        radius = LAYOUTS[layout][3]
        direction = (goal - start) / np.linalg.norm(goal - start)
        normal = np.array([-direction[1], direction[0]])
        self.goal, self.direction, self.centre = goal, direction, centre
        self.waypoint = centre[None] + np.asarray(side, dtype=np.float64)[:, None] * normal[None] * (radius + 0.22)
        self.passed = np.zeros(len(self.waypoint), dtype=bool)

    def __call__(self, pos: np.ndarray, vel: np.ndarray) -> np.ndarray:
        self.passed |= (((pos - self.centre) @ self.direction) > -0.1) | \
            (np.linalg.norm(pos - self.waypoint, axis=1) < 0.15)
        target = np.where(self.passed[:, None], self.goal[None], self.waypoint)
        return np.clip(3.0 * (target - pos) - 1.5 * vel, -1.0, 1.0)


def history(obs: list[np.ndarray]) -> np.ndarray:
    """The condition of a diffusion policy: the last ``OBS_STEPS`` observations, concatenated (the first one
    repeated at the start of an episode)."""
    recent = obs[-OBS_STEPS:]
    recent = [recent[0]] * (OBS_STEPS - len(recent)) + recent
    return np.concatenate(recent, axis=-1)


def expert_demos(layout: int, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` expert episodes in ``layout`` as pairs ``(condition [8], action chunk [HORIZON * 2])``, one per step
    (the chunk padded with the last action at the episode's end)."""
    start = np.asarray(LAYOUTS[layout][0])
    pos = start + rng.uniform(-0.05, 0.05, (n, 2))
    vel = np.zeros((n, 2))
    expert = ScriptedExpert(layout, rng.choice([-1.0, 1.0], n))
    obs, actions, alive = [np.concatenate([pos, vel], 1)], [], np.ones(n, dtype=bool)
    lengths = np.full(n, MAX_STEPS)
    for t in range(MAX_STEPS):
        a = np.clip(expert(pos, vel) + 0.05 * rng.standard_normal((n, 2)), -1, 1)
        actions.append(a)
        pos, vel = point_mass_step(pos, vel, a)
        obs.append(np.concatenate([pos, vel], 1))
        success, collision = episode_status(layout, pos)
        ended = alive & (success | collision)
        lengths[ended] = t + 1
        alive &= ~(success | collision)
        if not alive.any():
            break
    acts = np.stack(actions, 1)                                           # [n, T, 2]
    cond, target = [], []
    for i in range(n):
        for t in range(lengths[i]):
            cond.append(history([obs[j][i] for j in range(t + 1)]))
            idx = np.minimum(np.arange(t, t + HORIZON), lengths[i] - 1)
            target.append(acts[i, idx].reshape(-1))
    return {"cond": np.asarray(cond), "target": np.asarray(target)}


def run_episodes(layout: int, policy, n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """``n`` episodes of ``policy`` in ``layout``, batched: ``policy(conditions [n, 8]) -> chunks [n, HORIZON * 2]``
    is called every ``ACTION_STEPS`` steps and its first ``ACTION_STEPS`` actions run (receding horizon). Returns
    ``success`` ``[n]`` and ``states`` (the conditions the policy met, ``[N, 8]``)."""
    pos = np.asarray(LAYOUTS[layout][0]) + rng.uniform(-0.05, 0.05, (n, 2))
    vel = np.zeros((n, 2))
    obs = [np.concatenate([pos, vel], 1)]
    alive, success = np.ones(n, dtype=bool), np.zeros(n, dtype=bool)
    states = []
    for _ in range(0, MAX_STEPS, ACTION_STEPS):
        cond = history(obs)
        states.append(cond[alive])
        chunk = np.asarray(policy(cond)).reshape(n, HORIZON, 2)
        for j in range(ACTION_STEPS):
            new_pos, new_vel = point_mass_step(pos, vel, chunk[:, j])
            pos, vel = np.where(alive[:, None], new_pos, pos), np.where(alive[:, None], new_vel, vel)
            obs.append(np.concatenate([pos, vel], 1))
            ok, hit = episode_status(layout, pos)
            success |= alive & ok
            alive &= ~(ok | hit)
        if not alive.any():
            break
    return {"success": success, "states": np.concatenate(states)}


__all__ = ["NUM_TASKS", "ConditionalTasks", "mixture_epsilon", "energy_distance", "LAYOUTS", "PointMassEnv",
           "ScriptedExpert", "point_mass_step", "episode_status", "history", "expert_demos", "run_episodes"]
