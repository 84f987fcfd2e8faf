"""Bad input to Robust Halpern Iteration (uncertainty sets, robust MDPs and their generators, the generative
model, the MLMC helpers and oracles, the exact iterations and the learner): each probe is one wrong value in an
otherwise valid call, and must be refused clearly."""

from __future__ import annotations

import numpy as np
import pytest
from probes import Probe, check, ids

from icml26.training import rhi as rl

MDP = rl.garnet(3, 2, rl.KLBall(0.1), seed=0)
P, R = MDP.P, MDP.r
GEN = rl.GenerativeModel(P, 0, rewards=R)
BATCH = GEN.batch()
BOUND = rl.PlugIn(rl.KLBall(0.1))
RNG = np.random.default_rng(0)


def _not_summing() -> np.ndarray:
    bad = P.copy()
    bad[1, 0, 0] += 0.1
    return bad


def _negative() -> np.ndarray:
    bad = P.copy()
    bad[0, 1, 0] -= 2.0
    bad[0, 1, 1] += 2.0
    return bad


def _learn(**params):
    return rl.RobustHalpernIteration(**{"uncertainty": rl.KLBall(0.1), "epsilon": 0.5, "max_iter": 2,
                                        **params}).fit(GEN)


PROBES = [
    # uncertainty sets and their support functions
    Probe("Contamination-R-above-1", lambda: rl.Contamination(1.5), "R"),
    Probe("LpBall-p-below-1", lambda: rl.LpBall(0.1, p=0.5), "p"),
    Probe("LpBall-R-nan", lambda: rl.LpBall(float("nan")), "R"),
    Probe("KLBall-delta-negative", lambda: rl.KLBall(-0.1), "delta"),
    Probe("ChiSquareBall-delta-a-string", lambda: rl.ChiSquareBall("0.1"), "delta"),
    Probe("support-P-row-not-summing-to-1", lambda: rl.KLBall(0.1).support(_not_summing()[1, 0], np.zeros(3)), "P"),
    Probe("support-V-other-number-of-states", lambda: rl.ChiSquareBall(0.1).support(P, np.zeros(4)), "V"),
    Probe("support-V-nan", lambda: rl.LpBall(0.1).support(P[0, 0], np.array([0.0, np.nan, 1.0])), "V"),
    # robust MDPs and their generators
    Probe("check_kernel-P-negative-entry", lambda: rl.check_kernel(_negative()), "P"),
    Probe("check_rewards-r-wrong-shape", lambda: rl.check_rewards(np.zeros(3), (3, 2)), "r"),
    Probe("RobustMDP-P-rows-not-summing-to-1", lambda: rl.RobustMDP(_not_summing(), R, rl.KLBall(0.1)), "P"),
    Probe("RobustMDP-P-not-square", lambda: rl.RobustMDP(P[:, :, :2], R, rl.KLBall(0.1)), "P"),
    Probe("RobustMDP-r-inf", lambda: rl.RobustMDP(P, np.full((3, 2), np.inf), rl.KLBall(0.1)), "r"),
    Probe("RobustMDP-uncertainty-a-string", lambda: rl.RobustMDP(P, R, "KL"), "uncertainty"),
    Probe("RobustMDP.bellman-Q-wrong-shape", lambda: MDP.bellman(np.zeros((2, 3))), "Q"),
    Probe("RobustMDP.solve-tau-zero", lambda: MDP.solve(tau=0.0), "tau"),
    Probe("RobustMDP.solve-tol-negative", lambda: MDP.solve(tol=-1e-3), "tol"),
    Probe("RobustMDP.evaluate-policy-action-out-of-range", lambda: MDP.evaluate(np.array([0, 1, 5])), "policy"),
    Probe("RobustMDP.evaluate-max_iter-zero", lambda: MDP.evaluate(np.array([0, 1, 1]), max_iter=0), "max_iter"),
    Probe("RobustMDP.evaluate_many-policies-one-row-without-batch-axis",
          lambda: MDP.evaluate_many(np.array([0, 1, 1])), "policies"),
    Probe("RobustMDP.evaluate_many-policies-action-negative",
          lambda: MDP.evaluate_many(np.array([[0, 1, 1], [0, -1, 1]])), "policies"),
    Probe("RobustMDP.evaluate_many-policies-float", lambda: MDP.evaluate_many(np.array([[0.0, 1.0, 1.0]])),
          "policies"),
    Probe("RobustMDP.evaluate_many-tau-above-1", lambda: MDP.evaluate_many(np.zeros((2, 3), int), tau=1.5), "tau"),
    Probe("RobustMDP.discounted_values-gamma-one", lambda: MDP.discounted_values(1.0), "gamma"),
    Probe("RobustMDP.with_uncertainty-none", lambda: MDP.with_uncertainty(None), "uncertainty"),
    Probe("garnet-n_states-one", lambda: rl.garnet(1, 2), "n_states"),
    Probe("garnet-min_prob-too-large", lambda: rl.garnet(10, 2, branching=3, min_prob=0.5), "min_prob"),
    Probe("garnet-uncertainty-a-float", lambda: rl.garnet(5, 2, 0.1), "uncertainty"),
    Probe("periodic_cycle-uncertainty-a-string", lambda: rl.periodic_cycle("contamination"), "uncertainty"),
    Probe("river_swim-p_backward-above-1-minus-p_forward",
          lambda: rl.river_swim(6, p_forward=0.6, p_backward=0.5), "p_backward"),
    Probe("river_swim-small_reward-nan", lambda: rl.river_swim(small_reward=float("nan")), "small_reward"),
    # the generative model
    Probe("GenerativeModel-rewards-wrong-shape", lambda: rl.GenerativeModel(P, rewards=np.zeros((2, 2))), "rewards"),
    Probe("GenerativeModel.sample-n-negative", lambda: GEN.sample(np.array([0]), np.array([0]), -1), "n"),
    Probe("GenerativeModel.sample-states-out-of-range", lambda: GEN.sample(np.array([7]), np.array([0]), 2),
          "states"),
    Probe("GenerativeModel.sample_counts-n-negative",
          lambda: GEN.sample_counts(np.array([0, 1]), np.array([0, 0]), np.array([3, -1])), "n"),
    Probe("GenerativeModel.batch-actions-float", lambda: GEN.batch(np.array([0, 1]), np.array([0.0, 1.0])),
          "actions"),
    Probe("SampleBatch.draw-rows-out-of-range", lambda: BATCH.draw(2, rows=np.array([100])), "rows"),
    # MLMC helpers and oracles
    Probe("richardson_weights-order-zero", lambda: rl.richardson_weights(0), "order"),
    Probe("level_probabilities-psi-one", lambda: rl.level_probabilities(1.0, 4), "psi"),
    Probe("mlmc_cost_factor-n_max-negative", lambda: rl.mlmc_cost_factor(0.6, -1), "n_max"),
    Probe("mlmc_estimate-base-zero",
          lambda: rl.mlmc_estimate(lambda rows, n: None, lambda p, v: None, np.zeros(3), base=np.zeros(2, int),
                                   rng=RNG), "base"),
    Probe("mlmc_estimate-rng-an-int",
          lambda: rl.mlmc_estimate(lambda rows, n: None, lambda p, v: None, np.zeros(3), base=np.ones(2, int),
                                   rng=0), "rng"),
    Probe("MLMC-psi-below-half", lambda: rl.MLMC(psi=0.4), "psi"),
    Probe("TruncatedMLMC-n_max-negative", lambda: rl.TruncatedMLMC(n_max=-1), "n_max"),
    Probe("KOrderMLMC-order-zero", lambda: rl.KOrderMLMC(order=0), "order"),
    Probe("PlugIn-uncertainty-a-string", lambda: rl.PlugIn("KL"), "uncertainty"),
    Probe("PlugIn.bind-uncertainty-a-dict", lambda: rl.PlugIn().bind({"delta": 0.1}), "uncertainty"),
    Probe("PlugIn.estimate-budget-zero", lambda: BOUND.estimate(BATCH, np.zeros(3), 0), "budget"),
    Probe("PlugIn.estimate-V-wrong-length", lambda: BOUND.estimate(BATCH, np.zeros(4), 5), "V"),
    Probe("MLMC.estimate-rng-none", lambda: rl.MLMC(uncertainty=rl.KLBall(0.1)).estimate(BATCH, np.zeros(3), 5, None),
          "rng"),
    Probe("PlugIn.estimate-unbound", lambda: rl.PlugIn().estimate(BATCH, np.zeros(3), 5), "uncertainty"),
    # the exact iterations
    Probe("halpern_iteration-n_iter-negative", lambda: rl.halpern_iteration(MDP, -1), "n_iter"),
    Probe("halpern_iteration-mdp-a-kernel", lambda: rl.halpern_iteration(P, 10), "mdp"),
    Probe("halpern_iteration-Q0-wrong-shape", lambda: rl.halpern_iteration(MDP, 10, Q0=np.zeros(3)), "Q0"),
    Probe("relative_value_iteration-tau-above-1", lambda: rl.relative_value_iteration(MDP, 10, tau=1.5), "tau"),
    # the learner (parameters are checked by fit, scikit-learn's rule)
    Probe("RobustHalpernIteration.fit-epsilon-zero", lambda: _learn(epsilon=0.0), "epsilon"),
    Probe("RobustHalpernIteration.fit-delta-one", lambda: _learn(delta=1.0), "delta"),
    Probe("RobustHalpernIteration.fit-max_samples-zero", lambda: _learn(max_samples=0), "max_samples"),
    Probe("RobustHalpernIteration.fit-schedule_scale-negative", lambda: _learn(schedule_scale=-1.0),
          "schedule_scale"),
    Probe("RobustHalpernIteration.fit-max_iter-zero", lambda: _learn(max_iter=0), "max_iter"),
    Probe("RobustHalpernIteration.fit-oracle-a-string", lambda: _learn(oracle="mlmc"), "oracle"),
    Probe("RobustHalpernIteration.fit-uncertainty-none", lambda: _learn(uncertainty=None), "uncertainty"),
    Probe("RobustHalpernIteration.fit-gen_model-without-rewards",
          lambda: rl.RobustHalpernIteration(rl.KLBall(0.1)).fit(rl.GenerativeModel(P)), "gen_model.rewards"),
    Probe("RobustHalpernIteration.fit-gen_model-a-kernel", lambda: rl.RobustHalpernIteration(rl.KLBall(0.1)).fit(P),
          "gen_model"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
