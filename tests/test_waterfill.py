"""Contrastive waterfilling: closed forms of the solver, the network's two paths and its invariance, the loss
against HaoChen et al.'s reference, the negative control (no network beats L*), the Trainer, and one short run of
the experiment."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch

from icml26.eval.tasks.waterfill import (
    best_head,
    best_head_loss,
    class_powers,
    frequency_classes,
    gaussian_moments,
    inverse_power_spectrum,
    monte_carlo_moments,
    natural_view_pairs,
    population_loss,
    shell_weights,
    stationary_images,
    waterfill,
)
from icml26.models.waterfill import SpectralCNNConfig, SpectralCNNModel
from icml26.training.waterfill import (
    AdditiveNoise,
    ContrastiveConfig,
    ContrastiveTrainer,
    RandomCropShift,
    RandomCyclicShift,
    fit_contrastive,
    info_nce_loss,
    make_views,
    spectral_contrastive_loss,
)

N, SIGMA2, D = 10, 0.05, 6
S = inverse_power_spectrum(N)
MOMENTS = gaussian_moments(S, SIGMA2)
CLASSES = MOMENTS.classes
SOLUTION = waterfill(MOMENTS.Q_plus, MOMENTS.R, D, classes=CLASSES)


# ----------------------------------------------------------------------------------------------
# the solver
# ----------------------------------------------------------------------------------------------
def test_frequency_classes_count_conjugate_pairs_and_self_conjugate_frequencies():
    assert CLASSES.size == (N * N - 4) // 2 + 4
    assert CLASSES.self_conjugate.sum() == 4 and CLASSES.k2[0] == 0
    odd = frequency_classes(7)
    assert odd.size == (49 - 1) // 2 + 1 and odd.self_conjugate.sum() == 1
    assert {r: len(idx) for r, idx in CLASSES.shells().items()}[5] == 4  # (1, 2), (2, 1), (1, -2), (2, -1)
    for c in range(CLASSES.size):  # every class holds a frequency and its conjugate
        members = np.argwhere(CLASSES.index == c)
        assert {tuple(m) for m in members} == {tuple((-m) % N) for m in members}


def test_generalized_eigenvalues_lie_in_zero_one():
    lam = SOLUTION.eigenvalues
    assert lam.min() >= -1e-12 and lam.max() < 1


def test_contrast_modes_have_eigenvalue_rho_squared_with_multiplicity_m_minus_one():
    lam = SOLUTION.eigenvalues
    for r, idx in CLASSES.shells().items():
        s = 1.0 / (r + 0.5) if r else 0.0
        rho2 = (s / (s + SIGMA2)) ** 2
        count = int(np.sum(np.abs(lam - rho2) < 1e-10))
        if r:
            assert count >= len(idx) - 1, (r, count)
    # |k|^2 = 5 (4 classes) gives exactly 3 modes at its rho^2; no other shell shares that S
    rho2 = ((1 / 5.5) / (1 / 5.5 + SIGMA2)) ** 2
    assert int(np.sum(np.abs(lam - rho2) < 1e-10)) == 3


def test_optimal_loss_matches_the_spec_and_the_sum_of_squared_eigenvalues():
    assert SOLUTION.loss == pytest.approx(-4.1135, abs=5e-5)
    assert SOLUTION.loss == pytest.approx(-np.sum(SOLUTION.eigenvalues[:D] ** 2), rel=1e-10)
    modes = SOLUTION.modes[:, :D]
    np.testing.assert_allclose(modes.T @ MOMENTS.R @ modes, np.eye(D), atol=1e-9)


def test_noise_moves_the_closed_form_weight_to_lower_frequencies():
    ratio = {}
    for g in (0.01, 0.2):
        m = gaussian_moments(S, g)
        w = shell_weights(waterfill(m.Q_plus, m.R, D).M, m.R, m.classes)
        ratio[g] = w[4] / w[1]
    assert ratio[0.01] == pytest.approx(0.525, abs=1e-3) and ratio[0.2] == pytest.approx(0.249, abs=1e-3)


def test_water_level_weights_are_soft_thresholded_eigenvalues_and_minimise_the_penalised_loss():
    gamma = 0.8
    sol = waterfill(MOMENTS.Q_plus, MOMENTS.R, D, level=gamma)
    np.testing.assert_allclose(sol.weights, np.maximum(SOLUTION.eigenvalues[:D] - gamma, 0))
    penalised = lambda M: population_loss(M, MOMENTS.Q_plus, MOMENTS.R) + 2 * gamma * np.trace(M @ MOMENTS.R)
    rng = np.random.default_rng(0)
    for _ in range(5):  # perturbations of the optimum only raise the penalised loss
        E = rng.normal(size=sol.M.shape) * 1e-3
        assert penalised(sol.M + E @ E.T) > penalised(sol.M)


def test_monte_carlo_moments_of_stationary_images_match_the_gaussian_ones_within_three_standard_errors():
    n, count = 6, 40_000
    S6 = inverse_power_spectrum(n)
    x = stationary_images(n, S6, count, seed=0)
    pairs = np.stack([x + np.sqrt(SIGMA2) * np.random.default_rng(s).standard_normal(x.shape) for s in (1, 2)], 1)
    mc, exact = monte_carlo_moments(pairs), gaussian_moments(S6, SIGMA2)
    z = class_powers(pairs)
    prod = np.einsum("ni,nj->nij", z[:, 0], z[:, 1])
    se = prod.std(0) / math.sqrt(count) + 1e-12
    q = 0.5 * (prod.mean(0) + prod.mean(0).T)
    assert np.all(np.abs(q - exact.Q_plus) <= 3 * se + 3 * se.T)
    assert np.abs(mc.Q_plus - q).max() < 1e-12
    assert np.abs(mc.mean - exact.mean).max() < 3 * (exact.mean.max() * 2 / math.sqrt(2 * count))


# ----------------------------------------------------------------------------------------------
# the network
# ----------------------------------------------------------------------------------------------
def _cosine(k, a):
    p = np.stack(np.meshgrid(np.arange(N), np.arange(N), indexing="ij"), -1)
    return a * np.cos(2 * math.pi * (p @ np.asarray(k)) / N)


@pytest.mark.parametrize("k, self_conjugate", [((1, 2), False), ((0, 5), True), ((3, -1), False)])
def test_one_cosine_filter_measures_the_power_at_its_frequency(k, self_conjugate):
    a = 0.7
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=1, embed_dim=1)).double()
    with torch.no_grad():
        model.filters.copy_(torch.as_tensor(_cosine(k, a))[None])
    x = torch.randn(4, N, N, dtype=torch.float64)
    xhat2 = torch.fft.fft2(x)[:, k[0] % N, k[1] % N].abs() ** 2
    expected = (a ** 2 if self_conjugate else a ** 2 / 2) * xhat2
    for path in ("parseval", "conv"):
        model.config.path = path
        torch.testing.assert_close(model.image_features(x)[:, 0], expected, rtol=1e-10, atol=1e-12)


def test_parseval_and_convolution_paths_agree():
    torch.manual_seed(0)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=8, embed_dim=D))
    x = torch.randn(16, N, N)
    model.config.path = "parseval"
    a = model(pixel_values=x).embeddings
    model.config.path = "conv"
    b = model(pixel_values=x).embeddings
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("nonlinearity", ["square", "relu", "abs"])
def test_a_cyclic_shift_leaves_the_embedding_unchanged(nonlinearity):
    torch.manual_seed(1)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=8, embed_dim=D, nonlinearity=nonlinearity))
    x = torch.randn(8, N, N)
    g, g_rolled = (model(pixel_values=v).embeddings for v in (x, torch.roll(x, (3, -2), dims=(1, 2))))
    assert ((g - g_rolled).norm(dim=1) <= 1e-5 * g.norm(dim=1)).all()


def test_filter_power_gives_the_features_as_U_times_class_powers():
    torch.manual_seed(2)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=5, embed_dim=D)).double()
    x = torch.randn(6, N, N, dtype=torch.float64)
    features = model.image_features(x).detach().numpy()
    np.testing.assert_allclose(features, class_powers(x.numpy()) @ model.filter_power().T, rtol=1e-10)
    assert model.representation_matrix().shape == (CLASSES.size, CLASSES.size)


def test_from_solution_realises_the_closed_form_exactly():
    model = SpectralCNNModel.from_solution(SOLUTION)
    M = model.representation_matrix()
    assert population_loss(M, MOMENTS.Q_plus, MOMENTS.R) == pytest.approx(SOLUTION.loss, abs=1e-8)
    assert np.all(np.sort(model.top_pair_energy()) > 1 - 1e-9)  # every filter one sinusoid (or the constant)


def test_no_network_beats_the_closed_form():
    losses = []
    for seed in range(20):
        torch.manual_seed(seed)
        model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=int(4 + seed % 12), embed_dim=D))
        losses.append(population_loss(model.representation_matrix(), MOMENTS.Q_plus, MOMENTS.R))
        U = model.filter_power()
        losses.append(best_head_loss(U, MOMENTS.Q_plus, MOMENTS.R, D))
    assert min(losses) >= SOLUTION.loss - 1e-9 * abs(SOLUTION.loss)


def test_best_head_beats_every_other_head_and_recovers_the_optimum_on_optimal_filters():
    torch.manual_seed(3)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=8, embed_dim=D)).double()
    U = model.filter_power()
    best = best_head(U, MOMENTS.Q_plus, MOMENTS.R, D)
    rng = np.random.default_rng(0)
    for _ in range(20):
        A = rng.normal(size=(D, 8)) * 10 ** rng.uniform(-1, 1)
        assert population_loss(U.T @ A.T @ A @ U, MOMENTS.Q_plus, MOMENTS.R) >= best.loss - 1e-12
    optimal = SpectralCNNModel.from_solution(SOLUTION)
    assert best_head_loss(optimal.filter_power(), MOMENTS.Q_plus, MOMENTS.R, D) == pytest.approx(SOLUTION.loss, abs=1e-8)


def test_the_batch_loss_estimates_the_population_loss():
    torch.manual_seed(4)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=8, embed_dim=D)).double()
    with torch.no_grad():
        model.head.weight.mul_(3.0)
    gen, rng = torch.Generator().manual_seed(0), np.random.default_rng(0)
    values = []
    for _ in range(200):
        x = torch.as_tensor(stationary_images(N, S, 256, rng))
        v1, v2 = make_views(x, [AdditiveNoise(SIGMA2)], gen)
        values.append(model(pixel_values=v1, pixel_values_2=v2).loss.item())
    mean, se = np.mean(values), np.std(values) / math.sqrt(len(values))
    assert abs(mean - population_loss(model.representation_matrix(), MOMENTS.Q_plus, MOMENTS.R)) < 4 * se


# ----------------------------------------------------------------------------------------------
# losses and views
# ----------------------------------------------------------------------------------------------
def _reference_D(z1, z2, mu=1.0):
    """HaoChen et al.'s ``D`` (spectral_contrastive_learning, models/spectral.py), written out as a test oracle."""
    mask1 = (torch.norm(z1, p=2, dim=1) < np.sqrt(mu)).float().unsqueeze(1)
    mask2 = (torch.norm(z2, p=2, dim=1) < np.sqrt(mu)).float().unsqueeze(1)
    z1 = mask1 * z1 + (1 - mask1) * torch.nn.functional.normalize(z1, dim=1) * np.sqrt(mu)
    z2 = mask2 * z2 + (1 - mask2) * torch.nn.functional.normalize(z2, dim=1) * np.sqrt(mu)
    part1 = -2 * torch.mean(z1 * z2) * z1.shape[1]
    square = torch.matmul(z1, z2.T) ** 2
    part2 = torch.mean(torch.triu(square, diagonal=1) + torch.tril(square, diagonal=-1)) * z1.shape[0] / (z1.shape[0] - 1)
    return (part1 + part2) / mu


@pytest.mark.parametrize("scale, mu", [(0.05, 1.0), (0.05, None), (3.0, 1.0), (3.0, 4.0)])
def test_spectral_loss_equals_the_reference(scale, mu):
    torch.manual_seed(5)
    z1, z2 = torch.randn(32, 6, dtype=torch.float64) * scale, torch.randn(32, 6, dtype=torch.float64) * scale
    reference = _reference_D(z1, z2, 1.0 if mu is None else mu)
    if mu is None and scale > 1:
        return  # the clip changes large embeddings; without mu nothing is clipped
    torch.testing.assert_close(spectral_contrastive_loss(z1, z2, mu=mu), reference)


def test_info_nce_prefers_aligned_pairs():
    torch.manual_seed(6)
    z = torch.randn(16, 8)
    aligned = info_nce_loss(z, z + 0.01 * torch.randn_like(z))
    shuffled = info_nce_loss(z, z[torch.randperm(16)])
    assert aligned < shuffled
    assert aligned == pytest.approx(info_nce_loss(z, z + 0.01 * torch.randn_like(z)).item(), abs=0.05)


def test_views_are_drawn_from_the_generator_and_shift_as_documented():
    x = torch.arange(2 * 12 * 12, dtype=torch.float32).reshape(2, 12, 12)
    a = make_views(x, [RandomCyclicShift(), AdditiveNoise(0.1)], torch.Generator().manual_seed(0))
    b = make_views(x, [RandomCyclicShift(), AdditiveNoise(0.1)], torch.Generator().manual_seed(0))
    torch.testing.assert_close(a[0], b[0])
    shifted = RandomCyclicShift()(x, torch.Generator().manual_seed(1))
    assert sorted(shifted[0].flatten().tolist()) == sorted(x[0].flatten().tolist())
    crop = RandomCropShift(2)(x, torch.Generator().manual_seed(2))
    assert crop.shape == (2, 8, 8)
    row0 = crop[0, 0, 0].item()
    assert any(torch.equal(crop[0], x[0, i:i + 8, j:j + 8]) for i in range(5) for j in range(5)) and row0 >= 0


def test_natural_view_pairs_are_shifted_crops_of_one_photo_scaled_to_the_power():
    pairs = natural_view_pairs(10, 2000, 0.0, seed=0, max_shift=2, power=0.3)
    assert pairs.shape == (2000, 2, 10, 10)
    assert np.mean(pairs ** 2) == pytest.approx(0.3, rel=0.25)
    corr = np.corrcoef(pairs[:, 0].ravel(), pairs[:, 1].ravel())[0, 1]
    assert corr > 0.5  # views of the same place


# ----------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------
def test_fit_contrastive_lowers_the_population_loss():
    torch.manual_seed(7)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=8, embed_dim=D))
    before = population_loss(model.representation_matrix(), MOMENTS.Q_plus, MOMENTS.R)
    fit = fit_contrastive(model, lambda b, rng: stationary_images(N, S, b, rng), 300,
                          transforms=[AdditiveNoise(SIGMA2)], lr=1e-2, seed=0, log_every=100)
    after = population_loss(model.representation_matrix(), MOMENTS.Q_plus, MOMENTS.R)
    assert fit.steps == [100, 200, 300] and after < before and after >= SOLUTION.loss


def test_contrastive_trainer_trains_and_the_model_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    rows = [{"pixel_values": img.tolist()} for img in stationary_images(N, S, 256, rng)]
    torch.manual_seed(8)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=N, num_filters=8, embed_dim=D))
    before = population_loss(model.representation_matrix(), MOMENTS.Q_plus, MOMENTS.R)
    args = ContrastiveConfig(output_dir=str(tmp_path / "out"), per_device_train_batch_size=64, num_train_epochs=4,
                             learning_rate=1e-2, report_to="none", save_strategy="no", use_cpu=True,
                             disable_tqdm=True, contrastive_noise_sigma2=SIGMA2, seed=0)
    ContrastiveTrainer(model=model, args=args, train_dataset=rows).train()
    assert population_loss(model.representation_matrix(), MOMENTS.Q_plus, MOMENTS.R) < before
    model.save_pretrained(tmp_path / "model")
    from transformers import AutoModel

    loaded = AutoModel.from_pretrained(tmp_path / "model")
    assert isinstance(loaded, SpectralCNNModel)
    x = torch.randn(3, 1, N, N)
    torch.testing.assert_close(loaded(pixel_values=x).embeddings, model(pixel_values=x).embeddings)


def test_the_experiment_runs_and_trains_towards_the_closed_form(tmp_path):
    from icml26.eval.experiments.waterfill import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], steps=600, patch_pairs=2000, sigma2s=(0.05, 0.2))
    result = run_experiment(RunConfig(out_dir=tmp_path), s)
    m = result.metrics
    assert m["loss_ratio_sigma2_0.05"] > m["random_head_loss_ratio_sigma2_0.05"]
    assert not m["below_L_star_sigma2_0.05"] and not m["below_L_star_sigma2_0.2"]
    assert m["median_top_pair_energy"] > m["median_top_pair_energy_init"]
    assert len(result.claims) == 7 and set(result.figures) == {"filter_spectra", "eigenvalues_and_level",
                                                                "shell_weights_vs_noise", "loss_vs_closed_form"}
    assert "patches" in m


def test_offline_image_sets_are_grey_and_texture_patches_come_from_disjoint_halves():
    pytest.importorskip("skimage")
    from icml26.eval.tasks.waterfill import IMAGE_SETS, image_sets, texture_patches

    sets = image_sets()
    assert set(sets) == set(IMAGE_SETS) and len(sets["lfw_subset"]) == 200 and len(sets["textures"]) == 3
    for images in sets.values():
        for image in images:
            assert image.ndim == 2 and image.min() >= 0 and image.max() <= 1
    top, y = texture_patches(10, 20, seed=0, half="top")
    bottom, _ = texture_patches(10, 20, seed=0, half="bottom")
    assert top.shape == (60, 10, 10) and sorted(set(y.tolist())) == [0, 1, 2]
    np.testing.assert_allclose((top ** 2).mean((1, 2)), 1.0)
    assert not np.allclose(top, bottom)
