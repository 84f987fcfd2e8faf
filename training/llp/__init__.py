"""Learning from label proportions: the public face of ``icml26.training.llp``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icml26.lazy import lazy_exports
from icml26.training.llp.bags import bag_rows, random_bags
from icml26.training.llp.estimator import (
    LLPClassifier,
    TournamentResult,
    candidate_bag_estimates,
    mom_tournament,
    tournament_from_estimates,
)
from icml26.training.llp.risk import (
    BASE_LOSSES,
    METHODS,
    LLPLoss,
    bag_estimates,
    bag_means,
    dllp_loss,
    easyllp_loss,
    leave_one_bag_out_mean,
    lowvar_llp_loss,
    nonnegative_risk,
    per_class_losses,
)

if TYPE_CHECKING:
    from icml26.training.llp.trainer import (
        LLPConfig,
        LLPDataCollator,
        LLPTrainer,
        LLPTrainingArguments,
        logits_to_bags,
    )

# Names whose modules import transformers or TRL load on first use, so importing this package
# stays a torch-only import.
_LAZY = {
    **dict.fromkeys(("LLPConfig", "LLPDataCollator", "LLPTrainer", "LLPTrainingArguments", "logits_to_bags"), "trainer"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "BASE_LOSSES", "LLPClassifier", "LLPConfig", "LLPDataCollator", "LLPLoss", "LLPTrainer",
    "LLPTrainingArguments", "METHODS", "TournamentResult", "bag_estimates", "bag_means", "bag_rows", "candidate_bag_estimates",
    "dllp_loss", "easyllp_loss", "leave_one_bag_out_mean", "logits_to_bags", "lowvar_llp_loss", "mom_tournament",
    "nonnegative_risk", "per_class_losses", "random_bags", "tournament_from_estimates",
]
