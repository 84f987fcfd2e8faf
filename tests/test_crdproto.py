"""CRDProto's low-rank pieces (reconstruction of "Rank-guided Diffusion for Noise Few-Shot Learning"): the proximal
operators against closed forms, gradients through the unrolled ADMM, rank estimators, and the anomaly scores on a
union of subspaces and on digits."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.autograd import gradcheck

from icml26.models.crdproto import (
    anomaly_scores,
    class_bases,
    effective_rank,
    flag_rows,
    outlier_pursuit,
    row_shrink,
    soft_rank,
    svt,
)


def _with_spectrum(s, rows=6, cols=10, seed=0):
    g = torch.Generator().manual_seed(seed)
    U, _ = torch.linalg.qr(torch.randn(rows, rows, generator=g, dtype=torch.float64))
    V, _ = torch.linalg.qr(torch.randn(cols, rows, generator=g, dtype=torch.float64))
    return U @ torch.diag(torch.as_tensor(s, dtype=torch.float64)) @ V.T


def test_svt_shrinks_every_singular_value_by_tau():
    s = torch.tensor([5.0, 3.0, 2.0, 1.0, 0.5, 0.1], dtype=torch.float64)
    out = torch.linalg.svdvals(svt(_with_spectrum(s), 1.5))
    assert torch.allclose(out, (s - 1.5).clamp(min=0), atol=1e-6)
    batched = svt(torch.stack([_with_spectrum(s), _with_spectrum(2 * s, seed=1)]), 1.5)
    assert torch.allclose(torch.linalg.svdvals(batched[1]), (2 * s - 1.5).clamp(min=0), atol=1e-6)


def test_row_shrink_zeroes_short_rows_and_scales_the_rest():
    M = torch.tensor([[3.0, 4.0], [0.3, 0.4], [0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    out = row_shrink(M, 1.0)
    assert torch.allclose(out[0], M[0] * (1 - 1 / 5))
    assert torch.equal(out[1], torch.zeros(2, dtype=torch.float64))     # norm 0.5 <= tau
    assert torch.equal(out[2], torch.zeros(2, dtype=torch.float64))
    assert torch.equal(out[3], torch.zeros(2, dtype=torch.float64))     # norm exactly tau


def test_the_rank_estimators_count_an_equal_spectrum():
    for r in (1, 2, 3):
        M = _with_spectrum([2.0] * r + [0.0] * (6 - r))
        assert effective_rank(M).item() == pytest.approx(r, abs=1e-6)
        assert soft_rank(M).item() == pytest.approx(r + (6 - r) / (1 + math.exp(5.0)), abs=1e-6)
    assert effective_rank(torch.zeros(3, 4)).item() == 0.0 and soft_rank(torch.zeros(3, 4)).item() == 0.0


def test_gradients_flow_through_the_soft_rank_and_a_short_admm():
    g = torch.Generator().manual_seed(0)
    Z = torch.randn(5, 8, generator=g, dtype=torch.float64, requires_grad=True)
    lam = torch.tensor(0.45, dtype=torch.float64, requires_grad=True)
    assert gradcheck(lambda z, l: outlier_pursuit(z, l, n_iter=5)[0], (Z, lam))
    assert gradcheck(lambda z: soft_rank(z), (Z,))


def test_outlier_pursuit_separates_a_low_rank_block_from_a_corrupted_row():
    g = torch.Generator().manual_seed(1)
    basis = torch.linalg.qr(torch.randn(16, 2, generator=g, dtype=torch.float64))[0]
    clean = torch.randn(9, 2, generator=g, dtype=torch.float64) @ basis.T
    Z = torch.cat([clean, 2 * torch.randn(1, 16, generator=g, dtype=torch.float64)])
    L, E = outlier_pursuit(Z, 0.5, n_iter=100)
    assert torch.allclose(L + E, Z, atol=1e-6)
    energy = E.norm(dim=1)
    assert energy.argmax().item() == 9 and energy[:9].max() < energy[9] / 3
    assert round(soft_rank(L).item()) <= 3


def _swapped_subspaces(g, d=64, classes=5, shots=5, offset=0.3):
    """A union of 2-d subspaces through a common offset (norm about ``offset``), l2-normalised rows; the first
    shot of each class comes from the next class's subspace."""
    common = offset * torch.randn(d, generator=g, dtype=torch.float64) / math.sqrt(d)
    U = [torch.linalg.qr(torch.randn(d, 2, generator=g, dtype=torch.float64))[0] for _ in range(classes)]
    rows, labels = [], []
    for c in range(classes):
        for j in range(shots):
            src = (c + 1) % classes if j == 0 else c
            x = common + U[src] @ torch.randn(2, generator=g, dtype=torch.float64) \
                + 0.05 * torch.randn(d, generator=g, dtype=torch.float64) / math.sqrt(d)
            rows.append(x / x.norm())
            labels.append(c)
    return torch.stack(rows), torch.tensor(labels)


def test_the_relative_score_ranks_a_swapped_shot_first_on_a_union_of_subspaces():
    g = torch.Generator().manual_seed(0)
    hits = total = 0
    for _ in range(200):
        Z, labels = _swapped_subspaces(g)
        scores = anomaly_scores(Z, labels)
        for c in range(5):
            rows = torch.nonzero(labels == c).flatten()
            hits += int(rows[scores[rows].argmax()] == rows[0])
            total += 1
    assert hits / total >= 0.9


def test_a_swap_leaves_the_episodes_singular_values_unchanged():
    g = torch.Generator().manual_seed(3)
    Z, labels = _swapped_subspaces(g)
    clean_order = Z[torch.randperm(len(Z), generator=g)]     # a swap only re-files rows: a row permutation
    assert torch.allclose(torch.linalg.svdvals(Z), torch.linalg.svdvals(clean_order), atol=1e-10)


def test_an_admm_that_returns_zero_falls_back_to_the_rows_own_basis():
    g = torch.Generator().manual_seed(0)
    Z = torch.nn.functional.normalize(torch.randn(5, 16, generator=g, dtype=torch.float64), dim=1)
    b = class_bases(Z, torch.zeros(5, dtype=torch.long), lam=0.05)      # a small lam puts every row into E
    assert b.fallback == [True] and b.ranks == [1]
    assert torch.allclose(b.bases[0].abs(), torch.linalg.svd(Z, full_matrices=False)[2][:1].abs())


def test_flag_rows_caps_per_class_and_skips_single_shots():
    scores = torch.tensor([0.9, 0.8, 0.7, -0.1, 0.0, 0.5, 0.3])
    labels = torch.tensor([0, 0, 0, 0, 0, 1, 2])
    flagged = flag_rows(scores, labels)
    assert flagged.tolist() == [True, True, False, False, False, False, False]   # cap floor(4 / 2) = 2; K = 1: none


def test_on_digits_the_relative_score_beats_a_rank_free_detector():
    from sklearn.datasets import load_digits
    from sklearn.metrics import roc_auc_score

    X, y = load_digits(return_X_y=True)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    rng = np.random.default_rng(0)
    scores, rank_free, truth = [], [], []
    for _ in range(60):
        classes = rng.permutation([5, 6, 7, 8, 9])
        rows, labels = [], []
        for ci, c in enumerate(classes):
            clean = rng.choice(np.flatnonzero(y == c), 3, replace=False)
            swapped = [rng.choice(np.flatnonzero(y == rng.choice([o for o in classes if o != c]))) for _ in range(2)]
            rows += [X[i] for i in (*clean, *swapped)]
            labels += [ci] * 5
            truth += [0, 0, 0, 1, 1]
        Z, lab = torch.tensor(np.array(rows)), torch.tensor(labels)
        scores += anomaly_scores(Z, lab).tolist()
        for i in range(len(lab)):
            others = (lab == lab[i]).clone()
            others[i] = False
            rank_free.append(1 - float(torch.nn.functional.cosine_similarity(Z[i], Z[others].mean(0), dim=0)))
    assert roc_auc_score(truth, scores) > roc_auc_score(truth, rank_free) + 0.05


# ----------------------------------------------------------------------------------------------
# episodes and the noise protocol
# ----------------------------------------------------------------------------------------------
def _digit_labels():
    from sklearn.datasets import load_digits

    return load_digits().target


@pytest.mark.parametrize("kind", ["sym_swap", "pair_swap", "outlier"])
def test_the_noise_protocol_counts_keeps_the_plurality_and_is_deterministic(kind):
    from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise

    y = _digit_labels()
    base = np.flatnonzero(np.isin(y, [0, 1, 2, 3, 4]))
    runs = []
    for _ in range(2):
        sampler = EpisodeSampler(y, 5, 5, 15, seed=3, classes=[5, 6, 7, 8, 9])
        noise = SupportNoise(kind, 0.4, seed=4)
        runs.append([noise(sampler.sample(), y, outliers=base) for _ in range(30)])
    for a, b in zip(*runs):
        assert np.array_equal(a.support, b.support) and np.array_equal(a.mask, b.mask)
    for ep in runs[0]:
        assert ep.mask.sum(1).tolist() == [2] * 5                             # round(0.4 * 5) per class
        assert np.array_equal(ep.support_labels, np.repeat(np.arange(5)[:, None], 5, 1))
        used = set(ep.query.ravel().tolist())
        assert not used & set(ep.support.ravel().tolist())                    # swapped rows come from spares
        true = y[ep.support]
        for i, c in enumerate(ep.classes):
            assert (true[i] == c).sum() == 3
            wrong = true[i][true[i] != c]
            assert len(wrong) == 2 and np.bincount(wrong).max() < 3               # the clean label keeps a plurality
            if kind == "outlier":
                assert np.isin(true[i][ep.mask[i]], [0, 1, 2, 3, 4]).all() and (ep.true_labels[i][ep.mask[i]] == -1).all()
        if kind == "pair_swap":
            sources = [int(ep.true_labels[i][ep.mask[i]][0]) for i in range(5)]
            assert sorted(sources) == list(range(5)) and all(s != i for i, s in enumerate(sources))  # a derangement


def test_zero_noise_changes_nothing_and_bad_sizes_are_refused():
    from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise

    y = _digit_labels()
    ep = EpisodeSampler(y, 5, 5, 15, seed=0).sample()
    clean = SupportNoise("sym_swap", 0.0, seed=0)(ep, y)
    assert np.array_equal(clean.support, ep.support) and not clean.mask.any()
    with pytest.raises(ValueError, match="n_shot \\+ n_query"):
        EpisodeSampler(y, 5, 5, 200)
    with pytest.raises(ValueError, match="n_way"):
        EpisodeSampler(y, 11, 5, 15)


# ----------------------------------------------------------------------------------------------
# the prior and the repair
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits_prior():
    from sklearn.datasets import load_digits

    from icml26.training.crdproto import fit_feature_prior

    X, y = load_digits(return_X_y=True)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    base = np.isin(y, [0, 1, 2, 3, 4])
    prior, fit = fit_feature_prior(X[base], y[base], steps=300, seed=0)
    return X, y, prior


def test_repairs_are_generated_not_copied_keep_k_rows_and_need_no_mask(digits_prior):
    import inspect

    from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise
    from icml26.models.crdproto import RankGuidedPrototypes

    X, y, prior = digits_prior
    assert list(inspect.signature(RankGuidedPrototypes.repair).parameters) == ["self", "features", "labels"]
    ep = SupportNoise("sym_swap", 0.4, seed=1)(EpisodeSampler(y, 5, 5, 15, seed=1, classes=[5, 6, 7, 8, 9]).sample(), y)
    S = torch.as_tensor(X[ep.support.reshape(-1)], dtype=torch.float32)
    labels = torch.as_tensor(ep.support_labels.reshape(-1))
    a = RankGuidedPrototypes(prior, seed=0).repair(S, labels)
    b = RankGuidedPrototypes(prior, seed=1).repair(S, labels)
    assert a.features.shape == S.shape and a.flagged.any()
    rows = torch.nonzero(a.flagged).flatten()
    assert torch.cdist(a.features[rows], S[~a.flagged]).min() > 0              # not a copy of a clean row
    assert not torch.allclose(a.features[rows], b.features[rows])               # differs across seeds
    assert torch.equal(a.features[~a.flagged], S[~a.flagged])


def test_guidance_pulls_replacements_toward_the_clean_subspace(digits_prior):
    from icml26.models.crdproto import RankGuidedPrototypes

    X, y, prior = digits_prior
    rng = np.random.default_rng(0)
    rows = np.concatenate([rng.choice(np.flatnonzero(y == c), 5, replace=False) for c in (5, 6)])
    rows[0], rows[5] = rows[5], rows[0]                                        # one swap each way
    S = torch.as_tensor(X[rows], dtype=torch.float32)
    labels = torch.tensor([0] * 5 + [1] * 5)
    guided = RankGuidedPrototypes(prior, guidance_scale=100.0, seed=0).repair(S, labels)
    free = RankGuidedPrototypes(prior, guidance_scale=0.0, seed=0).repair(S, labels)
    assert torch.equal(guided.flagged, free.flagged)
    for r in torch.nonzero(guided.flagged).flatten().tolist():
        clean = S[(labels == labels[r]) & ~guided.flagged]
        mu = clean.mean(0)
        assert torch.dist(guided.features[r], mu) < torch.dist(free.features[r], mu)


def test_the_baselines_are_protonet_median_and_oracle_means():
    from icml26.models.crdproto import MeanPrototypes, MedianPrototypes, OraclePrototypes

    S = torch.tensor([[0.0, 0.0], [1.0, 0.0], [9.0, 9.0], [5.0, 5.0], [5.0, 6.0], [5.0, 7.0]])
    labels = torch.tensor([0, 0, 0, 1, 1, 1])
    mean, median, oracle = MeanPrototypes(), MedianPrototypes(), OraclePrototypes()
    mean.process_support_set(S, labels)
    median.process_support_set(S, labels)
    oracle.process_support_set(S, labels, torch.tensor([False, False, True, False, False, False]))
    assert torch.allclose(mean.prototypes[0], torch.tensor([10 / 3, 3.0]))
    assert torch.allclose(median.prototypes[0], torch.tensor([1.0, 0.0]))
    assert torch.allclose(oracle.prototypes[0], torch.tensor([0.5, 0.0]))
    logits = mean(torch.tensor([[5.0, 6.0]]))
    assert logits.argmax(1).item() == 1 and torch.allclose(logits[0, 1], torch.tensor(0.0))


def test_the_quick_experiment_makes_its_claims(tmp_path):
    import dataclasses

    from icml26.eval.experiments.crdproto import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], episodes=40, prior_steps=300, select_episodes=4, scales=(100.0,),
                            lams=(None,), conditions=(("sym_swap", 0.4),))
    result = run_experiment(RunConfig(out_dir=tmp_path), s)
    assert len(result.claims) == 4
    m = result.metrics
    assert m["CRD_minus_mean"]["mean"] > 0                                       # claim 1's direction
    assert m["auroc"]["relative"] > m["auroc"]["rank_free"]                     # detection, even at this size
    assert m["guidance"]["guided_closer"] > m["guidance"]["flagged_rows"] / 2
    assert set(result.figures) == {"accuracy", "guidance"}
