"""R-GRPO: retrieval-augmented GRPO (the Opt-Miner paper's RL stage, reconstructed) on TRL's ``GRPOTrainer``.

Only the paper's abstract is public (ICML 2026 poster 65154). Reconstruction: what R-GRPO changes in GRPO follows
Search-R1 (arXiv 2503.09516) and ReSearch: (1) the tokens of retrieved documents are excluded from the
policy-gradient and KL sums, (2) the reward is the outcome (the final numeric answer, within a relative tolerance) plus an optional format
term, and (3) an optional retrieval bonus, off by default.

TRL >= 1.x already runs the multi-turn tool loop (``GRPOTrainer(tools=[search])``): it parses tool calls with the
tokenizer's response template (``add_response_schema`` recognises the Qwen2.5/Qwen3 templates), executes them, appends
the tool turn *by concatenating token ids* (no re-tokenisation) and records ``tool_mask`` (0 on tool-result tokens).
In ``trl`` 1.16 ``_compute_loss`` multiplies ``completion_mask * tool_mask`` before the policy-gradient, KL and
entropy sums, which is exactly Search-R1's retrieved-token masking (``tests/test_rgrpo.py`` checks this by
behaviour, not by reading TRL's source: the gradient at tool-result positions is exactly zero, and swapping the
retrieved text leaves loss and gradient unchanged; ``pyproject.toml`` pins the tested trl range). So
:class:`RGRPOTrainer` is thin: it

- checks every generated batch: one mask entry per completion token (the guard against TRL issue #5144, where the
  mask outgrew ``completion_ids`` after re-tokenisation: raise, or repair with ``tool_mask_mismatch="repair"``), and
  one masked span per tool turn;
- builds the default reward from :func:`make_answer_reward` and adds :func:`make_retrieval_bonus` when
  ``retrieval_bonus > 0``;
- logs the fraction of completion tokens that were masked (``tools/masked_fraction``).

Also here: :func:`group_advantages` (TRL's group-normalised advantage as a pure function, for tests and users) and
:func:`rollout_with_tools`, a greedy batched multi-turn rollout that builds its token ids exactly as the trainer does
(for evaluation outside training).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from trl import GRPOConfig, GRPOTrainer

from icml26.errors import InputTypeError, described, input_error
from icml26.training.distributed import use_cpu_when_launched_without_gpu
from icml26.validation import check_finite

__all__ = [
    "GENERATION_BACKENDS", "TOOL_MASK_MISMATCH",
    "RGRPOConfig", "RGRPOTrainer",
    "align_tool_mask", "check_tool_mask", "completion_text", "extract_answer", "group_advantages",
    "make_answer_reward", "make_retrieval_bonus", "numeric_match", "rollout_with_tools", "tool_result_spans",
]

GENERATION_BACKENDS = ("auto", "transformers", "vllm")
TOOL_MASK_MISMATCH = ("raise", "repair")
_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_NUMBER_RE = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")


# -- config ------------------------------------------------------------------------------------
@dataclass
class RGRPOConfig(GRPOConfig):
    """:class:`trl.GRPOConfig` plus R-GRPO's reward and masking options (every GRPO field keeps its TRL meaning).

    Parameters:
        reward_tolerance: relative tolerance of the default answer reward: a numeric answer ``y_hat`` counts as
            correct when ``|y_hat - y| / (|y| + 1) < reward_tolerance`` (SIRL's rule; our default 1e-4).
        format_reward: weight of the format term of the default reward (1 when the final turn holds one
            ``<answer>number</answer>``); 0 turns it off.
        retrieval_bonus: reward added when a tool result contains the gold document (dataset column named by
            ``retrieval_gold_column``); 0 (the default) turns it off. Speculative: the paper does not say.
        retrieval_gold_column: dataset column with the text (or id) whose presence in a tool result earns the bonus.
        answer_column: dataset column with the ground-truth numeric answer.
        tool_mask_mismatch: what to do when a tool mask and its completion differ in length (TRL issue #5144):
            ``"raise"`` a ``ValueError`` naming the sample, or ``"repair"``: truncate the mask, or extend it with 0
            (tokens of unknown origin get no gradient).
        verify_tool_mask: check on every batch that each tool turn left exactly one masked span.
        generation_backend: ``"auto"`` uses vLLM (colocated) when it is installed and a GPU is present, else
            transformers, but only when ``use_vllm`` was left unset (None): an explicit ``use_vllm`` wins over
            ``auto``. ``"transformers"`` or ``"vllm"`` force one and contradict an explicit opposite ``use_vllm``.
        use_vllm: TRL's switch, kept when set explicitly; None (the default here) lets ``generation_backend`` decide.
    """

    reward_tolerance: float = field(default=1e-4, metadata={"help": "relative tolerance of the answer reward"})
    format_reward: float = field(default=0.0, metadata={"help": "weight of the <answer> format term (0 = off)"})
    retrieval_bonus: float = field(default=0.0, metadata={"help": "bonus when the gold document was retrieved"})
    retrieval_gold_column: str = field(default="gold_doc", metadata={"help": "column holding the gold document"})
    answer_column: str = field(default="answer", metadata={"help": "column holding the numeric answer"})
    tool_mask_mismatch: str = field(default="raise", metadata={"help": "raise | repair (TRL issue #5144)"})
    verify_tool_mask: bool = field(default=True, metadata={"help": "check one masked span per tool turn"})
    generation_backend: str = field(default="auto", metadata={"help": "auto | transformers | vllm"})
    use_vllm: bool | None = field(default=None, metadata={
        "help": "generate with vLLM (TRL's switch); unset: decided by generation_backend"})

    def __post_init__(self):
        for name in ("reward_tolerance", "format_reward", "retrieval_bonus"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise input_error("RGRPOConfig", name, "a finite number >= 0", value)
        if self.reward_tolerance == 0:
            raise input_error("RGRPOConfig", "reward_tolerance", "a relative tolerance > 0, such as 1e-4", self.reward_tolerance)
        if self.tool_mask_mismatch not in TOOL_MASK_MISMATCH:
            raise input_error("RGRPOConfig", "tool_mask_mismatch", f"one of {list(TOOL_MASK_MISMATCH)}",
                              self.tool_mask_mismatch)
        if self.generation_backend not in GENERATION_BACKENDS:
            raise input_error("RGRPOConfig", "generation_backend", f"one of {list(GENERATION_BACKENDS)}",
                              self.generation_backend)
        if self.use_vllm is not None and not isinstance(self.use_vllm, bool):
            raise input_error("RGRPOConfig", "use_vllm", "True, False or None (unset)", self.use_vllm)
        forced = {"vllm": True, "transformers": False}.get(self.generation_backend)
        if forced is not None and self.use_vllm is not None and self.use_vllm != forced:
            raise input_error("RGRPOConfig", "use_vllm", f"{forced} (or unset) with generation_backend="
                              f"{self.generation_backend!r}", self.use_vllm)
        if forced is not None:
            self.use_vllm = forced
        elif self.use_vllm is None:  # auto, and the user left it to us
            import importlib.util

            self.use_vllm = bool(importlib.util.find_spec("vllm")) and torch.cuda.is_available()
        use_cpu_when_launched_without_gpu(self)
        super().__post_init__()


# -- rewards -----------------------------------------------------------------------------------
def completion_text(completion: Any) -> str:
    """The model's own text of a completion: the string, or its assistant turns (tool turns left out)."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion:
        if message.get("role") == "assistant":
            parts.append(str(message.get("content") or ""))
    return "\n".join(parts)


def extract_answer(text: str) -> float | None:
    """The number in the last ``<answer>...</answer>`` of ``text`` (the last number in it), or None."""
    found = _ANSWER_RE.findall(text)
    if not found:
        return None
    numbers = _NUMBER_RE.findall(found[-1].replace(",", ""))
    if not numbers:
        return None
    try:
        return float(numbers[-1])
    except ValueError:
        return None


def numeric_match(prediction: float | None, target: float, tolerance: float = 1e-4) -> bool:
    """SIRL's correctness rule: ``|prediction - target| / (|target| + 1) < tolerance``; None never matches."""
    if prediction is None or not math.isfinite(prediction):
        return False
    return abs(prediction - float(target)) / (abs(float(target)) + 1.0) < tolerance


def make_answer_reward(scorer: Callable[[str, Any], float] | None = None, *, tolerance: float = 1e-4,
                       answer_column: str = "answer", format_weight: float = 0.0) -> Callable[..., list[float]]:
    """A TRL reward function: 1 when the completion's final answer matches the dataset's, plus an optional format term.

    Args:
        scorer: ``scorer(model_text, target) -> float`` deciding correctness (e.g. one that executes solver code);
            by default the ``<answer>`` number compared with :func:`numeric_match` at ``tolerance``.
        tolerance: relative tolerance of the default scorer.
        answer_column: dataset column holding the target (TRL passes dataset columns as keyword lists).
        format_weight: added when the model's text holds a parseable ``<answer>number</answer>``.
    """
    if isinstance(tolerance, bool) or not (isinstance(tolerance, (int, float)) and tolerance > 0):
        raise input_error("make_answer_reward", "tolerance", "a number > 0", tolerance)
    if scorer is not None and not callable(scorer):
        raise InputTypeError("make_answer_reward", "scorer", "a callable scorer(model_text, target) -> float or None",
                             described(type(scorer).__name__))
    if not isinstance(answer_column, str) or not answer_column:
        raise input_error("make_answer_reward", "answer_column", "a dataset column name", answer_column)
    format_weight = check_finite("make_answer_reward", "format_weight", format_weight, non_negative=True)

    def default_scorer(text: str, target: Any) -> float:
        return float(numeric_match(extract_answer(text), float(target), tolerance))

    score = scorer or default_scorer

    def answer_reward(prompts=None, completions=None, **kwargs) -> list[float]:
        if answer_column not in kwargs:
            raise KeyError(f"the answer reward needs a dataset column {answer_column!r}; the batch has columns "
                           f"{sorted(k for k in kwargs if k not in ('trainer_state', 'log_extra', 'log_metric'))}")
        rewards = []
        for completion, target in zip(completions, kwargs[answer_column], strict=True):
            text = completion_text(completion)
            reward = float(score(text, target))
            if format_weight and extract_answer(text) is not None:
                reward += format_weight
            rewards.append(reward)
        return rewards

    return answer_reward


def make_retrieval_bonus(bonus: float, gold_column: str = "gold_doc") -> Callable[..., list[float]]:
    """A TRL reward function worth ``bonus`` when a tool result of the completion contains the gold document.

    The gold document is given per example in ``gold_column`` (its text, or any string its rendering contains, such
    as its id). Completions without tool turns get 0.
    """
    if not (isinstance(bonus, (int, float)) and math.isfinite(bonus) and bonus >= 0):
        raise input_error("make_retrieval_bonus", "bonus", "a finite number >= 0", bonus)
    if not isinstance(gold_column, str) or not gold_column:
        raise input_error("make_retrieval_bonus", "gold_column", "a dataset column name", gold_column)

    def retrieval_bonus(prompts=None, completions=None, **kwargs) -> list[float]:
        if gold_column not in kwargs:
            raise KeyError(f"the retrieval bonus needs a dataset column {gold_column!r} (set retrieval_gold_column)")
        out = []
        for completion, gold in zip(completions, kwargs[gold_column], strict=True):
            tool_text = "" if isinstance(completion, str) else "\n".join(
                str(m.get("content")) for m in completion if m.get("role") == "tool")
            out.append(float(bonus) if gold and str(gold) in tool_text else 0.0)
        return out

    return retrieval_bonus


# -- advantages and masks ----------------------------------------------------------------------
def group_advantages(rewards: torch.Tensor | Sequence[float], num_generations: int,
                     scale_rewards: str | bool = "group") -> torch.Tensor:
    """GRPO's advantage ``A_i = (r_i - mean_g r) / (std_g r + 1e-4)`` as TRL 1.16 computes it.

    ``scale_rewards``: ``"group"`` (or True) divides by the group's unbiased std, ``"batch"`` by the batch's,
    ``"none"`` (or False) only centres. ``rewards`` lists the groups one after the other (G rows each).
    """
    rewards = torch.as_tensor(rewards, dtype=torch.float32)
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)
    if scale not in ("group", "batch", "none"):
        raise input_error("group_advantages", "scale_rewards", "'group', 'batch' or 'none'", scale_rewards)
    if isinstance(num_generations, bool) or not isinstance(num_generations, int) or num_generations < 1 \
            or rewards.numel() % num_generations:
        raise input_error("group_advantages", "num_generations", f"a group size dividing the {rewards.numel()} rewards",
                          num_generations)
    grouped = rewards.view(-1, num_generations)
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).view(-1)
    if scale == "none":
        return centred
    if scale == "group":
        std = (grouped.std(dim=1).repeat_interleave(num_generations) if num_generations > 1
               else torch.zeros_like(rewards))
    else:
        std = rewards.std().expand_as(rewards) if rewards.numel() > 1 else torch.zeros_like(rewards)
    return centred / (std + 1e-4)


def tool_result_spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """The ``[start, end)`` runs of 0 in one completion's tool mask: the tool-result token spans."""
    spans, start = [], None
    for i, m in enumerate(list(mask) + [1]):
        if not m and start is None:
            start = i
        elif m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def align_tool_mask(completion_ids: Sequence[Sequence[int]], tool_mask: Sequence[Sequence[int]],
                    policy: str = "raise") -> list[list[int]]:
    """Guard against TRL issue #5144: every completion must have exactly one mask entry per token.

    ``policy="raise"`` raises a ``ValueError`` naming the first bad sample; ``"repair"`` truncates a mask that is
    too long and extends one that is too short with 0 (those tokens get no gradient rather than a wrong one).
    """
    if policy not in TOOL_MASK_MISMATCH:
        raise input_error("align_tool_mask", "policy", f"one of {list(TOOL_MASK_MISMATCH)}", policy)
    if len(completion_ids) != len(tool_mask):
        raise input_error("align_tool_mask", "tool_mask", f"one row per completion ({len(completion_ids)})",
                          described(f"{len(tool_mask)} rows"))
    fixed = []
    for i, (ids, mask) in enumerate(zip(completion_ids, tool_mask)):
        mask = list(mask)
        if len(mask) != len(ids):
            if policy == "raise":
                raise input_error(
                    "align_tool_mask", "tool_mask",
                    f"one entry per token of completion {i} ({len(ids)}); with tool_mask_mismatch='repair' a longer "
                    "mask is truncated and a shorter one zero-padded",
                    described(f"completion {i} has {len(mask)} entries but {len(ids)} tokens (the misalignment of "
                              "TRL issue #5144, e.g. after re-tokenising a tool turn)"))
            mask = mask[: len(ids)] + [0] * max(0, len(ids) - len(mask))
        fixed.append(mask)
    return fixed


def check_tool_mask(tool_mask: Sequence[Sequence[int]], completions: Sequence[Any]) -> None:
    """Check that each completion has one masked span per tool turn (raise ``ValueError`` otherwise).

    A tool turn whose ids were dropped for being too long is not in the completion, so it is not counted either.
    """
    for i, (mask, completion) in enumerate(zip(tool_mask, completions, strict=True)):
        if isinstance(completion, str):
            continue
        # consecutive tool messages (parallel calls) share one rendered span
        turns = sum(1 for j, m in enumerate(completion)
                    if m.get("role") == "tool" and (j == 0 or completion[j - 1].get("role") != "tool"))
        spans = len(tool_result_spans(mask))
        if spans != turns:
            raise ValueError(f"completion {i} has {turns} tool turn(s) but {spans} masked span(s) in tool_mask; "
                             "the retrieved tokens would not be excluded from the loss")


# -- trainer -----------------------------------------------------------------------------------

class RGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose retrieved tokens are checked to be out of the loss, with the R-GRPO default rewards.

    Arguments are :class:`trl.GRPOTrainer`'s. ``reward_funcs=None`` uses :func:`make_answer_reward` with the
    config's tolerance, answer column and format weight; ``retrieval_bonus > 0`` appends :func:`make_retrieval_bonus`
    (weight 1) to whatever reward functions are given.
    """

    def __init__(self, model, reward_funcs=None, args: RGRPOConfig | None = None, *pos, **kwargs):
        if args is None:
            raise input_error("RGRPOTrainer", "args", "an RGRPOConfig(...)", None)
        if not isinstance(args, RGRPOConfig):
            raise TypeError(f"args must be an RGRPOConfig, got {type(args).__name__}")
        if reward_funcs is None:
            reward_funcs = [make_answer_reward(tolerance=args.reward_tolerance, answer_column=args.answer_column,
                                               format_weight=args.format_reward)]
        elif not isinstance(reward_funcs, (list, tuple)):
            reward_funcs = [reward_funcs]
        reward_funcs = list(reward_funcs)
        if args.retrieval_bonus > 0:
            reward_funcs.append(make_retrieval_bonus(args.retrieval_bonus, args.retrieval_gold_column))
            if args.reward_weights is not None and len(args.reward_weights) == len(reward_funcs) - 1:
                args.reward_weights = [*args.reward_weights, 1.0]
        super().__init__(model, reward_funcs, args, *pos, **kwargs)

    # TRL internals, trl 1.16.0 (trl/trainer/grpo_trainer.py): ``GRPOTrainer._generate`` returns (prompt_ids,
    # completion_ids, tool_mask, completions, ...), and ``self._metrics[mode]`` is the dict TRL logs from; the
    # behaviour both rely on is tested in tests/test_rgrpo.py.
    def _generate(self, prompts: list):
        out = list(super()._generate(prompts))
        _, completion_ids, tool_mask, completions = out[:4]
        if self.tools and tool_mask is not None:
            tool_mask = align_tool_mask(completion_ids, tool_mask, self.args.tool_mask_mismatch)
            if self.args.verify_tool_mask:
                check_tool_mask(tool_mask, completions)
            out[2] = tool_mask
            mode = "train" if self.model.training else "eval"
            total = sum(len(m) for m in tool_mask)
            masked = sum(len(m) - sum(m) for m in tool_mask)
            self._metrics[mode]["tools/masked_fraction"].append(masked / max(total, 1))
        return tuple(out)

    # trl 1.16.0 ``GRPOTrainer._generate_and_score_completions``: its output carries ``tool_mask`` when tools are set.
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if self.tools and "tool_mask" not in output:
            raise RuntimeError("GRPOTrainer returned no tool_mask although tools are set: retrieved tokens would "
                               "enter the loss")
        return output


# -- evaluation rollouts -----------------------------------------------------------------------
def _tool_suffix_ids(tokenizer, chat_template, tool_messages) -> list[int]:
    # Copied from trl 1.16.0, trl/trainer/grpo_trainer.py, GRPOTrainer._get_tool_suffix_ids (text-only branch; a
    # method of the trainer there, needed here without one): render a dummy exchange with and without the tool turn.
    calls = [{"type": "function", "function": {"name": tool_messages[0]["name"], "arguments": {}}}]
    dummy = [{"role": "user", "content": "dummy"}, {"role": "assistant", "content": "", "tool_calls": calls}]
    prefix = tokenizer.apply_chat_template(dummy, tokenize=True, chat_template=chat_template, return_dict=False)
    full = tokenizer.apply_chat_template(dummy + tool_messages, add_generation_prompt=True, tokenize=True,
                                         chat_template=chat_template, return_dict=False)
    eos = [i for i, t in enumerate(prefix) if t == tokenizer.eos_token_id]
    if eos:
        prefix = prefix[: eos[-1] + 1]
    if full[: len(prefix)] != prefix:
        raise input_error("rollout_with_tools", "tokenizer", "a chat template that is prefix-preserving around tool "
                          "turns", described("one that is not"))
    return full[len(prefix):]


@torch.no_grad()
def rollout_with_tools(model, tokenizer, prompts: list[list[dict]], tools: Sequence[Callable],
                       *, max_new_tokens: int = 64, max_completion_length: int = 256, max_turns: int = 2,
                       do_sample: bool = False, temperature: float = 1.0, batch_size: int = 64) -> list[list[dict]]:
    """Multi-turn rollouts with tool execution, token ids built as GRPOTrainer builds them (greedy by default).

    Each prompt is a message list. The model generates; a parsed tool call is executed (an exception becomes
    ``{"error": ...}``, as in TRL), the tool turn's ids are appended and generation continues, for at most
    ``max_turns`` tool rounds or ``max_completion_length`` completion tokens. Returns one completion (a list of
    assistant and tool messages) per prompt.
    """
    from trl.chat_template_utils import (
        add_response_schema,
        get_training_chat_template,
        is_chat_template_prefix_preserving,
        parse_response,
    )

    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        add_response_schema(tokenizer)
    template = None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(tokenizer)
    tool_map = {t.__name__: t for t in tools}
    device = next(model.parameters()).device
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    results: list[list[dict]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = prompts[start:start + batch_size]
        prompt_ids = [tokenizer.apply_chat_template(p, tools=list(tools) or None, add_generation_prompt=True,
                                                    tokenize=True, chat_template=template, return_dict=False)
                      for p in chunk]
        seqs = [list(p) for p in prompt_ids]
        completions: list[list[dict]] = [[] for _ in chunk]
        active = list(range(len(chunk)))
        for turn in range(max_turns + 1):
            if not active:
                break
            width = max(len(seqs[i]) for i in active)
            ids = torch.full((len(active), width), pad, dtype=torch.long)
            attn = torch.zeros_like(ids)
            for row, i in enumerate(active):  # left padding
                ids[row, width - len(seqs[i]):] = torch.tensor(seqs[i])
                attn[row, width - len(seqs[i]):] = 1
            budget = min(max_new_tokens, max(max_completion_length - min(
                len(seqs[i]) - len(prompt_ids[i]) for i in active), 1))
            out = model.generate(input_ids=ids.to(device), attention_mask=attn.to(device), max_new_tokens=budget,
                                 do_sample=do_sample, temperature=temperature if do_sample else None,
                                 top_p=None, top_k=None, eos_token_id=eos, pad_token_id=pad)
            still = []
            for row, i in enumerate(active):
                new = out[row, width:].tolist()
                if eos in new:
                    new = new[: new.index(eos) + 1]
                else:
                    new = [t for t in new if t != pad]
                message = parse_response(tokenizer, new, prefix=seqs[i], tools=list(tools))
                seqs[i] = seqs[i] + new
                completions[i].append(message)
                calls = message.get("tool_calls")
                if not calls or turn == max_turns:
                    continue
                tool_messages = []
                for call in calls:
                    fn = call.get("function", {})
                    try:
                        result = tool_map[fn["name"]](**fn.get("arguments", {}))
                    except Exception as error:  # noqa: BLE001 - reported to the model, as TRL does
                        result = {"error": str(error)}
                    tool_messages.append({"role": "tool", "name": fn.get("name", "unknown"), "content": str(result)})
                suffix = _tool_suffix_ids(tokenizer, template, tool_messages)
                if len(seqs[i]) + len(suffix) - len(prompt_ids[i]) >= max_completion_length:
                    continue  # as TRL: a tool result that would overflow the budget is dropped
                completions[i].extend(tool_messages)
                seqs[i] = seqs[i] + suffix
                still.append(i)
            active = still
        results.extend(completions)
    return results
