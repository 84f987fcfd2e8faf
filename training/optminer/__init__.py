"""Opt-Miner's training: R-GRPO on TRL's ``GRPOTrainer`` and the toy pipeline; the public face of
``icml26.training.optminer``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icml26.lazy import lazy_exports

if TYPE_CHECKING:
    from icml26.training.optminer.rgrpo import (
        GENERATION_BACKENDS,
        TOOL_MASK_MISMATCH,
        RGRPOConfig,
        RGRPOTrainer,
        align_tool_mask,
        check_tool_mask,
        completion_text,
        extract_answer,
        group_advantages,
        make_answer_reward,
        make_retrieval_bonus,
        numeric_match,
        rollout_with_tools,
        tool_result_spans,
    )
    from icml26.training.optminer.toy import evaluate_policy, run_toy

# Every module here imports TRL: the names load on first use, so importing this package stays cheap.
_LAZY = {
    **dict.fromkeys(("GENERATION_BACKENDS", "TOOL_MASK_MISMATCH", "RGRPOConfig", "RGRPOTrainer", "align_tool_mask",
                     "check_tool_mask", "completion_text", "extract_answer", "group_advantages", "make_answer_reward",
                     "make_retrieval_bonus", "numeric_match", "rollout_with_tools", "tool_result_spans"), "rgrpo"),
    **dict.fromkeys(("evaluate_policy", "run_toy"), "toy"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "GENERATION_BACKENDS", "TOOL_MASK_MISMATCH", "RGRPOConfig", "RGRPOTrainer", "align_tool_mask", "check_tool_mask",
    "completion_text", "evaluate_policy", "extract_answer", "group_advantages", "make_answer_reward",
    "make_retrieval_bonus", "numeric_match", "rollout_with_tools", "run_toy", "tool_result_spans",
]
