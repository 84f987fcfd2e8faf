"""Digits under image transformations: the offline stand-in for TIED's affNIST / homNIST benchmarks.

scikit-learn's bundled ``load_digits`` (1797 8x8 images, no download): scaled to ``[0, 1]`` (/16), zero-padded
8 -> 12, bilinearly upsampled to 20x20 (``size``) on the ``[-1, 1]^2`` grid of :func:`icml26.models.tied.groups.act`, and
split 1300 train / 497 held out (seeded). A small CNN (Conv 16 - pool - Conv 32 - pool - FC 64 - FC 10) is
trained on the clean training digits; test digits are transformed by a random group element ``g*`` as
``x~ = act(g*, x)``, so ``act(g*^-1, x~)`` restores them (up to interpolation and the canvas edge).

Transformations (Reconstruction: the calibrated digits protocol, not the paper's datasets):

- ``"se2"``: rotations ``U(-60, 60)`` degrees and shifts ``0.15 N(0, 1)`` of the half-width each
  (:class:`~icml26.models.tied.groups.SE2` coefficients ``(angle / 0.6, N(0, 1), N(0, 1))``);
- ``"homography"`` ("mild"): ``exp`` of ``N(0, 0.6^2)`` coefficients of the scaled ``sl(3)`` basis whose
  (1,3) and (2,3) scales are 0.3 instead of 0.5 (:func:`mild_homography_group`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml26.errors import described, input_error
from icml26.models.tied.classifier import DEFAULT_SIZE
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["DigitsData", "load_digit_images", "accuracy", "random_transforms", "mild_homography_group", "fit_ppca",
           "TRANSFORMS"]

TRANSFORMS = ("se2", "homography")
#: Reconstruction: 20x20, the classifier's default (the calibrated protocol used 24x24, which costs 1.44x the
#: pixel work per sampler step).
IMAGE_SIZE = DEFAULT_SIZE


@dataclass
class DigitsData:
    """``(N, 1, size, size)`` float32 images in ``[0, 1]`` and int64 labels, train and held-out."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor


def load_digit_images(seed: int = 0, n_train: int = 1300, size: int = IMAGE_SIZE) -> DigitsData:
    """The preprocessed digits (``size`` x ``size``), split ``n_train`` / the rest by a permutation drawn from
    ``seed``."""
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    seed = check_int("load_digit_images", "seed", seed, low=0)
    n_train = check_int("load_digit_images", "n_train", n_train, low=1, high=1796)
    size = check_int("load_digit_images", "size", size, low=4)
    d = load_digits()
    x = torch.tensor(d.images / 16.0, dtype=torch.float32)[:, None]
    x = F.pad(x, (2, 2, 2, 2))
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False).clamp(0, 1)
    y = torch.tensor(d.target, dtype=torch.int64)
    perm = torch.from_numpy(np.random.default_rng(seed).permutation(len(y)))
    tr, te = perm[:n_train], perm[n_train:]
    return DigitsData(x[tr], y[tr], x[te], y[te])


@torch.no_grad()
def accuracy(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch_size: int = 1024) -> float:
    """The share of ``x`` (``(N, 1, S, S)``) that ``model`` labels as ``y`` (``(N,)``), in batches of ``batch_size``."""
    from icml26.training.tied import check_labelled_digits

    if not callable(model):
        raise input_error("accuracy", "model", "a callable returning logits", described(type(model).__name__))
    check_labelled_digits("accuracy", x, y)
    batch_size = check_int("accuracy", "batch_size", batch_size, low=1)
    preds = torch.cat([model(x[i:i + batch_size].float()).argmax(1) for i in range(0, len(x), batch_size)])
    return float((preds == y).float().mean())


def mild_homography_group():
    """The repository's scaled ``sl(3)`` with the (1,3) and (2,3) scales at 0.3 instead of 0.5."""
    from icml26.models.tied.groups import HOMOGRAPHY_SCALES, ImageHomography

    scales = list(HOMOGRAPHY_SCALES)
    scales[2], scales[5] = 0.3, 0.3
    return ImageHomography(scales=scales)


def random_transforms(kind: str, n: int, seed: int, *, max_degrees: float = 60.0, strength: float = 0.6):
    """``(group, g*)``: ``n`` random elements of the transformation family ``kind`` (see the module docstring)."""
    from icml26.models.tied.groups import SE2, rotation_translation

    check_choice("random_transforms", "kind", kind, TRANSFORMS)
    n = check_int("random_transforms", "n", n, low=1)
    seed = check_int("random_transforms", "seed", seed, low=0)
    max_degrees = check_finite("random_transforms", "max_degrees", max_degrees, non_negative=True)
    strength = check_finite("random_transforms", "strength", strength, non_negative=True)
    gen = torch.Generator().manual_seed(seed)
    if kind == "se2":
        group = SE2()
        angle = (torch.rand(n, generator=gen, dtype=torch.float64) * 2 - 1) * math.radians(max_degrees)
        shift = 0.15 * torch.randn(n, 2, generator=gen, dtype=torch.float64)
        return group, rotation_translation(angle, shift).float()
    group = mild_homography_group()
    return group, group.exp(strength * torch.randn(n, group.dim, generator=gen, dtype=torch.float64)).float()


def fit_ppca(x: torch.Tensor, n_components: int = 20, seed: int = 0):
    """``sklearn.decomposition.PCA`` (probabilistic PCA: ``noise_variance_`` is the mean residual variance, so
    ``n_components`` stays below ``min(items, pixels)``: a zero residual would make the PPCA energy singular)."""
    from sklearn.decomposition import PCA

    if not isinstance(x, torch.Tensor) or x.ndim < 2 or len(x) < 2:
        raise input_error("fit_ppca", "x", "a tensor of at least 2 items", described(repr(getattr(x, "shape", x))))
    d = x[0].numel()
    n_components = check_int("fit_ppca", "n_components", n_components, low=1, high=min(len(x), d) - 1)
    return PCA(n_components=n_components, random_state=seed).fit(x.reshape(len(x), -1).double().numpy())
