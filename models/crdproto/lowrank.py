"""Rank anomalies in noisy few-shot support sets ("Rank-guided Diffusion for Noise Few-Shot Learning", ICML 2026,
repository CRDProto): the differentiable low-rank pieces.

Only the paper's abstract is known (clean support features of a class lie in a low-rank subspace; a noisy shot is a
rank anomaly; a differentiable low-rank approximation estimates the intrinsic rank and flags the anomalies).
Everything here is a RECONSTRUCTION:

- the low-rank model is Outlier Pursuit (Xu, Caramanis and Sanghavi, "Robust PCA via Outlier Pursuit", 2012):
  ``min ||L||_* + lam ||E||_{2,1}`` subject to ``Z = L + E``, whose corruptions are whole rows (whole shots),
  solved by unrolled ADMM so that gradients reach ``Z`` and ``lam``;
- the intrinsic rank is the effective rank (Roy and Vetterli 2007) or a soft count of the singular values;
- a row's anomaly score is, by default, **relative to the episode's other classes**: its residual outside its own
  class's low-rank basis minus its smallest residual outside another class's. A label-swapped shot is a clean shot
  of another class of the episode, so the episode's singular values do not change under a swap (a row permutation):
  only a per-class view can see it, and the per-class score alone detects swaps no better than a distance to the
  class mean (the issue's calibration), so it is an option (``kind="sparse_energy"`` or ``"residual"``).

Written here because no kept library has a batched, differentiable Outlier Pursuit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

SCORES = ("relative", "sparse_energy", "residual")
_EPS = 1e-12


def _matrix(fn: str, argument: str, M: torch.Tensor) -> torch.Tensor:
    if not isinstance(M, torch.Tensor) or M.ndim < 2 or not M.dtype.is_floating_point:
        raise input_error(fn, argument, "a floating tensor [..., rows, cols]", describe(M))
    if M.device.type == "cpu" and not bool(torch.isfinite(M).all()):
        raise input_error(fn, argument, "finite values", "NaN or inf")
    return M


def svt(M: torch.Tensor, tau) -> torch.Tensor:
    """Singular value thresholding ``U diag(max(sigma - tau, 0)) V^T`` (batched over leading dimensions): the
    proximal operator of ``tau ||.||_*``."""
    M = _matrix("svt", "M", M)
    U, S, Vh = torch.linalg.svd(M, full_matrices=False)
    return U @ torch.diag_embed(torch.relu(S - tau)) @ Vh


def row_shrink(M: torch.Tensor, tau) -> torch.Tensor:
    """Row-wise shrinkage ``m_i max(1 - tau / ||m_i||, 0)``: the proximal operator of ``tau ||.||_{2,1}`` (zeroes
    every row of norm at most ``tau``)."""
    M = _matrix("row_shrink", "M", M)
    norm = M.norm(dim=-1, keepdim=True)
    return M * torch.relu(1 - tau / norm.clamp_min(_EPS))


def outlier_pursuit(Z: torch.Tensor, lam, n_iter: int = 30, rho: float = 1.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Outlier Pursuit ``min ||L||_* + lam ||E||_{2,1}, Z = L + E`` by ``n_iter`` unrolled ADMM steps, batched over
    the leading dimensions of ``Z`` ``[..., K, d]`` (one class per batch entry). Differentiable in ``Z`` and ``lam``
    (a float or a tensor broadcastable to the batch).

    ``mu_0 = 1.25 / ||Z||_2``, ``mu <- min(rho mu, 1e7 mu_0)``; returns ``(L, E)``."""
    fn = "outlier_pursuit"
    Z = _matrix(fn, "Z", Z)
    n_iter = check_int(fn, "n_iter", n_iter, low=1)
    rho = check_finite(fn, "rho", rho, low=1.0)
    lam_t = torch.as_tensor(lam, dtype=Z.dtype, device=Z.device)
    if lam_t.device.type == "cpu" and (not bool(torch.isfinite(lam_t).all()) or bool((lam_t <= 0).any())):
        raise input_error(fn, "lam", "positive finite weights", lam)
    lam_t = lam_t.reshape(lam_t.shape + (1, 1)) if lam_t.ndim else lam_t
    spectral = torch.linalg.matrix_norm(Z, ord=2).clamp_min(_EPS)[..., None, None]
    mu = 1.25 / spectral
    mu_max = mu * 1e7
    L = torch.zeros_like(Z)
    E = torch.zeros_like(Z)
    Y = torch.zeros_like(Z)
    for _ in range(n_iter):
        L = svt(Z - E + Y / mu, 1 / mu[..., 0])
        E = row_shrink(Z - L + Y / mu, lam_t / mu)
        Y = Y + mu * (Z - L - E)
        mu = torch.minimum(mu * rho, mu_max)
    return L, E


def effective_rank(L: torch.Tensor) -> torch.Tensor:
    """The effective rank ``exp(-sum p_i log p_i)``, ``p = sigma / sum(sigma)`` (Roy and Vetterli 2007), batched;
    0 for a zero matrix."""
    S = torch.linalg.svdvals(_matrix("effective_rank", "L", L))
    total = S.sum(-1, keepdim=True)
    p = S / total.clamp_min(_EPS)
    entropy = -(p * torch.log(p.clamp_min(_EPS))).sum(-1)
    return torch.where(total[..., 0] > _EPS, torch.exp(entropy), torch.zeros_like(entropy))


def soft_rank(L: torch.Tensor, tau: float = 0.1, temperature: float = 0.02) -> torch.Tensor:
    """A differentiable rank count ``sum_i sigmoid((sigma_i / sigma_1 - tau) / temperature)``, batched; 0 for a zero
    matrix."""
    fn = "soft_rank"
    tau = check_finite(fn, "tau", tau, low=0.0, high=1.0, low_open=True, high_open=True)
    temperature = check_finite(fn, "temperature", temperature, positive=True)
    S = torch.linalg.svdvals(_matrix(fn, "L", L))
    top = S[..., :1]
    r = torch.sigmoid((S / top.clamp_min(_EPS) - tau) / temperature).sum(-1)
    return torch.where(top[..., 0] > _EPS, r, torch.zeros_like(r))


@dataclass
class ClassBases:
    """Per class of an episode (in the order of ``classes``): the orthonormal basis ``[r_c, d]`` of its low-rank
    part, its rank ``r_c`` (the rounded soft rank of ``L``), the sparse component's row energies and whether the
    ADMM returned ``L = 0`` (then the basis is ``Z``'s own top direction, recorded here)."""

    classes: list[int]
    bases: list[torch.Tensor]
    ranks: list[int]
    sparse_energy: torch.Tensor          # [n] ||E_i|| / ||Z_i|| per support row
    fallback: list[bool]


def _labels(fn: str, Z: torch.Tensor, labels) -> torch.Tensor:
    labels = torch.as_tensor(labels)
    if Z.ndim != 2:
        raise input_error(fn, "Z", "a [n, d] feature matrix", describe(Z))
    if labels.shape != (Z.shape[0],) or labels.dtype.is_floating_point or labels.dtype == torch.bool:
        raise input_error(fn, "labels", f"[{Z.shape[0]}] integer class labels", describe(labels))
    return labels.long()


def class_bases(Z: torch.Tensor, labels, lam=None, n_iter: int = 30, tau: float = 0.1,
                temperature: float = 0.02) -> ClassBases:
    """Outlier Pursuit on each class's support rows (batched when the classes have equal sizes), the rank of each
    ``L`` and the top-``r`` right singular vectors of ``L``.

    Args:
        Z: ``[n, d]`` support features.
        labels: ``[n]`` class labels.
        lam: Outlier Pursuit's weight (default ``1 / sqrt(K)``, ``K`` the class size).
        n_iter: ADMM iterations.
        tau, temperature: the soft rank's threshold and temperature.
    """
    fn = "class_bases"
    Z = _matrix(fn, "Z", Z)
    labels = _labels(fn, Z, labels)
    classes = sorted(set(labels.tolist()))
    groups = [torch.nonzero(labels == c).flatten() for c in classes]
    out = ClassBases(classes, [], [], torch.zeros(Z.shape[0], dtype=Z.dtype, device=Z.device), [])
    for rows in groups:
        Zc = Z[rows]
        k = Zc.shape[0]
        weight = 1 / math.sqrt(k) if lam is None else lam
        L, E = outlier_pursuit(Zc, weight, n_iter=n_iter)
        out.sparse_energy[rows] = E.norm(dim=1) / Zc.norm(dim=1).clamp_min(_EPS)
        r = int(round(float(soft_rank(L.detach(), tau, temperature))))
        source = L
        fallback = r == 0
        if fallback:  # ADMM put every row into E: fall back to Z's own top direction
            source, r = Zc, 1
        _, _, Vh = torch.linalg.svd(source, full_matrices=False)
        out.bases.append(Vh[:r])
        out.ranks.append(r)
        out.fallback.append(fallback)
    return out


def _residual(Z: torch.Tensor, V: torch.Tensor) -> torch.Tensor:
    """``||z - V^T V z||^2 / ||z||^2`` per row of ``Z`` for an orthonormal ``V`` ``[r, d]``."""
    proj = (Z @ V.T) @ V
    return (Z - proj).square().sum(1) / Z.square().sum(1).clamp_min(_EPS)


def anomaly_scores(Z: torch.Tensor, labels, kind: str = "relative", lam=None, bases: ClassBases | None = None,
                   n_iter: int = 30) -> torch.Tensor:
    """Per support row, how anomalous it is within its class (higher: more likely a noisy shot).

    Args:
        Z: ``[n, d]`` support features (l2-normalised rows are the usual input).
        labels: ``[n]`` the support labels (possibly noisy: the true noise is never an input).
        kind: ``"relative"`` (default: the residual outside the own class's basis minus the smallest residual
            outside another class's; > 0 means another class of the episode explains the row better),
            ``"sparse_energy"`` (``||E_i|| / ||Z_i||`` of Outlier Pursuit) or ``"residual"`` (the own-class
            residual alone).
        lam: Outlier Pursuit's weight (default ``1 / sqrt(K)``).
        bases: precomputed :func:`class_bases` of ``(Z, labels)``.
        n_iter: ADMM iterations.
    """
    fn = "anomaly_scores"
    kind = check_choice(fn, "kind", kind, SCORES)
    Z = _matrix(fn, "Z", Z)
    labels = _labels(fn, Z, labels)
    b = bases if bases is not None else class_bases(Z, labels, lam=lam, n_iter=n_iter)
    if kind == "sparse_energy":
        return b.sparse_energy
    index = {c: i for i, c in enumerate(b.classes)}
    residuals = torch.stack([_residual(Z, V) for V in b.bases], 1)           # [n, C]
    own = residuals[torch.arange(Z.shape[0]), torch.as_tensor([index[int(c)] for c in labels])]
    if kind == "residual":
        return own
    if len(b.classes) < 2:
        raise input_error(fn, "labels", "at least two classes for kind='relative'", b.classes)
    mask = torch.nn.functional.one_hot(torch.as_tensor([index[int(c)] for c in labels]), len(b.classes)).bool()
    other = residuals.masked_fill(mask, math.inf).min(1).values
    return own - other


def flag_rows(scores: torch.Tensor, labels, threshold: float = 0.0) -> torch.Tensor:
    """Boolean ``[n]``: rows whose score exceeds ``threshold``, at most ``floor((K - 1) / 2)`` per class (the highest
    scores first; the noise protocol keeps the clean label a plurality), none in a class of one shot."""
    fn = "flag_rows"
    scores = torch.as_tensor(scores)
    if scores.ndim != 1 or not scores.dtype.is_floating_point:
        raise input_error(fn, "scores", "a [n] float tensor", describe(scores))
    labels = torch.as_tensor(labels)
    if labels.shape != scores.shape:
        raise input_error(fn, "labels", f"[{scores.shape[0]}] class labels", describe(labels))
    threshold = check_finite(fn, "threshold", threshold)
    flagged = torch.zeros_like(scores, dtype=torch.bool)
    for c in set(labels.tolist()):
        rows = torch.nonzero(labels == c).flatten()
        cap = (len(rows) - 1) // 2
        if cap == 0:
            continue
        order = rows[torch.argsort(scores[rows], descending=True)][:cap]
        flagged[order[scores[order] > threshold]] = True
    return flagged


__all__ = ["SCORES", "svt", "row_shrink", "outlier_pursuit", "effective_rank", "soft_rank", "ClassBases",
           "class_bases", "anomaly_scores", "flag_rows"]
