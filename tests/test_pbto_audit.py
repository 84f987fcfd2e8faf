"""PBTO persistence audit: the class-incremental learners, poisoning, triggers, defences and the audit, on small
slices of the digits streams (a few epochs) so the whole file runs in well under a minute."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml26.eval.tasks.pbto import (
    AnchoredTrigger,
    ActivationClusteringFilter,
    PatchTrigger,
    PersistenceAudit,
    SpectralSignatureFilter,
    attack_success_rate,
    digits_streams,
    fisher_drift_overlap,
    half_life,
    poison,
    poison_indices,
)
from icml26.training.pbto import CILConfig, Finetune, ICaRL, LwF, herding


@pytest.fixture(scope="module")
def streams():
    return digits_streams(seed=0)


def _short(stream, tasks):
    from icml26.eval.tasks.pbto import CILStream

    return CILStream(stream.tasks[:tasks], stream.target)


def test_the_streams_put_the_target_first_and_the_proxy_apart(streams):
    victim, proxy = streams
    assert len(victim) == 5 and len(proxy) == 3 and victim.tasks[0].classes[0] == 0
    assert victim.tasks[0].classes == proxy.tasks[0].classes
    assert sorted(c for t in victim.tasks for c in t.classes) == list(range(10))
    for t, task in enumerate(victim.tasks):
        assert set(task.y_train.tolist()) == {2 * t, 2 * t + 1}
        assert float(task.x_train.min()) >= 0 and float(task.x_train.max()) <= 1
    # proxy images are shifted one pixel: their first row and column are empty
    assert float(proxy.tasks[0].x_train[..., 0, :].abs().max()) == 0
    again, _ = digits_streams(seed=0)
    assert torch.equal(again.tasks[3].x_test, victim.tasks[3].x_test)


def test_poisoning_takes_exactly_round_rate_n_non_target_rows_fixed_by_the_seed(streams):
    task = streams[0].tasks[0]
    rows = poison_indices(task.y_train, 0, 0.1, seed=5)
    assert len(rows) == round(0.1 * len(task.y_train)) and bool((task.y_train[rows] != 0).all())
    assert torch.equal(rows, poison_indices(task.y_train, 0, 0.1, seed=5))
    assert not torch.equal(rows, poison_indices(task.y_train, 0, 0.1, seed=6))
    x, y, flags = poison(task.x_train, task.y_train, PatchTrigger(), 0, 0.1, seed=5)
    assert torch.equal(torch.nonzero(flags).flatten(), rows) and bool((y[rows] == 0).all())
    assert torch.equal(x[~flags], task.x_train[~flags]) and bool((x[rows][..., -2:, -2:] == 1).all())


def test_asr_leaves_target_images_out():
    images = torch.rand(6, 1, 8, 8)
    labels = torch.tensor([0, 0, 1, 1, 1, 1])
    always_target = attack_success_rate(lambda x: torch.zeros(len(x), dtype=torch.long), images, labels,
                                        PatchTrigger(), 0)
    never = attack_success_rate(lambda x: torch.ones(len(x), dtype=torch.long), images, labels, PatchTrigger(), 0)
    assert always_target == 1.0 and never == 0.0
    seen = []
    attack_success_rate(lambda x: seen.append(len(x)) or torch.zeros(len(x), dtype=torch.long), images, labels,
                        PatchTrigger(), 0)
    assert seen == [4]


def test_herding_follows_the_running_mean_and_quotas_keep_a_prefix():
    g = torch.Generator().manual_seed(0)
    F = torch.randn(30, 5, generator=g)
    order = herding(F, 30)
    assert sorted(order.tolist()) == list(range(30))            # no row twice
    assert torch.equal(herding(F, 7), order[:7])                # a smaller quota is a prefix
    phi = torch.nn.functional.normalize(F.double(), dim=1)
    first = int(((phi - phi.mean(0)).norm(dim=1)).argmin())      # the row closest to the mean comes first
    assert int(order[0]) == first


def test_icarl_keeps_its_budget_and_quotas_across_rebuilds_and_its_init_is_seeded(streams):
    victim = _short(streams[0], 3)
    learner = ICaRL(CILConfig(epochs=2, memory_size=12, seed=3))
    for t, task in enumerate(victim.tasks):
        learner.fit_task(task.x_train, task.y_train)
        quota = 12 // (2 * (t + 1))
        assert all(len(v) == quota for v in learner.memory.values()) and len(learner.memory) == 2 * (t + 1)
    # each old class kept the prefix of its own herding order through both rebuilds
    assert torch.equal(learner.memory_history[2][0], learner.memory_history[0][0][:2])
    assert len(learner.checkpoints) == 3 and learner.checkpoints[-1].class_means.shape == (6, 64)
    twin = ICaRL(CILConfig(epochs=2, memory_size=12, seed=3)).fit_task(victim.tasks[0].x_train,
                                                                       victim.tasks[0].y_train)
    for a, b in zip(twin.checkpoints[0].model.parameters(), learner.checkpoints[0].model.parameters()):
        assert torch.equal(a, b)
    assert learner.protocol()["memory_protocol"] == "fixed_total" and learner.protocol()["inference"] == "nme"


def test_lwf_and_finetune_have_no_memory_and_predict_from_logits(streams):
    task = streams[0].tasks[0]
    for cls, loss in ((LwF, "bce_distill"), (Finetune, "ce")):
        learner = cls(epochs=2).fit_task(task.x_train, task.y_train)
        assert learner.memory == {} and learner.checkpoints[0].class_means is None
        assert learner.protocol()["loss"] == loss
        assert learner.predict(task.x_test).shape == task.y_test.shape


def test_a_memory_hook_sees_each_new_class_and_what_it_drops_is_never_stored(streams):
    task = streams[0].tasks[0]
    seen = []

    def hook(model, images, label):
        seen.append((label, len(images)))
        keep = torch.ones(len(images), dtype=torch.bool)
        keep[:5] = False
        return keep

    learner = ICaRL(CILConfig(epochs=1, memory_size=200), memory_hook=hook).fit_task(task.x_train, task.y_train)
    assert [s[0] for s in seen] == [0, 1]
    for cls in (0, 1):
        rows = torch.nonzero(task.y_train == cls).flatten()
        assert not set(rows[:5].tolist()) & set(learner.memory[cls].tolist())
        assert len(learner.memory[cls]) == len(rows) - 5


def test_pgd_stays_in_the_ball_stamps_raw_pixels_and_each_component_changes_delta(streams, monkeypatch):
    victim, proxy = streams
    proxy = _short(proxy, 2)
    first = victim.tasks[0]
    source = first.x_train[first.y_train != 0]
    factory = lambda: ICaRL(CILConfig(epochs=2, seed=1))  # noqa: E731
    inputs = []
    from icml26.models.pbto import SmallConvNet

    original = SmallConvNet.forward_with_features

    def spy(self, pixel_values, layers=("pooled",)):
        inputs.append((float(pixel_values.detach().min()), float(pixel_values.detach().max())))
        return original(self, pixel_values, layers)

    monkeypatch.setattr(SmallConvNet, "forward_with_features", spy)
    full = AnchoredTrigger.preset("full", steps=8, rounds=1, seed=0).fit(factory, proxy, source)
    monkeypatch.setattr(SmallConvNet, "forward_with_features", original)
    assert all(lo >= 0 and hi <= 1 for lo, hi in inputs)          # PGD feeds raw pixels in [0, 1]
    assert len(full.linf_) == 2 and all(n <= 0.2 + 1e-7 for r in full.linf_ for n in r)
    assert len(full.trajectory_asr_) == 2
    stamped = full.stamp(source)
    assert float(stamped.min()) >= 0 and float(stamped.max()) <= 1
    assert torch.allclose(stamped, (source + full.delta_).clamp(0, 1))
    no_anchor = AnchoredTrigger.preset("full", steps=8, rounds=1, seed=0, anchor_weight=0.0).fit(factory, proxy,
                                                                                                   source)
    last = AnchoredTrigger.preset("full", steps=8, rounds=1, seed=0, checkpoints="last").fit(factory, proxy, source)
    assert not torch.equal(no_anchor.delta_, full.delta_) and not torch.equal(last.delta_, full.delta_)


def test_every_refinement_round_retrains_from_the_same_init(streams):
    victim, proxy = streams
    first = victim.tasks[0]
    inits = []

    def factory():
        learner = ICaRL(CILConfig(epochs=1, seed=7))
        learner._init_model(1)
        inits.append(torch.cat([p.detach().flatten() for p in learner.model.parameters()]))
        return learner

    AnchoredTrigger(steps=2, rounds=2, seed=0).fit(factory, _short(proxy, 1), first.x_train[first.y_train != 0])
    assert len(inits) == 3 and all(torch.equal(inits[0], i) for i in inits[1:])


def test_the_spectral_filter_catches_a_planted_off_direction_cluster():
    rng = np.random.default_rng(0)
    clean = rng.normal(size=(90, 16))
    planted = rng.normal(size=(10, 16)) * 0.3 + 4.0 * np.eye(16)[3]
    F = np.vstack([clean, planted])
    keep = SpectralSignatureFilter(eps_bound=0.1).keep(F)
    assert not keep[90:].any() and keep.sum() == 100 - 15
    clustered = ActivationClusteringFilter(n_components=5).keep(F)
    assert not clustered[90:].any() and clustered[:90].sum() >= 70   # the planted cluster goes, most clean rows stay
    assert ActivationClusteringFilter(n_components=5).keep(clean).all()   # no small cluster: nothing dropped


def test_half_life_counts_tasks_until_the_asr_falls_below_half():
    assert half_life([1.0, 0.8, 0.4, 0.2]) == 2 and half_life([0.3, 0.9]) == 0
    assert half_life([0.9, 0.8, 0.7]) is None and half_life([0.1, 0.9, 0.2], start=1) == 1


def test_the_audit_pairs_a_poisoned_and_a_clean_run_and_counts_poisoned_exemplars(streams):
    victim = _short(streams[0], 2)
    audit = PersistenceAudit(lambda hook: ICaRL(CILConfig(epochs=3, memory_size=40, seed=2), memory_hook=hook),
                             victim, PatchTrigger(size=3), rate=0.1, seed=1)
    report = audit.run()
    assert report.poisoned == round(0.1 * len(victim.tasks[0].y_train)) == int(audit.poison_flags_.sum())
    assert len(report.asr) == len(report.clean_asr) == len(report.ba) == 2
    target_rows = audit.learner_.memory_history[0][0]
    assert report.target_memory_poisoned[0] == int(audit.poison_flags_[target_rows].sum())
    assert report.protocol["learner"] == "ICaRL" and set(report.cka) == {"layer1", "layer2", "layer3", "pooled"}
    assert report.cka["layer1"][0] == pytest.approx(1.0)
    assert report.asr[0] > report.clean_asr[0]                   # a 3x3 white patch implants in 3 epochs


def test_fisher_drift_overlap_is_a_share_and_zero_drift_is_all_stable(streams):
    task = streams[0].tasks[0]
    learner = Finetune(epochs=1).fit_task(task.x_train, task.y_train)
    model = learner.checkpoints[0].model
    share = fisher_drift_overlap(model, model, task.x_train[:20], task.y_train[:20], 0.1)
    assert 0.0 <= share <= 1.0


def test_the_quick_experiment_makes_its_claims(tmp_path):
    from icml26.eval.experiments.pbto import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    result = run_experiment(RunConfig(out_dir=tmp_path), SETTINGS["quick"])
    assert [c.holds for c in result.claims] == [True, True, True]
    assert result.metrics["implant_test"]["p"] < 0.01                              # claim 1, asserted
    assert set(result.figures) == {"persistence", "cka"}
