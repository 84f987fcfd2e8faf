"""R2G's tasks: the public face of ``icml26.eval.tasks.r2g``."""

from __future__ import annotations

from icml26.eval.tasks.r2g.modular import (
    ANCHOR_OPS,
    OPS,
    AnchorData,
    anchor_dataset,
    anchor_decoder,
    anchor_init,
    censored_median,
    count_parameters,
    modular_dataset,
    small_decoder,
    steps_to,
)
from icml26.eval.tasks.r2g.tense import (
    INTRANSITIVE,
    NOUNS,
    TENSE_PROMPT_SUFFIX,
    TRANSITIVE,
    tense_accuracy,
    tense_dataset,
    tense_tokenize,
)

__all__ = [
    "ANCHOR_OPS", "AnchorData", "INTRANSITIVE", "NOUNS", "OPS", "TENSE_PROMPT_SUFFIX", "TRANSITIVE",
    "anchor_dataset", "anchor_decoder", "anchor_init", "censored_median", "count_parameters", "modular_dataset", "small_decoder",
    "steps_to", "tense_accuracy", "tense_dataset", "tense_tokenize",
]
