"""The victim network of the PBTO persistence audit ("Persistent Backdoor Attacks in Class-Incremental Learning via
Structural Invariant Anchoring", ICML 2026; the public code, hjhkkkc/PBTO, is a self-declared reproduction).

A small convolutional network for class-incremental learning on small images: pixel normalisation inside the model
(so a trigger is added in raw pixel space, before it), three stages ``layer1..layer3`` (the names the paper's anchor
layers use), a pooled feature and a linear head that grows as classes arrive while keeping the old classes' rows.
Reconstruction: the channel widths (16/32/64) and stage layout are the issue's small-scale choice, not the paper's
ResNet.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers.utils import ModelOutput

from icml26.errors import describe, input_error
from icml26.validation import check_finite, check_int

LAYERS = ("layer1", "layer2", "layer3", "pooled")


class SmallConvNetConfig(PretrainedConfig):
    """Configuration of :class:`SmallConvNet`.

    Args:
        in_channels: image channels.
        channels: widths of ``layer1``, ``layer2`` and ``layer3``.
        num_classes: rows of the head (grows with :meth:`SmallConvNet.add_classes`).
        pixel_mean, pixel_std: the normalisation applied inside the model to raw pixels.
    """

    model_type = "icml26_pbto_small_convnet"

    def __init__(self, in_channels: int = 1, channels: tuple[int, int, int] | list[int] = (16, 32, 64),
                 num_classes: int = 0, pixel_mean: float = 0.5, pixel_std: float = 0.5, **kwargs) -> None:
        fn = "SmallConvNetConfig"
        self.in_channels = check_int(fn, "in_channels", in_channels, low=1)
        channels = list(channels)
        if len(channels) != 3:
            raise input_error(fn, "channels", "three widths (layer1, layer2, layer3)", channels)
        self.channels = [check_int(fn, "channels", c, low=1) for c in channels]
        self.num_classes = check_int(fn, "num_classes", num_classes, low=0)
        self.pixel_mean = check_finite(fn, "pixel_mean", pixel_mean)
        self.pixel_std = check_finite(fn, "pixel_std", pixel_std, positive=True)
        super().__init__(**kwargs)


AutoConfig.register(SmallConvNetConfig.model_type, SmallConvNetConfig, exist_ok=True)


@dataclass
class SmallConvNetOutput(ModelOutput):
    """Output of :class:`SmallConvNet`: ``loss`` (with labels), ``logits`` and the pooled ``features``."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    features: torch.Tensor | None = None


def _linear(d_in: int, d_out: int) -> nn.Linear:
    """``nn.Linear``; a head with no classes yet (``d_out = 0``) is built without torch's zero-element warning."""
    if d_out:
        return nn.Linear(d_in, d_out)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return nn.Linear(d_in, d_out)


def _stage(c_in: int, c_out: int, pool: bool) -> nn.Sequential:
    layers: list[nn.Module] = [nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU()]
    if pool:
        layers.append(nn.MaxPool2d(2, ceil_mode=True))
    return nn.Sequential(*layers)


class SmallConvNet(PreTrainedModel):
    """``layer1`` (no pooling), ``layer2`` and ``layer3`` (each halving the resolution), global average pooling and an
    expandable linear head. ``forward(pixel_values, labels=None)`` takes raw pixels ``[B, C, H, W]`` (or ``[B, H,
    W]`` for one channel) in the data's range."""

    config_class = SmallConvNetConfig
    main_input_name = "pixel_values"
    _no_split_modules: list[str] = []

    def __init__(self, config: SmallConvNetConfig) -> None:
        super().__init__(config)
        c1, c2, c3 = config.channels
        self.layer1 = _stage(config.in_channels, c1, pool=False)
        self.layer2 = _stage(c1, c2, pool=True)
        self.layer3 = _stage(c2, c3, pool=True)
        self.head = _linear(c3, config.num_classes)
        self.post_init()

    def _init_weights(self, module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Conv2d, nn.BatchNorm2d)) and module.weight.numel():
            module.reset_parameters()  # PyTorch's defaults: seeded init is torch's

    @property
    def feature_dim(self) -> int:
        return self.config.channels[-1]

    def add_classes(self, n: int) -> None:
        """Grow the head by ``n`` classes, keeping the old rows (weights and biases) as they are."""
        n = check_int("SmallConvNet.add_classes", "n", n, low=1)
        old = self.head
        new = _linear(old.in_features, old.out_features + n).to(old.weight.device, old.weight.dtype)
        with torch.no_grad():
            new.weight[: old.out_features] = old.weight
            new.bias[: old.out_features] = old.bias
        self.head = new
        self.config.num_classes = new.out_features

    def _pixels(self, fn: str, pixel_values: torch.Tensor) -> torch.Tensor:
        x = pixel_values
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
            raise input_error(fn, "pixel_values", "a float tensor of raw pixels", describe(x))
        if x.ndim == 3 and self.config.in_channels == 1:
            x = x[:, None]
        if x.ndim != 4 or x.shape[1] != self.config.in_channels:
            raise input_error(fn, "pixel_values", f"[B, {self.config.in_channels}, H, W] pixels", describe(x))
        return (x - self.config.pixel_mean) / self.config.pixel_std

    def forward_with_features(self, pixel_values: torch.Tensor, layers=LAYERS) -> tuple[torch.Tensor, dict]:
        """Logits and the activations of ``layers`` (any of ``layer1``, ``layer2``, ``layer3``, ``pooled``)."""
        fn = "SmallConvNet.forward_with_features"
        unknown = [name for name in layers if name not in LAYERS]
        if unknown:
            raise input_error(fn, "layers", f"names among {LAYERS}", unknown)
        acts = {}
        h = self._pixels(fn, pixel_values)
        for name in ("layer1", "layer2", "layer3"):
            h = getattr(self, name)(h)
            acts[name] = h
        acts["pooled"] = h.mean((2, 3))
        return self.head(acts["pooled"]), {name: acts[name] for name in layers}

    def forward(self, pixel_values: torch.Tensor, labels: torch.Tensor | None = None, return_dict: bool = True,
                **kwargs) -> SmallConvNetOutput:
        logits, acts = self.forward_with_features(pixel_values, ("pooled",))
        loss = None
        if labels is not None:
            if self.config.num_classes == 0:
                raise input_error("SmallConvNet.forward", "labels", "a head with classes (call add_classes)", 0)
            loss = nn.functional.cross_entropy(logits, labels)
        return SmallConvNetOutput(loss=loss, logits=logits, features=acts["pooled"])


AutoModel.register(SmallConvNetConfig, SmallConvNet, exist_ok=True)

__all__ = ["LAYERS", "SmallConvNetConfig", "SmallConvNetOutput", "SmallConvNet"]
