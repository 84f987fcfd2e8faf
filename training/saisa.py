"""Training SAISA, LLaVA and NAEViT-LLaVA models (:mod:`icml26.models.saisa.modeling`) with HF ``Trainer``.

The paper's recipe (SAISA, arXiv 2502.02458, its experimental setup: "the same configuration as
LLaVA-1.5"; the official training code is unreleased):

- **stage 1, alignment**: LLM and vision tower frozen; only the projector learns, on captions.
  Reconstruction: for ``"saisa"`` a single *shared* projector feeds every layer
  (``config.share_projectors``), the paper's "shared MLP pre-training" as its reviewers describe it;
- **stage 2, instruction tuning**: Reconstruction: every layer's projector starts as a copy of the shared one
  (:meth:`~icml26.models.saisa.modeling.SaisaForConditionalGeneration.untie_projectors`) and learns with the
  LLM (fully, or through peft LoRA adapters); the vision tower stays frozen.

Each stage is one plain :class:`transformers.Trainer` run, so ``accelerate launch`` scales it, and
reports its optimizer steps as an :mod:`icml26.progress` phase (``stage 2  120/300``).
:class:`SaisaDataCollator` turns ``{image, prefix, prompt, answer}`` examples into model inputs;
:func:`train_language_model` is the text-only "stage 0" used when no pretrained LLM is at hand.

Example::

    collator = SaisaDataCollator(tokenizer, model.config.image_token_id, model.n_visual)
    result = train_saisa(model, captions, qa_mix, collator, SaisaTrainingConfig(), "out/")
    model, logs = result  # or result.model, result.log_history
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from icml26.errors import InputError, InputTypeError, described, input_error
from icml26.utils import IGNORE_INDEX
from icml26.validation import check_choice, check_finite, check_int

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, TrainingArguments

__all__ = [
    "PAPER_STAGE1_LR",
    "PAPER_STAGE2_LR",
    "IGNORE_INDEX",
    "SaisaDataCollator",
    "SaisaTrainingConfig",
    "SaisaTrainingOutput",
    "train_language_model",
    "train_saisa",
]

#: LLaVA-1.5's learning rates, which the paper keeps (7B scale, global batch 256 / 128).
PAPER_STAGE1_LR = 1e-3
PAPER_STAGE2_LR = 2e-5


class _MissingFieldError(InputError, KeyError):
    """A field or column the data lacks: an :class:`~icml26.errors.InputError` that ``except KeyError``
    (the error of a missing key) still catches."""

    __str__ = BaseException.__str__  # KeyError's own quotes the whole message


# ---------------------------------------------------------------------------------------------
# Collator
# ---------------------------------------------------------------------------------------------
@dataclass
class SaisaDataCollator:
    """Collate ``{image, prefix, prompt, answer}`` examples into SAISA model inputs.

    Each example becomes ``prefix tokens + n_visual image placeholders + prompt tokens + answer
    tokens (+ eos)``; ``labels`` are ``IGNORE_INDEX`` (-100) everywhere except on the answer (and eos), so the loss
    is on the answer only. Returns ``input_ids``, ``attention_mask``, ``labels`` (unless
    ``include_answer=False``, which stops after the prompt: generation inputs) and ``pixel_values``
    (the examples' images stacked, after ``image_transform`` if given).

    Args:
        tokenizer: a transformers tokenizer with a pad token; texts are encoded without special tokens.
        image_token_id: the placeholder id (``model.config.image_token_id``).
        n_visual: placeholders per image (``model.n_visual``).
        padding_side: ``"right"`` (training) or ``"left"`` (generation).
        add_eos: append ``tokenizer.eos_token_id`` after the answer (labelled).
        include_answer: put the answer (and eos) in the sequence; False for generation prompts.
        image_field: the example key of the image.
        prefix_field: the example key of the text before the image; ``None`` means no text before the
            image.
        prompt_field: the example key of the prompt.
        answer_field: the example key of the answer.
        image_transform: optional callable applied to each image before stacking (an image processor).
        max_length: refuse sequences longer than this (no silent truncation of answers).
    """

    tokenizer: Any
    image_token_id: int
    n_visual: int
    padding_side: str = "right"
    add_eos: bool = True
    include_answer: bool = True
    image_field: str = "image"
    prefix_field: str | None = "prefix"
    prompt_field: str = "prompt"
    answer_field: str = "answer"
    image_transform: Callable[[Any], Any] | None = None
    max_length: int | None = None
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        name = "SaisaDataCollator"
        check_choice(name, "padding_side", self.padding_side, ("left", "right"))
        self.n_visual = check_int(name, "n_visual", self.n_visual, low=1)
        self.image_token_id = check_int(name, "image_token_id", self.image_token_id, low=0)
        if self.max_length is not None:
            self.max_length = check_int(name, "max_length", self.max_length, low=1)
        if self.image_transform is not None and not callable(self.image_transform):
            raise InputTypeError(name, "image_transform", "None or a callable (an image processor)",
                                 described(type(self.image_transform).__name__))
        for field_name in ("image_field", "prompt_field", "answer_field", "prefix_field"):
            value = getattr(self, field_name)
            if not isinstance(value, str) and not (field_name == "prefix_field" and value is None):
                raise InputTypeError(name, field_name, "a field name (str)" + (" or None" if field_name ==
                                                                               "prefix_field" else ""),
                                     described(repr(value)))
        if not callable(self.tokenizer):
            raise InputTypeError(name, "tokenizer", "a transformers tokenizer", described(type(self.tokenizer).__name__))
        if getattr(self.tokenizer, "pad_token_id", None) is None:
            raise input_error("SaisaDataCollator", "tokenizer", "a tokenizer with a pad token (set tokenizer.pad_token)",
                              described("pad_token_id None"))
        if self.add_eos and self.include_answer and getattr(self.tokenizer, "eos_token_id", None) is None:
            raise input_error("SaisaDataCollator", "tokenizer", "a tokenizer with an eos token (add_eos=True)",
                              described("eos_token_id None"))

    def _encode(self, text: str) -> list[int]:
        ids = self._cache.get(text)
        if ids is None:
            ids = list(self.tokenizer(text, add_special_tokens=False)["input_ids"])
            if len(self._cache) < 100_000:  # templated data repeats a few strings; free text must not grow forever
                self._cache[text] = ids
        return ids

    def _field(self, example: Any, index: int, name: str) -> Any:
        if not isinstance(example, Mapping):
            raise InputTypeError("SaisaDataCollator", "examples", "examples that are mappings of fields",
                                 described(f"example {index} of type {type(example).__name__}"))
        if name not in example:
            hint = ("; a Trainer drops the fields its model's forward does not name: pass "
                    "TrainingArguments(remove_unused_columns=False) with this collator, or tokenize the data "
                    "beforehand with SaisaProcessor" if not example else "")
            raise _MissingFieldError(
                "SaisaDataCollator", "examples",
                f"the field {name!r} in every example (set the collator's *_field arguments to map yours{hint})",
                described(f"example {index} with fields {sorted(example)}"))
        value = example[name]
        if value is None:
            raise input_error("SaisaDataCollator", f"example {index}: field {name!r}", "a value", None)
        return value

    def _text(self, example: Any, index: int, name: str) -> list[int]:
        value = self._field(example, index, name)
        if not isinstance(value, str):
            raise InputTypeError("SaisaDataCollator", "examples", f"a string in field {name!r}",
                                 described(f"example {index}: {type(value).__name__} {value!r}"))
        return self._encode(value)

    def __call__(self, examples: Sequence[Mapping[str, Any]]) -> dict[str, torch.Tensor]:
        import numpy as np
        import torch

        if len(examples) == 0:
            raise input_error("SaisaDataCollator", "examples", "at least one example", described("an empty batch"))
        sequences, label_rows, images = [], [], []
        image_slots = [self.image_token_id] * self.n_visual
        eos = [self.tokenizer.eos_token_id] if self.add_eos else []
        for i, example in enumerate(examples):
            prefix = self._text(example, i, self.prefix_field) if self.prefix_field is not None else []
            prompt = self._text(example, i, self.prompt_field)
            answer = self._text(example, i, self.answer_field) + eos if self.include_answer else []
            if self.include_answer and not answer:
                raise input_error("SaisaDataCollator", f"example {i}: field {self.answer_field!r}",
                                  "text that encodes to at least one token", described("no tokens"))
            image = self._field(example, i, self.image_field)
            if self.image_transform is not None:
                image = self.image_transform(image)
            try:
                pixels = image.float() if isinstance(image, torch.Tensor) else torch.as_tensor(
                    np.asarray(image, dtype=np.float32))
            except (TypeError, ValueError):
                raise InputTypeError("SaisaDataCollator", "examples",
                                     f"an image (array, tensor, or nested lists of numbers) in field "
                                     f"{self.image_field!r}", described(f"example {i}: {type(image).__name__}")) from None
            if pixels.dim() not in (2, 3) or pixels.numel() == 0:
                raise input_error("SaisaDataCollator", "examples",
                                  f"an image of shape [H, W] or [C, H, W] in field {self.image_field!r}",
                                  described(f"example {i}: shape {tuple(pixels.shape)}"))
            images.append(pixels)
            head = prefix + image_slots + prompt
            sequences.append(head + answer)
            label_rows.append([IGNORE_INDEX] * len(head) + answer)
            if self.max_length is not None and len(sequences[-1]) > self.max_length:
                raise input_error("SaisaDataCollator", f"example {i}", f"at most max_length={self.max_length} tokens",
                                  described(f"{len(sequences[-1])} tokens"))
        shapes = {tuple(im.shape) for im in images}
        if len(shapes) > 1:
            raise input_error("SaisaDataCollator", "images", "one shape for every image of a batch", sorted(shapes))

        width = max(len(s) for s in sequences)
        pad = self.tokenizer.pad_token_id
        input_ids = torch.full((len(sequences), width), pad, dtype=torch.long)
        labels = torch.full((len(sequences), width), IGNORE_INDEX, dtype=torch.long)
        attention_mask = torch.zeros((len(sequences), width), dtype=torch.long)
        for row, (seq, lab) in enumerate(zip(sequences, label_rows)):
            span = slice(0, len(seq)) if self.padding_side == "right" else slice(width - len(seq), width)
            input_ids[row, span] = torch.tensor(seq)
            labels[row, span] = torch.tensor(lab)
            attention_mask[row, span] = 1
        batch = {"input_ids": input_ids, "attention_mask": attention_mask, "pixel_values": torch.stack(images)}
        if self.include_answer:
            batch["labels"] = labels
        return batch


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
@dataclass
class SaisaTrainingConfig:
    """Hyper-parameters of the two SAISA stages (and of the optional text-only stage 0).

    The defaults suit the tiny CPU models of the Digits-VQA experiment (a few hundred steps; a
    fresh tiny LLM wants larger rates than a pretrained 7B). :meth:`paper` gives the paper's
    (LLaVA-1.5's) 7B recipe. A ``*_steps`` of ``None`` means one epoch; ``0`` skips the stage.
    The LoRA switches of stage 2 are spelled as TRL's ``ModelConfig`` (``use_peft``, ``lora_r``,
    ``lora_alpha``, ``lora_dropout``, ``lora_target_modules``); :func:`train_saisa` also takes a
    ready ``peft_config``.
    """

    stage0_steps: int | None = 200
    stage1_steps: int | None = 200
    stage2_steps: int | None = 400
    stage0_learning_rate: float = 3e-3
    stage1_learning_rate: float = 3e-3
    stage2_learning_rate: float = 1e-3
    batch_size: int = 64
    stage1_batch_size: int | None = None  # None: batch_size
    stage2_batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    lr_scheduler_type: str = "cosine"
    warmup_ratio: float = 0.03
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    use_peft: bool = False  # stage 2: train the LLM through LoRA adapters (merged back afterwards)
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0
    lora_target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
    seed: int = 0
    logging_steps: int = 10
    disable_tqdm: bool = True
    print_logs: bool = False  # with disable_tqdm, Trainer prints every log dict unless this is False
    save_strategy: str = "no"
    use_cpu: bool | None = None  # None: when no GPU is visible
    bf16: bool = False
    dataloader_num_workers: int = 0
    extra_training_args: dict[str, Any] = field(default_factory=dict)  # any other TrainingArguments field

    def __post_init__(self) -> None:
        from transformers.trainer_utils import SaveStrategy, SchedulerType

        cls = "SaisaTrainingConfig"
        for name in ("stage0_steps", "stage1_steps", "stage2_steps"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise input_error(cls, name, "None (one epoch) or an int >= 0", value)
        for name in ("batch_size", "gradient_accumulation_steps", "logging_steps", "lora_r", "lora_alpha"):
            setattr(self, name, check_int(cls, name, getattr(self, name), low=1))
        for name in ("stage1_batch_size", "stage2_batch_size"):
            if getattr(self, name) is not None:
                setattr(self, name, check_int(cls, name, getattr(self, name), low=1))
        self.dataloader_num_workers = check_int(cls, "dataloader_num_workers", self.dataloader_num_workers, low=0)
        self.seed = check_int(cls, "seed", self.seed)
        check_finite(cls, "warmup_ratio", self.warmup_ratio, low=0, high=1, high_open=True)
        for name in ("stage0_learning_rate", "stage1_learning_rate", "stage2_learning_rate"):
            check_finite(cls, name, getattr(self, name), positive=True)
        check_finite(cls, "weight_decay", self.weight_decay, non_negative=True)
        check_finite(cls, "max_grad_norm", self.max_grad_norm, non_negative=True)
        check_finite(cls, "lora_dropout", self.lora_dropout, low=0, high=1, high_open=True)
        check_choice(cls, "lr_scheduler_type", self.lr_scheduler_type, [s.value for s in SchedulerType])
        check_choice(cls, "save_strategy", self.save_strategy, [s.value for s in SaveStrategy])
        for name in ("use_peft", "disable_tqdm", "print_logs", "bf16"):
            if not isinstance(getattr(self, name), bool):
                raise InputTypeError(cls, name, "True or False", getattr(self, name))
        if self.use_cpu is not None and not isinstance(self.use_cpu, bool):
            raise InputTypeError(cls, "use_cpu", "True, False or None (CPU when no GPU is visible)", self.use_cpu)
        if isinstance(self.lora_target_modules, str) or not all(
                isinstance(m, str) for m in self.lora_target_modules) or not self.lora_target_modules:
            raise input_error(cls, "lora_target_modules", "a non-empty list of module names",
                              self.lora_target_modules)
        self.lora_target_modules = tuple(self.lora_target_modules)
        if not isinstance(self.extra_training_args, Mapping):
            raise InputTypeError(cls, "extra_training_args", "a dict of TrainingArguments fields",
                                 described(type(self.extra_training_args).__name__))

    @classmethod
    def paper(cls, **overrides) -> SaisaTrainingConfig:
        """LLaVA-1.5's recipe as the paper states it: one epoch per stage, lr 1e-3 then 2e-5, global
        batch 256 then 128, cosine with 3% warmup, no weight decay, bf16 (set ``batch_size`` and
        ``gradient_accumulation_steps`` so their product per device count gives those batches)."""
        base = dict(stage1_steps=None, stage2_steps=None, stage1_learning_rate=PAPER_STAGE1_LR,
                    stage2_learning_rate=PAPER_STAGE2_LR, stage1_batch_size=256, stage2_batch_size=128,
                    lr_scheduler_type="cosine", warmup_ratio=0.03, weight_decay=0.0, bf16=True)
        base.update(overrides)
        return cls(**base)

    def training_arguments(self, stage: int, output_dir: str) -> TrainingArguments:
        """The ``TrainingArguments`` of stage 0, 1 or 2."""
        import torch
        from transformers import TrainingArguments

        check_choice("SaisaTrainingConfig.training_arguments", "stage", stage, (0, 1, 2))
        steps = getattr(self, f"stage{stage}_steps")
        batch = {1: self.stage1_batch_size, 2: self.stage2_batch_size}.get(stage) or self.batch_size
        use_cpu = (not torch.cuda.is_available()) if self.use_cpu is None else self.use_cpu
        kwargs = dict(
            output_dir=str(output_dir),
            max_steps=-1 if steps is None else steps,
            num_train_epochs=1,
            learning_rate=getattr(self, f"stage{stage}_learning_rate"),
            per_device_train_batch_size=batch,
            gradient_accumulation_steps=self.gradient_accumulation_steps,
            lr_scheduler_type=self.lr_scheduler_type,
            warmup_steps=self.warmup_ratio,  # a float < 1 is a fraction of the steps (transformers 5)
            weight_decay=self.weight_decay,
            max_grad_norm=self.max_grad_norm,
            seed=self.seed,
            logging_strategy="steps",
            logging_steps=self.logging_steps,
            save_strategy=self.save_strategy,
            report_to=[],
            remove_unused_columns=False,
            disable_tqdm=self.disable_tqdm,
            use_cpu=use_cpu,
            bf16=self.bf16,
            dataloader_num_workers=self.dataloader_num_workers,
            dataloader_pin_memory=not use_cpu,
        )
        kwargs.update(self.extra_training_args)
        return TrainingArguments(**kwargs)


@dataclass
class SaisaTrainingOutput:
    """What :func:`train_saisa` and :func:`train_language_model` return: the trained model and each
    stage's ``Trainer`` log history (``{"stage1": [...], "stage2": [...]}`` or ``{"stage0": [...]}``).

    It unpacks as ``model, log_history = output``; :meth:`to_dict` gives the log histories (the
    model is not data).
    """

    model: PreTrainedModel
    log_history: dict[str, list[dict[str, Any]]]

    def __iter__(self) -> Iterator[Any]:
        return iter((self.model, self.log_history))

    def to_dict(self) -> dict[str, Any]:
        return {"log_history": self.log_history}


# ---------------------------------------------------------------------------------------------
# Training
# ---------------------------------------------------------------------------------------------
def _run_stage(model, dataset, collator, config: SaisaTrainingConfig, stage: int, output_dir,
               phase_prefix: str = "") -> list[dict[str, Any]]:
    """One ``Trainer`` run, reported as phase ``f"{phase_prefix}stage {stage}"``; returns its log history."""
    from pathlib import Path

    from transformers import Trainer
    from transformers.trainer_callback import PrinterCallback

    from icml26.progress import trainer_callback

    stage_dir = Path(output_dir) / f"stage{stage}"
    stage_dir.mkdir(parents=True, exist_ok=True)
    args = config.training_arguments(stage, str(stage_dir))
    trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=collator,
                      callbacks=[trainer_callback(f"{phase_prefix}stage {stage}")])
    if args.disable_tqdm and not config.print_logs:
        trainer.remove_callback(PrinterCallback)
    trainer.train()
    return list(trainer.state.log_history)


def _check_dataset(dataset, name: str) -> None:
    if dataset is None or not hasattr(dataset, "__len__"):
        raise InputTypeError("train_saisa", name, "a dataset of examples (datasets.Dataset, a list, ...)",
                             described(type(dataset).__name__))
    if len(dataset) == 0:
        raise input_error("train_saisa", name, "examples (or set the stage's steps to 0)", described("an empty dataset"))


def _check_config(function: str, config: Any) -> SaisaTrainingConfig:
    if config is None:
        return SaisaTrainingConfig()
    if not isinstance(config, SaisaTrainingConfig):
        raise InputTypeError(function, "config", "a SaisaTrainingConfig or None", described(type(config).__name__))
    return config


def train_saisa(model, stage1_dataset, stage2_dataset, collator, config: SaisaTrainingConfig | None = None,
                output_dir: str = "saisa-training", *, peft_config=None, phase_prefix: str = "") -> SaisaTrainingOutput:
    """Two-stage training of a :class:`~icml26.models.saisa.modeling.SaisaForConditionalGeneration`.

    Stage 1 (``config.stage1_steps``, skipped when 0) trains only the projector on
    ``stage1_dataset`` with the LLM and vision tower frozen; a ``"saisa"`` model shares projector 0
    across layers for it. Stage 2 (``config.stage2_steps``, skipped when 0) unties the projectors
    (``"saisa"``: every layer's projector becomes a copy of projector 0, also when stage 1 was
    skipped) and trains them with the LLM (fully, or LoRA with ``config.use_peft``: adapters
    merged into the weights at the end) on ``stage2_dataset``. The vision tower is never trained.

    LoRA: ``config.use_peft`` builds a ``peft.LoraConfig`` from the ``lora_*`` fields with adapters
    only inside the LLM; a ``peft_config`` given here (as to TRL's trainers) is used as it is and
    implies LoRA. ``phase_prefix`` names the progress phases (``f"{phase_prefix}stage 2"``).

    Returns a :class:`SaisaTrainingOutput` (``model, logs = train_saisa(...)`` unpacks it) with
    ``{"stage1": log_history, "stage2": log_history}``; the model is modified in place (and
    returned, un-wrapped, after LoRA), left in eval mode with every parameter frozen.
    """
    config = _check_config("train_saisa", config)
    arch = getattr(getattr(model, "config", None), "architecture", None)
    if arch is None or not hasattr(model, "projectors"):
        raise InputTypeError("train_saisa", "model", "an icml26.models.saisa.SaisaForConditionalGeneration",
                             described(type(model).__name__))
    if not callable(collator):
        raise InputTypeError("train_saisa", "collator", "a data collator (SaisaDataCollator)",
                             described(type(collator).__name__))
    history: dict[str, list[dict[str, Any]]] = {"stage1": [], "stage2": []}

    def freeze_all() -> None:
        for p in model.parameters():
            p.requires_grad_(False)

    if config.stage1_steps != 0:
        _check_dataset(stage1_dataset, "stage1_dataset")
        freeze_all()
        if arch == "saisa":
            model.config.share_projectors = True
        for p in model.projectors[0].parameters():
            p.requires_grad_(True)
        model.train()
        history["stage1"] = _run_stage(model, stage1_dataset, collator, config, 1, output_dir, phase_prefix)

    if config.stage2_steps != 0:
        _check_dataset(stage2_dataset, "stage2_dataset")
        if arch == "saisa":
            model.untie_projectors()
        freeze_all()
        for p in model.projectors.parameters():
            p.requires_grad_(True)
        target = model
        use_peft = config.use_peft or peft_config is not None
        if use_peft:
            from peft import LoraConfig, get_peft_model

            if peft_config is None:
                # adapters only inside the LLM (never the projectors or the vision tower)
                pattern = r"language_model\..*\.(" + "|".join(config.lora_target_modules) + r")"
                peft_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha,
                                         lora_dropout=config.lora_dropout, target_modules=pattern, bias="none")
            target = get_peft_model(model, peft_config)
            for p in model.projectors.parameters():  # get_peft_model froze everything but the adapters
                p.requires_grad_(True)
        else:
            for p in model.language_model.parameters():
                p.requires_grad_(True)
        target.train()
        history["stage2"] = _run_stage(target, stage2_dataset, collator, config, 2, output_dir, phase_prefix)
        if use_peft:
            model = target.merge_and_unload()

    freeze_all()
    model.eval()
    return SaisaTrainingOutput(model, history)


@dataclass
class _TextCollator:
    """Tokenise ``text_field`` on the fly, append eos, and pad / label as a causal LM (stage 0)."""

    tokenizer: Any
    text_field: str = "text"

    def __call__(self, examples):
        from transformers import DataCollatorForLanguageModeling

        texts = []
        for i, example in enumerate(examples):
            if self.text_field not in example:
                raise _MissingFieldError("train_language_model", "text_field", "a field of every example",
                                         described(f"{self.text_field!r}; example {i} has {sorted(example)}"))
            texts.append(example[self.text_field])
        encoded = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        eos = self.tokenizer.eos_token_id
        rows = [{"input_ids": list(ids) + [eos]} for ids in encoded]
        return DataCollatorForLanguageModeling(self.tokenizer, mlm=False)(rows)


def train_language_model(model, text_dataset, tokenizer, config: SaisaTrainingConfig | None = None,
                         output_dir: str = "saisa-training", *, text_field: str = "text",
                         phase_prefix: str = "") -> SaisaTrainingOutput:
    """Stage 0: next-token pre-training of a causal LM on ``text_dataset[text_field]`` (eos appended).

    For when no pretrained LLM is available (offline tiny models): ``config.stage0_steps`` steps
    at ``config.stage0_learning_rate``, batch ``config.batch_size``, loss on every real token.
    Texts are tokenised batch by batch. Returns a :class:`SaisaTrainingOutput` with
    ``{"stage0": log_history}``; the model is left in eval mode.
    """
    config = _check_config("train_language_model", config)
    columns = getattr(text_dataset, "column_names", None)
    if columns is None:
        raise InputTypeError("train_language_model", "text_dataset", "a datasets.Dataset with a text column",
                             described(type(text_dataset).__name__))
    if text_field not in columns:
        raise _MissingFieldError("train_language_model", "text_field", f"a column of the dataset ({columns})",
                                 text_field)
    if len(text_dataset) == 0 and config.stage0_steps != 0:
        raise input_error("train_language_model", "text_dataset", "texts (or stage0_steps=0)",
                          described("an empty dataset"))
    if tokenizer.eos_token_id is None or tokenizer.pad_token_id is None:
        raise input_error("train_language_model", "tokenizer", "a tokenizer with an eos and a pad token",
                          described(f"eos_token_id {tokenizer.eos_token_id}, pad_token_id {tokenizer.pad_token_id}"))
    for p in model.parameters():
        p.requires_grad_(True)
    model.train()
    history = []
    if config.stage0_steps != 0:
        history = _run_stage(model, text_dataset, _TextCollator(tokenizer, text_field), config, 0, output_dir,
                             phase_prefix)
    model.eval()
    return SaisaTrainingOutput(model, {"stage0": history})
