"""R2G on TRL's ``SFTTrainer``: :class:`R2GSFTTrainer` and :class:`R2GSFTConfig`.

The same term and hooks as :class:`icml26.training.r2g.R2GTrainer`, on ``trl.SFTTrainer`` (its own module so
that TRL loads only when these classes are used).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from trl import SFTConfig, SFTTrainer

from icml26.training.distributed import use_cpu_when_launched_without_gpu
from icml26.training.r2g.trainer import R2GConfig, R2GTrainerMixin

__all__ = ["R2GSFTConfig", "R2GSFTTrainer", "tense_trainer"]


class R2GSFTTrainer(R2GTrainerMixin, SFTTrainer):
    """:class:`trl.SFTTrainer` with the R2G term added to its loss (see :class:`R2GTrainerMixin`)."""


@dataclass
class R2GSFTConfig(SFTConfig, R2GConfig):
    """``trl.SFTConfig`` with the :class:`R2GConfig` fields merged in."""

    def __post_init__(self) -> None:
        self._validate_r2g()
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()


def tense_trainer(model, tokenizer, train_dataset, *, output_dir, max_steps: int = 20, r2g_alpha: float = 0.08,
                  distance: str = "euclidean", learning_rate: float = 1e-3, batch_size: int = 8,
                  logging_steps: int = 5, seed: int = 0, **sft_kwargs):
    """An :class:`R2GSFTTrainer` for a :func:`icml26.eval.tasks.r2g.tense_tokenize` dataset (the authors' tense-inflection recipe,
    shortened: AdamW eps 1e-7, no weight decay, clipping 1.0, batch 8, linear warm-up over 10% of the
    steps where theirs warms up over 10k of 1M steps)."""
    args = R2GSFTConfig(output_dir=str(output_dir), max_steps=max_steps, per_device_train_batch_size=batch_size,
                        learning_rate=learning_rate, adam_epsilon=1e-7, weight_decay=0.0, max_grad_norm=1.0,
                        warmup_steps=max(1, max_steps // 10), lr_scheduler_type="linear",
                        logging_steps=logging_steps, save_strategy="no", report_to=[], seed=seed,
                        disable_tqdm=True, use_cpu=not torch.cuda.is_available(), dataloader_num_workers=0,
                        r2g_alpha=r2g_alpha, r2g_distance=distance,
                        **{"bf16": False, "activation_checkpointing": False, **sft_kwargs})
    return R2GSFTTrainer(model=model, args=args, train_dataset=train_dataset, processing_class=tokenizer)
