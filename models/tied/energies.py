"""Energies on data space for TIED: ``E(x) -> (B,)``, lower is more in-distribution.

TIED samples ``pi(g | x~) ~ exp(-E(act(g^-1, x~)) / T)`` (arXiv 2602.08267). Any callable from a batch to
``(B,)`` is an energy; the classes here also accept the sampling ``grid`` of the action (keyword), which
:class:`BoundaryPenalty` reads, and add up with ``+``:

- :class:`PPCAEnergy`: the negative log-density of probabilistic PCA (Tipping & Bishop 1999) fitted by
  ``sklearn.decomposition.PCA``, over a temperature. Reconstruction: the digits stand-in's density energy
  (the paper uses a classifier's free energy or LieLAC's VAE+AR prior, both needing checkpoints).
- :class:`ClassifierFreeEnergy`: ``-logsumexp_k f_k(x) / T``, the JEM energy of a classifier (official
  ``energies.py``; Grathwohl et al. 2019).
- :class:`BoundaryPenalty`: ``weight * mean(relu(grid - 1)^2 + relu(-1 - grid)^2)`` over the sampling grid
  (official image boundary penalty), which stops "zoom out of the canvas" solutions.
"""

from __future__ import annotations

import torch
from torch import nn

from icml26.errors import describe, described, input_error
from icml26.validation import check_finite

__all__ = ["Energy", "PPCAEnergy", "ClassifierFreeEnergy", "BoundaryPenalty", "SumEnergy", "evaluate_energy"]


class Energy(nn.Module):
    """Base class: ``forward(x, grid=None) -> (B,)``; ``a + b`` is their sum."""

    def forward(self, x: torch.Tensor, grid: torch.Tensor | None = None) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError

    def __add__(self, other) -> SumEnergy:
        if not callable(other):
            return NotImplemented
        return SumEnergy(self, other)

    def __radd__(self, other) -> SumEnergy:
        if not callable(other):
            return NotImplemented
        return SumEnergy(other, self)


def evaluate_energy(energy, x: torch.Tensor, grid: torch.Tensor | None = None, *, function: str = "evaluate_energy",
                    check_values: bool | None = None) -> torch.Tensor:
    """``energy(x[, grid=grid])`` checked to be ``(B,)`` (and finite, on CPU tensors).

    An :class:`Energy` receives the grid; a plain callable gets the batch only.
    """
    out = energy(x, grid=grid) if isinstance(energy, Energy) else energy(x)
    if not isinstance(out, torch.Tensor):
        raise input_error(function, "energy", "a callable returning a tensor of shape (B,)", type(out).__name__)
    if out.shape != (x.shape[0],):
        raise input_error(function, "energy", f"a callable returning shape ({x.shape[0]},) for a batch of "
                          f"{x.shape[0]}", described(f"output {describe(out)}"))
    if check_values is None:
        check_values = out.device.type == "cpu"
    if check_values and not bool(torch.isfinite(out).all()):
        bad = int((~torch.isfinite(out)).sum())
        raise input_error(function, "energy", "finite energies", described(f"{bad} NaN or infinite of {out.numel()}"))
    return out


class SumEnergy(Energy):
    """``sum_i E_i(x)`` (each term gets the grid if it takes one)."""

    def __init__(self, *terms) -> None:
        super().__init__()
        flat = []
        for t in terms:
            flat += list(t.terms) if isinstance(t, SumEnergy) else [t]
        self.terms = nn.ModuleList([t for t in flat if isinstance(t, nn.Module)])
        self._terms = flat

    def forward(self, x, grid=None):
        return sum(evaluate_energy(t, x, grid, function="SumEnergy", check_values=False) for t in self._terms)


class PPCAEnergy(Energy):
    """Probabilistic PCA's negative log-density over a temperature, up to a constant.

    ``E(x) = [1/2 sum_i c_i^2 / lambda_i + 1/2 ||r||^2 / sigma^2] / T`` with ``c = U^T (x - mu)`` the
    coordinates on the ``q`` orthonormal principal directions ``U``, ``lambda_i`` their variances (at least
    ``sigma^2``), ``r`` the residual off their span and ``sigma^2`` the mean residual variance. This equals
    ``-PCA.score_samples(x) / T`` of scikit-learn's PPCA model up to an additive constant. Images are
    flattened, so ``mu`` has ``C*H*W`` entries.
    """

    def __init__(self, mean, components, variances, noise_variance: float, temperature: float = 1.0) -> None:
        super().__init__()
        mean = torch.as_tensor(mean, dtype=torch.float64).reshape(-1)
        components = torch.as_tensor(components, dtype=torch.float64)
        variances = torch.as_tensor(variances, dtype=torch.float64).reshape(-1)
        d = mean.shape[0]
        if components.ndim != 2 or components.shape[1] != d or components.shape[0] != variances.shape[0]:
            raise input_error("PPCAEnergy", "components", f"(q, {d}) with q = len(variances) = {variances.shape[0]}",
                              describe(components))
        noise_variance = check_finite("PPCAEnergy", "noise_variance", noise_variance, positive=True)
        temperature = check_finite("PPCAEnergy", "temperature", temperature, positive=True)
        self.register_buffer("mean", mean)
        self.register_buffer("components", components)
        self.register_buffer("variances", variances.clamp_min(noise_variance))
        self.noise_variance, self.temperature = float(noise_variance), float(temperature)

    @classmethod
    def from_sklearn(cls, pca, temperature: float = 1.0) -> PPCAEnergy:
        """From a fitted ``sklearn.decomposition.PCA`` (``whiten=False``): ``mean_``, ``components_``,
        ``explained_variance_`` and ``noise_variance_``."""
        if not hasattr(pca, "components_") or not hasattr(pca, "noise_variance_"):
            raise input_error("PPCAEnergy.from_sklearn", "pca", "a fitted sklearn.decomposition.PCA",
                              type(pca).__name__)
        if getattr(pca, "whiten", False):
            raise input_error("PPCAEnergy.from_sklearn", "pca", "a PCA fitted with whiten=False", "whiten=True")
        return cls(pca.mean_, pca.components_, pca.explained_variance_, float(pca.noise_variance_), temperature)

    def forward(self, x, grid=None):
        if x.ndim < 2 or x[0].numel() != self.mean.numel():
            raise input_error("PPCAEnergy", "x", f"a batch of {self.mean.numel()} values per item", describe(x))
        dtype = x.dtype if x.dtype in (torch.float32, torch.float64) else torch.float64
        z = x.reshape(x.shape[0], -1).to(dtype) - self.mean.to(dtype)
        c = z @ self.components.to(dtype).T
        residual = z - c @ self.components.to(dtype)
        e = 0.5 * (c * c / self.variances.to(dtype)).sum(1) + 0.5 * (residual * residual).sum(1) / self.noise_variance
        return e / self.temperature


class ClassifierFreeEnergy(Energy):
    """``-logsumexp_k f_k(x) / T`` of a classifier ``f`` returning logits (JEM; official classifier energy)."""

    def __init__(self, model: nn.Module, temperature: float = 1.0) -> None:
        super().__init__()
        if not callable(model):
            raise input_error("ClassifierFreeEnergy", "model", "a callable returning logits", type(model).__name__)
        temperature = check_finite("ClassifierFreeEnergy", "temperature", temperature, positive=True)
        self.model, self.temperature = model, float(temperature)

    def forward(self, x, grid=None):
        logits = self.model(x)
        return -torch.logsumexp(logits, dim=-1) / self.temperature


class BoundaryPenalty(Energy):
    """``weight * mean over pixels of relu(grid - 1)^2 + relu(-1 - grid)^2`` of the action's sampling grid."""

    def __init__(self, weight: float = 1.0) -> None:
        super().__init__()
        weight = check_finite("BoundaryPenalty", "weight", weight, non_negative=True)
        self.weight = float(weight)

    def forward(self, x, grid=None):
        if grid is None:
            return torch.zeros(x.shape[0], dtype=x.dtype, device=x.device)
        out = (torch.relu(grid - 1) ** 2 + torch.relu(-1 - grid) ** 2).flatten(1).mean(1)
        return self.weight * out.to(x.dtype)
