"""Conjoint stochastic interventions: the public face of ``icml26.training.conjoint``."""

from __future__ import annotations

from icml26.training.conjoint.minimax import PLAYERS, MinimaxPolicy
from icml26.training.conjoint.model import DTYPE, MAX_PROFILES, FactorialDesign, PairedConjointLogit, fit_logit_irls
from icml26.training.conjoint.policy import (
    PENALTIES,
    AverageCasePolicy,
    AverageCasePolicyCV,
    closed_form_system,
    penalty,
)

__all__ = [
    "AverageCasePolicy", "AverageCasePolicyCV", "DTYPE", "FactorialDesign", "MAX_PROFILES", "MinimaxPolicy",
    "PENALTIES", "PLAYERS", "PairedConjointLogit", "closed_form_system", "fit_logit_irls", "penalty",
]
