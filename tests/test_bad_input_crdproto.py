"""Bad input to CRDProto's low-rank pieces: each probe is one wrong value in an otherwise valid call, and must be
refused clearly."""

from __future__ import annotations

import pytest
import torch
from probes import Probe, check, ids

from icml26.models.crdproto import anomaly_scores, class_bases, flag_rows, outlier_pursuit, soft_rank, svt

Z = torch.nn.functional.normalize(torch.randn(10, 8, generator=torch.Generator().manual_seed(0)), dim=1)
LABELS = torch.arange(10) // 5

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
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
