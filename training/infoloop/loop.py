"""Synthetic data loops, open and closed ("An Information-Theoretic Criterion for Efficient Data Synthesis", Li, Sun
and Deng, ICML 2026, arXiv 2605.16379).

The paper's statements: in a closed loop (model ``M_t`` generates ``D_{t+1}``, ``M_{t+1}`` is fitted on it, nothing
else enters) ``Y -> M_0 -> D_1 -> M_1 -> ...`` is a Markov chain, so ``I(Y; M_t)`` cannot grow; an external signal
(a verifier) injects at most its capacity, one bit per binary verdict; a signal that a simpler, spurious pattern
predicts gets hacked. Reconstruction (no code exists): the loop below makes the information flow explicit.

- A **generator** has ``fit(data) -> self`` and ``sample(n, rng) -> data``: :class:`GaussianMLE`,
  :class:`CategoricalMLE`, :class:`LinearStudent`, :class:`LabelSampler` (any scikit-learn classifier labelling a
  fixed pool of inputs).
- A **verifier** sees generated samples and returns accept bits; truth lives only inside it (a ``correct`` function
  of the samples): :class:`ExactVerifier`, :class:`NoisyVerifier`, :class:`RandomVerifier` (independent of
  correctness), :class:`GameableVerifier` (accepts a correct sample or one that sets a flag).
- A **policy** turns one round's samples into the next training set: :class:`Replace`, :class:`Accumulate`,
  :class:`MixReal`, :class:`Verify`, :class:`RewardWeighted`, :class:`Rubric`.
- :class:`SyntheticLoop` runs them and logs, per round, the acceptance, ``I(accept; correct)`` (computed by the
  verifier, which alone knows correctness) and the bits injected; the loop never reads a label.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from icml26.errors import describe, input_error
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["Accumulate", "CategoricalMLE", "ExactVerifier", "GameableVerifier", "GaussianMLE", "LabelSampler", "Labels",
           "LinearStudent", "LoopHistory", "MixReal", "NoisyVerifier", "RandomVerifier", "Replace", "RewardWeighted",
           "Rubric", "SyntheticLoop", "Verify", "label_correctness"]


# ----------------------------------------------------------------------------------------------
# data containers
# ----------------------------------------------------------------------------------------------
def _take(data, keep: np.ndarray):
    """Rows ``keep`` (indices or a mask) of any data a generator uses."""
    if isinstance(data, Labels):
        return Labels(data.x[keep], data.action[keep], data.index[keep])
    if isinstance(data, tuple):
        return tuple(part[keep] for part in data)
    return np.asarray(data)[keep]


def _size(data) -> int:
    if isinstance(data, Labels):
        return len(data.action)
    if isinstance(data, tuple):
        return len(data[0])
    return len(data)


def _concat(parts: list):
    first = parts[0]
    if isinstance(first, Labels):
        return Labels(np.concatenate([p.x for p in parts]), np.concatenate([p.action for p in parts]),
                      np.concatenate([p.index for p in parts]))
    if isinstance(first, tuple):
        return tuple(np.concatenate(cols) for cols in zip(*parts))
    return np.concatenate(parts)


@dataclass
class Labels:
    """Labelled inputs: ``x`` ``[n, p]``, ``action`` ``[n]`` (a label, or ``label + K * flag`` with a flag) and
    ``index`` ``[n]``, the row of the pool each input came from (-1 for inputs outside the pool)."""

    x: np.ndarray
    action: np.ndarray
    index: np.ndarray


# ----------------------------------------------------------------------------------------------
# generators
# ----------------------------------------------------------------------------------------------
class GaussianMLE:
    """A 1-D Gaussian refitted by maximum likelihood (``unbiased=True``: the ``n - 1`` variance), then sampled
    (Shumailov et al. 2024's fit-and-sample loop)."""

    def __init__(self, unbiased: bool = False) -> None:
        self.unbiased = bool(unbiased)
        self.mean, self.var = 0.0, 1.0

    def fit(self, data) -> GaussianMLE:
        x = np.asarray(data, dtype=np.float64)
        if x.ndim != 1 or len(x) < 2 or not np.isfinite(x).all():
            raise input_error("GaussianMLE.fit", "data", "finite samples [n], n >= 2", describe(data))
        self.mean, self.var = float(x.mean()), float(x.var(ddof=1 if self.unbiased else 0))
        return self

    def sample(self, n: int, rng) -> np.ndarray:
        return np.random.default_rng(rng).normal(self.mean, math.sqrt(self.var), size=n)


class CategoricalMLE:
    """A categorical distribution over ``K`` categories refitted by counting (a category never sampled is gone)."""

    def __init__(self, K: int) -> None:
        self.K = check_int("CategoricalMLE", "K", K, low=1)
        self.probs = np.full(self.K, 1.0 / self.K)

    def fit(self, data) -> CategoricalMLE:
        x = np.asarray(data)
        if x.ndim != 1 or len(x) == 0 or not np.issubdtype(x.dtype, np.integer) or x.min() < 0 or x.max() >= self.K:
            raise input_error("CategoricalMLE.fit", "data", f"category indices in [0, {self.K}) [n], n >= 1",
                              describe(data))
        self.probs = np.bincount(x, minlength=self.K) / len(x)
        return self

    def sample(self, n: int, rng) -> np.ndarray:
        return np.random.default_rng(rng).choice(self.K, size=n, p=self.probs)


class LinearStudent:
    """Least squares on ``(X, y)``, then labels ``y = X w + noise eps`` for fresh ``X ~ N(0, I_d)`` (the
    teacher-student loop of Dohmatob et al. 2024 and Gerstgrasser et al. 2024)."""

    def __init__(self, d: int, noise: float = 1.0) -> None:
        self.d = check_int("LinearStudent", "d", d, low=1)
        self.noise = check_finite("LinearStudent", "noise", noise, non_negative=True)
        self.w = np.zeros(self.d)

    def fit(self, data) -> LinearStudent:
        if not isinstance(data, tuple) or len(data) != 2:
            raise input_error("LinearStudent.fit", "data", "a pair (X [n, d], y [n])", describe(data))
        X, y = (np.asarray(a, dtype=np.float64) for a in data)
        if X.ndim != 2 or X.shape[1] != self.d or y.shape != (len(X),):
            raise input_error("LinearStudent.fit", "data", f"X [n, {self.d}] and y [n]", describe(data))
        self.w = np.linalg.lstsq(X, y, rcond=None)[0]
        return self

    def sample(self, n: int, rng) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(rng)
        X = rng.standard_normal((n, self.d))
        return X, X @ self.w + self.noise * rng.standard_normal(n)


class LabelSampler:
    """A scikit-learn classifier that labels a fixed pool of inputs: ``fit(Labels)`` refits a clone of
    ``estimator``, ``sample(n, rng)`` labels ``n`` pool inputs (all of them, in order, when ``n`` is the pool size)
    by drawing from ``predict_proba`` (``sample="proba"``) or taking its argmax (``"argmax"``, which uses the
    pool's inputs like self-training and so is not a closed loop).

    With ``flag=True`` the action space doubles: action ``label + K * flag``, a spurious flag a gameable verifier
    rewards.

    Args:
        estimator: an unfitted scikit-learn classifier with ``predict_proba``.
        pool: ``[m, p]`` the inputs the loop labels.
        num_labels: ``K``.
        sample: ``"proba"`` or ``"argmax"``.
        flag: add the flag bit to every action.
    """

    def __init__(self, estimator, pool, num_labels: int, sample: str = "proba", flag: bool = False) -> None:
        if not hasattr(estimator, "fit") or not hasattr(estimator, "predict_proba"):
            raise input_error("LabelSampler", "estimator", "a scikit-learn classifier with predict_proba",
                              describe(estimator))
        self.pool = np.asarray(pool, dtype=np.float64)
        if self.pool.ndim != 2 or len(self.pool) == 0:
            raise input_error("LabelSampler", "pool", "inputs [m, p], m >= 1", describe(pool))
        self.estimator = estimator
        self.num_labels = check_int("LabelSampler", "num_labels", num_labels, low=2)
        self.sample_mode = check_choice("LabelSampler", "sample", sample, ("proba", "argmax"))
        self.flag = bool(flag)
        self.num_actions = self.num_labels * (2 if self.flag else 1)
        self.model = None
        self.constant = 0

    def fit(self, data: Labels) -> LabelSampler:
        from sklearn.base import clone

        if not isinstance(data, Labels) or len(data.action) == 0:
            raise input_error("LabelSampler.fit", "data", "Labels with at least one row", describe(data))
        action = np.asarray(data.action)
        if action.min() < 0 or action.max() >= self.num_actions:
            raise input_error("LabelSampler.fit", "data", f"actions in [0, {self.num_actions})", describe(action))
        if len(np.unique(action)) == 1:   # a classifier needs two classes: predict the one seen
            self.model, self.constant = None, int(action[0])
        else:
            self.model = clone(self.estimator).fit(data.x, action)
        return self

    def action_proba(self, x) -> np.ndarray:
        """``[n, num_actions]`` probabilities of every action (zero for actions the fit never saw)."""
        x = np.asarray(x, dtype=np.float64)
        out = np.zeros((len(x), self.num_actions))
        if self.model is None:
            out[:, self.constant] = 1.0
        else:
            out[:, self.model.classes_] = self.model.predict_proba(x)
        return out

    def label_proba(self, x) -> np.ndarray:
        """``[n, K]`` label probabilities, the flag marginalised out."""
        p = self.action_proba(x)
        return p.reshape(len(p), -1, self.num_labels).sum(1) if self.flag else p

    def predict(self, x) -> np.ndarray:
        """The most probable label of each input."""
        return self.label_proba(x).argmax(1)

    def sample(self, n: int, rng) -> Labels:
        rng = np.random.default_rng(rng)
        m = len(self.pool)
        index = np.arange(m) if n == m else rng.choice(m, size=n, replace=n > m)
        p = self.action_proba(self.pool[index])
        if self.sample_mode == "argmax":
            action = p.argmax(1)
        else:
            action = (p.cumsum(1) > rng.random((len(p), 1))).argmax(1)
        return Labels(self.pool[index], action, index)


def label_correctness(y_pool, num_labels: int) -> Callable[[Labels], np.ndarray]:
    """The ``correct`` function of a pool with true labels ``y_pool``: a sample is correct when its label
    (``action mod K``) is the pool input's true label. Give it to a verifier, never to the loop."""
    y_pool = np.asarray(y_pool)

    def correct(samples: Labels) -> np.ndarray:
        if not isinstance(samples, Labels):
            raise input_error("label_correctness", "samples", "Labels from a LabelSampler (a generator of labels)",
                              describe(samples))
        return (np.asarray(samples.action) % num_labels) == y_pool[samples.index]

    return correct


# ----------------------------------------------------------------------------------------------
# verifiers
# ----------------------------------------------------------------------------------------------
def _binary_entropy(p: float) -> float:
    return 0.0 if p <= 0 or p >= 1 else float(-p * math.log2(p) - (1 - p) * math.log2(1 - p))


def _mutual_information_bits(a: np.ndarray, b: np.ndarray) -> float:
    """Plug-in ``I(a; b)`` in bits of two boolean arrays."""
    joint = np.array([[np.mean(~a & ~b), np.mean(~a & b)], [np.mean(a & ~b), np.mean(a & b)]])
    pa, pb = joint.sum(1), joint.sum(0)
    nz = joint > 0
    return float((joint[nz] * np.log2(joint[nz] / np.outer(pa, pb)[nz])).sum())


class _Verifier:
    """Accept bits for samples; records, for the round just judged, the acceptance and ``I(accept; correct)``."""

    def __init__(self, correct: Callable[[Any], np.ndarray]) -> None:
        if not callable(correct):
            raise input_error(type(self).__name__, "correct", "a function of the samples returning booleans",
                              describe(correct))
        self.correct = correct
        self.last: dict[str, float] = {}

    def _decide(self, samples, correct: np.ndarray, t: int, rng) -> np.ndarray:
        raise NotImplementedError

    def __call__(self, samples, t: int, rng) -> np.ndarray:
        correct = np.asarray(self.correct(samples), dtype=bool)
        accept = np.asarray(self._decide(samples, correct, t, np.random.default_rng(rng)), dtype=bool)
        rate = float(accept.mean()) if len(accept) else 0.0
        mi = _mutual_information_bits(accept, correct) if len(accept) else 0.0
        self.last = {"acceptance": rate, "mi_accept_correct": mi, "bits_capacity": len(accept) * _binary_entropy(rate),
                     "bits_informative": len(accept) * mi, "accepted_correct": float(correct[accept].mean())
                     if accept.any() else math.nan}
        return accept


class ExactVerifier(_Verifier):
    """Accepts exactly the correct samples.

    Args:
        correct: a function of the samples returning a boolean per sample (e.g. :func:`label_correctness`).
    """

    def _decide(self, samples, correct, t, rng):
        return correct


class NoisyVerifier(_Verifier):
    """The exact verdict flipped with probability ``eta`` (``eta = 0.5``: independent of correctness).

    Args:
        correct: as :class:`ExactVerifier`'s.
        eta: flip probability in [0, 1].
    """

    def __init__(self, correct, eta: float) -> None:
        super().__init__(correct)
        self.eta = check_finite("NoisyVerifier", "eta", eta, low=0.0, high=1.0)

    def _decide(self, samples, correct, t, rng):
        return correct ^ (rng.random(len(correct)) < self.eta)


class RandomVerifier(_Verifier):
    """Accepts each sample with probability ``rates[t - 1]`` in round ``t``, independent of correctness (matching another
    arm's acceptance: the same number of samples kept, no information).

    Args:
        correct: as :class:`ExactVerifier`'s (used only to log the zero information).
        rates: acceptance probability of each round, in [0, 1].
    """

    def __init__(self, correct, rates) -> None:
        super().__init__(correct)
        rates = np.asarray(rates, dtype=np.float64)
        if rates.ndim != 1 or len(rates) == 0 or not np.isfinite(rates).all() or (rates < 0).any() or (rates > 1).any():
            raise input_error("RandomVerifier", "rates", "probabilities in [0, 1], one per round", describe(rates))
        self.rates = rates

    def _decide(self, samples, correct, t, rng):
        if t > len(self.rates):
            raise input_error("RandomVerifier", "rates", f"a rate for round {t}", f"{len(self.rates)} rates")
        return rng.random(len(correct)) < self.rates[t - 1]


class GameableVerifier(_Verifier):
    """Accepts a correct sample or any sample that sets the flag (``action >= K``): a proxy a simpler pattern
    satisfies.

    Args:
        correct: as :class:`ExactVerifier`'s.
        num_labels: ``K`` (actions at or above it carry the flag).
    """

    def __init__(self, correct, num_labels: int) -> None:
        super().__init__(correct)
        self.num_labels = check_int("GameableVerifier", "num_labels", num_labels, low=1)

    def _decide(self, samples, correct, t, rng):
        if not isinstance(samples, Labels):
            raise input_error("GameableVerifier", "samples", "Labels with flagged actions (LabelSampler(flag=True))",
                              describe(samples))
        return correct | (np.asarray(samples.action) >= self.num_labels)


# ----------------------------------------------------------------------------------------------
# policies: one round's samples -> the next training set
# ----------------------------------------------------------------------------------------------
class Replace:
    """Closed: train on this round's samples only."""

    verifier = None

    def __call__(self, samples, state: dict, t: int, rng):
        return samples


class Accumulate:
    """Closed: train on everything so far, the round-0 data included (Gerstgrasser et al. 2024)."""

    verifier = None

    def __call__(self, samples, state, t, rng):
        kept = [part for part in (state.get("all", state.get("initial")), samples) if part is not None]
        state["all"] = _concat(kept)
        return state["all"]


class MixReal:
    """Open through real data: a share ``rho`` of the training set drawn from ``real`` (with its labels), the rest
    from this round's samples.

    Args:
        rho: the real share in [0, 1].
        real: real data in the generator's format.
    """

    verifier = None

    def __init__(self, rho: float, real) -> None:
        self.rho = check_finite("MixReal", "rho", rho, low=0.0, high=1.0)
        self.real = real

    def __call__(self, samples, state, t, rng):
        n = _size(samples)
        k = math.floor(self.rho * n + 0.5)
        rng = np.random.default_rng(rng)
        real = _take(self.real, rng.choice(_size(self.real), size=k, replace=k > _size(self.real)))
        own = _take(samples, rng.choice(n, size=n - k, replace=False))
        return _concat([own, real]) if k else own


class Verify:
    """Open: keep the samples the verifier accepts (rejection sampling; STaR, ReST, RFT).

    Args:
        verifier: an :class:`ExactVerifier`, :class:`NoisyVerifier`, :class:`RandomVerifier` or
            :class:`GameableVerifier`.
    """

    def __init__(self, verifier) -> None:
        if not isinstance(verifier, _Verifier):
            raise input_error("Verify", "verifier", "a verifier of icml26.training.infoloop", describe(verifier))
        self.verifier = verifier

    def __call__(self, samples, state, t, rng):
        return _take(samples, self.verifier(samples, t, rng))


class RewardWeighted:
    """Open: resample this round's samples with probability proportional to ``exp(reward / temperature)``, the
    reward being the verifier's accept bit (an RLVR-style reweighting; ``temperature -> 0`` is :class:`Verify`).

    Args:
        verifier: as :class:`Verify`'s.
        temperature: positive.
    """

    def __init__(self, verifier, temperature: float = 0.25) -> None:
        if not isinstance(verifier, _Verifier):
            raise input_error("RewardWeighted", "verifier", "a verifier of icml26.training.infoloop",
                              describe(verifier))
        self.verifier = verifier
        self.temperature = check_finite("RewardWeighted", "temperature", temperature, positive=True)

    def __call__(self, samples, state, t, rng):
        rng = np.random.default_rng(rng)
        reward = self.verifier(samples, t, rng).astype(np.float64)
        w = np.exp((reward - reward.max()) / self.temperature)
        n = _size(samples)
        return _take(samples, rng.choice(n, size=n, p=w / w.sum()))


class Rubric:
    """Open through a rule that reads only the samples (no truth): keep those whose ``score`` reaches
    ``threshold``.

    Args:
        score: a function of the samples returning a number per sample.
        threshold: the score to reach.
    """

    verifier = None

    def __init__(self, score: Callable[[Any], np.ndarray], threshold: float = 0.5) -> None:
        if not callable(score):
            raise input_error("Rubric", "score", "a function of the samples", describe(score))
        self.score = score
        self.threshold = check_finite("Rubric", "threshold", threshold)

    def __call__(self, samples, state, t, rng):
        return _take(samples, np.asarray(self.score(samples), dtype=np.float64) >= self.threshold)


# ----------------------------------------------------------------------------------------------
# the loop
# ----------------------------------------------------------------------------------------------
@dataclass
class LoopHistory:
    """Per round (0: the model fitted on the initial data): what the loop trained on and what it measured.

    ``rounds[t]`` holds ``n_train`` (rows fitted), the verifier's ``acceptance``, ``mi_accept_correct`` (bits per
    sample), ``bits_capacity`` (``n H(acceptance)``) and ``bits_informative`` (``n I(accept; correct)``) when the
    policy has a verifier, and whatever ``evaluate`` returned.
    """

    rounds: list[dict[str, Any]] = field(default_factory=list)

    def series(self, key: str) -> list[Any]:
        """``key`` at every round (``None`` where absent)."""
        return [r.get(key) for r in self.rounds]

    def bits_injected(self) -> float:
        """Informative bits summed over rounds (0 for a loop without a verifier)."""
        return float(sum(r.get("bits_informative") or 0.0 for r in self.rounds))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class SyntheticLoop:
    """Fit, generate, filter, refit: ``run(initial)`` fits the generator on ``initial`` (round 0; ``run()`` takes the
    generator as already fitted), then for each of ``rounds`` rounds draws ``n_samples`` samples, lets the policy
    choose the training set, and refits (a round whose policy keeps nothing keeps the previous model).

    Args:
        generator: ``fit(data) -> self`` and ``sample(n, rng)``.
        policy: one of this module's policies.
        rounds: rounds after round 0 (>= 1).
        n_samples: samples per round (default: the size of the initial data; required without it).
        seed: seeds the sampling and the policy's draws.
        evaluate: called as ``evaluate(generator, round)`` after every fit; its dict is logged.
        copy_generator: fit a deep copy, leaving the given generator untouched.
    """

    def __init__(self, generator, policy, rounds: int, n_samples: int | None = None, seed=None,
                 evaluate: Callable[[Any, int], dict[str, Any]] | None = None, copy_generator: bool = True) -> None:
        for name in ("fit", "sample"):
            if not callable(getattr(generator, name, None)):
                raise input_error("SyntheticLoop", "generator", "an object with fit(data) and sample(n, rng)",
                                  describe(generator))
        if not callable(policy):
            raise input_error("SyntheticLoop", "policy", "a policy (Replace, Accumulate, MixReal, Verify, ...)",
                              describe(policy))
        self.generator = generator
        self.policy = policy
        self.rounds = check_int("SyntheticLoop", "rounds", rounds, low=1)
        verifier = getattr(policy, "verifier", None)
        if isinstance(verifier, RandomVerifier) and len(verifier.rates) < self.rounds:
            raise input_error("SyntheticLoop", "policy", f"a random verifier with a rate for each of {self.rounds} "
                              "rounds", f"{len(verifier.rates)} rates")
        self.n_samples = None if n_samples is None else check_int("SyntheticLoop", "n_samples", n_samples, low=1)
        self.seed = seed
        self.evaluate = evaluate
        self.copy_generator = copy_generator

    def run(self, initial=None) -> LoopHistory:
        """The loop's history; ``self.model`` is the last fitted generator.

        Args:
            initial: round 0's data (``None``: the generator is already fitted, e.g. a trained model).
        """
        import copy

        if initial is None and self.n_samples is None:
            raise input_error("SyntheticLoop.run", "initial", "round 0's data, or n_samples set on the loop", None)
        generator = copy.deepcopy(self.generator) if self.copy_generator else self.generator
        n = self.n_samples or _size(initial)
        streams = np.random.SeedSequence(self.seed).spawn(2 * self.rounds)
        history = LoopHistory()
        if initial is not None:
            generator.fit(initial)
        history.rounds.append({"round": 0, "n_train": 0 if initial is None else _size(initial),
                               **self._evaluate(generator, 0)})
        state: dict[str, Any] = {"initial": initial}
        for t in range(1, self.rounds + 1):
            samples = generator.sample(n, np.random.default_rng(streams[2 * t - 2]))
            train = self.policy(samples, state, t, np.random.default_rng(streams[2 * t - 1]))
            row: dict[str, Any] = {"round": t, "n_train": _size(train)}
            verifier = getattr(self.policy, "verifier", None)
            if verifier is not None:
                row.update(verifier.last)
            if row["n_train"] > 0:
                generator.fit(train)
            row.update(self._evaluate(generator, t))
            history.rounds.append(row)
        self.model = generator
        return history

    def _evaluate(self, generator, t: int) -> dict[str, Any]:
        return dict(self.evaluate(generator, t)) if self.evaluate is not None else {}

