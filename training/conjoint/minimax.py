"""The two-party game over factored policies (``icml26.training.conjoint.MinimaxPolicy``).

Jerzak, Chandra & Hazra (ICML 2026, arXiv 2504.19043), the adversarial case: parties A and B choose
factored policies pi_A, pi_B; voters come from groups with shares rho_g; A's general-election win
probability is Q_A = sum_g rho_g E_{t~nu_A, u~nu_B}[P_g(t beats u)] and Q_B = 1 - Q_A; each party
maximises its own Q minus lam Pen(pi, p). With primaries (the reference's ``two_step_optimize_vectorize_q.R``,
``adversarial_model_strategy="four"``) a party's nominee is the winner of a primary between its entrant
t ~ pi and a field candidate t' ~ slate (the design p), judged by the party's primary voters with
coefficients scaled by ``primary_strength``: nu(x) = pi(x) E_{t'}[kappa(x, t')] + slate(x) (1 - E_{t~pi}[kappa(t, x)]).

Everything is exact over the enumerated profile space, so the best-response gap is not sampling noise; above
``MAX_PROFILES`` profiles (or with ``FactorialDesign(n_monte=...)``) the game is played on the design's fixed
Monte-Carlo sample of profiles (common random numbers, :mod:`icml26.training.conjoint.profiles`), where the gap is
exact for that sample and the slate is the sample itself; ``n_monte`` replaces the slate by the empirical distribution of ``n_monte`` fixed draws from
p (common random numbers, as the reference's ``nMonte_adversarial``).
Reconstruction: the strategic divergence is the per-factor total variation ``1/2 sum_l abs(pi_A,dl - pi_B,dl)`` and
its mean over factors (the paper's abstract names it; its formula was not located in the code).
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.base import BaseEstimator

from icml26.errors import InputTypeError, described, input_error
from icml26.training.conjoint.model import DTYPE, FactorialDesign, PairedConjointLogit
from icml26.training.conjoint.policy import (
    PENALTIES,
    _initial_logits,
    _penalty,
    _softmax_split,
    ascend,
)
from icml26.training.conjoint.profiles import profile_table, row_weights
from icml26.validation import check_choice, check_finite, check_int, check_random_state

PLAYERS = ("A", "B")
METHODS = ("extragradient", "ogda", "gda")


class MinimaxPolicy(BaseEstimator):
    """Equilibrium factored policies of two parties, with delta-method SEs and a best-response gap.

    A scikit-learn estimator: the constructor stores its parameters, :meth:`fit` checks them, and ``clone``,
    ``get_params`` and ``set_params`` work (``fit`` takes fitted outcome models, not ``(X, y)``).

    ``group_shares``: (rho_A, rho_B), the shares of the two voter groups (summing to 1). ``fit(models,
    design=None)`` takes ``{"A": model, "B": model}`` (the general-election outcome models of A's and B's
    voters) and, with ``primaries=True``, optionally ``"A_primary"`` / ``"B_primary"`` (default: the party's
    own voters' model). ``method``: ``"extragradient"`` (default, as the reference's ``optimism="extragrad"``),
    ``"ogda"`` or ``"gda"`` (simultaneous gradient ascent, which can cycle), on softmax logits with step ``lr``
    (default 1 / (2 L), L the spectral norm of the Jacobian of the players' gradient field at the start); the
    iteration stops when no probability moves by more than ``tol`` in a step, or after ``n_steps``.

    After fit: ``pi_A_``, ``pi_B_`` (per factor), ``value_A_``, ``value_B_ = 1 - value_A_``, ``divergence_``
    (mean per-factor TV; ``divergence_by_factor_``), their SEs (``*_se_``) from J Sigma J^T with J by implicit
    differentiation of both players' first-order conditions (``torch.func``) and Sigma block-diagonal over the
    distinct models, ``best_response_gap_`` = max over players of (best penalised payoff against the other's
    policy, found by a separate L-BFGS ascent from several starts) - (the returned payoff), ``n_iter_``.
    """

    def __init__(self, group_shares=(0.5, 0.5), penalty: str = "L2", lam: float = 1.0,
                 method: str = "extragradient", primaries: bool = False, primary_strength: float = 1.0,
                 n_monte: int | None = None, lr: float | None = None, n_steps: int = 2000, tol: float = 1e-10,
                 conf_level: float = 0.90, random_state=None):
        self.group_shares = group_shares
        self.penalty = penalty
        self.lam = lam
        self.method = method
        self.primaries = primaries
        self.primary_strength = primary_strength
        self.n_monte = n_monte
        self.lr = lr
        self.n_steps = n_steps
        self.tol = tol
        self.conf_level = conf_level
        self.random_state = random_state

    def _check_params(self, function: str) -> None:
        """scikit-learn's rule: ``__init__`` stores, ``fit`` validates (so ``set_params`` values are checked too)."""
        try:
            shares = np.atleast_1d(np.asarray(self.group_shares, dtype=float))
        except (TypeError, ValueError):
            raise InputTypeError(function, "group_shares", "(rho_A, rho_B), two non-negative shares summing to 1",
                                 described(type(self.group_shares).__name__)) from None
        if shares.shape != (2,) or not np.isfinite(shares).all() or (shares < 0).any() or abs(shares.sum() - 1) > 1e-8:
            raise input_error(function, "group_shares", "(rho_A, rho_B), two non-negative shares summing to 1",
                              self.group_shares)
        check_choice(function, "penalty", self.penalty, PENALTIES)
        check_finite(function, "lam", self.lam, non_negative=True)
        check_choice(function, "method", self.method, METHODS)
        if not isinstance(self.primaries, (bool, np.bool_)):
            raise InputTypeError(function, "primaries", "a bool", described(f"{type(self.primaries).__name__} "
                                                                           f"{self.primaries!r}"))
        check_finite(function, "primary_strength", self.primary_strength, non_negative=True)
        if self.n_monte is not None:
            check_int(function, "n_monte", self.n_monte, low=1)
        if self.lr is not None:
            check_finite(function, "lr", self.lr, positive=True)
        check_int(function, "n_steps", self.n_steps, low=1)
        check_finite(function, "tol", self.tol, non_negative=True)
        check_finite(function, "conf_level", self.conf_level, low=0, high=1, low_open=True, high_open=True)
        check_random_state(function, "random_state", self.random_state)

    def _check_fitted(self, function: str) -> None:
        if not hasattr(self, "_roles"):
            raise input_error(function, "self", "a fitted game (call fit first)", described("an unfitted one"))

    # -- the game ------------------------------------------------------------------------------------
    def _setup(self, models, design):
        name = "MinimaxPolicy.fit"
        self._check_params(name)
        if design is not None and not isinstance(design, FactorialDesign):
            raise InputTypeError(name, "design", "None or a FactorialDesign", described(type(design).__name__))
        if not hasattr(models, "keys") or not {"A", "B"} <= set(models):
            raise input_error(name, "models", "a mapping with keys 'A' and 'B' (and optionally 'A_primary', "
                              "'B_primary')", models)
        unknown = set(models) - {"A", "B", "A_primary", "B_primary"}
        if unknown:
            raise input_error(name, "models", "keys among 'A', 'B', 'A_primary', 'B_primary'", sorted(unknown))
        for key, m in models.items():
            if not isinstance(m, PairedConjointLogit):
                raise InputTypeError(name, f"models[{key!r}]", "a fitted PairedConjointLogit",
                                     described(type(m).__name__))
            m._check_fitted(name)
        design = design or models["A"].design_
        for key, m in models.items():
            if m.design_.factors != design.factors or m.design_.n_levels != design.n_levels:
                raise input_error(name, f"models[{key!r}]", f"a model over the design {design!r}", m.design_)
        roles = {"A": models["A"], "B": models["B"]}
        if self.primaries:
            roles["A_primary"] = models.get("A_primary", models["A"])
            roles["B_primary"] = models.get("B_primary", models["B"])
        unique = []
        for m in roles.values():
            if all(m is not u for u in unique):
                unique.append(m)
        self._models, self._roles, self.design_ = unique, roles, design
        self._index = {key: next(i for i, u in enumerate(unique) if u is m) for key, m in roles.items()}
        sizes = [len(m.coef_) for m in unique]
        self._offsets = np.cumsum([0] + sizes)
        self._theta = torch.cat([m.coef_tensor() for m in unique])
        grid, _, base = profile_table(design, roles["A"].pairs_)
        self._grid, self._base = grid, base
        if self.n_monte is None or design.monte_carlo:
            self._slate = row_weights(design, design.p_tensor(), grid, base)
        else:
            rng = np.random.default_rng(self.random_state)
            draws = design.sample(self.n_monte, rng)
            index = np.ravel_multi_index(draws.T, design.n_levels)
            self._slate = torch.as_tensor(np.bincount(index, minlength=design.n_profiles) / self.n_monte, dtype=DTYPE)

    def _coef(self, theta, role):
        i = self._index[role]
        return theta[self._offsets[i]:self._offsets[i + 1]]

    def _matrices(self, theta):
        """(S, K_A, K_B): S[t, u] = P(a nominee t beats a nominee u) over the electorate; K_party[t, t'] =
        P(entrant t beats field candidate t') among the party's primary voters (None without primaries)."""
        rho_A, rho_B = self.group_shares
        S = (rho_A * self._roles["A"]._win_matrix(self._coef(theta, "A"))
             + rho_B * self._roles["B"]._win_matrix(self._coef(theta, "B")))
        if not self.primaries:
            return S, None, None
        K = [self._roles[f"{party}_primary"]._win_matrix(self._coef(theta, f"{party}_primary"), self.primary_strength)
             for party in PLAYERS]
        return S, K[0], K[1]

    def _nominee(self, profile_probs, K):
        if K is None:
            return profile_probs
        slate = self._slate
        return profile_probs * (K @ slate) + slate * (1 - K.T @ profile_probs)

    def _win_A(self, pi_A, pi_B, S, K_A, K_B):
        design = self.design_
        nu_A = self._nominee(row_weights(design, pi_A, self._grid, self._base), K_A)
        nu_B = self._nominee(row_weights(design, pi_B, self._grid, self._base), K_B)
        return nu_A @ S @ nu_B

    def _game(self, pi_A, pi_B, theta):
        """(f_A, f_B, Q_A, Q_B): penalised payoffs and win probabilities, Q_B computed from B's side."""
        design = self.design_
        S, K_A, K_B = self._matrices(theta)
        nu_A = self._nominee(row_weights(design, pi_A, self._grid, self._base), K_A)
        nu_B = self._nominee(row_weights(design, pi_B, self._grid, self._base), K_B)
        Q_A, Q_B = nu_A @ S @ nu_B, nu_B @ S @ nu_A  # S[t, u] = P(a nominee t beats a nominee u)
        p = design.p_tensor()
        return (Q_A - self.lam * _penalty(self.penalty, pi_A, p), Q_B - self.lam * _penalty(self.penalty, pi_B, p),
                Q_A, Q_B)

    def payoffs(self, pi_A, pi_B) -> dict[str, float]:
        """Q_A, Q_B (each from its own side) and the penalised payoffs f_A, f_B at given policies."""
        self._check_fitted("MinimaxPolicy.payoffs")
        design = self.design_
        pi_A = design.check_policy(pi_A, "MinimaxPolicy.payoffs", "pi_A")
        pi_B = design.check_policy(pi_B, "MinimaxPolicy.payoffs", "pi_B")
        with torch.no_grad():
            f_A, f_B, Q_A, Q_B = self._game(pi_A, pi_B, self._theta)
        return {"Q_A": float(Q_A), "Q_B": float(Q_B), "f_A": float(f_A), "f_B": float(f_B)}

    def best_response(self, player: str, opponent, n_starts: int = 3):
        """(pi, f): the player's best penalised payoff against ``opponent`` by L-BFGS on the logits, the best of
        starts at the player's equilibrium policy (when fitted), at p, and at ``n_starts`` random logits."""
        name = "MinimaxPolicy.best_response"
        self._check_fitted(name)
        check_choice(name, "player", player, PLAYERS)
        n_starts = check_int(name, "n_starts", n_starts, low=0)
        design = self.design_
        opponent = design.check_policy(opponent, "MinimaxPolicy.best_response", "opponent")
        smooth = self.penalty in ("L2", "KL")

        def payoff(logits):
            pi = _softmax_split(design, logits)
            out = self._game(pi, opponent, self._theta) if player == "A" else self._game(opponent, pi, self._theta)
            return out[0] if player == "A" else out[1]

        rng = np.random.default_rng(self.random_state)
        starts = [_initial_logits(design, None)]
        if hasattr(self, "_logits"):
            starts.insert(0, self._logits[0 if player == "A" else 1])
        starts += [torch.as_tensor(rng.normal(0, 1, starts[-1].shape), dtype=DTYPE) for _ in range(n_starts)]
        best = None
        for start in starts:
            logits = ascend(payoff, start, smooth, max_iter=500)
            with torch.no_grad():
                value = float(payoff(logits))
            if best is None or value > best[1]:
                best = (logits, value)
        return [q.detach().numpy() for q in _softmax_split(design, best[0])], best[1]

    def average_case(self, player: str):
        """(pi, f) of the party's average-case strategy: the best reply to the design's opponent p of the
        general electorate's win probability alone (no primaries, the opponent not anticipated), as a
        non-adversarial optimiser would choose; ``f`` is its penalised payoff in that simpler problem."""
        self._check_fitted("MinimaxPolicy.average_case")
        check_choice("MinimaxPolicy.average_case", "player", player, PLAYERS)
        plain = MinimaxPolicy(self.group_shares, self.penalty, self.lam, primaries=False,
                              random_state=self.random_state)
        plain._setup({"A": self._roles["A"], "B": self._roles["B"]}, self.design_)
        return plain.best_response(player, self.design_.p)

    # -- solving ---------------------------------------------------------------------------------------
    def fit(self, models, design=None) -> MinimaxPolicy:
        self._setup(models, design)
        design, theta = self.design_, self._theta
        rng = np.random.default_rng(self.random_state)
        a, b = _initial_logits(design, rng), _initial_logits(design, rng)

        # The field (grad_a f_A, grad_b f_B) from one forward pass: with Q_B = 1 - Q_A and
        # L = Q_A - lam Pen_A + lam Pen_B, grad_a f_A = grad_a L and grad_b f_B = -grad_b L. The electorate's
        # and primaries' win matrices are fixed during the solve, so they are computed once.
        with torch.no_grad():
            mats = self._matrices(theta)
        p = design.p_tensor()

        def lagrangian(a, b):
            pi_A, pi_B = _softmax_split(design, a), _softmax_split(design, b)
            Q_A = self._win_A(pi_A, pi_B, *mats)
            return Q_A - self.lam * _penalty(self.penalty, pi_A, p) + self.lam * _penalty(self.penalty, pi_B, p)

        def grads(a, b):
            a = a.detach().requires_grad_(True)
            b = b.detach().requires_grad_(True)
            g_a, g_b = torch.autograd.grad(lagrangian(a, b), (a, b))
            return g_a, -g_b

        # the step: at most 1/(2L), L the spectral norm of the field's Jacobian at the start (a large lam is a
        # stiff game, where a fixed step would overshoot and cycle)
        n = len(a)

        def field(z):
            g = torch.func.grad(lambda w: lagrangian(w[:n], w[n:]))(z)
            return torch.cat([g[:n], -g[n:]])

        L = float(torch.linalg.matrix_norm(torch.func.jacrev(field)(torch.cat([a, b])), ord=2))
        lr, previous = (0.5 / max(L, 1e-12) if self.lr is None else self.lr), None
        self.lr_used_ = lr
        for step in range(1, self.n_steps + 1):  # noqa: B007 (the count is read after the loop)
            g_a, g_b = grads(a, b)
            if self.method == "extragradient":
                h_a, h_b = grads(a + lr * g_a, b + lr * g_b)
                new_a, new_b = a + lr * h_a, b + lr * h_b
            elif self.method == "ogda":
                old_a, old_b = previous if previous is not None else (g_a, g_b)
                new_a, new_b = a + 2 * lr * g_a - lr * old_a, b + 2 * lr * g_b - lr * old_b
                previous = (g_a, g_b)
            else:
                new_a, new_b = a + lr * g_a, b + lr * g_b
            # convergence in the policies (logits may drift along directions softmax ignores)
            moved = max(float((x - y).abs().max()) for x, y in
                        zip(_softmax_split(design, new_a) + _softmax_split(design, new_b),
                            _softmax_split(design, a) + _softmax_split(design, b)))
            a, b = new_a, new_b
            if moved < self.tol:
                break
        self.n_iter_ = step
        self._logits = (a.detach(), b.detach())
        pi_A, pi_B = _softmax_split(design, a), _softmax_split(design, b)
        self.pi_A_ = [q.detach().numpy() for q in pi_A]
        self.pi_B_ = [q.detach().numpy() for q in pi_B]
        with torch.no_grad():
            f_A, f_B, Q_A, Q_B = self._game(pi_A, pi_B, theta)
        self.value_A_, self.value_B_from_B_ = float(Q_A), float(Q_B)
        self.value_B_ = 1 - self.value_A_
        self.payoff_A_, self.payoff_B_ = float(f_A), float(f_B)
        tv = [0.5 * np.abs(qa - qb).sum() for qa, qb in zip(self.pi_A_, self.pi_B_)]
        self.divergence_by_factor_, self.divergence_ = np.array(tv), float(np.mean(tv))
        gap_A = self.best_response("A", pi_B)[1] - self.payoff_A_
        gap_B = self.best_response("B", pi_A)[1] - self.payoff_B_
        self.best_response_gaps_ = (gap_A, gap_B)
        self.best_response_gap_ = max(gap_A, gap_B)
        self._delta_method(pi_A, pi_B)
        return self

    # -- uncertainty -----------------------------------------------------------------------------------
    def _delta_method(self, pi_A, pi_B):
        from torch.func import jacrev

        design, theta0 = self.design_, self._theta
        n = design.n_free
        z0 = torch.cat([design.to_free(pi_A), design.to_free(pi_B)]).detach()

        def first_order(z, theta):
            grad_A = jacrev(lambda za: self._game(design.to_full(za), design.to_full(z[n:]), theta)[0])(z[:n])
            grad_B = jacrev(lambda zb: self._game(design.to_full(z[:n]), design.to_full(zb), theta)[1])(z[n:])
            return torch.cat([grad_A, grad_B])

        def outputs(z, theta):
            full_A, full_B = design.to_full(z[:n]), design.to_full(z[n:])
            tv = torch.stack([0.5 * (qa - qb).abs().sum() for qa, qb in zip(full_A, full_B)])
            Q_A = self._game(full_A, full_B, theta)[2]
            return torch.cat([Q_A.reshape(1), tv.mean().reshape(1), tv, torch.cat(full_A), torch.cat(full_B)])

        H = jacrev(first_order, argnums=0)(z0, theta0)
        G_theta = jacrev(first_order, argnums=1)(z0, theta0)
        dz = -torch.linalg.solve(H, G_theta)
        d_z, d_theta = jacrev(outputs, argnums=(0, 1))(z0, theta0)
        J = d_z @ dz + d_theta
        Sigma = torch.block_diag(*[torch.as_tensor(m.vcov_, dtype=DTYPE) for m in self._models])
        se = torch.sqrt(torch.clamp(torch.diagonal(J @ Sigma @ J.T), min=0)).numpy()
        D = design.n_factors
        self.jacobian_ = J.detach().numpy()
        self.value_A_se_ = self.value_B_se_ = float(se[0])
        self.divergence_se_ = float(se[1])
        self.divergence_by_factor_se_ = se[2:2 + D]
        offsets = np.cumsum([2 + D] + design.n_levels + design.n_levels)
        blocks = [se[offsets[i]:offsets[i + 1]] for i in range(2 * D)]
        self.pi_A_se_, self.pi_B_se_ = blocks[:D], blocks[D:]

    def conf_int(self, conf_level: float | None = None) -> dict:
        """Normal intervals for value_A, divergence and each party's per-factor probabilities."""
        from scipy.stats import norm

        name = "MinimaxPolicy.conf_int"
        if not hasattr(self, "value_A_se_"):
            raise input_error(name, "self", "a fitted game (call fit first)", described("an unfitted one"))
        level = check_finite(name, "conf_level", self.conf_level if conf_level is None else conf_level,
                             low=0, high=1, low_open=True, high_open=True)
        z = float(norm.ppf(0.5 + level / 2))
        out = {"value_A": (self.value_A_ - z * self.value_A_se_, self.value_A_ + z * self.value_A_se_),
               "divergence": (self.divergence_ - z * self.divergence_se_, self.divergence_ + z * self.divergence_se_)}
        for party, pis, ses in (("A", self.pi_A_, self.pi_A_se_), ("B", self.pi_B_, self.pi_B_se_)):
            for f, q, s in zip(self.design_.factors, pis, ses):
                out[f"{party}:{f}"] = np.stack([q - z * s, q + z * s], axis=1)
        return out
