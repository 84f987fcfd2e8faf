"""Robust Halpern Iteration: the public face of ``icml26.training.rhi``."""

from __future__ import annotations

from icml26.training.rhi.halpern import (
    IterationTrace,
    RobustHalpernIteration,
    RobustMDP,
    RobustSolution,
    garnet,
    halpern_iteration,
    periodic_cycle,
    relative_value_iteration,
    river_swim,
    span,
)
from icml26.training.rhi.oracles import (
    MLMC,
    GenerativeModel,
    KOrderMLMC,
    PlugIn,
    SampleBatch,
    SupportOracle,
    TruncatedMLMC,
    check_kernel,
    check_rewards,
    level_probabilities,
    mlmc_cost_factor,
    mlmc_estimate,
    richardson_weights,
)
from icml26.training.rhi.uncertainty import ChiSquareBall, Contamination, KLBall, LpBall, UncertaintySet

__all__ = [
    "ChiSquareBall", "Contamination", "GenerativeModel", "IterationTrace", "KLBall", "KOrderMLMC", "LpBall",
    "MLMC", "PlugIn", "RobustHalpernIteration", "RobustMDP", "RobustSolution", "SampleBatch", "SupportOracle",
    "TruncatedMLMC", "UncertaintySet", "check_kernel", "check_rewards", "garnet", "halpern_iteration",
    "level_probabilities", "mlmc_cost_factor", "mlmc_estimate", "periodic_cycle", "relative_value_iteration",
    "richardson_weights", "river_swim", "span",
]
