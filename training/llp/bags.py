"""Bags for learning from label proportions: random bags, and ``bag_index`` / ``proportions`` as users give them.

Paper: arXiv 2509.15145 (random bags: instances i.i.d. from the marginal). The losses of
:mod:`icml26.training.llp.risk` take bags as ``[B, k, c]`` tensors with per-bag proportions ``[B, c]``;
the estimator and model selection of :mod:`icml26.training.llp.estimator` take rows of ``X`` with a bag id
each and proportions given per row or as a mapping (:func:`check_bags`), the forms that survive a split of
the rows by scikit-learn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from icml26.errors import describe, described, input_error
from icml26.training.llp.risk import SUM_TOL

__all__ = ["bag_rows", "check_bags", "pad_bags", "random_bags"]


def random_bags(y: Any, bag_size: int, seed: int | None = None, *, n_classes: int | None = None,
                drop_last: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Random bags of ``bag_size`` instances: ``(bag_index[n], proportions[m, c])``.

    A random permutation of the instances cut into consecutive bags; the last bag is smaller when
    ``bag_size`` does not divide ``n`` (``drop_last=True`` gives it index -1, i.e. no bag). ``y``:
    integer labels ``0..c-1`` (``c`` = ``n_classes`` or ``max(y) + 1``, at least 2). With ``bag_size=1``
    bag ``i`` is row ``i`` (the order of singleton bags carries nothing), so ``proportions`` is then
    also one row per instance. :func:`bag_rows` turns ``proportions`` into the one-row-per-instance form
    that :class:`~icml26.training.llp.estimator.LLPClassifier` takes.
    """
    y = np.asarray(y)
    if y.ndim != 1 or y.size == 0 or not np.issubdtype(y.dtype, np.integer) or y.min() < 0:
        raise input_error("random_bags", "y", "a non-empty 1-D array of integer labels >= 0", describe(y))
    if isinstance(bag_size, bool) or not isinstance(bag_size, (int, np.integer)) or not 1 <= bag_size <= y.size:
        raise input_error("random_bags", "bag_size", f"an int in [1, {y.size}] (the number of instances)", bag_size)
    c = max(int(y.max()) + 1, 2) if n_classes is None else n_classes
    if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < max(int(y.max()) + 1, 2):
        raise input_error("random_bags", "n_classes", "an int >= max(y) + 1 and >= 2", n_classes)
    bag_index = np.empty(y.size, dtype=np.int64)
    if bag_size == 1:  # bag i is row i, so the per-bag proportions are also the per-row ones
        bag_index[:] = np.arange(y.size)
    else:
        order = np.random.default_rng(seed).permutation(y.size)
        bag_index[order] = np.arange(y.size) // bag_size
    m = -(-y.size // bag_size)
    if drop_last and y.size % bag_size:
        m -= 1
        bag_index[bag_index == m] = -1
    keep = bag_index >= 0
    counts = np.zeros((m, c))
    np.add.at(counts, (bag_index[keep], y[keep]), 1.0)
    return bag_index, counts / counts.sum(1, keepdims=True)


def check_bags(function: str, bag_index: Any, proportions: Any, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Validate bags given row by row: ``(index[n], alpha[m, c], ids[m])``.

    ``bag_index[n]``: the bag id of each row (any ints ``>= 0``, not necessarily ``0..m-1``; ``-1``: the
    row is in no bag and is ignored). ``proportions``: either one row per row of ``X`` (``[n, c]``, or
    ``[n]`` shares of class 1), each the proportions of that row's bag (rows of one bag must agree), or a
    mapping ``{bag id: proportions}`` (extra keys are ignored). Both forms survive a split of the rows
    (``cross_val_score``, ``GroupKFold``): a row keeps its bag id and its bag's proportions, and a mapping
    is passed to every fold whole. A per-bag ``[m, c]`` array (what :func:`random_bags` returns) is
    refused when ``m != n``: pass :func:`bag_rows` of it (``proportions[bag_index]``) or
    ``dict(enumerate(proportions))``; with ``m = n`` (singleton bags) it is read as rows, which is why
    :func:`random_bags` numbers singleton bags by row.

    Returns ``index`` (bags renumbered ``0..m-1`` in increasing id, ``-1`` kept), the bags' proportions
    ``alpha[m, c]`` (float64) and the original ``ids``.
    """
    raw = bag_index
    bag_index = np.asarray(bag_index)
    if bag_index.shape != (n,) or not (np.issubdtype(bag_index.dtype, np.integer) or bag_index.size == 0):
        raise input_error(function, "bag_index", f"an integer array of shape ({n},) (one bag id per row of X)",
                          describe(raw if hasattr(raw, "shape") else bag_index))
    bag_index = bag_index.astype(np.int64)
    if n and bag_index.min() < -1:
        raise input_error(function, "bag_index", "bag ids >= 0 (or -1 for a row in no bag)",
                          described(f"a bag id of {int(bag_index.min())}"))
    used = bag_index >= 0
    if not used.any():
        raise input_error(function, "bag_index", "at least one row in a bag (ids >= 0)", described("no row in a bag"))
    ids, first, inverse = np.unique(bag_index[used], return_index=True, return_inverse=True)
    index = np.full(n, -1, dtype=np.int64)
    index[used] = inverse
    if isinstance(proportions, Mapping):
        missing = [int(b) for b in ids if int(b) not in proportions]
        if missing:
            raise input_error(function, "proportions", "a mapping with an entry for every bag id in bag_index",
                              described(f"no entry for bag ids {missing[:5]}"))
        try:
            alpha = np.asarray([proportions[int(b)] for b in ids], dtype=np.float64)
        except (TypeError, ValueError):
            raise input_error(function, "proportions", "a mapping {bag id: proportions [c] or share of class 1}",
                              described("entries that are not numbers of one length")) from None
        if alpha.ndim == 1:
            alpha = np.stack([1 - alpha, alpha], axis=1)
        rows = None
    else:
        try:
            arr = np.asarray(proportions, dtype=np.float64)
        except (TypeError, ValueError):
            raise input_error(function, "proportions", f"an array of {n} rows (one per row of X) or a mapping "
                              "{bag id: proportions}", describe(proportions)) from None
        if arr.ndim not in (1, 2) or arr.shape[0] != n:
            raise input_error(function, "proportions", f"one row per row of X, shape ({n}, c) or ({n},) (for the "
                              "per-bag array of random_bags: proportions[bag_index]), or a mapping {bag id: "
                              "proportions}", describe(arr))
        if arr.ndim == 1:
            arr = np.stack([1 - arr, arr], axis=1)
        rows = arr[used]
        alpha = rows[first]
    if alpha.ndim != 2 or alpha.shape[1] < 2:
        raise input_error(function, "proportions", "proportions of c >= 2 classes per bag", describe(alpha))
    check = alpha if rows is None else rows
    if not np.isfinite(check).all():
        raise input_error(function, "proportions", "finite values in [0, 1]", described("NaN or inf values"))
    if check.min() < 0 or check.max() > 1:
        raise input_error(function, "proportions", "values in [0, 1]",
                          described(f"values in [{check.min():g}, {check.max():g}]"))
    worst = float(np.abs(check.sum(1) - 1).max())
    if worst > SUM_TOL:
        raise input_error(function, "proportions", f"rows summing to 1 (within {SUM_TOL:g})",
                          described(f"a row off by {worst:.3g}"))
    if rows is not None:
        spread = np.abs(rows - alpha[inverse]).max(1)
        if spread.max() > SUM_TOL:
            bad = int(ids[inverse[int(np.argmax(spread))]])
            raise input_error(function, "proportions", "the same proportions on every row of a bag",
                              described(f"rows of bag {bad} differing by {float(spread.max()):.3g}"))
    return index, alpha, ids


def bag_rows(bag_index: Any, proportions: Any) -> np.ndarray:
    """Per-bag proportions ``[m, c]`` (as :func:`random_bags` returns them) as one row per instance ``[n, c]``.

    ``proportions[bag_index]``, with the rows of instances in no bag (``-1``) set to NaN (they are ignored):
    the form :class:`~icml26.training.llp.estimator.LLPClassifier` and :func:`mom_tournament` take.
    """
    bag_index = np.asarray(bag_index)
    if bag_index.ndim != 1 or not np.issubdtype(bag_index.dtype, np.integer):
        raise input_error("bag_rows", "bag_index", "a 1-D integer array of bag ids", describe(bag_index))
    alpha = np.asarray(proportions, dtype=np.float64)
    if alpha.ndim not in (1, 2) or alpha.shape[0] < 1:
        raise input_error("bag_rows", "proportions", "a per-bag [m, c] (or [m]) array", describe(alpha))
    if bag_index.size and (bag_index.min() < -1 or bag_index.max() >= alpha.shape[0]):
        raise input_error("bag_rows", "bag_index", f"ids in [0, {alpha.shape[0]}) (or -1 for no bag)",
                          described(f"ids in [{int(bag_index.min())}, {int(bag_index.max())}]"))
    out = alpha[np.maximum(bag_index, 0)].copy()
    out[bag_index < 0] = np.nan
    return out


def pad_bags(X: np.ndarray, bag_index: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """``(bags[m, k_max, ...], mask[m, k_max])``: the rows of ``X`` grouped by bag, zero-padded."""
    keep = np.flatnonzero(bag_index >= 0)
    order = keep[np.argsort(bag_index[keep], kind="stable")]
    sizes = np.bincount(bag_index[keep], minlength=m)
    k_max = int(sizes.max())
    slot = np.arange(order.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    bags = np.zeros((m, k_max, *X.shape[1:]), dtype=X.dtype)
    bags[bag_index[order], slot] = X[order]
    mask = np.zeros((m, k_max), dtype=bool)
    mask[bag_index[order], slot] = True
    return bags, mask
