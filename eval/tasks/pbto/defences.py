"""Memory defences of the PBTO audit: filters run on each new class's candidates before iCaRL's herding
(``memory_hook``), so a poisoned image the filter catches never enters the replay memory.

- :class:`SpectralSignatureFilter` (Tran, Li & Madry 2018): centre the class's pooled features, score each row by
  its squared projection on the top singular vector, drop the ``removal_factor * eps_bound`` share with the highest
  scores.
- :class:`ActivationClusteringFilter` (Chen et al. 2018): reduce the class's features (scikit-learn's PCA), split
  them in two with KMeans, drop the smaller cluster when its share is at most ``max_share``.

Both also take plain feature matrices (:meth:`keep`), for a user's own model. IBM's adversarial-robustness-toolbox
ships both detectors for its own classifier wrappers; the few lines here act on a memory's candidates directly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml26.errors import describe, input_error
from icml26.validation import check_finite, check_int


def _matrix(fn: str, features) -> np.ndarray:
    F = np.asarray(features.detach() if isinstance(features, torch.Tensor) else features, dtype=np.float64)
    if F.ndim != 2 or F.shape[0] < 2 or not np.isfinite(F).all():
        raise input_error(fn, "features", "a finite [n, d] feature matrix with n >= 2", describe(features))
    return F


@torch.no_grad()
def _pooled(model, images: torch.Tensor) -> torch.Tensor:
    was = model.training
    model.eval()
    features = model(images).features
    model.train(was)
    return features


@dataclass(frozen=True)
class SpectralSignatureFilter:
    """Spectral signatures: keep all rows but the ``ceil(removal_factor * eps_bound * n)`` with the largest squared
    projection on the top principal direction of the centred features."""

    eps_bound: float = 0.1
    removal_factor: float = 1.5
    name: str = "spectral"

    def __post_init__(self) -> None:
        check_finite("SpectralSignatureFilter", "eps_bound", self.eps_bound, low=0.0, high=0.5, low_open=True)
        check_finite("SpectralSignatureFilter", "removal_factor", self.removal_factor, positive=True)

    def scores(self, features) -> np.ndarray:
        F = _matrix("SpectralSignatureFilter.scores", features)
        centred = F - F.mean(0)
        _, _, vt = np.linalg.svd(centred, full_matrices=False)
        return (centred @ vt[0]) ** 2

    def keep(self, features) -> np.ndarray:
        s = self.scores(features)
        drop = min(int(np.ceil(self.removal_factor * self.eps_bound * len(s) - 1e-9)), len(s) - 1)
        mask = np.ones(len(s), dtype=bool)
        mask[np.argsort(-s, kind="stable")[:drop]] = False
        return mask

    def __call__(self, model, images: torch.Tensor, label: int) -> torch.Tensor:
        return torch.as_tensor(self.keep(_pooled(model, images)))


@dataclass(frozen=True)
class ActivationClusteringFilter:
    """Activation clustering: PCA to ``n_components``, KMeans with 2 clusters (``seed``), the smaller cluster dropped
    when it holds at most ``max_share`` of the rows."""

    n_components: int = 10
    max_share: float = 0.35
    seed: int = 0
    name: str = "clustering"

    def __post_init__(self) -> None:
        check_int("ActivationClusteringFilter", "n_components", self.n_components, low=1)
        check_finite("ActivationClusteringFilter", "max_share", self.max_share, low=0.0, high=0.5, low_open=True)
        check_int("ActivationClusteringFilter", "seed", self.seed, low=0)

    def keep(self, features) -> np.ndarray:
        from sklearn.cluster import KMeans
        from sklearn.decomposition import PCA

        F = _matrix("ActivationClusteringFilter.keep", features)
        mask = np.ones(len(F), dtype=bool)
        if len(F) < 4:
            return mask
        k = min(self.n_components, F.shape[0] - 1, F.shape[1])
        reduced = PCA(n_components=k, random_state=self.seed).fit_transform(F - F.mean(0))
        labels = KMeans(n_clusters=2, n_init=10, random_state=self.seed).fit_predict(reduced)
        small = int(np.argmin(np.bincount(labels, minlength=2)))
        if (labels == small).mean() <= self.max_share:
            mask[labels == small] = False
        return mask

    def __call__(self, model, images: torch.Tensor, label: int) -> torch.Tensor:
        return torch.as_tensor(self.keep(_pooled(model, images)))


__all__ = ["ActivationClusteringFilter", "SpectralSignatureFilter"]
