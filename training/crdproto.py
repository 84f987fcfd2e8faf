"""Training CRDProto's pieces on base classes (reconstruction of "Rank-guided Diffusion for Noise Few-Shot
Learning", ICML 2026): the feature diffusion prior, and the choice of Outlier Pursuit's ``lam`` and the guidance
scale on noisy base-class episodes (never on novel ones).

The prior learns ``p(z | summary)`` of backbone features, the summary being the l2-normalised mean of
``summary_rows`` other rows of the same class (what the repair step conditions on: the clean rows of a support
class). Its loss is the DSM of :func:`icml26.training.mol_diffusion.fit_dsm`, the loop shared with the
multi-objective diffusion method.
"""

from __future__ import annotations

import itertools
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from icml26.errors import describe, input_error
from icml26.models.crdproto import FeatureDiffusionConfig, FeatureDiffusionModel, RankGuidedPrototypes, class_summary
from icml26.training.mol_diffusion.dsm import DSMFit, fit_dsm
from icml26.validation import check_int


def _features(fn: str, features, labels) -> tuple[torch.Tensor, np.ndarray]:
    Z = torch.as_tensor(np.asarray(features), dtype=torch.float32)
    y = np.asarray(labels)
    if Z.ndim != 2 or not bool(torch.isfinite(Z).all()):
        raise input_error(fn, "features", "a finite [n, d] feature matrix", describe(features))
    if y.shape != (Z.shape[0],):
        raise input_error(fn, "labels", f"[{Z.shape[0]}] class labels", describe(labels))
    return Z, y


def fit_feature_prior(features, labels, config: FeatureDiffusionConfig | None = None, *, steps: int = 1500,
                      batch_size: int = 256, lr: float = 1e-3, summary_rows: int = 3, pairs_per_row: int = 4,
                      seed: int = 0) -> tuple[FeatureDiffusionModel, DSMFit]:
    """The feature DDPM on base-class ``features`` ``[n, d]`` with ``labels``: each row is paired
    ``pairs_per_row`` times with the summary of ``summary_rows`` other rows of its class; AdamW by DSM.

    Returns the model (in eval mode) and its :class:`~icml26.training.mol_diffusion.DSMFit`."""
    fn = "fit_feature_prior"
    Z, y = _features(fn, features, labels)
    summary_rows = check_int(fn, "summary_rows", summary_rows, low=1)
    pairs_per_row = check_int(fn, "pairs_per_row", pairs_per_row, low=1)
    seed = check_int(fn, "seed", seed, low=0)
    config = config or FeatureDiffusionConfig(feature_dim=Z.shape[1])
    if config.feature_dim != Z.shape[1]:
        raise input_error(fn, "config", f"feature_dim {Z.shape[1]} (the features' width)", config.feature_dim)
    rng = np.random.default_rng(seed)
    rows, conds = [], []
    for c in np.unique(y):
        members = np.flatnonzero(y == c)
        if len(members) <= summary_rows:
            raise input_error(fn, "labels", f"more than summary_rows = {summary_rows} rows per class",
                              f"class {c} with {len(members)}")
        for i in members:
            others = members[members != i]
            for _ in range(pairs_per_row):
                rows.append(i)
                conds.append(rng.choice(others, summary_rows, replace=False))
    data = {"x0": Z[rows], "cond": class_summary(Z[np.asarray(conds)])}
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = FeatureDiffusionModel(config)
    fit = fit_dsm(model, model.noise_scheduler(), data, steps, batch_size=batch_size, lr=lr, seed=seed)
    return model, fit


@dataclass
class Selection:
    """What :func:`select_hyperparameters` measured: the mean query accuracy of each ``(lam, guidance_scale)`` on
    the base-class episodes, and the best pair."""

    accuracy: dict[str, float] = field(default_factory=dict)
    lam: float | None = None
    guidance_scale: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def select_hyperparameters(features, labels, prior: FeatureDiffusionModel, *, lams=(None, 1.0),
                           guidance_scales=(30.0, 100.0, 300.0), episodes: int = 40, noise_kind: str = "sym_swap",
                           noise_fraction: float = 0.4, n_way: int = 5, n_shot: int = 5, n_query: int = 15,
                           seed: int = 0) -> Selection:
    """Choose ``lam`` (``None``: ``1 / sqrt(K)``) and the guidance scale by query accuracy on ``episodes`` noisy
    episodes of the (base-class) ``features``; every pair meets the same episodes, noise and sampler seeds."""
    from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise

    fn = "select_hyperparameters"
    Z, y = _features(fn, features, labels)
    episodes = check_int(fn, "episodes", episodes, low=1)
    sampler = EpisodeSampler(y, n_way, n_shot, n_query, seed=seed)
    noise = SupportNoise(noise_kind, noise_fraction, seed=seed + 1)
    drawn = [noise(sampler.sample(), y) for _ in range(episodes)]
    out = Selection()
    best = -1.0
    for lam, scale in itertools.product(lams, guidance_scales):
        correct = total = 0
        for i, ep in enumerate(drawn):
            model = RankGuidedPrototypes(prior, lam=lam, guidance_scale=scale, seed=seed + i)
            model.process_support_set(Z[ep.support.reshape(-1)], torch.as_tensor(ep.support_labels.reshape(-1)))
            with torch.no_grad():
                pred = model(Z[ep.query.reshape(-1)]).argmax(1)
            correct += int((pred == torch.arange(len(ep.classes)).repeat_interleave(ep.query.shape[1])).sum())
            total += pred.numel()
        acc = correct / total
        out.accuracy[f"lam={lam}, s={scale:g}"] = acc
        if acc > best:
            best, out.lam, out.guidance_scale = acc, lam, scale
    return out


__all__ = ["fit_feature_prior", "Selection", "select_hyperparameters"]
