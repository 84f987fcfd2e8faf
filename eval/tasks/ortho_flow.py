"""Data and metrics for orthogonal-Jacobian flows ("Unsupervised Disentanglement Without Compromises: How
Functional Orthogonality Enforces Identifiability", ICML 2026, arXiv 2606.21385).

Generators (each returns :class:`FactorData`: observations ``x``, true factors ``z``, the generator ``g`` as a
torch function and its Jacobian):

- :func:`polar`: ``z = (1 + u1, pi/2 u2)`` with ``u`` from a copula (uniform marginals, dependent factors, the
  full box as support: a product domain), ``x = (r cos phi, r sin phi)``: an orthogonal generator.
- :func:`mobius`: IMA's Möbius transform (``build_moebius_transform``: ``x = b + alpha A (s - a) / ||s - a||^2``,
  ``A`` orthogonal) after component-wise monotone maps ``s = u + 0.3 u^3``: conformal, hence orthogonal.
- :func:`mlp_mixing`: an invertible leaky-ReLU MLP (square layers with well-conditioned weights): not orthogonal,
  the control where the method's assumption fails.
- :func:`triangle_polar`: the polar map on ``u`` uniform over the triangle ``u1 + u2 <= 1`` (not a product domain).

Copulas: ``"gaussian"`` (``u = Phi(L e)`` with correlation ``rho``) and ``"clayton"`` (Marshall-Olkin sampling,
``theta = 2 tau / (1 - tau)`` with Kendall's ``tau = 2 arcsin(rho) / pi``, the Gaussian copula's tau).

Metrics: :func:`mcc` (mean absolute correlation after Hungarian matching, scipy's ``linear_sum_assignment``, as
IMA's ``SolveHungarian``), :func:`amari_distance` and :func:`jacobian_amari` (IMA's ``jacobian_amari_distance``:
the Amari distance, on squared entries as IMA's, of ``J_f(g(z)) J_g(z)``, the Jacobian of the composition, 0
exactly for a permutation times a diagonal), :func:`dci` (Eastwood and Williams 2018, with scikit-learn's gradient-boosted trees) and :func:`mig`
(Chen et al. 2018, with the continuous latents binned and the factors' entropies estimated from the same bins).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["FactorData", "amari_distance", "copula", "dci", "jacobian_amari", "mcc", "mig", "mlp_mixing", "mobius",
           "polar", "standardise", "triangle_polar"]

COPULAS = ("gaussian", "clayton")


@dataclass
class FactorData:
    """Observations and the factors that made them.

    Attributes:
        x: ``[n, d]`` float64 observations.
        z: ``[n, d]`` float64 true factors.
        generator: ``g``: a torch function ``[B, d] -> [B, d]`` with ``x = g(z)`` (differentiable).
        name: a short description.
        log_density: ``[n]`` the true ``log p(x)`` of each row where it has a closed form (the polar sets), else
            ``None``: the floor of any model's NLL.
    """

    x: np.ndarray
    z: np.ndarray
    generator: Callable[[torch.Tensor], torch.Tensor]
    name: str
    log_density: np.ndarray | None = None

    def jacobian(self, z=None) -> np.ndarray:
        """``J_g(z)`` ``[n, d, d]`` (default: at the data's own factors), by ``torch.func`` in float64."""
        zz = torch.as_tensor(self.z if z is None else np.asarray(z), dtype=torch.float64)
        single = lambda v: self.generator(v[None])[0]
        return torch.func.vmap(torch.func.jacfwd(single))(zz).numpy()


def copula(n: int, d: int, rho: float, seed, kind: str = "gaussian") -> np.ndarray:
    """``[n, d]`` uniform marginals with pairwise dependence ``rho`` (Gaussian copula correlation; Clayton with the
    same Kendall tau).

    Args:
        n: samples.
        d: dimensions.
        rho: the Gaussian copula's correlation between every pair (``0 <= rho < 1``).
        seed: anything ``numpy.random.default_rng`` takes.
        kind: ``"gaussian"`` or ``"clayton"``.
    """
    from scipy.special import ndtr

    n = check_int("copula", "n", n, low=1)
    d = check_int("copula", "d", d, low=1)
    rho = check_finite("copula", "rho", rho, low=0.0, high=1.0, high_open=True)
    kind = check_choice("copula", "kind", kind, COPULAS)
    rng = np.random.default_rng(seed)
    if kind == "gaussian" or rho == 0:
        C = np.full((d, d), rho) + (1 - rho) * np.eye(d)
        return ndtr(rng.standard_normal((n, d)) @ np.linalg.cholesky(C).T)
    tau = 2 * math.asin(rho) / math.pi
    theta = 2 * tau / (1 - tau)
    v = rng.gamma(1.0 / theta, 1.0, size=(n, 1))
    e = rng.exponential(size=(n, d))
    return (1 + e / v) ** (-1.0 / theta)


def _copula_log_density(u: np.ndarray, rho: float, kind: str) -> np.ndarray:
    """``log c(u)`` of :func:`copula`'s law (Gaussian: ``-1/2 log det C - 1/2 e^T (C^-1 - I) e`` with
    ``e = Phi^-1(u)``; Clayton: the closed form of its density)."""
    from scipy.special import ndtri

    n, d = u.shape
    if rho == 0:
        return np.zeros(n)
    if kind == "gaussian":
        C = np.full((d, d), rho) + (1 - rho) * np.eye(d)
        e = ndtri(u)
        quad = np.einsum("ni,ij,nj->n", e, np.linalg.inv(C) - np.eye(d), e)
        return -0.5 * np.linalg.slogdet(C)[1] - 0.5 * quad
    tau = 2 * math.asin(rho) / math.pi
    theta = 2 * tau / (1 - tau)
    return (np.log1p(theta * np.arange(d)).sum() - (theta + 1) * np.log(u).sum(1)
            - (d + 1 / theta) * np.log((u ** -theta).sum(1) - d + 1))


def _polar_map(z: torch.Tensor) -> torch.Tensor:
    r, phi = z[:, 0], z[:, 1]
    return torch.stack([r * torch.cos(phi), r * torch.sin(phi)], 1)


def standardise(data: FactorData, train: slice | np.ndarray | None = None, per_coordinate: bool = True) -> FactorData:
    """``x`` centred by the training rows' mean and divided by their per-coordinate standard deviation, as a user
    standardises data; the generator is wrapped the same way, so its Jacobian stays the one of the data the flow
    sees. Unequal scales tilt an orthogonal generator's columns slightly (the standardised polar map's own C_IMA is
    about 0.02-0.04): the experiment reports it. ``per_coordinate=False`` divides by one scale (the mean of the
    coordinates' deviations), which keeps an orthogonal generator exactly orthogonal.

    Args:
        data: the data.
        train: the rows whose statistics are used (default all).
        per_coordinate: one scale per coordinate (default) or one for all.
    """
    rows = data.x if train is None else data.x[train]
    mean, scale = rows.mean(0), rows.std(0)
    if not (scale > 0).all():
        raise input_error("standardise", "data", "observations with a positive spread in every coordinate",
                          f"standard deviations {scale.tolist()}")
    if not per_coordinate:
        scale = np.full_like(scale, scale.mean())
    log_density = None if data.log_density is None else data.log_density + np.log(scale).sum()
    g = data.generator
    m, sd = torch.as_tensor(mean), torch.as_tensor(scale)
    return FactorData((data.x - mean) / scale, data.z, lambda z: (g(z) - m.to(z)) / sd.to(z),
                      data.name + ", standardised", log_density)


def polar(n: int, rho: float = 0.7, copula_kind: str = "gaussian", seed=0) -> FactorData:
    """Polar coordinates with dependent factors: ``z = (1 + u1, pi/2 u2)``, ``x = (r cos phi, r sin phi)``.

    Args:
        n: samples.
        rho: the copula's dependence.
        copula_kind: ``"gaussian"`` or ``"clayton"``.
        seed: anything ``numpy.random.default_rng`` takes.
    """
    u = copula(n, 2, rho, seed, copula_kind)
    z = np.stack([1 + u[:, 0], math.pi / 2 * u[:, 1]], 1)
    x = _polar_map(torch.as_tensor(z)).numpy()
    # p(x) = c(u) |du/dz| / |det J_g(z)|, with |du/dz| = 2 / pi and |det J_g| = r
    log_density = _copula_log_density(u, rho, copula_kind) + math.log(2 / math.pi) - np.log(z[:, 0])
    return FactorData(x, z, _polar_map, f"polar, {copula_kind} copula rho = {rho:g}", log_density)


def triangle_polar(n: int, seed=0) -> FactorData:
    """The polar map on ``u`` uniform over the triangle ``u1 + u2 <= 1``: a support that is not a product.

    Args:
        n: samples.
        seed: anything ``numpy.random.default_rng`` takes.
    """
    n = check_int("triangle_polar", "n", n, low=1)
    u = np.random.default_rng(seed).random((n, 2))
    flip = u.sum(1) > 1
    u[flip] = 1 - u[flip][:, ::-1]
    z = np.stack([1 + u[:, 0], math.pi / 2 * u[:, 1]], 1)
    log_density = math.log(2 * 2 / math.pi) - np.log(z[:, 0])   # u uniform on the triangle: density 2
    return FactorData(_polar_map(torch.as_tensor(z)).numpy(), z, _polar_map, "polar on a triangle", log_density)


def _orthogonal(d: int, rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((d, d)))
    return q * np.sign(np.diag(r))


def mobius(n: int, d: int = 3, rho: float = 0.0, seed=0, copula_kind: str = "gaussian") -> FactorData:
    """IMA's Möbius transform of monotone-warped dependent factors: ``s = u + 0.3 u^3`` (``u`` from the copula,
    centred to [-0.5, 0.5]), ``x = alpha A (s - a) / ||s - a||^2`` with ``A`` orthogonal and ``a`` outside the box.

    Args:
        n: samples.
        d: dimension (>= 2).
        rho: the copula's dependence.
        seed: anything ``numpy.random.default_rng`` takes (also draws ``A`` and ``a``).
        copula_kind: ``"gaussian"`` or ``"clayton"``.
    """
    d = check_int("mobius", "d", d, low=2)
    rng = np.random.default_rng(seed)
    u = copula(n, d, rho, rng, copula_kind) - 0.5
    A = torch.as_tensor(_orthogonal(d, rng))
    a = torch.as_tensor(rng.normal(size=d))
    a = a / torch.linalg.vector_norm(a) * (0.5 * math.sqrt(d) + 0.5)   # outside the box [-0.5, 0.5]^d
    alpha = 1.0

    def g(z):
        s = z + 0.3 * z ** 3
        diff = s - a.to(z)
        return alpha * (diff @ A.to(z).T) / (diff ** 2).sum(1, keepdim=True)

    x = g(torch.as_tensor(u)).numpy()
    return FactorData(x, u, g, f"Mobius d = {d}, rho = {rho:g}")


def mlp_mixing(n: int, d: int = 2, seed=0, rho: float = 0.0, layers: int = 3) -> FactorData:
    """An invertible leaky-ReLU MLP of the factors (square, well-conditioned layers): a generator whose Jacobian
    columns are not orthogonal (the control).

    Args:
        n: samples.
        d: dimension (>= 2).
        seed: anything ``numpy.random.default_rng`` takes (also draws the layers).
        rho: the copula's dependence.
        layers: mixing layers.
    """
    d = check_int("mlp_mixing", "d", d, low=2)
    layers = check_int("mlp_mixing", "layers", layers, low=1)
    rng = np.random.default_rng(seed)
    u = copula(n, d, rho, rng) - 0.5
    Ws = []
    for _ in range(layers):
        W = rng.normal(size=(d, d))
        U, _, Vt = np.linalg.svd(W)
        Ws.append(torch.as_tensor(U @ np.diag(np.linspace(1.0, 0.4, d)) @ Vt + 0.0))

    def g(z):
        h = z
        for k, W in enumerate(Ws):
            h = h @ W.to(z).T
            if k < len(Ws) - 1:
                h = torch.nn.functional.leaky_relu(h, 0.2)
        return h

    return FactorData(g(torch.as_tensor(u)).numpy(), u, g, f"MLP mixing d = {d}")


# ----------------------------------------------------------------------------------------------
# metrics
# ----------------------------------------------------------------------------------------------
def _pair(function: str, z, z_hat) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(z, dtype=np.float64)
    z_hat = np.asarray(z_hat.detach().cpu() if hasattr(z_hat, "detach") else z_hat, dtype=np.float64)
    if z.ndim != 2 or len(z) < 3 or not np.isfinite(z).all():
        raise input_error(function, "z", "finite factors [n, d] with n >= 3", describe(z))
    if z_hat.ndim != 2 or len(z_hat) != len(z) or not np.isfinite(z_hat).all():
        raise input_error(function, "z_hat", f"finite latents [{len(z)}, k]", describe(z_hat))
    return z, z_hat


def mcc(z, z_hat, method: str = "spearman") -> float:
    """Mean correlation coefficient: the mean absolute correlation of matched pairs after the best matching of
    true factors to latents (Hungarian algorithm).

    Args:
        z: ``[n, d]`` true factors.
        z_hat: ``[n, k]`` latents (``k >= d``).
        method: ``"spearman"`` (rank correlation: blind to monotone reparametrisation) or ``"pearson_cdf"``
            (Pearson after mapping each standardised latent through the normal CDF, IMA's alternative).
    """
    from scipy.optimize import linear_sum_assignment
    from scipy.special import ndtr
    from scipy.stats import rankdata

    z, z_hat = _pair("mcc", z, z_hat)
    method = check_choice("mcc", "method", method, ("spearman", "pearson_cdf"))
    if method == "spearman":
        a, b = rankdata(z, axis=0), rankdata(z_hat, axis=0)
    else:
        a, b = z, ndtr((z_hat - z_hat.mean(0)) / np.maximum(z_hat.std(0), 1e-300))
    d = a.shape[1]
    corr = np.abs(np.corrcoef(a.T, b.T)[:d, d:])
    corr = np.nan_to_num(corr)
    rows, cols = linear_sum_assignment(-corr)
    return float(corr[rows, cols].mean())


def amari_distance(A) -> np.ndarray:
    """The Amari distance of each square matrix, in IMA's form (``ima/metrics.py`` ``amari_distance``, after
    picard's): ``(sum_i (sum_j r_ij / max_j r_ij - 1) + sum_j (sum_i r_ij / max_i r_ij - 1)) / (2 d)`` with
    ``r = A^2`` (squared entries); 0 iff ``A`` is a permutation times a diagonal, at most ``d - 1``.

    Args:
        A: ``[..., d, d]`` matrices, ``d >= 2``.
    """
    A = np.asarray(A, dtype=np.float64)
    if A.ndim < 2 or A.shape[-1] != A.shape[-2] or A.shape[-1] < 2 or not np.isfinite(A).all():
        raise input_error("amari_distance", "A", "finite square matrices [..., d, d] with d >= 2", describe(A))
    r = A ** 2
    d = A.shape[-1]
    rows = (r.sum(-1) / r.max(-1) - 1).sum(-1)
    cols = (r.sum(-2) / r.max(-2) - 1).sum(-1)
    return (rows + cols) / (2 * d)


def jacobian_amari(J_f, J_g) -> float:
    """The mean Amari distance of ``J_f(g(z)) J_g(z)`` over samples: how far the learned flow composed with the true
    generator is from a permutation of component-wise maps (IMA's ``jacobian_amari_distance``).

    Args:
        J_f: ``[n, d, d]`` the learned flow's Jacobian at ``x = g(z)``.
        J_g: ``[n, d, d]`` the true generator's Jacobian at ``z``.
    """
    J_f = np.asarray(J_f.detach().cpu() if hasattr(J_f, "detach") else J_f, dtype=np.float64)
    J_g = np.asarray(J_g, dtype=np.float64)
    if J_f.ndim != 3 or J_f.shape[1] != J_f.shape[2]:
        raise input_error("jacobian_amari", "J_f", "Jacobians [n, d, d]", describe(J_f))
    if J_g.shape != J_f.shape:
        raise input_error("jacobian_amari", "J_g", f"Jacobians of shape {J_f.shape} (as J_f)", describe(J_g))
    return float(amari_distance(J_f @ J_g).mean())


def dci(z, z_hat, seed=0, n_estimators: int = 50) -> dict[str, float]:
    """Disentanglement, completeness and informativeness (Eastwood and Williams 2018): importances of each latent
    for each factor from scikit-learn's gradient-boosted regression trees (half the rows fit, half test).

    Args:
        z: ``[n, d]`` true factors.
        z_hat: ``[n, k]`` latents.
        seed: the trees' and the split's seed.
        n_estimators: trees per factor.

    Returns:
        ``{"disentanglement", "completeness", "informativeness"}`` (informativeness: mean test R^2).
    """
    from sklearn.ensemble import GradientBoostingRegressor

    z, z_hat = _pair("dci", z, z_hat)
    n_estimators = check_int("dci", "n_estimators", n_estimators, low=1)
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(z))
    tr, te = idx[: len(z) // 2], idx[len(z) // 2:]
    R = np.zeros((z_hat.shape[1], z.shape[1]))
    scores = []
    for j in range(z.shape[1]):
        model = GradientBoostingRegressor(n_estimators=n_estimators, max_depth=3, random_state=seed)
        model.fit(z_hat[tr], z[tr, j])
        R[:, j] = model.feature_importances_
        scores.append(model.score(z_hat[te], z[te, j]))
    eps = 1e-12

    def entropy_score(P, base):
        P = P / np.maximum(P.sum(1, keepdims=True), eps)
        H = -(P * np.log(np.maximum(P, eps)) / math.log(base)).sum(1)
        return 1 - H

    dis = entropy_score(R, z.shape[1]) if z.shape[1] > 1 else np.ones(R.shape[0])
    weights = R.sum(1) / max(R.sum(), eps)
    com = entropy_score(R.T, R.shape[0]) if R.shape[0] > 1 else np.ones(R.shape[1])
    return {"disentanglement": float((dis * weights).sum()), "completeness": float(com.mean()),
            "informativeness": float(np.mean(scores))}


def mig(z, z_hat, bins: int = 20) -> float:
    """Mutual information gap (Chen et al. 2018): for each factor, the gap between the two latents most informative
    about it, divided by the factor's entropy, averaged. Both are discretised into ``bins`` equal-frequency bins, so
    the factor entropy is the discrete entropy of those bins (the continuous-factor fix: a finite, comparable
    normaliser).

    Args:
        z: ``[n, d]`` true factors.
        z_hat: ``[n, k]`` latents, ``k >= 2``.
        bins: quantile bins per variable.
    """
    from sklearn.metrics import mutual_info_score

    z, z_hat = _pair("mig", z, z_hat)
    bins = check_int("mig", "bins", bins, low=2)
    if z_hat.shape[1] < 2:
        raise input_error("mig", "z_hat", "at least two latents", describe(z_hat))

    def discrete(v):
        edges = np.quantile(v, np.linspace(0, 1, bins + 1)[1:-1])
        return np.searchsorted(edges, v, side="right")

    zd = [discrete(z[:, j]) for j in range(z.shape[1])]
    hd = [discrete(z_hat[:, i]) for i in range(z_hat.shape[1])]
    gaps = []
    for f in zd:
        mi = sorted((mutual_info_score(f, h) for h in hd), reverse=True)
        p = np.bincount(f) / len(f)
        H = -(p[p > 0] * np.log(p[p > 0])).sum()
        gaps.append((mi[0] - mi[1]) / H)
    return float(np.mean(gaps))
