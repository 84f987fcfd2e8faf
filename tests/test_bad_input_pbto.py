"""Bad input to the PBTO audit's first pieces (the victim network and the diagnostics): each probe is one wrong value
in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks.pbto import gram_anchor_loss, gram_matrix, grassmann_distance, linear_cka, pca_basis
from icml26.models.pbto import SmallConvNet, SmallConvNetConfig

NET = SmallConvNet(SmallConvNetConfig(num_classes=2))
X = torch.randn(10, 4)

PROBES = [
    Probe("SmallConvNetConfig-channels-two", lambda: SmallConvNetConfig(channels=(8, 16)), "channels"),
    Probe("SmallConvNetConfig-pixel_std-zero", lambda: SmallConvNetConfig(pixel_std=0.0), "pixel_std"),
    Probe("SmallConvNet-pixel_values-integer", lambda: NET(torch.zeros(2, 8, 8, dtype=torch.long)), "pixel_values"),
    Probe("SmallConvNet-pixel_values-three-channels", lambda: NET(torch.zeros(2, 3, 8, 8)), "pixel_values"),
    Probe("SmallConvNet.forward_with_features-layers-unknown",
          lambda: NET.forward_with_features(torch.zeros(1, 8, 8), ("layer4",)), "layers"),
    Probe("SmallConvNet.add_classes-n-zero", lambda: NET.add_classes(0), "n"),
    Probe("SmallConvNet-labels-without-head",
          lambda: SmallConvNet(SmallConvNetConfig())(torch.zeros(1, 8, 8), labels=torch.zeros(1, dtype=torch.long)),
          "labels"),
    Probe("gram_matrix-activations-3d", lambda: gram_matrix(torch.zeros(2, 3, 4)), "activations"),
    Probe("gram_anchor_loss-reference-wrong-size",
          lambda: gram_anchor_loss(torch.zeros(2, 3, 4, 4), torch.zeros(4, 4)), "reference"),
    Probe("linear_cka-Y-other-rows", lambda: linear_cka(X, X[:5]), "Y"),
    Probe("linear_cka-X-constant", lambda: linear_cka(torch.ones(10, 4), X), "X, Y"),
    Probe("linear_cka-X-one-row", lambda: linear_cka(X[:1], X[:1]), "X"),
    Probe("pca_basis-variance-zero", lambda: pca_basis(X, 0.0), "variance"),
    Probe("grassmann_distance-B-other-dimension", lambda: grassmann_distance(torch.eye(4)[:, :2], torch.eye(3)), "B"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
