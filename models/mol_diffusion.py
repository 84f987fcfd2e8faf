"""The epsilon-MLP of multi-objective diffusion ("Multi-Objective Learning for Diffusion Models: A Statistical Theory
under Semi-Supervised Learning", Cheng et al., ICML 2026, arXiv 2605.25210).

The paper's setting: K tasks, each a conditional distribution ``p_k(x | c)``; a conditional diffusion model
``eps_theta(x_t, t, c [, k])`` learned by denoising score matching (DSM). Its two model classes:

- a **lightweight specialist** per task (``H_k``: small and structurally matched to the task), here an MLP after a
  linear map of the condition to ``cond_bottleneck`` features (Reconstruction: the paper does not publish its
  architectures; a task that reads the condition through one direction is matched by a one-feature bottleneck);
- a **generalist** (``G``: large, shared by the tasks), here a wider, deeper MLP reading the whole condition and,
  optionally, a one-hot of the task.

Both are :class:`EpsMLP`: ``forward(sample, timesteps, cond, task=None, noise=None)`` returns the predicted noise
(``sample`` of the output, as diffusers' UNets name it) and, when the true ``noise`` is given, the DSM loss
``mean_i ||noise_i - eps_theta(sample_i)||^2`` (summed over the sample's coordinates, as the paper's
``||eps - eps_theta||^2``). The timestep enters through diffusers' sinusoidal ``get_timestep_embedding``, so any
diffusers scheduler (``DDPMScheduler``, ``DDIMScheduler``) drives it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from diffusers.models.embeddings import get_timestep_embedding
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from icml26.errors import describe, input_error
from icml26.validation import check_int


class EpsMLPConfig(PretrainedConfig):
    """Configuration of :class:`EpsMLP`.

    Args:
        sample_dim: the dimension of the diffused sample ``x`` (2 for the 2-D tasks, ``horizon x action_dim`` for
            an action chunk).
        cond_dim: the dimension of the condition ``c``.
        num_tasks: tasks the model tells apart by a one-hot input (0: task-agnostic; the ``task`` argument of
            ``forward`` is then ignored).
        cond_bottleneck: ``None`` (the condition enters whole) or the width of a linear map applied to the
            condition first (the lightweight specialist's class; Reconstruction).
        hidden_size: width of each hidden layer.
        num_layers: hidden layers (each ``Linear`` then ``SiLU``).
        time_embed_dim: width of the sinusoidal timestep embedding (even).
    """

    model_type = "icml26_eps_mlp"

    def __init__(self, sample_dim: int = 2, cond_dim: int = 8, num_tasks: int = 0, cond_bottleneck: int | None = None,
                 hidden_size: int = 64, num_layers: int = 2, time_embed_dim: int = 32, **kwargs) -> None:
        fn = "EpsMLPConfig"
        self.sample_dim = check_int(fn, "sample_dim", sample_dim, low=1)
        self.cond_dim = check_int(fn, "cond_dim", cond_dim, low=0)
        self.num_tasks = check_int(fn, "num_tasks", num_tasks, low=0)
        self.cond_bottleneck = None if cond_bottleneck is None else check_int(fn, "cond_bottleneck", cond_bottleneck,
                                                                              low=1)
        self.hidden_size = check_int(fn, "hidden_size", hidden_size, low=1)
        self.num_layers = check_int(fn, "num_layers", num_layers, low=1)
        self.time_embed_dim = check_int(fn, "time_embed_dim", time_embed_dim, low=2)
        if self.time_embed_dim % 2:
            raise input_error(fn, "time_embed_dim", "an even width (sines and cosines)", time_embed_dim)
        super().__init__(**kwargs)


AutoConfig.register(EpsMLPConfig.model_type, EpsMLPConfig, exist_ok=True)


@dataclass
class EpsMLPOutput(ModelOutput):
    """Output of :class:`EpsMLP`: the DSM ``loss`` (when ``noise`` was given) and the predicted noise ``sample``."""

    loss: torch.Tensor | None = None
    sample: torch.Tensor | None = None


class EpsMLP(PreTrainedModel):
    """An epsilon-prediction MLP on ``(x_t, timestep embedding, condition [or its bottleneck], task one-hot)``.

    ``forward(sample, timesteps, cond, task=None, noise=None)``: ``sample`` ``[B, sample_dim]`` is the noised
    ``x_t``, ``timesteps`` ``[B]`` or a scalar (integers of the training schedule), ``cond`` ``[B, cond_dim]``,
    ``task`` ``[B]`` integer task ids (needed when ``num_tasks > 0``), ``noise`` the true ``eps`` (gives ``loss``).
    """

    config_class = EpsMLPConfig
    main_input_name = "sample"
    _no_split_modules: list[str] = []

    def __init__(self, config: EpsMLPConfig) -> None:
        super().__init__(config)
        c = config
        self.cond_proj = nn.Linear(c.cond_dim, c.cond_bottleneck) if c.cond_bottleneck and c.cond_dim else None
        cond_width = (c.cond_bottleneck if self.cond_proj is not None else c.cond_dim)
        width = c.sample_dim + c.time_embed_dim + cond_width + c.num_tasks
        layers: list[nn.Module] = []
        for _ in range(c.num_layers):
            layers += [nn.Linear(width, c.hidden_size), nn.SiLU()]
            width = c.hidden_size
        layers.append(nn.Linear(width, c.sample_dim))
        self.net = nn.Sequential(*layers)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, nn.Linear):  # PyTorch's own default, so a seeded model is the seeded nn.Linear stack
            module.reset_parameters()

    def forward(self, sample: torch.Tensor, timesteps: torch.Tensor | int, cond: torch.Tensor,
                task: torch.Tensor | None = None, noise: torch.Tensor | None = None, return_dict: bool = True,
                **kwargs) -> EpsMLPOutput:
        c = self.config
        fn = "EpsMLP.forward"
        if sample.ndim != 2 or sample.shape[1] != c.sample_dim:
            raise input_error(fn, "sample", f"[batch, {c.sample_dim}]", describe(sample))
        n = sample.shape[0]
        if cond.ndim != 2 or cond.shape != (n, c.cond_dim):
            raise input_error(fn, "cond", f"[{n}, {c.cond_dim}] (one condition per sample)", describe(cond))
        timesteps = torch.as_tensor(timesteps, device=sample.device)
        if timesteps.ndim == 0:
            timesteps = timesteps.expand(n)
        if timesteps.shape != (n,):
            raise input_error(fn, "timesteps", f"a scalar or [{n}]", describe(timesteps))
        parts = [sample, get_timestep_embedding(timesteps, c.time_embed_dim).to(sample.dtype),
                 self.cond_proj(cond) if self.cond_proj is not None else cond]
        if c.num_tasks:
            if task is None:
                raise input_error(fn, "task", f"[{n}] task ids in [0, {c.num_tasks}) (the model has num_tasks = "
                                  f"{c.num_tasks})", None)
            task = torch.as_tensor(task, device=sample.device)
            if task.ndim == 0:
                task = task.expand(n)
            if task.shape != (n,) or task.dtype.is_floating_point:
                raise input_error(fn, "task", f"[{n}] integer task ids", describe(task))
            if (task.device.type == "cpu") and bool(((task < 0) | (task >= c.num_tasks)).any()):
                raise input_error(fn, "task", f"task ids in [0, {c.num_tasks})", sorted(set(task.tolist())))
            parts.append(nn.functional.one_hot(task.long(), c.num_tasks).to(sample.dtype))
        eps = self.net(torch.cat(parts, dim=1))
        loss = None
        if noise is not None:
            if noise.shape != sample.shape:
                raise input_error(fn, "noise", f"the shape of sample {tuple(sample.shape)}", describe(noise))
            loss = (noise - eps).square().sum(1).mean()
        return EpsMLPOutput(loss=loss, sample=eps)


AutoModel.register(EpsMLPConfig, EpsMLP, exist_ok=True)

__all__ = ["EpsMLPConfig", "EpsMLPOutput", "EpsMLP"]
