"""Critic targets of the UHM ablation (arXiv 2605.15603, the result table's ReBRAC-dagger, DTD(lambda),
MBTD(lambda), GHM and UHM rows) and a tabular critic with its control loop.

Every target is a callable ``target(batch, q_fn, policy) -> (targets, model_calls)``:

- ``batch``: a dict of arrays ``observations, actions, rewards, next_observations`` (and ``index``,
  the rows' positions in the dataset, for :class:`DatasetTDLambda`);
- ``q_fn(states, actions)``: the critic's values (numpy or torch, as the model's states are);
- ``policy``: action probabilities ``[S, A]`` (tabular) or a callable ``policy(states) -> actions``;
- ``model_calls``: how many times, one after the other, the batch went through a model (0 for the
  model-free targets, 1 for UHM and GHM at any ``k_max``, ``k_max`` for MBTD(lambda)).

The learners see dataset transitions, a reward callable ``reward_fn(states, actions)`` and the
models fitted from the data; never the true transition probabilities.

Reconstruction (the paper's code is not released): DTD(lambda) is the lambda-return on the dataset's
own trajectory (no off-policy correction, cut at the episode's end, the remaining ``nu`` mass put on
the last state), MBTD(lambda) the same lambda-return along a rollout of a learned one-step model
from ``(s, a)``, GHM one draw from a geometric horizon model over ``Geom(1 - lambda gamma)``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from sklearn.base import BaseEstimator

from icml26.errors import InputTypeError, described, input_error
from icml26.training.uhm.data import check_policy, transition_arrays, uniform_tie_policy
from icml26.training.uhm.horizons import HorizonWeights, _transitions, nu_target
from icml26.validation import check_finite, check_generator, check_int

__all__ = ["OneStepTD", "DatasetTDLambda", "RolloutTDLambda", "GHMTarget", "UHMTarget", "TabularCritic",
           "TabularOneStepModel", "TabularControlConfig", "fit_tabular_critic"]


def act(policy, states, rng: np.random.Generator):
    """Actions ``a ~ pi(.|s)``: sampled from a probability table ``[S, A]`` or returned by a callable."""
    if callable(policy):
        return policy(states)
    probs = check_policy("act", policy)
    cdf = np.cumsum(probs[np.asarray(states)], axis=-1)
    u = rng.random(cdf.shape[:-1])[..., None]
    return np.minimum((cdf < u).sum(-1), probs.shape[1] - 1)


def _batch(function: str, batch: dict, *keys: str):
    if not hasattr(batch, "keys"):
        raise InputTypeError(function, "batch", f"a dict with {', '.join(keys)}", described(type(batch).__name__))
    missing = [k for k in keys if k not in batch]
    if missing:
        raise input_error(function, "batch", f"a dict with {', '.join(keys)}", described(f"one missing {missing}"))
    return [batch[k] for k in keys]


def _check_common(function: str, weights: Any, reward_fn: Any, seed: Any) -> None:
    """The arguments every model-based or trace target shares."""
    if not isinstance(weights, HorizonWeights):
        raise InputTypeError(function, "weights", "HorizonWeights (winsorized(...), td_lambda(...), geometric(...))",
                             described(type(weights).__name__))
    if not callable(reward_fn):
        raise InputTypeError(function, "reward_fn", "a callable reward_fn(states, actions)",
                             described(type(reward_fn).__name__))
    if seed is not None:
        check_int(function, "seed", seed, low=0)


class TabularOneStepModel(BaseEstimator):
    """The empirical one-step model ``P_hat(s'|s,a)`` of the data (MBTD's model): a draw picks one of the
    dataset's next states observed after ``(s, a)`` (O(1) per draw); an uncovered pair stays put.
    A scikit-learn estimator without parameters (``clone`` gives an unfitted copy)."""

    def fit(self, transitions: dict, n_states: int, n_actions: int) -> TabularOneStepModel:
        """Index ``transitions`` (1-d integer arrays ``observations``, ``actions``, ``next_observations``)
        over ``n_states`` states and ``n_actions`` actions. Returns ``self``."""
        n_states = check_int("TabularOneStepModel.fit", "n_states", n_states, low=1)
        n_actions = check_int("TabularOneStepModel.fit", "n_actions", n_actions, low=1)
        self.P_, self.covered_ = _transitions("TabularOneStepModel.fit", transitions, n_states, n_actions)
        pair = np.asarray(transitions["observations"]) * n_actions + np.asarray(transitions["actions"])
        order = np.argsort(pair, kind="stable")
        self._next = np.asarray(transitions["next_observations"])[order]
        self._count = np.bincount(pair, minlength=n_states * n_actions)
        self._start = np.concatenate([[0], np.cumsum(self._count)[:-1]])
        self.n_states_, self.n_actions_ = n_states, n_actions
        return self

    def step(self, states, actions, rng: np.random.Generator) -> np.ndarray:
        """One draw ``s' ~ P_hat(.|s, a)`` per pair of integer arrays ``states``, ``actions``."""
        from icml26.training.uhm.horizons import _query

        states, actions = _query("TabularOneStepModel.step", self, "P_", states=states, actions=actions)
        rng = check_generator("TabularOneStepModel.step", "rng", rng)
        pair = states * self.n_actions_ + actions
        count = self._count[pair]
        pick = self._start[pair] + (rng.random(pair.shape) * np.maximum(count, 1)).astype(np.int64)
        return np.where(count > 0, self._next[np.minimum(pick, len(self._next) - 1)], states)


@dataclass
class OneStepTD:
    """1-step TD (the ReBRAC-dagger row): ``G = r + gamma Q(s', a')``, ``a' ~ pi(.|s')``."""

    gamma: float = 0.99
    seed: int | None = 0

    def __post_init__(self) -> None:
        self.gamma = check_finite("OneStepTD", "gamma", self.gamma, low=0, high=1, low_open=True, high_open=True)
        if self.seed is not None:
            check_int("OneStepTD", "seed", self.seed, low=0)
        self.rng = np.random.default_rng(self.seed)

    def __call__(self, batch, q_fn, policy):
        r, s2 = _batch("OneStepTD", batch, "rewards", "next_observations")
        return r + self.gamma * q_fn(s2, act(policy, s2, self.rng)), 0


def _trace_target(r0, states, valid, reward_fn, q_fn, policy, weights: HorizonWeights, rng):
    """``r0 + gamma sum_k (xi_L(k) R(s_k, a_k) + nu_L(k) Q(s_k, a_k))`` along traces ``states[B, K]``
    of which the first ``L`` per row are valid; a trace cut at ``L < K`` puts ``nu``'s remaining mass,
    ``gamma^(L-1) (1 - sum_{k<L} gamma^(1-k) nu(k))``, on its last state (still a fixed point of Q^pi)."""
    gamma = weights.gamma
    B, K = states.shape
    k = np.arange(1, K + 1)
    L = valid.sum(1)
    nu, xi = weights.nu[:K], weights.xi[:K]
    cum = np.concatenate([[0.0], np.cumsum(gamma ** (1.0 - k) * nu)])  # cum[m] = sum_{j<=m}
    before = k[None] < L[:, None]
    last = k[None] == L[:, None]
    nu_mat = np.where(before, nu[None], 0.0) + np.where(last, (gamma ** (L - 1) * (1 - cum[L - 1]))[:, None], 0.0)
    xi_mat = np.where(before, xi[None], 0.0)
    flat = states.reshape(-1)
    a = act(policy, flat, rng)
    rewards = np.asarray(reward_fn(flat, a)).reshape(B, K)
    q = np.asarray(q_fn(flat, a)).reshape(B, K)
    return r0 + gamma * (xi_mat * rewards + nu_mat * q).sum(1)


@dataclass
class DatasetTDLambda:
    """DTD(lambda): the truncated lambda-return on the dataset's own next ``k_max`` states.

    ``data`` is the dataset (with ``episode``), ``weights`` a finite measure (:func:`td_lambda`).
    Biased off-policy: the trace follows the data's actions, not ``pi``'s.
    """

    data: dict
    weights: HorizonWeights
    reward_fn: Callable
    seed: int | None = 0

    def __post_init__(self) -> None:
        _check_common("DatasetTDLambda", self.weights, self.reward_fn, self.seed)
        if self.weights.k_max is None:
            raise input_error("DatasetTDLambda", "weights", "a finite measure (k_max set)", "the geometric one")
        episode, nxt = _batch("DatasetTDLambda", self.data, "episode", "next_observations")
        episode, nxt = np.asarray(episode), np.asarray(nxt)
        if episode.ndim != 1 or episode.shape != nxt.shape or not episode.size:
            raise input_error("DatasetTDLambda", "data", "1-d 'episode' and 'next_observations' of one non-zero length",
                              described(f"shapes {episode.shape} and {nxt.shape}"))
        self.rng = np.random.default_rng(self.seed)
        self._episode, self._next = episode, nxt

    def __call__(self, batch, q_fn, policy):
        r, idx = _batch("DatasetTDLambda", batch, "rewards", "index")
        K, N = self.weights.k_max, len(self._episode)
        rows = np.asarray(idx)[:, None] + np.arange(K)[None]
        inside = rows < N
        rows_c = np.minimum(rows, N - 1)
        valid = inside & (self._episode[rows_c] == self._episode[np.asarray(idx)][:, None])
        valid = np.cumprod(valid, axis=1).astype(bool)
        states = self._next[rows_c]  # s_k = next state of the (k-1)-th step after the row
        return _trace_target(r, states, valid, self.reward_fn, q_fn, policy, self.weights, self.rng), 0


@dataclass
class _ModelTarget:
    """The fields and the check that the model-based targets share: ``finite`` says whether the target
    needs a finite horizon measure (``k_max`` set) or the uncapped geometric one."""

    model: Any
    weights: HorizonWeights
    reward_fn: Callable
    seed: int | None = 0
    finite: ClassVar[bool] = True

    def __post_init__(self) -> None:
        name = type(self).__name__
        _check_common(name, self.weights, self.reward_fn, self.seed)
        method = "step" if isinstance(self, RolloutTDLambda) else "sample"
        if not callable(getattr(self.model, method, None)):
            raise InputTypeError(name, "model", f"a model with a .{method}(...) method (fitted)",
                                 described(type(self.model).__name__))
        if self.finite and self.weights.k_max is None:
            raise input_error(name, "weights", "a finite measure (k_max set)", "the geometric one")
        if not self.finite and self.weights.k_max is not None:
            raise input_error(name, "weights", "the geometric measure (k_max None)", self.weights.name)
        self.rng = np.random.default_rng(self.seed)


@dataclass
class RolloutTDLambda(_ModelTarget):
    """MBTD(lambda): the truncated lambda-return along a ``k_max``-step rollout of a one-step model
    (``model.step(states, actions, rng)``) from ``(s, a)``, ``a_k ~ pi``: ``k_max`` model calls."""

    def __call__(self, batch, q_fn, policy):
        r, s, a = _batch("RolloutTDLambda", batch, "rewards", "observations", "actions")
        K = self.weights.k_max
        states = np.empty((len(s), K), dtype=np.int64)
        for k in range(K):
            s = self.model.step(s, a, self.rng)
            states[:, k] = s
            a = act(policy, s, self.rng)
        valid = np.ones_like(states, dtype=bool)
        return _trace_target(r, states, valid, self.reward_fn, q_fn, policy, self.weights, self.rng), K


@dataclass
class GHMTarget(_ModelTarget):
    """GHM: one draw ``s_e`` from a geometric horizon model (``model.sample(states, actions, rng)``) over
    the uncapped ``Geom(1 - lambda gamma)`` (:func:`~icml26.training.uhm.horizons.geometric` weights): one call."""

    finite: ClassVar[bool] = False

    def __call__(self, batch, q_fn, policy):
        r, s, a = _batch("GHMTarget", batch, "rewards", "observations", "actions")
        s_e = self.model.sample(s, a, self.rng)
        a_e = act(policy, s_e, self.rng)
        n = np.ones(len(s_e), dtype=np.int64)  # the geometric ratios do not depend on n
        return nu_target(r, self.reward_fn(s_e, a_e), q_fn(s_e, a_e), n, self.weights), 1


@dataclass
class UHMTarget(_ModelTarget):
    """UHM: ``n ~ p_H``, one draw ``s_e ~ m(.|s, a, n)`` (``model.sample(states, actions, horizons, rng)``),
    ``a_e ~ pi(.|s_e)``, :func:`~icml26.training.uhm.horizons.nu_target`: one model call for any ``k_max``."""

    def __call__(self, batch, q_fn, policy):
        r, s, a = _batch("UHMTarget", batch, "rewards", "observations", "actions")
        n = self.weights.sample(len(r), self.rng)
        s_e = self.model.sample(s, a, n, self.rng)
        a_e = act(policy, s_e, self.rng)
        return nu_target(r, self.reward_fn(s_e, a_e), q_fn(s_e, a_e), n, self.weights), 1


class TabularCritic:
    """A table ``Q[s, a]``; :meth:`update` moves each pair in the batch towards the mean of its targets
    by step size ``lr`` (one step per pair per update, however often it appears in the batch)."""

    def __init__(self, n_states: int, n_actions: int, init: float = 0.0) -> None:
        self.Q = np.full((check_int("TabularCritic", "n_states", n_states, low=1),
                          check_int("TabularCritic", "n_actions", n_actions, low=1)),
                         check_finite("TabularCritic", "init", init))

    def q(self, states, actions) -> np.ndarray:
        return self.Q[np.asarray(states), np.asarray(actions)]

    def update(self, states, actions, targets, lr: float) -> None:
        """Move ``Q[s, a]`` by ``lr`` (in ``(0, 1]``) towards the mean of its ``targets`` in the batch."""
        lr = check_finite("TabularCritic.update", "lr", lr, low=0, high=1, low_open=True)
        S, A = self.Q.shape
        targets = np.asarray(targets, dtype=float)
        if targets.shape != np.shape(states) or np.shape(states) != np.shape(actions):
            raise input_error("TabularCritic.update", "targets", "one target per (state, action) pair",
                              described(f"shapes {np.shape(states)}, {np.shape(actions)}, {targets.shape}"))
        flat = np.asarray(states) * A + np.asarray(actions)
        total = np.bincount(flat, weights=np.asarray(targets, dtype=float), minlength=S * A)
        count = np.bincount(flat, minlength=S * A)
        hit = count > 0
        Q = self.Q.reshape(-1)
        Q[hit] += lr * (total[hit] / count[hit] - Q[hit])


@dataclass(frozen=True)
class TabularControlConfig:
    """The tabular control loop's hyperparameters (one place).

    ``updates`` critic updates of ``batch_size`` dataset transitions at step size ``lr``; every
    ``improve_every`` updates the policy becomes greedy in ``Q`` (mass spread uniformly over tied
    actions, so untouched regions act uniformly) and the models are refitted for it; the critic is
    evaluated every ``eval_every`` updates.
    """

    updates: int = 300
    batch_size: int = 2048
    lr: float = 0.3
    improve_every: int = 10
    eval_every: int = 25
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("updates", "batch_size", "improve_every", "eval_every"):
            check_int("TabularControlConfig", name, getattr(self, name), low=1)
        check_finite("TabularControlConfig", "lr", self.lr, low=0, high=1, low_open=True)
        check_int("TabularControlConfig", "seed", self.seed, low=0)


def fit_tabular_critic(data: dict, target, n_states: int, n_actions: int, config: TabularControlConfig,
                       refit: Callable | None = None, evaluate: Callable | None = None) -> dict[str, Any]:
    """Offline tabular actor-critic with one critic ``target``: returns ``Q``, the final policy, the
    evaluation history (``evaluate(Q, policy) -> dict`` every ``eval_every`` updates) and model calls.

    ``refit(policy)`` refits the target's model (UHM, GHM) at every policy improvement.
    """
    fn = "fit_tabular_critic"
    if not isinstance(config, TabularControlConfig):
        raise InputTypeError(fn, "config", "a TabularControlConfig", described(type(config).__name__))
    if not callable(target):
        raise InputTypeError(fn, "target", "a callable target(batch, q_fn, policy) -> (targets, model_calls)",
                             described(type(target).__name__))
    for name, value in (("refit", refit), ("evaluate", evaluate)):
        if value is not None and not callable(value):
            raise InputTypeError(fn, name, "a callable or None", described(type(value).__name__))
    n_states, n_actions = check_int(fn, "n_states", n_states, low=1), check_int(fn, "n_actions", n_actions, low=1)
    s, _, _ = transition_arrays(fn, data, n_states, n_actions, "data")
    if "rewards" not in data or np.shape(data["rewards"]) != s.shape:
        raise input_error(fn, "data['rewards']", f"one reward per transition ({len(s)})",
                          described(f"shape {np.shape(data['rewards'])}" if "rewards" in data else "no 'rewards' key"))
    rng = np.random.default_rng(config.seed)
    critic = TabularCritic(n_states, n_actions)
    N = len(data["observations"])
    history, calls, policy = [], 0, None
    for u in range(config.updates):
        if u % config.improve_every == 0:
            policy = uniform_tie_policy(critic.Q)
            if refit is not None:
                refit(policy)
        if evaluate is not None and u % config.eval_every == 0:
            history.append({"update": u, **evaluate(critic.Q.copy(), policy)})
        idx = rng.integers(N, size=config.batch_size)
        batch = {k: np.asarray(v)[idx] for k, v in data.items()}
        batch["index"] = idx
        targets, c = target(batch, critic.q, policy)
        calls += c
        critic.update(batch["observations"], batch["actions"], targets, config.lr)
    if evaluate is not None:
        history.append({"update": config.updates, **evaluate(critic.Q.copy(), uniform_tie_policy(critic.Q))})
    return {"Q": critic.Q, "policy": policy, "history": history, "model_calls": calls}
