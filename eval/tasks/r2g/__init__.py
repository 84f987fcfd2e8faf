"""R2G's tasks: the public face of ``icml26.eval.tasks.r2g``."""

from __future__ import annotations

from icml26.eval.tasks.r2g.modular import ANCHOR_OPS, AnchorData, AnchorHistory, GrokkingHistory, OPS, accuracy, anchor_dataset, anchor_decoder, anchor_init, count_parameters, fourier_sparsity, modular_dataset, modular_tensors, operand_geometry, small_decoder, steps_to, train_anchor, train_grokking
from icml26.eval.tasks.r2g.tense import INTRANSITIVE, NOUNS, TENSE_PROMPT_SUFFIX, TRANSITIVE, tense_accuracy, tense_dataset, tense_tokenize, tense_trainer

__all__ = ['ANCHOR_OPS', 'AnchorData', 'AnchorHistory', 'GrokkingHistory', 'INTRANSITIVE', 'NOUNS', 'OPS', 'TENSE_PROMPT_SUFFIX', 'TRANSITIVE', 'accuracy', 'anchor_dataset', 'anchor_decoder', 'anchor_init', 'count_parameters', 'fourier_sparsity', 'modular_dataset', 'modular_tensors', 'operand_geometry', 'small_decoder', 'steps_to', 'tense_accuracy', 'tense_dataset', 'tense_tokenize', 'tense_trainer', 'train_anchor', 'train_grokking']
