"""Rank-guided prototypes (CRDProto, "Rank-guided Diffusion for Noise Few-Shot Learning", ICML 2026; reconstructed):
flag the rank anomalies of a noisy support set and replace each flagged shot by a feature drawn from a diffusion
prior, guided to stay in its class's low-rank subspace; then ProtoNet's class means (Snell et al. 2017).

Only the abstract is known. Reconstruction, each part pluggable:

- the prior (:class:`FeatureDiffusionModel`): an epsilon-MLP over backbone features conditioned on a clean-class
  summary (the l2-normalised mean of a few same-class rows), trained on base classes with diffusers'
  ``DDPMScheduler`` (linear betas, T = 100);
- the replacement (``repair``): SDEdit-style, from the clean rows' mean noised to ``t_start * T``, by DDPM ancestral
  steps with DPS guidance (Chung et al. 2023): ``z_{t-1} = step(z_t) - s * var_t * grad_{z_t} E(x0_hat(z_t))``,
  ``var_t`` the posterior variance; the energy ``E`` is the squared distance of ``x0_hat`` to the clean rows' rank-2
  subspace through their mean, plus ``eta`` times the rise of the nuclear norm when ``x0_hat`` joins the clean rows;
- the classifier interface follows easyfsl's few-shot classifiers (``process_support_set(features, labels)``, then
  ``forward(query) -> logits``), on precomputed features (easyfsl itself is not a dependency: its install replaces the
  CPU torch).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from diffusers import DDPMScheduler
from torch import nn
from transformers import AutoConfig, AutoModel

from icml26.errors import describe, input_error
from icml26.models.crdproto.lowrank import SCORES, anomaly_scores, class_bases, flag_rows
from icml26.models.mol_diffusion import EpsMLP, EpsMLPConfig
from icml26.validation import check_choice, check_finite, check_int, check_random_state


class FeatureDiffusionConfig(EpsMLPConfig):
    """Configuration of :class:`FeatureDiffusionModel`: an :class:`~icml26.models.mol_diffusion.EpsMLPConfig` over
    features (``sample_dim = cond_dim = d``) plus its training schedule.

    Args:
        feature_dim: the feature dimension ``d`` (both the sample and the condition).
        num_train_timesteps: steps of the linear-beta DDPM schedule.
        beta_start, beta_end: the schedule's first and last beta.
        hidden_size, num_layers, time_embed_dim: the epsilon-MLP's widths.
    """

    model_type = "icml26_crd_feature_diffusion"

    def __init__(self, feature_dim: int = 64, num_train_timesteps: int = 100, beta_start: float = 1e-4,
                 beta_end: float = 0.02, hidden_size: int = 256, num_layers: int = 2, time_embed_dim: int = 32,
                 **kwargs) -> None:
        fn = "FeatureDiffusionConfig"
        self.feature_dim = check_int(fn, "feature_dim", feature_dim, low=1)
        self.num_train_timesteps = check_int(fn, "num_train_timesteps", num_train_timesteps, low=2)
        self.beta_start = check_finite(fn, "beta_start", beta_start, positive=True)
        self.beta_end = check_finite(fn, "beta_end", beta_end, low=self.beta_start, high=1.0, high_open=True)
        for key in ("sample_dim", "cond_dim", "num_tasks", "cond_bottleneck"):
            kwargs.pop(key, None)  # fixed by feature_dim (a saved config carries them)
        super().__init__(sample_dim=feature_dim, cond_dim=feature_dim, num_tasks=0, cond_bottleneck=None,
                         hidden_size=hidden_size, num_layers=num_layers, time_embed_dim=time_embed_dim, **kwargs)


AutoConfig.register(FeatureDiffusionConfig.model_type, FeatureDiffusionConfig, exist_ok=True)


class FeatureDiffusionModel(EpsMLP):
    """The feature prior: ``forward(sample, timesteps, cond)`` predicts the noise of a noised feature given the
    clean-class summary ``cond``; :meth:`noise_scheduler` is its training schedule."""

    config_class = FeatureDiffusionConfig

    def noise_scheduler(self) -> DDPMScheduler:
        c = self.config
        return DDPMScheduler(num_train_timesteps=c.num_train_timesteps, beta_schedule="linear",
                             beta_start=c.beta_start, beta_end=c.beta_end, clip_sample=False)


AutoModel.register(FeatureDiffusionConfig, FeatureDiffusionModel, exist_ok=True)


def class_summary(rows: torch.Tensor) -> torch.Tensor:
    """The prior's condition: the l2-normalised mean of a class's rows ``[k, d]`` (batched ``[..., k, d]``)."""
    return nn.functional.normalize(rows.mean(-2), dim=-1)


# ----------------------------------------------------------------------------------------------
# prototype classifiers (easyfsl's interface, on features)
# ----------------------------------------------------------------------------------------------
def _support(fn: str, features, labels) -> tuple[torch.Tensor, torch.Tensor]:
    Z = torch.as_tensor(features)
    if Z.ndim != 2 or not Z.dtype.is_floating_point or (Z.device.type == "cpu" and not bool(torch.isfinite(Z).all())):
        raise input_error(fn, "features", "a finite [n, d] float tensor", describe(features))
    y = torch.as_tensor(labels)
    if y.shape != (Z.shape[0],) or y.dtype.is_floating_point or y.dtype == torch.bool:
        raise input_error(fn, "labels", f"[{Z.shape[0]}] integer labels", describe(labels))
    classes = torch.unique(y)
    if not torch.equal(classes, torch.arange(len(classes))):
        raise input_error(fn, "labels", "labels 0..N-1 (episode positions)", classes.tolist())
    return Z, y.long()


class _Prototypes(nn.Module):
    """ProtoNet's classifier over prototypes: ``forward(query) -> -||q - p_c||^2``."""

    prototypes: torch.Tensor | None = None

    def forward(self, query: torch.Tensor) -> torch.Tensor:
        if self.prototypes is None:
            raise input_error(type(self).__name__, "self", "a support set (call process_support_set first)", None)
        q = torch.as_tensor(query)
        if q.ndim != 2 or q.shape[1] != self.prototypes.shape[1]:
            raise input_error(type(self).__name__, "query", f"[m, {self.prototypes.shape[1]}] features", describe(q))
        return -torch.cdist(q.to(self.prototypes.dtype), self.prototypes).square()

    def _means(self, Z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.stack([Z[y == c].mean(0) for c in range(int(y.max()) + 1)])


class MeanPrototypes(_Prototypes):
    """ProtoNet (Snell et al. 2017): each class's prototype is the mean of its support features."""

    def process_support_set(self, features, labels) -> None:
        Z, y = _support("MeanPrototypes.process_support_set", features, labels)
        self.prototypes = self._means(Z, y)


class MedianPrototypes(_Prototypes):
    """TraNFS's robust baseline: the coordinate-wise median of each class's support features."""

    def process_support_set(self, features, labels) -> None:
        Z, y = _support("MedianPrototypes.process_support_set", features, labels)
        self.prototypes = torch.stack([Z[y == c].median(0).values for c in range(int(y.max()) + 1)])


class OraclePrototypes(_Prototypes):
    """The upper reference: means of the truly clean shots only (reads the noise ``mask``; never a method)."""

    def process_support_set(self, features, labels, mask) -> None:
        Z, y = _support("OraclePrototypes.process_support_set", features, labels)
        keep = ~torch.as_tensor(mask, dtype=torch.bool).reshape(-1)
        if keep.shape != y.shape:
            raise input_error("OraclePrototypes.process_support_set", "mask", f"[{len(y)}] booleans", describe(mask))
        self.prototypes = torch.stack([Z[(y == c) & keep].mean(0) if bool(((y == c) & keep).any())
                                       else Z[y == c].mean(0) for c in range(int(y.max()) + 1)])


@dataclass
class RepairResult:
    """What :meth:`RankGuidedPrototypes.repair` did: the repaired ``features`` (K rows per class, flagged rows
    replaced), the ``flagged`` mask, each class's rank and fallback, and the anomaly ``scores``."""

    features: torch.Tensor
    flagged: torch.Tensor
    ranks: list[int]
    scores: torch.Tensor
    fallback: list[bool]


class RankGuidedPrototypes(_Prototypes):
    """Rank-anomaly detection and rank-guided feature diffusion, then class means.

    Args:
        prior: the feature diffusion prior (a :class:`FeatureDiffusionModel`); ``None`` makes the filter-only
            ablation (flagged rows dropped, nothing generated).
        lam: Outlier Pursuit's weight (default ``1 / sqrt(K)``).
        score: the anomaly score (``"relative"``, ``"sparse_energy"`` or ``"residual"``; see
            :func:`~icml26.models.crdproto.anomaly_scores`).
        guidance_scale: ``s`` of the DPS step (0: unguided samples from the prior).
        t_start: the share of the schedule the replacement starts from (SDEdit from the noised clean mean).
        eta: the weight of the nuclear-norm term of the energy.
        threshold: a row is flagged when its score exceeds this (at most ``floor((K - 1) / 2)`` per class).
        seed: the sampler's noise (``None``: torch's global stream).
    """

    def __init__(self, prior: FeatureDiffusionModel | None, lam=None, score: str = "relative",
                 guidance_scale: float = 100.0, t_start: float = 0.5, eta: float = 0.0, threshold: float = 0.0,
                 seed: int | None = None) -> None:
        super().__init__()
        fn = "RankGuidedPrototypes"
        if prior is not None and not isinstance(prior, FeatureDiffusionModel):
            raise TypeError(f"{fn}: prior: expected a FeatureDiffusionModel or None, got {type(prior).__name__}")
        self.prior = prior
        self.lam = None if lam is None else check_finite(fn, "lam", lam, positive=True)
        self.score = check_choice(fn, "score", score, SCORES)
        self.guidance_scale = check_finite(fn, "guidance_scale", guidance_scale, non_negative=True)
        self.t_start = check_finite(fn, "t_start", t_start, low=0.0, high=1.0, low_open=True)
        self.eta = check_finite(fn, "eta", eta, non_negative=True)
        self.threshold = check_finite(fn, "threshold", threshold)
        check_random_state(fn, "seed", seed)
        self.seed = seed

    def process_support_set(self, features, labels) -> None:
        Z, y = _support("RankGuidedPrototypes.process_support_set", features, labels)
        result = self.repair(Z, y)
        if self.prior is None:   # filter-only: the class means of the unflagged rows
            keep = ~result.flagged
            self.prototypes = torch.stack([Z[(y == c) & keep].mean(0) for c in range(int(y.max()) + 1)])
        else:
            self.prototypes = self._means(result.features, y)
        self.last_repair = result

    def repair(self, features, labels) -> RepairResult:
        """Flag the rank anomalies of a support set (its noisy labels only: no mask) and replace each flagged row
        by a guided sample of the prior (one batched reverse pass per support set)."""
        Z, y = _support("RankGuidedPrototypes.repair", features, labels)
        bases = class_bases(Z, y, lam=self.lam)
        scores = anomaly_scores(Z, y, kind=self.score, bases=bases)
        flagged = flag_rows(scores, y, self.threshold)
        out = Z.clone()
        rows = torch.nonzero(flagged).flatten()
        if self.prior is not None and len(rows):
            out[rows] = self._generate(Z, y, flagged, rows).to(Z.dtype)
        return RepairResult(out, flagged, bases.ranks, scores, bases.fallback)

    def _generate(self, Z, y, flagged, rows) -> torch.Tensor:
        prior = self.prior
        dtype = next(prior.parameters()).dtype
        d = Z.shape[1]
        means, bases, clean_sets = [], [], []
        width = max(int(((y == int(y[r])) & ~flagged).sum()) for r in rows)
        for r in rows.tolist():
            clean = Z[(y == y[r]) & ~flagged].to(dtype)
            mu = clean.mean(0)
            _, _, Vh = torch.linalg.svd(clean - mu, full_matrices=False)
            V = torch.zeros(2, d, dtype=dtype)
            rank = min(2, clean.shape[0] - 1)
            V[:rank] = Vh[:rank]
            means.append(mu)
            bases.append(V)
            clean_sets.append(torch.cat([clean, torch.zeros(width - clean.shape[0], d, dtype=dtype)]))
        mu, V, clean = torch.stack(means), torch.stack(bases), torch.stack(clean_sets)
        cond = nn.functional.normalize(mu, dim=-1)
        nuclear_clean = torch.linalg.svdvals(clean).sum(-1)
        sch = prior.noise_scheduler()
        abar = sch.alphas_cumprod.to(dtype)
        betas = sch.betas.to(dtype)
        start = max(int(round(self.t_start * sch.config.num_train_timesteps)) - 1, 0)
        generator = None if self.seed is None else torch.Generator().manual_seed(self.seed)
        noise = torch.randn(mu.shape, generator=generator, dtype=dtype)
        z = sch.add_noise(mu, noise, torch.full((len(mu),), start))
        for t in range(start, -1, -1):
            z = z.detach().requires_grad_(self.guidance_scale > 0)
            with torch.set_grad_enabled(self.guidance_scale > 0):
                eps = prior(sample=z, timesteps=t, cond=cond).sample
                x0 = (z - (1 - abar[t]).sqrt() * eps) / abar[t].sqrt()
                if self.guidance_scale > 0:
                    off = x0 - mu
                    inside = torch.einsum("nrd,nd->nr", V, off)
                    energy = (off.square().sum(1) - inside.square().sum(1))
                    if self.eta > 0:
                        joined = torch.cat([clean, x0[:, None, :]], 1)
                        energy = energy + self.eta * (torch.linalg.svdvals(joined).sum(-1) - nuclear_clean)
                    (grad,) = torch.autograd.grad(energy.sum(), z)
            with torch.no_grad():
                step = sch.step(eps.detach(), t, z.detach(), generator=generator).prev_sample
                if self.guidance_scale > 0:
                    ab_prev = abar[t - 1] if t > 0 else torch.ones((), dtype=dtype)
                    var = (1 - ab_prev) / (1 - abar[t]) * betas[t]   # the DDPM posterior variance
                    step = step - self.guidance_scale * var * grad
            z = step
        return z.detach()


__all__ = ["FeatureDiffusionConfig", "FeatureDiffusionModel", "class_summary", "MeanPrototypes", "MedianPrototypes",
           "OraclePrototypes", "RepairResult", "RankGuidedPrototypes"]
