"""The sampling side of robust RL: a generative model and oracles that estimate support functions.

A learner sees the model only through :class:`GenerativeModel`: it asks for next states of
(s, a) pairs and every sample is counted. An oracle turns such samples into an estimate of the
support function sigma_{P_sa}(V) = min_{q in U(P_sa)} q . V for a batch of (s, a) rows, with one
interface, ``estimate(s_a_batch, V, budget, rng)``:

- ``s_a_batch``: a :class:`SampleBatch` (``gen_model.batch()``), which can only draw samples;
- ``V``: one value vector of shape (S,), or several of shape (F, S) estimated on the *same*
  samples (RHI passes ``[h_k, h_{k-1}]`` and takes the difference: common random numbers make its
  variance scale with Sp(h_k - h_{k-1})^2);
- ``budget``: the expected number of samples per row;
- ``rng``: the oracle's own randomness (MLMC levels), separate from the sampler's.

It returns an array of shape (B,) (or (F, B)). Samples are summarised by next-state counts, so
every support function on an empirical distribution is a vector operation over all rows at once.

Estimators (``sigma`` is non-linear in P for KL and chi-square balls, so the plug-in is biased;
it is convex in P, so the bias is optimistic):

- :class:`PlugIn`: sigma(P_hat_n) with n = budget.
- :class:`MLMC`: randomised multilevel Monte Carlo (Blanchet-Glynn), unbiased.
- :class:`TruncatedMLMC`: the same with the level truncated at ``n_max`` (bias ~ 2^-n_max).
- :class:`KOrderMLMC`: Richardson-extrapolated levels inside truncated MLMC (a reconstruction).

All three MLMC oracles are :func:`mlmc_estimate` with different settings.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import numpy as np

from icml26.errors import InputError, InputTypeError, describe, described
from icml26.validation import check_finite, check_int

# Untruncated MLMC still needs an array-safe cap: P(N > 30) = (1 - psi)^31 < 1e-12 for psi >= 0.6.
_LEVEL_CAP = 30


# ----------------------------------------------------------------------------------------------
# validation shared with halpern.py
# ----------------------------------------------------------------------------------------------
def check_kernel(P, name: str = "P", *, atol: float = 1e-8, function: str = "check_kernel") -> np.ndarray:
    """Validate an (S, A, S) transition kernel: finite, >= 0, every row P[s, a, :] sums to 1 (within ``atol``).

    Errors read ``"<function>: <name>: expected ..., got ..."``."""
    try:
        P = np.asarray(P, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(function, name, "an (S, A, S) array of transition probabilities",
                             described(type(P).__name__)) from None
    if P.ndim != 3 or P.shape[0] != P.shape[2] or min(P.shape) == 0:
        raise InputError(function, name, "an (S, A, S) array of transition probabilities",
                         described(f"shape {P.shape}"))
    if not np.all(np.isfinite(P)):
        raise InputError(function, name, "finite probabilities", described("NaN or inf"))
    if (P < 0).any():
        s, a, t = np.argwhere(P < 0)[0]
        raise InputError(function, name, "probabilities >= 0", described(f"{name}[{s}, {a}, {t}] = {P[s, a, t]:.6g}"))
    sums = P.sum(-1)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        s, a = np.argwhere(bad)[0]
        raise InputError(function, name, f"transition rows {name}[s, a, :] that sum to 1 (tolerance {atol:g})",
                         described(f"{name}[{s}, {a}, :].sum() = {sums[s, a]:.10g}"))
    return P


def check_rewards(r, shape: tuple[int, int], name: str = "r", *, function: str = "check_rewards") -> np.ndarray:
    """Validate rewards: a finite array of ``shape`` (S, A)."""
    try:
        r = np.asarray(r, dtype=float)
    except (TypeError, ValueError):
        raise InputTypeError(function, name, f"rewards of shape (S, A) = {tuple(shape)}",
                             described(type(r).__name__)) from None
    if r.shape != tuple(shape):
        raise InputError(function, name, f"rewards of shape (S, A) = {tuple(shape)}", described(f"shape {r.shape}"))
    if not np.all(np.isfinite(r)):
        raise InputError(function, name, "finite rewards", described("NaN or inf"))
    return r


# ----------------------------------------------------------------------------------------------
# generative model
# ----------------------------------------------------------------------------------------------
class GenerativeModel:
    """Draws next states s' ~ P(. | s, a) for any queried (s, a) and counts every sample.

    This is the only access a learner has to the model: the kernel is kept in a private
    attribute and never handed out. Rewards are deterministic and known to the learner (the usual
    generative-model setting), so they are public.

    Args:
        P: The nominal kernel, an array (S, A, S) (rows must sum to 1).
        seed: Randomness of the sampler (int, numpy Generator or None).
        rewards: r(s, a), an array (S, A), optional; needed by learners such as
            :class:`RobustHalpernIteration`.

    Attributes:
        n_states (int): Number of states S.
        n_actions (int): Number of actions A.
        rewards (array (S, A) or None): The rewards given at construction.
        samples_used (int): Next states drawn so far.
    """

    def __init__(self, P, seed=None, *, rewards=None):
        P = check_kernel(P, function="GenerativeModel")
        self.n_states, self.n_actions = P.shape[0], P.shape[1]
        self.rewards = None if rewards is None else check_rewards(rewards, P.shape[:2], "rewards",
                                                                  function="GenerativeModel")
        if seed is not None and not isinstance(seed, (int, np.integer, np.random.Generator, np.random.SeedSequence)) \
                or isinstance(seed, bool):
            raise InputTypeError("GenerativeModel", "seed", "None, an int, a SeedSequence or a numpy Generator",
                                 described(type(seed).__name__))
        self.__kernel = P / P.sum(-1, keepdims=True)  # exact normalisation keeps numpy's multinomial happy
        self._rng = np.random.default_rng(seed)
        self.samples_used = 0

    def _rows(self, states, actions, function: str = "GenerativeModel") -> np.ndarray:
        states, actions = np.asarray(states), np.asarray(actions)
        for name, x, top in (("states", states, self.n_states), ("actions", actions, self.n_actions)):
            if x.ndim > 1 or not np.issubdtype(x.dtype, np.integer):
                raise InputError(function, name, "an int or a 1-D integer array", describe(x))
            if x.size and (x.min() < 0 or x.max() >= top):
                raise InputError(function, name, f"values in [0, {top})",
                                 described(f"values in [{x.min()}, {x.max()}]"))
        try:
            states, actions = np.broadcast_arrays(np.atleast_1d(states), np.atleast_1d(actions))
        except ValueError:
            raise InputError(function, "actions", f"an int or {states.size} actions (one per state)",
                             describe(actions)) from None
        return self.__kernel[states, actions]

    def sample_counts(self, states, actions, n) -> np.ndarray:
        """Next-state counts (B, S) of ``n`` samples per pair (``n``: int or one int per pair)."""
        f = "GenerativeModel.sample_counts"
        pvals = self._rows(states, actions, f)
        n = np.asarray(n)
        if not np.issubdtype(n.dtype, np.integer) or n.ndim > 1 or (n.ndim == 1 and n.shape != pvals.shape[:1]):
            raise InputError(f, "n", f"an int or {len(pvals)} ints (one per pair)", describe(n))
        n = np.broadcast_to(n.astype(np.int64), pvals.shape[:1])
        if (n < 0).any():
            raise InputError(f, "n", "sample sizes >= 0", described(f"min {n.min()}"))
        self.samples_used += int(n.sum())
        return self._rng.multinomial(n, pvals)

    def sample(self, states, actions, n: int) -> np.ndarray:
        """``n`` next states for each pair, shape (B, n) (inverse-CDF sampling, vectorised)."""
        pvals = self._rows(states, actions, "GenerativeModel.sample")
        n = check_int("GenerativeModel.sample", "n", n, low=0)
        self.samples_used += pvals.shape[0] * n
        u = self._rng.random((pvals.shape[0], n))
        cdf = np.cumsum(pvals, -1)
        return np.minimum((u[:, :, None] >= cdf[:, None, :]).sum(-1), self.n_states - 1)

    def batch(self, states=None, actions=None) -> SampleBatch:
        """A handle on a fixed batch of (s, a) pairs: all pairs in (s, a) order by default."""
        if states is None and actions is None:
            states, actions = np.divmod(np.arange(self.n_states * self.n_actions), self.n_actions)
        if (states is None) != (actions is None):
            raise InputError("GenerativeModel.batch", "actions" if actions is None else "states",
                             "both states and actions, or neither (all pairs)", None)
        self._rows(states, actions, "GenerativeModel.batch")  # validate now
        states, actions = np.broadcast_arrays(np.atleast_1d(states), np.atleast_1d(actions))
        return SampleBatch(self, np.asarray(states), np.asarray(actions))

    def __repr__(self) -> str:
        return f"GenerativeModel(n_states={self.n_states}, n_actions={self.n_actions}, samples_used={self.samples_used})"


class SampleBatch:
    """A batch of (s, a) rows that can only draw next-state counts (what oracles receive)."""

    def __init__(self, model: GenerativeModel, states: np.ndarray, actions: np.ndarray):
        self._model, self.states, self.actions = model, states, actions
        self.size, self.n_states = len(states), model.n_states

    def draw(self, n, rows=None) -> np.ndarray:
        """Counts (len(rows), S) of ``n`` samples for each chosen row (``n``: int or per row)."""
        rows = np.arange(self.size) if rows is None else np.asarray(rows)
        if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer) or (
                rows.size and (rows.min() < 0 or rows.max() >= self.size)):
            raise InputError("SampleBatch.draw", "rows", f"None or a 1-D array of row indices in [0, {self.size})",
                             describe(rows))
        return self._model.sample_counts(self.states[rows], self.actions[rows], n)


# ----------------------------------------------------------------------------------------------
# MLMC machinery
# ----------------------------------------------------------------------------------------------
def richardson_weights(order: int) -> np.ndarray:
    """Weights w_0..w_{K-1} with sum_j w_j 2^{i j} = [i == 0] for i < K.

    Applied to plug-ins f_{n-j} on 2^{n-j} samples, they cancel the bias terms c_i 2^{-i n},
    i = 1..K-1: K=1 -> [1], K=2 -> [2, -1], K=3 -> [8/3, -2, 1/3].
    """
    order = check_int("richardson_weights", "order", order, low=1)
    j = np.arange(order)
    vandermonde = 2.0 ** np.outer(j, j)  # row i: 2^{i j}
    rhs = np.zeros(order)
    rhs[0] = 1.0
    return np.linalg.solve(vandermonde, rhs)


def level_probabilities(psi: float, n_max: int | None) -> np.ndarray:
    """p_n = psi (1 - psi)^n for n < n_max and the tail (1 - psi)^n_max at n_max (``n_max=None``: capped at 30)."""
    _check_levels("level_probabilities", psi, n_max)
    return _level_probabilities(psi, n_max)


def _check_levels(function: str, psi, n_max) -> None:
    check_finite(function, "psi", psi, low=0, high=1, low_open=True, high_open=True)
    if n_max is not None:
        check_int(function, "n_max", n_max, low=0, high=_LEVEL_CAP)


def _level_probabilities(psi: float, n_max: int | None) -> np.ndarray:
    top = _LEVEL_CAP if n_max is None else n_max
    p = psi * (1 - psi) ** np.arange(top + 1)
    p[top] = (1 - psi) ** top
    return p


def mlmc_cost_factor(psi: float, n_max: int | None) -> float:
    """Expected samples per unit of base size: 1 (base) + E[2^(N+1)] (the level's two halves)."""
    _check_levels("mlmc_cost_factor", psi, n_max)
    p = _level_probabilities(psi, n_max)
    return float(1.0 + (p * 2.0 ** (np.arange(len(p)) + 1)).sum())


def mlmc_estimate(sample_fn: Callable, functional: Callable, V, *, base, order: int = 1, psi: float = 0.6,
                  n_max: int | None = None, rng: np.random.Generator) -> np.ndarray:
    """Randomised MLMC estimate of functional(P, V) for B rows, vectorised over rows.

    - ``sample_fn(rows, n)`` -> next-state counts (len(rows), S): ``n[i]`` samples of row ``rows[i]``;
    - ``functional(P_hat, V)`` -> (F, M) values for P_hat (M, S) and V (F, S);
    - ``base``: (B,) base sample sizes n0 (the telescoping starts at the plug-in on n0 samples);
    - ``order``: K of the Richardson-extrapolated levels (K=1: standard antithetic MLMC);
    - ``psi``, ``n_max``: level N ~ Geometric(psi) on {0, 1, ...}, truncated at ``n_max``.

    For a row with level N, 2 n0 2^N samples are drawn and split into dyadic blocks. With
    f(X) the plug-in on a block X and R_K(X) = sum_j w_j * mean of f over the 2^j sub-blocks of X
    (:func:`richardson_weights`, order clipped where blocks would get smaller than n0)::

        estimate = f(P_hat_n0) + [R_K(A u B) - (R_K(A) + R_K(B)) / 2] / p_N

    where A, B are the two halves. E[estimate] telescopes to E[R_K on n0 2^(n_max+1) samples]: unbiased
    for the untruncated version, bias O(2^(-K n_max)) for smooth functionals when truncated.
    Averaging f over all dyadic sub-blocks (rather than nested prefixes) keeps every correction an
    average of antithetic differences, so its variance stays O(4^-N) for smooth functionals.
    """
    f = "mlmc_estimate"
    for name, fn in (("sample_fn", sample_fn), ("functional", functional)):
        if not callable(fn):
            raise InputTypeError(f, name, "a callable", described(type(fn).__name__))
    V = np.atleast_2d(np.asarray(V, dtype=float))
    if V.ndim != 2 or not np.isfinite(V).all():
        raise InputError(f, "V", "finite values of shape (S,) or (F, S)", describe(V))
    base = np.asarray(base)
    if base.ndim != 1 or len(base) == 0 or not np.issubdtype(base.dtype, np.integer) or (base < 1).any():
        raise InputError(f, "base", "a non-empty 1-D integer array of base sample sizes >= 1", describe(base))
    base = base.astype(np.int64)
    order = check_int(f, "order", order, low=1)
    _check_levels(f, psi, n_max)
    if not isinstance(rng, np.random.Generator):
        raise InputTypeError(f, "rng", "a numpy Generator", described(type(rng).__name__))
    B = base.shape[0]
    p_levels = _level_probabilities(psi, n_max)
    levels = np.minimum(rng.geometric(psi, size=B) - 1, len(p_levels) - 1)

    # 1) draw every sample: the base sets, then per level group the finest dyadic blocks
    pieces = [sample_fn(np.arange(B), base)]
    groups = []
    for N in np.unique(levels):
        rows = np.flatnonzero(levels == N)
        depth = int(min(order, N + 1))  # finest blocks: 2^depth blocks of n0 2^(N+1-depth) samples
        nb, M = 2 ** depth, len(rows)
        block = sample_fn(np.repeat(rows, nb), np.repeat(base[rows] * 2 ** int(N + 1 - depth), nb))
        block = block.reshape(M, nb, -1)
        for d in range(depth + 1):  # depth d: 2^d blocks, each the union of 2^(depth-d) finest blocks
            pieces.append(block.reshape(M, 2 ** d, nb // 2 ** d, -1).sum(2).reshape(M * 2 ** d, -1))
        groups.append((rows, int(N), depth))

    # 2) one functional call for everything (one vectorised support evaluation per oracle call)
    counts = np.concatenate(pieces)
    values = functional(counts / counts.sum(-1, keepdims=True), V)  # (F, total)
    F = values.shape[0]
    estimate = values[:, :B].copy()
    at = B

    # 3) assemble the antithetic Richardson corrections
    def richardson(by_depth, d, m):
        """R_K for every block at depth d whose size is n0 2^m."""
        k = min(order, m + 1)
        w = richardson_weights(k)
        return sum(w[j] * by_depth[d + j].reshape(F, -1, 2 ** d, 2 ** j).mean(-1) for j in range(k))

    for rows, N, depth in groups:
        M = len(rows)
        by_depth = []
        for d in range(depth + 1):
            by_depth.append(values[:, at:at + M * 2 ** d].reshape(F, M, 2 ** d))
            at += M * 2 ** d
        full = richardson(by_depth, 0, N + 1)[..., 0]
        halves = richardson(by_depth, 1, N)
        estimate[:, rows] += (full - halves.mean(-1)) / p_levels[N]
    return estimate


def _unique_rows(X: np.ndarray):
    """(distinct rows, inverse) when at most half the rows are distinct, else None.

    Empirical distributions from few samples repeat a lot (an S=2 row of 16 samples takes 17
    values), so this saves most of the support evaluations in large studies. Rows are grouped by a
    random projection and the grouping is verified exactly; on any collision we do not deduplicate.
    """
    key = X @ np.random.default_rng(0).uniform(0.5, 1.5, X.shape[1])
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    if len(first) > len(X) // 2 or not (X[first][inverse] == X).all():
        return None
    return X[first], inverse


# ----------------------------------------------------------------------------------------------
# oracles
# ----------------------------------------------------------------------------------------------
class SupportOracle:
    """Base class: estimates sigma_{P_sa}(V) for the rows of a :class:`SampleBatch`.

    ``uncertainty`` (an uncertainty set of :mod:`icml26.training.rhi.halpern`) may be given here or
    bound later with :meth:`bind` (what :class:`RobustHalpernIteration` does).
    ``cost_factor`` is the expected number of samples per unit of the oracle's base sample size:
    with ``budget = m * cost_factor`` the oracle's leading variance is that of an m-sample mean.
    """

    cost_factor: float = 1.0

    def __init__(self, uncertainty=None):
        if uncertainty is not None and not callable(getattr(uncertainty, "_support", None)):
            raise InputTypeError(type(self).__name__, "uncertainty", "None or an uncertainty set (Contamination, "
                                 "LpBall, KLBall, ChiSquareBall)", described(type(uncertainty).__name__))
        self.uncertainty = uncertainty

    def bind(self, uncertainty) -> SupportOracle:
        """A copy of this oracle estimating the support function of ``uncertainty``."""
        if not callable(getattr(uncertainty, "_support", None)):
            raise InputTypeError(f"{type(self).__name__}.bind", "uncertainty", "an uncertainty set (Contamination, "
                                 "LpBall, KLBall, ChiSquareBall)", described(type(uncertainty).__name__))
        bound = copy.copy(self)
        SupportOracle.__init__(bound, uncertainty)
        return bound

    def _functional(self, P_hat: np.ndarray, V: np.ndarray) -> np.ndarray:
        """sigma for every empirical row and every V: (F, M). Repeated rows are evaluated once."""
        unique = _unique_rows(P_hat) if len(P_hat) > 1000 else None
        if unique is not None:
            rows, inverse = unique
            return self.uncertainty._support(rows[None, :, :], V[:, None, :])[:, inverse]
        return self.uncertainty._support(P_hat[None, :, :], V[:, None, :])

    def _prepare(self, s_a_batch, V, budget):
        name = type(self).__name__
        if self.uncertainty is None:
            raise InputError(name, "uncertainty", "an uncertainty set (construct the oracle with uncertainty=... "
                             "or call bind(...))", described("None (no uncertainty set)"))
        if not callable(getattr(s_a_batch, "draw", None)):  # duck-typed: wrappers and stubs of a SampleBatch pass
            raise InputTypeError(f"{name}.estimate", "s_a_batch", "a SampleBatch (gen_model.batch())",
                                 described(type(s_a_batch).__name__))
        try:
            V = np.asarray(V, dtype=float)
        except (TypeError, ValueError):
            raise InputTypeError(f"{name}.estimate", "V", "an array of values", described(type(V).__name__)) from None
        if V.ndim not in (1, 2) or V.shape[-1] != s_a_batch.n_states or not np.all(np.isfinite(V)):
            raise InputError(f"{name}.estimate", "V", f"finite values of shape (S,) or (F, S) with "
                             f"S = {s_a_batch.n_states}", described(f"shape {V.shape}"))
        check_finite(f"{name}.estimate", "budget", budget, low=0, low_open=True)
        return V

    def estimate(self, s_a_batch, V, budget, rng) -> np.ndarray:
        raise NotImplementedError

    def __repr__(self) -> str:
        params = {k: v for k, v in vars(self).items() if k != "uncertainty"}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in params.items())})"


class PlugIn(SupportOracle):
    """sigma(P_hat_n, V) with n = round(budget) samples per row (biased upwards for KL / chi-square)."""

    def estimate(self, s_a_batch, V, budget, rng=None) -> np.ndarray:
        V = self._prepare(s_a_batch, V, budget)
        n = max(1, int(round(budget)))
        counts = s_a_batch.draw(n)
        out = self._functional(counts / n, np.atleast_2d(V))
        return out[0] if V.ndim == 1 else out


class KOrderMLMC(SupportOracle):
    """K-order MLMC: Richardson-extrapolated levels telescoped inside truncated randomised MLMC.

    RECONSTRUCTION: the v3 paper's exact K-order estimator was not reachable. This is the
    Richardson/Romberg reading of "lower bias than prior methods": level plug-ins are replaced by
    R_K = sum_j w_j f_{n-j} (:func:`richardson_weights`) computed on dyadic sub-blocks of the same
    samples, cancelling the bias terms 2^{-i n}, i < K. ``order=1`` is exactly truncated antithetic
    MLMC (:class:`TruncatedMLMC`). The whole estimator is :func:`mlmc_estimate`, so the paper's
    definition can replace it behind the same ``estimate`` interface.

    Parameters: ``order`` K >= 1, ``n_max`` >= 0 (truncation level), ``psi`` in (0, 1)
    (geometric level distribution).
    """

    def __init__(self, order: int = 2, n_max: int = 4, psi: float = 0.6, uncertainty=None):
        super().__init__(uncertainty)
        name = type(self).__name__
        self.order = check_int(name, "order", order, low=1)
        self.n_max = None if n_max is None else check_int(name, "n_max", n_max, low=0, high=_LEVEL_CAP)
        self.psi = check_finite(name, "psi", psi, low=0, high=1, low_open=True, high_open=True)

    @property
    def cost_factor(self) -> float:
        return mlmc_cost_factor(self.psi, self.n_max)

    def estimate(self, s_a_batch, V, budget, rng) -> np.ndarray:
        """Base size n0 = budget / cost_factor (randomly rounded, >= 1): the expected samples equal the budget."""
        V = self._prepare(s_a_batch, V, budget)
        if not isinstance(rng, np.random.Generator):
            raise InputTypeError(f"{type(self).__name__}.estimate", "rng", "a numpy Generator",
                                 described(type(rng).__name__))
        n0 = budget / self.cost_factor
        base = np.maximum(1, np.floor(n0) + (rng.random(s_a_batch.size) < n0 - np.floor(n0))).astype(np.int64)
        out = mlmc_estimate(lambda rows, n: s_a_batch.draw(n, rows), self._functional, V, base=base,
                            order=self.order, psi=self.psi, n_max=self.n_max, rng=rng)
        return out[0] if V.ndim == 1 else out


class TruncatedMLMC(KOrderMLMC):
    """Antithetic randomised MLMC with the level truncated at ``n_max`` (Xu, Wang et al. 2025).

    Finite, constant expected cost; unbiased for the plug-in on n0 2^(n_max+1) samples, so the bias
    decays like 2^-n_max. Same as ``KOrderMLMC(order=1, n_max)``.
    """

    def __init__(self, n_max: int = 4, psi: float = 0.6, uncertainty=None):
        super().__init__(order=1, n_max=n_max, psi=psi, uncertainty=uncertainty)

    def __repr__(self) -> str:
        return f"TruncatedMLMC(n_max={self.n_max!r}, psi={self.psi!r})"


class MLMC(KOrderMLMC):
    """Standard randomised antithetic MLMC (Blanchet-Glynn; Liu et al. 2022, Wang et al. 2023).

    N ~ Geometric(psi); 2 n0 2^N samples; estimate = f(P_hat_n0) + Delta_N / p_N, unbiased when its
    expectation exists. ``psi`` in (1/2, 1) gives a finite expected cost (``cost_factor`` = 1 +
    2 psi / (2 psi - 1)); psi < 3/4 also gives a finite variance for smooth support functions. With
    n0 = 1 this is the textbook estimator; a larger budget raises n0 (one level draw per row instead
    of an average of many replicates). Levels are capped at 30 for array safety (P < 1e-12 at psi=0.6).
    """

    def __init__(self, psi: float = 0.6, uncertainty=None):
        psi = check_finite("MLMC", "psi", psi, low=0.5, high=1, low_open=True, high_open=True)
        super().__init__(order=1, n_max=None, psi=psi, uncertainty=uncertainty)

    def __repr__(self) -> str:
        return f"MLMC(psi={self.psi!r})"
