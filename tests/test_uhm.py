"""UHM (arXiv 2605.15603): weights, the exact nu-Bellman operator, one-sample targets, tabular horizon
models, negative controls and bad input."""

import numpy as np
import pytest

from icml26 import InputError
from icml26.eval.tasks import uhm as mazes
from icml26.training import uhm
from icml26.training.uhm import targets as tg
G, LAM, K = 0.99, 0.95, 50


@pytest.fixture(scope="module")
def maze():
    env = mazes.GridMaze(seed=0)
    data = mazes.collect_explore(env, 50_000, 200, seed=0)
    return env, data


def test_winsorized_weights_match_the_papers_values():
    w = uhm.winsorized(G, LAM, K)
    assert abs(w.p.sum() - 1) < 1e-12
    assert abs(w.p[-1] - 0.0494973) < 5e-8
    assert np.allclose(w.w_nu[:-1], 0.840336, atol=5e-7) and np.allclose(w.w_xi[:-1], 15.966387, atol=5e-7)
    assert np.allclose(w.w_nu[:-1], (1 - LAM) / (1 - LAM * G)) and np.allclose(w.w_xi[:-1], LAM / (1 - LAM * G))
    assert abs(w.w_nu[-1] - 1) < 1e-12 and abs(w.w_xi[-1]) < 1e-12
    k = np.arange(1, K)
    assert np.allclose(w.xi[:-1], G ** (k - 1) * LAM ** k, rtol=1e-12, atol=1e-15)
    # the general formula, and the two special cases of Prop. C.1
    assert np.allclose(uhm.xi_from_nu(w.nu, G), w.xi)
    five = uhm.n_step(5, G)
    assert np.allclose(five.xi, [G ** j for j in range(4)] + [0.0]) and five.nu[-1] == pytest.approx(G ** 4)
    geo = uhm.geometric(G, LAM)
    assert geo.k_max is None and np.allclose(geo.weights(np.array([1, 7, 500])), [[LAM / (1 - LAM * G)] * 3,
                                                                                [(1 - LAM) / (1 - LAM * G)] * 3])
    # td_lambda: same measure, uniform proposal
    td = uhm.td_lambda(G, LAM, K)
    assert np.allclose(td.nu, w.nu) and np.allclose(td.p, 1 / K)


def test_sampled_horizons_follow_p_h():
    w = uhm.winsorized(G, LAM, 10)
    n = w.sample(200_000, np.random.default_rng(0))
    freq = np.bincount(n, minlength=11)[1:] / n.size
    assert np.abs(freq - w.p).max() < 0.005
    assert n.min() >= 1 and n.max() <= 10


@pytest.mark.parametrize("weights", [uhm.n_step(1, G), uhm.n_step(5, G), uhm.td_lambda(G, 0.9, K),
                                     uhm.winsorized(G, LAM, K), uhm.geometric(G, LAM)], ids=lambda w: w.name)
def test_iterating_the_nu_operator_reaches_q_pi(weights, maze):
    env, _ = maze
    rng = np.random.default_rng(1)
    policy = rng.dirichlet(np.ones(env.n_actions), size=env.n_states)
    q_pi = mazes.policy_q(env.P, env.R, policy, G)
    Q = np.zeros_like(q_pi)
    for _ in range(5000):
        Q_new = uhm.nu_bellman_operator(Q, env.P, env.R, policy, weights)
        if np.abs(Q_new - Q).max() < 1e-10:
            break
        Q = Q_new
    assert np.abs(Q_new - q_pi).max() < 1e-6


def test_one_sample_targets_are_unbiased_for_t_nu(maze):
    """The mean of 1e5 UHM targets (exact model, fixed (s, a) and Q) equals T^nu Q within 4 SE."""
    env, _ = maze
    policy = np.full((env.n_states, env.n_actions), 1 / env.n_actions)
    Q = np.random.default_rng(2).uniform(0, 50, size=(env.n_states, env.n_actions))
    w = uhm.winsorized(G, LAM, 20)
    exact = uhm.nu_bellman_operator(Q, env.P, env.R, policy, w)
    s0 = int(np.argsort(env.distance)[3])  # near the goal, so the reward term matters
    model = uhm.TabularUHM(20)
    model.M_ = mazes.horizon_distributions(env.P, policy, 20)  # the exact model (this test only)
    model._cdf = np.cumsum(model.M_, -1)
    n_samples = 100_000
    target = tg.UHMTarget(model, w, env.reward_fn, seed=3)
    batch = {"observations": np.full(n_samples, s0), "actions": np.full(n_samples, 2),
             "rewards": np.full(n_samples, env.R[s0, 2])}
    G_samples, calls = target(batch, lambda s, a: Q[s, a], policy)
    assert calls == 1
    se = G_samples.std(ddof=1) / np.sqrt(n_samples)
    assert abs(G_samples.mean() - exact[s0, 2]) < 4 * se
    moments = uhm.target_moments(Q, env.P, env.R, policy, w, [s0], [2])
    assert moments["mean"][0] == pytest.approx(exact[s0, 2], rel=1e-12)
    assert moments["var"][0] == pytest.approx(G_samples.var(), rel=0.05)


def test_tabular_uhm_is_exact_on_the_exact_model_and_close_from_50k_samples(maze):
    env, data = maze
    policy = np.random.default_rng(4).dirichlet(np.ones(5), size=env.n_states)
    truth = mazes.horizon_distributions(env.P, policy, 50)
    # "transitions" that reproduce P exactly: weight-free counts proportional to P (rational P: slip 0.1)
    S, A = env.n_states, env.n_actions
    counts = np.rint(env.P * 50).astype(int)
    s, a, s2 = np.nonzero(counts)
    reps = counts[s, a, s2]
    exact_data = {"observations": np.repeat(s, reps), "actions": np.repeat(a, reps), "next_observations": np.repeat(s2, reps)}
    exact = uhm.TabularUHM(50).fit(exact_data, policy, S, A)
    assert np.abs(exact.M_ - truth).max() < 1e-8
    learned = uhm.TabularUHM(30).fit(data, policy, S, A)
    _, covered = mazes.empirical_model(data, S, A)
    tv = [mazes.tv_distance(learned.M_[n], truth[n])[covered].mean() for n in range(30)]
    assert max(tv) < 0.1


def test_negative_controls_models_see_only_data_and_depend_on_pi(maze):
    """Changing pi with the data fixed changes UHM samples (no dataset futures); the fit reads only the
    transitions (a dataset whose P differs from the env's gives a model that differs from P)."""
    env, data = maze
    S, A = env.n_states, env.n_actions
    uniform = np.full((S, A), 1 / A)
    stay = np.eye(A)[np.zeros(S, dtype=int)]
    m1 = uhm.TabularUHM(10).fit(data, uniform, S, A)
    m2 = uhm.TabularUHM(10).fit(data, stay, S, A)
    s = np.arange(S).repeat(A)
    a = np.tile(np.arange(A), S)
    n = np.full(s.shape, 10)
    d1 = m1.sample(s, a, n, np.random.default_rng(0))
    d2 = m2.sample(s, a, n, np.random.default_rng(0))
    assert (d1 != d2).mean() > 0.3
    half = {k: v[: len(v) // 50] for k, v in data.items()}
    small = uhm.TabularUHM(1).fit(half, uniform, S, A)
    assert np.abs(small.M_[0] - env.P).max() > 0.05  # the empirical model, not the true P
    assert not hasattr(tg.UHMTarget(m1, uhm.winsorized(G, LAM, 10), env.reward_fn), "P")


def test_model_calls_per_target(maze):
    env, data = maze
    S, A = env.n_states, env.n_actions
    uniform = np.full((S, A), 1 / A)
    q = np.zeros((S, A))
    idx = np.arange(64)
    batch = {k: v[idx] for k, v in data.items()}
    batch["index"] = idx
    for k in (10, 50):
        u = tg.UHMTarget(uhm.TabularUHM(k).fit(data, uniform, S, A), uhm.winsorized(G, LAM, k), env.reward_fn)
        assert u(batch, lambda s, a: q[s, a], uniform)[1] == 1
        m = tg.RolloutTDLambda(tg.TabularOneStepModel().fit(data, S, A), uhm.td_lambda(G, LAM, k), env.reward_fn)
        assert m(batch, lambda s, a: q[s, a], uniform)[1] == k
    ghm = tg.GHMTarget(uhm.TabularGHM(G * LAM).fit(data, uniform, S, A), uhm.geometric(G, LAM), env.reward_fn)
    assert ghm(batch, lambda s, a: q[s, a], uniform)[1] == 1
    assert tg.OneStepTD(G)(batch, lambda s, a: q[s, a], uniform)[1] == 0
    assert tg.DatasetTDLambda(data, uhm.td_lambda(G, LAM, 10), env.reward_fn)(batch, lambda s, a: q[s, a], uniform)[1] == 0


def test_trace_targets_equal_the_operator_in_expectation(maze):
    """MBTD on the exact one-step model and the truncated-trace rule are fixed-point consistent."""
    env, data = maze
    S, A = env.n_states, env.n_actions
    policy = np.full((S, A), 1 / A)
    q_pi = mazes.policy_q(env.P, env.R, policy, G)
    w = uhm.td_lambda(G, LAM, 5)
    one = tg.TabularOneStepModel().fit(data, S, A)
    one.step = lambda s, a, rng: np.minimum((np.cumsum(env.P[s, a], -1) < rng.random(len(s))[:, None]).sum(1), S - 1)
    s0 = int(np.argsort(env.distance)[2])
    n_samples = 50_000
    batch = {"observations": np.full(n_samples, s0), "actions": np.full(n_samples, 1), "rewards": np.full(n_samples, env.R[s0, 1])}
    values, _ = tg.RolloutTDLambda(one, w, env.reward_fn, seed=0)(batch, lambda s, a: q_pi[s, a], policy)
    assert abs(values.mean() - q_pi[s0, 1]) < 4 * values.std() / np.sqrt(n_samples) + 1e-9
    # a trace cut after L < K steps still bootstraps to a Q^pi fixed point (deterministic chain check)
    states = np.array([[3, 4, 5, 6, 7]])
    valid = np.array([[True, True, False, False, False]])
    out = tg._trace_target(np.array([0.0]), states, valid, lambda s, a: np.zeros(len(s)),
                           lambda s, a: np.ones(len(s)), np.eye(A)[np.zeros(S, dtype=int)], w, np.random.default_rng(0))
    assert out[0] == pytest.approx(G * (w.nu[0] + G * (1 - G ** 0 * w.nu[0])), rel=1e-12)


def test_winsorized_variance_is_below_the_uncapped_one_at_k10(maze):
    env, _ = maze
    policy = np.full((env.n_states, env.n_actions), 1 / env.n_actions)
    q_pi = mazes.policy_q(env.P, env.R, policy, G)
    win = uhm.target_moments(q_pi, env.P, env.R, policy, uhm.winsorized(G, LAM, 10))
    geo = uhm.target_moments(q_pi, env.P, env.R, policy, uhm.geometric(G, LAM))
    assert np.allclose(win["mean"], q_pi.reshape(-1)) and np.allclose(geo["mean"], q_pi.reshape(-1))
    assert win["var"].mean() < geo["var"].mean()


def test_tabular_control_loop_propagates_value(maze):
    env, data = maze
    S, A = env.n_states, env.n_actions
    model = uhm.TabularUHM(20)
    target = tg.UHMTarget(model, uhm.winsorized(G, LAM, 20), env.reward_fn, seed=0)
    cfg = tg.TabularControlConfig(updates=6, batch_size=20_000, lr=0.3, improve_every=2, eval_every=3)
    out = tg.fit_tabular_critic(data, target, S, A, cfg, refit=lambda p: model.fit(data, p, S, A),
                                evaluate=lambda Q, p: {"mean_q": float(Q.mean())})
    assert out["model_calls"] == 6 and len(out["history"]) == 3
    assert out["history"][-1]["mean_q"] > out["history"][0]["mean_q"] == 0.0


def test_grid_maze_is_a_gymnasium_env_with_about_100_cells():
    import gymnasium as gym

    env = mazes.GridMaze(seed=1)
    assert isinstance(env, gym.Env) and 90 <= env.n_states <= 115
    assert np.allclose(env.P.sum(-1), 1) and np.all(env.P[env.goal, :, env.goal] == 1)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
    assert reward in (0.0, 1.0) and not terminated and "is_success" in info
    q_star = mazes.value_iteration(env.P, env.R, G)
    assert mazes.success_rate(env, mazes.greedy_policy(q_star), 200) > 0.99
    nav = mazes.collect_navigate(env, 2000, 100, seed=0)
    assert nav["observations"].shape == (2000,) and nav["episode_end"].sum() == 20
    assert np.all(mazes.GridMaze(seed=1, reward="step").R[env.goal] == 0)


def test_bad_input_names_the_argument():
    with pytest.raises(InputError, match="winsorized: gamma: expected a number in \\(0, 1\\)"):
        uhm.winsorized(1.0, 0.9, 10)
    with pytest.raises(InputError, match="lam"):
        uhm.winsorized(0.9, 1.5, 10)
    with pytest.raises(InputError, match="k_max: expected an int >= 1"):
        uhm.winsorized(0.9, 0.9, 0)
    with pytest.raises(InputError, match="p_H"):
        nu = uhm.n_step(3, 0.9).nu
        uhm.HorizonWeights("custom", 0.9, nu, uhm.xi_from_nu(nu, 0.9), np.array([0.5, 0.0, 0.5]), 3)
    w = uhm.winsorized(0.9, 0.9, 5)
    with pytest.raises(InputError, match="horizons in 1..5"):
        w.weights(np.array([0, 3]))
    with pytest.raises(InputError, match="horizons"):
        uhm.TabularUHM(5).fit({"observations": np.array([0]), "actions": np.array([0]),
                               "next_observations": np.array([1])}, np.full((2, 1), 1.0)).sample(
            np.array([0]), np.array([0]), np.array([6]), np.random.default_rng(0))
    with pytest.raises(InputError, match="shape"):
        uhm.nu_target(np.zeros(3), np.zeros(3), np.zeros(2), np.ones(3, dtype=int), w)
    with pytest.raises(InputError, match="policy"):
        mazes.policy_q(np.ones((2, 1, 2)) / 2, np.zeros((2, 1)), np.ones((3, 1)), 0.9)
    with pytest.raises(InputError, match="P"):
        uhm.nu_bellman_operator(np.zeros((2, 1)), np.ones((2, 1)), np.zeros((2, 1)), np.ones((2, 1)), w)
    with pytest.raises(InputError, match="slip"):
        mazes.GridMaze(slip=1.0)
