"""Conjoint stochastic interventions: the public face of ``icml26.training.conjoint``."""

from __future__ import annotations

from icml26.training.conjoint.bootstrap import solve_batch
from icml26.training.conjoint.long import pairs_from_long
from icml26.training.conjoint.minimax import PLAYERS, MinimaxPolicy
from icml26.training.conjoint.model import FactorialDesign, PairedConjointLogit, fit_logit_irls
from icml26.training.conjoint.policy import (
    ACTIVE_TOL,
    PENALTIES,
    AverageCasePolicy,
    AverageCasePolicyCV,
    BoundaryWarning,
    closed_form_system,
    penalty,
)
from icml26.training.conjoint.profiles import DEFAULT_MONTE, DTYPE, MAX_PROFILES

__all__ = [
    "ACTIVE_TOL", "AverageCasePolicy", "AverageCasePolicyCV", "BoundaryWarning", "DEFAULT_MONTE", "DTYPE",
    "FactorialDesign", "MAX_PROFILES", "MinimaxPolicy", "PENALTIES", "PLAYERS", "PairedConjointLogit",
    "closed_form_system", "fit_logit_irls", "pairs_from_long", "penalty", "solve_batch",
]
