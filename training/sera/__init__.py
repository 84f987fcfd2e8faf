"""SERA's supervised fine-tuning (arXiv 2601.20789): the public face of ``icml26.training.sera``.

:mod:`.data` reads and tokenises the trajectories that ``icml26 sera generate`` writes; :mod:`.sft` is the
recipe (:class:`SeraSFTConfig`, :class:`SeraSFTTrainer`, :func:`train_sera`). ``icml26 sera train`` is
:func:`icml26.agents.sera.cli.main_train`.
"""

from __future__ import annotations

from icml26.training.sera.data import (
    assistant_token_loss,
    load_trajectories,
    row_tools,
    tokenize_trajectory,
    tool_names,
    training_chat_template,
    trajectories_to_dataset,
)
from icml26.training.sera.sft import (
    LOSS_IMPLS,
    OVERLONG,
    PAPER_DEFAULTS,
    SeraSFTConfig,
    SeraSFTTrainer,
    SeraTrainOutput,
    build_sft_trainer,
    load_tokenizer,
    prepare_sft_dataset,
    train_sera,
)

__all__ = [
    "LOSS_IMPLS",
    "OVERLONG",
    "PAPER_DEFAULTS",
    "SeraSFTConfig",
    "SeraSFTTrainer",
    "SeraTrainOutput",
    "assistant_token_loss",
    "build_sft_trainer",
    "load_tokenizer",
    "load_trajectories",
    "prepare_sft_dataset",
    "row_tools",
    "tokenize_trajectory",
    "tool_names",
    "train_sera",
    "training_chat_template",
    "trajectories_to_dataset",
]
