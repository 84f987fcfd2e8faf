"""Orthogonality penalties on flow Jacobians, and the training loop of :class:`icml26.models.ortho_flow.OrthoFlowModel`
("Unsupervised Disentanglement Without Compromises: How Functional Orthogonality Enforces Identifiability",
ICML 2026, arXiv 2606.21385; the penalty and loss follow the IMA code, Gresele et al. NeurIPS 2021,
lgresele/independent-mechanism-analysis).

Every penalty takes the batched Jacobian of the flow ``J_f`` (``[B, d, d]``, data to latents) and measures how far
the generator's Jacobian ``J_g = J_f^-1`` is from having orthogonal columns:

- :func:`c_ima`: IMA's contrast ``sum_i log ||J_g[:, i]|| - log |det J_g|`` (``ima/metrics.py`` ``cima_higher_d``:
  the column norms of ``inv(J_unmix)`` plus ``log |det J_unmix|``). It is >= 0 (Hadamard's inequality), 0 exactly
  when the columns are orthogonal, and blind to each column's scale.
- :func:`cosine_offdiag`: ``sum_{i<j} G_ij^2 / (G_ii G_jj)`` with ``G = J_g^T J_g``, also scale-blind.
- :func:`offdiag_frobenius`: ``||G - diag G||_F^2`` (OroJaR, Wei et al. ICCV 2021): not scale-blind.
- :func:`hutchinson_offdiag`: ``E ||(G - diag G) v||^2 / (tr G)^2`` with Rademacher ``v``, from products
  ``v -> J_g v`` and ``u -> J_g^T u`` only (one JVP and one VJP per probe), for large ``d``. Estimating
  ``||(G - diag G) v||^2`` rather than ``||G||_F^2 - sum G_ii^2`` keeps the relative error small near
  orthogonality, where the difference of two large numbers would not.

:func:`fit_ortho_flow` is the plain loop the experiment uses (Adam on mini-batches of a fixed training set); the
model's ``forward`` returns the loss, so Hugging Face's ``Trainer`` trains it unchanged as well.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from icml26.errors import describe, input_error
from icml26.validation import check_finite, check_int

__all__ = ["CIMA", "CosineOffdiag", "OffdiagFrobenius", "OrthoFlowFit", "PENALTY_FUNCTIONS", "c_ima",
           "cosine_offdiag", "fit_ortho_flow", "hutchinson_offdiag", "offdiag_frobenius"]


def _jacobians(function: str, J) -> torch.Tensor:
    if not isinstance(J, torch.Tensor) or J.ndim != 3 or J.shape[1] != J.shape[2] or J.shape[1] < 1 \
            or not J.is_floating_point():
        raise input_error(function, "J_f", "a float tensor [B, d, d] of flow Jacobians", describe(J))
    return J


def _gram(J_f: torch.Tensor) -> torch.Tensor:
    J_g = torch.linalg.inv(J_f)
    return J_g.transpose(1, 2) @ J_g


def c_ima(J_f: torch.Tensor) -> torch.Tensor:
    """IMA's contrast of the generator at each sample: ``sum_i log ||(J_f^-1)[:, i]|| + log |det J_f|``, ``[B]``.

    Args:
        J_f: ``[B, d, d]`` Jacobians of the flow (data to latents).
    """
    J_f = _jacobians("c_ima", J_f)
    J_g = torch.linalg.inv(J_f)
    return torch.log(torch.linalg.vector_norm(J_g, dim=1)).sum(1) + torch.linalg.slogdet(J_f)[1]


def cosine_offdiag(J_f: torch.Tensor) -> torch.Tensor:
    """``sum_{i<j} G_ij^2 / (G_ii G_jj)``, ``G = J_g^T J_g``, ``J_g = J_f^-1``: squared cosines between the
    generator's columns, ``[B]``.

    Args:
        J_f: ``[B, d, d]`` Jacobians of the flow.
    """
    G = _gram(_jacobians("cosine_offdiag", J_f))
    diag = torch.diagonal(G, dim1=1, dim2=2)
    cos2 = G ** 2 / (diag[:, :, None] * diag[:, None, :])
    return 0.5 * (cos2.sum((1, 2)) - torch.diagonal(cos2, dim1=1, dim2=2).sum(1))


def offdiag_frobenius(J_f: torch.Tensor) -> torch.Tensor:
    """``||G - diag G||_F^2``, ``G = J_g^T J_g`` (OroJaR's unnormalised form), ``[B]``.

    Args:
        J_f: ``[B, d, d]`` Jacobians of the flow.
    """
    G = _gram(_jacobians("offdiag_frobenius", J_f))
    return (G ** 2).sum((1, 2)) - (torch.diagonal(G, dim1=1, dim2=2) ** 2).sum(1)


def hutchinson_offdiag(jvp: Callable[[torch.Tensor], torch.Tensor], vjp: Callable[[torch.Tensor], torch.Tensor],
                       diag: torch.Tensor, n_probes: int = 1, generator: torch.Generator | None = None
                       ) -> torch.Tensor:
    """``mean_b E_v ||(G - diag G) v||^2 / (tr G)^2`` with Rademacher probes ``v`` (unbiased per sample for the
    numerator), where ``G v = J_g^T (J_g v)``.

    Args:
        jvp: ``v [B, d] -> J_g v [B, D]`` (batched over samples).
        vjp: ``u [B, D] -> J_g^T u [B, d]``.
        diag: ``[B, d]`` the diagonal of ``G`` (``||J_g e_i||^2``).
        n_probes: probes per sample.
        generator: the probes' random stream (``None``: torch's global one).
    """
    if not isinstance(diag, torch.Tensor) or diag.ndim != 2 or not diag.is_floating_point():
        raise input_error("hutchinson_offdiag", "diag", "a float tensor [B, d]", describe(diag))
    n_probes = check_int("hutchinson_offdiag", "n_probes", n_probes, low=1)
    total = torch.zeros(diag.shape[0], dtype=diag.dtype, device=diag.device)
    for _ in range(n_probes):
        v = torch.randint(0, 2, diag.shape, generator=generator).to(diag) * 2 - 1
        off = vjp(jvp(v)) - diag * v
        total = total + (off ** 2).sum(1)
    return (total / n_probes / diag.sum(1) ** 2).mean()


PENALTY_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "cima": c_ima, "cosine": cosine_offdiag, "offdiag_fro": offdiag_frobenius}


class CIMA(nn.Module):
    """:func:`c_ima` averaged over the batch, as a module."""

    def forward(self, J_f: torch.Tensor) -> torch.Tensor:
        return c_ima(J_f).mean()


class CosineOffdiag(nn.Module):
    """:func:`cosine_offdiag` averaged over the batch, as a module."""

    def forward(self, J_f: torch.Tensor) -> torch.Tensor:
        return cosine_offdiag(J_f).mean()


class OffdiagFrobenius(nn.Module):
    """:func:`offdiag_frobenius` averaged over the batch, as a module."""

    def forward(self, J_f: torch.Tensor) -> torch.Tensor:
        return offdiag_frobenius(J_f).mean()


@dataclass
class OrthoFlowFit:
    """What :func:`fit_ortho_flow` recorded every ``log_every`` steps: NLL and penalty of the batch, the wall
    time."""

    steps: list[int]
    nll: list[float]
    penalty: list[float]
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_ortho_flow(model: nn.Module, x_train, steps: int, *, batch_size: int = 256, lr: float = 1e-3, seed: int = 0,
                   log_every: int = 50, progress: Callable[[int], None] | None = None) -> OrthoFlowFit:
    """Train ``model`` (an :class:`~icml26.models.ortho_flow.OrthoFlowModel`) with Adam on mini-batches drawn with
    replacement-free shuffles of ``x_train``.

    Args:
        model: returns an output with ``loss``, ``nll`` and ``penalty`` for ``model(x=...)``.
        x_train: ``[n, d]`` training data (array or tensor).
        steps: optimiser steps.
        batch_size: rows per step.
        lr: Adam's learning rate.
        seed: seeds the batch order.
        log_every: record every this many steps.
        progress: called with the number of steps done, every ``log_every`` steps.
    """
    fn = "fit_ortho_flow"
    steps = check_int(fn, "steps", steps, low=1)
    batch_size = check_int(fn, "batch_size", batch_size, low=1)
    lr = check_finite(fn, "lr", lr, positive=True)
    seed = check_int(fn, "seed", seed, low=0)
    log_every = check_int(fn, "log_every", log_every, low=1)
    param = next(model.parameters())
    x = torch.as_tensor(np.asarray(x_train), dtype=param.dtype, device=param.device)
    if x.ndim != 2 or len(x) < 1:
        raise input_error(fn, "x_train", "data [n, d] with n >= 1", describe(x_train))
    rng = np.random.default_rng(seed)
    trainable = [p for p in model.parameters() if p.requires_grad]
    if not trainable:
        raise input_error(fn, "model", "a model with trainable parameters", "every parameter frozen")
    optimizer = torch.optim.Adam(trainable, lr=lr)
    fit = OrthoFlowFit([], [], [], 0.0)
    start = time.perf_counter()
    order, cursor = rng.permutation(len(x)), 0
    model.train()
    for step in range(1, steps + 1):
        if cursor + batch_size > len(x):
            order, cursor = rng.permutation(len(x)), 0
        batch = x[torch.as_tensor(order[cursor:cursor + batch_size])]
        cursor += batch_size
        out = model(x=batch)
        if not torch.isfinite(out.loss):
            raise FloatingPointError(f"fit_ortho_flow: the loss is {out.loss.item()} at step {step}")
        optimizer.zero_grad(set_to_none=True)
        out.loss.backward()
        optimizer.step()
        if step % log_every == 0 or step == steps:
            fit.steps.append(step)
            fit.nll.append(out.nll.item())
            fit.penalty.append(out.penalty.item())
            if progress is not None:
                progress(step)
    fit.seconds = time.perf_counter() - start
    model.eval()
    return fit
