"""A learnware market that identifies models by RKME specifications (prior work).

The search follows ``learnware``'s ``EasyStatSearcher`` (Learnware-LAMDA/Learnware,
``learnware/market/easy/searcher.py``): single search sorts learnwares by MMD^2 to the user's RKME and
turns distances into scores with the reference's min-max conversion (``dist_epsilon = 0.01``,
``min_score = 0.92``), then drops learnwares scoring below a filter (0.6 here, the reference's
``filter_score`` after its first ``min_num``); mixture search solves the simplex QP
``min_w ||Phi_user - sum_l w_l Phi_l||^2`` with ``K_ll' = <Phi_l, Phi_l'>``, ``C_l = <Phi_user, Phi_l>``,
either keeping the top-weight learnwares up to a cumulative weight of 0.98 (``"auto"``) or adding, greedily,
the learnware that lowers the mixture's MMD^2 most until it falls below ``score_cutoff`` (``"greedy"``).

The market publishes ``gamma`` and the feature scaler: both are released information (fit them on pooled or
public data), and every specification must be built with them, which :meth:`LearnwareMarket.add` checks.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from icml26.errors import InputError, InputTypeError, described
from icml26.training.rkme.kernels import BETA_SOLVERS, _as_matrix, _simplex_qp
from icml26.training.rkme.spec import RKMESpecification, StandardScaling
from icml26.validation import check_choice, check_finite, check_int

SEARCH_MODES = ("single", "mixture")
MIXTURES = ("auto", "greedy")


def convert_dist_to_score(dists, dist_epsilon: float = 0.01, min_score: float = 0.92) -> list[float]:
    """learnware's ``_convert_dist_to_score``: min-max scores in which the closest learnware scores at
    least ``min_score`` (the furthest scores 0); all equal distances score 1."""
    f = "convert_dist_to_score"
    try:
        dists = [float(d) for d in np.ravel(np.asarray(dists, dtype=np.float64))]
    except (TypeError, ValueError):
        raise InputTypeError(f, "dists", "a sequence of distances", described(type(dists).__name__)) from None
    if not all(np.isfinite(d) and d >= 0 for d in dists):
        raise InputError(f, "dists", "finite distances >= 0", dists)
    dist_epsilon = check_finite(f, "dist_epsilon", dist_epsilon, non_negative=True)
    min_score = check_finite(f, "min_score", min_score, low=0, high=1, low_open=True)
    if not dists:
        return []
    lo, hi = min(dists), max(dists)
    if lo == hi:
        return [1.0] * len(dists)
    max_score = (hi - lo) / (hi - dist_epsilon)
    if lo < dist_epsilon:
        dist_epsilon = lo
    elif max_score < min_score:
        dist_epsilon = hi - (hi - lo) / min_score
    return [(hi - d) / (hi - dist_epsilon) for d in dists]


@dataclass
class SearchResult:
    """What :meth:`LearnwareMarket.search` returns.

    ``ranking`` (names, closest first, after the score filter), ``distances`` (MMD^2) and ``scores`` of
    those, ``all_distances`` (every learnware, by name), and for mixture search ``mixture`` (names),
    ``weights`` (on the simplex), ``mixture_mmd2`` and ``mixture_score``.
    """

    ranking: list[str]
    distances: list[float]
    scores: list[float]
    all_distances: dict[str, float]
    mixture: list[str] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    mixture_mmd2: float | None = None
    mixture_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class LearnwareMarket:
    """Learnwares ``(name, model, spec)`` and the RKME search over them.

    ``gamma`` (positive) and ``scaler`` (a :class:`~icml26.training.rkme.spec.StandardScaling` or a fitted
    ``StandardScaler``) are the market's published kernel width and feature scaling.
    """

    def __init__(self, gamma: float, scaler: Any) -> None:
        self.gamma = check_finite("LearnwareMarket", "gamma", gamma, positive=True)
        self.scaler = StandardScaling.of(scaler, "LearnwareMarket", "scaler")
        self.learnwares: dict[str, tuple[Any, RKMESpecification]] = {}

    def specification(self, X: Any, **params: Any) -> RKMESpecification:
        """An :class:`RKMESpecification` of ``X`` fitted with the market's gamma and scaler."""
        X = _as_matrix("LearnwareMarket.specification", "X", X, min_rows=2, dim=self.scaler.mean.shape[0])
        for key in ("gamma", "scaler"):
            if key in params:
                raise InputError("LearnwareMarket.specification", key, "the market's own (not passed)", params[key])
        allowed = set(RKMESpecification().get_params()) - {"gamma", "scaler"}
        for key in params:
            if key not in allowed:
                raise InputTypeError("LearnwareMarket.specification", key, f"a parameter among {sorted(allowed)}",
                                     described("an unknown keyword"))
        return RKMESpecification(gamma=self.gamma, scaler=self.scaler, **params).fit(X)

    def _check_spec(self, function: str, spec: Any, argument: str = "spec") -> None:
        if not isinstance(spec, RKMESpecification) or not hasattr(spec, "Z_"):
            raise InputError(f"LearnwareMarket.{function}", argument, "a fitted RKMESpecification",
                             described(type(spec).__name__))
        if not np.isclose(spec.gamma_, self.gamma, rtol=1e-12, atol=0):
            raise InputError(f"LearnwareMarket.{function}", argument, f"gamma {self.gamma!r} (the market's)", spec.gamma_)
        if spec.n_features_in_ != self.scaler.mean.shape[0]:
            raise InputError(f"LearnwareMarket.{function}", argument, f"dimension {self.scaler.mean.shape[0]}",
                             spec.n_features_in_)
        if not self.scaler.same_as(spec.scaler_):
            raise InputError(f"LearnwareMarket.{function}", argument, "the market's scaler",
                             described("a specification scaled otherwise"))

    def add(self, name: str, model: Any, spec: RKMESpecification) -> None:
        """Add a learnware; refuses a spec whose gamma, scaler or dimension differ from the market's."""
        if not isinstance(name, str) or not name or name in self.learnwares:
            raise InputError("LearnwareMarket.add", "name", "a new non-empty name", name)
        self._check_spec("add", spec)
        self.learnwares[name] = (model, spec)

    def model(self, name: str) -> Any:
        """The model of the learnware ``name``."""
        if name not in self.learnwares:
            raise InputError("LearnwareMarket.model", "name", f"one of {sorted(self.learnwares)}", name)
        return self.learnwares[name][0]

    def _mixture_weights(self, specs, user, solver) -> tuple[np.ndarray, float]:
        K = np.array([[a.inner(b) for b in specs] for a in specs])
        C = np.array([user.inner(a) for a in specs])
        w = _simplex_qp(K, C, solver)
        return w, float(user.inner(user) + w @ K @ w - 2.0 * C @ w)

    def search(self, user_spec: RKMESpecification, mode: str = "single", mixture: str = "auto",
               max_search_num: int = 5, filter_score: float = 0.6, min_num: int = 1,
               weight_cutoff: float = 0.98, score_cutoff: float = 0.001, solver: str = "clarabel") -> SearchResult:
        """Rank learnwares for ``user_spec`` (built with the market's gamma and scaler)."""
        f = "LearnwareMarket.search"
        check_choice(f, "mode", mode, SEARCH_MODES)
        check_choice(f, "mixture", mixture, MIXTURES)
        check_int(f, "max_search_num", max_search_num, low=1)
        check_finite(f, "filter_score", filter_score, low=0, high=1)
        check_int(f, "min_num", min_num, low=0)
        check_finite(f, "weight_cutoff", weight_cutoff, low=0, high=1, low_open=True)
        check_finite(f, "score_cutoff", score_cutoff, non_negative=True)
        check_choice(f, "solver", solver, BETA_SOLVERS)
        if not self.learnwares:
            raise InputError("LearnwareMarket.search", "self", "a market holding learnwares", "an empty one",
                             show_got=False)
        self._check_spec("search", user_spec, "user_spec")
        names = list(self.learnwares)
        specs = [self.learnwares[n][1] for n in names]
        dist = {n: s.mmd2(user_spec) for n, s in zip(names, specs)}
        order = sorted(names, key=dist.__getitem__)
        result = SearchResult(order, [dist[n] for n in order], [], dist)
        extra: list[float] = []
        if mode == "mixture":
            k = min(max_search_num, len(names))
            if mixture == "auto":
                w, _ = self._mixture_weights(specs, user_spec, solver)
                chosen, total = [], 0.0
                for i in np.argsort(-w, kind="stable"):
                    total += w[i]
                    if total > weight_cutoff:
                        break
                    chosen.append(int(i))
                if len(chosen) <= 1:
                    chosen = [int(np.argmax(w))]
                chosen = chosen[:k]
                if len(chosen) == 1:
                    weights, mmd2 = np.ones(1), dist[names[chosen[0]]]
                else:
                    weights, mmd2 = self._mixture_weights([specs[i] for i in chosen], user_spec, solver)
            else:
                chosen, weights, mmd2 = [], np.ones(0), None
                for _ in range(k):
                    best = None
                    for i in range(len(names)):
                        if i in chosen:
                            continue
                        w, value = self._mixture_weights([specs[j] for j in chosen + [i]], user_spec, solver)
                        if best is None or value < best[2]:
                            best = (i, w, value)
                    chosen.append(best[0])
                    weights, mmd2 = best[1], best[2]
                    if mmd2 < score_cutoff:
                        break
            result.mixture = [names[i] for i in chosen]
            result.weights = [float(x) for x in weights]
            result.mixture_mmd2 = float(mmd2)
            extra = [float(mmd2)]
        scores = convert_dist_to_score(result.distances + extra)
        if extra:
            result.mixture_score = scores.pop()
        keep = len(scores)
        for idx in range(min(min_num, len(scores)), len(scores)):
            if scores[idx] < filter_score:
                keep = idx
                break
        result.ranking, result.distances, result.scores = order[:keep], result.distances[:keep], scores[:keep]
        return result
