"""SERA's SFT recipe: TRL's ``SFTTrainer`` on agent trajectories, loss on assistant turns only.

SERA (arXiv 2601.20789; the SFT recipe as set in the axolotl configs of allenai/SERA) fine-tunes
Qwen3 on SWE-agent trajectories in the hermes tool-call format with:

- the chat template, **assistant-only loss** (system prompt, task and tool outputs are masked);
- sequence length 32,768 (longer samples dropped), 3 epochs;
- AdamW betas (0.9, 0.95), weight decay 0.01, learning rate 1e-5 with a cosine schedule and warm-up
  (48 steps in their configs, set per dataset through ``warmup_ratio``);
- micro-batch 1 with gradient accumulation (2 for SERA-32B, 8 for SERA-8B), bf16, gradient checkpointing.

:class:`SeraSFTConfig` is TRL's ``SFTConfig`` with those defaults, plus the few SERA/LoRA fields, and
parses with ``HfArgumentParser``. The loss mask is TRL's own mechanism: ``assistant_only_loss=True``
makes ``SFTTrainer`` swap in TRL's *training* chat template (``get_training_chat_template``, the
template with ``{% generation %}`` markers) and build labels from the tokenizer's assistant mask.
The tokenizer's own template is left untouched and saved as is, so inference sees the original one
(SERA's README warns that a modified ``tokenizer_config.json`` breaks inference).

What this module does by hand, and why:

- trajectories store tool-call arguments as JSON *strings* (OpenAI format), but chat templates render
  ``arguments | tojson`` and want dicts. Stored as Arrow structs, dicts with different keys would be
  merged into one struct type whose missing keys come back as ``null`` (and the template would print
  ``"file_text": null`` into every ``bash`` call). So :func:`trajectories_to_dataset` keeps each
  message as a ``datasets.Json`` value (no schema unification) after :func:`~icml26.agents.backends.to_template_messages` (``strict=True``) has
  parsed the arguments and removed the ``null`` keys that a previous Arrow round trip may have added;
- ``overlong="drop"`` (the paper's choice) needs each sample's token count before TRL truncates, so
  the rows are tokenised once with the same call TRL makes (:func:`tokenize_trajectory`);
- :class:`SeraSFTTrainer` is ``SFTTrainer`` with one hook: ``loss_impl="model"`` takes the model's own loss
  (full logits) instead of TRL's chunked LM-head loss, which is the right choice for long contexts and big
  vocabularies but about 3x slower for a tiny model on CPU; both give the same value (tested).

Entry points: :func:`train_sera` (library; ``icml26 sera train`` is
:func:`icml26.agents.sera.cli.main_train`),
:func:`build_sft_trainer` (the trainer alone), :func:`load_trajectories`, :func:`trajectories_to_dataset`,
:func:`tokenize_trajectory` and :func:`assistant_token_loss` (the held-out loss, same tokens as training).
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trl import SFTConfig, SFTTrainer

from icml26.errors import InputError, InputTypeError, described, input_error
from icml26.training.distributed import mean_across_processes, use_cpu_when_launched_without_gpu
from icml26.training.sera.data import (
    _drop_overlong,
    tokenize_trajectory,
    training_chat_template,
    trajectories_to_dataset,
)
from icml26.utils import IGNORE_INDEX
from icml26.validation import check_choice, check_finite, check_int

logger = logging.getLogger(__name__)

if TYPE_CHECKING:
    from datasets import Dataset
    from transformers import PreTrainedTokenizerBase

OVERLONG = ("truncate", "drop")
STAGES = ("T1", "T2")
LOSS_IMPLS = ("fused", "model")
#: The SFT hyperparameters of SERA's axolotl configs (SERA-32B / SERA-8B), for reference.
PAPER_DEFAULTS = {
    "learning_rate": 1e-5, "lr_scheduler_type": "cosine", "num_train_epochs": 3, "adam_beta1": 0.9,
    "adam_beta2": 0.95, "weight_decay": 0.01, "warmup_steps": 48, "max_length": 32768,
    "per_device_train_batch_size": 1, "gradient_accumulation_steps": "2 (32B) / 8 (8B)", "bf16": True,
    "gradient_checkpointing": True, "assistant_only_loss": True, "overlong": "drop",
}


# ---------------------------------------------------------------------------------------------
# Configuration
# ---------------------------------------------------------------------------------------------
@dataclass
class SeraSFTConfig(SFTConfig):
    """TRL's ``SFTConfig`` with SERA's SFT defaults (see :data:`PAPER_DEFAULTS`) and LoRA fields.

    Differences from ``SFTConfig``'s defaults: ``learning_rate=1e-5``, ``lr_scheduler_type="cosine"``,
    ``num_train_epochs=3``, ``adam_beta2=0.95``, ``weight_decay=0.01``, ``warmup_steps=0.03`` (a ratio;
    the paper's configs warm up for 48 steps, set per dataset: pass ``warmup_steps=48`` to copy them),
    ``max_length=32768``, ``per_device_train_batch_size=1``, ``gradient_accumulation_steps=8``,
    ``assistant_only_loss=True``, ``report_to="none"``, activation (gradient) checkpointing on, and ``bf16`` on only when a CUDA device
    supports it (TRL's default turns it on everywhere, which is slow on CPU).
    """

    output_dir: str | None = field(
        default=None, metadata={"help": "Where the trained model, its tokenizer and checkpoints go (also spelt "
                                         "--out).", "aliases": ["--out"]})
    learning_rate: float = field(default=1e-5, metadata={"help": "Peak learning rate (SERA: 1e-5)."})
    lr_scheduler_type: str = field(default="cosine", metadata={"help": "Learning-rate schedule (SERA: cosine)."})
    num_train_epochs: float = field(default=3.0, metadata={"help": "Epochs (SERA: 3)."})
    adam_beta2: float = field(default=0.95, metadata={"help": "AdamW beta2 (SERA: 0.95)."})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay (SERA: 0.01)."})
    warmup_steps: float = field(
        default=0.03, metadata={"help": "Warm-up steps (>= 1) or ratio of the run (< 1); SERA's configs: 48 steps."})
    max_length: int | None = field(
        default=32768, metadata={"help": "Longest tokenised trajectory (SERA: 32768); see `overlong`."})
    per_device_train_batch_size: int = field(default=1, metadata={"help": "Micro-batch size (SERA: 1)."})
    gradient_accumulation_steps: int = field(
        default=8, metadata={"help": "Gradient accumulation (SERA-8B: 8, SERA-32B: 2)."})
    assistant_only_loss: bool = field(
        default=True, metadata={"help": "Loss on assistant turns only (SERA: yes); tool outputs never count."})
    report_to: None | str | list[str] = field(default="none", metadata={"help": "Where the Trainer reports (none by default)."})
    bf16: bool | None = field(
        default=None, metadata={"help": "bf16 mixed precision; None: on when a CUDA device supports it."})
    activation_checkpointing: bool | None = field(
        default=None, metadata={"help": "Recompute activations in the backward pass (SERA: yes); None: on."})
    gradient_checkpointing: bool | None = field(
        default=None, metadata={"help": "Deprecated alias of activation_checkpointing (transformers 5)."})

    loss_impl: str = field(
        default="fused",
        metadata={"help": "'fused': TRL's chunked LM-head loss (never builds the full logits: the choice for long "
                          "contexts and large vocabularies); 'model': the model's own loss on full logits (about 3x "
                          "faster for tiny models on CPU).", "choices": list(LOSS_IMPLS)})
    overlong: str = field(
        default="truncate",
        metadata={"help": "Trajectories longer than max_length: 'truncate' (keep the start, TRL's default) or "
                          "'drop' (the paper's axolotl setting).", "choices": list(OVERLONG)})
    sera_stages: list[str] | None = field(
        default=None, metadata={"help": "Train only on these stages (e.g. T2); default: every row (T1 and T2)."})
    use_peft: bool = field(default=False, metadata={"help": "Train LoRA adapters (peft) instead of all weights."})
    lora_r: int = field(default=16, metadata={"help": "LoRA rank."})
    lora_alpha: int = field(default=32, metadata={"help": "LoRA alpha."})
    lora_dropout: float = field(default=0.05, metadata={"help": "LoRA dropout."})
    lora_target_modules: list[str] | None = field(
        default=None, metadata={"help": "Modules LoRA adapts; default: every linear layer except the head."})
    merge_lora: bool = field(
        default=True, metadata={"help": "Save LoRA runs merged into the base weights (a plain checkpoint)."})

    def __post_init__(self) -> None:
        self._check()
        use_cpu_when_launched_without_gpu(self)  # a 2-process launch on a CPU box is DDP over gloo, not 2 copies
        if self.activation_checkpointing is None and self.gradient_checkpointing is None:
            self.activation_checkpointing = True
        if self.bf16 is None:
            self.bf16 = bool(not self.fp16 and not self.use_cpu and _cuda_bf16())
        super().__post_init__()

    def _check(self) -> None:
        """The fields a user sets most, checked before any work (TrainingArguments checks few of them)."""
        name = "SeraSFTConfig"
        check_choice(name, "loss_impl", self.loss_impl, LOSS_IMPLS)
        check_choice(name, "overlong", self.overlong, OVERLONG)
        from transformers.trainer_utils import SchedulerType

        check_choice(name, "lr_scheduler_type", getattr(self.lr_scheduler_type, "value", self.lr_scheduler_type),
                     [kind.value for kind in SchedulerType])
        check_finite(name, "learning_rate", self.learning_rate, positive=True)
        check_finite(name, "num_train_epochs", self.num_train_epochs, positive=True)
        check_finite(name, "warmup_steps", self.warmup_steps, non_negative=True)
        check_finite(name, "weight_decay", self.weight_decay, non_negative=True)
        for beta in ("adam_beta1", "adam_beta2"):
            check_finite(name, beta, getattr(self, beta), low=0, high=1, high_open=True)
        if self.max_steps != -1:  # -1: TrainingArguments' "run num_train_epochs"
            check_int(name, "max_steps", self.max_steps)
            if self.max_steps < 1:
                raise input_error(name, "max_steps", "an int >= 1, or -1 to run num_train_epochs", self.max_steps)
        for count in ("per_device_train_batch_size", "gradient_accumulation_steps"):
            check_int(name, count, getattr(self, count), low=1)
        if self.max_length is not None:
            check_int(name, "max_length", self.max_length, low=1)
        elif self.overlong == "drop":
            raise input_error(name, "max_length", "a length with overlong='drop' (the length above which "
                              "trajectories are dropped)", None)
        if self.sera_stages is not None:
            for stage in self.sera_stages:
                check_choice(name, "sera_stages", stage, STAGES)
        check_int(name, "lora_r", self.lora_r, low=1)
        check_finite(name, "lora_alpha", self.lora_alpha, positive=True)
        check_finite(name, "lora_dropout", self.lora_dropout, low=0, high=1, high_open=True)

    def get_peft_config(self):
        """The ``peft.LoraConfig`` for ``use_peft=True`` runs, else None (as ``trl.get_peft_config(ModelConfig)``)."""
        if not self.use_peft:
            return None
        from peft import LoraConfig

        return LoraConfig(r=self.lora_r, lora_alpha=self.lora_alpha, lora_dropout=self.lora_dropout,
                          target_modules=self.lora_target_modules or "all-linear", task_type="CAUSAL_LM")


def _cuda_bf16() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


# ---------------------------------------------------------------------------------------------
# Data: trajectories -> chat-template messages -> datasets.Dataset
# ---------------------------------------------------------------------------------------------

class SeraSFTTrainer(SFTTrainer):
    """TRL's ``SFTTrainer``; with ``loss_impl="model"`` the loss is the model's own (full logits), else TRL's."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if getattr(self.args, "loss_impl", "fused") == "model":
            from transformers import Trainer

            # Labels already hold IGNORE_INDEX outside assistant turns; the model shifts them itself.
            return Trainer.compute_loss(self, model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        return super().compute_loss(model, inputs, return_outputs=return_outputs, num_items_in_batch=num_items_in_batch)


def prepare_sft_dataset(train: Any, tokenizer: PreTrainedTokenizerBase, config: SeraSFTConfig
                        ) -> tuple[Dataset, int]:
    """``(dataset, dropped)``: ``train`` (any :func:`load_trajectories` source) as the conversational dataset
    ``SFTTrainer`` takes, after the checks that need a tokenizer but no model, so bad data or a bad length fails
    before a model loads: the tokenizer has a chat template, ``overlong="drop"`` removes (and counts) the
    trajectories over ``max_length``, and at least one trajectory has an assistant token within ``max_length``."""
    if not isinstance(config, SeraSFTConfig):
        raise InputTypeError("prepare_sft_dataset", "config", "a SeraSFTConfig", described(type(config).__name__))
    train = train if _is_sft_dataset(train) else trajectories_to_dataset(train, stages=config.sera_stages)
    template = training_chat_template(tokenizer)
    dropped = 0
    if config.overlong == "drop":
        train, dropped = _drop_overlong(train, tokenizer, config.max_length)
        if len(train) == 0:
            raise input_error("prepare_sft_dataset", "config.max_length", "a length that keeps some trajectory with "
                              "overlong='drop' (raise max_length or use overlong='truncate')",
                              described(f"max_length={config.max_length}: every trajectory is longer"))
    elif config.max_length is not None:
        # Usually the first row answers; TRL drops rows without an assistant token within max_length.
        if not any(any(label != IGNORE_INDEX for label in tokenize_trajectory(
                tokenizer, row["messages"], row["tools"], chat_template=template, max_length=config.max_length)["labels"])
                for row in train):
            raise input_error("prepare_sft_dataset", "config.max_length", "room for an assistant token after the "
                              "system prompt, tool schemas and task (raise max_length)",
                              described(f"max_length={config.max_length}: no trajectory has one"))
    return train, dropped


def build_sft_trainer(model: Any, tokenizer: PreTrainedTokenizerBase, train: Any, config: SeraSFTConfig, *,
                      eval_dataset: Any = None, callbacks: list | None = None, peft_config: Any = None
                      ) -> SeraSFTTrainer:
    """TRL's ``SFTTrainer`` set up with SERA's recipe on ``train`` (any :func:`load_trajectories` source).

    ``peft_config`` (a peft config, as ``SFTTrainer`` takes it) overrides the LoRA fields of ``config``
    (``use_peft``, ``lora_r``, ... as TRL's ``ModelConfig`` names them).

    The trainer's ``sera_dropped_overlong`` attribute counts trajectories removed by ``overlong="drop"``.
    """
    train, dropped = prepare_sft_dataset(train, tokenizer, config)
    return _sft_trainer(model, tokenizer, train, dropped, config, eval_dataset=eval_dataset, callbacks=callbacks,
                        peft_config=peft_config)


def _sft_trainer(model, tokenizer, train, dropped, config, *, eval_dataset=None, callbacks=None, peft_config=None):
    if eval_dataset is not None and not _is_sft_dataset(eval_dataset):
        eval_dataset = trajectories_to_dataset(eval_dataset)
    trainer = SeraSFTTrainer(model=model, args=config, train_dataset=train, eval_dataset=eval_dataset,
                             processing_class=tokenizer,
                             peft_config=peft_config if peft_config is not None else config.get_peft_config(),
                             callbacks=callbacks)
    left_out = len(train) - len(trainer.train_dataset)
    if left_out:
        logger.warning("%d of %d trajectories have no assistant token within max_length=%s and train on nothing; "
                       "they are left out (raise max_length, or use overlong='drop')", left_out, len(train),
                       config.max_length)
    trainer.sera_dropped_overlong = dropped
    return trainer


def _is_sft_dataset(data: Any) -> bool:
    return hasattr(data, "features") and "messages" in data.features and type(data.features["messages"]).__name__ \
        == "List" and type(data.features["messages"].feature).__name__ == "Json"


@dataclass
class SeraTrainOutput:
    """What :func:`train_sera` returns: the saved folder, the run's log history and counts."""

    output_dir: Path
    log_history: list[dict]
    n_trajectories: int
    dropped_overlong: int
    global_step: int
    train_loss: float

    def to_dict(self) -> dict[str, Any]:
        return {"output_dir": str(self.output_dir), "n_trajectories": self.n_trajectories,
                "dropped_overlong": self.dropped_overlong, "global_step": self.global_step,
                "train_loss": self.train_loss, "log_history": self.log_history}


def train_sera(data: Any, model: Any, output_dir: str | os.PathLike, *, config: SeraSFTConfig | None = None,
               tokenizer: PreTrainedTokenizerBase | None = None, save: bool = True, peft_config: Any = None,
               **overrides: Any) -> SeraTrainOutput:
    """Fine-tune ``model`` (a path, hub id or loaded model) on SERA trajectories and save it to ``output_dir``.

    ``config`` defaults to ``SeraSFTConfig(output_dir=output_dir, **overrides)``. The data, the tokenizer and
    ``max_length`` are checked (:func:`prepare_sft_dataset`) before the model loads. The result is saved with
    ``save_pretrained`` (LoRA adapters merged unless ``merge_lora=False``) next to the tokenizer with
    its original chat template, so ``from_pretrained(output_dir)`` and ``transformers serve`` load it.
    """
    if config is None:
        config = SeraSFTConfig(output_dir=str(output_dir), **overrides)
    elif overrides:
        raise TypeError(f"train_sera: overrides: expected either config or keyword overrides, got both "
                        f"(config and {sorted(overrides)})")
    elif not isinstance(config, SeraSFTConfig):
        raise InputTypeError("train_sera", "config", "a SeraSFTConfig", described(type(config).__name__))
    if not isinstance(output_dir, (str, os.PathLike)):
        raise InputTypeError("train_sera", "output_dir", "a folder path", described(type(output_dir).__name__))
    try:
        dataset = trajectories_to_dataset(data, stages=config.sera_stages)  # bad data fails before anything loads
    except InputError as exc:
        if exc.expected is None:
            raise
        inner = exc.argument or ""
        raise InputError("train_sera", "data" if inner in ("", "source", "rows") else f"data: {inner}", exc.expected,
                         exc.got) from None
    if isinstance(model, (str, os.PathLike)):
        if tokenizer is None:
            tokenizer = load_tokenizer(model, function="train_sera")
    elif not hasattr(model, "forward"):
        raise InputTypeError("train_sera", "model", "a model path, a hub id or a loaded model",
                             described(type(model).__name__))
    elif tokenizer is None:
        raise input_error("train_sera", "tokenizer", "a tokenizer with a loaded model", None)
    dataset, dropped = prepare_sft_dataset(dataset, tokenizer, config)
    return _train(dataset, dropped, model, tokenizer, Path(output_dir), config, save=save, peft_config=peft_config)


def _train(dataset, dropped: int, model: Any, tokenizer, output_dir: Path, config: SeraSFTConfig, *, save: bool = True,
           peft_config: Any = None) -> SeraTrainOutput:
    """Load the model (when a path), train on the prepared ``dataset`` and save: the checks are done."""
    if isinstance(model, (str, os.PathLike)):
        from transformers import AutoModelForCausalLM

        model = AutoModelForCausalLM.from_pretrained(model, dtype="auto")
    trainer = _sft_trainer(model, tokenizer, dataset, dropped, config, peft_config=peft_config)
    logger.info("SERA SFT: %d trajectories (%d dropped as over max_length=%s)", len(trainer.train_dataset), dropped,
                config.max_length)
    result = trainer.train()
    trained = trainer.model
    if (config.use_peft or peft_config is not None) and config.merge_lora:
        trained = trained.merge_and_unload()
    if save and trainer.is_world_process_zero():  # one copy under accelerate launch / torchrun
        output_dir.mkdir(parents=True, exist_ok=True)
        trained.save_pretrained(output_dir)
        tokenizer.save_pretrained(output_dir)
    trainer.accelerator.wait_for_everyone()  # the folder is complete on every rank's return
    loss = float(result.training_loss) if result.training_loss is not None else math.nan
    # Trainer's training_loss adds this process's last un-logged steps: the mean over processes is the run's
    loss = mean_across_processes({"train_loss": loss})["train_loss"]
    return SeraTrainOutput(output_dir=output_dir, log_history=list(trainer.state.log_history),
                           n_trajectories=len(trainer.train_dataset), dropped_overlong=trainer.sera_dropped_overlong,
                           global_step=trainer.state.global_step, train_loss=loss)


def load_tokenizer(model: str | os.PathLike, *, function: str = "load_tokenizer") -> PreTrainedTokenizerBase:
    """The tokenizer of ``model`` (a folder or a hub id), loaded before the model so that a wrong path fails fast.

    A path-like name that does not exist (``./m``, ``/m``, ``~/m`` or one holding more than one ``/``) is refused
    without a hub lookup; one that does not load raises :class:`~icml26.errors.InputError` naming ``model``.
    """
    from transformers import AutoTokenizer

    text = os.fspath(model)
    local = Path(text).expanduser()
    if not local.exists() and (text.startswith((".", "/", "~")) or text.count("/") > 1 or os.sep != "/" and os.sep in text):
        raise input_error(function, "model", "a model folder or a hub id", described(f"{text!r}: no such folder"))
    try:
        return AutoTokenizer.from_pretrained(str(local) if local.exists() else text)
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise input_error(function, "model", "a model folder or a hub id whose tokenizer loads",
                          described(f"{text!r} ({first[:200]})")) from None
