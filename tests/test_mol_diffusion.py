"""Multi-objective diffusion with scarce pairs (arXiv 2605.25210): the schedule and sampler against closed forms,
the exact epsilon of the tasks, the scalarised DSM, the two-stage pipeline, the Trainer path, the point mass and the
experiment."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn

from icml26.eval.tasks.mol_diffusion import (
    LAYOUTS,
    ConditionalTasks,
    PointMassEnv,
    ScriptedExpert,
    energy_distance,
    expert_demos,
    mixture_epsilon,
    run_episodes,
)
from icml26.models.mol_diffusion import EpsMLP, EpsMLPConfig
from icml26.training.mol_diffusion import (
    DSMConfig,
    DSMTrainer,
    TwoStageMOL,
    ddim_sample,
    ddim_sampler,
    dsm_loss,
    fit_dsm,
    fit_labeled_only,
    noise_scheduler,
    scalarize,
)


def _pairs(tasks, n, rng):
    cond, target, task = [], [], []
    for k in (0, 1):
        c = tasks.conditions(n, rng)
        cond.append(c)
        target.append(tasks.sample(k, c, rng))
        task.append(np.full(n, k))
    return {"cond": np.concatenate(cond), "target": np.concatenate(target), "task": np.concatenate(task)}


class _GaussianOracle(nn.Module):
    """The exact epsilon of ``x_0 ~ N(0, v I)``: ``sqrt(1 - abar) x_t / (abar v + 1 - abar)``."""

    def __init__(self, v, scheduler, dim=2):
        super().__init__()
        self.v, self.abar = v, scheduler.alphas_cumprod.double()
        self.config = EpsMLPConfig(sample_dim=dim, cond_dim=1)

    def forward(self, sample, timesteps, cond, task=None):
        ab = self.abar[torch.as_tensor(timesteps).long()].to(sample.dtype)
        return type("Out", (), {"sample": (1 - ab).sqrt() * sample / (ab * self.v + 1 - ab)})


# ----------------------------------------------------------------------------------------------
# the schedule and the sampler (diffusers), against closed forms
# ----------------------------------------------------------------------------------------------
def test_add_noise_and_the_cosine_betas_match_their_closed_forms():
    sch = noise_scheduler(100)
    T, s = 100, 0.008
    f = lambda t: math.cos((t / T + s) / (1 + s) * math.pi / 2) ** 2
    betas = torch.tensor([min(1 - f(t + 1) / f(t), 0.999) for t in range(T)], dtype=torch.float64)
    assert torch.allclose(sch.betas.double(), betas, atol=1e-6)
    g = torch.Generator().manual_seed(0)
    x, eps = torch.randn(64, 2, generator=g), torch.randn(64, 2, generator=g)
    t = torch.randint(0, T, (64,), generator=g)
    ab = sch.alphas_cumprod[t][:, None]
    assert torch.equal(sch.add_noise(x, eps, t), ab.sqrt() * x + (1 - ab).sqrt() * eps) or \
        torch.allclose(sch.add_noise(x, eps, t), ab.sqrt() * x + (1 - ab).sqrt() * eps, atol=1e-7, rtol=0)


def _ddim_gain(v, steps, sch):
    """The DDIM map with the Gaussian oracle is ``x_0 = C x_T``: returns (C measured, C by the recursion)."""
    oracle = _GaussianOracle(v, sch, dim=1)
    out = ddim_sample(oracle, sch, torch.zeros(1, 1), steps=steps, x_T=torch.ones(1, 1, dtype=torch.float64))
    ddim, abar = ddim_sampler(sch, steps), sch.alphas_cumprod.double()
    c, ts = 1.0, [int(t) for t in ddim.timesteps]
    for i, t in enumerate(ts):
        ab = abar[t]
        ab_prev = abar[ts[i + 1]] if i + 1 < len(ts) else torch.tensor(1.0, dtype=torch.float64)
        e = (1 - ab).sqrt() / (ab * v + 1 - ab)
        c *= float(ab_prev.sqrt() * (1 - (1 - ab).sqrt() * e) / ab.sqrt() + (1 - ab_prev).sqrt() * e)
    return float(out[0, 0]), c


def test_ddim_with_the_oracle_epsilon_is_affine_and_matches_the_closed_form_recursion():
    sch = noise_scheduler(100)
    oracle = _GaussianOracle(2.0, sch)
    x_T = torch.randn(500, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    a = ddim_sample(oracle, sch, torch.zeros(500, 1), steps=50, x_T=x_T)
    b = ddim_sample(oracle, sch, torch.zeros(500, 1), steps=50, x_T=2 * x_T)
    assert torch.allclose(b, 2 * a, rtol=1e-10, atol=0)                  # linear in x_T: affine with no offset
    measured, recursion = _ddim_gain(2.0, 50, sch)
    assert abs(measured / recursion - 1) < 1e-5
    # a first-order solver: the variance error (C^2 against v) halves when the steps double
    err50 = _ddim_gain(2.0, 50, sch)[0] ** 2 / 2 - 1
    err100 = _ddim_gain(2.0, 100, sch)[0] ** 2 / 2 - 1
    assert -0.06 < err50 < -0.04 and -0.03 < err100 < -0.02
    assert 1.8 < err50 / err100 < 2.2


def test_the_sampler_refuses_more_steps_than_the_schedule_and_clips_when_asked():
    sch = noise_scheduler(100)
    with pytest.raises(ValueError, match="steps"):
        ddim_sampler(sch, 101)
    assert ddim_sampler(sch, 50).timesteps[0] == 99                      # trailing: starts at T - 1
    oracle = _GaussianOracle(100.0, sch)
    out = ddim_sample(oracle, sch, torch.zeros(200, 1), steps=20, clip_sample=0.5,
                      generator=torch.Generator().manual_seed(0))
    assert out.abs().max() <= 0.5 + 1e-6


# ----------------------------------------------------------------------------------------------
# the tasks' exact epsilon
# ----------------------------------------------------------------------------------------------
def _autograd_epsilon(means, sd, x_t, ab):
    """``-sqrt(1 - abar) grad log p_t`` of the noised mixture, by autograd on its density (float64)."""
    x = x_t.clone().requires_grad_(True)
    var = ab[:, None] * sd ** 2 + 1 - ab[:, None]
    comp = torch.distributions.MultivariateNormal(ab.sqrt()[:, None, None] * means,
                                                  var[:, :, None, None] * torch.eye(2, dtype=torch.float64))
    logp = torch.logsumexp(comp.log_prob(x[:, None, :]), 1)
    (grad,) = torch.autograd.grad(logp.sum(), x)
    return -(1 - ab[:, None]).sqrt() * grad


@pytest.mark.parametrize("task", [0, 1])
def test_true_epsilon_is_the_score_of_the_noised_mixture(task):
    tasks, rng = ConditionalTasks(8, seed=3), np.random.default_rng(0)
    sch = noise_scheduler()
    cond = tasks.conditions(300, rng)
    x0 = torch.as_tensor(tasks.sample(task, cond, rng))
    t = torch.as_tensor(rng.integers(0, 100, 300))
    ab = sch.alphas_cumprod[t].double()
    x_t = ab.sqrt()[:, None] * x0 + (1 - ab).sqrt()[:, None] * torch.as_tensor(rng.standard_normal((300, 2)))
    means, sd = tasks.mixture(task, cond)
    ours = tasks.true_epsilon(task, cond, x_t, ab)
    ref = _autograd_epsilon(torch.as_tensor(means), torch.full(means.shape[:2], sd, dtype=torch.float64), x_t, ab)
    assert torch.allclose(ours, ref, atol=1e-10, rtol=0)


def test_the_tasks_read_the_condition_through_one_direction_each():
    tasks, rng = ConditionalTasks(8, seed=1), np.random.default_rng(0)
    u = tasks.directions
    assert np.allclose(np.linalg.norm(u, axis=1), 1.0)
    c = tasks.conditions(50, rng)
    # a move orthogonal to u_0 leaves task 0's conditional unchanged
    w = rng.standard_normal(8)
    w -= (w @ u[0]) * u[0]
    assert np.allclose(tasks.mixture(0, c)[0], tasks.mixture(0, c + w)[0])
    assert not np.allclose(tasks.mixture(1, c)[0], tasks.mixture(1, c + w)[0])


def test_the_weighted_mixture_epsilon_minimises_the_scalarised_dsm_of_task_agnostic_models():
    tasks, rng = ConditionalTasks(8, seed=0), np.random.default_rng(1)
    sch = noise_scheduler()
    n, lam = 20000, 0.3
    cond = tasks.conditions(n, rng)
    t = torch.as_tensor(rng.integers(0, 100, n))
    ab = sch.alphas_cumprod[t].double()
    noise = torch.as_tensor(rng.standard_normal((n, 2)))
    k = rng.random(n) < lam                                            # task 1 with probability lambda
    x0 = np.where(k[:, None], tasks.sample(1, cond, rng), tasks.sample(0, cond, rng))
    x_t = ab.sqrt()[:, None] * torch.as_tensor(x0) + (1 - ab).sqrt()[:, None] * noise

    def risk(eps):
        return float((eps - noise).square().sum(1).mean())

    best = risk(tasks.scalarized_epsilon((1 - lam, lam), cond, x_t, ab))
    for other in ((1.0, 0.0), (0.0, 1.0), (0.5, 0.5), (1 - lam - 0.2, lam + 0.2)):
        assert best < risk(tasks.scalarized_epsilon(other, cond, x_t, ab))
    # and of the per-task experts each alone: the mixture is not either task's epsilon
    assert best < risk(tasks.true_epsilon(0, cond, x_t, ab)) and best < risk(tasks.true_epsilon(1, cond, x_t, ab))


def test_mixture_epsilon_of_one_gaussian_is_linear():
    sch = noise_scheduler()
    x_t = torch.randn(10, 2, dtype=torch.float64)
    ab = sch.alphas_cumprod[torch.arange(10) * 9].double()
    eps = mixture_epsilon(torch.zeros(10, 1, 2, dtype=torch.float64), 0.7, x_t, ab)
    assert torch.allclose(eps, (1 - ab).sqrt()[:, None] * x_t / (ab[:, None] * 0.49 + 1 - ab[:, None]))


def test_energy_distance_is_zero_for_identical_sets_and_grows_with_a_shift():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((300, 2))
    assert energy_distance(a, a) == pytest.approx(0.0, abs=1e-12)
    shifted = [energy_distance(a, a + [d, 0]) for d in (0.1, 0.5, 1.0)]
    assert shifted == sorted(shifted) and shifted[0] > 0


# ----------------------------------------------------------------------------------------------
# the loss
# ----------------------------------------------------------------------------------------------
def _model(**kw):
    torch.manual_seed(0)
    return EpsMLP(EpsMLPConfig(**{"num_tasks": 2, "hidden_size": 16, **kw}))


def test_shared_timesteps_and_noise_give_the_same_dsm_twice_and_the_trained_model_stays_above_the_floor():
    tasks, rng = ConditionalTasks(8, seed=0), np.random.default_rng(0)
    sch = noise_scheduler()
    data = _pairs(tasks, 500, rng)
    x0, cond = torch.as_tensor(data["target"]).float(), torch.as_tensor(data["cond"]).float()
    task = torch.as_tensor(data["task"])
    g = torch.Generator().manual_seed(1)
    t, noise = torch.randint(0, 100, (1000,), generator=g), torch.randn(1000, 2, generator=g)
    model = _model()
    fit_dsm(model, sch, {"x0": x0, "cond": cond, "task": task}, 300, batch_size=64, lr=3e-3)
    with torch.no_grad():
        a = dsm_loss(model, sch, x0, cond, task, t, noise)
        b = dsm_loss(model, sch, x0, cond, task, t, noise)
    assert a.item() == b.item()
    floor = 0.0
    for k in (0, 1):
        rows = task == k
        x_t = sch.add_noise(x0[rows].double(), noise[rows].double(), t[rows])
        eps = tasks.true_epsilon(k, cond[rows], x_t, sch.alphas_cumprod[t[rows]].double())
        floor += float((eps - noise[rows].double()).square().sum(1).sum()) / 1000
    assert floor < a.item()


def test_task_weights_scalarise_the_per_task_means():
    sch = noise_scheduler()
    model = _model()
    g = torch.Generator().manual_seed(0)
    x0, cond = torch.randn(40, 2, generator=g), torch.randn(40, 8, generator=g)
    task = torch.tensor([0] * 10 + [1] * 30)
    t, noise = torch.randint(0, 100, (40,), generator=g), torch.randn(40, 2, generator=g)
    rows = dsm_loss(model, sch, x0, cond, task, t, noise, reduction="none")
    means = torch.stack([rows[:10].mean(), rows[10:].mean()])
    lin = dsm_loss(model, sch, x0, cond, task, t, noise, task_weights=(0.25, 0.75))
    assert torch.allclose(lin, 0.25 * means[0] + 0.75 * means[1])
    cheb = dsm_loss(model, sch, x0, cond, task, t, noise, task_weights=(0.5, 0.5), scalarization="chebyshev",
                    reference_losses=(0.1, 0.2))
    assert torch.allclose(cheb, torch.max(0.5 * (means - torch.tensor([0.1, 0.2]))))
    assert torch.allclose(dsm_loss(model, sch, x0, cond, task, t, noise), rows.mean())
    assert scalarize(torch.tensor([1.0, 3.0]), torch.tensor([0.5, 0.5])).item() == 2.0


def test_the_model_loss_is_the_dsm_on_given_noise_and_save_load_round_trips(tmp_path):
    model = _model(cond_bottleneck=1, num_tasks=0)
    assert model.cond_proj.out_features == 1
    x, c, eps = torch.randn(5, 2), torch.randn(5, 8), torch.randn(5, 2)
    out = model(sample=x, timesteps=torch.arange(5), cond=c, noise=eps)
    assert torch.allclose(out.loss, (eps - out.sample).square().sum(1).mean())
    model.save_pretrained(tmp_path)
    again = EpsMLP.from_pretrained(tmp_path)
    assert again.config.cond_bottleneck == 1
    assert torch.equal(again(sample=x, timesteps=3, cond=c).sample, model(sample=x, timesteps=3, cond=c).sample)


# ----------------------------------------------------------------------------------------------
# the two-stage pipeline
# ----------------------------------------------------------------------------------------------
SMALL = dict(specialist_steps=400, generalist_steps=150, batch_size=64, generalist_batch_size=128, lr=3e-3)


def _small_mol(seed=0, **kw):
    spec = EpsMLPConfig(cond_bottleneck=1, hidden_size=32)
    gen = EpsMLPConfig(num_tasks=2, hidden_size=32)
    return TwoStageMOL(spec, gen, sampler_steps=20, seed=seed, **{**SMALL, **kw})


def test_stage_two_never_reads_the_targets_of_the_condition_only_set():
    tasks, rng = ConditionalTasks(8, seed=0), np.random.default_rng(0)
    paired, unlabeled = _pairs(tasks, 40, rng), _pairs(tasks, 100, rng)
    unlabeled["target"][:] = np.nan
    mol = _small_mol().fit(paired, unlabeled)
    assert len(mol.pseudo_) == 200 and np.isfinite(np.asarray(mol.pseudo_["target"])).all()
    assert set(mol.fits_) == {"specialist 0", "specialist 1", "generalist"}
    # the score-regression variant and the real pairs run too
    other = _small_mol(variant="score_regression", include_real_pairs=True, pseudo_draws=2).fit(paired, unlabeled)
    assert len(other.pseudo_) == 400 and torch.isfinite(other.sample(paired["cond"][:5], 0)).all()


def test_pseudo_samples_at_a_task_zero_condition_cover_both_modes_and_differ_across_seeds():
    tasks, rng = ConditionalTasks(8, seed=0), np.random.default_rng(0)
    paired = _pairs(tasks, 64, rng)
    c = np.repeat(tasks.conditions(1, rng), 200, 0)
    draws = []
    for seed in (0, 1):
        mol = _small_mol(seed=seed, specialist_steps=1500).fit_specialists(paired)
        x = mol.pseudo_label({"cond": c, "task": np.zeros(200, dtype=int)})["target"]
        draws.append(np.asarray(x))
    for x in draws:
        assert (x[:, 1] > 0.4).mean() > 0.2 and (x[:, 1] < -0.4).mean() > 0.2     # both modes (+-0.8)
    assert not np.allclose(draws[0], draws[1])


def test_the_labelled_only_baseline_stops_early_on_held_out_pairs():
    tasks, rng = ConditionalTasks(8, seed=0), np.random.default_rng(0)
    paired = _pairs(tasks, 30, rng)
    model, fit = fit_labeled_only(EpsMLPConfig(num_tasks=2, hidden_size=32), paired, steps=200, eval_every=20, lr=3e-3)
    assert fit.val_steps == list(range(20, 201, 20))
    assert fit.best_step == fit.val_steps[int(np.argmin(fit.val_losses))]
    assert not model.training


def test_dsm_trainer_trains_with_the_configs_scalarisation_and_ema(tmp_path):
    import datasets
    from transformers import HfArgumentParser

    (cfg,) = HfArgumentParser(DSMConfig).parse_args_into_dataclasses(
        ["--output_dir", str(tmp_path), "--task_weights", "0.5", "0.5", "--ema_decay", "0.9", "--max_steps", "30",
         "--per_device_train_batch_size", "32", "--learning_rate", "3e-3", "--report_to", "none", "--save_strategy",
         "no", "--logging_steps", "10", "--use_cpu", "true"])
    assert cfg.task_weights == [0.5, 0.5] and cfg.scalarization == "linear"
    tasks, rng = ConditionalTasks(8, seed=0), np.random.default_rng(0)
    data = _pairs(tasks, 200, rng)
    ds = datasets.Dataset.from_dict({k: v.tolist() for k, v in data.items()})
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    trainer = DSMTrainer(model=model, args=cfg, train_dataset=ds, eval_dataset=ds.select(range(64)))
    trainer.train()
    ema = trainer.callback_handler.callbacks[-1].ema.ema_model
    after = model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in after)
    assert all(torch.equal(after[k], ema.state_dict()[k]) for k in after)   # the EMA weights were loaded
    assert math.isfinite(trainer.evaluate()["eval_loss"])


# ----------------------------------------------------------------------------------------------
# the point mass
# ----------------------------------------------------------------------------------------------
def test_the_point_mass_env_passes_gymnasiums_checker_and_the_expert_reaches_every_goal():
    from gymnasium.utils.env_checker import check_env

    for layout in range(len(LAYOUTS)):
        env = PointMassEnv(layout)
        check_env(env, skip_render_check=True)
        rng = np.random.default_rng(layout)
        for side in (-1.0, 1.0):
            obs, _ = env.reset(seed=layout)
            expert = ScriptedExpert(layout, np.array([side]))
            for _ in range(80):
                obs, reward, terminated, truncated, info = env.step(expert(obs[None, :2], obs[None, 2:])[0])
                if terminated or truncated:
                    break
            assert info["success"] and reward == 1.0
        demos = expert_demos(layout, 4, rng)
        assert demos["cond"].shape[1] == 8 and demos["target"].shape[1] == 16


def test_run_episodes_replays_a_chunked_expert_and_counts_collisions():
    layout = 0
    straight = lambda cond: np.tile(np.array([1.0, 0.0]), (len(cond), 8))      # straight into the obstacle
    out = run_episodes(layout, straight, 10, np.random.default_rng(0))
    assert not out["success"].any() and out["states"].shape[1] == 8


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
def test_the_quick_experiment_makes_its_claims(tmp_path):
    from icml26.eval.experiments.mol_diffusion import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    result = run_experiment(RunConfig(out_dir=tmp_path), SETTINGS["quick"])
    assert len(result.claims) == 3
    assert all(c.holds for c in result.claims), [(c.statement, c.measured, c.reference) for c in result.claims]
    m = result.metrics
    assert m["claim1"]["two_stage"] < m["claim1"]["labeled_only"]
    for k in (0, 1):
        assert m["floor"][k] < m["two_stage"][f"task {k}"]["dsm"]
    assert set(result.figures) == {"held_out_dsm", "samples"}


def test_the_full_experiment_runs_every_arm_at_a_small_size(tmp_path):
    from icml26.eval.experiments import mol_diffusion as exp
    from icml26.runner import RunConfig

    s = dataclasses.replace(exp.SETTINGS["full"], n_pairs=24, n_unlabeled=64, steps=30, generalist_steps=30,
                            pseudo_draws=1, sampler_steps=5, large_n=48, lambdas=(0.0, 1.0), policy=False)
    result = run_experiment_small = exp.run_experiment(RunConfig(out_dir=tmp_path, mode="full"), s)
    assert len(run_experiment_small.claims) == 4
    assert [p["lambda"] for p in result.metrics["pareto"]] == [0.0, 1.0]
    assert {"bottleneck-free specialists", "score-regression variant"} <= set(result.metrics)
    assert "pareto_front" in result.figures


@pytest.mark.slow
def test_the_pareto_front_trades_the_tasks_off(tmp_path):
    from icml26.eval.experiments import mol_diffusion as exp
    from icml26.runner import RunConfig

    s = dataclasses.replace(exp.SETTINGS["quick"], lambdas=(0.0, 0.5, 1.0))
    front = exp.run_experiment(RunConfig(out_dir=tmp_path), s).metrics["pareto"]
    assert front[0]["L0"] < front[1]["L0"] + 0.02 < front[2]["L0"] + 0.04
    assert front[0]["L1"] + 0.04 > front[1]["L1"] + 0.02 > front[2]["L1"]
