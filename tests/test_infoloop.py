"""Synthetic data loops: the closed-form rates of prior work (Gaussian, categorical, linear regression), the
information measures, the verifiers' independence and leak guard, and the experiment end to end (shrunk)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from icml26.eval.tasks.infoloop import (
    accuracy,
    digits_split,
    entropy,
    kl_divergence,
    linear_teacher,
    mutual_information,
    paired_bootstrap,
    support_size,
    tail_mass,
    total_variation,
    zipf,
)
from icml26.training.infoloop import (
    Accumulate,
    CategoricalMLE,
    ExactVerifier,
    GameableVerifier,
    GaussianMLE,
    Labels,
    LabelSampler,
    LinearStudent,
    MixReal,
    NoisyVerifier,
    RandomVerifier,
    Replace,
    RewardWeighted,
    Rubric,
    SyntheticLoop,
    Verify,
    label_correctness,
)


def _gaussian_variances(n, fits, runs, unbiased=False, seed=0):
    out = np.empty(runs)
    for k in range(runs):
        rng = np.random.default_rng([seed, k])
        loop = SyntheticLoop(GaussianMLE(unbiased), Replace(), fits - 1, seed=[seed, k, 1])
        loop.run(rng.standard_normal(n))
        out[k] = loop.model.var
    return out


def test_the_gaussian_mle_loop_shrinks_the_variance_at_the_closed_form_rate():
    var = _gaussian_variances(50, 50, 200)
    se = var.std(ddof=1) / math.sqrt(len(var))
    assert abs(var.mean() - (49 / 50) ** 50) <= 3 * se                   # E sigma_50^2 = (49/50)^50 = 0.3642
    # P(sigma_50 < sigma_0) = P(sum of 50 log(chi2_49 / 50) < 0), by a large Monte Carlo of the closed form
    chi = np.random.default_rng(1).chisquare(49, size=(200_000, 50))
    p = float((np.log(chi / 50).sum(1) < 0).mean())
    share = float((var < 1.0).mean())
    assert abs(share - p) <= 3 * math.sqrt(p * (1 - p) / len(var))


def test_the_unbiased_refit_keeps_the_mean_while_the_median_falls():
    var = _gaussian_variances(50, 50, 200, unbiased=True, seed=2)
    assert abs(var.mean() - 1.0) <= 3 * var.std(ddof=1) / math.sqrt(len(var))
    assert np.median(var) < 0.8


def test_categorical_replace_never_grows_its_support_and_loses_entropy():
    truth = zipf(100)
    fell = 0
    for k in range(200):
        initial = np.random.default_rng([3, k]).choice(100, size=500, p=truth)
        loop = SyntheticLoop(CategoricalMLE(100), Replace(), 50, seed=[4, k],
                             evaluate=lambda g, t: {"support": support_size(g.probs), "entropy": entropy(g.probs)})
        h = loop.run(initial)
        support = h.series("support")
        assert all(b <= a for a, b in zip(support, support[1:]))         # absorbing: a lost category never returns
        fell += h.series("entropy")[-1] < h.series("entropy")[0]
    assert fell >= 0.95 * 200


def test_accumulate_with_the_real_sample_never_loses_a_category_of_the_first_model():
    truth = zipf(100)
    initial = np.random.default_rng(5).choice(100, size=500, p=truth)
    h = SyntheticLoop(CategoricalMLE(100), Accumulate(), 50, seed=6,
                      evaluate=lambda g, t: {"seen": set(np.flatnonzero(g.probs).tolist())}).run(initial)
    first = h.rounds[0]["seen"]
    assert all(first <= r["seen"] for r in h.rounds)


def test_linear_regression_replace_grows_linearly_and_accumulate_stays_bounded():
    risk = {"replace": [], "accumulate": []}
    for k in range(20):
        teacher = linear_teacher(10, 1.0, seed=[7, k])
        initial = teacher.sample(100, [8, k])
        for name, policy in (("replace", Replace()), ("accumulate", Accumulate())):
            h = SyntheticLoop(LinearStudent(10, 1.0), policy, 9, seed=[9, k],
                              evaluate=lambda g, t: {"risk": teacher.excess_risk(g.w)}).run(initial)
            risk[name].append(h.series("risk"))
    r = {name: np.asarray(v) for name, v in risk.items()}
    first = r["replace"][:, 0]
    assert abs(first.mean() - 10 / (100 - 10 - 1)) <= 3 * first.std(ddof=1) / math.sqrt(len(first))   # 0.1124
    assert np.median(r["replace"][:, 9]) / np.median(r["replace"][:, 0]) > 3                        # theory 10
    assert np.median(r["accumulate"][:, 9]) / np.median(r["accumulate"][:, 0]) < math.pi ** 2 / 6  # theory 1.55


def test_mix_real_keeps_the_asked_share_of_real_rows():
    real = np.full(100, 7)
    policy = MixReal(0.3, real)
    out = policy(np.zeros(100, dtype=int), {}, 1, 0)
    assert len(out) == 100 and (out == 7).sum() == 30


# ----------------------------------------------------------------------------------------------
# information measures and verifiers
# ----------------------------------------------------------------------------------------------
def test_mutual_information_is_zero_for_independent_labels_and_the_entropy_for_the_identity():
    rng = np.random.default_rng(10)
    y = rng.integers(0, 10, 20_000)
    assert abs(mutual_information(y, rng.integers(0, 10, 20_000))) < 0.01
    assert mutual_information(y, y) == pytest.approx(math.log2(10), abs=0.01)
    a, b = y[:200], rng.integers(0, 10, 200)     # small and independent: the raw plug-in is biased upward
    raw, corrected = mutual_information(a, b, correction="none"), mutual_information(a, b)
    cells = len(set(zip(a.tolist(), b.tolist())))
    assert raw - corrected == pytest.approx((cells - 10 - 10 + 1) / (2 * 200 * math.log(2)))
    assert raw > 0.2 and abs(corrected) < raw / 2


def test_distribution_metrics_closed_forms():
    p = np.array([0.5, 0.25, 0.25, 0.0])
    assert entropy(p) == pytest.approx(1.5)
    assert support_size(p) == 3
    assert tail_mass(p, [0.1, 0.3, 0.3, 0.3], 0.2) == pytest.approx(0.5)
    assert kl_divergence(p, [0.25] * 4) == pytest.approx(0.5)
    assert kl_divergence([0.25] * 4, p) == math.inf
    assert total_variation(p, [0.25] * 4) == pytest.approx(0.25)
    assert accuracy([1, 2, 3], [1, 2, 0]) == pytest.approx(2 / 3)


def test_paired_bootstrap_covers_a_known_difference():
    rng = np.random.default_rng(11)
    a = rng.random(2000) < 0.8
    b = a & (rng.random(2000) < 0.9)       # b is a minus about 8 points
    iv = paired_bootstrap(a, b, seed=0)
    assert iv.low < iv.estimate < iv.high and iv.low > 0.05 and iv.high < 0.11


def _pool(n=600, seed=12):
    split = digits_split(seed, labelled=100, pool=n)
    return split, label_correctness(split.y_pool, 10)


def test_a_noisy_verifier_at_one_half_is_independent_of_correctness():
    from scipy.stats import chi2_contingency

    split, correct = _pool()
    samples = Labels(split.x_pool, np.random.default_rng(13).integers(0, 10, len(split.x_pool)),
                     np.arange(len(split.x_pool)))
    truth = correct(samples)
    accept = NoisyVerifier(correct, 0.5)(samples, 1, 14)
    table = np.array([[np.sum(a & t) for t in (truth, ~truth)] for a in (accept, ~accept)])
    assert chi2_contingency(table)[1] > 0.01
    exact = ExactVerifier(correct)
    assert (exact(samples, 1, 0) == truth).all() and exact.last["mi_accept_correct"] > 0.3


def test_a_closed_loop_never_reads_the_truth():
    from sklearn.linear_model import LogisticRegression

    split, _ = _pool()

    def forbidden(samples):
        raise AssertionError("the closed loop read a pool label")

    gen = LabelSampler(LogisticRegression(max_iter=300), split.x_pool, 10)
    initial = Labels(split.x_labelled, split.y_labelled, np.full(100, -1))
    history = SyntheticLoop(gen, Replace(), 2, seed=0).run(initial)
    assert len(history.rounds) == 3 and history.bits_injected() == 0
    with pytest.raises(AssertionError, match="read a pool label"):
        SyntheticLoop(gen, Verify(ExactVerifier(forbidden)), 1, seed=0).run(initial)


def test_verified_policies_keep_what_the_verifier_accepts():
    from sklearn.linear_model import LogisticRegression

    split, correct = _pool()
    gen = LabelSampler(LogisticRegression(max_iter=300), split.x_pool, 10, flag=True)
    initial = Labels(split.x_labelled, split.y_labelled + 10 * (np.arange(100) % 2), np.full(100, -1))
    gen.fit(initial)
    samples = gen.sample(len(split.x_pool), 15)
    kept = Verify(GameableVerifier(correct, 10))(samples, {}, 1, 16)
    assert ((kept.action >= 10) | correct(kept)).all()
    weighted = RewardWeighted(ExactVerifier(correct), temperature=0.05)(samples, {}, 1, 17)
    assert correct(weighted).mean() > correct(samples).mean()
    rubric = Rubric(lambda s: (s.action < 10).astype(float))(samples, {}, 1, 18)
    assert (rubric.action < 10).all()
    random = RandomVerifier(correct, [0.5])
    random(samples, 1, 19)
    assert abs(random.last["acceptance"] - 0.5) < 0.08 and random.last["mi_accept_correct"] < 0.01


# ----------------------------------------------------------------------------------------------
# the experiment (shrunk)
# ----------------------------------------------------------------------------------------------
def test_the_experiment_runs_every_arm_and_its_claims_come_from_the_runs(tmp_path):
    from icml26.eval.experiments.infoloop import SETTINGS, run_experiment
    from icml26.runner import RunConfig

    s = dataclasses.replace(SETTINGS["quick"], rounds=2, pool=300, bootstrap=200, gaussian_seeds=20,
                            gaussian_generations=10, zipf_generations=5, linear_seeds=5, linear_generations=3)
    result = run_experiment(RunConfig(out_dir=tmp_path), s)
    m = result.metrics
    assert len(result.claims) == 8
    assert result.claims[0].measured == m["gain_exact"]["low"] and result.claims[1].measured == m["gain_closed"]["high"]
    arms = {row["arm"] for row in result.tables["digits loops: accuracy, information and bits"]}
    assert arms == {"closed", "exact", "eta = 0.2", "eta = 0.4", "random", "gameable", "argmax (closed)"}
    assert m["digits"]["logistic"]["closed"]["bits"] == [0.0]
    assert set(result.figures) == {"gaussian_variance", "zipf_and_regression", "accuracy_and_information",
                                   "gain_vs_information", "proxy_vs_truth"}


def test_one_round_of_the_language_model_loop_fine_tunes_on_verified_completions(tmp_path):
    from icml26.eval.tasks.infoloop import addition_pairs
    from icml26.tiny import build_word_tokenizer, tiny_model_for_tokenizer
    from icml26.training.infoloop import SyntheticLoopConfig, SyntheticLoopTrainer, addition_correct

    pairs = addition_pairs(48, seed=0)
    tokenizer = build_word_tokenizer([p + c for p, c in pairs])
    model = tiny_model_for_tokenizer(tokenizer, hidden_size=32, num_layers=1, intermediate_size=64, seed=0)
    args = SyntheticLoopConfig(output_dir=str(tmp_path), loop_rounds=1, samples_per_prompt=2, loop_max_new_tokens=3,
                               max_steps=3, per_device_train_batch_size=16, learning_rate=1e-3, report_to="none",
                               save_strategy="no", use_cpu=True, disable_tqdm=True, seed=0)
    seen = []
    trainer = SyntheticLoopTrainer(model, args, tokenizer, {"prompt": [p for p, _ in pairs], "completion":
                                                           [c for _, c in pairs]}, [p for p, _ in pairs[:8]],
                                   correct=lambda s: seen.append(len(s[0])) or addition_correct(s))
    history = trainer.train()
    assert [r["round"] for r in history.rounds] == [0, 1] and seen == [16]      # 8 prompts x 2 samples, verified
    row = history.rounds[1]
    assert row["n_train"] == round(row["acceptance"] * 16) and 0 <= row["acceptance"] <= 1
    assert trainer.generator.fits == 1 + (row["n_train"] > 0)
    assert addition_correct((np.array(["12+30="], object), np.array(["42"], object))).tolist() == [True]
    import copy

    with pytest.raises(ValueError, match="CausalLMGenerator: copy"):   # a copy would train weights nobody reads
        copy.deepcopy(trainer.generator)
