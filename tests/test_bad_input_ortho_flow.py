"""Bad input to orthogonal-Jacobian flows (the config and model, the penalties, the loop, the data and the
metrics): each probe is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks import ortho_flow as tasks
from icml26.models.ortho_flow import OrthoFlowConfig, OrthoFlowModel
from icml26.training.ortho_flow import c_ima, cosine_offdiag, fit_ortho_flow, hutchinson_offdiag, offdiag_frobenius

MODEL = OrthoFlowModel(OrthoFlowConfig(dim=2, num_couplings=2, hidden=4))
Z = np.random.default_rng(0).normal(size=(20, 2))


def _cfg(**kw):
    return OrthoFlowConfig(**{"dim": 2, **kw})


PROBES = [
    Probe("OrthoFlowConfig-dim-one", lambda: _cfg(dim=1), "dim"),
    Probe("OrthoFlowConfig-lambda_orth-negative", lambda: _cfg(lambda_orth=-1.0), "lambda_orth"),
    Probe("OrthoFlowConfig-penalty-unknown", lambda: _cfg(penalty="l1"), "penalty"),
    Probe("OrthoFlowConfig-base-unknown", lambda: _cfg(base="laplace"), "base"),
    Probe("OrthoFlowConfig-jacobian-unknown", lambda: _cfg(jacobian="reverse"), "jacobian"),
    Probe("OrthoFlowConfig-n_probes-zero", lambda: _cfg(n_probes=0), "n_probes"),
    Probe("OrthoFlowConfig-warmup_steps-negative", lambda: _cfg(warmup_steps=-1), "warmup_steps"),
    Probe("OrthoFlowConfig-base_transforms-zero", lambda: _cfg(base_transforms=0), "base_transforms"),
    Probe("OrthoFlowModel.base_scale_tril-maf-base",
          lambda: OrthoFlowModel(_cfg(base="maf", num_couplings=0, hidden=4)).base_scale_tril(), "config.base"),
    Probe("OrthoFlowConfig-hidden-float", lambda: _cfg(hidden=8.0), "hidden"),
    Probe("OrthoFlowModel-x-other-dimension", lambda: MODEL(x=torch.zeros(4, 3)), "x"),
    Probe("OrthoFlowModel-x-nan", lambda: MODEL(x=torch.full((4, 2), float("nan"))), "x"),
    Probe("OrthoFlowModel-x-integer", lambda: MODEL(x=torch.zeros(4, 2, dtype=torch.long)), "x"),
    Probe("OrthoFlowModel.decode-z-other-dimension", lambda: MODEL.decode(torch.zeros(4, 5)), "z"),
    Probe("OrthoFlowModel.flow_jacobian-method-unknown", lambda: MODEL.flow_jacobian(torch.zeros(4, 2), "numeric"),
          "method"),
    Probe("OrthoFlowModel.from_zuko-dim-missing", lambda: OrthoFlowModel.from_zuko(None), "dim"),
    Probe("c_ima-J_f-not-square", lambda: c_ima(torch.zeros(3, 2, 3)), "J_f"),
    Probe("cosine_offdiag-J_f-2d", lambda: cosine_offdiag(torch.eye(2)), "J_f"),
    Probe("offdiag_frobenius-J_f-integer", lambda: offdiag_frobenius(torch.zeros(1, 2, 2, dtype=torch.long)), "J_f"),
    Probe("hutchinson_offdiag-n_probes-zero",
          lambda: hutchinson_offdiag(lambda v: v, lambda u: u, torch.ones(2, 3), n_probes=0), "n_probes"),
    Probe("hutchinson_offdiag-diag-1d", lambda: hutchinson_offdiag(lambda v: v, lambda u: u, torch.ones(3)), "diag"),
    Probe("fit_ortho_flow-steps-zero", lambda: fit_ortho_flow(MODEL, Z, 0), "steps"),
    Probe("fit_ortho_flow-lr-negative", lambda: fit_ortho_flow(MODEL, Z, 1, lr=-1.0), "lr"),
    Probe("fit_ortho_flow-x_train-1d", lambda: fit_ortho_flow(MODEL, Z[:, 0], 1), "x_train"),
    Probe("copula-rho-one", lambda: tasks.copula(10, 2, 1.0, 0), "rho"),
    Probe("copula-kind-unknown", lambda: tasks.copula(10, 2, 0.5, 0, kind="frank"), "kind"),
    Probe("polar-n-zero", lambda: tasks.polar(0), "n"),
    Probe("mobius-d-one", lambda: tasks.mobius(10, d=1), "d"),
    Probe("standardise-data-constant-coordinate",
          lambda: tasks.standardise(tasks.FactorData(np.c_[Z[:, 0], np.zeros(20)], Z, lambda z: z, "flat")), "data"),
    Probe("mlp_mixing-layers-zero", lambda: tasks.mlp_mixing(10, layers=0), "layers"),
    Probe("mcc-z_hat-other-rows", lambda: tasks.mcc(Z, Z[:5]), "z_hat"),
    Probe("mcc-method-unknown", lambda: tasks.mcc(Z, Z, method="kendall"), "method"),
    Probe("amari_distance-A-not-square", lambda: tasks.amari_distance(np.ones((2, 3))), "A"),
    Probe("jacobian_amari-J_g-other-shape", lambda: tasks.jacobian_amari(np.ones((4, 2, 2)), np.ones((3, 2, 2))),
          "J_g"),
    Probe("mig-bins-one", lambda: tasks.mig(Z, Z, bins=1), "bins"),
    Probe("dci-n_estimators-zero", lambda: tasks.dci(Z, Z, n_estimators=0), "n_estimators"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
