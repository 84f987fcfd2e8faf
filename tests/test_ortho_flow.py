"""Orthogonal-Jacobian flows: closed forms of the penalties, the forward-mode Jacobian against ``torch.func``, the
Hutchinson estimate, the base density, the metrics, and short training runs (loop and Hugging Face ``Trainer``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml26.eval.tasks.ortho_flow import (
    amari_distance,
    copula,
    dci,
    jacobian_amari,
    mcc,
    mig,
    mlp_mixing,
    mobius,
    polar,
    standardise,
    triangle_polar,
)
from icml26.models.ortho_flow import OrthoFlowConfig, OrthoFlowModel
from icml26.training.ortho_flow import c_ima, cosine_offdiag, fit_ortho_flow, hutchinson_offdiag, offdiag_frobenius


def _flow_jacobian_of(J_g: np.ndarray) -> torch.Tensor:
    return torch.linalg.inv(torch.as_tensor(J_g, dtype=torch.float64))


def _perturbed(config: OrthoFlowConfig, seed: int = 0, scale: float = 0.2) -> OrthoFlowModel:
    torch.manual_seed(seed)
    model = OrthoFlowModel(config).double()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn_like(p))
    return model


# ----------------------------------------------------------------------------------------------
# penalties
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("data", [polar(300, 0.7, seed=0), mobius(300, 3, 0.5, seed=1), triangle_polar(300, seed=2)],
                         ids=["polar", "mobius", "triangle"])
def test_c_ima_is_zero_for_orthogonal_generators(data):
    assert c_ima(_flow_jacobian_of(data.jacobian())).abs().max() <= 1e-6


def test_c_ima_of_scaled_rotations_is_zero_and_of_an_angle_is_its_closed_form():
    rng = np.random.default_rng(0)
    q, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    J_g = q @ np.diag(rng.uniform(0.1, 10, 5))
    assert abs(c_ima(_flow_jacobian_of(J_g[None]))).item() <= 1e-6
    theta = math.pi / 3
    J_g = np.array([[1.0, math.cos(theta)], [0.0, math.sin(theta)]]) @ np.diag([2.0, 0.3])
    value = c_ima(_flow_jacobian_of(J_g[None])).item()
    assert value == pytest.approx(-0.5 * math.log(1 - math.cos(theta) ** 2), abs=1e-12)
    assert value == pytest.approx(0.143841, abs=1e-6)


def test_c_ima_is_non_negative_blind_to_column_scale_and_in_2d_equals_the_row_norm_form():
    rng = np.random.default_rng(1)
    J_g = rng.normal(size=(1000, 4, 4))
    values = c_ima(_flow_jacobian_of(J_g))
    assert values.min() >= -1e-10
    scaled = c_ima(_flow_jacobian_of(J_g * rng.uniform(0.1, 10, (1000, 1, 4))))
    torch.testing.assert_close(values, scaled)
    J_f = torch.as_tensor(rng.normal(size=(200, 2, 2)))
    rows = torch.log(torch.linalg.vector_norm(J_f, dim=2)).sum(1) - torch.linalg.slogdet(J_f)[1]
    torch.testing.assert_close(c_ima(J_f), rows)


def test_cosine_and_frobenius_penalties_vanish_on_orthogonal_columns_and_not_otherwise():
    rng = np.random.default_rng(2)
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    ortho = _flow_jacobian_of((q @ np.diag([1.0, 2.0, 3.0]))[None])
    assert cosine_offdiag(ortho).abs().item() <= 1e-12 and offdiag_frobenius(ortho).abs().item() <= 1e-10
    theta = math.pi / 3
    skew = _flow_jacobian_of(np.array([[[1.0, math.cos(theta)], [0.0, math.sin(theta)]]]))
    assert cosine_offdiag(skew).item() == pytest.approx(math.cos(theta) ** 2)
    assert offdiag_frobenius(skew).item() == pytest.approx(2 * math.cos(theta) ** 2)


@pytest.mark.parametrize("near_orthogonal", [False, True])
def test_hutchinson_is_unbiased_and_within_five_percent_at_256_probes(near_orthogonal):
    rng = np.random.default_rng(3)
    d, B = 16, 64
    if near_orthogonal:
        q = np.stack([np.linalg.qr(rng.normal(size=(d, d)))[0] for _ in range(B)])
        J_g = q + 0.05 * rng.normal(size=(B, d, d))
    else:
        J_g = rng.normal(size=(B, d, d))
    J = torch.as_tensor(J_g)
    G = J.transpose(1, 2) @ J
    diag = torch.diagonal(G, dim1=1, dim2=2)
    exact = (((G ** 2).sum((1, 2)) - (diag ** 2).sum(1)) / diag.sum(1) ** 2)
    jvp = lambda v: (J @ v[..., None])[..., 0]
    vjp = lambda u: (J.transpose(1, 2) @ u[..., None])[..., 0]
    gen = torch.Generator().manual_seed(0)
    one = [hutchinson_offdiag(jvp, vjp, diag, n_probes=1, generator=gen).item() for _ in range(200)]
    assert abs(np.mean(one) - exact.mean().item()) <= 3 * np.std(one) / math.sqrt(len(one))
    errors = []
    for b in range(16):
        Jb = J[b:b + 1]
        est = hutchinson_offdiag(lambda v: (Jb @ v[..., None])[..., 0], lambda u: (Jb.transpose(1, 2) @ u[..., None])[..., 0],
                                 diag[b:b + 1], n_probes=256, generator=gen).item()
        errors.append(abs(est - exact[b].item()) / exact[b].item())
    assert np.median(errors) <= 0.05


# ----------------------------------------------------------------------------------------------
# the flow
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dim", [2, 3, 5])
def test_forward_mode_jacobian_equals_torch_func_and_the_flow_inverts(dim):
    model = _perturbed(OrthoFlowConfig(dim=dim, num_couplings=4, hidden=16))
    x = torch.randn(32, dim, dtype=torch.float64)
    forward, func = model.flow_jacobian(x, "forward"), model.flow_jacobian(x, "func")
    torch.testing.assert_close(forward, func, atol=1e-5, rtol=1e-5)
    _, log_det, _ = model._encode(x)
    torch.testing.assert_close(log_det, torch.linalg.slogdet(func)[1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(model.decode(model.encode(x)), x, atol=1e-5, rtol=1e-5)


def test_the_penalty_in_forward_is_the_mean_c_ima_of_the_flow_jacobian_and_gets_gradients():
    model = _perturbed(OrthoFlowConfig(dim=2, num_couplings=2, hidden=8))
    x = torch.randn(16, 2, dtype=torch.float64)
    out = model(x=x)
    assert out.penalty.item() == pytest.approx(c_ima(model.flow_jacobian(x, "func")).mean().item(), abs=1e-9)
    out.loss.backward()
    assert model.couplings[0].l1.weight.grad.abs().sum() > 0


def test_hutchinson_path_gives_gradients_and_tracks_the_exact_normalised_energy():
    model = _perturbed(OrthoFlowConfig(dim=3, num_couplings=2, hidden=8, jacobian="hutchinson", n_probes=64))
    model.train()
    x = torch.randn(32, 3, dtype=torch.float64)
    out = model(x=x)
    out.loss.backward()
    assert model.couplings[0].l1.weight.grad.abs().sum() > 0
    G = torch.linalg.inv(model.flow_jacobian(x, "forward")).detach()
    G = G.transpose(1, 2) @ G
    diag = torch.diagonal(G, dim1=1, dim2=2)
    exact = (((G ** 2).sum((1, 2)) - (diag ** 2).sum(1)) / diag.sum(1) ** 2).mean().item()
    assert out.penalty.item() == pytest.approx(exact, rel=0.3)


def test_full_covariance_base_learns_the_correlation_and_the_standard_normal_cannot():
    rng = np.random.default_rng(4)
    x = rng.multivariate_normal([0, 0], [[1, 0.7], [0.7, 1]], size=4000)
    learnt = {}
    for base in ("full_cov_gaussian", "standard_normal"):
        torch.manual_seed(0)
        model = OrthoFlowModel(OrthoFlowConfig(dim=2, num_couplings=0, base=base, lambda_orth=0.0))
        model.linear.requires_grad_(False)  # the flow is a shift: only the base can model the dependence
        fit_ortho_flow(model, x, 400, lr=2e-2, seed=0)
        learnt[base] = model.base_correlation()[0, 1].item()
    assert abs(learnt["full_cov_gaussian"] - 0.7) <= 0.05
    assert abs(learnt["standard_normal"]) <= 1e-12


def test_two_hundred_steps_lower_the_nll_and_the_penalty():
    data = standardise(polar(2000, 0.7, seed=5))
    model = _perturbed(OrthoFlowConfig(dim=2, num_couplings=4, hidden=32), seed=1, scale=0.3).float()
    x = torch.as_tensor(data.x, dtype=torch.float32)
    with torch.no_grad():
        before = model.eval()(x=x)
    fit_ortho_flow(model, data.x, 200, seed=0)
    with torch.no_grad():
        after = model.eval()(x=x)
    assert after.nll < before.nll and after.penalty < before.penalty


def test_hugging_face_trainer_trains_it_and_it_round_trips(tmp_path):
    from transformers import AutoModel, Trainer, TrainingArguments

    data = standardise(polar(512, 0.7, seed=6))
    rows = [{"x": row.tolist()} for row in data.x.astype(np.float32)]
    torch.manual_seed(0)
    model = OrthoFlowModel(OrthoFlowConfig(dim=2, num_couplings=2, hidden=16))
    args = TrainingArguments(output_dir=str(tmp_path / "out"), max_steps=20, per_device_train_batch_size=64,
                             learning_rate=1e-3, report_to="none", save_strategy="no", use_cpu=True, disable_tqdm=True)
    Trainer(model=model, args=args, train_dataset=rows).train()
    assert int(model.num_updates) == 20
    model.save_pretrained(tmp_path / "model")
    loaded = AutoModel.from_pretrained(tmp_path / "model")
    x = torch.as_tensor(data.x[:8], dtype=torch.float32)
    torch.testing.assert_close(loaded.encode(x), model.encode(x))


# ----------------------------------------------------------------------------------------------
# metrics and data
# ----------------------------------------------------------------------------------------------
def test_mcc_and_jacobian_amari_are_perfect_under_permutation_and_monotone_warps():
    data = polar(2000, 0.7, seed=7)
    z = data.z
    warped = np.stack([np.exp(z[:, 1]), z[:, 0] ** 3], 1)           # swap and warp each factor
    assert mcc(z, warped) == pytest.approx(1.0)
    assert mcc(z, np.random.default_rng(0).normal(size=z.shape)) < 0.1
    J_g = data.jacobian()

    def flow(x):                                                     # the true inverse, then the warps
        r, phi = torch.linalg.vector_norm(x, dim=1), torch.atan2(x[:, 1], x[:, 0])
        return torch.stack([torch.exp(phi), r ** 3], 1)

    single = lambda v: flow(v[None])[0]
    J_f = torch.func.vmap(torch.func.jacfwd(single))(torch.as_tensor(data.x)).numpy()
    assert jacobian_amari(J_f, J_g) <= 1e-10
    assert jacobian_amari(np.broadcast_to(np.eye(2), J_g.shape), J_g) > 0.2   # the identity is not polar


def test_amari_distance_closed_forms():
    assert amari_distance(np.array([[0.0, 3.0], [-2.0, 0.0]])) == 0.0
    assert amari_distance(np.ones((3, 3))) == pytest.approx(2.0)      # the maximum, d - 1
    theta = np.pi / 6                                                   # a rotation: tan^2 of its angle
    R = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    assert amari_distance(R) == pytest.approx(np.tan(theta) ** 2)


def test_copulas_have_uniform_marginals_and_the_asked_dependence():
    from scipy.stats import kendalltau

    for kind in ("gaussian", "clayton"):
        u = copula(20_000, 2, 0.7, seed=0, kind=kind)
        assert u.min() >= 0 and u.max() <= 1 and abs(u.mean() - 0.5) < 0.01
        assert kendalltau(u[:, 0], u[:, 1])[0] == pytest.approx(2 * math.asin(0.7) / math.pi, abs=0.02)


def test_the_mlp_control_is_not_orthogonal_and_standardising_wraps_the_generator():
    control = mlp_mixing(500, 2, seed=0)
    assert c_ima(_flow_jacobian_of(control.jacobian())).mean() > 0.1
    raw = polar(500, 0.7, seed=1)
    assert c_ima(_flow_jacobian_of(raw.jacobian())).abs().max() <= 1e-6     # the polar map is orthogonal
    data = standardise(raw, slice(0, 400))
    np.testing.assert_allclose(data.x[:400].mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(data.x[:400].std(0), 1)
    np.testing.assert_allclose(data.generator(torch.as_tensor(data.z)).numpy(), data.x, atol=1e-12)
    np.testing.assert_allclose(data.log_density - raw.log_density, np.log(raw.x[:400].std(0)).sum())
    tilt = c_ima(_flow_jacobian_of(data.jacobian())).mean().item()    # unequal scales tilt the columns a little
    assert 0 < tilt < 0.1


@pytest.mark.parametrize("kind", ["gaussian", "clayton"])
def test_the_copula_density_integrates_to_one(kind):
    from icml26.eval.tasks.ortho_flow import _copula_log_density

    u = np.random.default_rng(0).random((200_000, 2))
    c = np.exp(_copula_log_density(u, 0.3, kind))
    assert abs(c.mean() - 1) <= 4 * c.std() / math.sqrt(len(c))
    data = polar(200_000, 0.0, seed=0)          # independent factors: p(x) = (2 / pi) / r
    assert -data.log_density.mean() == pytest.approx(-math.log(2 / math.pi) + 2 * math.log(2) - 1, abs=0.01)


def test_a_maf_base_learns_dependence_and_round_trips(tmp_path):
    pytest.importorskip("zuko")
    from transformers import AutoModel

    rng = np.random.default_rng(3)
    x = rng.multivariate_normal([0, 0], [[1, 0.8], [0.8, 1]], size=2000)
    torch.manual_seed(0)
    model = OrthoFlowModel(OrthoFlowConfig(dim=2, num_couplings=0, base="maf", hidden=16, lambda_orth=0.0))
    model.linear.requires_grad_(False)
    xt = torch.as_tensor(x, dtype=torch.float32)
    with torch.no_grad():
        before = model.eval()(x=xt).nll.item()
    fit_ortho_flow(model, x, 300, lr=5e-3, seed=0)
    with torch.no_grad():
        after = model.eval()(x=xt).nll.item()
    independent = 2 * 0.5 * math.log(2 * math.pi * math.e)           # the best NLL of any independent model
    assert after < independent - 0.3 < before                           # the true NLL is independent - 0.51
    model.save_pretrained(tmp_path / "maf")
    loaded = AutoModel.from_pretrained(tmp_path / "maf")
    torch.testing.assert_close(loaded.eval()(x=xt[:16]).nll, model(x=xt[:16]).nll)
    with pytest.raises(ValueError, match="base"):
        model.base_scale_tril()


def test_dci_and_mig_rank_true_factors_above_mixtures():
    z = copula(3000, 2, 0.0, seed=2)
    mixed = z @ np.array([[1.0, 1.0], [1.0, -1.0]])
    assert dci(z, z)["disentanglement"] > dci(z, mixed)["disentanglement"]
    assert mig(z, z) > mig(z, mixed)


def test_a_zuko_flow_wrapped_as_the_encoder_has_the_log_det_of_its_jacobian():
    zuko = pytest.importorskip("zuko")
    torch.manual_seed(0)
    flow = zuko.flows.RealNVP(2, transforms=3, hidden_features=(16, 16))
    model = OrthoFlowModel.from_zuko(flow, dim=2, lambda_orth=1.0)
    x = torch.randn(16, 2)
    out = model(x=x)
    J = model.flow_jacobian(x)
    torch.testing.assert_close(out.log_det, torch.linalg.slogdet(J)[1], atol=1e-5, rtol=1e-5)
    assert out.penalty.item() == pytest.approx(c_ima(J.double()).mean().item(), abs=1e-4)
    torch.testing.assert_close(model.decode(out.latents), x, atol=1e-4, rtol=1e-4)
    out.loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in flow.parameters())


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
def test_the_experiment_runs_every_arm_and_data_set(tmp_path):
    import dataclasses

    from icml26.eval.experiments.ortho_flow import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["full"], steps=40, n_train=400, n_test=400, curve_every=20, metric_rows=200,
                            reported=(("polar-common:0.7", ("ortho",)), ("mobius:0.8", ("IMA",)),
                                      ("clayton", ("ortho, MAF base",)), ("mlp", ("ortho",)), ("triangle", ("ortho",))))
    result = run_experiment(RunConfig(out_dir=tmp_path, mode="full"), s)
    m = result.metrics
    assert len(result.claims) == 4 and all(math.isfinite(c.measured) for c in result.claims)
    assert result.claims[0].measured == m["ortho"]["amari"] and result.claims[0].reference == m["lambda = 0"]["amari"]
    assert result.claims[1].reference == m["IMA"]["amari"]
    rows = {(r["data"], r["arm"]): r for r in result.tables["every run (held-out metrics)"]}
    assert len(rows) == 10
    assert rows[("mlp", "ortho")]["assumption"].startswith("violated")          # its own C_IMA > 0.1
    assert rows[("polar:0.7", "ortho")]["assumption"] == "orthogonal generator"
    assert rows[("polar-common:0.7", "ortho")]["C_IMA (true generator)"] <= 1e-6  # one scale: exactly orthogonal
    assert rows[("mobius:0.8", "IMA")]["true NLL"] is None
    # the paired likelihood difference is reported, and every model's NLL is above the data's own
    assert set(m["nll_ortho_minus_ima"]) == {"mean", "se", "upper_95"}
    assert min(m[arm]["nll"] for arm in ("ortho", "lambda = 0", "IMA")) > m["true_nll"]
    assert set(result.figures) == {"latents_vs_factors", "amari_and_mcc", "training_curves", "coordinate_lines"}


def test_the_quick_experiment_has_the_two_identifiability_claims(tmp_path):
    import dataclasses

    from icml26.eval.experiments.ortho_flow import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], steps=30, n_train=300, n_test=300, curve_every=10, metric_rows=100)
    result = run_experiment(RunConfig(out_dir=tmp_path, seeds=(0, 1)), s)
    assert len(result.claims) == 2 and "median over seeds 0, 1" in result.claims[0].statement
    assert [r["seed"] for r in result.tables["claims per seed"]] == [0, 1, 0, 1]
