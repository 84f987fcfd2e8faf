"""Information-open synthetic data loops: the public face of ``icml26.training.infoloop``."""

from __future__ import annotations

from icml26.training.infoloop.loop import (
    Accumulate,
    CategoricalMLE,
    ExactVerifier,
    GameableVerifier,
    GaussianMLE,
    Labels,
    LabelSampler,
    LinearStudent,
    LoopHistory,
    MixReal,
    NoisyVerifier,
    RandomVerifier,
    Replace,
    RewardWeighted,
    Rubric,
    SyntheticLoop,
    Verify,
    label_correctness,
)

_TRAINER = ("CausalLMGenerator", "SyntheticLoopConfig", "SyntheticLoopTrainer", "addition_correct")

__all__ = [*_TRAINER, "Accumulate", "CategoricalMLE", "ExactVerifier", "GameableVerifier", "GaussianMLE", "LabelSampler", "Labels",
           "LinearStudent", "LoopHistory", "MixReal", "NoisyVerifier", "RandomVerifier", "Replace", "RewardWeighted",
           "Rubric", "SyntheticLoop", "Verify", "label_correctness"]


def __getattr__(name: str):
    """The language-model loop imports TRL: loaded on first use only."""
    if name in _TRAINER:
        from icml26.training.infoloop import trainer

        return getattr(trainer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
