"""Robust Halpern Iteration (``training/rhi/``: ``halpern``, ``uncertainty``, ``oracles``) and its experiment.

Support functions are checked against closed forms and an independent scipy solve, and for their
defining properties on random inputs; the ground truth against the nominal gain, monotonicity in
the radius and the discounted limit; the optimality certificate on random instances; the learner
against a model that only samples. One reduced run of the experiment checks the claims' direction.
"""

import math
import subprocess
import sys

import numpy as np
import pytest
from scipy.optimize import brentq, minimize, minimize_scalar
from scipy.special import logsumexp

from icml26.errors import InputError
from icml26.training import rhi as rl

SETS = [rl.Contamination(0.2), rl.LpBall(0.02, 2), rl.LpBall(0.02, 1), rl.LpBall(0.02, math.inf),
        rl.LpBall(0.02, 3), rl.KLBall(0.3), rl.ChiSquareBall(0.3)]


def random_rows(rng, n, S, zeros=True):
    P = rng.dirichlet(np.ones(S) * 0.7, size=n)
    if zeros:
        P[np.arange(0, n, 3), rng.integers(0, S, len(range(0, n, 3)))] = 0  # some unreachable states
        P /= P.sum(-1, keepdims=True)
    return P


# ----------------------------------------------------------------------------------------------
# support functions
# ----------------------------------------------------------------------------------------------
def test_closed_forms():
    P, V, delta = np.array([0.5, 0.5]), np.array([0.0, 1.0]), 0.1
    chi2_primal = 1 - (0.5 + math.sqrt(delta * 0.25))  # q0 = 1/2 + sqrt(delta / 4)
    q0 = brentq(lambda q: q * math.log(2 * q) + (1 - q) * math.log(2 * (1 - q)) - delta, 0.5, 1 - 1e-15)
    chi2, kl = rl.ChiSquareBall(delta).support(P, V), rl.KLBall(delta).support(P, V)
    assert abs(chi2 - chi2_primal) <= 1e-8 and abs(chi2 - 0.3418861) <= 5e-8
    assert abs(kl - (1 - q0)) <= 1e-8 and abs(kl - 0.2802054) <= 5e-8


def test_chi_square_dual_matches_a_direct_convex_solve():
    rng = np.random.default_rng(0)
    for _ in range(25):
        S = int(rng.integers(2, 6))
        P, V, delta = random_rows(rng, 1, S)[0], rng.normal(size=S), float(rng.uniform(0.01, 1))
        reach = P > 0
        cons = [{"type": "eq", "fun": lambda q: q.sum() - 1},
                {"type": "ineq", "fun": lambda q: delta - (((q - P)[reach]) ** 2 / P[reach]).sum()}]
        res = minimize(lambda q: q @ V, P, constraints=cons, bounds=[(0, 1 if r else 0) for r in reach],
                       method="SLSQP", options={"ftol": 1e-14, "maxiter": 500})
        assert abs(res.fun - rl.ChiSquareBall(delta).support(P, V)) < 1e-6


@pytest.mark.parametrize("p", [1, 2, 3, math.inf])
def test_lp_dual_matches_a_direct_solve_inside_the_simplex(p):
    from scipy.optimize import linprog

    rng = np.random.default_rng(5)
    for _ in range(15):
        S = int(rng.integers(2, 6))
        P, V = random_rows(rng, 1, S)[0], rng.normal(size=S)
        reach = np.flatnonzero(P > 0)
        R = float(rng.uniform(0, 1)) * P[reach].min()  # the ball lies in the simplex
        Pr, Vr, n = P[reach], V[reach], len(reach)
        if p == 1:  # variables (q, t), |q - P| <= t, sum t <= R
            eye = np.eye(n)
            res = linprog(np.append(Vr, np.zeros(n)), A_ub=np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, n)),
                          np.ones((1, n))]]), b_ub=np.concatenate([Pr, -Pr, [R]]),
                          A_eq=np.append(np.ones(n), np.zeros(n))[None], b_eq=[1], bounds=[(0, None)] * 2 * n)
        elif p == math.inf:
            res = linprog(Vr, A_eq=np.ones((1, n)), b_eq=[1], bounds=list(zip(np.maximum(Pr - R, 0), Pr + R)))
        else:
            cons = [{"type": "eq", "fun": lambda q: q.sum() - 1},
                    {"type": "ineq", "fun": lambda q: R ** p - (np.abs(q - Pr) ** p).sum()}]
            res = minimize(lambda q: q @ Vr, Pr, constraints=cons, bounds=[(0, 1)] * n, method="SLSQP",
                           options={"ftol": 1e-14, "maxiter": 1000})
        assert abs(res.fun - rl.LpBall(R, p).support(P, V)) < 1e-6


def test_kl_dual_matches_a_direct_one_dimensional_solve():
    rng = np.random.default_rng(1)
    log_alpha = np.linspace(-30, 30, 20001)
    for _ in range(60):
        S = int(rng.integers(2, 7))
        P, V, delta = random_rows(rng, 1, S)[0], rng.normal(size=S) * rng.uniform(0.01, 10), 10 ** rng.uniform(-4, 1)
        reach = P > 0

        def dual(la):
            a = np.exp(la)
            return -a * logsumexp(-V[reach] / a, b=P[reach]) - a * delta

        grid = np.exp(log_alpha)
        best = max(V[reach].min(), (-grid * logsumexp(-V[reach][None] / grid[:, None], b=P[reach][None], axis=1)
                                    - grid * delta).max(),
                   -minimize_scalar(lambda la: -dual(la), bounds=(-30, 30), method="bounded").fun)
        mine = rl.KLBall(delta).support(P, V)
        assert best - 1e-9 <= mine <= best + 1e-9


@pytest.mark.parametrize("U", SETS, ids=repr)
def test_support_function_properties(U):
    rng = np.random.default_rng(2)
    n, S = 200, 5
    P = random_rows(rng, n, S)
    if isinstance(U, rl.LpBall):  # the dual is the exact support function while R <= min nonzero P
        P = np.where(P > 0, np.maximum(P, 0.05), 0)
        P /= P.sum(-1, keepdims=True)
    V, V2 = rng.normal(size=(n, S)), rng.normal(size=(n, S))
    sigma = U.support(P, V)
    reach_min = np.where(P > 0, V, np.inf).min(-1)
    lower = V.min(-1) if isinstance(U, rl.Contamination) else reach_min
    assert sigma.shape == (n,)
    assert np.allclose(U.support(P, V + 3.7), sigma + 3.7, atol=1e-9)  # shift
    assert np.all(U.support(P, V + np.abs(V2)) >= sigma - 1e-10)  # monotone
    assert np.all(lower - 1e-10 <= sigma) and np.all(sigma <= (P * V).sum(-1) + 1e-10)  # bounds
    d = V - V2
    diff = sigma - U.support(P, V2)
    assert np.all(diff <= d.max(-1) + 1e-9) and np.all(diff >= d.min(-1) - 1e-9)  # 1-Lipschitz, in span
    rows = np.array([U.support(P[i], V[i]) for i in range(10)])  # vectorised == row by row
    assert np.allclose(rows, sigma[:10], atol=1e-12)


@pytest.mark.parametrize("make", [rl.KLBall, rl.ChiSquareBall, rl.Contamination, lambda r: rl.LpBall(r, 2)],
                         ids=["KL", "chi2", "contamination", "l2"])
def test_radius_zero_is_nominal_and_larger_radius_is_more_pessimistic(make):
    rng = np.random.default_rng(3)
    P, V = random_rows(rng, 100, 4), rng.normal(size=(100, 4))
    assert np.allclose(make(0.0).support(P, V), (P * V).sum(-1), atol=1e-12)
    P = np.where(P > 0, np.maximum(P, 0.1), 0)
    P /= P.sum(-1, keepdims=True)
    values = [make(r).support(P, V) for r in (0.0, 0.01, 0.03, 0.08)]
    assert all(np.all(b <= a + 1e-10) for a, b in zip(values, values[1:]))


# ----------------------------------------------------------------------------------------------
# exact solvers and ground truth
# ----------------------------------------------------------------------------------------------
def test_halpern_on_the_periodic_cycle_and_plain_rvi():
    cycle = rl.periodic_cycle()
    residual = rl.halpern_iteration(cycle, 100).residuals
    assert residual[10] == pytest.approx(1 / 11, rel=1e-12) and residual[100] == pytest.approx(1 / 101, rel=1e-12)
    k = np.arange(101)
    assert np.all(residual <= 1 / (k + 1) + 1e-12)
    assert np.allclose(rl.relative_value_iteration(cycle, 100).residuals, 1.0)
    solution = cycle.solve()  # the aperiodicity transform makes RVI converge here
    assert solution.converged and solution.gain == pytest.approx(0.5, abs=1e-10)


def stationary_gain(P, r, policy):
    S = len(policy)
    P_pi, r_pi = P[np.arange(S), policy], r[np.arange(S), policy]
    A = np.vstack([P_pi.T - np.eye(S), np.ones(S)])
    mu = np.linalg.lstsq(A, np.append(np.zeros(S), 1.0), rcond=None)[0]
    return float(mu @ r_pi)


def test_radius_zero_gives_the_nominal_optimal_gain():
    import itertools

    mdp = rl.garnet(4, 2, rl.KLBall(0.0), seed=4)
    best = max(stationary_gain(mdp.P, mdp.r, np.array(p)) for p in itertools.product(range(2), repeat=4))
    assert mdp.solve().gain == pytest.approx(best, abs=1e-6)
    assert mdp.with_uncertainty(rl.ChiSquareBall(0.0)).solve().gain == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize("make", [rl.KLBall, rl.ChiSquareBall])
def test_gain_is_non_increasing_in_the_radius_and_matches_the_discounted_limit(make):
    base = rl.garnet(8, 3, seed=5)
    gains = [base.with_uncertainty(make(d)).solve().gain for d in (0.0, 0.05, 0.1, 0.2, 0.5)]
    assert all(b <= a + 1e-9 for a, b in zip(gains, gains[1:])) and gains[-1] < gains[0]
    mdp = base.with_uncertainty(make(0.1))
    solution = mdp.solve()
    assert solution.converged and mdp.evaluate(solution.policy) == pytest.approx(solution.gain, abs=1e-8)
    assert np.allclose((1 - 0.999) * mdp.discounted_values(0.999), solution.gain, atol=2e-3)
    assert np.allclose(mdp.bellman(solution.Q) - solution.Q, solution.gain, atol=1e-8)  # T(Q*) = Q* + g*


@pytest.mark.parametrize("U", [rl.KLBall(0.2), rl.ChiSquareBall(0.3), rl.LpBall(0.02, 2), rl.Contamination(0.1)],
                         ids=repr)
def test_evaluate_many_is_evaluate_batched(U):
    mdp = rl.garnet(6, 3, U, seed=4)
    policies = np.random.default_rng(0).integers(0, 3, (12, 6))
    many = mdp.evaluate_many(policies)
    assert many.shape == (12,) and np.allclose(many, [mdp.evaluate(p) for p in policies], atol=1e-9)
    optimal = mdp.solve()
    assert mdp.evaluate_many(optimal.policy[None])[0] == pytest.approx(optimal.gain, abs=1e-8)
    assert (many <= optimal.gain + 1e-8).all() and many.std() > 0  # no policy beats g*, and they differ
    assert mdp.evaluate_many(policies[:0]).shape == (0,)


def test_evaluate_many_at_radius_zero_is_the_stationary_gain_of_every_policy():
    import itertools

    mdp = rl.garnet(5, 2, seed=1)  # the nominal model: g(pi) = mu_pi . r_pi, mu_pi the stationary distribution
    policies = np.array(list(itertools.product(range(2), repeat=5)))
    states = np.arange(5)
    expected = []
    for policy in policies:
        P_pi = mdp.P[states, policy]
        system = np.vstack([P_pi.T - np.eye(5), np.ones((1, 5))])
        mu = np.linalg.lstsq(system, np.append(np.zeros(5), 1.0), rcond=None)[0]
        expected.append(mu @ mdp.r[states, policy])
    assert np.allclose(mdp.evaluate_many(policies), expected, atol=1e-9)


def test_optimality_certificate_on_random_instances():
    rng = np.random.default_rng(6)
    makers = [lambda: rl.KLBall(rng.uniform(0.01, 0.3)), lambda: rl.ChiSquareBall(rng.uniform(0.01, 0.3)),
              lambda: rl.Contamination(rng.uniform(0, 0.3)), lambda: rl.LpBall(rng.uniform(0, 0.05), 2)]
    for i in range(40):
        mdp = rl.garnet(5, 3, makers[i % 4](), seed=100 + i)
        g_star = mdp.solve().gain
        Q = rng.normal(size=(5, 3)) * rng.uniform(0.01, 3)
        gap = g_star - mdp.evaluate(Q.argmax(1))
        assert -1e-8 <= gap <= rl.span(mdp.bellman(Q) - Q) + 1e-8


def test_generators_are_valid_and_seeded():
    a, b = rl.garnet(10, 3, seed=0), rl.garnet(10, 3, seed=0)
    assert np.array_equal(a.P, b.P) and np.array_equal(a.r, b.r)
    assert np.all((a.P > 0).sum(-1) == 3) and a.P[a.P > 0].min() >= 0.1 - 1e-12
    river = rl.river_swim(6, rl.KLBall(0.1))
    solution = river.solve()
    assert solution.converged and solution.span > 5 and np.all(solution.policy == 1)


# ----------------------------------------------------------------------------------------------
# oracles
# ----------------------------------------------------------------------------------------------
def single_row_batch(P, reps, seed):
    S = len(P)
    model = rl.GenerativeModel(np.broadcast_to(P, (S, 1, S)), seed)
    return model, model.batch(np.zeros(reps, dtype=int), np.zeros(reps, dtype=int))


def test_richardson_weights_and_k1_is_truncated_mlmc():
    assert np.allclose(rl.richardson_weights(1), [1]) and np.allclose(rl.richardson_weights(2), [2, -1])
    assert np.allclose(rl.richardson_weights(3), [8 / 3, -2, 1 / 3])
    P, V, U = np.array([0.3, 0.3, 0.4]), np.array([0.0, 0.5, 1.0]), rl.KLBall(0.1)
    outs = []
    for oracle in (rl.KOrderMLMC(order=1, n_max=3), rl.TruncatedMLMC(n_max=3)):
        _, batch = single_row_batch(P, 500, seed=7)
        outs.append(oracle.bind(U).estimate(batch, V, 40, np.random.default_rng(8)))
    assert np.array_equal(outs[0], outs[1])


def test_mlmc_is_unbiased_and_plug_in_is_optimistic():
    P, V, U = np.array([0.5, 0.5]), np.array([0.0, 1.0]), rl.KLBall(0.1)
    truth, reps = U.support(P, V), 40_000
    results = {}
    for name, oracle in {"plug": rl.PlugIn(), "mlmc": rl.MLMC(0.6), "k2": rl.KOrderMLMC(2, 2)}.items():
        model, batch = single_row_batch(P, reps, seed=9)
        x = oracle.bind(U).estimate(batch, V, 16, np.random.default_rng(10))
        results[name] = ((x.mean() - truth) / (x.std() / math.sqrt(reps)), model.samples_used / reps)
    assert results["plug"][0] > 4  # optimistic, by many standard errors
    assert abs(results["mlmc"][0]) < 4 and abs(results["k2"][0]) < 4
    assert results["k2"][1] == pytest.approx(16, rel=0.03)  # the budget is the expected sample count


def test_linear_sets_are_estimated_without_bias_and_coupled_differences_are_exact():
    rng = np.random.default_rng(11)
    mdp = rl.garnet(6, 2, rl.Contamination(0.2), seed=1)
    V = rng.normal(size=6)
    truth = mdp.uncertainty.support(mdp.P, V).reshape(-1)
    for oracle in (rl.PlugIn(), rl.MLMC(), rl.KOrderMLMC(3, 4)):
        model = mdp.generative_model(seed=3)
        batch = model.batch()
        est = np.mean([oracle.bind(mdp.uncertainty).estimate(batch, V, 64, rng) for _ in range(300)], 0)
        assert est.shape == (12,) and np.abs(est - truth).max() < 0.05
        pair = oracle.bind(rl.KLBall(0.1)).estimate(batch, np.stack([V, V]), 64, rng)
        assert pair.shape == (2, 12) and np.array_equal(pair[0], pair[1])


# ----------------------------------------------------------------------------------------------
# the model-free learner
# ----------------------------------------------------------------------------------------------
class RecordingModel:
    """Wraps a GenerativeModel and records every attribute the learner reads."""

    def __init__(self, model):
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "seen", set())

    def __getattr__(self, name):
        self.seen.add(name)
        return getattr(self._model, name)


class KernelFreeModel:
    """A generative model with no kernel anywhere: next states come from a closure."""

    def __init__(self, P, r, seed):
        rng = np.random.default_rng(seed)
        cdf = np.cumsum(P, -1)
        self.n_states, self.n_actions, self.rewards, self.samples_used = P.shape[0], P.shape[1], r, 0
        self._draw = lambda s, a, n: np.bincount(
            np.minimum((rng.random(n)[:, None] >= cdf[s, a][None]).sum(-1), P.shape[0] - 1), minlength=P.shape[0])

    def batch(self):
        model = self
        states, actions = np.divmod(np.arange(self.n_states * self.n_actions), self.n_actions)

        class Batch:
            size, n_states = len(states), model.n_states

            def draw(self, n, rows=None):
                rows = np.arange(len(states)) if rows is None else np.asarray(rows)
                n = np.broadcast_to(np.asarray(n), rows.shape)
                model.samples_used += int(n.sum())
                return np.stack([model._draw(states[i], actions[i], int(k)) for i, k in zip(rows, n)])

        return Batch()


def test_generative_model_samples_counts_and_hides_its_kernel():
    mdp = rl.garnet(4, 2, seed=0)
    model = mdp.generative_model(seed=0)
    states = model.sample(np.array([1, 3]), np.array([0, 1]), 20_000)
    assert states.shape == (2, 20_000) and model.samples_used == 40_000
    assert np.allclose(np.bincount(states[0], minlength=4) / 20_000, mdp.P[1, 0], atol=0.02)
    counts = model.sample_counts(np.array([0, 2]), np.array([1, 1]), np.array([5, 7]))
    assert counts.sum(-1).tolist() == [5, 7] and model.samples_used == 40_012
    public = [getattr(model, name) for name in dir(model) if not name.startswith("_")]
    assert not any(isinstance(value, np.ndarray) and value.ndim == 3 for value in public)


def test_learner_only_samples_and_reaches_epsilon():
    mdp = rl.garnet(5, 2, rl.KLBall(0.1), seed=2)
    recorder = RecordingModel(mdp.generative_model(seed=1))
    learner = rl.RobustHalpernIteration(mdp.uncertainty, rl.MLMC(), epsilon=0.2, random_state=0).fit(recorder)
    assert recorder.seen <= {"n_states", "n_actions", "rewards", "batch", "samples_used"}
    assert learner.converged_ and learner.samples_used_ == recorder._model.samples_used > 0
    assert mdp.solve().gain - mdp.evaluate(learner.policy_) <= 0.2
    assert rl.span(mdp.bellman(learner.Q_) - learner.Q_) <= 0.2  # the certificate the stop promised

    stub = KernelFreeModel(mdp.P, mdp.r, seed=1)
    learner = rl.RobustHalpernIteration(mdp.uncertainty, rl.TruncatedMLMC(4), epsilon=0.4, random_state=0).fit(stub)
    assert learner.converged_ and learner.samples_used_ == stub.samples_used > 0
    assert mdp.solve().gain - mdp.evaluate(learner.policy_) <= 0.4


def test_learner_respects_max_samples_and_defaults_to_a_sensible_oracle():
    mdp = rl.garnet(5, 2, rl.Contamination(0.1), seed=3)
    learner = rl.RobustHalpernIteration(mdp.uncertainty, None, epsilon=0.05, max_samples=20_000, random_state=0)
    learner.fit(mdp.generative_model(seed=0))
    assert isinstance(learner.oracle_, rl.PlugIn) and not learner.converged_ and learner.samples_used_ <= 20_000
    assert learner.oracle is None  # the parameter stays as given (scikit-learn's rule); oracle_ is the one used
    kl = rl.RobustHalpernIteration(rl.KLBall(0.1), max_iter=1).fit(mdp.generative_model(seed=0))
    assert isinstance(kl.oracle_, rl.MLMC) and kl.oracle_.uncertainty is kl.uncertainty


# ----------------------------------------------------------------------------------------------
# errors
# ----------------------------------------------------------------------------------------------
def test_clear_errors():
    P = rl.garnet(3, 2, seed=0).P
    bad = P.copy()
    bad[1, 0, 0] += 0.1
    for call in (lambda: rl.RobustMDP(bad, np.zeros((3, 2)), rl.KLBall(0.1)), lambda: rl.GenerativeModel(bad),
                 lambda: rl.KLBall(0.1).support(bad[1, 0], np.zeros(3))):
        with pytest.raises(InputError, match="sum to 1"):
            call()
    for make, arg, expected in ((rl.KLBall, "delta", "a finite number >= 0"),
                                (rl.ChiSquareBall, "delta", "a finite number >= 0"),
                                (rl.Contamination, "R", r"a number in \[0, 1\]"), (rl.LpBall, "R", "a finite number >= 0")):
        with pytest.raises(InputError, match=f"{make.__name__}: {arg}: expected {expected}, got -0.1"):
            make(-0.1)
    with pytest.raises(InputError, match=r"Contamination: R: expected a number in \[0, 1\], got 1.5"):
        rl.Contamination(1.5)
    with pytest.raises(InputError, match="LpBall: p"):
        rl.LpBall(0.1, p=0.5)
    with pytest.raises(InputError, match=r"r: expected rewards of shape \(S, A\) = \(3, 2\), got shape \(3,\)"):
        rl.RobustMDP(P, np.zeros(3), rl.KLBall(0.1))
    with pytest.raises(InputError, match=r"expected an \(S, A, S\) array"):
        rl.RobustMDP(P[:, :, :2], np.zeros((3, 2)), rl.KLBall(0.1))
    with pytest.raises(InputError, match="KLBall.support: V: expected values ending in P's number of states S = 3"):
        rl.KLBall(0.1).support(P, np.zeros(4))
    mdp = rl.RobustMDP(P, np.zeros((3, 2)), rl.KLBall(0.1))
    with pytest.raises(InputError, match=r"Q: expected shape \(S, A\)"):
        mdp.bellman(np.zeros((2, 3)))
    with pytest.raises(InputError, match="policy: expected 3 integer actions"):
        mdp.evaluate(np.array([0, 1]))
    with pytest.raises(InputError, match="epsilon"):  # parameters are checked by fit (scikit-learn's rule)
        rl.RobustHalpernIteration(rl.KLBall(0.1), epsilon=0).fit(rl.GenerativeModel(P, rewards=np.zeros((3, 2))))
    with pytest.raises(InputError, match="MLMC: psi"):
        rl.MLMC(psi=0.4)
    with pytest.raises(InputError, match="gen_model.rewards is None"):
        rl.RobustHalpernIteration(rl.KLBall(0.1)).fit(rl.GenerativeModel(P))
    with pytest.raises(InputError, match="PlugIn: uncertainty: expected an uncertainty set .*no uncertainty set"):
        rl.PlugIn().estimate(rl.GenerativeModel(P).batch(), np.zeros(3), 4, None)
    # wrong types are TypeErrors
    with pytest.raises(TypeError, match="RobustHalpernIteration.fit: uncertainty: expected"):
        rl.RobustHalpernIteration("KL").fit(rl.GenerativeModel(P, rewards=np.zeros((3, 2))))
    with pytest.raises(TypeError, match="RobustHalpernIteration.fit: gen_model: expected a GenerativeModel"):
        rl.RobustHalpernIteration(rl.KLBall(0.1)).fit(P)


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
def test_listing_the_experiment_imports_neither_numpy_nor_torch():
    code = ("import sys, icml26.eval.experiments.rhi; "
            "print(sorted(m for m in ('numpy', 'torch', 'icml26.training.rhi.halpern') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_reduced_experiment_end_to_end(monkeypatch, tmp_path):
    import dataclasses

    from icml26.eval.experiments import rhi
    from icml26.progress import listening
    from icml26.runner import RunConfig

    small = dataclasses.replace(rhi.SETTINGS["quick"], halpern_iters=100, estimator_instances=3,
                                estimator_reps=20_000, figure_budgets=(16,), orders=(1, 2), garnet=(6, 2),
                                rhi_epsilons=(0.4, 0.2), rhi_seeds=2, random_policies=40)
    closed = []
    with listening(lambda tracker, event: closed.append((tracker.name, tracker.n)) if event == "close" else None):
        result = rhi.run_experiment(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path), small)
    assert closed == [("estimators", 2 * 4), ("model-free RHI", 2 * 2 * 2), ("seeds", 1)]
    claims = {c.statement: c for c in result.claims}
    for statement, claim in claims.items():
        if "Halpern" in statement or "relative VI" in statement or "optimistically" in statement \
                or "model-free RHI" in statement or "MLMC |bias| < plug-in" in statement:
            assert claim.holds, (statement, claim.measured, claim.reference)
    assert set(result.figures) == {"residual_vs_k", "bias_vs_budget", "samples_vs_inverse_epsilon"}
    # success is claimed only at eps <= 0.2, each beside the chance that random policies would pass it; the table
    # reports the random-policy pass rate at every eps
    success = [c for c in claims if "model-free RHI" in c]
    assert len(success) == 2 and all("eps = 0.2" in c for c in success)
    baseline = [c for c in claims if "the baseline fails" in c]
    assert len(baseline) == 2 and all(0 <= claims[c].measured <= 1 for c in baseline)
    rows = result.tables["model-free RHI"]
    assert [r["claimed"] for r in rows] == ["no", "yes", "no", "yes"]
    for low, high in zip(rows[1::2], rows[::2]):  # eps = 0.2 then 0.4 of one set: more random policies pass at 0.4
        assert 0 <= low["random-policy pass rate"] <= high["random-policy pass rate"] <= 1
    assert result.metrics["KL_random_pass_rate_eps0.4"] == rows[0]["random-policy pass rate"]
    assert result.metrics["rhi_samples_per_second"] > 0

    # Two seeds: every claim on the median over seeds, each seed's verdict in a table, and the seeds differ.
    two = rhi.run_experiment(RunConfig(mode="quick", seeds=(0, 1), out_dir=tmp_path), small)
    assert len(two.claims) == len(result.claims)
    assert all(c.statement.endswith("(median over seeds 0, 1)") for c in two.claims)
    rows = two.tables["claims per seed"]
    assert [r["seed"] for r in rows[:2]] == [0, 1] and len(rows) == 2 * len(result.claims)
    by_seed = {(r["claim"], r["seed"]): r["measured"] for r in rows}
    bias = [c.statement for c in result.claims if "MLMC |bias| < plug-in" in c.statement][0]
    assert by_seed[(bias, 0)] == claims[bias].measured and by_seed[(bias, 1)] != by_seed[(bias, 0)]


def test_chance_that_random_policies_pass_a_success_claim():
    from icml26.eval.experiments.rhi import chance_to_pass

    p = 0.3
    assert chance_to_pass(p, 5, 0.9) == pytest.approx(p ** 5)  # 90% of 5 seeds: all 5
    assert chance_to_pass(p, 10, 0.9) == pytest.approx(p ** 10 + 10 * p ** 9 * (1 - p))  # 9 or 10 of 10
    assert chance_to_pass(0.0, 10, 0.9) == 0 and chance_to_pass(1.0, 10, 0.9) == pytest.approx(1)
    assert chance_to_pass(p, 10, 0.0) == pytest.approx(1)


def test_inner_seeds_of_neighbouring_experiment_seeds_do_not_overlap():
    from icml26.utils import inner_seed

    zero = {inner_seed(0, 3, i) for i in range(10)}
    one = {inner_seed(1, 3, i) for i in range(10)}
    assert len(zero) == 10 and not zero & one  # `seed + i` would share 9 of 10
    assert inner_seed(0, 3, 1) == inner_seed(0, 3, 1)


@pytest.mark.slow
def test_rhi_reaches_a_small_epsilon():
    for U in (rl.KLBall(0.1), rl.ChiSquareBall(0.1)):
        mdp = rl.garnet(10, 3, U, seed=0)
        g_star = mdp.solve().gain
        for seed in range(3):
            learner = rl.RobustHalpernIteration(U, rl.MLMC(), epsilon=0.05, random_state=seed)
            learner.fit(mdp.generative_model(seed=seed))
            assert learner.converged_ and g_star - mdp.evaluate(learner.policy_) <= 0.05


@pytest.mark.slow
def test_quick_experiment_all_claims_hold(tmp_path):
    from icml26.eval.experiments import rhi
    from icml26.runner import RunConfig

    result = rhi.run(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path))
    assert all(c.holds for c in result.claims), [(c.statement, c.measured) for c in result.claims if not c.holds]
