"""SAISA training: the collator, Digits-VQA, ``train_saisa`` (stages 1-2, LoRA) and the experiment.

Everything runs on CPU with the tiny Llama of the experiment (or smaller) and a few steps.
"""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sklearn")
pytest.importorskip("datasets")

from icml26.errors import InputError  # noqa: E402
from icml26.eval.tasks import saisa as digits_vqa  # noqa: E402
from icml26.eval.tasks.saisa import (  # noqa: E402
    DIGIT_WORDS,
    SYSTEM_PROMPT,
    evaluate_accuracy,
    load_digits_vqa,
    load_images,
    make_text_dataset,
    make_vqa_dataset,
    split_indices,
    top_is_brighter,
)
from icml26.training.saisa import (  # noqa: E402
    SaisaDataCollator,
    SaisaTrainingConfig,
    train_language_model,
    train_saisa,
)
from icml26.utils import IGNORE_INDEX  # noqa: E402

IMAGE_ID = 99


@pytest.fixture(scope="module")
def data():
    return load_digits_vqa(n_text=200)


@pytest.fixture(scope="module")
def tokenizer(data):
    return data.tokenizer


def _example(**overrides):
    example = {"image": np.zeros((1, 8, 8), np.float32), "prefix": SYSTEM_PROMPT, "prompt": "which digit ?",
               "answer": "this is a seven"}
    example.update(overrides)
    return example


# ------------------------------------------------------------------------------------------------
# Collator
# ------------------------------------------------------------------------------------------------
def test_collator_layout_and_label_masking(tokenizer):
    collator = SaisaDataCollator(tokenizer, IMAGE_ID, n_visual=16)
    batch = collator([_example(), _example(prompt="is the top brighter than the bottom ?", answer="yes")])
    ids, labels, mask = batch["input_ids"], batch["labels"], batch["attention_mask"]
    assert batch["pixel_values"].shape == (2, 1, 8, 8) and batch["pixel_values"].dtype == torch.float32
    assert ids.shape == labels.shape == mask.shape == (2, 3 + 16 + 8 + 1 + 1)
    enc = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    eos, pad = tokenizer.eos_token_id, tokenizer.pad_token_id
    # row 0: prefix, 16 placeholders, prompt, answer, eos, then right padding
    expected = enc(SYSTEM_PROMPT) + [IMAGE_ID] * 16 + enc("which digit ?") + enc("this is a seven") + [eos]
    assert ids[0, :len(expected)].tolist() == expected
    assert (ids[0, len(expected):] == pad).all() and (mask[0, len(expected):] == 0).all()
    assert (mask[0, :len(expected)] == 1).all()
    for row in range(2):
        assert int((ids[row] == IMAGE_ID).sum()) == 16
        labelled = labels[row] != IGNORE_INDEX
        # only the answer tokens and eos carry labels, equal to the inputs there
        assert labels[row][labelled].tolist() == ids[row][labelled].tolist()
    assert labels[0][labels[0] != IGNORE_INDEX].tolist() == enc("this is a seven") + [eos]
    assert labels[1][labels[1] != IGNORE_INDEX].tolist() == enc("yes") + [eos]
    # the placeholders sit right after the 3-token prefix
    assert (ids[:, 3:19] == IMAGE_ID).all()


def test_collator_left_padding_and_prompts_only(tokenizer):
    left = SaisaDataCollator(tokenizer, IMAGE_ID, 4, padding_side="left", include_answer=False)
    batch = left([_example(prompt="which digit ?"), _example(prompt="is the top brighter than the bottom ?")])
    assert "labels" not in batch
    assert (batch["attention_mask"][:, -1] == 1).all()  # left padding: every row ends with a real token
    assert batch["attention_mask"][0].tolist()[:5] == [0] * 5
    no_eos = SaisaDataCollator(tokenizer, IMAGE_ID, 4, add_eos=False)
    labels = no_eos([_example(answer="yes")])["labels"][0]
    assert labels[labels != IGNORE_INDEX].tolist() == tokenizer("yes", add_special_tokens=False)["input_ids"]
    no_prefix = SaisaDataCollator(tokenizer, IMAGE_ID, 4, prefix_field=None)
    ids = no_prefix([{k: v for k, v in _example().items() if k != "prefix"}])["input_ids"][0]
    assert ids[:4].tolist() == [IMAGE_ID] * 4


@pytest.mark.parametrize("missing", ["image", "prefix", "prompt", "answer"])
def test_collator_names_missing_field_and_example(tokenizer, missing):
    collator = SaisaDataCollator(tokenizer, IMAGE_ID, 4)
    bad = {k: v for k, v in _example().items() if k != missing}
    with pytest.raises(KeyError, match=rf"SaisaDataCollator: examples: expected the field '{missing}' in every example.*"
                                       rf"got example 1 with fields"):  # an InputError that is also a KeyError
        collator([_example(), bad])


def test_collator_rejects_bad_input(tokenizer):
    with pytest.raises(InputError, match="SaisaDataCollator: n_visual: expected an int >= 1, got 0"):
        SaisaDataCollator(tokenizer, IMAGE_ID, 0)
    with pytest.raises(InputError, match=r"SaisaDataCollator: padding_side: expected one of \['left', 'right'\], got 'middle'"):
        SaisaDataCollator(tokenizer, IMAGE_ID, 4, padding_side="middle")
    collator = SaisaDataCollator(tokenizer, IMAGE_ID, 4, max_length=10)
    with pytest.raises(InputError, match="SaisaDataCollator: example 0: expected at most max_length=10 tokens, got"):
        collator([_example()])
    with pytest.raises(TypeError, match="SaisaDataCollator: examples: expected a string in field 'answer', got example 0: int 3"):
        SaisaDataCollator(tokenizer, IMAGE_ID, 4)([_example(answer=3)])
    with pytest.raises(InputError, match="SaisaDataCollator: images: expected one shape for every image"):
        SaisaDataCollator(tokenizer, IMAGE_ID, 4)([_example(), _example(image=np.zeros((8, 8)))])


# ------------------------------------------------------------------------------------------------
# Digits-VQA
# ------------------------------------------------------------------------------------------------
def test_tokenizer_vocabulary(tokenizer):
    assert 30 <= len(tokenizer) <= 45
    assert (tokenizer.pad_token_id, tokenizer.eos_token_id, tokenizer.unk_token_id) == (0, 1, 2)
    assert len(tokenizer(SYSTEM_PROMPT, add_special_tokens=False)["input_ids"]) == 3
    for word in DIGIT_WORDS + ("yes", "no"):
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1 and ids[0] != tokenizer.unk_token_id
    for question, _answer in digits_vqa.TASKS.values():
        assert tokenizer.unk_token_id not in tokenizer(question, add_special_tokens=False)["input_ids"]
    assert tokenizer("banana", add_special_tokens=False)["input_ids"] == [tokenizer.unk_token_id]


def test_digits_vqa_sizes_split_and_labels(data):
    images, labels = load_images()
    assert images.shape == (1797, 1, 8, 8) and images.min() == 0.0 and images.max() == 1.0
    train, test = split_indices(len(labels), labels)
    assert len(train) == 1257 and len(test) == 540 and not set(train) & set(test)
    again = split_indices(len(labels), labels)
    assert np.array_equal(again[0], train)  # a fixed split
    assert len(data.captions) == 1257 and len(data.train) == 2 * 1257 and len(data.test) == 2 * 540
    assert set(data.test["image_index"]) == set(test.tolist())
    assert set(data.train["task"]) == {"digit", "yesno"} and set(data.captions["task"]) == {"caption"}
    assert set(data.captions["image_index"]) == set(train.tolist())
    for example in data.test.select(range(0, 1080, 37)):
        image = np.asarray(example["image"], np.float32)
        i = example["image_index"]
        assert np.array_equal(image, images[i])
        assert example["prefix"] == SYSTEM_PROMPT and example["digit"] == labels[i]
        if example["task"] == "digit":
            assert example["answer"] == DIGIT_WORDS[labels[i]]
        else:
            top, bottom = image[0, :4].mean(), image[0, 4:].mean()
            assert example["answer"] == ("yes" if top > bottom else "no")
    assert data.captions[5]["answer"] == f"this is a {DIGIT_WORDS[data.captions[5]['digit']]}"
    answers = [a for a, t in zip(data.train["answer"], data.train["task"]) if t == "yesno"]
    assert 0.4 < answers.count("yes") / len(answers) < 0.7  # both answers well represented


def test_top_is_brighter():
    image = np.zeros((8, 8))
    image[:4] = 0.5
    assert top_is_brighter(image) and top_is_brighter(image[None])
    assert not top_is_brighter(image[::-1])
    assert not top_is_brighter(np.ones((8, 8)))  # a tie is "no"


def test_text_dataset_uses_the_vocabulary(tokenizer):
    text = make_text_dataset(300, seed=1)
    texts = list(text["text"])
    assert len(texts) == 300 and all(t.startswith(SYSTEM_PROMPT + " ") for t in texts)
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    assert all(tokenizer.unk_token_id not in row for row in ids)
    assert list(make_text_dataset(50, seed=1)["text"]) == texts[:50]


def test_make_vqa_dataset_rejects_unknown_task_and_split():
    with pytest.raises(InputError, match=r"make_vqa_dataset: tasks: expected a non-empty subset .*got \('color',\)"):
        make_vqa_dataset("train", ("color",))
    with pytest.raises(InputError, match="make_vqa_dataset: split: expected"):
        make_vqa_dataset("validation")


# ------------------------------------------------------------------------------------------------
# train_saisa
# ------------------------------------------------------------------------------------------------
def _tiny_model(tokenizer, arch="saisa", layers=2, seed=0):
    from transformers import LlamaConfig, LlamaForCausalLM

    from icml26.models.saisa import SaisaForConditionalGeneration

    torch.manual_seed(seed)
    config = LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=layers, num_attention_heads=4,
                         num_key_value_heads=2, vocab_size=len(tokenizer), max_position_embeddings=64,
                         tie_word_embeddings=False, initializer_range=0.2, pad_token_id=0)
    return SaisaForConditionalGeneration.from_text_model(LlamaForCausalLM(config), architecture=arch)


def _fast(**overrides):
    kwargs = dict(stage1_steps=3, stage2_steps=3, batch_size=8, logging_steps=1, stage1_learning_rate=1e-2,
                  stage2_learning_rate=1e-2)
    kwargs.update(overrides)
    return SaisaTrainingConfig(**kwargs)


def _snapshot(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_stage1_trains_only_the_shared_projector(data, tokenizer, tmp_path):
    model = _tiny_model(tokenizer)
    collator = SaisaDataCollator(tokenizer, model.config.image_token_id, model.n_visual)
    before = _snapshot(model)
    model, logs = train_saisa(model, data.captions.select(range(64)), None, collator, _fast(stage2_steps=0),
                              tmp_path)
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith("projectors.0.") for k in changed), sorted(changed)
    assert model.config.share_projectors is True  # stage 2 was skipped: still shared
    assert len([h for h in logs["stage1"] if "loss" in h]) == 3 and logs["stage2"] == []
    assert not any(p.requires_grad for p in model.parameters()) and not model.training


def test_stage2_unties_projectors_and_trains_llm(data, tokenizer, tmp_path):
    model = _tiny_model(tokenizer)
    collator = SaisaDataCollator(tokenizer, model.config.image_token_id, model.n_visual)
    vision = _snapshot(model.vision_tower)
    llm = _snapshot(model.language_model)
    model, logs = train_saisa(model, data.captions.select(range(64)), data.train.select(range(64)), collator,
                              _fast(), tmp_path)
    assert model.config.share_projectors is False
    weights = [p.linear_1.weight for p in model.projectors]
    assert len(weights) == 2 and not torch.equal(weights[0], weights[1])  # untied, then trained apart
    assert all(torch.equal(v, model.vision_tower.state_dict()[k]) for k, v in vision.items())
    assert any(not torch.equal(v, model.language_model.state_dict()[k]) for k, v in llm.items())
    losses = [h["loss"] for h in logs["stage2"] if "loss" in h]
    assert len(losses) == 3 and all(np.isfinite(losses))


def test_stage2_lora_path(data, tokenizer, tmp_path):
    pytest.importorskip("peft")
    model = _tiny_model(tokenizer, arch="llava")
    collator = SaisaDataCollator(tokenizer, model.config.image_token_id, model.n_visual)
    embed = model.language_model.get_input_embeddings().weight.detach().clone()
    q_proj = model.language_model.model.layers[0].self_attn.q_proj.weight.detach().clone()
    model, logs = train_saisa(model, data.captions.select(range(32)), data.train.select(range(32)), collator,
                              _fast(use_peft=True, stage1_steps=0), tmp_path)
    from icml26.models.saisa import SaisaForConditionalGeneration

    assert type(model) is SaisaForConditionalGeneration  # adapters merged, wrapper gone
    assert not any("lora" in name for name, _ in model.named_parameters())
    assert torch.equal(model.language_model.get_input_embeddings().weight, embed)  # not a LoRA target
    assert not torch.equal(model.language_model.model.layers[0].self_attn.q_proj.weight, q_proj)  # merged delta
    assert len([h for h in logs["stage2"] if "loss" in h]) == 3
    acc = evaluate_accuracy(model, data.test.select(range(0, 1080, 60)), collator)
    assert set(acc) == {"digit", "yesno"} and all(0.0 <= a <= 1.0 for a in acc.values())


def test_train_language_model_lowers_the_loss(data, tokenizer, tmp_path):
    model = _tiny_model(tokenizer).language_model
    result = train_language_model(model, data.text, tokenizer, _fast(stage0_steps=30, logging_steps=5,
                                                                     stage0_learning_rate=1e-2), tmp_path)
    model, history = result
    assert model is result.model and set(result.to_dict()["log_history"]) == {"stage0"}
    losses = [h["loss"] for h in history["stage0"] if "loss" in h]
    assert len(losses) == 6 and losses[-1] < losses[0]


def test_evaluate_accuracy_matches_argmax(data, tokenizer):
    model = _tiny_model(tokenizer, arch="naevit_llava").eval()
    collator = SaisaDataCollator(tokenizer, model.config.image_token_id, model.n_visual)
    subset = data.test.select(range(0, 1080, 45))
    accuracy = evaluate_accuracy(model, subset, collator, task="digit")
    assert set(accuracy) == {"digit"}
    prompts = SaisaDataCollator(tokenizer, model.config.image_token_id, model.n_visual, padding_side="left",
                                include_answer=False)
    digits = [example for example in subset if example["task"] == "digit"]
    batch = prompts(digits)
    with torch.no_grad():
        predicted = model(**batch).logits[:, -1].argmax(-1)
    truth = [tokenizer.convert_tokens_to_ids(example["answer"]) for example in digits]
    assert accuracy["digit"] == pytest.approx(float((predicted == torch.tensor(truth)).float().mean()))
    with pytest.raises(InputError, match=r"evaluate_accuracy: task: expected tasks of the dataset .*not in the dataset"):
        evaluate_accuracy(model, subset, collator, task="caption")


# ------------------------------------------------------------------------------------------------
# The experiment, shrunk
# ------------------------------------------------------------------------------------------------
def test_experiment_end_to_end_reduced(monkeypatch, tmp_path):
    import dataclasses

    from icml26.eval.experiments import saisa as experiment
    from icml26.progress import listening
    from icml26.runner import RunConfig

    small = dataclasses.replace(experiment.SETTINGS["quick"], stage0_steps=5, stage1_steps=3, stage2_steps=5,
                                batch_size=16, n_text=200, timing_batch=16, timing_warmup=1, timing_steps=5)
    phases = set()
    with listening(lambda tracker, event: phases.add((tracker.name, event, tracker.n, tracker.total))):
        result = experiment.run_experiment(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path, device="cpu"), small)
    # the stages report their steps, from the forked workers too
    assert ("seed 0: stage 0", "close", 5, 5) in phases and ("saisa, seed 0: stage 2", "close", 5, 5) in phases
    assert ("stages 1-2 (architectures x seeds)", "close", 3, 3) in phases and ("step time", "close", 6, 6) in phases
    assert len(result.claims) == 7
    flops_claim = next(c for c in result.claims if "FLOPs < LLaVA" in c.statement)
    time_claim = next(c for c in result.claims if "step time" in c.statement)
    assert flops_claim.holds, flops_claim  # claim 3's direction: SAISA is cheaper
    assert time_claim.measured < time_claim.reference, time_claim
    assert all(c.holds for c in result.claims if "analytic" in c.statement)
    assert {row["arch"] for row in result.tables["cost"]} == {"llava", "naevit_llava", "saisa"}
    assert len(result.tables["accuracy_per_seed"]) == 3
    for arch in ("llava", "naevit_llava", "saisa"):
        assert 0.0 <= result.metrics[f"{arch}/digit_acc"] <= 100.0
    assert set(result.figures) == {"loss_curves", "accuracy"}
