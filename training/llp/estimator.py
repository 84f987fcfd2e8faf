"""A scikit-learn LLP estimator and Median-of-Means model selection from bag-level data.

Paper: arXiv 2509.15145 ("Optimal Learning from Label Proportions with General Loss Functions",
ICML 2026); the estimators are in :mod:`icml26.training.llp.risk`.

- :class:`LLPClassifier`: a linear model or a one-hidden-layer MLP trained with Adam on mini-batches of
  bags (the paper's online / SGD setting) with the LowVar, EasyLLP or DLLP loss, or on instance labels
  (``method="oracle"``, the supervised upper bound).
- :func:`mom_tournament`: a Median-of-Means tournament (Lugosi & Mendelson, arXiv 1608.00757) over
  candidate models, from bags and their proportions only. Reconstruction of the wiring (the paper
  names the tournament, the summaries give no procedure): bag estimates ``L_b(h)`` of the chosen
  estimator with ``mu`` from the instances of the other validation bags; the bags split at random
  into ``n_blocks`` blocks; ``M(h, h')`` = the median over blocks of the block means of
  ``L_b(h) - L_b(h')``; ``h`` beats ``h'`` when ``M(h, h') <= 0``; the winner has the most wins, ties
  broken by the smaller ``max_h' M(h, h')``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.llp.bags import check_bags, pad_bags
from icml26.training.llp.risk import (
    BASE_LOSSES,
    METHODS,
    SUM_TOL,
    LLPLoss,
    _prior,
    check_prior_values,
    per_class_losses,
)
from icml26.training.llp.risk import bag_estimates as llp_bag_estimates
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["LLPClassifier", "TournamentResult", "candidate_bag_estimates", "mom_tournament", "tournament_from_estimates"]

MODELS = ("linear", "mlp")


def _features(function: str, X: Any) -> np.ndarray:
    """``X`` as a finite float32 ``[n, d]`` array (for the functions that are not estimators)."""
    try:
        X = np.asarray(X, dtype=np.float32)
    except (TypeError, ValueError):
        raise input_error(function, "X", "a finite numeric 2-D array [n, d] with n >= 1", describe(X)) from None
    if X.ndim != 2 or X.shape[0] == 0 or not np.isfinite(X).all():
        raise input_error(function, "X", "a finite numeric 2-D array [n, d] with n >= 1", describe(X))
    return X


def _random_state(value: Any) -> Any:
    """``random_state`` as what ``numpy.random.default_rng`` and ``SeedSequence`` take (None or an int)."""
    if value is None:
        return None
    if isinstance(value, np.random.RandomState):  # scikit-learn's convention: draw the run's seed from it
        return int(value.randint(np.iinfo(np.int32).max))
    return check_int("LLPClassifier", "random_state", value, low=0)


class LLPClassifier(ClassifierMixin, BaseEstimator):
    """Learns a classifier from bags and their label proportions (scikit-learn API).

    ``fit(X, y=None, *, bag_index, proportions)``: ``bag_index[i]`` is the bag id of row ``i`` (any
    ints ``>= 0``; ``-1``: in no bag) and ``proportions`` holds the bags' label proportions, either one
    row per row of ``X`` (``[n, c]``, or ``[n]`` shares of class 1: each row carries its bag's
    proportions) or a mapping ``{bag id: proportions}``. Both forms survive a split of the rows, so
    ``Pipeline``, ``cross_val_score`` and ``GridSearchCV`` route them with scikit-learn's metadata routing
    (``set_fit_request(bag_index=True, proportions=True)`` under ``sklearn.set_config(
    enable_metadata_routing=True)``; split with ``GroupKFold`` on ``groups=bag_index`` so that no bag is
    cut). :func:`~icml26.training.llp.bags.bag_rows` turns the per-bag ``[m, c]`` array of
    :func:`~icml26.training.llp.bags.random_bags` into rows. The classes are the columns of
    ``proportions``: ``classes_ = [0, .., c - 1]``. ``y`` is then ignored (it may be there for scoring).

    Without ``bag_index``, ``fit(X, y)`` makes every row its own bag with the one-hot proportions of its
    label ``y`` (``classes_ = unique(y)``): LLP with bags of one is supervised learning, the limiting case
    of every estimator here (LowVar and EasyLLP are then unbiased instance risks, DLLP the
    cross-entropy), so the estimator also works wherever scikit-learn passes labels. ``method="oracle"``
    always trains on ``y``.

    Args:
        method: ``"lowvar"`` (the paper's estimator, reconstructed), ``"easyllp"``, ``"dllp"`` or
            ``"oracle"`` (cross-entropy on instance labels, with the same clipped base loss).
        model: ``"linear"`` (logistic / softmax regression) or ``"mlp"`` (one hidden ReLU layer).
        hidden: width of the MLP's hidden layer.
        lr: Adam's learning rate.
        epochs: passes over the bags.
        bags_per_batch: bags per step; the bags are split into ``m // bags_per_batch`` batches, so every
            batch has at least ``bags_per_batch`` bags (LowVar's leave-one-bag-out needs two: ``>= 2``
            with ``method="lowvar"``).
        weight_decay: Adam's L2 weight decay.
        base: the instance loss (see :func:`icml26.training.llp.risk.per_class_losses`).
        prob_clip: the probability clip of that loss, in ``(0, 0.5)``.
        prior: the class prior; None: the instance-weighted mean of ``proportions`` over the training bags.
        nonnegative: the per-class non-negative correction of the LowVar / EasyLLP objective
            (:func:`~icml26.training.llp.risk.nonnegative_risk`, nnPU-style, ``beta = 0``, ``gamma = 2``):
            ``"auto"`` turns it on for the MLP, whose unguarded objective is unbounded below (it fits the
            bags' negative weights), and off for the linear model; ``True`` or ``False`` force it.
        oracle_batch_size: instances per step of ``method="oracle"``.
        random_state: seeds the initial weights and the order of the bags (None, an int or a
            ``numpy.random.RandomState``).

    Parameters are checked by ``fit`` (scikit-learn's convention: the constructor only stores them).
    Fitted attributes: ``classes_``, ``n_features_in_``, ``prior_``, ``loss_curve_`` (mean training loss
    per epoch; with the non-negative correction, the corrected one), ``n_iter_`` (epochs), ``epoch_states_`` (the weights after each epoch: :meth:`at_epoch`
    rebuilds the model of any epoch, e.g. as a candidate for :func:`mom_tournament`).
    """

    def __init__(self, method: str = "lowvar", model: str = "linear", hidden: int = 64, lr: float = 1e-2,
                 epochs: int = 5, bags_per_batch: int = 16, weight_decay: float = 0.0, base: str = "log",
                 prob_clip: float = 1e-3, prior: Any = None, nonnegative: Any = "auto",
                 oracle_batch_size: int = 512, random_state: Any = None) -> None:
        self.method = method
        self.model = model
        self.hidden = hidden
        self.lr = lr
        self.epochs = epochs
        self.bags_per_batch = bags_per_batch
        self.weight_decay = weight_decay
        self.base = base
        self.prob_clip = prob_clip
        self.prior = prior
        self.nonnegative = nonnegative
        self.oracle_batch_size = oracle_batch_size
        self.random_state = random_state

    # -- fitting -----------------------------------------------------------------------------
    def _check_params(self) -> Any:
        """Check every parameter (the project's helpers, so messages read ``LLPClassifier: <param>: expected ...``);
        returns the run's seed."""
        check_choice("LLPClassifier", "method", self.method, (*METHODS, "oracle"))
        check_choice("LLPClassifier", "model", self.model, MODELS)
        if not callable(self.base) and not (isinstance(self.base, str) and self.base in BASE_LOSSES):
            raise input_error("LLPClassifier", "base", f"one of {list(BASE_LOSSES)} or a callable", self.base)
        for name in ("hidden", "epochs", "oracle_batch_size"):
            check_int("LLPClassifier", name, getattr(self, name), low=1)
        check_int("LLPClassifier", "bags_per_batch", self.bags_per_batch, low=2 if self.method == "lowvar" else 1)
        check_finite("LLPClassifier", "lr", self.lr, positive=True)
        check_finite("LLPClassifier", "weight_decay", self.weight_decay, non_negative=True)
        check_finite("LLPClassifier", "prob_clip", self.prob_clip, low=0, high=0.5, low_open=True, high_open=True)
        check_prior_values("LLPClassifier", self.prior)
        if not (isinstance(self.nonnegative, (bool, np.bool_)) or (isinstance(self.nonnegative, str)
                                                                   and self.nonnegative == "auto")):
            raise input_error("LLPClassifier", "nonnegative", "'auto', True or False", self.nonnegative)
        return _random_state(self.random_state)

    def _X(self, function: str, X: Any, reset: bool) -> np.ndarray:
        """scikit-learn's ``validate_data`` (feature count and names), its refusals as :class:`InputError`."""
        expected = "a finite numeric 2-D array [n, d] with n >= 1" + ("" if reset else f" and d = {self.n_features_in_}")
        try:
            X = validate_data(self, X, dtype=np.float32, reset=reset)
        except TypeError as exc:
            raise InputTypeError(f"LLPClassifier.{function}", "X", expected, described(str(exc))) from None
        except ValueError as exc:
            raise input_error(f"LLPClassifier.{function}", "X", expected, described(str(exc))) from None
        return np.ascontiguousarray(X)

    def _labels(self, y: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(classes, codes)`` of instance labels ``y``."""
        expected = f"class labels of shape ({n},), two classes or more"
        if y is None:
            raise input_error("LLPClassifier.fit", "y", f"instance labels for method={self.method!r}",
                              described("None (LLPClassifier requires y to be passed, but the target y is None)"))
        try:
            y = column_or_1d(y, warn=True)
            check_classification_targets(y)
        except ValueError as exc:
            raise input_error("LLPClassifier.fit", "y", expected, described(str(exc))) from None
        if y.shape != (n,):
            raise input_error("LLPClassifier.fit", "y", expected, described(f"{y.shape[0]} labels for {n} rows of X"))
        classes, codes = np.unique(y, return_inverse=True)
        if classes.size < 2:
            raise input_error("LLPClassifier.fit", "y", expected, described(f"1 class ({classes[0]!r})"))
        return classes, codes.astype(np.int64)

    def _network(self, d: int, c: int, seed: Any) -> torch.nn.Module:
        with torch.random.fork_rng(devices=[]):  # library code never seeds the global generator
            torch.manual_seed(int(np.random.SeedSequence(seed).generate_state(1)[0]))
            if self.model == "linear":
                return torch.nn.Linear(d, c)
            return torch.nn.Sequential(torch.nn.Linear(d, self.hidden), torch.nn.ReLU(), torch.nn.Linear(self.hidden, c))

    def fit(self, X: Any, y: Any = None, *, bag_index: Any = None, proportions: Any = None) -> LLPClassifier:
        """Train on bags (``bag_index``, ``proportions``); without them (or with ``method="oracle"``) on labels ``y``.

        Args:
            X: ``[n, d]`` features.
            y: instance labels ``[n]``: read only without ``bag_index`` (each row its own bag) or with
                ``method="oracle"``; otherwise ignored.
            bag_index: ``[n]`` bag id of each row (ints ``>= 0``; ``-1``: in no bag).
            proportions: one row per row of ``X`` (``[n, c]``, or ``[n]`` shares of class 1), each its
                bag's label proportions, or a mapping ``{bag id: proportions}``.
        """
        seed = self._check_params()
        X = self._X("fit", X, reset=True)
        n = X.shape[0]
        rng = np.random.default_rng(seed)
        if bag_index is None and proportions is not None:
            raise input_error("LLPClassifier.fit", "bag_index", "the bag of every row when proportions are given",
                              None)
        if self.method == "oracle" or bag_index is None:
            if bag_index is None and y is None and self.method != "oracle":
                raise input_error("LLPClassifier.fit", "bag_index", "bag_index and proportions, or labels y (each row "
                                  "its own bag)", described("neither (LLPClassifier requires y to be passed, but "
                                                            "the target y is None)"))
            classes, codes = self._labels(y, n)
            c = classes.size
            if self.method != "oracle":  # each row its own bag, with the one-hot proportions of its label
                bag_index, alpha = np.arange(n), np.eye(c)[codes]
        else:
            bag_index, alpha, _ = check_bags("LLPClassifier.fit", bag_index, proportions, n)
            c = alpha.shape[1]
            classes = np.arange(c)
        if self.method == "oracle":
            prior = np.bincount(codes, minlength=c) / n
        else:
            sizes = np.bincount(bag_index[bag_index >= 0], minlength=alpha.shape[0])
            prior = (alpha * sizes[:, None]).sum(0) / sizes.sum()
            if self.prior is not None:  # validated as the losses will read it: [c], or P(y = 1) when binary
                prior = _prior("LLPClassifier", self.prior, torch.zeros(1, c, dtype=torch.float64), torch.ones(1))
            if self.method == "lowvar" and alpha.shape[0] < 2:
                m = alpha.shape[0]
                raise input_error("LLPClassifier.fit", "bag_index", "two bags or more for method='lowvar'",
                                  described(f"{m} bag ({int(sizes.sum())} sample{'s' if sizes.sum() > 1 else ''})"))
        net = self._network(X.shape[1], c, seed)
        optimizer = torch.optim.Adam(net.parameters(), lr=self.lr, weight_decay=self.weight_decay)
        if self.method == "oracle":
            curve = self._fit_oracle(net, optimizer, torch.tensor(X), torch.from_numpy(codes), rng)
        else:
            bags, mask = pad_bags(X, bag_index, alpha.shape[0])
            guard = self.model == "mlp" if isinstance(self.nonnegative, str) else bool(self.nonnegative)
            loss = LLPLoss(self.method, base=self.base, prob_clip=self.prob_clip, prior=torch.as_tensor(prior),
                           nonnegative=guard)
            curve = self._fit_bags(net, optimizer, loss, torch.from_numpy(bags), torch.from_numpy(mask),
                                   torch.from_numpy(alpha.astype(np.float32)), rng)
        self.network_, self.classes_ = net, classes
        self.prior_ = np.asarray(torch.as_tensor(prior, dtype=torch.float64))
        self.loss_curve_, self.n_iter_ = curve, self.epochs
        return self

    def _fit_bags(self, net, optimizer, loss, bags, mask, alpha, rng) -> list[float]:
        m = bags.shape[0]
        curve, self.epoch_states_ = [], []
        for _ in range(self.epochs):
            total = 0.0
            batches = np.array_split(rng.permutation(m), max(1, m // self.bags_per_batch))
            for batch in batches:
                batch = torch.from_numpy(batch)
                value = loss(net(bags[batch]), alpha[batch], mask[batch])
                optimizer.zero_grad(set_to_none=True)
                value.backward()
                optimizer.step()
                total += float(value.detach())
            curve.append(total / len(batches))
            self.epoch_states_.append(copy.deepcopy(net.state_dict()))
        return curve

    def _fit_oracle(self, net, optimizer, X, y, rng) -> list[float]:
        curve, self.epoch_states_ = [], []
        n = X.shape[0]
        for _ in range(self.epochs):
            total, steps = 0.0, 0
            for batch in np.array_split(rng.permutation(n), max(1, n // self.oracle_batch_size)):
                batch = torch.from_numpy(batch)
                losses = per_class_losses(net(X[batch]), self.base, prob_clip=self.prob_clip)
                value = losses.gather(1, y[batch, None]).mean()
                optimizer.zero_grad(set_to_none=True)
                value.backward()
                optimizer.step()
                total, steps = total + float(value.detach()), steps + 1
            curve.append(total / steps)
            self.epoch_states_.append(copy.deepcopy(net.state_dict()))
        return curve

    # -- prediction --------------------------------------------------------------------------
    def _logits(self, function: str, X: Any) -> np.ndarray:
        check_is_fitted(self, "network_", msg=f"LLPClassifier.{function}: call fit first (this %(name)s instance is "
                                              "not fitted yet)")
        X = self._X(function, X, reset=False)
        with torch.no_grad():
            return self.network_(torch.tensor(X)).double().numpy()

    def decision_function(self, X: Any) -> np.ndarray:
        """Logits ``[n, c]``; with two classes (scikit-learn's convention) ``[n]``: class 1's logit minus class 0's."""
        logits = self._logits("decision_function", X)
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities ``[n, c]`` (columns in the order of ``classes_``)."""
        logits = self._logits("predict_proba", X)
        logits -= logits.max(1, keepdims=True)
        e = np.exp(logits)
        return e / e.sum(1, keepdims=True)

    def predict(self, X: Any) -> np.ndarray:
        """The most probable class of each row, from ``classes_``."""
        logits = self._logits("predict", X)
        return self.classes_[logits.argmax(1)]

    def at_epoch(self, epoch: int) -> LLPClassifier:
        """A copy of this fitted estimator with the weights it had after ``epoch`` (1-based; -1: the last)."""
        check_is_fitted(self, "network_", msg="LLPClassifier.at_epoch: call fit first (this %(name)s instance is "
                                              "not fitted yet)")
        n = len(self.epoch_states_)
        if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or not (1 <= epoch <= n or -n <= epoch <= -1):
            raise input_error("LLPClassifier.at_epoch", "epoch", f"an epoch in 1..{n} (or -{n}..-1)", epoch)
        other = copy.deepcopy(self)
        other.network_.load_state_dict(self.epoch_states_[epoch - 1 if epoch > 0 else epoch])
        other.n_iter_ = epoch if epoch > 0 else n + 1 + epoch
        return other


# ----------------------------------------------------------------------------------------------
# Median-of-Means tournament
# ----------------------------------------------------------------------------------------------
@dataclass
class TournamentResult:
    """What :func:`mom_tournament` found.

    ``winner``: index of the chosen candidate; ``wins[h]``: how many others ``h`` beats;
    ``pairwise_median[h, h']``: ``M(h, h')``, the median over blocks of the mean of ``L_b(h) - L_b(h')``;
    ``estimates[h]``: the plain mean of ``L_b(h)`` over all bags (``argmin`` of it is the plain-mean
    selector); ``n_blocks``: the blocks used.
    """

    winner: int
    wins: np.ndarray
    pairwise_median: np.ndarray
    estimates: np.ndarray
    n_blocks: int

    @property
    def mean_winner(self) -> int:
        """The plain-mean selector's choice: ``argmin estimates``."""
        return int(np.argmin(self.estimates))

    def to_dict(self) -> dict[str, Any]:
        return {"winner": self.winner, "wins": self.wins.tolist(), "pairwise_median": self.pairwise_median.tolist(),
                "estimates": self.estimates.tolist(), "n_blocks": self.n_blocks, "mean_winner": self.mean_winner}


def _probabilities(candidate: Any, X: np.ndarray, index: int, c: int) -> np.ndarray:
    if hasattr(candidate, "predict_proba"):
        probs = candidate.predict_proba(X)
    elif callable(candidate):
        probs = candidate(X)
    else:
        raise TypeError(f"mom_tournament: candidates[{index}]: expected an estimator with predict_proba or a "
                        f"callable X -> probabilities, got {type(candidate).__name__}")
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape != (X.shape[0], c) or not np.isfinite(probs).all() or probs.min() < 0 or probs.max() > 1 \
            or np.abs(probs.sum(1) - 1).max() > SUM_TOL:
        raise input_error("mom_tournament", f"candidates[{index}]", f"probabilities of shape ({X.shape[0]}, {c}), "
                          "rows in [0, 1] summing to 1", describe(probs))
    return probs


def candidate_bag_estimates(probs: Any, bag_index: Any, proportions: Any, estimators: Sequence[str] = ("lowvar",), *,
                            prior: Any = None, base: str | Callable = "log",
                            prob_clip: float = 1e-3) -> dict[str, np.ndarray]:
    """``{estimator: L_b(h) [m]}`` from a candidate's probabilities ``[n, c]`` (float64; ``mu`` leave-one-bag-out).

    ``bag_index`` and ``proportions`` as :meth:`LLPClassifier.fit` takes them; the bags come in increasing
    bag id. The per-class instance losses are summed per bag (``index_add``), so the bags are never padded.
    """
    function = "candidate_bag_estimates"
    estimators = list(estimators) if not isinstance(estimators, str) else [estimators]
    if not estimators:
        raise input_error(function, "estimators", "at least one of 'lowvar', 'easyllp'", estimators)
    for name in estimators:
        check_choice(function, "estimators", name, ("lowvar", "easyllp"))
    try:
        probs = np.asarray(probs, dtype=np.float64)
    except (TypeError, ValueError):
        raise input_error(function, "probs", "an [n, c] array of class probabilities", describe(probs)) from None
    if probs.ndim != 2 or probs.shape[0] == 0:
        raise input_error(function, "probs", "an [n, c] array of class probabilities", describe(probs))
    index, alpha, _ = check_bags(function, bag_index, proportions, probs.shape[0])
    keep = np.flatnonzero(index >= 0)
    m, c = alpha.shape
    if probs.shape[1] != c:
        raise input_error(function, "probs", f"c = {c} columns (the classes of proportions)", describe(probs))
    kept = probs[keep]
    if not np.isfinite(kept).all() or kept.min() < 0 or kept.max() > 1 or np.abs(kept.sum(1) - 1).max() > SUM_TOL:
        raise input_error(function, "probs", "class probabilities: rows in [0, 1] summing to 1",
                          described(f"values in [{np.nanmin(kept):g}, {np.nanmax(kept):g}]"))
    _check_loss_options(function, prior, base, prob_clip)
    if "lowvar" in estimators and m < 2:
        raise input_error(function, "bag_index", "two bags or more (mu comes from the other bags)", described("1 bag"))
    return _bag_estimates_of(kept, index[keep], alpha, estimators, prior, base, prob_clip)


def _check_loss_options(function: str, prior: Any, base: Any, prob_clip: Any) -> None:
    check_prior_values(function, prior)
    if not callable(base) and not (isinstance(base, str) and base in BASE_LOSSES):
        raise input_error(function, "base", f"one of {list(BASE_LOSSES)} or a callable", base)
    check_finite(function, "prob_clip", prob_clip, low=0, high=0.5, low_open=True, high_open=True)


def _bag_estimates_of(probs, index, alpha, estimators, prior, base, prob_clip) -> dict[str, np.ndarray]:
    m, c = alpha.shape
    logits = torch.from_numpy(np.log(np.clip(probs, 1e-300, None)))
    losses = per_class_losses(logits, base, prob_clip=prob_clip)
    index = torch.from_numpy(index)
    sizes = torch.bincount(index, minlength=m).double()
    lbar = torch.zeros(m, c, dtype=torch.float64).index_add_(0, index, losses) / sizes.unsqueeze(-1)
    a = torch.from_numpy(alpha)
    return {e: llp_bag_estimates(lbar, sizes, a, prior, method=e).numpy() for e in estimators}


def tournament_from_estimates(estimates: Any, n_blocks: int = 10, seed: int | None = None) -> TournamentResult:
    """The Median-of-Means tournament on bag estimates ``[H, m]`` (candidates x bags) already computed."""
    try:
        L = np.asarray(estimates, dtype=np.float64)
    except (TypeError, ValueError):
        raise input_error("tournament_from_estimates", "estimates", "a finite [H, m] array (candidates x bags)",
                          describe(estimates)) from None
    if L.ndim != 2 or L.size == 0 or not np.isfinite(L).all():
        raise input_error("tournament_from_estimates", "estimates", "a finite [H, m] array (candidates x bags)",
                          describe(L))
    H, m = L.shape
    check_int("tournament_from_estimates", "n_blocks", n_blocks, low=1, high=m)
    blocks = np.array_split(np.random.default_rng(seed).permutation(m), n_blocks)
    block_means = np.stack([L[:, b].mean(1) for b in blocks], axis=1)  # [H, G]
    M = np.median(block_means[:, None, :] - block_means[None, :, :], axis=2)
    off = ~np.eye(H, dtype=bool)
    wins = ((M <= 0) & off).sum(1)
    worst = np.where(off, M, -np.inf).max(1) if H > 1 else np.zeros(1)
    best = np.flatnonzero(wins == wins.max())
    winner = int(best[np.argmin(worst[best])])
    return TournamentResult(winner, wins, M, L.mean(1), int(n_blocks))


def mom_tournament(candidates: Sequence[Any], X: Any, bag_index: Any, proportions: Any, n_blocks: int = 10,
                   estimator: str = "lowvar", *, prior: Any = None, base: str | Callable = "log",
                   prob_clip: float = 1e-3, seed: int | None = None) -> TournamentResult:
    """Pick among ``candidates`` from validation bags only (Median-of-Means tournament).

    Args:
        candidates: fitted estimators with ``predict_proba`` or callables ``X -> probabilities [n, c]``.
        X: the validation bags' features (as :meth:`LLPClassifier.fit` takes them).
        bag_index: the bag of each row of ``X`` (as :meth:`LLPClassifier.fit` takes it).
        proportions: the validation bags' label proportions (as :meth:`LLPClassifier.fit` takes them).
        n_blocks: MoM blocks (``1 <= n_blocks <= m``; ``n_blocks = 1`` is the plain mean).
        estimator: ``"lowvar"`` or ``"easyllp"``, the bag estimate compared.
        prior: the class prior (None: the instance-weighted mean of the validation proportions).
        base: the loss whose risk is compared (the clipped log-loss by default), computed from the
            candidates' probabilities.
        prob_clip: the probability clip of that loss.
        seed: the random split of the bags into blocks.

    Reconstruction of the wiring (see the module docstring).
    """
    if estimator not in ("lowvar", "easyllp"):
        raise input_error("mom_tournament", "estimator", "'lowvar' or 'easyllp'", estimator)
    _check_loss_options("mom_tournament", prior, base, prob_clip)
    candidates = list(candidates)
    if len(candidates) < 1:
        raise input_error("mom_tournament", "candidates", "at least one candidate", candidates)
    X = _features("mom_tournament", X)
    bag_index, alpha, _ = check_bags("mom_tournament", bag_index, proportions, X.shape[0])
    m, c = alpha.shape
    if isinstance(n_blocks, bool) or not isinstance(n_blocks, (int, np.integer)) or not 1 <= n_blocks <= m:
        raise input_error("mom_tournament", "n_blocks", f"an int in [1, {m}] (the number of bags)", n_blocks)
    if estimator == "lowvar" and m < 2:
        raise input_error("mom_tournament", "bag_index", "two bags or more (mu comes from the other bags)",
                          described("1 bag"))
    keep = bag_index >= 0
    L = np.stack([_bag_estimates_of(_probabilities(h, X, i, c)[keep], bag_index[keep], alpha, (estimator,), prior,
                                    base, prob_clip)[estimator] for i, h in enumerate(candidates)])
    return tournament_from_estimates(L, n_blocks, seed)
