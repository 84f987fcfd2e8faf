"""Bad input to contrastive waterfilling (the solver and its data, the spectral CNN, the losses, the views and the
trainers): each probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks import waterfill as wf
from icml26.models.waterfill import SpectralCNNConfig, SpectralCNNModel
from icml26.training.waterfill import (
    AdditiveNoise,
    ContrastiveCollator,
    ContrastiveConfig,
    InfoNCELoss,
    RandomCropShift,
    SpectralContrastiveLoss,
    fit_contrastive,
    info_nce_loss,
    make_views,
    spectral_contrastive_loss,
)

N = 6
S = wf.inverse_power_spectrum(N)
MOM = wf.gaussian_moments(S, 0.05)
C = MOM.classes.size
MODEL = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=3, embed_dim=2))
Z = torch.randn(4, 3)
ASYMMETRIC = S.copy()
ASYMMETRIC[1, 2] += 1.0
NEGATIVE = S.copy()
NEGATIVE[1, 1] = NEGATIVE[-1, -1] = -1.0


def _cfg(**kw):
    return SpectralCNNConfig(**{"image_size": N, **kw})


def _fit(**kw):
    args = {"model": SpectralCNNModel(_cfg(num_filters=2, embed_dim=2)), "steps": 2,
            "sample_images": lambda b, rng: wf.stationary_images(N, S, b, rng), "transforms": [AdditiveNoise(0.1)]}
    args.update(kw)
    model, sample, steps = args.pop("model"), args.pop("sample_images"), args.pop("steps")
    return fit_contrastive(model, sample, steps, **args)


def _contrastive_config(**kw):
    return ContrastiveConfig(**{"output_dir": "unused", "report_to": "none", "use_cpu": True, **kw})


PROBES = [
    # spectra, classes and images
    Probe("frequency_classes-n-one", lambda: wf.frequency_classes(1), "n"),
    Probe("inverse_power_spectrum-offset-zero", lambda: wf.inverse_power_spectrum(N, offset=0.0), "offset"),
    Probe("inverse_power_spectrum-dc-negative", lambda: wf.inverse_power_spectrum(N, dc=-1.0), "dc"),
    Probe("gaussian_moments-S-not-square", lambda: wf.gaussian_moments(np.ones((4, 5)), 0.1), "S"),
    Probe("gaussian_moments-S-negative", lambda: wf.gaussian_moments(NEGATIVE, 0.1), "S"),
    Probe("gaussian_moments-S-nan", lambda: wf.gaussian_moments(np.full((4, 4), np.nan), 0.1), "S"),
    Probe("gaussian_moments-S-asymmetric", lambda: wf.gaussian_moments(ASYMMETRIC, 0.1), "S"),
    Probe("gaussian_moments-sigma2-negative", lambda: wf.gaussian_moments(S, -0.1), "sigma2"),
    Probe("gaussian_moments-sigma2-zero-with-zero-dc", lambda: wf.gaussian_moments(S, 0.0), "sigma2"),
    Probe("monte_carlo_moments-view_pairs-three-views", lambda: wf.monte_carlo_moments(np.zeros((5, 3, N, N))),
          "view_pairs"),
    Probe("monte_carlo_moments-view_pairs-one-pair", lambda: wf.monte_carlo_moments(np.zeros((1, 2, N, N))),
          "view_pairs"),
    Probe("class_powers-images-not-square", lambda: wf.class_powers(np.zeros((2, 4, 5))), "images"),
    Probe("class_powers-images-inf", lambda: wf.class_powers(np.full((2, 4, 4), np.inf)), "images"),
    Probe("class_powers-classes-other-size", lambda: wf.class_powers(np.zeros((2, 4, 4)), wf.frequency_classes(5)),
          "classes"),
    Probe("stationary_images-S-wrong-size", lambda: wf.stationary_images(8, S, 3, 0), "S"),
    Probe("stationary_images-count-zero", lambda: wf.stationary_images(N, S, 0, 0), "count"),
    Probe("natural_view_pairs-max_shift-negative", lambda: wf.natural_view_pairs(N, 3, 0.1, 0, max_shift=-1),
          "max_shift"),
    Probe("natural_view_pairs-power-zero", lambda: wf.natural_view_pairs(N, 3, 0.1, 0, power=0.0), "power"),
    Probe("natural_view_pairs-photos-too-small",
          lambda: wf.natural_view_pairs(N, 3, 0.1, 0, photos=[np.zeros((7, 7))]), "photos"),
    Probe("image_sets-names-unknown", lambda: wf.image_sets(["cifar10"]), "names"),
    Probe("texture_patches-half-unknown", lambda: wf.texture_patches(8, 2, 0, half="left"), "half"),
    Probe("texture_patches-per_class-zero", lambda: wf.texture_patches(8, 0, 0), "per_class"),
    # the solver
    Probe("waterfill-d-zero", lambda: wf.waterfill(MOM.Q_plus, MOM.R, 0), "d"),
    Probe("waterfill-d-above-classes", lambda: wf.waterfill(MOM.Q_plus, MOM.R, C + 1), "d"),
    Probe("waterfill-level-negative", lambda: wf.waterfill(MOM.Q_plus, MOM.R, 2, level=-0.1), "level"),
    Probe("waterfill-R-other-shape", lambda: wf.waterfill(MOM.Q_plus, np.eye(3), 2), "R"),
    Probe("waterfill-R-singular", lambda: wf.waterfill(MOM.Q_plus, np.zeros((C, C)), 2), "R"),
    Probe("waterfill-Q_plus-not-square", lambda: wf.waterfill(np.ones((3, 4)), np.eye(3), 1), "Q_plus"),
    Probe("population_loss-M-other-shape", lambda: wf.population_loss(np.eye(3), MOM.Q_plus, MOM.R), "M"),
    Probe("best_head-U-negative", lambda: wf.best_head(-np.ones((2, C)), MOM.Q_plus, MOM.R, 2), "U"),
    Probe("best_head-U-wrong-classes", lambda: wf.best_head(np.ones((2, C + 1)), MOM.Q_plus, MOM.R, 2), "U"),
    Probe("best_head_loss-d-zero", lambda: wf.best_head_loss(np.ones((2, C)), MOM.Q_plus, MOM.R, 0), "d"),
    Probe("class_weights-M-zero", lambda: wf.class_weights(np.zeros((C, C)), MOM.R), "M"),
    Probe("shell_weights-classes-other-size", lambda: wf.shell_weights(np.eye(C), MOM.R, wf.frequency_classes(5)),
          "classes"),
    # the model
    Probe("SpectralCNNConfig-image_size-one", lambda: _cfg(image_size=1), "image_size"),
    Probe("SpectralCNNConfig-num_filters-zero", lambda: _cfg(num_filters=0), "num_filters"),
    Probe("SpectralCNNConfig-embed_dim-float", lambda: _cfg(embed_dim=2.0), "embed_dim"),
    Probe("SpectralCNNConfig-nonlinearity-tanh", lambda: _cfg(nonlinearity="tanh"), "nonlinearity"),
    Probe("SpectralCNNConfig-path-parseval-with-relu", lambda: _cfg(nonlinearity="relu", path="parseval"), "path"),
    Probe("SpectralCNNConfig-loss-unknown", lambda: _cfg(loss="triplet"), "loss"),
    Probe("SpectralCNNConfig-mu-zero", lambda: _cfg(mu=0.0), "mu"),
    Probe("SpectralCNNConfig-info_nce_temperature-negative", lambda: _cfg(info_nce_temperature=-1.0),
          "info_nce_temperature"),
    Probe("SpectralCNNConfig-filter_std-nan", lambda: _cfg(filter_std=float("nan")), "filter_std"),
    Probe("SpectralCNNModel-pixel_values-wrong-size", lambda: MODEL(pixel_values=torch.zeros(2, N + 1, N + 1)),
          "pixel_values"),
    Probe("SpectralCNNModel-pixel_values-not-square", lambda: MODEL(pixel_values=torch.zeros(2, N, N - 1)),
          "pixel_values"),
    Probe("SpectralCNNModel-pixel_values-integer", lambda: MODEL(pixel_values=torch.zeros(2, N, N, dtype=torch.long)),
          "pixel_values"),
    Probe("SpectralCNNModel-pixel_values-three-channels", lambda: MODEL(pixel_values=torch.zeros(2, 3, N, N)),
          "pixel_values"),
    Probe("SpectralCNNModel-pixel_values_2-other-batch",
          lambda: MODEL(pixel_values=torch.zeros(2, N, N), pixel_values_2=torch.zeros(3, N, N)), "pixel_values_2"),
    Probe("SpectralCNNModel.from_solution-solution-without-classes",
          lambda: SpectralCNNModel.from_solution(wf.waterfill(MOM.Q_plus, MOM.R, 2)), "solution"),
    # losses and views
    Probe("spectral_contrastive_loss-z1-one-row", lambda: spectral_contrastive_loss(Z[:1], Z[:1]), "z1"),
    Probe("spectral_contrastive_loss-z2-other-shape", lambda: spectral_contrastive_loss(Z, Z[:3]), "z2"),
    Probe("spectral_contrastive_loss-mu-negative", lambda: spectral_contrastive_loss(Z, Z, mu=-1.0), "mu"),
    Probe("info_nce_loss-temperature-zero", lambda: info_nce_loss(Z, Z, temperature=0.0), "temperature"),
    Probe("info_nce_loss-z1-vector", lambda: info_nce_loss(Z[0], Z[0]), "z1"),
    Probe("SpectralContrastiveLoss-mu-inf", lambda: SpectralContrastiveLoss(mu=float("inf")), "mu"),
    Probe("InfoNCELoss-temperature-string", lambda: InfoNCELoss(temperature="0.5"), "temperature"),
    Probe("AdditiveNoise-sigma2-negative", lambda: AdditiveNoise(-0.1), "sigma2"),
    Probe("AdditiveNoise-images-4d", lambda: AdditiveNoise(0.1)(torch.zeros(2, 1, N, N)), "images"),
    Probe("RandomCropShift-max_shift-zero", lambda: RandomCropShift(0), "max_shift"),
    Probe("RandomCropShift-images-too-small", lambda: RandomCropShift(3)(torch.zeros(2, 6, 6)), "images"),
    Probe("make_views-images-integer", lambda: make_views(torch.zeros(2, N, N, dtype=torch.long), []), "images"),
    Probe("ContrastiveCollator-rows-missing-pixel_values", lambda: ContrastiveCollator([])([{"image": [[0.0]]}]), "rows"),
    Probe("ContrastiveCollator-rows-mixed-sizes",
          lambda: ContrastiveCollator([])([{"pixel_values": np.zeros((4, 4))}, {"pixel_values": np.zeros((5, 5))}]),
          "rows"),
    Probe("ContrastiveCollator-seed-negative", lambda: ContrastiveCollator([], seed=-1), "seed"),
    # the trainers
    Probe("ContrastiveConfig-contrastive_loss-unknown", lambda: _contrastive_config(contrastive_loss="byol"),
          "contrastive_loss"),
    Probe("ContrastiveConfig-contrastive_noise_sigma2-negative",
          lambda: _contrastive_config(contrastive_noise_sigma2=-1.0), "contrastive_noise_sigma2"),
    Probe("ContrastiveConfig-contrastive_shift-unknown", lambda: _contrastive_config(contrastive_shift="rotate"),
          "contrastive_shift"),
    Probe("ContrastiveConfig-contrastive_max_shift-zero", lambda: _contrastive_config(contrastive_max_shift=0),
          "contrastive_max_shift"),
    Probe("fit_contrastive-steps-zero", lambda: _fit(steps=0), "steps"),
    Probe("fit_contrastive-batch_size-one", lambda: _fit(batch_size=1), "batch_size"),
    Probe("fit_contrastive-lr-zero", lambda: _fit(lr=0.0), "lr"),
    Probe("fit_contrastive-weight_decay-negative", lambda: _fit(weight_decay=-1.0), "weight_decay"),
    Probe("fit_contrastive-seed-negative", lambda: _fit(seed=-1), "seed"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
