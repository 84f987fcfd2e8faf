"""RKME learnware specifications: the public face of ``icml26.training.rkme``."""

from __future__ import annotations

from icml26.training.rkme.kernels import (
    BETA_SOLVERS,
    KERNEL_CHUNK,
    SPEC_TYPE,
    data_self_term,
    gaussian_kernel,
    kernel_row_means,
    median_gamma,
    neighbour_kme_distance,
    simplex_qp,
    z_gradient,
)
from icml26.training.rkme.lira import (
    LIRA_VARIANCES,
    balanced_halves,
    lira_log_ratio,
    logit_confidence,
    per_target_advantage,
)
from icml26.training.rkme.market import MIXTURES, SEARCH_MODES, LearnwareMarket, SearchResult, convert_dist_to_score
from icml26.training.rkme.spec import RKMESpecification, StandardScaling, noisy_copy_spec

__all__ = [
    "BETA_SOLVERS", "KERNEL_CHUNK", "LIRA_VARIANCES", "LearnwareMarket", "MIXTURES", "RKMESpecification",
    "SEARCH_MODES", "SPEC_TYPE", "SearchResult", "StandardScaling", "balanced_halves", "convert_dist_to_score",
    "data_self_term", "gaussian_kernel", "kernel_row_means", "lira_log_ratio", "logit_confidence", "median_gamma",
    "neighbour_kme_distance", "noisy_copy_spec", "per_target_advantage", "simplex_qp", "z_gradient",
]
