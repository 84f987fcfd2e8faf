"""Learning from label proportions (LLP) with general losses: debiased bag-level risk estimates.

Paper: Applebaum, Dick, Gentile, Kaplan, Koren, "Optimal Learning from Label Proportions with General
Loss Functions" (arXiv 2509.15145, ICML 2026). Only a bag ``B = (x_1..x_k)`` and its label proportion
``alpha = (1/k) sum_i onehot(y_i)`` are observed; the goal is the instance risk ``E l(h(x), y)`` of any
loss ``l``. Bags are random (instances i.i.d. from the marginal); feature-defined bags are out of scope.

Every estimator here works on per-class losses ``losses[B, k, c] = l(h(x_i), c)`` with a ``mask[B, k]``
of real slots (bags may differ in size: bag ``b`` has ``k_b = mask[b].sum()`` instances), the bags'
``proportions[B, c]`` and the class prior ``p[c] = E onehot(y)``. With ``lbar[b, c]`` the bag mean of
``losses[b, :, c]``:

- :func:`easyllp_loss`, prior work (EasyLLP, Busa-Fekete et al., NeurIPS 2023, arXiv 2302.03115),
  implemented as published: soft labels ``k_b (alpha_bc - p_c) + p_c`` on every instance, i.e.
  ``L_b = sum_c [p_c lbar_bc + k_b (alpha_bc - p_c) lbar_bc]``. Unbiased; its variance grows like
  ``k_b``.
- :func:`lowvar_llp_loss`, the paper's low-variance estimator. Reconstruction: the paper's formula
  was not reachable; this is EasyLLP plus the control variate ``-k_b (alpha_bc - p_c) mu_c`` with
  ``mu_c = E_x l(h(x), c)`` estimated from *other* bags:
  ``L_b = sum_c [p_c lbar_bc + k_b (alpha_bc - p_c) (lbar_bc - mu_c)]``. It has the properties the
  paper states: unbiased for any loss (``E[k (alpha_c - p_c)(lbar_c - mu_c)] = Cov(y_c, l_c)``),
  binary and multi-class (``c = 2`` is the binary formula ``mean l0 + p dbar + k (alpha - p)(dbar -
  mu_d)`` with ``d = l1 - l0``), and a variance free of ``k`` (a product of two ``O(1/sqrt k)``
  fluctuations times ``k``). A loss shift shared by all classes cancels in the correction.
- :func:`dllp_loss`, prior work (DLLP, Ardehaly & Culotta 2017), as published: the cross-entropy
  between ``alpha`` and the bag's mean predicted distribution.

``mu``: ``None`` takes, for each bag, the instance mean of the losses over the *other* bags of the
call (leave-one-bag-out; differentiable, so the control variate also acts on the gradient, and
independent of the bag, so the estimate stays unbiased; needs two bags or more). A tensor ``[c]`` or
``[B, c]`` is used as given. :class:`LLPLoss` adds ``mu="ema"``.

``prior``: ``None`` takes the instance-weighted mean of ``proportions`` over the bags of the call. Pass
the dataset's prior for mini-batches (:class:`LLPClassifier` and :class:`LLPTrainer` use the mean of
``alpha`` over the whole training set). An estimated prior ``p_hat`` shifts EasyLLP's mean by
``(k - 1) sum_c mu_c (p_c - p_hat_c)``, which grows with ``k``; LowVar's shift is ``sum_c mu_c (p_hat_c
- p_c)``, free of ``k``.

Bags (:func:`random_bags`, :func:`bag_rows` and the checks of ``bag_index`` / ``proportions``) live in
:mod:`icml26.training.llp.bags`. The trainer lives in :mod:`icml26.training.llp.trainer` (:class:`LLPTrainer`,
:class:`LLPDataCollator`), the scikit-learn estimator and model selection in
:mod:`icml26.training.llp.estimator` (:class:`LLPClassifier`, :func:`mom_tournament`); all are importable
from here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.kernels import values_checked
from icml26.validation import check_choice, check_finite

__all__ = ["BASE_LOSSES", "METHODS", "LLPLoss", "bag_estimates", "bag_means", "dllp_loss", "easyllp_loss",
    "leave_one_bag_out_mean", "lowvar_llp_loss", "nonnegative_risk", "per_class_losses"]

METHODS = ("lowvar", "easyllp", "dllp")
BASE_LOSSES = ("log", "squared", "brier", "hinge", "focal")
REDUCTIONS = ("mean", "none", "classes")
#: Tolerance on "proportions (and a prior) sum to 1".
SUM_TOL = 1e-4


# ----------------------------------------------------------------------------------------------
# validation shared by the estimators
# ----------------------------------------------------------------------------------------------
def _floating(function: str, name: str, value: Any, dims: int, shape_text: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{function}: {name}: expected a floating {shape_text} tensor, got {type(value).__name__}")
    if value.dim() != dims or not value.is_floating_point():
        raise input_error(function, name, f"a floating {shape_text} tensor", describe(value))
    return value


def _mask(function: str, mask: Any, B: int, k: int, device: torch.device) -> torch.Tensor:
    if mask is None:
        return torch.ones(B, k, dtype=torch.bool, device=device)
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{function}: mask: expected a boolean [B, k] tensor, got {type(mask).__name__}")
    if mask.shape != (B, k):
        raise input_error(function, "mask", f"a boolean tensor of shape [B, k] = [{B}, {k}]", describe(mask))
    mask = mask.to(device=device, dtype=torch.bool)
    if values_checked(mask) and B and not bool(mask.any(1).all()):
        empty = torch.nonzero(~mask.any(1)).flatten()[:5].tolist()
        raise input_error(function, "mask", "at least one real instance in every bag",
                          described(f"empty bags {empty}"))
    return mask


def _proportions(function: str, proportions: Any, B: int, c: int, like: torch.Tensor) -> torch.Tensor:
    """``[B, c]`` proportions; a ``[B]`` tensor is the share of class 1 of a binary problem."""
    if not isinstance(proportions, torch.Tensor):
        proportions = torch.as_tensor(np.asarray(proportions, dtype=np.float64))
    alpha = proportions.to(device=like.device, dtype=like.dtype)
    if alpha.dim() == 1 and c == 2:
        alpha = torch.stack([1 - alpha, alpha], dim=-1)
    if alpha.shape != (B, c):
        raise input_error(function, "proportions", f"shape [B, c] = [{B}, {c}] (or [B] when c = 2)",
                          describe(proportions))
    if values_checked(alpha) and alpha.numel():
        low, high = float(alpha.min()), float(alpha.max())
        if not (low >= 0 and high <= 1):
            raise input_error(function, "proportions", "values in [0, 1]", described(f"values in [{low:g}, {high:g}]"))
        worst = float((alpha.sum(-1) - 1).abs().max())
        if worst > SUM_TOL:
            raise input_error(function, "proportions", f"rows summing to 1 (within {SUM_TOL:g})",
                              described(f"a row off by {worst:.3g}"))
    return alpha


def _prior(function: str, prior: Any, alpha: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    c = alpha.shape[-1]
    if prior is None:  # the instance-weighted mean of the proportions given
        weights = sizes.to(alpha.dtype)
        return (alpha * weights[:, None]).sum(0) / weights.sum()
    if isinstance(prior, (int, float)) and not isinstance(prior, bool):
        if c != 2:
            raise input_error(function, "prior", f"a [c] = [{c}] vector (a number only when c = 2)", prior)
        prior = [1 - float(prior), float(prior)]
    p = torch.as_tensor(prior if isinstance(prior, torch.Tensor) else np.asarray(prior, dtype=np.float64))
    p = p.to(device=alpha.device, dtype=alpha.dtype)
    if p.dim() == 0 or (p.dim() == 1 and p.shape[0] == 1):
        if c != 2:
            raise input_error(function, "prior", f"a [c] = [{c}] vector (a number only when c = 2)", describe(p))
        p = torch.cat([1 - p.reshape(1), p.reshape(1)])
    if p.shape != (c,):
        raise input_error(function, "prior", f"a vector of {c} class probabilities (a number when c = 2)", describe(p))
    if values_checked(p):
        if not bool(((p > 0) & (p < 1)).all()) or abs(float(p.sum()) - 1) > SUM_TOL:
            raise input_error(function, "prior", "class probabilities in (0, 1) summing to 1",
                              p.tolist() if p.numel() <= 10 else describe(p))
    return p


def _prob_clip(function: str, prob_clip: Any) -> float:
    return check_finite(function, "prob_clip", prob_clip, low=0, high=0.5, low_open=True, high_open=True)


def check_prior_values(function: str, prior: Any) -> None:
    """What a prior can be checked for before the number of classes is known: None, a probability in
    ``(0, 1)`` (``P(y = 1)``) or a vector of probabilities in ``(0, 1)`` summing to 1."""
    if prior is None:
        return
    expected = "None, P(y = 1) in (0, 1), or a vector of class probabilities in (0, 1) summing to 1"
    if isinstance(prior, (bool, str, bytes)):
        raise InputTypeError(function, "prior", expected, described(f"{type(prior).__name__} {prior!r}"))
    try:
        p = np.asarray(prior.detach().cpu() if isinstance(prior, torch.Tensor) else prior, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputTypeError(function, "prior", expected, described(type(prior).__name__)) from None
    if p.ndim > 1 or p.size == 0 or not np.isfinite(p).all() or not ((p > 0) & (p < 1)).all() or \
            (p.ndim == 1 and p.size > 1 and abs(float(p.sum()) - 1) > SUM_TOL):
        raise input_error(function, "prior", expected, p.tolist() if p.size <= 10 else describe(p))


def _reduction(function: str, reduction: str) -> str:
    if reduction not in REDUCTIONS:
        raise input_error(function, "reduction", f"one of {list(REDUCTIONS)}", reduction)
    return reduction


def _reduce(terms: torch.Tensor, reduction: str) -> torch.Tensor:
    """``terms[B, c]``, each bag's per-class terms, reduced: ``"mean"`` -> scalar, ``"none"`` -> ``[B]`` bag
    estimates, ``"classes"`` -> ``[c]`` partial risks (the mean over bags of each class's term)."""
    if reduction == "classes":
        return terms.mean(0)
    per_bag = terms.sum(-1)
    return per_bag.mean() if reduction == "mean" else per_bag


# ----------------------------------------------------------------------------------------------
# bag statistics
# ----------------------------------------------------------------------------------------------
def bag_means(losses: torch.Tensor, mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(lbar[B, c], sizes[B])``: the per-class mean over each bag's real slots, and the bag sizes.

    ``losses``: ``[B, k, c]``; ``mask``: ``[B, k]`` booleans, True on real instances (None: all real).
    """
    losses = _floating("bag_means", "losses", losses, 3, "[B, k, c]")
    return _bag_means(losses, _mask("bag_means", mask, losses.shape[0], losses.shape[1], losses.device))


def _bag_means(losses: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    weights = mask.to(losses.dtype)
    sizes = weights.sum(1)
    # where, not a product: a NaN or inf in a padded slot must not leak into the bag.
    total = torch.where(mask.unsqueeze(-1), losses, torch.zeros((), dtype=losses.dtype, device=losses.device)).sum(1)
    return total / sizes.clamp_min(1).unsqueeze(-1), sizes


def leave_one_bag_out_mean(lbar: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    """``mu[b, c]``: the instance mean of the losses over every bag but ``b`` (differentiable).

    ``lbar``: ``[B, c]`` bag means (:func:`bag_means`); ``sizes``: ``[B]`` bag sizes; two bags or more.
    """
    lbar = _floating("leave_one_bag_out_mean", "lbar", lbar, 2, "[B, c]")
    if not isinstance(sizes, torch.Tensor) or sizes.shape != (lbar.shape[0],):
        raise input_error("leave_one_bag_out_mean", "sizes", f"a [B] = [{lbar.shape[0]}] tensor of bag sizes",
                          describe(sizes))
    if lbar.shape[0] < 2:
        raise input_error("leave_one_bag_out_mean", "lbar", "two bags or more (B >= 2)", describe(lbar))
    return _leave_one_bag_out_mean(lbar, sizes)


def _leave_one_bag_out_mean(lbar: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    totals = lbar * sizes.unsqueeze(-1)
    others = sizes.sum() - sizes
    return (totals.sum(0, keepdim=True) - totals) / others.clamp_min(1).unsqueeze(-1)


def _real_slots(function: str, name: str, values: torch.Tensor, mask: torch.Tensor, expected: str,
                ok: Callable[[torch.Tensor], torch.Tensor]) -> None:
    """Refuse ``values[B, k, c]`` whose real slots (``mask``) fail ``ok``; padded slots may hold anything."""
    if values_checked(values) and values.numel():
        bad = ~ok(values.detach()).all(-1) & mask
        if bool(bad.any()):
            b, i = (int(v) for v in torch.nonzero(bad)[0])
            raise input_error(function, name, expected, described(f"{name}[{b}, {i}] = {values[b, i].tolist()}"))


def _setup(function: str, losses, proportions, prior, mask):
    losses = _floating(function, "losses", losses, 3, "[B, k, c]")
    B, k, c = losses.shape
    if c < 2:
        raise input_error(function, "losses", "c >= 2 classes in the last dimension", describe(losses))
    mask = _mask(function, mask, B, k, losses.device)
    _real_slots(function, "losses", losses, mask, "finite losses", torch.isfinite)
    alpha = _proportions(function, proportions, B, c, losses)
    lbar, sizes = _bag_means(losses, mask)
    p = _prior(function, prior, alpha, sizes)
    return lbar, sizes, alpha, p


def _mu(function: str, mu: Any, lbar: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
    B, c = lbar.shape
    if mu is None:
        if B < 2:
            raise input_error(function, "mu", "two bags or more for the leave-one-bag-out mean (mu=None); pass mu "
                              "as a [c] tensor, or use LLPLoss(mu='ema'), for a single bag", described(f"{B} bag"))
        return _leave_one_bag_out_mean(lbar, sizes)
    if isinstance(mu, str):
        raise input_error(function, "mu", "None (leave-one-bag-out) or a [c] / [B, c] tensor (mu='ema' lives in "
                          "LLPLoss, which keeps the running mean)", mu)
    mu = torch.as_tensor(mu, dtype=lbar.dtype, device=lbar.device)
    if mu.shape not in ((c,), (B, c)):
        raise input_error(function, "mu", f"a tensor of shape [c] = [{c}] or [B, c] = [{B}, {c}]", describe(mu))
    if values_checked(mu) and not bool(torch.isfinite(mu).all()):
        raise input_error(function, "mu", "finite mean losses", described("a tensor with NaN or inf"))
    return mu.expand(B, c)


# ----------------------------------------------------------------------------------------------
# the estimators (pure functions)
# ----------------------------------------------------------------------------------------------
def lowvar_llp_loss(losses: torch.Tensor, proportions: Any, prior: Any = None, mu: Any = None,
                    mask: torch.Tensor | None = None, reduction: str = "mean") -> torch.Tensor:
    """The low-variance unbiased bag estimate ``L_b = sum_c [p_c lbar_bc + k_b (alpha_bc - p_c)(lbar_bc - mu_bc)]``.

    Reconstruction of the paper's estimator (arXiv 2509.15145): EasyLLP plus a control variate with
    ``mu`` from other bags (see the module docstring).

    Args:
        losses: ``[B, k, c]`` per-class losses ``l(h(x_i), c)`` (any float dtype; float64 for exact checks).
        proportions: ``[B, c]`` label proportions (rows in the simplex), or ``[B]`` shares of class 1 when
            ``c = 2``.
        prior: ``[c]`` class prior (a number: ``P(y = 1)`` when ``c = 2``); None: the instance-weighted
            mean of ``proportions``.
        mu: None (leave-one-bag-out instance mean, two bags or more), or a ``[c]`` / ``[B, c]`` tensor.
        mask: ``[B, k]`` booleans, True on real instances (None: every slot is real).
        reduction: ``"mean"`` over bags, ``"none"`` (the ``[B]`` bag estimates) or ``"classes"`` (the ``[c]``
            partial risks: the mean over bags of each class's term, an unbiased estimate of
            ``E[y_c l(h(x), c)] >= 0``; they sum to the ``"mean"``; see :func:`nonnegative_risk`).
    """
    reduction = _reduction("lowvar_llp_loss", reduction)
    lbar, sizes, alpha, p = _setup("lowvar_llp_loss", losses, proportions, prior, mask)
    return _reduce(_lowvar(lbar, sizes, alpha, p, _mu("lowvar_llp_loss", mu, lbar, sizes)), reduction)


def easyllp_loss(losses: torch.Tensor, proportions: Any, prior: Any = None, mask: torch.Tensor | None = None,
                 reduction: str = "mean") -> torch.Tensor:
    """EasyLLP's bag estimate ``L_b = sum_c (k_b (alpha_bc - p_c) + p_c) lbar_bc`` (prior work, as published).

    Busa-Fekete, Choi, Dick, Gentile, Munoz Medina, "Easy Learning from Label Proportions" (NeurIPS
    2023, arXiv 2302.03115): every instance of a bag gets the soft label ``k (alpha - p) + p``. With
    ``k = 1`` it is the instance loss. Arguments as :func:`lowvar_llp_loss` (no ``mu``).
    """
    reduction = _reduction("easyllp_loss", reduction)
    lbar, sizes, alpha, p = _setup("easyllp_loss", losses, proportions, prior, mask)
    return _reduce(_easyllp(lbar, sizes, alpha, p), reduction)


def _lowvar(lbar, sizes, alpha, p, mu):
    """Per-class terms ``[B, c]``: ``p_c lbar_bc + k_b (alpha_bc - p_c)(lbar_bc - mu_bc)``."""
    return p * lbar + sizes.unsqueeze(-1) * (alpha - p) * (lbar - mu)


def _easyllp(lbar, sizes, alpha, p):
    """Per-class terms ``[B, c]``: ``(k_b (alpha_bc - p_c) + p_c) lbar_bc``."""
    return (sizes.unsqueeze(-1) * (alpha - p) + p) * lbar


def bag_estimates(lbar: torch.Tensor, sizes: torch.Tensor, proportions: Any, prior: Any = None,
                  method: str = "lowvar", mu: Any = None) -> torch.Tensor:
    """The ``[B]`` bag estimates of ``method`` (``"lowvar"`` or ``"easyllp"``) from bag statistics alone.

    ``lbar[B, c]``: each bag's per-class mean loss; ``sizes[B]``: its instance count. The same estimates as
    :func:`lowvar_llp_loss` / :func:`easyllp_loss` with ``reduction="none"``, for data too large to pad
    into ``[B, k, c]`` (:func:`mom_tournament` sums instance losses per bag with ``index_add``).
    """
    if method not in ("lowvar", "easyllp"):
        raise input_error("bag_estimates", "method", "'lowvar' or 'easyllp'", method)
    lbar = _floating("bag_estimates", "lbar", lbar, 2, "[B, c]")
    B, c = lbar.shape
    sizes = torch.as_tensor(sizes, dtype=lbar.dtype, device=lbar.device)
    if sizes.shape != (B,):
        raise input_error("bag_estimates", "sizes", f"a [B] = [{B}] tensor of bag sizes", describe(sizes))
    if values_checked(sizes) and B and not bool((sizes >= 1).all()):
        raise input_error("bag_estimates", "sizes", "bag sizes >= 1", described(f"min {float(sizes.min()):g}"))
    alpha = _proportions("bag_estimates", proportions, B, c, lbar)
    p = _prior("bag_estimates", prior, alpha, sizes)
    if method == "easyllp":
        return _easyllp(lbar, sizes, alpha, p).sum(-1)
    return _lowvar(lbar, sizes, alpha, p, _mu("bag_estimates", mu, lbar, sizes)).sum(-1)


def dllp_loss(probs: torch.Tensor, proportions: Any, mask: torch.Tensor | None = None, *, eps: float = 1e-7,
              reduction: str = "mean") -> torch.Tensor:
    """DLLP's bag loss ``-sum_c alpha_bc log(mean_i probs[b, i, c])`` (prior work, as published).

    Ardehaly & Culotta, "Co-training for demographic classification using deep learning from label
    proportions" (ICDM workshops 2017): proportion matching by cross-entropy. ``probs``: ``[B, k, c]``
    predicted class probabilities; the bag mean is clamped to ``[eps, 1]`` before the log.
    """
    reduction = _reduction("dllp_loss", reduction)
    probs = _floating("dllp_loss", "probs", probs, 3, "[B, k, c]")
    B, k, c = probs.shape
    if c < 2:
        raise input_error("dllp_loss", "probs", "c >= 2 classes in the last dimension", describe(probs))
    eps = check_finite("dllp_loss", "eps", eps, low=0, high=1, low_open=True, high_open=True)
    mask = _mask("dllp_loss", mask, B, k, probs.device)
    tol = 1e-2 if probs.dtype in (torch.float16, torch.bfloat16) else SUM_TOL
    _real_slots("dllp_loss", "probs", probs, mask, f"class probabilities: values in [0, 1], rows summing to 1 "
                f"(within {tol:g})", lambda q: (q >= 0) & (q <= 1) & ((q.sum(-1, keepdim=True) - 1).abs() <= tol))
    alpha = _proportions("dllp_loss", proportions, B, c, probs)
    mean_probs, _ = _bag_means(probs, mask)
    return _reduce(-(alpha * mean_probs.clamp(min=eps, max=1.0).log()), reduction)


def nonnegative_risk(partial_risks: torch.Tensor, beta: float = 0.0, gamma: float = 2.0) -> torch.Tensor:
    """The per-class non-negative correction of a debiased risk, in the style of nnPU.

    Each class's partial risk ``R_c`` (``reduction="classes"`` of :func:`lowvar_llp_loss` or
    :func:`easyllp_loss`) estimates ``E[y_c l(h(x), c)]``, which is ``>= 0`` for a non-negative loss; the
    estimators weight losses by ``k (alpha - p)``, which can be negative, so a flexible model can drive
    an ``R_c`` below 0 by fitting the bags it sees (the empirical objective is then unbounded below).
    Kiryo, Niu, du Plessis, Sugiyama, "Positive-Unlabeled Learning with Non-Negative Risk Estimator"
    (NeurIPS 2017, arXiv 1703.00593) clip the negative-class partial risk of unbiased PU learning at 0
    and, when it falls below ``-beta``, step on its negative gradient scaled by ``gamma``. Reconstruction:
    the same per class. The value returned is ``sum_c max(0, R_c)``; its gradient is that of
    ``sum_c R_c`` over the classes with ``R_c >= -beta`` minus ``gamma`` times that of the others (gradient
    ascent pushes them back up). With every ``R_c >= 0`` it is the unguarded risk, value and gradient.
    Reconstruction: ``gamma = 2`` by default. nnPU's ``gamma = 1`` (with ``beta = 0``) makes the step the
    gradient of ``|R_c|``, which holds a partial risk at 0 from both sides; in LLP the true partial risks
    ``E[y_c l_c]`` of a good model are small, so the correction acts all the time and the training
    estimate ends below 0 about half the time. A return step larger than the descent keeps it on the
    non-negative side (measured on an MLP on digits: gamma 1, 2 and 5 tried, 2 the smallest that did).

    Args:
        partial_risks: ``[..., c]`` partial risks (the last dimension holds the classes).
        beta: how far below 0 a partial risk may go before its gradient is reversed (``>= 0``; nnPU's 0).
        gamma: the scale of the reversed gradient (``> 0``; 2 here, nnPU's 1).
    """
    if not isinstance(partial_risks, torch.Tensor):
        raise TypeError(f"nonnegative_risk: partial_risks: expected a floating [..., c] tensor, got "
                        f"{type(partial_risks).__name__}")
    if partial_risks.dim() < 1 or not partial_risks.is_floating_point():
        raise input_error("nonnegative_risk", "partial_risks", "a floating [..., c] tensor", describe(partial_risks))
    beta = check_finite("nonnegative_risk", "beta", beta, non_negative=True)
    gamma = check_finite("nonnegative_risk", "gamma", gamma, positive=True)
    value = partial_risks.clamp(min=0).sum(-1)
    surrogate = torch.where(partial_risks >= -beta, partial_risks, -gamma * partial_risks).sum(-1)
    return surrogate + (value - surrogate).detach()  # the value of the clipped risk, the gradient of nnPU's step


# ----------------------------------------------------------------------------------------------
# per-class losses from logits, and the module
# ----------------------------------------------------------------------------------------------
def _as_class_logits(logits: torch.Tensor) -> torch.Tensor:
    """``[..., c]`` logits; a trailing dimension of 1 (one binary logit ``z``) becomes ``[0, z]``."""
    if logits.shape[-1] == 1:
        return torch.cat([torch.zeros_like(logits), logits], dim=-1)
    return logits


def per_class_losses(logits: torch.Tensor, base: str | Callable = "log", *, prob_clip: float = 1e-3,
                     focal_gamma: float = 2.0) -> torch.Tensor:
    """``l(h(x), c)`` for every class ``c``: ``[..., c]`` from ``[..., c]`` logits (``[..., 1]``: binary).

    ``log``: ``-log q_c`` with ``q = softmax(logits)`` clipped to ``[prob_clip, 1 - prob_clip]``, which
    bounds the loss (the estimators' weights ``k (alpha - p)`` can be negative, so an unbounded loss
    makes the empirical objective unbounded below); ``squared``: ``(1 - q_c)^2``; ``brier``:
    ``sum_j (q_j - [j = c])^2``; ``hinge``: Crammer-Singer ``max(0, 1 + max_{j != c} z_j - z_c)``;
    ``focal``: ``-(1 - q_c)^gamma log q_c`` (clipped like ``log``); a callable maps ``[..., c]`` logits to
    ``[..., c]`` losses.
    """
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"per_class_losses: logits: expected a floating [..., c] tensor, got {type(logits).__name__}")
    if logits.dim() < 1 or not logits.is_floating_point():
        raise input_error("per_class_losses", "logits", "a floating [..., c] tensor", describe(logits))
    if not callable(base):
        check_choice("per_class_losses", "base", base, BASE_LOSSES)
    prob_clip = _prob_clip("per_class_losses", prob_clip)
    focal_gamma = check_finite("per_class_losses", "focal_gamma", focal_gamma, non_negative=True)
    logits = _as_class_logits(logits)
    if callable(base):
        out = base(logits)
        if not isinstance(out, torch.Tensor) or out.shape != logits.shape:
            raise input_error("per_class_losses", "base", f"a callable returning per-class losses of shape "
                              f"{tuple(logits.shape)}", describe(out))
        return out
    q = logits.float().softmax(-1).to(logits.dtype) if logits.dtype in (torch.float16, torch.bfloat16) \
        else logits.softmax(-1)
    if base == "log":
        return -q.clamp(prob_clip, 1 - prob_clip).log()
    if base == "squared":
        return (1 - q) ** 2
    if base == "brier":
        sq = (q * q).sum(-1, keepdim=True)
        return sq - 2 * q + 1  # sum_j (q_j - e_c)^2 = sum_j q_j^2 - 2 q_c + 1
    if base == "hinge":
        c = logits.shape[-1]
        eye = torch.eye(c, dtype=torch.bool, device=logits.device)
        others = logits.unsqueeze(-2).masked_fill(eye, float("-inf")).amax(-1)  # max_{j != c} z_j, per c
        return F.relu(1 + others - logits)
    if base == "focal":
        qc = q.clamp(prob_clip, 1 - prob_clip)
        return -((1 - qc) ** focal_gamma) * qc.log()
    raise input_error("per_class_losses", "base", f"one of {list(BASE_LOSSES)} or a callable", base)


class LLPLoss(torch.nn.Module):
    """An LLP loss on logits: ``loss = LLPLoss("lowvar")(logits, proportions, mask)``.

    Args:
        method: ``"lowvar"`` (the paper's estimator, reconstructed), ``"easyllp"`` or ``"dllp"``.
        base: the instance loss (see :func:`per_class_losses`); DLLP always matches proportions with
            cross-entropy and ignores it.
        prob_clip: clip of the predicted probabilities for the log and focal losses (1e-3).
        prior: the class prior (``[c]``, or ``P(y = 1)`` when binary); None: the batch's mean of ``alpha``
            (pass the dataset's prior for mini-batch training; :class:`LLPTrainer` does).
        mu: ``"loo"`` (leave-one-bag-out over the batch: unbiased, differentiable, needs two bags per
            batch) or ``"ema"``: ``mu = d * ema + (1 - d) * loo`` where ``ema`` is a running mean
            (``decay = d = 0.99``) of past batches' instance means (detached). The first batch starts
            the running mean from its own mean (so a constant predictor stays exact), which puts each
            bag's own losses into its ``mu``: slightly biased early on. With one bag per batch the
            ``loo`` part is left out. Only ``"lowvar"`` uses ``mu``. The running mean is detached, so
            the control variate acts on the loss's value but only its ``(1 - d)`` share acts on the
            gradient: the gradient's variance then grows with ``k`` almost as EasyLLP's does. Prefer
            ``"loo"`` whenever a batch holds two bags or more.
        ema_decay: the running mean's decay ``d`` when ``mu="ema"``.
        nonnegative: apply :func:`nonnegative_risk` to the batch's per-class partial risks (LowVar and
            EasyLLP; DLLP's loss is never negative). Off by default here, so the loss is the unbiased
            estimator; turn it on for flexible models (:class:`~icml26.training.llp.estimator.LLPClassifier`
            turns it on for its MLP, :class:`~icml26.training.llp.trainer.LLPTrainer` by default), whose
            unguarded objective is unbounded below.
        nn_beta: ``beta`` of :func:`nonnegative_risk`.
        nn_gamma: ``gamma`` of :func:`nonnegative_risk`.

    ``forward(logits, proportions, mask=None, prior=None)``: ``logits`` ``[B, k, c]`` (``[B, k]`` or
    ``[B, k, 1]``: one binary logit). Returns the mean over bags.
    """

    def __init__(self, method: str = "lowvar", base: str | Callable = "log", prob_clip: float = 1e-3,
                 prior: Any = None, mu: str = "loo", ema_decay: float = 0.99, nonnegative: bool = False,
                 nn_beta: float = 0.0, nn_gamma: float = 2.0) -> None:
        super().__init__()
        check_choice("LLPLoss", "method", method, METHODS)
        if not callable(base) and base not in BASE_LOSSES:
            raise input_error("LLPLoss", "base", f"one of {list(BASE_LOSSES)} or a callable", base)
        clip = _prob_clip("LLPLoss", prob_clip)
        if mu not in ("loo", "ema"):
            raise input_error("LLPLoss", "mu", "'loo' or 'ema'", mu)
        decay = check_finite("LLPLoss", "ema_decay", ema_decay, low=0, high=1, high_open=True)
        check_prior_values("LLPLoss", prior)
        if not isinstance(nonnegative, (bool, np.bool_)):
            raise input_error("LLPLoss", "nonnegative", "True or False", nonnegative)
        self.nonnegative = bool(nonnegative)
        self.nn_beta = check_finite("LLPLoss", "nn_beta", nn_beta, non_negative=True)
        self.nn_gamma = check_finite("LLPLoss", "nn_gamma", nn_gamma, positive=True)
        self.method, self.base, self.prob_clip, self.prior, self.mu, self.ema_decay = method, base, clip, prior, mu, decay
        self.register_buffer("ema", None, persistent=False)

    def reset(self) -> None:
        """Forget the running mean of ``mu="ema"``."""
        self.ema = None

    def _ema_mu(self, lbar: torch.Tensor, sizes: torch.Tensor) -> torch.Tensor:
        batch_mean = ((lbar * sizes.unsqueeze(-1)).sum(0) / sizes.sum()).detach()
        if self.ema is None or self.ema.shape != batch_mean.shape:
            self.ema = batch_mean.clone()
        running = self.ema.to(lbar.dtype)
        if lbar.shape[0] >= 2:
            mu = self.ema_decay * running + (1 - self.ema_decay) * _leave_one_bag_out_mean(lbar, sizes)
        else:
            mu = running.expand_as(lbar)
        self.ema = self.ema_decay * self.ema + (1 - self.ema_decay) * batch_mean.to(self.ema.dtype)
        return mu

    def forward(self, logits: torch.Tensor, proportions: Any, mask: torch.Tensor | None = None,
                prior: Any = None) -> torch.Tensor:
        if isinstance(logits, torch.Tensor) and logits.dim() == 2:
            logits = logits.unsqueeze(-1)
        logits = _floating("LLPLoss", "logits", logits, 3, "[B, k, c]")
        prior = self.prior if prior is None else prior
        if self.method == "dllp":
            return dllp_loss(_as_class_logits(logits).softmax(-1), proportions, mask)
        losses = per_class_losses(logits, self.base, prob_clip=self.prob_clip)
        reduction = "classes" if self.nonnegative else "mean"
        if self.method == "easyllp":
            out = easyllp_loss(losses, proportions, prior, mask, reduction=reduction)
        elif self.mu == "loo":
            out = lowvar_llp_loss(losses, proportions, prior, None, mask, reduction=reduction)
        else:
            B, k, c = losses.shape
            lbar, sizes = _bag_means(losses, _mask("LLPLoss", mask, B, k, losses.device))
            out = lowvar_llp_loss(losses, proportions, prior, self._ema_mu(lbar, sizes), mask, reduction=reduction)
        return nonnegative_risk(out, self.nn_beta, self.nn_gamma) if self.nonnegative else out

    def extra_repr(self) -> str:
        return (f"method={self.method!r}, base={self.base!r}, prob_clip={self.prob_clip}, mu={self.mu!r}, "
                f"nonnegative={self.nonnegative}")
