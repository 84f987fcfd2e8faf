"""Structural diagnostics of the PBTO persistence audit ("Persistent Backdoor Attacks in Class-Incremental Learning
via Structural Invariant Anchoring", ICML 2026; after the public reproduction hjhkkkc/PBTO).

- The Gram matrix of a layer's activations, ``G_l = A A^T / (C H W)`` per sample (``A`` the ``C x HW`` activation),
  and the anchoring loss: the mean squared difference between a batch's Grams and a reference Gram (the mean Gram of
  target-class images), the term PBTO adds to its trigger objective (Eq. 4-5).
- Linear CKA (Kornblith et al. 2019) and the Grassmann distance between top-PCA bases (RMS principal angle over
  pi / 2, the reproduction's normalisation), the paper's subspace-stability diagnostics.

- The neuron-stability check that refutes the "stable neurons" assumption of earlier continual-learning backdoors
  (:func:`fisher_drift_overlap`): do the channels that matter most for task 1 (Fisher) drift least?

Written here because they are a few lines of torch each; no kept library exposes them for tensors.
"""

from __future__ import annotations

import math

import torch

from icml26.errors import describe, input_error
from icml26.validation import check_finite


def gram_matrix(activations: torch.Tensor) -> torch.Tensor:
    """``[B, C, C]`` Grams of ``[B, C, H, W]`` activations, each ``A A^T / (C H W)``."""
    a = activations
    if not isinstance(a, torch.Tensor) or a.ndim != 4 or not a.dtype.is_floating_point:
        raise input_error("gram_matrix", "activations", "a float [B, C, H, W] tensor", describe(a))
    b, c, h, w = a.shape
    flat = a.reshape(b, c, h * w)
    return flat @ flat.transpose(1, 2) / (c * h * w)


def gram_anchor_loss(activations: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """The mean over the batch and the ``C x C`` entries of ``(G(activations) - reference)^2``; ``reference`` is a
    ``[C, C]`` Gram (the mean Gram of reference images under the same network)."""
    G = gram_matrix(activations)
    if not isinstance(reference, torch.Tensor) or reference.shape != G.shape[1:]:
        raise input_error("gram_anchor_loss", "reference", f"a [{G.shape[1]}, {G.shape[2]}] Gram", describe(reference))
    return (G - reference).square().mean()


def _features(fn: str, argument: str, X) -> torch.Tensor:
    X = torch.as_tensor(X)
    if X.ndim != 2 or not X.dtype.is_floating_point or X.shape[0] < 2:
        raise input_error(fn, argument, "a float [n, d] feature matrix with n >= 2", describe(X))
    return X.to(torch.float64)


def linear_cka(X, Y) -> float:
    """Linear CKA between two representations of the same ``n`` inputs (``[n, d1]``, ``[n, d2]``):
    ``||Y^T X||_F^2 / (||X^T X||_F ||Y^T Y||_F)`` after centring; 1 for equal representations, invariant to
    orthogonal maps and isotropic scaling."""
    X, Y = _features("linear_cka", "X", X), _features("linear_cka", "Y", Y)
    if X.shape[0] != Y.shape[0]:
        raise input_error("linear_cka", "Y", f"{X.shape[0]} rows (one per row of X)", Y.shape[0])
    X, Y = X - X.mean(0), Y - Y.mean(0)
    denominator = torch.linalg.matrix_norm(X.T @ X) * torch.linalg.matrix_norm(Y.T @ Y)
    if float(denominator) == 0:
        raise input_error("linear_cka", "X, Y", "representations that vary over the inputs", "a constant one")
    return float(torch.linalg.matrix_norm(Y.T @ X) ** 2 / denominator)


def pca_basis(X, variance: float = 0.9) -> torch.Tensor:
    """Orthonormal columns ``[d, k]`` spanning the top principal directions of ``X`` that keep ``variance`` of its
    (centred) variance."""
    X = _features("pca_basis", "X", X)
    variance = check_finite("pca_basis", "variance", variance, low=0.0, high=1.0, low_open=True)
    _, S, Vh = torch.linalg.svd(X - X.mean(0), full_matrices=False)
    energy = S.square().cumsum(0) / S.square().sum().clamp_min(1e-300)
    k = int(torch.searchsorted(energy, torch.tensor(variance, dtype=energy.dtype) - 1e-12)) + 1
    return Vh[: min(k, Vh.shape[0])].T


def grassmann_distance(A: torch.Tensor, B: torch.Tensor) -> float:
    """The RMS principal angle between the column spaces of ``A`` ``[d, k1]`` and ``B`` ``[d, k2]`` (orthonormal
    columns), over ``pi / 2``: 0 for the same subspace, 1 for orthogonal ones. Angles are taken over
    ``min(k1, k2)`` directions."""
    for name, M in (("A", A), ("B", B)):
        if not isinstance(M, torch.Tensor) or M.ndim != 2:
            raise input_error("grassmann_distance", name, "a [d, k] basis", describe(M))
    if A.shape[0] != B.shape[0]:
        raise input_error("grassmann_distance", "B", f"{A.shape[0]} rows (the dimension of A's space)", B.shape[0])
    cosines = torch.linalg.svdvals(A.to(torch.float64).T @ B.to(torch.float64)).clamp(-1.0, 1.0)
    angles = torch.arccos(cosines)
    return float(angles.square().mean().sqrt() / (math.pi / 2))


def _conv_channels(model) -> list[tuple[str, torch.nn.Conv2d]]:
    return [(name, m) for name, m in model.named_modules() if isinstance(m, torch.nn.Conv2d)]


def fisher_drift_overlap(before, after, images: torch.Tensor, labels, p: float = 0.1) -> float:
    """The share of the top-``p`` channels by Fisher information (``before``'s mean squared gradient of the
    cross-entropy on ``images``/``labels``, summed over each conv output channel's weights) that are also among the
    bottom-``p`` channels by drift (relative change of the channel's weight norm from ``before`` to ``after``),
    pooled over every conv layer. Chance level is ``p``; near 0 means the important channels are not the stable
    ones."""
    p = check_finite("fisher_drift_overlap", "p", p, low=0.0, high=1.0, low_open=True)
    convs_a, convs_b = _conv_channels(before), _conv_channels(after)
    if [n for n, _ in convs_a] != [n for n, _ in convs_b] or not convs_a:
        raise input_error("fisher_drift_overlap", "after", "the same architecture as before (its conv layers)",
                          [n for n, _ in convs_b])
    labels = torch.as_tensor(labels, dtype=torch.long)
    if not isinstance(images, torch.Tensor) or labels.shape != (images.shape[0],):
        raise input_error("fisher_drift_overlap", "labels", "one class id per image", describe(labels))
    model = before
    was_training = model.training
    model.eval()
    fisher = [torch.zeros(m.out_channels, dtype=torch.float64) for _, m in convs_a]
    for i in range(images.shape[0]):  # per-sample squared gradients (the empirical Fisher's diagonal)
        model.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(images[i:i + 1]).logits, labels[i:i + 1]).backward()
        for f, (_, m) in zip(fisher, convs_a):
            f += m.weight.grad.detach().to(torch.float64).square().flatten(1).sum(1)
    model.zero_grad(set_to_none=True)
    model.train(was_training)
    drift = [((mb.weight.detach() - ma.weight.detach()).flatten(1).norm(dim=1)
              / ma.weight.detach().flatten(1).norm(dim=1).clamp_min(1e-12)).to(torch.float64)
             for (_, ma), (_, mb) in zip(convs_a, convs_b)]
    fisher_all, drift_all = torch.cat(fisher), torch.cat(drift)
    k = max(1, int(round(p * len(fisher_all))))
    top = set(torch.topk(fisher_all, k).indices.tolist())
    stable = set(torch.topk(-drift_all, k).indices.tolist())
    return len(top & stable) / k


__all__ = ["fisher_drift_overlap", "gram_matrix", "gram_anchor_loss", "linear_cka", "pca_basis",
           "grassmann_distance"]
