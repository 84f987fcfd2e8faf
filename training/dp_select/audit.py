"""Checking a private selector's privacy: exact privacy loss over all neighbours, and a Monte-Carlo audit.

Neighbouring data sets differ by one replaced sample. :func:`exact_privacy_loss` enumerates every
replacement (``s (D - 1)`` neighbours) and compares the selectors' exact output laws
(``output_probabilities``); it is the ground truth on small inputs. :func:`audit_epsilon` is what an
outside auditor can do: draw outputs on a neighbour pair and turn the counts of one output event into a
Clopper-Pearson lower bound on ``epsilon`` (Jagielski et al. 2020; Nasr et al. 2021 audit DP-SGD the same
way). The pair and the event are chosen to maximise the bound the exact law predicts, so the audit has
the most power it can have at ``n_runs`` draws. :class:`ForgottenFactorMDE` is a deliberately broken
selector (the exponential mechanism without its factor 2) that an audit must catch.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.training.dp_select.selection import PrivateMDE, as_class, check_samples
from icml26.validation import check_finite, check_int

__all__ = ["AuditResult", "ForgottenFactorMDE", "audit_epsilon", "clopper_pearson", "exact_privacy_loss",
           "neighbours"]


def neighbours(samples: Any, D: int) -> Iterator[tuple[int, int, np.ndarray]]:
    """Every replace-one neighbour of ``samples``: ``(position, new value, neighbouring samples)``."""
    samples = check_samples("neighbours", samples, D)
    for t in range(samples.size):
        for v in range(D):
            if v != samples[t]:
                other = samples.copy()
                other[t] = v
                yield t, v, other


def _log_ratio(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.log(p) - np.log(q)
    r[(p == 0) & (q == 0)] = 0.0
    return r


def _selector(function: str, selector: Any) -> Any:
    """A private selector of this package (``fit``, ``output_probabilities`` and ``draw``)."""
    if not all(callable(getattr(selector, name, None)) for name in ("fit", "output_probabilities", "draw")):
        raise InputTypeError(function, "selector", "a selector such as PrivateMDE(epsilon) (with fit, "
                             "output_probabilities and draw)", described(type(selector).__name__))
    return selector


def exact_privacy_loss(selector, H: Any, samples: Any) -> float:
    """``max |log p_i(D) - log p_i(D')|`` over every replace-one neighbour ``D'`` and output ``i`` (exact laws)."""
    selector = _selector("exact_privacy_loss", selector)
    cover = as_class("exact_privacy_loss", H)
    base = selector.output_probabilities(cover, samples)
    worst = 0.0
    for _, _, other in neighbours(samples, cover.D):
        worst = max(worst, float(np.abs(_log_ratio(base, selector.output_probabilities(cover, other))).max()))
    return worst


def clopper_pearson(successes: Any, trials: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """One-sided Clopper-Pearson bounds at level ``alpha`` each: ``(lower, upper)`` for ``successes / trials``."""
    from scipy.stats import beta

    trials = check_int("clopper_pearson", "trials", trials, low=1)
    alpha = check_finite("clopper_pearson", "alpha", alpha, low=0, high=1, low_open=True, high_open=True)
    x = np.asarray(successes, dtype=np.float64)
    if not np.isfinite(x).all() or (x < 0).any() or (x > trials).any() or (x != np.round(x)).any():
        raise input_error("clopper_pearson", "successes", f"integer counts in [0, trials = {trials}]",
                          x.tolist() if x.size <= 10 else describe(x))
    lower = np.where(x > 0, beta.ppf(alpha, np.maximum(x, 1), trials - x + 1), 0.0)
    upper = np.where(x < trials, beta.ppf(1 - alpha, x + 1, np.maximum(trials - x, 1)), 1.0)
    return lower, upper


def _eps_bound(x, y, trials, alpha):
    lo, _ = clopper_pearson(x, trials, alpha)
    _, hi = clopper_pearson(y, trials, alpha)
    with np.errstate(divide="ignore"):
        return np.where(lo > 0, np.log(lo) - np.log(hi), -np.inf)


@dataclass
class AuditResult:
    """An audit's outcome: ``epsilon_lower`` from the draws against ``nominal`` (the selector's ``epsilon_``).

    ``exact_loss``: the exact worst log-ratio of the chosen pair and event; ``expected_lower``: the bound
    the exact law predicts at ``n_runs``; ``position``/``value``: the replaced sample; ``event``: the output
    set counted; ``counts``: its counts under ``D`` and under ``D'``.
    """

    epsilon_lower: float
    nominal: float
    exact_loss: float
    expected_lower: float
    position: int
    value: int
    swapped: bool
    event: list[int]
    counts: tuple[int, int]
    n_runs: int
    confidence: float

    @property
    def violated(self) -> bool:
        """True when the draws prove (at ``confidence``) more privacy loss than ``nominal``."""
        return self.epsilon_lower > self.nominal

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def audit_epsilon(selector, H: Any, samples: Any, n_runs: int, *, confidence: float = 0.95,
                  random_state: Any = None) -> AuditResult:
    """A Monte-Carlo lower bound on ``selector``'s epsilon from ``n_runs`` draws on each side of one neighbour pair.

    The pair ``(D, D')`` (``D = samples``, ``D'`` a replace-one neighbour, either way round) and the event
    ``E`` (a prefix of the outputs sorted by ``p(D) / p(D')``) maximise the expected Clopper-Pearson bound
    computed from the exact laws. Then ``n_runs`` outputs are drawn on each data set (``selector.draw``:
    the scores computed once, the noise vectorised) and ``epsilon_lower = log(CP_lower(P_D(E)) /
    CP_upper(P_D'(E)))`` with each one-sided bound at ``(1 - confidence) / 2``, so a selector that is
    ``epsilon``-DP has ``epsilon_lower <= epsilon`` with probability at least ``confidence``.
    """
    selector = _selector("audit_epsilon", selector)
    cover = as_class("audit_epsilon", H)
    samples = check_samples("audit_epsilon", samples, cover.D)
    n_runs = check_int("audit_epsilon", "n_runs", n_runs, low=1)
    confidence = check_finite("audit_epsilon", "confidence", confidence)
    if not 0 < confidence < 1:
        raise input_error("audit_epsilon", "confidence", "a number in (0, 1)", confidence)
    alpha = (1 - confidence) / 2
    nominal = float(selector.fit(cover, samples).epsilon_)
    base = selector.output_probabilities(cover, samples)
    best = None
    for t, v, other in neighbours(samples, cover.D):
        law = selector.output_probabilities(cover, other)
        for swapped, (p, q) in ((False, (base, law)), (True, (law, base))):
            order = np.argsort(-_log_ratio(p, q), kind="stable")
            pe, qe = np.cumsum(p[order]), np.cumsum(q[order])
            bound = _eps_bound(np.round(pe * n_runs), np.round(qe * n_runs), n_runs, alpha)
            m = int(np.argmax(bound))
            if best is None or bound[m] > best[0]:
                loss = float(_log_ratio(np.array([pe[m]]), np.array([qe[m]]))[0])
                best = (float(bound[m]), t, v, swapped, order[:m + 1], loss, other)
    expected, t, v, swapped, event, loss, other = best
    rng = np.random.default_rng(random_state)
    first, second = (other, samples) if swapped else (samples, other)
    x = int(np.isin(selector.draw(cover, first, n_runs, rng), event).sum())
    y = int(np.isin(selector.draw(cover, second, n_runs, rng), event).sum())
    lower = float(_eps_bound(np.array([x]), np.array([y]), n_runs, alpha)[0])
    return AuditResult(lower, nominal, loss, expected, t, v, swapped, sorted(int(i) for i in event), (x, y),
                       n_runs, confidence)


class ForgottenFactorMDE(PrivateMDE):
    """Private MDE with the exponential mechanism's factor 2 dropped: ``P(i) ∝ exp(epsilon u_i)``. NOT private.

    For a score of sensitivity 1 that is not monotone this spends up to ``2 epsilon``; it exists so that
    tests and audits can show they catch the mistake.
    """

    def __init__(self, epsilon: float = 1.0, lazy: bool = False, k: int | None = None, random_state: Any = None,
                 backend: str = "numpy", chunk: int = 4096) -> None:
        super().__init__(epsilon, lazy, k, random_state, backend, chunk)

    def _temperature(self) -> float:
        return float(self.epsilon)
