"""Bad input to synthetic data loops (generators, verifiers, policies, the loop, the metrics and tasks): each probe
is one wrong value in an otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
from probes import Probe, check, ids
from sklearn.linear_model import LogisticRegression

from icml26.eval.tasks import infoloop as tasks
from icml26.training.infoloop import (
    CategoricalMLE,
    ExactVerifier,
    GameableVerifier,
    GaussianMLE,
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

POOL = np.random.default_rng(0).random((20, 4))
CORRECT = label_correctness(np.zeros(20, dtype=int), 10)


def _gaussian_loop_with_a_label_verifier():
    return SyntheticLoop(GaussianMLE(), Verify(ExactVerifier(CORRECT)), 1, seed=0).run(np.random.default_rng(1).random(20))


PROBES = [
    Probe("MixReal-rho-above-one", lambda: MixReal(1.5, np.zeros(3)), "rho"),
    Probe("NoisyVerifier-eta-negative", lambda: NoisyVerifier(CORRECT, -0.1), "eta"),
    Probe("NoisyVerifier-eta-above-one", lambda: NoisyVerifier(CORRECT, 1.2), "eta"),
    Probe("label_correctness-samples-not-labels", _gaussian_loop_with_a_label_verifier, "samples"),
    Probe("GameableVerifier-samples-not-labels",
          lambda: GameableVerifier(lambda s: np.zeros(len(s), bool), 10)(np.zeros(3), 1, 0), "samples"),
    Probe("SyntheticLoop-rounds-zero", lambda: SyntheticLoop(GaussianMLE(), Replace(), 0), "rounds"),
    Probe("SyntheticLoop-policy-short-rates",
          lambda: SyntheticLoop(GaussianMLE(), Verify(RandomVerifier(CORRECT, [0.5, 0.5])), 3), "policy"),
    Probe("SyntheticLoop-generator-no-sample", lambda: SyntheticLoop(object(), Replace(), 1), "generator"),
    Probe("RandomVerifier-rates-above-one", lambda: RandomVerifier(CORRECT, [0.5, 1.5]), "rates"),
    Probe("Verify-verifier-not-a-verifier", lambda: Verify(lambda s: s), "verifier"),
    Probe("RewardWeighted-temperature-zero", lambda: RewardWeighted(ExactVerifier(CORRECT), 0.0), "temperature"),
    Probe("Rubric-score-not-callable", lambda: Rubric(3.0), "score"),
    Probe("ExactVerifier-correct-not-callable", lambda: ExactVerifier([True]), "correct"),
    Probe("GaussianMLE.fit-data-one-sample", lambda: GaussianMLE().fit(np.ones(1)), "data"),
    Probe("CategoricalMLE.fit-data-out-of-range", lambda: CategoricalMLE(3).fit(np.array([0, 3])), "data"),
    Probe("LinearStudent.fit-data-wrong-width", lambda: LinearStudent(3).fit((np.ones((5, 2)), np.ones(5))), "data"),
    Probe("LabelSampler-estimator-no-proba", lambda: LabelSampler(object(), POOL, 10), "estimator"),
    Probe("LabelSampler-sample-unknown", lambda: LabelSampler(LogisticRegression(), POOL, 10, sample="top"), "sample"),
    Probe("tasks.mutual_information-y-floats", lambda: tasks.mutual_information(np.ones(3) / 2, np.ones(3, int)),
          "y"),
    Probe("tasks.mutual_information-correction-unknown",
          lambda: tasks.mutual_information(np.ones(3, int), np.ones(3, int), correction="jackknife"), "correction"),
    Probe("tasks.paired_bootstrap-b-other-length", lambda: tasks.paired_bootstrap(np.ones(4), np.ones(3)), "b"),
    Probe("tasks.paired_bootstrap-level-one", lambda: tasks.paired_bootstrap(np.ones(4), level=1.0), "level"),
    Probe("tasks.entropy-p-negative", lambda: tasks.entropy([0.5, -0.1]), "p"),
    Probe("tasks.kl_divergence-q-other-length", lambda: tasks.kl_divergence([0.5, 0.5], [1.0]), "q"),
    Probe("tasks.zipf-K-zero", lambda: tasks.zipf(0), "K"),
    Probe("tasks.digits_split-pool-too-large", lambda: tasks.digits_split(0, pool=5000), "pool"),
    Probe("tasks.bits_per_gain-bits-negative", lambda: tasks.bits_per_gain(-1.0, 0.1), "bits"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
