"""Learning a universal horizon model by temporal-difference flow matching, and the ReBRAC-style offline
actor-critic that uses it (arXiv 2605.15603; TD-flow: Farebrother et al., arXiv 2503.09817).

:func:`td_flow_loss` (flow head): sample ``(s, a, s')`` and ``n ~ p_H``; for ``n = 1`` regress
``v_theta(t, x_t | s, a, 1)`` onto ``s' - x_0`` along ``x_t = (1 - t) x_0 + t s'``; for ``n > 1`` draw
``a' ~ pi(.|s')`` and ``x_1 ~ m_target(.|s', a', n - 1)`` by integrating the *target* network's ODE and
regress onto ``x_1 - x_0`` (``variant="coupled"``, the default), or onto the target network's own
velocity ``v_target(t, x_t | s', a', n - 1)`` at a point ``x_t`` of its ODE path (``variant="td2"``,
TD-flow's lower-variance form). :func:`categorical_uhm_loss` is the same recursion for the categorical
head: cross-entropy to the observed ``s'`` at ``n = 1`` and to the target model's distribution at
``(s', pi, n - 1)`` above.

:class:`OfflineActorCritic`: a DDPG+BC actor (maximise ``Q(s, pi(s)) - alpha ||pi(s) - a||^2``, Q
normalised by its batch mean magnitude as in TD3+BC/ReBRAC), clipped double-Q critics with target
networks (Polyak ``tau``), and the critic target passed in (:mod:`icml26.training.uhm.targets`: 1-step
TD for ReBRAC-dagger, :class:`~icml26.training.uhm.targets.UHMTarget` for UHM). Hyperparameters in one
dataclass, :class:`ActorCriticConfig`.

Reconstruction: which TD-flow variant the paper uses, the training distribution of ``n`` (``p_H`` of
the weights given), the EMA rate, the actor loss and the joint training schedule are ours.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.uhm.horizons import HorizonWeights
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["td_flow_loss", "categorical_uhm_loss", "ema_update", "OfflineActorCritic", "ActorCriticConfig",
           "VARIANTS"]

VARIANTS = ("coupled", "td2")


def _horizons(weights: HorizonWeights, B: int, k_max: int, generator: torch.Generator | None) -> torch.Tensor:
    if weights.k_max is None or weights.k_max > k_max:
        raise input_error("td_flow_loss", "weights", f"a finite measure with k_max <= the model's {k_max}",
                          weights.k_max)
    seed = int(torch.randint(0, 2 ** 31 - 1, (1,), generator=generator))
    return torch.from_numpy(weights.sample(B, np.random.default_rng(seed)))


@torch.no_grad()
def ema_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``theta_target <- (1 - tau) theta_target + tau theta`` (``tau`` in ``[0, 1]``)."""
    tau = check_finite("ema_update", "tau", tau, low=0, high=1)
    for p_t, p in zip(target.parameters(), online.parameters()):
        p_t.lerp_(p, tau)


def _check_model(function: str, model, target_model, output: str, weights, policy) -> None:
    for name, m in (("model", model), ("target_model", target_model)):
        if getattr(getattr(m, "config", None), "output", None) != output:
            raise input_error(function, name, f"a UniversalHorizonModel with output={output!r}",
                              described(f"output={m.config.output!r}" if hasattr(m, "config") else type(m).__name__))
    if not isinstance(weights, HorizonWeights):
        raise InputTypeError(function, "weights", "HorizonWeights (winsorized(...))", described(type(weights).__name__))
    if not (callable(policy) or isinstance(policy, torch.Tensor)):
        raise InputTypeError(function, "policy", "a callable states -> actions (or a [S, A] tensor)",
                             described(type(policy).__name__))


def _tensors(function: str, batch, *keys: str) -> list[torch.Tensor]:
    if not hasattr(batch, "keys") or any(k not in batch for k in keys):
        got = sorted(batch.keys()) if hasattr(batch, "keys") else described(type(batch).__name__)
        raise input_error(function, "batch", f"a dict with tensors {', '.join(keys)}", got)
    for k in keys:
        if not isinstance(batch[k], torch.Tensor):
            raise InputTypeError(function, f"batch[{k!r}]", "a tensor", described(type(batch[k]).__name__))
    return [batch[k] for k in keys]


def td_flow_loss(model, target_model, batch: dict, policy: Callable, weights: HorizonWeights,
                 variant: str = "coupled", generator: torch.Generator | None = None,
                 horizons: torch.Tensor | None = None) -> torch.Tensor:
    """TD-flow matching loss of a flow-head :class:`~icml26.models.uhm.UniversalHorizonModel` (see the
    module docstring). ``batch``: tensors ``states [B, d]``, ``actions [B, m]``, ``next_states [B, d]``;
    ``policy(states) -> actions``; ``horizons`` (default: ``n ~ p_H`` of ``weights``)."""
    check_choice("td_flow_loss", "variant", variant, VARIANTS)
    _check_model("td_flow_loss", model, target_model, "flow", weights, policy)
    s, a, s2 = _tensors("td_flow_loss", batch, "states", "actions", "next_states")
    if s2.shape != s.shape:
        raise input_error("td_flow_loss", "batch['next_states']", f"shape {tuple(s.shape)}", describe(s2))
    B = s.shape[0]
    n = _horizons(weights, B, model.config.k_max, generator) if horizons is None else horizons
    n = n.to(s.device)
    x0 = torch.randn(s.shape, generator=generator, dtype=s.dtype).to(s.device)
    t = torch.rand((B,), generator=generator, dtype=s.dtype).to(s.device)
    x1 = s2.clone()
    target_v = None
    boot = n > 1
    if bool(boot.any()):
        with torch.no_grad():
            sb, nb = s2[boot], n[boot] - 1
            ab = policy(sb)
            if variant == "coupled":
                x1[boot] = target_model.sample(sb, ab, nb, x_0=torch.randn(sb.shape, generator=generator,
                                                                             dtype=s.dtype).to(s.device))
            else:
                steps = target_model.config.ode_steps
                # a point of the target's ODE path at a grid time, and the target's velocity there
                k = torch.randint(0, steps, (int(boot.sum()),), generator=generator).to(s.device)
                x = x0[boot].clone()
                xt_b = x.clone()
                for i in range(steps):
                    here = k == i
                    xt_b[here] = x[here]
                    ti = torch.full((x.shape[0],), i / steps, dtype=s.dtype, device=s.device)
                    x = x + target_model(sb, ab, nb, x_t=x, t=ti).velocity / steps
                t = t.clone()
                t[boot] = k.to(s.dtype) / steps
                v_b = target_model(sb, ab, nb, x_t=xt_b, t=t[boot]).velocity
    xt = (1 - t)[:, None] * x0 + t[:, None] * x1
    target_v = x1 - x0
    if variant == "td2" and bool(boot.any()):
        xt = xt.clone()
        xt[boot] = xt_b
        target_v = target_v.clone()
        target_v[boot] = v_b
    return model(s, a, n, x_t=xt, t=t, target_velocity=target_v).loss


def categorical_uhm_loss(model, target_model, batch: dict, policy, weights: HorizonWeights,
                         generator: torch.Generator | None = None, horizons: torch.Tensor | None = None) -> torch.Tensor:
    """The bootstrapped cross-entropy of a categorical-head UHM. ``batch``: ``states [B, S]`` and
    ``actions [B, A]`` (one-hot), ``next_cells [B]`` (indices); ``policy``: action probabilities
    ``[S, A]`` (the target is the expectation over ``a'``) or ``policy(next_cells) -> action indices``."""
    _check_model("categorical_uhm_loss", model, target_model, "categorical", weights, policy)
    s, a, c2 = _tensors("categorical_uhm_loss", batch, "states", "actions", "next_cells")
    if c2.is_floating_point() or c2.shape != (s.shape[0],):
        raise input_error("categorical_uhm_loss", "batch['next_cells']", f"an integer tensor [{s.shape[0]}] of cells",
                          describe(c2))
    B, S = s.shape[0], model.config.num_cells
    A = a.shape[1]
    n = (_horizons(weights, B, model.config.k_max, generator) if horizons is None else horizons).to(s.device)
    target = F.one_hot(c2, S).to(s.dtype)
    boot = n > 1
    if bool(boot.any()):
        with torch.no_grad():
            cb, nb = c2[boot], n[boot] - 1
            sb = F.one_hot(cb, S).to(s.dtype)
            if isinstance(policy, torch.Tensor):  # expectation over a' ~ pi(.|s')
                m = cb.shape[0]
                acts = torch.eye(A, dtype=s.dtype, device=s.device).repeat(m, 1)
                p = target_model.probs(sb.repeat_interleave(A, 0), acts, nb.repeat_interleave(A)).view(m, A, S)
                target[boot] = (policy[cb].to(s.dtype)[:, :, None] * p).sum(1)
            else:
                ab = F.one_hot(policy(cb), A).to(s.dtype)
                target[boot] = target_model.probs(sb, ab, nb)
    return model(s, a, n, target_probs=target).loss


# ----------------------------------------------------------------------------------------------
# ReBRAC-style offline actor-critic
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ActorCriticConfig:
    """Hyperparameters of :class:`OfflineActorCritic` (ReBRAC-like defaults for small tasks)."""

    hidden_size: int = 256
    num_layers: int = 2
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    alpha: float = 2.5
    tau: float = 0.005
    gamma: float = 0.99
    policy_noise: float = 0.2
    noise_clip: float = 0.5
    actor_every: int = 2
    max_action: float = 1.0
    #: LayerNorm after each hidden layer of the critics (ReBRAC's critic; TD3+BC has none)
    critic_layer_norm: bool = False

    def __post_init__(self) -> None:
        fn = "ActorCriticConfig"
        for name in ("hidden_size", "num_layers", "actor_every"):
            check_int(fn, name, getattr(self, name), low=1)
        for name in ("actor_lr", "critic_lr", "max_action"):
            check_finite(fn, name, getattr(self, name), positive=True)
        for name in ("alpha", "policy_noise", "noise_clip"):
            check_finite(fn, name, getattr(self, name), non_negative=True)
        check_finite(fn, "tau", self.tau, low=0, high=1, low_open=True)
        check_finite(fn, "gamma", self.gamma, low=0, high=1, low_open=True, high_open=True)
        if not isinstance(self.critic_layer_norm, bool):
            raise InputTypeError(fn, "critic_layer_norm", "a bool", described(repr(self.critic_layer_norm)))


def _mlp(inp: int, out: int, hidden: int, layers: int, layer_norm: bool = False) -> nn.Sequential:
    mods, size = [], inp
    for _ in range(layers):
        mods += [nn.Linear(size, hidden), *([nn.LayerNorm(hidden)] if layer_norm else []), nn.ReLU()]
        size = hidden
    return nn.Sequential(*mods, nn.Linear(size, out))


class OfflineActorCritic(nn.Module):
    """DDPG+BC actor, clipped double-Q critics and target networks; the critic target is an argument.

    ``update(batch, critic_target)``: ``critic_target(batch, q_fn, policy) -> (targets, model_calls)`` is
    called with ``q_fn`` = the minimum of the two target critics and ``policy`` = the target actor with
    clipped Gaussian smoothing noise; returns the losses and the model calls.
    """

    def __init__(self, state_dim: int, action_dim: int, config: ActorCriticConfig | None = None,
                 seed: int = 0) -> None:
        super().__init__()
        state_dim = check_int("OfflineActorCritic", "state_dim", state_dim, low=1)
        action_dim = check_int("OfflineActorCritic", "action_dim", action_dim, low=1)
        seed = check_int("OfflineActorCritic", "seed", seed, low=0)
        if config is not None and not isinstance(config, ActorCriticConfig):
            raise InputTypeError("OfflineActorCritic", "config", "an ActorCriticConfig or None",
                                 described(type(config).__name__))
        self.config = c = config or ActorCriticConfig()
        g = torch.random.fork_rng()
        with g:
            torch.manual_seed(seed)
            self.actor = _mlp(state_dim, action_dim, c.hidden_size, c.num_layers)
            self.q1 = _mlp(state_dim + action_dim, 1, c.hidden_size, c.num_layers, c.critic_layer_norm)
            self.q2 = _mlp(state_dim + action_dim, 1, c.hidden_size, c.num_layers, c.critic_layer_norm)
        self.actor_t, self.q1_t, self.q2_t = (copy.deepcopy(m).requires_grad_(False) for m in (self.actor, self.q1, self.q2))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=c.actor_lr)
        self.critic_opt = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()], lr=c.critic_lr)
        self.generator = torch.Generator().manual_seed(seed)
        self.steps = 0

    def act(self, states: torch.Tensor) -> torch.Tensor:
        return self.config.max_action * torch.tanh(self.actor(states))

    def _target_policy(self, states):
        c = self.config
        a = c.max_action * torch.tanh(self.actor_t(states))
        noise = (torch.randn(a.shape, generator=self.generator) * c.policy_noise).clamp(-c.noise_clip, c.noise_clip)
        return (a + noise.to(a.device)).clamp(-c.max_action, c.max_action)

    def _q_target(self, states, actions):
        x = torch.cat([states, actions], -1)
        return torch.minimum(self.q1_t(x), self.q2_t(x)).squeeze(-1)

    def update(self, batch: dict, critic_target) -> dict[str, Any]:
        c = self.config
        s, a = _tensors("OfflineActorCritic.update", batch, "states", "actions")
        if not callable(critic_target):
            raise InputTypeError("OfflineActorCritic.update", "critic_target", "a callable target(batch, q_fn, policy)",
                                 described(type(critic_target).__name__))
        with torch.no_grad():
            y, calls = critic_target(batch, self._q_target, self._target_policy)
        x = torch.cat([s, a], -1)
        critic_loss = F.mse_loss(self.q1(x).squeeze(-1), y) + F.mse_loss(self.q2(x).squeeze(-1), y)
        self.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        self.critic_opt.step()
        out = {"critic_loss": float(critic_loss.detach()), "model_calls": calls}
        self.steps += 1
        if self.steps % c.actor_every == 0:
            pi = self.act(s)
            q = self.q1(torch.cat([s, pi], -1)).squeeze(-1)
            lmbda = 1.0 / q.abs().mean().detach().clamp_min(1e-6)
            actor_loss = -(lmbda * q).mean() + c.alpha * (pi - a).pow(2).sum(-1).mean()
            self.actor_opt.zero_grad(set_to_none=True)
            actor_loss.backward()
            self.actor_opt.step()
            for t, o in ((self.actor_t, self.actor), (self.q1_t, self.q1), (self.q2_t, self.q2)):
                ema_update(t, o, c.tau)
            out["actor_loss"] = float(actor_loss.detach())
        return out

    def to_dict(self) -> dict[str, Any]:
        return asdict(self.config)


class TorchOneStepTD:
    """1-step TD on tensors (ReBRAC-dagger for :class:`OfflineActorCritic`): ``r + gamma Q(s', pi(s'))``."""

    def __init__(self, gamma: float = 0.99) -> None:
        self.gamma = check_finite("TorchOneStepTD", "gamma", gamma, low=0, high=1, low_open=True, high_open=True)

    def __call__(self, batch, q_fn, policy):
        s2 = batch["next_states"]
        return batch["rewards"] + self.gamma * q_fn(s2, policy(s2)), 0


class TorchUHMTarget:
    """The UHM target on tensors: ``n ~ p_H``, one flow-model draw ``s_e ~ m(.|s, a, n)``, ``a_e = pi(s_e)``,
    :func:`~icml26.training.uhm.horizons.nu_target` with ``reward_fn(s_e)`` (a known reward of the state)."""

    def __init__(self, model, weights: HorizonWeights, reward_fn: Callable, seed: int = 0) -> None:
        if getattr(getattr(model, "config", None), "output", None) != "flow":
            raise input_error("TorchUHMTarget", "model", "a UniversalHorizonModel with output='flow'",
                              described(type(model).__name__))
        if not isinstance(weights, HorizonWeights) or weights.k_max is None or weights.k_max > model.config.k_max:
            raise input_error("TorchUHMTarget", "weights", f"finite HorizonWeights with k_max <= the model's "
                              f"{model.config.k_max}", described(getattr(weights, "name", type(weights).__name__)))
        if not callable(reward_fn):
            raise InputTypeError("TorchUHMTarget", "reward_fn", "a callable reward_fn(states)",
                                 described(type(reward_fn).__name__))
        seed = check_int("TorchUHMTarget", "seed", seed, low=0)
        self.model, self.weights, self.reward_fn = model, weights, reward_fn
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, batch, q_fn, policy):
        from icml26.training.uhm.horizons import nu_target

        s, a, r = batch["states"], batch["actions"], batch["rewards"]
        n = torch.from_numpy(self.weights.sample(s.shape[0], self.rng))
        s_e = self.model.sample(s, a, n, generator=self.generator)
        a_e = policy(s_e)
        return nu_target(r, self.reward_fn(s_e), q_fn(s_e, a_e), n, self.weights), 1


__all__ += ["TorchOneStepTD", "TorchUHMTarget"]
