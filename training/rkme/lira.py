"""The likelihood-ratio membership attack (LiRA), online and per target, on complementary shadow halves.

Carlini, Chien, Nasr, Song, Terzis, Tramer, "Membership Inference Attacks From First Principles"
(IEEE S&P 2022, arXiv 2112.03570), Section IV: for a target ``x*`` the attacker trains shadow models with
``x*`` IN and with ``x*`` OUT, fits a Gaussian to a statistic of ``x*`` on each side (the logit-scaled
confidence ``phi = log(p / (1 - p))`` of the true label, Eq. 4) and scores the released model's statistic by
the likelihood ratio of the two Gaussians (Algorithm 1, online). Per-target variances are the paper's
default; ``variance="global"`` is its fixed-variance variant for few shadow models.

Reconstruction: the shadow family is ``pairs`` complementary pairs of models on a common pool of records
(model ``2p`` trains on a random half of the pool, model ``2p + 1`` on the other half), so every record is IN
for exactly one model of each pair. Every model in turn is the released one and the models of the other
pairs are its shadows (leave one pair out): each target then has exactly ``pairs - 1`` shadows per side,
and the number of IN shadows says nothing about the target's membership. The statistic can be any
per-record number of a released artefact (the model's ``phi``, a specification's log nearest-reduced-point
distance); the log ratios of independent statistics add (the "both" adversary).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from icml26.errors import InputError, describe, described
from icml26.validation import check_choice, check_int

LIRA_VARIANCES = ("per_target", "global")
#: added to every fitted variance: a statistic that is constant on one side (a raw record's distance 0)
#: gives a sharp but finite likelihood
VARIANCE_FLOOR = 1e-8


def balanced_halves(n_records: int, pairs: int, seed: int = 0) -> np.ndarray:
    """Membership of ``2 pairs`` shadow models over ``n_records`` pool records, a ``(2 pairs, n_records)`` bool
    array: row ``2p`` is a random half of the pool (``n_records // 2`` records), row ``2p + 1`` its complement.

    Args:
        n_records: records in the common pool (even, at least 2).
        pairs: complementary pairs of models (at least 3: a leave-one-pair-out target keeps 2 shadows a side).
        seed: seed of the random halves (a non-negative int).
    """
    f = "balanced_halves"
    n_records = check_int(f, "n_records", n_records, low=2)
    if n_records % 2:
        raise InputError(f, "n_records", "an even number (two halves)", n_records)
    pairs = check_int(f, "pairs", pairs, low=3)
    check_int(f, "seed", seed, low=0)
    rng = np.random.default_rng(seed)
    out = np.zeros((2 * pairs, n_records), dtype=bool)
    for p in range(pairs):
        half = rng.permutation(n_records)[: n_records // 2]
        out[2 * p, half] = True
        out[2 * p + 1] = ~out[2 * p]
    return out


def logit_confidence(p: Any, eps: float = 1e-12) -> np.ndarray:
    """LiRA's statistic ``phi = log(p) - log(1 - p)`` of the true label's probability ``p`` (Eq. 4), with
    ``p`` clipped to ``[eps, 1 - eps]``.

    Args:
        p: probabilities of the true labels (any shape, values in [0, 1]).
        eps: the clip.
    """
    p = np.asarray(p, dtype=np.float64)
    if not np.isfinite(p).all() or (p < 0).any() or (p > 1).any():
        raise InputError("logit_confidence", "p", "probabilities in [0, 1]", describe(p))
    p = np.clip(p, eps, 1 - eps)
    return np.log(p) - np.log1p(-p)


def lira_log_ratio(stats: Any, membership: Any, variance: str = "per_target") -> np.ndarray:
    """``log N(s; mu_in, v_in) - log N(s; mu_out, v_out)`` for every (released model, target) pair.

    Model ``k`` of ``stats`` (``(2 pairs, n_records)``, the statistic of every pool record under every model)
    is the released one; the Gaussians of each target are fit on the models of the other pairs (leave one
    pair out). Positive values say IN; 0 is the Bayes threshold at a prior of 1/2.

    Args:
        stats: ``(2 pairs, n_records)`` finite statistics, row ``k`` under model ``k``.
        membership: the ``(2 pairs, n_records)`` bool array of :func:`balanced_halves` (rows ``2p`` and
            ``2p + 1`` complementary).
        variance: ``"per_target"`` (each target's own variances, the paper's default) or ``"global"`` (one
            variance per side over all targets, its fixed-variance variant).
    """
    f = "lira_log_ratio"
    member = np.asarray(membership)
    if member.dtype != bool or member.ndim != 2 or len(member) < 6 or len(member) % 2 \
            or (member[0::2] == member[1::2]).any():
        raise InputError(f, "membership", "a (2 pairs, records) bool array of complementary pairs, pairs >= 3",
                         described(f"a {member.dtype} array of shape {member.shape}"
                                   + ("" if member.dtype != bool or member.ndim != 2 or len(member) % 2
                                      else " whose pairs are not complementary")))
    S = np.asarray(stats, dtype=np.float64)
    if S.shape != member.shape or not np.isfinite(S).all():
        raise InputError(f, "stats", f"finite statistics of shape {member.shape} (membership's)", describe(S))
    check_choice(f, "variance", variance, LIRA_VARIANCES)
    M = len(S)
    n_side = M // 2 - 1  # shadows per side once the released model's pair is left out
    ins, outs = np.where(member, S, 0.0), np.where(member, 0.0, S)
    # pair p contributes exactly one IN and one OUT value per record: subtract them from the totals
    in_pair = ins.reshape(-1, 2, S.shape[1]).sum(1)
    out_pair = outs.reshape(-1, 2, S.shape[1]).sum(1)
    mu_in = (ins.sum(0) - in_pair) / n_side
    mu_out = (outs.sum(0) - out_pair) / n_side
    ss_in = ((ins ** 2).sum(0) - in_pair ** 2) - n_side * mu_in ** 2
    ss_out = ((outs ** 2).sum(0) - out_pair ** 2) - n_side * mu_out ** 2
    if variance == "global":
        ss_in = np.broadcast_to(ss_in.mean(1, keepdims=True), ss_in.shape)
        ss_out = np.broadcast_to(ss_out.mean(1, keepdims=True), ss_out.shape)
    v_in = np.maximum(ss_in, 0.0) / (n_side - 1) + VARIANCE_FLOOR
    v_out = np.maximum(ss_out, 0.0) / (n_side - 1) + VARIANCE_FLOOR
    v_in, v_out, mu_in, mu_out = (np.repeat(a, 2, axis=0) for a in (v_in, v_out, mu_in, mu_out))
    return 0.5 * ((S - mu_out) ** 2 / v_out - (S - mu_in) ** 2 / v_in + np.log(v_out / v_in))


def per_target_advantage(log_ratio: Any, membership: Any) -> np.ndarray:
    """Each target's membership advantage ``TPR - FPR`` over the released models (LiRA's decision
    ``log_ratio > 0``); with balanced halves it equals ``2 acc - 1``, the games' definition.

    Args:
        log_ratio: ``(models, records)`` scores of :func:`lira_log_ratio` (or their sum over statistics).
        membership: the ``(models, records)`` bool membership.
    """
    L, member = np.asarray(log_ratio, dtype=np.float64), np.asarray(membership)
    if member.dtype != bool or L.shape != member.shape or member.ndim != 2 \
            or not (member.any(0) & (~member).any(0)).all():
        raise InputError("per_target_advantage", "membership", f"a bool array of shape {L.shape} with every "
                         "target IN and OUT somewhere", described(f"a {member.dtype} array of shape {member.shape}"))
    says_in = L > 0
    return (says_in & member).sum(0) / member.sum(0) - (says_in & ~member).sum(0) / (~member).sum(0)
