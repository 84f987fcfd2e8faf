"""Contrastive learning of the one-hidden-layer CNN ("A Theory of Contrastive Learning with Natural Images",
ICML 2026): the losses, the augmentations that make the two views, a Hugging Face ``Trainer`` and a plain loop.

- :func:`spectral_contrastive_loss` is the spectral contrastive loss of HaoChen, Wei, Gaidon and Ma (NeurIPS 2021,
  arXiv 2106.04156) as their code computes it (jhaochenz96/spectral_contrastive_learning, ``models/spectral.py``,
  ``D``): ``-2 mean_i z1_i.z2_i + sum_{i != j} (z1_i.z2_j)^2 / (B (B - 1))``, with the optional clip of each
  embedding's norm at ``sqrt(mu)`` and the division by ``mu``. Its expectation is the population loss
  ``-2 tr(M Q_plus) + tr(M R M R)`` of :func:`icml26.eval.tasks.waterfill.population_loss`.
- :func:`info_nce_loss` is SimCLR's NT-Xent (Chen et al. 2020, arXiv 2002.05709), the empirical alternative.
- Views: :class:`AdditiveNoise` (white noise of variance ``sigma2``), :class:`RandomCyclicShift` (an exact
  invariance of the circular CNN) and :class:`RandomCropShift` (an ``N x N`` crop of a larger image at a random
  offset: translation plus the change of content at the border, which a cyclic shift does not have).
- :class:`ContrastiveTrainer` (with :class:`ContrastiveConfig`) trains any model whose output carries embeddings
  on two views made by :class:`ContrastiveCollator`; :func:`fit_contrastive` is the readable loop on fresh
  images each step that the experiment uses.

These losses are written here rather than taken from a library: solo-learn (last release 2021) and lightly do not
ship the spectral contrastive loss with HaoChen's off-diagonal normalisation, and neither takes a ``Generator``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from transformers import Trainer, TrainingArguments

from icml26.errors import describe, input_error
from icml26.training.distributed import use_cpu_when_launched_without_gpu
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["AdditiveNoise", "ContrastiveCollator", "ContrastiveConfig", "ContrastiveFit", "ContrastiveTrainer",
           "InfoNCELoss", "RandomCropShift", "RandomCyclicShift", "SpectralContrastiveLoss", "fit_contrastive",
           "info_nce_loss", "make_views", "spectral_contrastive_loss"]

CONTRASTIVE_LOSSES = ("spectral", "info_nce")


# ----------------------------------------------------------------------------------------------
# losses
# ----------------------------------------------------------------------------------------------
def _pair(function: str, z1, z2) -> None:
    if not isinstance(z1, torch.Tensor) or z1.ndim != 2 or z1.shape[0] < 2 or not z1.is_floating_point():
        raise input_error(function, "z1", "a float tensor [B, d] with B >= 2", describe(z1))
    if not isinstance(z2, torch.Tensor) or z2.shape != z1.shape:
        raise input_error(function, "z2", f"a tensor of shape {tuple(z1.shape)} (as z1)", describe(z2))


def spectral_contrastive_loss(z1: torch.Tensor, z2: torch.Tensor, mu: float | None = None) -> torch.Tensor:
    """The spectral contrastive loss of a batch of positive pairs ``(z1[i], z2[i])``; the other rows are negatives.

    Args:
        z1: ``[B, d]`` embeddings of the first views (``B >= 2``).
        z2: ``[B, d]`` embeddings of the second views.
        mu: ``None`` (no clip, the analysed loss) or the clip: rows with norm >= ``sqrt(mu)`` are rescaled to that
            norm and the loss is divided by ``mu`` (HaoChen et al.'s ``D(z1, z2, mu)``).
    """
    _pair("spectral_contrastive_loss", z1, z2)
    if mu is not None:
        mu = check_finite("spectral_contrastive_loss", "mu", mu, positive=True)
        root = math.sqrt(mu)
        z1 = torch.where(z1.norm(dim=1, keepdim=True) < root, z1, F.normalize(z1, dim=1) * root)
        z2 = torch.where(z2.norm(dim=1, keepdim=True) < root, z2, F.normalize(z2, dim=1) * root)
    B = z1.shape[0]
    positive = -2.0 * (z1 * z2).sum(1).mean()
    square = (z1 @ z2.T).square()
    negative = (square.sum() - square.diagonal().sum()) / (B * (B - 1))
    loss = positive + negative
    return loss if mu is None else loss / mu


def info_nce_loss(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.5) -> torch.Tensor:
    """NT-Xent: each of the ``2B`` embeddings must pick its positive among the other ``2B - 1`` by cosine similarity.

    Args:
        z1: ``[B, d]`` embeddings of the first views (``B >= 2``).
        z2: ``[B, d]`` embeddings of the second views.
        temperature: the softmax temperature (> 0).
    """
    _pair("info_nce_loss", z1, z2)
    temperature = check_finite("info_nce_loss", "temperature", temperature, positive=True)
    B = z1.shape[0]
    z = F.normalize(torch.cat([z1, z2]), dim=1)
    logits = z @ z.T / temperature
    logits = logits.masked_fill(torch.eye(2 * B, dtype=torch.bool, device=z.device), float("-inf"))
    target = torch.cat([torch.arange(B, 2 * B), torch.arange(B)]).to(z.device)
    return F.cross_entropy(logits, target)


class SpectralContrastiveLoss(nn.Module):
    """:func:`spectral_contrastive_loss` as a module.

    Args:
        mu: the norm clip (``None``: none).
    """

    def __init__(self, mu: float | None = None) -> None:
        super().__init__()
        self.mu = None if mu is None else check_finite("SpectralContrastiveLoss", "mu", mu, positive=True)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return spectral_contrastive_loss(z1, z2, self.mu)


class InfoNCELoss(nn.Module):
    """:func:`info_nce_loss` as a module.

    Args:
        temperature: the softmax temperature.
    """

    def __init__(self, temperature: float = 0.5) -> None:
        super().__init__()
        self.temperature = check_finite("InfoNCELoss", "temperature", temperature, positive=True)

    def forward(self, z1: torch.Tensor, z2: torch.Tensor) -> torch.Tensor:
        return info_nce_loss(z1, z2, self.temperature)


# ----------------------------------------------------------------------------------------------
# views
# ----------------------------------------------------------------------------------------------
def _batch(function: str, x) -> None:
    if not isinstance(x, torch.Tensor) or x.ndim != 3 or not x.is_floating_point():
        raise input_error(function, "images", "a float tensor [B, H, W]", describe(x))


class AdditiveNoise:
    """``x + n``, ``n ~ N(0, sigma2 I)`` drawn from the given generator.

    Args:
        sigma2: the noise variance (>= 0).
    """

    def __init__(self, sigma2: float) -> None:
        self.sigma2 = check_finite("AdditiveNoise", "sigma2", sigma2, non_negative=True)

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        _batch("AdditiveNoise", images)
        noise = torch.randn(images.shape, generator=generator, dtype=images.dtype, device=images.device)
        return images + math.sqrt(self.sigma2) * noise


class RandomCyclicShift:
    """A uniform random cyclic translation of each image (both axes)."""

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        _batch("RandomCyclicShift", images)
        B, H, W = images.shape
        dy = torch.randint(H, (B,), generator=generator)
        dx = torch.randint(W, (B,), generator=generator)
        rows = (torch.arange(H)[None, :] - dy[:, None]) % H
        cols = (torch.arange(W)[None, :] - dx[:, None]) % W
        return images[torch.arange(B)[:, None, None], rows[:, :, None], cols[:, None, :]]


class RandomCropShift:
    """An ``(H - 2 max_shift) x (W - 2 max_shift)`` crop at a random offset of up to ``max_shift`` pixels from the
    centre, in each direction: two views of one image are shifted by up to ``2 max_shift`` and see different
    borders.

    Args:
        max_shift: the largest offset from the centre crop (>= 1).
    """

    def __init__(self, max_shift: int) -> None:
        self.max_shift = check_int("RandomCropShift", "max_shift", max_shift, low=1)

    def __call__(self, images: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        _batch("RandomCropShift", images)
        s = self.max_shift
        B, H, W = images.shape
        if min(H, W) <= 2 * s:
            raise input_error("RandomCropShift", "images", f"images larger than 2 max_shift = {2 * s} on each side",
                              describe(images))
        oy = torch.randint(2 * s + 1, (B,), generator=generator)
        ox = torch.randint(2 * s + 1, (B,), generator=generator)
        rows = oy[:, None] + torch.arange(H - 2 * s)[None]
        cols = ox[:, None] + torch.arange(W - 2 * s)[None]
        return images[torch.arange(B)[:, None, None], rows[:, :, None], cols[:, None, :]]


def make_views(images: torch.Tensor, transforms: Sequence[Callable], generator: torch.Generator | None = None
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """Two views of each image, each made by applying ``transforms`` in order with independent draws.

    Args:
        images: ``[B, H, W]`` float tensor.
        transforms: callables ``(images, generator) -> images`` (:class:`AdditiveNoise`, :class:`RandomCyclicShift`,
            :class:`RandomCropShift`, or your own).
        generator: the random stream (``None``: torch's global one).
    """
    _batch("make_views", images)
    return _apply(images, transforms, generator), _apply(images, transforms, generator)


def _apply(images: torch.Tensor, transforms: Sequence[Callable], generator) -> torch.Tensor:
    for t in transforms:
        images = t(images, generator)
    return images


# ----------------------------------------------------------------------------------------------
# Trainer
# ----------------------------------------------------------------------------------------------
@dataclass
class ContrastiveConfig(TrainingArguments):
    """``TrainingArguments`` plus the contrastive settings (prefixed ``contrastive_`` so ``HfArgumentParser`` can
    merge them with other configs)."""

    contrastive_loss: str = field(default="spectral", metadata={"help": "spectral (HaoChen et al. 2021) or info_nce"})
    contrastive_mu: float | None = field(default=None, metadata={"help": "the spectral loss's norm clip (none: off)"})
    contrastive_temperature: float = field(default=0.5, metadata={"help": "InfoNCE's temperature"})
    contrastive_noise_sigma2: float = field(default=0.05, metadata={"help": "variance of each view's white noise"})
    contrastive_shift: str = field(default="cyclic", metadata={"help": "cyclic (a random cyclic translation), "
                                                                        "crop (a shifted crop) or none"})
    contrastive_max_shift: int = field(default=2, metadata={"help": "largest crop offset, with shift=crop"})

    def __post_init__(self) -> None:
        fn = "ContrastiveConfig"
        check_choice(fn, "contrastive_loss", self.contrastive_loss, CONTRASTIVE_LOSSES)
        if self.contrastive_mu is not None:
            check_finite(fn, "contrastive_mu", self.contrastive_mu, positive=True)
        check_finite(fn, "contrastive_temperature", self.contrastive_temperature, positive=True)
        check_finite(fn, "contrastive_noise_sigma2", self.contrastive_noise_sigma2, non_negative=True)
        check_choice(fn, "contrastive_shift", self.contrastive_shift, ("cyclic", "crop", "none"))
        check_int(fn, "contrastive_max_shift", self.contrastive_max_shift, low=1)
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()

    def transforms(self) -> list[Callable]:
        """The view transforms these settings describe (shift first, then noise)."""
        shift = {"cyclic": [RandomCyclicShift()], "crop": [RandomCropShift(self.contrastive_max_shift)],
                 "none": []}[self.contrastive_shift]
        return shift + ([AdditiveNoise(self.contrastive_noise_sigma2)] if self.contrastive_noise_sigma2 > 0 else [])

    def loss_fn(self) -> nn.Module:
        """The loss module these settings describe."""
        if self.contrastive_loss == "spectral":
            return SpectralContrastiveLoss(self.contrastive_mu)
        return InfoNCELoss(self.contrastive_temperature)


class ContrastiveCollator:
    """Batches rows holding ``pixel_values`` (``[H, W]`` or ``[1, H, W]``) into ``pixel_values`` and
    ``pixel_values_2``, two views made by ``transforms``.

    Args:
        transforms: the view transforms (see :func:`make_views`).
        seed: seeds the collator's own generator (``None``: torch's global stream).
    """

    def __init__(self, transforms: Sequence[Callable], seed: int | None = None) -> None:
        self.transforms = list(transforms)
        self.generator = None
        if seed is not None:
            self.generator = torch.Generator().manual_seed(check_int("ContrastiveCollator", "seed", seed, low=0))

    def __call__(self, rows: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        images = []
        for i, row in enumerate(rows):
            if "pixel_values" not in row:
                raise input_error("ContrastiveCollator", "rows", "dicts with a 'pixel_values' field",
                                  f"row {i} with keys {sorted(row)}")
            x = torch.as_tensor(np.asarray(row["pixel_values"]), dtype=torch.float32)
            images.append(x[0] if x.ndim == 3 and x.shape[0] == 1 else x)
        try:
            batch = torch.stack(images)
        except RuntimeError:
            raise input_error("ContrastiveCollator", "rows", "pixel_values of one shape [H, W]",
                              sorted({tuple(x.shape) for x in images})) from None
        v1, v2 = make_views(batch, self.transforms, self.generator)
        return {"pixel_values": v1, "pixel_values_2": v2}


def _embeddings(outputs) -> torch.Tensor:
    for name in ("embeddings", "image_embeds", "pooler_output"):
        value = getattr(outputs, name, None) if not isinstance(outputs, dict) else outputs.get(name)
        if value is not None:
            return value.flatten(1)
    raise input_error("ContrastiveTrainer", "model", "a model whose output has embeddings, image_embeds or "
                      "pooler_output", type(outputs).__name__)


class ContrastiveTrainer(Trainer):
    """:class:`transformers.Trainer` on pairs of views: ``compute_loss`` embeds both views and applies the
    configured loss. The model may be any whose output has ``embeddings`` (as
    :class:`~icml26.models.waterfill.SpectralCNNModel`), ``image_embeds`` or ``pooler_output``.

    Args (besides ``Trainer``'s):
        loss_fn: ``(z1, z2) -> loss`` (default: from ``args`` when it is a :class:`ContrastiveConfig`, else
            :class:`SpectralContrastiveLoss`).

    The data collator defaults to :class:`ContrastiveCollator` with the ``args``' transforms (seeded by
    ``args.seed``); rows hold ``pixel_values``.
    """

    def __init__(self, *args, loss_fn: Callable | None = None, **kwargs) -> None:
        training_args = kwargs.get("args", args[1] if len(args) > 1 else None)
        if kwargs.get("data_collator") is None:
            transforms = training_args.transforms() if isinstance(training_args, ContrastiveConfig) else []
            kwargs["data_collator"] = ContrastiveCollator(transforms, seed=getattr(training_args, "seed", None))
        super().__init__(*args, **kwargs)
        if loss_fn is None:
            loss_fn = self.args.loss_fn() if isinstance(self.args, ContrastiveConfig) else SpectralContrastiveLoss()
        if not callable(loss_fn):
            raise TypeError(f"ContrastiveTrainer: loss_fn: expected a callable (z1, z2) -> loss, got "
                            f"{type(loss_fn).__name__}")
        self.loss_fn = loss_fn
        self.label_names = ["pixel_values_2"]  # so evaluation computes the loss

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        outputs = model(pixel_values=inputs["pixel_values"])
        z2 = _embeddings(model(pixel_values=inputs["pixel_values_2"]))
        loss = self.loss_fn(_embeddings(outputs), z2)
        return (loss, outputs) if return_outputs else loss


# ----------------------------------------------------------------------------------------------
# the plain loop
# ----------------------------------------------------------------------------------------------
@dataclass
class ContrastiveFit:
    """What :func:`fit_contrastive` measured: the loss every ``log_every`` steps and the wall time."""

    steps: list[int]
    losses: list[float]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_contrastive(model: nn.Module, sample_images: Callable[[int, np.random.Generator], Any], steps: int, *,
                    transforms: Sequence[Callable], batch_size: int = 128, lr: float = 3e-3,
                    weight_decay: float = 3e-3, loss_fn: Callable | None = None, seed: int = 0,
                    log_every: int = 100, progress: Callable[[int], None] | None = None) -> ContrastiveFit:
    """Train ``model`` with AdamW on fresh images each step (the setting of the paper's theory: the population
    loss, not a fixed data set).

    Args:
        model: returns an output with ``embeddings`` for ``model(pixel_values=...)``; both views go through one
            call (``[2B, ...]``), so a model whose rows interact (batch normalisation) would see them mixed.
        sample_images: ``(batch_size, rng) -> [B, N, N]`` images (array or tensor) from a numpy generator, each
            made into two views by ``transforms``; or ``[B, 2, N, N]`` view pairs, ``transforms`` then applied to
            each view.
        steps: the number of optimiser steps.
        transforms: the view transforms (see :func:`make_views`).
        batch_size: images per step (>= 2).
        lr: AdamW's learning rate.
        weight_decay: AdamW's decoupled weight decay (on the filters it acts as an L1 penalty on their powers).
        loss_fn: ``(z1, z2) -> loss`` (default: :func:`spectral_contrastive_loss`).
        seed: seeds the image stream and the view draws.
        log_every: record the loss every this many steps.
        progress: called with the number of steps done, every ``log_every`` steps.
    """
    fn = "fit_contrastive"
    steps = check_int(fn, "steps", steps, low=1)
    batch_size = check_int(fn, "batch_size", batch_size, low=2)
    lr = check_finite(fn, "lr", lr, positive=True)
    weight_decay = check_finite(fn, "weight_decay", weight_decay, non_negative=True)
    log_every = check_int(fn, "log_every", log_every, low=1)
    seed = check_int(fn, "seed", seed, low=0)
    loss_fn = loss_fn or spectral_contrastive_loss
    rng = np.random.default_rng(seed)
    generator = torch.Generator().manual_seed(seed)
    param = next(model.parameters())
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    fit = ContrastiveFit([], [], 0.0)
    start = time.perf_counter()
    model.train()
    for step in range(1, steps + 1):
        images = torch.as_tensor(np.asarray(sample_images(batch_size, rng)), dtype=torch.float32)
        if images.ndim == 4 and images.shape[1] == 2:  # view pairs already made (crops of one photo)
            v1, v2 = (_apply(images[:, i], transforms, generator) for i in (0, 1))
        else:
            v1, v2 = make_views(images, transforms, generator)
        # both views in one forward: half the calls, and the filters' transform is computed once
        z1, z2 = _embeddings(model(pixel_values=torch.cat([v1, v2]).to(param.device, param.dtype))).chunk(2)
        loss = loss_fn(z1, z2)
        if not torch.isfinite(loss):
            raise FloatingPointError(f"fit_contrastive: the loss is {loss.item()} at step {step} (lr {lr} too high?)")
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps:
            fit.steps.append(step)
            fit.losses.append(loss.item())
            if progress is not None:
                progress(step)
    fit.seconds = time.perf_counter() - start
    model.eval()
    return fit
