"""Private hypothesis selection: the public face of ``icml26.training.dp_select``."""

from __future__ import annotations

from icml26.training.dp_select.audit import (
    AuditResult,
    ForgottenFactorMDE,
    audit_epsilon,
    clopper_pearson,
    exact_privacy_loss,
    neighbours,
)
from icml26.training.dp_select.covers import agnostic_truth, dirichlet_class, gaussian_cover, sample, tv
from icml26.training.dp_select.noise import (
    BACKENDS,
    em_probabilities,
    exponential_mechanism,
    gumbel_max_draws,
    lazy_exponential_mechanism,
)
from icml26.training.dp_select.rates import SampleComplexity, sample_complexity
from icml26.training.dp_select.selection import (
    BKSWSelector,
    HypothesisClass,
    MinimumDistanceEstimate,
    PrivateMDE,
    ScheffeTable,
    ScheffeTournament,
    check_hypotheses,
    check_samples,
    default_k,
    knockout_tournament,
    mde_distances,
    scheffe_table,
)
from icml26.training.dp_select.strong import MAX_STAGE1_OUTCOMES, StrongSetEM

__all__ = [
    "AuditResult", "BACKENDS", "BKSWSelector", "ForgottenFactorMDE", "HypothesisClass", "MAX_STAGE1_OUTCOMES",
    "MinimumDistanceEstimate", "PrivateMDE", "SampleComplexity", "ScheffeTable", "ScheffeTournament", "StrongSetEM", "agnostic_truth",
    "audit_epsilon", "check_hypotheses", "check_samples", "clopper_pearson", "default_k", "dirichlet_class",
    "em_probabilities", "exact_privacy_loss", "exponential_mechanism", "gaussian_cover", "gumbel_max_draws",
    "knockout_tournament", "lazy_exponential_mechanism", "mde_distances", "neighbours", "sample", "sample_complexity",
    "scheffe_table",
    "tv",
]
