"""Bad input over SAISA's public API: configs, the model, ``flops``, the image processor and processor (chat
path included), the training collator, config and functions, Digits-VQA and the experiment's settings.

Each probe is one wrong value in an otherwise valid call; it must raise an ``InputError`` / ``TypeError``
naming the argument and what was expected (:mod:`tests.probes`).
"""

import dataclasses
import functools

import numpy as np
import pytest
import torch

from probes import Probe, check, ids

pytest.importorskip("datasets")

from datasets import Dataset  # noqa: E402
from transformers import GPT2Config, LlamaConfig  # noqa: E402

from icml26.eval.experiments import saisa as experiment  # noqa: E402
from icml26.eval.tasks import saisa as tasks  # noqa: E402
from icml26.models.saisa import (  # noqa: E402
    SaisaConfig,
    SaisaForConditionalGeneration,
    SaisaImageProcessor,
    SaisaPatchEncoderConfig,
    SaisaProcessor,
    flops,
)
from icml26.tiny import load_tiny_model  # noqa: E402
from icml26.training.saisa import (  # noqa: E402
    SaisaDataCollator,
    SaisaTrainingConfig,
    train_language_model,
    train_saisa,
)

TEXT = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
            num_key_value_heads=1)


@functools.cache
def _model(architecture="saisa"):
    """A one-layer Llama (vocab 64) with the built-in patch encoder: 16 slots of id 64 per 8x8 grey image."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        from transformers import LlamaForCausalLM

        lm = LlamaForCausalLM(LlamaConfig(**TEXT))
        return SaisaForConditionalGeneration.from_text_model(lm, architecture=architecture).eval()


def _ids(n_images=1):
    image = _model().config.image_token_id
    return torch.tensor([[1, 2] + [image] * 16 * n_images + [3, 4]])


def _forward(**overrides):
    kwargs = dict(input_ids=_ids(), pixel_values=torch.rand(1, 1, 8, 8))
    kwargs.update(overrides)
    return _model()(**kwargs)


@functools.cache
def _processor():
    _, tok = load_tiny_model("llama")
    return SaisaProcessor(SaisaImageProcessor(image_size=8), tok, patch_size=2)


def _grey(seed=0):
    return np.random.default_rng(seed).random((1, 8, 8), dtype=np.float32)


def _chat(*parts):
    return [{"role": "user", "content": list(parts)}]


def _tokenizer():
    return tasks.build_tokenizer()


def _collator(**overrides):
    kwargs = dict(tokenizer=_tokenizer(), image_token_id=99, n_visual=16)
    kwargs.update(overrides)
    return SaisaDataCollator(**kwargs)


def _example(**overrides):
    example = {"image": _grey(), "prefix": tasks.SYSTEM_PROMPT, "prompt": "which digit ?", "answer": "seven"}
    example.update(overrides)
    return example


def _rows(n=2):
    return Dataset.from_list([dict(_example(image=_grey(i).tolist()), task="digit") for i in range(n)])


FLOPS_CONFIG = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2}

PROBES = [
    # --- configs -------------------------------------------------------------------------------
    Probe("SaisaConfig-architecture-unknown", lambda: SaisaConfig(architecture="blip"), "architecture"),
    Probe("SaisaConfig-select_strategy-unknown", lambda: SaisaConfig(vision_feature_select_strategy="cls"),
          "vision_feature_select_strategy"),
    Probe("SaisaConfig-projector_hidden_act-unknown", lambda: SaisaConfig(projector_hidden_act="swishy"),
          "projector_hidden_act"),
    Probe("SaisaConfig-attention_backend-unknown", lambda: SaisaConfig(attention_backend="flash"),
          "attention_backend"),
    Probe("SaisaConfig-image_token_id-negative", lambda: SaisaConfig(image_token_id=-1), "image_token_id"),
    Probe("SaisaConfig-vision_feature_layer-out-of-range", lambda: SaisaConfig(vision_feature_layer=5),
          "vision_feature_layer"),
    Probe("SaisaConfig-share_projectors-string", lambda: SaisaConfig(share_projectors="yes"), "share_projectors"),
    Probe("SaisaConfig-text_config-gpt2-for-saisa", lambda: SaisaConfig(text_config=GPT2Config(n_layer=1)),
          "text_config"),
    Probe("SaisaPatchEncoderConfig-patch_size-not-a-divisor", lambda: SaisaPatchEncoderConfig(patch_size=3),
          "patch_size"),
    Probe("SaisaPatchEncoderConfig-num_channels-zero", lambda: SaisaPatchEncoderConfig(num_channels=0),
          "num_channels"),
    # --- model ---------------------------------------------------------------------------------
    Probe("from_text_model-language_model-a-name",
          lambda: SaisaForConditionalGeneration.from_text_model("meta-llama/Llama-3.2-1B"), "language_model"),
    Probe("from_text_model-vision_tower-plain-module",
          lambda: SaisaForConditionalGeneration.from_text_model(_model().language_model,
                                                                vision_tower=torch.nn.Linear(4, 4)),
          "vision_tower"),
    Probe("forward-input_ids-float", lambda: _forward(input_ids=_ids().float()), "input_ids"),
    Probe("forward-input_ids-1d", lambda: _forward(input_ids=_ids()[0]), "input_ids"),
    Probe("forward-input_ids-beyond-vocab", lambda: _forward(input_ids=_ids().masked_fill(_ids() == 1, 500)),
          "input_ids"),
    Probe("forward-pixel_values-rgb-for-grey-tower", lambda: _forward(pixel_values=torch.rand(1, 3, 8, 8)),
          "pixel_values"),
    Probe("forward-pixel_values-two-images-one-slot-group", lambda: _forward(pixel_values=torch.rand(2, 1, 8, 8)),
          "pixel_values"),
    Probe("forward-pixel_values-uint8", lambda: _forward(pixel_values=torch.zeros(1, 1, 8, 8, dtype=torch.uint8)),
          "pixel_values"),
    Probe("forward-image_features-wrong-width",
          lambda: _forward(pixel_values=None, image_features=torch.rand(1, 16, 7)), "image_features"),
    Probe("forward-labels-shorter", lambda: _forward(labels=_ids()[:, :-1]), "labels"),
    Probe("forward-attention_mask-wrong-batch", lambda: _forward(attention_mask=torch.ones(2, _ids().shape[1])),
          "attention_mask"),
    Probe("forward-logits_to_keep-negative", lambda: _forward(logits_to_keep=-1), "logits_to_keep"),
    Probe("untie_projectors-llava", lambda: _model("llava").untie_projectors(), "architecture"),
    # --- flops ---------------------------------------------------------------------------------
    Probe("flops-n_visual-negative", lambda: flops(FLOPS_CONFIG, n_visual=-1, n_text=10), "n_visual"),
    Probe("flops-n_text-float", lambda: flops(FLOPS_CONFIG, n_visual=16, n_text=2.5), "n_text"),
    Probe("flops-config-missing-hidden_size", lambda: flops({"intermediate_size": 128, "num_hidden_layers": 2}, 16, 8),
          "hidden_size"),
    Probe("flops-config-a-string", lambda: flops("llama", 16, 8), "config"),
    Probe("flops-vision_dim-zero", lambda: flops(FLOPS_CONFIG, 16, 8, vision_dim=0), "vision_dim"),
    # --- image processor -----------------------------------------------------------------------
    Probe("SaisaImageProcessor-image_size-zero", lambda: SaisaImageProcessor(image_size=0), "image_size"),
    Probe("SaisaImageProcessor-num_channels-zero", lambda: SaisaImageProcessor(num_channels=0), "num_channels"),
    Probe("SaisaImageProcessor-resample-unknown", lambda: SaisaImageProcessor(resample="lanczos"), "resample"),
    Probe("SaisaImageProcessor-image_mean-two-for-grey", lambda: SaisaImageProcessor(image_mean=[0.5, 0.5]),
          "image_mean"),
    Probe("SaisaImageProcessor-image_std-zero", lambda: SaisaImageProcessor(image_mean=[0.5], image_std=[0.0]),
          "image_std"),
    Probe("SaisaImageProcessor-rescale_factor-nan", lambda: SaisaImageProcessor(rescale_factor=float("nan")),
          "rescale_factor"),
    Probe("image_processor-five-channels", lambda: SaisaImageProcessor()(np.zeros((5, 8, 8), np.float32)), "images"),
    Probe("image_processor-not-an-image", lambda: SaisaImageProcessor()([{"pixels": [0, 1]}]), "images"),
    Probe("image_processor-missing-file", lambda: SaisaImageProcessor()("no/such/digit.png"), "images"),
    Probe("image_processor-nan-pixels", lambda: SaisaImageProcessor()(np.full((8, 8), np.nan, np.float32)), "images"),
    Probe("image_processor-empty-list", lambda: SaisaImageProcessor()([]), "images"),
    Probe("image_processor-string-pixels", lambda: SaisaImageProcessor()(np.full((8, 8), "x")), "images"),
    Probe("image_processor-zero-height", lambda: SaisaImageProcessor()(np.zeros((1, 0, 8), np.float32)), "images"),
    Probe("image_processor-1d", lambda: SaisaImageProcessor()(torch.zeros(64)), "images"),
    # --- processor -----------------------------------------------------------------------------
    Probe("SaisaProcessor-patch_size-zero", lambda: SaisaProcessor(SaisaImageProcessor(), _processor().tokenizer,
                                                                   patch_size=0), "patch_size"),
    Probe("SaisaProcessor-tokenizer-a-name", lambda: SaisaProcessor(SaisaImageProcessor(), "gpt2"), "tokenizer"),
    Probe("SaisaProcessor-select_strategy-unknown",
          lambda: SaisaProcessor(SaisaImageProcessor(), _processor().tokenizer, vision_feature_select_strategy="cls"),
          "vision_feature_select_strategy"),
    Probe("processor-two-image-tokens-one-image", lambda: _processor()(text="<image> and <image>", images=[_grey()]),
          "images"),
    Probe("processor-image-token-no-images", lambda: _processor()(text="look <image>"), "images"),
    Probe("processor-per-sample-mismatch",
          lambda: _processor()(text=["<image>", "<image> <image>"], images=[[_grey(0), _grey(1)], [_grey(2)]]),
          "images"),
    Probe("processor-text-an-int", lambda: _processor()(text=5, images=[_grey()]), "text"),
    Probe("apply_chat_template-video-part",
          lambda: _processor().apply_chat_template(_chat({"type": "video", "video": "clip.mp4"})), "conversation"),
    Probe("apply_chat_template-message-without-role",
          lambda: _processor().apply_chat_template([{"content": "hi"}]), "conversation"),
    Probe("apply_chat_template-a-string", lambda: _processor().apply_chat_template("which digit?"), "conversation"),
    Probe("apply_chat_template-image-part-without-image",
          lambda: _processor().apply_chat_template(_chat({"type": "image"}, {"type": "text", "text": "which?"}),
                                                   tokenize=True, return_dict=True), "images"),
    Probe("check_model-patch_size-mismatch",
          lambda: SaisaProcessor(SaisaImageProcessor(), _processor().tokenizer, patch_size=4).check_model(
              SaisaForConditionalGeneration.from_text_model(_model().language_model,
                                                            image_token_id=_processor().image_token_id)),
          "patch_size"),
    # --- training ------------------------------------------------------------------------------
    Probe("SaisaDataCollator-n_visual-zero", lambda: _collator(n_visual=0), "n_visual"),
    Probe("SaisaDataCollator-image_token_id-negative", lambda: _collator(image_token_id=-5), "image_token_id"),
    Probe("SaisaDataCollator-max_length-zero", lambda: _collator(max_length=0), "max_length"),
    Probe("SaisaDataCollator-image_transform-not-callable", lambda: _collator(image_transform="resize"),
          "image_transform"),
    Probe("collator-empty-batch", lambda: _collator()([]), "examples"),
    Probe("collator-missing-answer", lambda: _collator()([{k: v for k, v in _example().items() if k != "answer"}]),
          "examples"),
    Probe("collator-image-a-path-string", lambda: _collator()([_example(image="digit.png")]), "examples"),
    Probe("collator-prompt-not-a-string", lambda: _collator()([_example(prompt=7)]), "examples"),
    Probe("SaisaTrainingConfig-batch_size-zero", lambda: SaisaTrainingConfig(batch_size=0), "batch_size"),
    Probe("SaisaTrainingConfig-warmup_ratio-above-one", lambda: SaisaTrainingConfig(warmup_ratio=1.5), "warmup_ratio"),
    Probe("SaisaTrainingConfig-stage2_learning_rate-nan",
          lambda: SaisaTrainingConfig(stage2_learning_rate=float("nan")), "stage2_learning_rate"),
    Probe("SaisaTrainingConfig-lr_scheduler_type-typo", lambda: SaisaTrainingConfig(lr_scheduler_type="cosin"),
          "lr_scheduler_type"),
    Probe("SaisaTrainingConfig-lora_dropout-one", lambda: SaisaTrainingConfig(lora_dropout=1.0), "lora_dropout"),
    Probe("SaisaTrainingConfig-stage1_steps-negative", lambda: SaisaTrainingConfig(stage1_steps=-1), "stage1_steps"),
    Probe("SaisaTrainingConfig-save_strategy-unknown", lambda: SaisaTrainingConfig(save_strategy="always"),
          "save_strategy"),
    Probe("training_arguments-stage-three", lambda: SaisaTrainingConfig().training_arguments(3, "out"), "stage"),
    Probe("train_saisa-model-plain-lm", lambda: train_saisa(_model().language_model, _rows(), _rows(), _collator()),
          "model"),
    Probe("train_saisa-stage1_dataset-empty", lambda: train_saisa(_model(), [], _rows(), _collator()),
          "stage1_dataset"),
    Probe("train_saisa-config-a-dict",
          lambda: train_saisa(_model(), _rows(), _rows(), _collator(), config={"stage1_steps": 1}), "config"),
    Probe("train_saisa-collator-none", lambda: train_saisa(_model(), _rows(), _rows(), None), "collator"),
    Probe("train_language_model-text_field-missing",
          lambda: train_language_model(_model().language_model, Dataset.from_dict({"text": ["one two"]}),
                                       _tokenizer(), text_field="sentence"), "text_field"),
    # --- Digits-VQA and the experiment ---------------------------------------------------------
    Probe("split_indices-test_fraction-one", lambda: tasks.split_indices(10, test_fraction=1.0), "test_fraction"),
    Probe("split_indices-n-one", lambda: tasks.split_indices(1), "n"),
    Probe("make_vqa_dataset-split-unknown", lambda: tasks.make_vqa_dataset("dev"), "split"),
    Probe("make_vqa_dataset-tasks-unknown", lambda: tasks.make_vqa_dataset("train", ("color",)), "tasks"),
    Probe("make_vqa_dataset-digits-wrong-shape",
          lambda: tasks.make_vqa_dataset("all", digits=(np.zeros((4, 8, 8), np.float32), np.zeros(4, int))), "digits"),
    Probe("make_text_dataset-n-zero", lambda: tasks.make_text_dataset(0), "n"),
    Probe("top_is_brighter-image-4x4", lambda: tasks.top_is_brighter(np.zeros((4, 4))), "image"),
    Probe("load_digits_vqa-n_text-negative", lambda: tasks.load_digits_vqa(n_text=-1), "n_text"),
    Probe("evaluate_accuracy-batch_size-zero",
          lambda: tasks.evaluate_accuracy(_model(), _rows(), _collator(), batch_size=0), "batch_size"),
    Probe("evaluate_accuracy-task-not-in-dataset",
          lambda: tasks.evaluate_accuracy(_model(), _rows(), _collator(), task="caption"), "task"),
    Probe("evaluate_accuracy-dataset-empty",
          lambda: tasks.evaluate_accuracy(_model(), _rows().select([]), _collator()), "dataset"),
    Probe("SaisaSettings-stage2_steps-negative",
          lambda: dataclasses.replace(experiment.SETTINGS["quick"], stage2_steps=-1), "stage2_steps"),
    Probe("run_experiment-settings-a-dict", lambda: experiment.run_experiment(None, settings={"stage2_steps": 5}),
          "settings"),
]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
