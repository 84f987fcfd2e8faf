"""(s, a)-rectangular uncertainty sets of robust MDPs and their exact support functions.

``sigma_U(V) = min_{q in U} q . V`` for each row ``P_sa`` of a nominal kernel, vectorised over rows: contamination,
total-variation / Lp balls, KL balls (the dual's one-dimensional minimisation) and chi-square balls (Roch, Atia & Wang,
arXiv 2505.12462, Sec. 2; the sets the robust Bellman operator of :mod:`icml26.training.rhi.halpern` takes).
"""

from __future__ import annotations

import math

import numpy as np

from icml26.errors import InputError, InputTypeError, describe, described
from icml26.validation import check_finite

__all__ = ["ChiSquareBall", "Contamination", "KLBall", "LpBall", "UncertaintySet"]


# ==============================================================================================
# Uncertainty sets
# ==============================================================================================
class UncertaintySet:
    """An (s, a)-rectangular uncertainty set around a nominal row P; subclasses define ``_support``.

    ``support(P, V)`` = min_{q in U(P)} q . V for P of shape (..., S) (one row per (s, a)) and V
    broadcastable to it, returning shape (...). Every set is validated at construction; radius 0
    gives the nominal model (sigma = P . V).
    """

    nonlinear_in_P = False  # True: plug-in estimates are biased and need an MLMC oracle

    def support(self, P, V) -> np.ndarray:
        f = f"{type(self).__name__}.support"
        arrays = []
        for arg, x in (("P", P), ("V", V)):
            try:
                arrays.append(np.asarray(x, dtype=float))
            except (TypeError, ValueError):
                raise InputTypeError(f, arg, "an array of numbers", described(type(x).__name__)) from None
        P, V = arrays
        if P.ndim == 0:
            raise InputError(f, "P", "rows of probabilities over S states (shape (..., S))", describe(P))
        if V.ndim == 0 or P.shape[-1] != V.shape[-1]:
            raise InputError(f, "V", f"values ending in P's number of states S = {P.shape[-1]}",
                             described(f"shape {V.shape}"))
        try:
            np.broadcast_shapes(P.shape, V.shape)
        except ValueError:
            raise InputError(f, "V", f"a shape that broadcasts against P's {P.shape}",
                             described(f"shape {V.shape}")) from None
        for arg, x in (("P", P), ("V", V)):
            if not np.all(np.isfinite(x)):
                raise InputError(f, arg, "finite values", described("NaN or inf"))
        if (P < 0).any():
            raise InputError(f, "P", "probabilities >= 0", described(f"min {P.min():.6g}"))
        bad = np.abs(P.sum(-1) - 1) > 1e-8
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InputError(f, "P", "rows that sum to 1 (tolerance 1e-8)",
                             described(f"{f'row {idx}' if idx else 'a row'} summing to {P.sum(-1)[idx]:.10g}"))
        return self._support(P, V)

    def _support(self, P: np.ndarray, V: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError


def _flat_rows(P, V):
    """Broadcast P, V to a common (..., S) shape and flatten to (n, S)."""
    P, V = np.broadcast_arrays(P, V)
    return P.reshape(-1, P.shape[-1]), V.reshape(-1, V.shape[-1]), P.shape[:-1]


def _support_min(P, V):
    """min of V over the support of each row of P, and the shifted values W = V - min (0 off support)."""
    supp = P > 0
    low = np.where(supp, V, np.inf).min(-1)
    return low, np.where(supp, V - low[:, None], 0.0), supp


class Contamination(UncertaintySet):
    """{(1 - R) P + R q : q in the simplex}: sigma = (1 - R) P . V + R min_s V(s). R in [0, 1]."""

    def __init__(self, R: float):
        self.R = check_finite("Contamination", "R", R, low=0, high=1)

    def _support(self, P, V):
        P, V = np.broadcast_arrays(P, V)
        return (1 - self.R) * (P * V).sum(-1) + self.R * V.min(-1)

    def __repr__(self) -> str:
        return f"Contamination(R={self.R:g})"


class LpBall(UncertaintySet):
    """{q : ||q - P||_p <= R, sum q = 1, supp q in supp P}: sigma = P . V - R kappa_q(V) (Kumar et al. 2023).

    kappa_q(V) = min_w ||V - w 1||_q over the states P reaches, q the Holder conjugate of p (closed
    forms for q = 1, 2, inf; vectorised bisection on w otherwise). The dual ignores q >= 0, so it is
    the exact support function whenever R <= the smallest nonzero P (then every q in the ball is a
    distribution); beyond that it is the usual relaxed set. ``p`` in [1, inf].
    """

    def __init__(self, R: float, p: float = 2.0):
        self.R = check_finite("LpBall", "R", R, low=0)
        self.p = check_finite("LpBall", "p", p, low=1, allow_inf=True)
        self.q = math.inf if self.p == 1 else (1.0 if self.p == math.inf else self.p / (self.p - 1))

    def _support(self, P, V):
        P, V, shape = _flat_rows(P, V)
        supp = P > 0
        n = supp.sum(-1)
        if self.q == 2:
            mean = np.where(supp, V, 0).sum(-1) / n
            kappa = np.sqrt(np.where(supp, (V - mean[:, None]) ** 2, 0).sum(-1))
        elif self.q == math.inf:
            kappa = 0.5 * (np.where(supp, V, -np.inf).max(-1) - np.where(supp, V, np.inf).min(-1))
        elif self.q == 1:  # the median minimises sum |V_i - w|; some V_j on the support is a median
            dist = np.where(supp[:, :, None], np.abs(V[:, :, None] - V[:, None, :]), 0).sum(1)
            kappa = np.where(supp, dist, np.inf).min(-1)
        else:  # d/dw sum |V_i - w|^q is increasing in w: bisection to machine precision
            lo, hi = np.where(supp, V, np.inf).min(-1), np.where(supp, V, -np.inf).max(-1)
            for _ in range(100):
                w = 0.5 * (lo + hi)
                x = V - w[:, None]
                slope = -np.where(supp, np.sign(x) * np.abs(x) ** (self.q - 1), 0).sum(-1)
                lo, hi = np.where(slope < 0, w, lo), np.where(slope < 0, hi, w)
            x = np.abs(V - (0.5 * (lo + hi))[:, None])
            kappa = np.where(supp, x ** self.q, 0).sum(-1) ** (1 / self.q)
        return ((P * V).sum(-1) - self.R * kappa).reshape(shape)

    def __repr__(self) -> str:
        return f"LpBall(R={self.R:g}, p={self.p:g})"


class KLBall(UncertaintySet):
    """{q : KL(q || P) <= delta}: sigma = sup_{a >= 0} -a log E_P[exp(-V / a)] - a delta (Hu & Hong 2013).

    Solved exactly per row, vectorised: with W = V - min_supp V scaled to [0, 1] and b = 1/a, the
    optimality condition is KL(q_b || P) = delta for the tilted q_b ~ P exp(-b W), increasing in b.
    Safeguarded Newton on log b inside a bracket; if P(V = min) >= exp(-delta), the supremum is at
    a -> 0 and sigma = min_supp V. Every a gives a lower bound, so the result is never optimistic.
    """

    nonlinear_in_P = True

    def __init__(self, delta: float):
        self.delta = check_finite("KLBall", "delta", delta, low=0)

    def _support(self, P, V):
        P, V, shape = _flat_rows(P, V)
        if self.delta == 0:
            return (P * V).sum(-1).reshape(shape)
        low, W, supp = _support_min(P, V)
        scale = W.max(-1)
        out = low.copy()
        mass_at_min = np.where(supp & (W == 0), P, 0).sum(-1)
        solve = (scale > 0) & (-np.log(mass_at_min) > self.delta)
        if solve.any():
            out[solve] += scale[solve] * _kl_dual(P[solve], W[solve] / scale[solve, None], self.delta)
        return out.reshape(shape)

    def __repr__(self) -> str:
        return f"KLBall(delta={self.delta:g})"


def _kl_dual(P, w, delta, iters: int = 100):
    """max_b -(log E_P[exp(-b w)] + delta) / b for w in [0, 1] with min 0; rows need a finite root."""
    lo = np.full(len(P), math.log(1e-10))
    hi = np.full(len(P), math.log(1e16))
    var = (P * w * w).sum(-1) - (P * w).sum(-1) ** 2
    u = np.clip(np.log(np.sqrt(2 * delta / np.maximum(var, 1e-300))), lo, hi)  # small-b guess KL ~ b^2 var / 2
    active = np.arange(len(P))  # rows still iterating: most converge in a handful of Newton steps
    for _ in range(iters):
        Pa, wa, ua = P[active], w[active], u[active]
        b = np.exp(ua)
        tilt = Pa * np.exp(-b[:, None] * wa)
        Z = tilt.sum(-1)
        mean = (tilt * wa).sum(-1) / Z
        var = np.maximum((tilt * wa * wa).sum(-1) / Z - mean ** 2, 0)
        gap = -b * mean - np.log(Z) - delta  # KL(q_b || P) - delta, increasing in b
        lo[active] = np.where(gap < 0, ua, lo[active])
        hi[active] = np.where(gap < 0, hi[active], ua)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = ua - gap / (b * b * var)
        inside = (step >= lo[active]) & (step <= hi[active])
        step = np.where(inside, step, 0.5 * (lo[active] + hi[active]))
        done = (np.abs(step - ua) <= 1e-10 * np.maximum(1, np.abs(ua))) | (hi[active] - lo[active] <= 1e-10)
        u[active] = step
        active = active[~done]
        if active.size == 0:
            break
    candidates = np.stack([u, lo, hi])  # each is a lower bound of the supremum: keep the best
    b = np.exp(candidates)
    logZ = np.log((P[None] * np.exp(-b[..., None] * w[None])).sum(-1))
    return (-(logZ + delta) / b).max(0)


class ChiSquareBall(UncertaintySet):
    """{q : sum_i (q_i - P_i)^2 / P_i <= delta}: sigma = sup_eta eta - sqrt(1 + delta) sqrt(E_P[(eta - V)_+^2]).

    (Duchi & Namkoong's Cressie-Read dual, k = 2; exact for the chi-square ball, q << P is implied.)
    The objective is concave in eta and, between consecutive sorted values of V, of the form
    eta - c sqrt(F eta^2 - 2 M1 eta + M2): its stationary point has a closed form, so the maximum
    is found exactly by checking every segment at once (no iteration).
    """

    nonlinear_in_P = True

    def __init__(self, delta: float):
        self.delta = check_finite("ChiSquareBall", "delta", delta, low=0)

    def _support(self, P, V):
        P, V, shape = _flat_rows(P, V)
        if self.delta == 0:
            return (P * V).sum(-1).reshape(shape)
        low, W, _ = _support_min(P, V)
        order = np.argsort(W, -1)
        Ws, Ps = np.take_along_axis(W, order, -1), np.take_along_axis(P, order, -1)
        F = np.cumsum(Ps, -1)  # on segment j, eta in [Ws_j, Ws_{j+1}], the active set is {0..j}
        M1, M2 = np.cumsum(Ps * Ws, -1), np.cumsum(Ps * Ws * Ws, -1)
        upper = np.concatenate([Ws[:, 1:], np.full((len(Ws), 1), np.inf)], -1)
        c2 = 1 + self.delta
        with np.errstate(divide="ignore", invalid="ignore"):
            mean = np.where(F > 0, M1 / F, 0)
            D = np.maximum(M2 - M1 * mean, 0)  # F x (conditional variance)
            curv = F * (c2 * F - 1)
            eta = np.where((F > 0) & (curv > 0), mean + np.sqrt(D / curv), np.inf)
        eta = np.clip(eta, Ws, upper)
        value = eta - math.sqrt(c2) * np.sqrt(np.maximum(F * (eta - mean) ** 2 + D, 0))
        return (low + value.max(-1)).reshape(shape)

    def __repr__(self) -> str:
        return f"ChiSquareBall(delta={self.delta:g})"
