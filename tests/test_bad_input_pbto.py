"""Bad input to the PBTO audit (the victim network, the learners, the streams, poisoning, triggers, defences, the
audit and the diagnostics): each probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks.pbto import (
    ActivationClusteringFilter,
    AnchoredTrigger,
    CILStream,
    PatchTrigger,
    PersistenceAudit,
    SpectralSignatureFilter,
    attack_success_rate,
    digits_streams,
    gram_anchor_loss,
    gram_matrix,
    grassmann_distance,
    linear_cka,
    pca_basis,
    poison_indices,
)
from icml26.models.pbto import SmallConvNet, SmallConvNetConfig
from icml26.training.pbto import CILConfig, ICaRL

NET = SmallConvNet(SmallConvNetConfig(num_classes=2))
X = torch.randn(10, 4)
IMAGES = torch.rand(6, 1, 8, 8)
LABELS = torch.tensor([0, 0, 0, 1, 1, 1])


def _stream():
    from icml26.eval.tasks.pbto import CILTask

    return CILStream([CILTask(IMAGES, LABELS, IMAGES, LABELS, (0, 1)), CILTask(IMAGES, LABELS + 2, IMAGES,
                                                                              LABELS + 2, (2, 3))], 0)


def _fit_three_classes_with_memory_two():
    ICaRL(CILConfig(memory_size=2, epochs=1)).fit_task(IMAGES, torch.tensor([0, 0, 1, 1, 2, 2]))


def _audit(**kw):
    args = {"learner_factory": lambda hook: ICaRL(epochs=1), "stream": _stream(), "trigger": PatchTrigger()}
    return PersistenceAudit(**{**args, **kw})

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
    # learners
    Probe("CILConfig-epochs-zero", lambda: CILConfig(epochs=0), "epochs"),
    Probe("CILConfig-memory_protocol-unknown", lambda: CILConfig(memory_protocol="growing"), "memory_protocol"),
    Probe("CILConfig-loss-unknown", lambda: CILConfig(loss="mse"), "loss"),
    Probe("CILConfig-inference-nme-without-memory", lambda: CILConfig(memory_size=0), "inference"),
    Probe("ICaRL.fit_task-memory_size-below-classes-seen", _fit_three_classes_with_memory_two, "memory_size"),
    Probe("ICaRL.fit_task-labels-skip-a-class", lambda: ICaRL(epochs=1).fit_task(IMAGES, LABELS + 1), "labels"),
    Probe("ICaRL.fit_task-labels-float", lambda: ICaRL(epochs=1).fit_task(IMAGES, LABELS.float()), "labels"),
    Probe("ICaRL.fit_task-images-integer", lambda: ICaRL(epochs=1).fit_task(IMAGES.long(), LABELS), "images"),
    Probe("ICaRL.predict-before-fit", lambda: ICaRL().predict(IMAGES), "self"),
    Probe("ICaRL-memory_hook-not-callable", lambda: ICaRL(memory_hook=3), "memory_hook"),
    # streams and poisoning
    Probe("digits_streams-tasks-six", lambda: digits_streams(tasks=6), "tasks"),
    Probe("digits_streams-victim_share-one", lambda: digits_streams(victim_share=1.0), "victim_share"),
    Probe("poison_indices-rate-one", lambda: poison_indices(LABELS, 0, 1.0), "rate"),
    Probe("poison_indices-rate-zero", lambda: poison_indices(LABELS, 0, 0.0), "rate"),
    Probe("poison_indices-target-not-in-task", lambda: poison_indices(LABELS, 5, 0.3), "target"),
    # triggers
    Probe("AnchoredTrigger-epsilon-zero", lambda: AnchoredTrigger(epsilon=0.0), "epsilon"),
    Probe("AnchoredTrigger-epsilon-above-one", lambda: AnchoredTrigger(epsilon=1.5), "epsilon"),
    Probe("AnchoredTrigger-anchor_layers-unknown", lambda: AnchoredTrigger(anchor_layers=("layer7",)), "layer1"),
    Probe("AnchoredTrigger-checkpoints-unknown", lambda: AnchoredTrigger(checkpoints="first"), "checkpoints"),
    Probe("AnchoredTrigger-anchor_scale-unknown", lambda: AnchoredTrigger(anchor_scale="log"), "anchor_scale"),
    Probe("AnchoredTrigger.preset-name-unknown", lambda: AnchoredTrigger.preset("sim_align"), "name"),
    Probe("AnchoredTrigger.stamp-unfitted", lambda: AnchoredTrigger().stamp(IMAGES), "self"),
    Probe("AnchoredTrigger.fit-target-not-in-proxy-task",
          lambda: AnchoredTrigger(steps=1, rounds=0).fit(lambda: ICaRL(epochs=1), _stream(), IMAGES, target=3),
          "target"),
    Probe("AnchoredTrigger.fit-proxy-not-a-stream",
          lambda: AnchoredTrigger().fit(lambda: ICaRL(epochs=1), [IMAGES], IMAGES), "proxy"),
    Probe("PatchTrigger-size-zero", lambda: PatchTrigger(size=0), "size"),
    Probe("attack_success_rate-labels-only-target",
          lambda: attack_success_rate(lambda x: x, IMAGES, torch.zeros(6, dtype=torch.long), PatchTrigger(), 0),
          "labels"),
    # defences and the audit
    Probe("SpectralSignatureFilter-eps_bound-zero", lambda: SpectralSignatureFilter(eps_bound=0.0), "eps_bound"),
    Probe("ActivationClusteringFilter-max_share-above-half", lambda: ActivationClusteringFilter(max_share=0.7),
          "max_share"),
    Probe("SpectralSignatureFilter.keep-features-1d", lambda: SpectralSignatureFilter().keep([1.0, 2.0]),
          "features"),
    Probe("PersistenceAudit-rate-one", lambda: _audit(rate=1.0), "rate"),
    Probe("PersistenceAudit-poison_task-without-target", lambda: _audit(poison_task=1), "poison_task"),
    Probe("PersistenceAudit-poison_task-past-the-stream", lambda: _audit(poison_task=2), "poison_task"),
    Probe("PersistenceAudit-trigger-without-stamp", lambda: _audit(trigger=0.2), "trigger"),
    Probe("PersistenceAudit-stream-a-list", lambda: _audit(stream=[]), "stream"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
