"""Universal horizon model ``m_theta(x | s, a, n)`` ("Offline Reinforcement Learning with Universal Horizon
Models", arXiv 2605.15603): a conditional generative model of the state ``n`` steps after ``(s, a)``.

Two heads share one trunk (an MLP, 3 x 256 SiLU by default, on ``[s, a, emb(n)]``):

- ``output="flow"`` (the paper's family): a velocity field ``v_theta(t, x_t | s, a, n)`` for
  conditional flow matching (Temporal Difference Flows, Farebrother et al., arXiv 2503.09817), sampled
  by integrating the ODE from ``x_0 ~ N(0, I)`` with ``ode_steps`` Euler steps;
- ``output="categorical"``: logits over ``num_cells`` cells of a tabular maze, a categorical stand-in
  for flow matching that makes the compounding error measurable exactly (TV to ``P_pi^n``).

``forward`` returns a :class:`UHMOutput` with ``loss`` when a target is given (``target_velocity``:
the squared error of the velocity; ``target_probs``: cross-entropy to a (soft) distribution), so the
losses of :mod:`icml26.training.uhm.actor_critic` only build targets.

Reconstruction: the horizon embedding (sinusoidal in ``n / k_max`` with ``horizon_embedding_dim``
features, frequencies ``1..2^(d/2-1)`` times pi), the time embedding of the flow head (the same in
``t``) and the trunk sizes are our choices; the paper's code is not released.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from icml26.errors import describe, input_error

OUTPUTS = ("flow", "categorical")


class UHMConfig(PretrainedConfig):
    """Configuration of :class:`UniversalHorizonModel`.

    Args:
        state_dim: size of a state vector (one-hot cells for the tabular maze, positions for PointMaze2D).
        action_dim: size of an action vector (one-hot for discrete actions).
        output: ``"flow"`` (velocity of dimension ``state_dim``) or ``"categorical"`` (``num_cells`` logits).
        num_cells: number of cells of the categorical head (required when ``output="categorical"``).
        hidden_size: width of the trunk.
        num_layers: hidden layers of the trunk (SiLU after each).
        horizon_embedding_dim: features of the sinusoidal embedding of ``n / k_max`` (even).
        time_embedding_dim: features of the sinusoidal embedding of the flow time ``t`` (even).
        k_max: the largest horizon the model is asked for (horizons are checked against it).
        ode_steps: Euler steps of :meth:`UniversalHorizonModel.sample` for the flow head.
    """

    model_type = "uhm"

    def __init__(self, state_dim: int = 2, action_dim: int = 2, output: str = "flow", num_cells: int | None = None,
                 hidden_size: int = 256, num_layers: int = 3, horizon_embedding_dim: int = 32,
                 time_embedding_dim: int = 16, k_max: int = 50, ode_steps: int = 10, **kwargs) -> None:
        for name, value in (("state_dim", state_dim), ("action_dim", action_dim), ("hidden_size", hidden_size),
                            ("num_layers", num_layers), ("k_max", k_max), ("ode_steps", ode_steps),
                            ("horizon_embedding_dim", horizon_embedding_dim),
                            ("time_embedding_dim", time_embedding_dim)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise input_error("UHMConfig", name, "a positive int", value)
        for name, value in (("horizon_embedding_dim", horizon_embedding_dim), ("time_embedding_dim", time_embedding_dim)):
            if value % 2:
                raise input_error("UHMConfig", name, "an even int", value)
        if output not in OUTPUTS:
            raise input_error("UHMConfig", "output", f"one of {OUTPUTS}", output)
        if output == "categorical" and (isinstance(num_cells, bool) or not isinstance(num_cells, int) or num_cells < 2):
            raise input_error("UHMConfig", "num_cells", "an int >= 2 for the categorical head", num_cells)
        self.state_dim, self.action_dim, self.output, self.num_cells = state_dim, action_dim, output, num_cells
        self.hidden_size, self.num_layers, self.k_max, self.ode_steps = hidden_size, num_layers, k_max, ode_steps
        self.horizon_embedding_dim, self.time_embedding_dim = horizon_embedding_dim, time_embedding_dim
        super().__init__(**kwargs)


AutoConfig.register(UHMConfig.model_type, UHMConfig, exist_ok=True)


@dataclass
class UHMOutput(ModelOutput):
    """``loss`` (when a target is given), ``velocity`` (flow head) or ``logits`` (categorical head)."""

    loss: torch.Tensor | None = None
    velocity: torch.Tensor | None = None
    logits: torch.Tensor | None = None


def sinusoidal(x: torch.Tensor, dim: int) -> torch.Tensor:
    """``[sin(pi 2^j x), cos(pi 2^j x)]`` for ``j < dim / 2`` on ``x`` of shape ``[B]``."""
    freqs = math.pi * 2.0 ** torch.arange(dim // 2, device=x.device, dtype=x.dtype)
    angles = x[:, None] * freqs[None]
    return torch.cat([angles.sin(), angles.cos()], dim=-1)


class UniversalHorizonModel(PreTrainedModel):
    """``m_theta(x | s, a, n)``: see the module docstring and :class:`UHMConfig`."""

    config_class = UHMConfig
    base_model_prefix = ""
    main_input_name = "states"

    def __init__(self, config: UHMConfig) -> None:
        super().__init__(config)
        c = config
        flow = c.output == "flow"
        width = c.state_dim + c.action_dim + c.horizon_embedding_dim + (c.state_dim + c.time_embedding_dim if flow else 0)
        layers, size = [], width
        for _ in range(c.num_layers):
            layers += [nn.Linear(size, c.hidden_size), nn.SiLU()]
            size = c.hidden_size
        self.trunk = nn.Sequential(*layers)
        self.head = nn.Linear(size, c.state_dim if flow else c.num_cells)
        self.post_init()

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.kaiming_uniform_(module.weight, a=math.sqrt(5))
            if module.bias is not None:
                bound = 1 / math.sqrt(module.weight.shape[1])
                nn.init.uniform_(module.bias, -bound, bound)

    def _check(self, states, actions, horizons):
        c, fn = self.config, "UniversalHorizonModel"
        if not isinstance(states, torch.Tensor) or states.ndim != 2 or states.shape[1] != c.state_dim:
            raise input_error(fn, "states", f"a float tensor [B, {c.state_dim}]", describe(states))
        B = states.shape[0]
        if not isinstance(actions, torch.Tensor) or actions.shape != (B, c.action_dim):
            raise input_error(fn, "actions", f"a tensor [{B}, {c.action_dim}]", describe(actions))
        if not isinstance(horizons, torch.Tensor) or horizons.shape != (B,) or horizons.is_floating_point():
            raise input_error(fn, "horizons", f"an integer tensor [{B}]", describe(horizons))
        if horizons.device.type == "cpu" and B and (int(horizons.min()) < 1 or int(horizons.max()) > c.k_max):
            raise input_error(fn, "horizons", f"values in 1..{c.k_max}",
                              f"values in [{int(horizons.min())}, {int(horizons.max())}]")

    def _condition(self, states, actions, horizons):
        n = horizons.to(states.dtype) / self.config.k_max
        return torch.cat([states, actions.to(states.dtype), sinusoidal(n, self.config.horizon_embedding_dim)], -1)

    def forward(self, states, actions, horizons, x_t=None, t=None, target_velocity=None, target_probs=None) -> UHMOutput:
        """Velocity at ``(t, x_t)`` (flow head) or cell logits (categorical head), and the loss against
        ``target_velocity`` (mean squared error) or ``target_probs`` (cross-entropy) when given."""
        self._check(states, actions, horizons)
        h = self._condition(states, actions, horizons)
        B = states.shape[0]
        if self.config.output == "flow":
            if not isinstance(x_t, torch.Tensor) or x_t.shape != (B, self.config.state_dim):
                raise input_error("UniversalHorizonModel", "x_t", f"a tensor [{B}, {self.config.state_dim}]",
                                  describe(x_t))
            if not isinstance(t, torch.Tensor) or t.shape != (B,):
                raise input_error("UniversalHorizonModel", "t", f"a tensor [{B}] of times in [0, 1]", describe(t))
            h = torch.cat([h, x_t, sinusoidal(t.to(h.dtype), self.config.time_embedding_dim)], -1)
            velocity = self.head(self.trunk(h))
            loss = None
            if target_velocity is not None:
                if target_velocity.shape != velocity.shape:
                    raise input_error("UniversalHorizonModel", "target_velocity", f"shape {tuple(velocity.shape)}",
                                      describe(target_velocity))
                loss = (velocity - target_velocity).pow(2).sum(-1).mean()
            return UHMOutput(loss=loss, velocity=velocity)
        logits = self.head(self.trunk(h))
        loss = None
        if target_probs is not None:
            if target_probs.shape != logits.shape:
                raise input_error("UniversalHorizonModel", "target_probs", f"shape {tuple(logits.shape)}",
                                  describe(target_probs))
            loss = -(target_probs * F.log_softmax(logits, -1)).sum(-1).mean()
        return UHMOutput(loss=loss, logits=logits)

    @torch.no_grad()
    def probs(self, states, actions, horizons) -> torch.Tensor:
        """The categorical head's distribution over cells, ``[B, num_cells]``."""
        if self.config.output != "categorical":
            raise input_error("UniversalHorizonModel.probs", "config.output", "'categorical'", self.config.output)
        return self(states, actions, horizons).logits.softmax(-1)

    @torch.no_grad()
    def sample(self, states, actions, horizons, generator: torch.Generator | None = None, x_0=None) -> torch.Tensor:
        """Draw ``x ~ m_theta(. | s, a, n)``: Euler integration of the flow from ``x_0 ~ N(0, I)`` (or the
        given ``x_0``) in ``ode_steps`` steps, or a cell index from the categorical head."""
        if self.config.output == "categorical":
            return torch.multinomial(self.probs(states, actions, horizons), 1, generator=generator).squeeze(-1)
        x = torch.randn(states.shape, generator=generator, dtype=states.dtype).to(states.device) if x_0 is None else x_0
        steps = self.config.ode_steps
        for i in range(steps):
            t = torch.full((states.shape[0],), i / steps, dtype=states.dtype, device=states.device)
            x = x + self(states, actions, horizons, x_t=x, t=t).velocity / steps
        return x


AutoModel.register(UHMConfig, UniversalHorizonModel, exist_ok=True)
