"""Bad input to TIED's library API (groups, the image action, energies, the sampler and its config, the
baselines, the canonicaliser, the digit classifier and its training, the digits task): each probe is one
wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from probes import Probe, check, ids
from sklearn.decomposition import PCA

from icml26.eval.tasks import tied as task
from icml26.models.tied import baselines, classifier, energies, groups, sampler
from icml26.models.tied.canonicalizer import TIEDCanonicalizer
from icml26.training.tied import train_classifier

SE2 = groups.SE2()
X = torch.zeros(2, 1, 8, 8)
G = SE2.identity(2)
ENERGY = energies.BoundaryPenalty()
SAMPLER = sampler.TIEDSampler(SE2, ENERGY, sampler.TIEDConfig(steps=2, mc_paths=1))
DIGITS_X = torch.zeros(4, 1, 8, 8)
DIGITS_Y = torch.zeros(4, dtype=torch.int64)


def _pca(**kwargs):
    return PCA(n_components=2, **kwargs).fit(np.random.default_rng(0).normal(size=(20, 64)))


def _ppca(**changes):
    args = {"mean": np.zeros(4), "components": np.eye(2, 4), "variances": np.ones(2), "noise_variance": 0.1}
    return energies.PPCAEnergy(**{**args, **changes})


PROBES = [
    # groups and the image action
    Probe("SO-n-one", lambda: groups.SO(1), "n"),
    Probe("SE2-scales-negative", lambda: groups.SE2(scales=(0.6, -0.15, 0.15)), "scales"),
    Probe("ImageHomography-scales-wrong-count", lambda: groups.ImageHomography(scales=(1.0, 1.0)), "scales"),
    Probe("MatrixLieGroup-basis-not-closed", lambda: groups.MatrixLieGroup(
        torch.tensor([[[0.0, 1.0], [0.0, 0.0]], [[0.0, 0.0], [1.0, 0.0]]])), "basis"),
    Probe("SE2.exp-coefficients-wrong-size", lambda: SE2.exp(torch.zeros(2, 4)), "c"),
    Probe("SE2.random_coeff-std-negative", lambda: SE2.random_coeff(3, std=-1.0), "std"),
    Probe("act-x-three-dims", lambda: groups.act(G, torch.zeros(2, 8, 8)), "x"),
    Probe("act-g-batch-mismatch", lambda: groups.act(SE2.identity(3), X), "g"),
    Probe("image_grid-height-zero", lambda: groups.image_grid(0, 8), "height"),
    # energies
    Probe("PPCAEnergy-temperature-nan", lambda: _ppca(temperature=float("nan")), "temperature"),
    Probe("PPCAEnergy-noise_variance-zero", lambda: _ppca(noise_variance=0.0), "noise_variance"),
    Probe("PPCAEnergy-components-wrong-width", lambda: _ppca(components=np.eye(2, 5)), "components"),
    Probe("PPCAEnergy.from_sklearn-unfitted", lambda: energies.PPCAEnergy.from_sklearn(PCA(2)), "pca"),
    Probe("PPCAEnergy.from_sklearn-whitened", lambda: energies.PPCAEnergy.from_sklearn(_pca(whiten=True)), "pca"),
    Probe("PPCAEnergy-x-wrong-size", lambda: _ppca()(torch.zeros(2, 5)), "x"),
    Probe("ClassifierFreeEnergy-temperature-zero",
          lambda: energies.ClassifierFreeEnergy(classifier.DigitsCNN(8), temperature=0.0), "temperature"),
    Probe("ClassifierFreeEnergy-model-not-callable", lambda: energies.ClassifierFreeEnergy("resnet"), "model"),
    Probe("BoundaryPenalty-weight-negative", lambda: energies.BoundaryPenalty(-1.0), "weight"),
    Probe("evaluate_energy-wrong-output-shape",
          lambda: energies.evaluate_energy(lambda x: torch.zeros(3), X), "energy"),
    # the sampler
    Probe("TIEDConfig-steps-zero", lambda: sampler.TIEDConfig(steps=0), "steps"),
    Probe("TIEDConfig-gamma_min-above-gamma_max", lambda: sampler.TIEDConfig(gamma_min=2.0, gamma_max=1.0),
          "gamma_min"),
    Probe("TIEDConfig-dtype-float16", lambda: sampler.TIEDConfig(dtype="float16"), "dtype"),
    Probe("TIEDConfig-seed-negative", lambda: sampler.TIEDConfig(seed=-1), "seed"),
    Probe("TIEDConfig-cache_paths-string", lambda: sampler.TIEDConfig(cache_paths="no"), "cache_paths"),
    Probe("TIEDSampler-group-string", lambda: sampler.TIEDSampler("SE2", ENERGY), "group"),
    Probe("TIEDSampler-config-dict", lambda: sampler.TIEDSampler(SE2, ENERGY, {"steps": 2}), "config"),
    Probe("TIEDSampler.sample-x_tilde-three-dims", lambda: SAMPLER.sample(torch.zeros(2, 8, 8)), "x_tilde"),
    Probe("TIEDSampler.sample-SO4-group", lambda: sampler.TIEDSampler(groups.SO(4), ENERGY).sample(X), "group"),
    Probe("TIEDSampler.sample_density-n-zero",
          lambda: SAMPLER.sample_density(lambda g: g.sum((-1, -2)), 0), "n"),
    Probe("trivialized_score-g-wrong-size", lambda: sampler.trivialized_score(
        SE2, lambda h: h.sum((-1, -2)), torch.eye(2).expand(2, 2, 2), SE2.identity(3), torch.zeros(3)), "g"),
    # baselines and the canonicaliser
    Probe("RandomBestOfN-draws-zero", lambda: baselines.RandomBestOfN(SE2, ENERGY, draws=0, std=1.0), "draws"),
    Probe("LieLAC-lr-negative", lambda: baselines.LieLAC(SE2, ENERGY, lr=-0.1), "lr"),
    Probe("KineticLangevin-friction-zero", lambda: baselines.KineticLangevin(SE2, ENERGY, friction=0.0), "friction"),
    Probe("FoCal-n_iter-negative", lambda: baselines.FoCal(SE2, ENERGY, n_iter=-1), "n_iter"),
    Probe("LieLAC-hypotheses-zero", lambda: baselines.LieLAC(SE2, ENERGY, hypotheses=0), "hypotheses"),
    Probe("TIEDCanonicalizer-sampler-config", lambda: TIEDCanonicalizer(classifier.DigitsCNN(8),
                                                                        sampler.TIEDConfig()), "sampler"),
    # the classifier, its training and the digits task
    Probe("DigitsCNN-size-too-small", lambda: classifier.DigitsCNN(3), "size"),
    Probe("train_classifier-epochs-zero", lambda: train_classifier(DIGITS_X, DIGITS_Y, epochs=0), "epochs"),
    Probe("train_classifier-labels-out-of-range",
          lambda: train_classifier(DIGITS_X, DIGITS_Y + 10, epochs=1), "y"),
    Probe("train_classifier-x-three-dims", lambda: train_classifier(DIGITS_X[:, 0], DIGITS_Y, epochs=1), "x"),
    Probe("load_digit_images-n_train-all", lambda: task.load_digit_images(n_train=1797), "n_train"),
    Probe("load_digit_images-size-two", lambda: task.load_digit_images(size=2), "size"),
    Probe("random_transforms-kind-unknown", lambda: task.random_transforms("rotation", 4, 0), "kind"),
    Probe("random_transforms-n-zero", lambda: task.random_transforms("se2", 0, 0), "n"),
    Probe("fit_ppca-n_components-zero", lambda: task.fit_ppca(DIGITS_X, n_components=0), "n_components"),
    Probe("accuracy-labels-wrong-length", lambda: task.accuracy(classifier.DigitsCNN(8), DIGITS_X, DIGITS_Y[:3]), "y"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
