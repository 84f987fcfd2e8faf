"""R2G on TRL's ``SFTTrainer``: :class:`R2GSFTTrainer` and :class:`R2GSFTConfig`.

The same term and hooks as :class:`icml26.training.r2g.R2GTrainer`, on ``trl.SFTTrainer`` (its own module so
that TRL loads only when these classes are used).
"""

from __future__ import annotations

from dataclasses import dataclass

from trl import SFTConfig, SFTTrainer

from icml26.training.distributed import use_cpu_when_launched_without_gpu
from icml26.training.r2g.trainer import R2GConfig, R2GTrainerMixin

__all__ = ["R2GSFTConfig", "R2GSFTTrainer"]


class R2GSFTTrainer(R2GTrainerMixin, SFTTrainer):
    """:class:`trl.SFTTrainer` with the R2G term added to its loss (see :class:`R2GTrainerMixin`)."""


@dataclass
class R2GSFTConfig(SFTConfig, R2GConfig):
    """``trl.SFTConfig`` with the :class:`R2GConfig` fields merged in."""

    def __post_init__(self) -> None:
        self._validate_r2g()
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()
