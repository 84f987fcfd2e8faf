"""Bad input to CRDProto's low-rank pieces: each probe is one wrong value in an otherwise valid call, and must be
refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise
from icml26.models.crdproto import (
    FeatureDiffusionConfig,
    MeanPrototypes,
    RankGuidedPrototypes,
    anomaly_scores,
    class_bases,
    flag_rows,
    outlier_pursuit,
    soft_rank,
    svt,
)
from icml26.training.crdproto import fit_feature_prior

Z = torch.nn.functional.normalize(torch.randn(10, 8, generator=torch.Generator().manual_seed(0)), dim=1)
LABELS = torch.arange(10) // 5
Y = np.repeat(np.arange(6), 25)
EPISODE = EpisodeSampler(Y, 3, 5, 5, seed=0).sample()

PROBES = [
    Probe("svt-M-1d", lambda: svt(torch.ones(4), 1.0), "M"),
    Probe("svt-M-nan", lambda: svt(torch.full((3, 3), float("nan")), 1.0), "M"),
    Probe("outlier_pursuit-lam-zero", lambda: outlier_pursuit(Z, 0.0), "lam"),
    Probe("outlier_pursuit-n_iter-zero", lambda: outlier_pursuit(Z, 0.5, n_iter=0), "n_iter"),
    Probe("outlier_pursuit-rho-below-one", lambda: outlier_pursuit(Z, 0.5, rho=0.5), "rho"),
    Probe("outlier_pursuit-Z-integer", lambda: outlier_pursuit(torch.ones(3, 3, dtype=torch.long), 0.5), "Z"),
    Probe("soft_rank-tau-one", lambda: soft_rank(Z, tau=1.0), "tau"),
    Probe("soft_rank-temperature-zero", lambda: soft_rank(Z, temperature=0.0), "temperature"),
    Probe("class_bases-labels-float", lambda: class_bases(Z, LABELS.float()), "labels"),
    Probe("class_bases-labels-other-length", lambda: class_bases(Z, LABELS[:5]), "labels"),
    Probe("anomaly_scores-kind-unknown", lambda: anomaly_scores(Z, LABELS, kind="volume"), "kind"),
    Probe("anomaly_scores-relative-one-class", lambda: anomaly_scores(Z, torch.zeros(10, dtype=torch.long)), "labels"),
    Probe("anomaly_scores-Z-3d", lambda: anomaly_scores(Z[None], LABELS), "Z"),
    Probe("flag_rows-scores-2d", lambda: flag_rows(torch.zeros(2, 5), LABELS), "scores"),
    Probe("flag_rows-labels-other-length", lambda: flag_rows(torch.zeros(10), LABELS[:3]), "labels"),
    Probe("EpisodeSampler-class-below-shots-plus-queries", lambda: EpisodeSampler(Y, 3, 5, 21), "labels"),
    Probe("EpisodeSampler-n_way-above-classes", lambda: EpisodeSampler(Y, 7, 5, 5), "n_way"),
    Probe("EpisodeSampler-classes-unknown", lambda: EpisodeSampler(Y, 2, 5, 5, classes=[0, 9]), "classes"),
    Probe("EpisodeSampler-labels-2d", lambda: EpisodeSampler(Y.reshape(6, 25), 2, 5, 5), "labels"),
    Probe("SupportNoise-fraction-one", lambda: SupportNoise("sym_swap", 1.0), "fraction"),
    Probe("SupportNoise-fraction-negative", lambda: SupportNoise("sym_swap", -0.1), "fraction"),
    Probe("SupportNoise-kind-unknown", lambda: SupportNoise("asym_swap", 0.2), "kind"),
    Probe("SupportNoise-outlier-without-pool", lambda: SupportNoise("outlier", 0.4)(EPISODE, Y), "outliers"),
    Probe("SupportNoise-outliers-from-episode-classes",
          lambda: SupportNoise("outlier", 0.4)(EPISODE, Y, outliers=np.flatnonzero(Y == EPISODE.classes[0])),
          "outliers"),
    Probe("SupportNoise-sym_swap-no-plurality", lambda: SupportNoise("sym_swap", 0.8)(EPISODE, Y), "fraction"),
    Probe("FeatureDiffusionConfig-beta_end-below-start", lambda: FeatureDiffusionConfig(beta_start=0.1, beta_end=0.01),
          "beta_end"),
    Probe("RankGuidedPrototypes-score-unknown", lambda: RankGuidedPrototypes(None, score="volume"), "score"),
    Probe("RankGuidedPrototypes-guidance_scale-negative", lambda: RankGuidedPrototypes(None, guidance_scale=-1.0),
          "guidance_scale"),
    Probe("RankGuidedPrototypes-t_start-zero", lambda: RankGuidedPrototypes(None, t_start=0.0), "t_start"),
    Probe("RankGuidedPrototypes-prior-wrong-type", lambda: RankGuidedPrototypes(torch.nn.Linear(2, 2)), "prior"),
    Probe("RankGuidedPrototypes.repair-features-nan",
          lambda: RankGuidedPrototypes(None).repair(torch.full((10, 8), float("nan")), LABELS), "features"),
    Probe("RankGuidedPrototypes.repair-labels-not-positions",
          lambda: RankGuidedPrototypes(None).repair(Z, LABELS + 3), "labels"),
    Probe("MeanPrototypes.forward-before-support", lambda: MeanPrototypes()(Z), "self"),
    Probe("fit_feature_prior-class-too-small",
          lambda: fit_feature_prior(Z.numpy(), np.arange(10), steps=1), "labels"),
    Probe("fit_feature_prior-config-other-width",
          lambda: fit_feature_prior(Z.numpy(), np.arange(10) // 5, FeatureDiffusionConfig(feature_dim=4), steps=1),
          "config"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
