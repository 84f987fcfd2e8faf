"""PBTO persistence audit, first pieces: the victim network (expandable head, features by layer) and the structural
diagnostics (Gram anchoring, linear CKA, Grassmann distance) against their closed forms."""

from __future__ import annotations

import math

import pytest
import torch

from icml26.eval.tasks.pbto import gram_anchor_loss, gram_matrix, grassmann_distance, linear_cka, pca_basis
from icml26.models.pbto import SmallConvNet, SmallConvNetConfig


def _net(classes=2, seed=0):
    torch.manual_seed(seed)
    return SmallConvNet(SmallConvNetConfig(num_classes=classes))


def test_the_head_grows_and_keeps_the_old_rows(tmp_path):
    net = _net().eval()
    x = torch.rand(5, 8, 8)
    before = net(x).logits
    net.add_classes(3)
    after = net(x).logits
    assert after.shape == (5, 5) and net.config.num_classes == 5
    assert torch.allclose(after[:, :2], before)
    net.save_pretrained(tmp_path)
    again = SmallConvNet.from_pretrained(tmp_path).eval()
    assert torch.allclose(again(x).logits, after)


def test_features_by_layer_and_the_seeded_init():
    net = _net()
    logits, acts = net.forward_with_features(torch.rand(4, 1, 8, 8), ("layer1", "layer3", "pooled"))
    assert acts["layer1"].shape == (4, 16, 8, 8) and acts["layer3"].shape == (4, 64, 2, 2)
    assert acts["pooled"].shape == (4, 64) and logits.shape == (4, 2)
    assert all(torch.equal(a, b) for a, b in zip(_net(seed=3).parameters(), _net(seed=3).parameters()))
    with pytest.raises(ValueError, match="layers"):
        net.forward_with_features(torch.rand(1, 8, 8), ("conv9",))


def test_the_normalisation_is_inside_the_model():
    net = _net().eval()
    x = torch.rand(3, 8, 8)
    shifted = SmallConvNet(SmallConvNetConfig(num_classes=2, pixel_mean=0.0, pixel_std=1.0)).eval()
    shifted.load_state_dict(net.state_dict())
    assert torch.allclose(shifted((x - 0.5) / 0.5).logits, net(x).logits, atol=1e-6)


def test_the_gram_is_symmetric_psd_and_normalised():
    a = torch.randn(3, 4, 5, 6, dtype=torch.float64)
    G = gram_matrix(a)
    assert G.shape == (3, 4, 4) and torch.allclose(G, G.transpose(1, 2))
    assert (torch.linalg.eigvalsh(G) > -1e-12).all()
    assert torch.allclose(G[0], a[0].reshape(4, 30) @ a[0].reshape(4, 30).T / 120)
    assert gram_anchor_loss(a[:1], gram_matrix(a[:1]).mean(0)).item() == 0.0
    assert gram_anchor_loss(a[:1], gram_matrix(a[1:2])[0]).item() > 0


def test_linear_cka_is_one_on_itself_and_invariant_to_rotation_and_scale():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(100, 10, generator=g, dtype=torch.float64)
    Q, _ = torch.linalg.qr(torch.randn(10, 10, generator=g, dtype=torch.float64))
    assert linear_cka(X, X) == pytest.approx(1.0)
    assert linear_cka(X, 3.0 * X @ Q) == pytest.approx(1.0)
    assert linear_cka(X, torch.randn(100, 10, generator=g, dtype=torch.float64)) < 0.3


def test_grassmann_distance_is_zero_on_equal_and_one_on_orthogonal_subspaces():
    Q, _ = torch.linalg.qr(torch.randn(6, 6, dtype=torch.float64))
    assert grassmann_distance(Q[:, :2], Q[:, :2] @ torch.tensor([[0.0, 1.0], [1.0, 0.0]], dtype=torch.float64)) \
        == pytest.approx(0.0, abs=1e-6)
    assert grassmann_distance(Q[:, :2], Q[:, 2:4]) == pytest.approx(1.0)
    half = (Q[:, 0] + Q[:, 2]) / math.sqrt(2)                       # 45 degrees from Q[:, 0]
    assert grassmann_distance(Q[:, :1], half[:, None]) == pytest.approx(0.5)
    X = torch.randn(200, 2, dtype=torch.float64) @ Q[:, :2].T       # a 2-d cloud in 6-d
    assert pca_basis(X, 0.9).shape[1] <= 2 and grassmann_distance(pca_basis(X, 0.999), Q[:, :2]) < 1e-6
