"""R2G (Repel-to-Grokking): the public face of ``icml26.training.r2g``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icml26.lazy import lazy_exports
from icml26.training.r2g.loops import (
    AnchorHistory,
    GrokkingHistory,
    accuracy,
    fourier_sparsity,
    modular_tensors,
    operand_geometry,
    train_anchor,
    train_grokking,
)
from icml26.training.r2g.loss import (
    DISTANCES,
    FORMS,
    REDUCTIONS,
    SCHEDULES,
    R2GLoss,
    find_value_projections,
    r2g_distance,
    r2g_term,
    random_pairing,
    value_geometry,
)

if TYPE_CHECKING:
    from icml26.training.r2g.grokfast import GrokfastCallback, GrokfastEMA
    from icml26.training.r2g.sft import R2GSFTConfig, R2GSFTTrainer, tense_trainer
    from icml26.training.r2g.trainer import (
        R2GCallback,
        R2GConfig,
        R2GDataCollator,
        R2GTrainer,
        R2GTrainerMixin,
        R2GTrainingArguments,
        alpha_at,
    )

# Names whose modules import transformers or TRL load on first use, so importing this package
# stays a torch-only import.
_LAZY = {
    **dict.fromkeys(("GrokfastCallback", "GrokfastEMA"), "grokfast"),
    **dict.fromkeys(("R2GSFTConfig", "R2GSFTTrainer", "tense_trainer"), "sft"),
    **dict.fromkeys(("R2GCallback", "R2GConfig", "R2GDataCollator", "R2GTrainer", "R2GTrainerMixin", "R2GTrainingArguments", "alpha_at"), "trainer"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "AnchorHistory", "DISTANCES", "FORMS", "GrokfastCallback", "GrokfastEMA", "GrokkingHistory", "R2GCallback",
    "R2GConfig", "R2GDataCollator", "R2GLoss", "R2GSFTConfig", "R2GSFTTrainer", "R2GTrainer", "R2GTrainerMixin",
    "R2GTrainingArguments", "REDUCTIONS", "SCHEDULES", "accuracy", "alpha_at", "find_value_projections",
    "fourier_sparsity", "modular_tensors", "operand_geometry", "r2g_distance", "r2g_term", "random_pairing",
    "tense_trainer", "train_anchor", "train_grokking", "value_geometry",
]
