"""The profile tables that win probabilities, effects and the game integrate over: the enumerated profile space
or a fixed Monte-Carlo sample of it (``FactorialDesign(n_monte=...)``).

Jerzak, Chandra & Hazra (ICML 2026, arXiv 2504.19043) integrate Q(pi) = E_{t~pi, u~opponent}[P(t beats u)]
exactly only for small designs; the reference (``strategize``) estimates it by Monte Carlo. Reconstruction: one
sample t_1..t_M ~ p drawn once per design (common random numbers) stands for the profile space, each row weighted
by the self-normalised importance weight w_i(pi) = r_i / sum_j r_j, r_i = P_pi(t_i) / P_p(t_i), so every
expectation E_{t~pi}[g(t)] becomes sum_i w_i(pi) g(t_i): consistent (bias O(1/M)), smooth in pi, the same
sample for every policy a solver tries, and weights summing to 1 (so Q_A + Q_B = 1 holds exactly in the game).
Enumeration is the special case w_i = P_pi(t_i).
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

DTYPE = torch.float64
#: profile spaces up to this size are enumerated exactly (the ``|T| x |T|`` win matrix stays below ~130 MB);
#: larger ones are replaced by a fixed Monte-Carlo sample of ``DEFAULT_MONTE`` profiles (see FactorialDesign)
MAX_PROFILES = 4096
DEFAULT_MONTE = 2048

#: per design (weakly held: a design's tables go with it): the rows and their base weights, and per tuple of
#: pairs the rows' feature matrix
_TABLES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _rows(design):
    """(grid, base): the profiles integrated over and the factor turning P_pi(row) into the row's weight."""
    tables = _TABLES.setdefault(design, {})
    if "rows" not in tables:
        if design.monte_carlo:
            n = design.n_monte or DEFAULT_MONTE
            grid = design.sample(n, np.random.default_rng(design.random_state))
            p_rows = np.prod([q[grid[:, d]] for d, q in enumerate(design.p)], axis=0)
            base = 1.0 / p_rows
        else:
            grid = design.profiles()
            base = np.ones(len(grid))
        tables["rows"] = (torch.as_tensor(grid), torch.as_tensor(base, dtype=DTYPE))
    return tables["rows"]


def profile_table(design, pairs):
    """(grid, X, base) as torch tensors, cached per (design, pairs): the rows (enumerated profiles or the fixed
    Monte-Carlo sample), their main-effect and interaction features, and their base weights."""
    grid, base = _rows(design)
    tables = _TABLES[design]
    key = tuple(pairs)
    if key not in tables:
        tables[key] = torch.as_tensor(design.features(grid.numpy(), pairs), dtype=DTYPE)
    return grid, tables[key], base


def row_weights(design, pi, grid, base) -> torch.Tensor:
    """w_i(pi): E_{t~pi}[g(t)] = sum_i w_i g(row_i) (exact under enumeration, self-normalised importance
    weights under Monte Carlo)."""
    w = design.profile_probs(pi, grid)
    return w if not design.monte_carlo else w * base / (w * base).sum(-1, keepdim=True)


def bilinear_mc_se(A: torch.Tensor, W: torch.Tensor, b: torch.Tensor, A_minus: torch.Tensor | None = None) -> torch.Tensor:
    """Monte-Carlo standard errors of the estimates A @ W @ b (one per row of A) over one sample of M rows.

    Each estimate is a ratio of V-statistics over the same M draws, sum_ij a_i W_ij b_j with a and b
    self-normalised weights (summing to 1); its first-order (Hoeffding) projection gives
    Var ~ Var_k(M a_k ((W b)_k - est) + M b_k ((W^T a)_k - est)) / M. Rows of A may be differences of two
    weight rows (AMCEs): pass ``A_minus``, the subtracted rows, and the influence is the difference's."""
    M = W.shape[0]

    def influence(rows):
        est = rows @ W @ b
        return M * (rows * (W @ b - est[:, None]) + b[None, :] * (rows @ W - est[:, None]))

    g = influence(A) if A_minus is None else influence(A) - influence(A_minus)
    return g.std(dim=1, correction=1) / np.sqrt(M)
