"""TIED (arXiv 2602.08267): groups, action, score estimator, sampler, energies, baselines and errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from icml26 import InputError
from icml26.models.tied import (
    SE2,
    SO,
    BoundaryPenalty,
    Burgers1D,
    ClassifierFreeEnergy,
    FoCal,
    Heat1D,
    ImageAffine,
    ImageHomography,
    KineticLangevin,
    LieLAC,
    MatrixLieGroup,
    PPCAEnergy,
    RandomBestOfN,
    TIEDCanonicalizer,
    TIEDConfig,
    TIEDSampler,
    act,
    trivialized_score,
)
from icml26.models.tied.sampler import forward_paths, gamma_schedule

GROUPS = [SO(3), SO(5), SE2(), ImageAffine(), ImageHomography(), Burgers1D(), Heat1D()]


# ----------------------------------------------------------------------------------------------
# groups
# ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g.name)
def test_exp_inverse_compose_close_in_the_group(group):
    gen = torch.Generator().manual_seed(0)
    c1, c2 = group.random_coeff(16, 0.7, generator=gen, dtype=torch.float64), \
        group.random_coeff(16, 0.7, generator=gen, dtype=torch.float64)
    g, h = group.exp(c1), group.exp(c2)
    eye = group.identity(16, dtype=torch.float64)
    assert (group.compose(g, group.inverse(g)) - eye).abs().max() < 1e-6
    assert (group.compose(group.inverse(g), g) - eye).abs().max() < 1e-6
    assert (group.exp(-c1) - group.inverse(g)).abs().max() < 1e-6
    gh = group.compose(g, h)
    assert (group.inverse(gh) - group.compose(group.inverse(h), group.inverse(g))).abs().max() < 1e-6
    if isinstance(group, SO):
        assert (gh @ gh.transpose(1, 2) - eye).abs().max() < 1e-6
        assert (torch.linalg.det(gh) - 1).abs().max() < 1e-6
    if isinstance(group, ImageHomography):
        assert (torch.linalg.det(gh) - 1).abs().max() < 1e-6
    if isinstance(group, (SE2, ImageAffine, Burgers1D)):  # the last row stays (0, 0, 1)
        assert (gh[:, -1] - eye[:, -1]).abs().max() < 1e-6
    # exp(c) exp(-c) is exactly the identity in law; exp of a small c is I + hat(c) to second order
    small = 1e-4 * c1
    assert (group.exp(small) - group.linearized_exp(small)).abs().max() < 1e-7


def test_adjoint_traces():
    unscaled = ImageAffine(scales=[1.0] * 6)
    assert torch.allclose(unscaled.adjoint_trace(), torch.tensor([1.0, 0, 0, 0, 1.0, 0], dtype=torch.float64),
                          atol=1e-12)
    assert torch.allclose(ImageAffine().adjoint_trace(),
                          torch.tensor([0.084, 0, 0, 0, 0.084, 0], dtype=torch.float64), atol=1e-12)
    for group in (ImageHomography(), SE2(), SO(3), SO(4), Burgers1D(), Heat1D()):
        assert group.adjoint_trace().abs().max() < 1e-12, group.name


def _blob(n=2, size=32):
    ys = torch.linspace(-1, 1, size)
    yy, xx = torch.meshgrid(ys, ys, indexing="ij")
    imgs = [torch.exp(-((xx - 0.2) ** 2 + (yy + 0.1) ** 2) / 0.08) + 0.5 * torch.exp(-((xx + 0.3) ** 2 + (yy - 0.3) ** 2)
                                                                                       / 0.03)]
    imgs.append(torch.exp(-((xx + 0.1) ** 2 / 0.05 + (yy - 0.2) ** 2 / 0.2)))
    return torch.stack(imgs[:n])[:, None]


@pytest.mark.parametrize("group", [SE2(), ImageAffine(), ImageHomography()], ids=lambda g: g.name)
def test_act_composes_as_a_right_action_of_the_sampling_convention(group):
    x = _blob()
    gen = torch.Generator().manual_seed(1)
    g = group.exp(group.random_coeff(2, 1.0, generator=gen))
    h = group.exp(group.random_coeff(2, 1.0, generator=gen))
    two_steps = act(g, act(h, x))
    right = (two_steps - act(h @ g, x)).abs().mean()
    wrong = (two_steps - act(g @ h, x)).abs().mean()
    assert right < 0.01 and right < 0.3 * wrong
    # the identity is exact, and the inverse restores the image away from the canvas edge
    assert (act(group.identity(2), x) - x).abs().max() < 1e-6
    g = group.exp(group.random_coeff(2, 0.5, generator=gen))
    back = act(group.inverse(g), act(g, x))
    assert (back - x)[..., 8:-8, 8:-8].abs().mean() < 0.02


# ----------------------------------------------------------------------------------------------
# the score estimator
# ----------------------------------------------------------------------------------------------
def _so_log_density(g):
    return 10 * g[..., 0, 0] ** 2 + 3 * g[..., 1, 0] * g[..., 2, 2]


def test_linearised_and_exact_exponentials_give_the_same_score_and_match_finite_differences():
    group = SO(4)
    cfg = TIEDConfig(steps=10, gamma_min=0.1, gamma_max=1.0, mc_paths=8, dtype="float64")
    gen = torch.Generator().manual_seed(2)
    g = group.exp(group.random_coeff(5, 1.0, generator=gen, dtype=torch.float64))
    W, logw = forward_paths(group, (8,), 6, cfg, gen)
    W, logw = W[:, -1], logw[:, -1]
    lin, _ = trivialized_score(group, _so_log_density, g, W, logw, linearize=True)
    exact, _ = trivialized_score(group, _so_log_density, g, W, logw, linearize=False)
    assert (lin - exact).abs().max() < 1e-10

    def phi(eps):
        h = (g @ group.exp(eps))[:, None] @ group.inverse(W)
        return torch.logsumexp(_so_log_density(h) - logw, 1)

    fd = torch.zeros_like(lin)
    step = 1e-5
    for i in range(group.dim):
        e = torch.zeros(5, group.dim, dtype=torch.float64)
        e[:, i] = step
        fd[:, i] = (phi(e) - phi(-e)) / (2 * step)
    assert ((lin - fd).norm(dim=1) / fd.norm(dim=1)).max() < 0.05


def test_score_on_the_circle_matches_quadrature_of_the_heat_kernel():
    """SO(2) = S^1: p_t = p_0 * wrapped Gaussian; its derivative by quadrature on 4096 points vs the MC score."""
    group = SO(2)
    cfg = TIEDConfig(steps=20, gamma_min=0.3, gamma_max=1.5, dtype="float64")

    def log_p0(theta):
        return 2 * torch.cos(theta - 0.5) + torch.cos(2 * theta + 1.0)

    def log_density(h):  # the angle of exp(theta (E12 - E21)) is theta
        return log_p0(torch.atan2(h[..., 0, 1], h[..., 0, 0]))

    grid = torch.linspace(-math.pi, math.pi, 4097, dtype=torch.float64)[:-1]
    thetas = torch.linspace(-3.0, 3.0, 13, dtype=torch.float64)
    g = group.exp(thetas[:, None])
    gam = gamma_schedule(cfg)
    gen = torch.Generator().manual_seed(3)
    for frac in (0.2, 0.5, 1.0):
        t = int(round(frac * cfg.steps))
        var = float((gam[:t] ** 2).sum() / cfg.steps)
        # wrapped-Gaussian density of the forward angle, then the convolution and its log-derivative
        kernel = sum(torch.exp(-(grid + 2 * math.pi * k) ** 2 / (2 * var)) for k in range(-6, 7))

        def conv(f, theta):
            return (f(theta[:, None] - grid[None]) * kernel[None]).sum(1)

        pt = conv(lambda a: torch.exp(log_p0(a)), thetas)
        dpt = conv(lambda a: torch.exp(log_p0(a)) * (-2 * torch.sin(a - 0.5) - 2 * torch.sin(2 * a + 1.0)), thetas)
        exact = dpt / pt
        W, logw = forward_paths(group, (4096,), t, cfg, gen)
        score, _ = trivialized_score(group, log_density, g, W[:, -1], logw[:, -1])
        rel = float((score[:, 0] - exact).norm() / exact.norm())
        assert rel < 0.05, (frac, rel)


def _ks_x11(X, n):
    from scipy.stats import kstest

    from icml26.eval.experiments.tied import x11_marginal

    xs, cdf, _ = x11_marginal(n)
    return kstest(X[:, 0, 0].numpy(), lambda v: np.interp(v, xs, cdf)).statistic


def test_cached_and_fresh_paths_agree_in_law_and_sample_the_so3_target():
    from scipy.stats import ks_2samp

    group = SO(3)
    base = dict(steps=20, mc_paths=8, dtype="float64", per_sample_paths=True)
    X = TIEDSampler(group, None, TIEDConfig(**base, cache_paths=True, seed=0)).sample_density(
        lambda g: 10 * g[:, 0, 0] ** 2, 500)
    Y = TIEDSampler(group, None, TIEDConfig(**base, cache_paths=False, seed=1)).sample_density(
        lambda g: 10 * g[:, 0, 0] ** 2, 500)
    assert ks_2samp(X[:, 0, 0].numpy(), Y[:, 0, 0].numpy()).pvalue > 0.01
    for Z in (X, Y):
        assert _ks_x11(Z, 3) < 0.1
        assert 0.4 < float((Z[:, 0, 0] > 0).double().mean()) < 0.6
    # and the forward paths themselves: the t-th prefix of a cached path has the law of a fresh length-t path
    cfg = TIEDConfig(steps=20, gamma_min=0.1, gamma_max=2.0, dtype="float64")
    cached = forward_paths(group, (2000,), 20, cfg, torch.Generator().manual_seed(4))[0][:, 9]
    fresh = forward_paths(group, (2000,), 10, cfg, torch.Generator().manual_seed(5))[0][:, -1]
    assert ks_2samp(cached[:, 0, 0].numpy(), fresh[:, 0, 0].numpy()).pvalue > 0.01


# ----------------------------------------------------------------------------------------------
# energies
# ----------------------------------------------------------------------------------------------
def test_ppca_energy_is_sklearn_score_samples_over_t_up_to_a_constant():
    from sklearn.decomposition import PCA

    rng = np.random.default_rng(0)
    data = rng.standard_normal((300, 5)) @ rng.standard_normal((5, 36)) + 0.3 * rng.standard_normal((300, 36))
    pca = PCA(n_components=4).fit(data)
    energy = PPCAEnergy.from_sklearn(pca, temperature=7.0)
    test = rng.standard_normal((50, 36)) * 2
    diff = energy(torch.tensor(test).reshape(50, 1, 6, 6)).numpy() + pca.score_samples(test) / 7.0
    assert np.ptp(diff) < 1e-10 * max(1.0, np.abs(diff).max())


def test_energies_add_and_the_boundary_penalty_reads_the_grid():
    x = _blob()
    group = SE2()
    g = group.exp(torch.tensor([[0.0, 0.0, 0.0], [0.0, 4.0, 0.0]]))  # the second shifts by 0.6 half-widths
    out, grid = act(g, x, return_grid=True)
    pen = BoundaryPenalty(2.0)(out, grid=grid)
    assert pen[0] == 0 and pen[1] > 0
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(32 * 32, 3))
    total = ClassifierFreeEnergy(model) + BoundaryPenalty(2.0)
    expected = -torch.logsumexp(model(out), -1) + pen
    assert torch.allclose(total(out, grid=grid), expected)


# ----------------------------------------------------------------------------------------------
# digits: the oracle inverse, TIED, the baselines, the canonicaliser
# ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def digits():
    from icml26.eval.tasks.tied import fit_ppca, load_digit_images, random_transforms
    from icml26.training.tied import train_classifier

    torch.manual_seed(0)
    data = load_digit_images(0, size=16)
    model = train_classifier(data.x_train, data.y_train, epochs=5, seed=0)
    pca = fit_ppca(data.x_train, 20)
    group, g_star = random_transforms("se2", 120, seed=1)
    x, y = data.x_test[:120], data.y_test[:120]
    return {"model": model, "energy": PPCAEnergy.from_sklearn(pca, 50.0) + BoundaryPenalty(), "group": group,
            "g_star": g_star, "x": x, "y": y, "xt": act(g_star, x)}


def _energy_at(energy, group, g, xt):
    out, grid = act(group.inverse(g), xt, return_grid=True)
    return energy(out, grid=grid)


def test_oracle_inverse_restores_digit_accuracy_and_the_swapped_one_does_not(digits):
    from icml26.eval.tasks.tied import accuracy

    d = digits
    clean, none = accuracy(d["model"], d["x"], d["y"]), accuracy(d["model"], d["xt"], d["y"])
    oracle = accuracy(d["model"], act(d["group"].inverse(d["g_star"]), d["xt"]), d["y"])
    swapped = accuracy(d["model"], act(d["g_star"], d["xt"]), d["y"])
    assert oracle >= clean - 0.06 and oracle >= none + 0.3
    assert swapped <= none + 0.1 and swapped <= oracle - 0.3


def test_tied_lowers_the_energy_and_beats_no_inversion(digits):
    from icml26.eval.tasks.tied import accuracy

    d = digits
    y, xt, group = d["y"][:60], d["xt"][:60], d["group"]
    cfg = TIEDConfig(steps=15, gamma_min=0.1, gamma_max=1.0, clip=100.0, mc_paths=2, hypotheses=4, seed=0)
    res = TIEDSampler(group, d["energy"], cfg).sample(xt)
    assert res.g.shape == (60, 3, 3) and res.hypotheses.shape == (60, 4, 3, 3)
    assert res.energies_per_step.shape == (60, 16) and res.evaluations == cfg.energy_evaluations
    assert torch.allclose(res.energy, res.hypothesis_energy.min(1).values)
    # the reported energy is the energy of the returned element
    assert torch.allclose(res.energy, _energy_at(d["energy"], group, res.g, xt), rtol=1e-4, atol=1e-4)
    assert float((res.energy < d["energy"](xt)).float().mean()) >= 0.9
    acc = accuracy(d["model"], act(group.inverse(res.g), xt), y)
    assert acc >= accuracy(d["model"], xt, y) + 0.3
    # the canonicaliser wraps the same pipeline; ensembles average the hypotheses' outputs
    canon = TIEDCanonicalizer(d["model"], TIEDSampler(group, d["energy"], cfg))
    with torch.no_grad():
        logits = canon(xt)
        assert torch.allclose(logits, d["model"](act(group.inverse(res.g), xt)), atol=1e-5)
        ens = TIEDCanonicalizer(d["model"], TIEDSampler(group, d["energy"], cfg), ensemble=True)(xt)
        assert ens.shape == (60, 10)
        equi = TIEDCanonicalizer(torch.nn.Identity(), TIEDSampler(group, d["energy"], cfg), invariant=False)(xt[:4])
        assert equi.shape == xt[:4].shape


def test_baselines_share_the_energy_and_return_the_best_found(digits):
    d = digits
    xt, group, energy = d["xt"][:6], d["group"], d["energy"]
    cfg = TIEDConfig(steps=5, gamma_min=0.1, gamma_max=1.0, mc_paths=2, hypotheses=2)
    start = energy(xt)
    rnd = RandomBestOfN.matched(group, energy, cfg).sample(xt)
    assert rnd.evaluations == cfg.energy_evaluations
    lielac = LieLAC(group, energy, steps=10, hypotheses=2).sample(xt)
    lang = KineticLangevin(group, energy, steps=10, hypotheses=2).sample(xt)
    for r in (rnd, lielac, lang):
        assert r.g.shape == (6, 3, 3) and r.energy.shape == (6,)
        assert torch.allclose(r.energy, _energy_at(energy, group, r.g, xt), rtol=1e-4, atol=1e-4)
    assert (lang.energy <= start + 1e-4).all()  # Langevin starts at the identity and keeps its best state
    pytest.importorskip("bayes_opt")
    focal = FoCal(group, energy, init_points=3, n_iter=2).sample(xt[:2])
    assert focal.g.shape == (2, 3, 3) and focal.evaluations == 5


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------
def test_bad_input_is_refused_with_the_argument_named():
    with pytest.raises(InputError, match="basis.*skew-symmetric"):
        SO(3, basis=torch.eye(3)[None].double())
    with pytest.raises(InputError, match="closed under the commutator"):
        MatrixLieGroup(torch.stack([torch.tensor([[0.0, 1], [0, 0]]), torch.tensor([[0.0, 0], [1, 0]])]))
    with pytest.raises(InputError, match="traceless"):
        ImageHomography(basis=torch.eye(3)[None].double())
    with pytest.raises(InputError, match=r"c: expected coefficients of shape \(\.\.\., 3\)"):
        SO(3).exp(torch.zeros(4, 2))
    with pytest.raises(InputError, match=r"x: expected images of shape \(B, C, H, W\)"):
        act(torch.eye(3), torch.zeros(1, 8, 8))
    with pytest.raises(InputError, match="x_tilde: expected images"):
        TIEDSampler(SE2(), lambda x: x.sum((1, 2, 3)), TIEDConfig(steps=2)).sample(torch.zeros(8, 8))
    with pytest.raises(InputError, match="gamma_min"):
        TIEDConfig(gamma_min=2.0, gamma_max=1.0)
    with pytest.raises(InputError, match="clip"):
        TIEDConfig(clip=0.0)
    with pytest.raises(InputError, match="clip"):
        TIEDConfig(clip=-1.0)
    x = torch.rand(2, 1, 8, 8)
    with pytest.raises(InputError, match=r"energy: expected a callable returning shape \(2,\)"):
        TIEDSampler(SE2(), lambda x: x.sum((2, 3)), TIEDConfig(steps=2, mc_paths=1)).sample(x)
    with pytest.raises(InputError, match="energy: expected finite energies"):
        TIEDSampler(SE2(), lambda x: x.sum((1, 2, 3)) * float("nan"), TIEDConfig(steps=2, mc_paths=1)).sample(x)
    with pytest.raises(InputError, match="group: expected a group of 3x3 image transformations"):
        TIEDSampler(SO(4), lambda x: x.sum((1, 2, 3))).sample(x)
    with pytest.raises(InputError, match="steps"):
        TIEDConfig(steps=0)
    with pytest.raises(InputError, match="dtype"):
        TIEDConfig(dtype="float16")


# ----------------------------------------------------------------------------------------------
# the mode-weight study's pieces: Haar starts and the two-mode closed form
# ----------------------------------------------------------------------------------------------
def test_haar_draws_on_so_n_have_the_haar_marginal_of_x11():
    from scipy.stats import kstest

    from icml26.eval.experiments.tied import haar_so

    X = haar_so(3, 2000, torch.Generator().manual_seed(0))
    eye = torch.eye(3, dtype=torch.float64)
    assert (X @ X.transpose(1, 2) - eye).abs().max() < 1e-12
    assert (torch.linalg.det(X) - 1).abs().max() < 1e-12
    # X11 is uniform on [-1, 1] on SO(3) (Archimedes), and so is every entry; the identity is no Haar draw
    assert kstest(X[:, 0, 0].numpy(), "uniform", args=(-1, 2)).pvalue > 0.01
    assert kstest(X[:, 2, 1].numpy(), "uniform", args=(-1, 2)).pvalue > 0.01
    assert kstest(torch.ones(2000).numpy(), "uniform", args=(-1, 2)).pvalue < 1e-6
    # SO(5): X11 has density (1 - x^2) / (4 / 3)
    Y = haar_so(5, 2000, torch.Generator().manual_seed(1))[:, 0, 0].numpy()
    assert kstest(Y, lambda x: (3 * x - x ** 3 + 2) / 4).pvalue > 0.01


def test_two_mode_closed_form_puts_the_weights_on_the_modes():
    from icml26.eval.experiments.tied import two_mode_log_density, two_mode_marginal

    b = 20.0
    for w in (0.8, 0.5, 0.3):
        xs, cdf, dens = two_mode_marginal(3, weight=w, sharpness=b)
        # uniform X11 on SO(3): mass of x > 0 is [w (e^b - 1) + (1 - w)(1 - e^-b)] / (e^b - e^-b)
        exact = (w * math.expm1(b) - (1 - w) * math.expm1(-b)) / (math.exp(b) - math.exp(-b))
        assert abs((1 - cdf[len(xs) // 2]) - exact) < 1e-6 and abs(cdf[-1] - 1) < 1e-12
    g = SO(3).identity(2, dtype=torch.float64)
    g[1] = -g[1]
    g[1, 2, 2] = 1.0  # X11 = -1, det 1
    logp = two_mode_log_density(0.8, b)(g)
    assert torch.allclose(logp, torch.tensor([math.log(0.8 * math.exp(b) + 0.2 * math.exp(-b)),
                                              math.log(0.8 * math.exp(-b) + 0.2 * math.exp(b))], dtype=torch.float64))


# ----------------------------------------------------------------------------------------------
# the experiment, shrunk
# ----------------------------------------------------------------------------------------------
def test_experiment_end_to_end_on_shrunk_settings(tmp_path):
    import dataclasses

    from icml26.eval.experiments.tied import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], so_budget=((20, 4, 300),), mode_budget=(100, 8), mode_draws=300,
                            mode_ladder=((50, 4), (100, 8)), mode_chunk=300, image_size=16, epochs=5, test_items=60,
                            steps=12, hypotheses=4, baseline_items=8, free_energy_items=6, free_energy_hypotheses=2)
    result = run_experiment(RunConfig(out_dir=tmp_path, seeds=(0,)), s)
    m = result.metrics
    assert m["se2_aligned_share"] >= 0.9
    assert m["se2_acc_TIED"] > m["se2_acc_none"] + 0.2
    assert m["se2_acc_TIED"] > m["se2_acc_random_best-of-N"]
    assert m["so3_tied_ks"] < 0.12
    # mode weights: local samplers keep their starts' balance, TIED moves toward 0.8 and more so as K, M grow
    assert abs(m["modes_exact_share"] - 0.8) < 1e-6
    assert min(m["modes_langevin_haar_error"], m["modes_langevin_init_error"]) > 0.2
    assert m["modes_tied_error"] < m["modes_K50_M4_error"] - 0.05 and m["modes_tied_error"] < 0.2
    assert m["modes_tied_error"] == m["modes_K100_M8_error"]
    assert len(result.claims) == 11 and set(result.figures) == {
        "so_x11_histograms", "mode_weight_consistency", "digits_accuracy", "digits_canonicalised", "energy_per_step"}
    assert {r["method"] for r in result.tables["digits: accuracy per method"]} >= {
        "none", "oracle", "TIED", "random best-of-N", "LieLAC", "kinetic Langevin"}
