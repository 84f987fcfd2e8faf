"""SAISA inside ordinary HF code: Auto classes, remote code, the processor, checkpointing, Trainer, peft.

The tiny Llama of :mod:`icml26.tiny` (vocab 1024, hidden 64, 2 layers) wrapped with the built-in patch
encoder (8x8 grey images, 2x2 patches: 16 visual tokens per image).
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    AutoProcessor,
    Trainer,
    TrainingArguments,
)

from icml26.errors import InputError
from icml26.models.saisa import SaisaForConditionalGeneration, SaisaImageProcessor, SaisaProcessor
from icml26.tiny import load_tiny_model
from icml26.training.saisa import SaisaDataCollator
from icml26.utils import IGNORE_INDEX

N_V = 16


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _images(n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.random((1, 8, 8), dtype=np.float32) for _ in range(n)]


def _build(architecture="saisa", seed=0):
    lm, tok = load_tiny_model("llama")
    processor = SaisaProcessor(SaisaImageProcessor(image_size=8), tok, patch_size=2)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = SaisaForConditionalGeneration.from_text_model(lm, architecture=architecture,
                                                              image_token_id=processor.image_token_id)
    return model.eval(), processor


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """A saved SAISA model + processor folder, and the inputs / logits of the in-memory model."""
    model, processor = _build()
    folder = tmp_path_factory.mktemp("saisa_ckpt")
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    inputs = processor(text=["look <image> which digit", "<image> is it bright"], images=_images(2),
                       return_tensors="pt", padding=True)
    with torch.no_grad():
        logits = model(**inputs).logits
    return folder, inputs, logits


def test_processor_expands_each_image_token_to_the_models_slots():
    model, processor = _build()
    processor.check_model(model)  # same image id, same slot count
    tok = processor.tokenizer
    assert "<image>" in tok.get_vocab() and tok.convert_tokens_to_ids("<image>") == processor.image_token_id
    assert tok("a<image>b", add_special_tokens=False)["input_ids"].count(processor.image_token_id) == 1  # never split
    inputs = processor(text=["one <image> two <image> end", "<image> x"], images=_images(3), return_tensors="pt",
                       padding=True)
    counts = (inputs["input_ids"] == processor.image_token_id).sum(1).tolist()
    assert counts == [2 * N_V, N_V]
    assert inputs["pixel_values"].shape == (3, 1, 8, 8)
    row = inputs["input_ids"][0].tolist()
    first = row.index(processor.image_token_id)
    assert row[first:first + N_V] == [processor.image_token_id] * N_V  # consecutive slots
    assert tok.decode([i for i in row if i != processor.image_token_id]).split() == ["one", "two", "end"]
    out = model(**inputs)
    assert out.logits.shape[:2] == inputs["input_ids"].shape
    with pytest.raises(InputError, match=r"SaisaProcessor: images: expected one image per <image> in the text \(2"):
        processor(text="<image> <image>", images=_images(1))
    uint8 = (np.arange(64, dtype=np.uint8).reshape(8, 8, 1) * 4)  # HWC, integer pixels: rescaled to [0, 1]
    pixels = processor.image_processor(uint8, return_tensors="pt")["pixel_values"]
    assert pixels.shape == (1, 1, 8, 8) and float(pixels.max()) == pytest.approx(252 / 255)
    with pytest.raises(InputError, match="SaisaImageProcessor.preprocess: images: expected images with 1 channel"):
        processor.image_processor(np.zeros((3, 5, 8, 8), dtype=np.float32))  # 5 channels: nothing to convert


def test_processor_with_a_cls_token_and_default_strategy_counts_like_llava():
    _, tok = load_tiny_model("llama")
    processor = SaisaProcessor(SaisaImageProcessor(image_size=8), tok, patch_size=2, num_additional_image_tokens=1,
                               vision_feature_select_strategy="default")
    assert processor.num_image_tokens(8, 8) == 16  # 16 patches + CLS - the dropped CLS
    assert SaisaProcessor(SaisaImageProcessor(), tok, patch_size=4).num_image_tokens(8, 8) == 4


def test_auto_classes_load_the_saved_folder_with_auto_map(saved):
    folder, inputs, logits = saved
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "saisa"
    assert set(config["auto_map"]) == {"AutoConfig", "AutoModel", "AutoModelForImageTextToText",
                                       "AutoModelForCausalLM"}
    assert "from icml26.models.saisa.modeling import" in (folder / "modeling.py").read_text()
    assert type(AutoConfig.from_pretrained(folder)).__name__ == "SaisaConfig"
    for auto in (AutoModel, AutoModelForImageTextToText, AutoModelForCausalLM):
        model = auto.from_pretrained(folder)
        assert isinstance(model, SaisaForConditionalGeneration), auto
        with torch.no_grad():
            torch.testing.assert_close(model(**inputs).logits, logits, atol=1e-5, rtol=1e-5)
    processor = AutoProcessor.from_pretrained(folder)
    assert isinstance(processor, SaisaProcessor) and isinstance(processor.image_processor, SaisaImageProcessor)
    again = processor(text=["look <image> which digit", "<image> is it bright"], images=_images(2),
                      return_tensors="pt", padding=True)
    assert torch.equal(again["input_ids"], inputs["input_ids"])
    assert torch.equal(again["pixel_values"], inputs["pixel_values"])


def test_trust_remote_code_loads_without_importing_icml26(saved):
    folder, inputs, logits = saved
    torch.save(dict(inputs), folder / "inputs.pt")
    script = f"""
import sys, torch
from transformers import AutoModelForImageTextToText, AutoModel, AutoProcessor
folder = {str(folder)!r}
assert not any(m.startswith("icml26") for m in sys.modules)
try:
    AutoModel.from_pretrained(folder)
except (ValueError, EOFError) as e:  # refused (non-interactive: the [y/N] prompt reads no answer)
    pass
else:
    raise SystemExit("loaded without trust_remote_code")
model = AutoModelForImageTextToText.from_pretrained(folder, trust_remote_code=True)
processor = AutoProcessor.from_pretrained(folder, trust_remote_code=True)
inputs = torch.load(folder + "/inputs.pt")
with torch.no_grad():
    logits = model(**inputs).logits
torch.save(logits, folder + "/remote_logits.pt")
print(type(model).__module__, type(processor).__name__)
"""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
                          cwd=folder, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["icml26.models.saisa.modeling", "SaisaProcessor"], done.stdout
    torch.testing.assert_close(torch.load(folder / "remote_logits.pt"), logits, atol=1e-5, rtol=1e-5)


def _batch(processor, n=4, seed=0):
    texts = [f"look <image> which digit {w}" for w in ("one", "two", "three", "four")[:n]]
    inputs = processor(text=texts, images=_images(n, seed), return_tensors="pt", padding=True)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, IGNORE_INDEX)
    return {**inputs, "labels": labels}


@pytest.mark.parametrize("architecture", ["saisa", "naevit_llava", "llava"])
def test_gradient_checkpointing_gives_the_same_gradients(architecture):
    model, processor = _build(architecture)
    batch = _batch(processor)
    model.train()
    calls = []
    hook = model.language_model.model.layers[0].self_attn.k_proj.register_forward_hook(lambda *a: calls.append(1))

    def grads():
        model.zero_grad()
        calls.clear()
        model(**batch).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, len(calls)

    plain, plain_calls = grads()
    model.activation_checkpointing_enable()
    assert model.is_activation_checkpointing
    checkpointed, checkpointed_calls = grads()
    hook.remove()
    assert checkpointed_calls == 2 * plain_calls  # the layer really ran again in backward
    assert plain.keys() == checkpointed.keys() and any(n.startswith("projectors.") for n in plain)
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], atol=1e-6, rtol=1e-5, msg=name)


def test_trainer_with_default_arguments_trains_and_evaluates_processor_data(tmp_path):
    datasets = pytest.importorskip("datasets")
    model, processor = _build()
    rows = [{k: v[i].tolist() for k, v in _batch(processor, seed=s).items()} for s in range(4) for i in range(4)]
    data = datasets.Dataset.from_list(rows).with_format("torch")
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=4, per_device_train_batch_size=4,
                             per_device_eval_batch_size=4, learning_rate=1e-3, report_to=[], save_strategy="no",
                             use_cpu=True, disable_tqdm=True)  # everything else at its default
    trainer = Trainer(model=model, args=args, train_dataset=data, eval_dataset=data)
    before = trainer.evaluate()["eval_loss"]
    trainer.train()
    metrics = trainer.evaluate()
    assert metrics["eval_loss"] < before
    predictions = trainer.predict(data).predictions  # logits only: the cache is ignored at inference
    assert predictions.shape == (16, rows[0]["input_ids"].__len__(), model.config.text_config.vocab_size)


def test_trainer_defaults_with_raw_examples_say_to_keep_the_columns(tmp_path):
    model, processor = _build()
    collator = SaisaDataCollator(processor.tokenizer, processor.image_token_id, model.n_visual)
    raw = [{"image": img, "prefix": "look", "prompt": "which digit", "answer": "one"} for img in _images(4)]
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=1, per_device_train_batch_size=2, report_to=[],
                             save_strategy="no", use_cpu=True)
    trainer = Trainer(model=model, args=args, train_dataset=raw, data_collator=collator)
    with pytest.raises(KeyError, match=r"remove_unused_columns=False"):
        trainer.train()
    args.remove_unused_columns = False
    trainer = Trainer(model=model, args=args, train_dataset=raw, data_collator=collator)
    assert trainer.train().training_loss > 0


def test_peft_lora_with_the_projectors_in_modules_to_save_round_trips(tmp_path):
    peft = pytest.importorskip("peft")
    model, processor = _build()
    base = tmp_path / "base"
    model.save_pretrained(base)
    processor.save_pretrained(base)
    model = AutoModelForImageTextToText.from_pretrained(base)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], modules_to_save=["projectors"],
                             task_type="CAUSAL_LM")
    peft_model = peft.get_peft_model(model, config)
    trainable = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert any("projectors.modules_to_save" in n for n in trainable) and any("lora_A" in n for n in trainable)
    batch = _batch(processor)
    frozen = {n: p.detach().clone() for n, p in peft_model.named_parameters() if "original_module" in n}
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    peft_model.train()
    for _ in range(2):
        optimizer.zero_grad()
        peft_model(**batch).loss.backward()
        optimizer.step()
    peft_model.eval()
    params = dict(peft_model.named_parameters())
    assert all(torch.equal(params[n], v) for n, v in frozen.items())  # the base projectors are untouched
    trained = peft_model.base_model.model.projectors.modules_to_save["default"]
    original = peft_model.base_model.model.projectors.original_module
    assert not torch.equal(trained[1].linear_1.weight, original[1].linear_1.weight)  # the copy is what trained
    with torch.no_grad():
        logits = peft_model(**batch).logits
    adapter = tmp_path / "adapter"
    peft_model.save_pretrained(adapter)
    loaded = peft.AutoPeftModelForCausalLM.from_pretrained(adapter)
    assert isinstance(loaded.get_base_model(), SaisaForConditionalGeneration)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, logits, atol=1e-5, rtol=1e-5)
    merged = loaded.merge_and_unload()
    with torch.no_grad():
        torch.testing.assert_close(merged(**batch).logits, logits, atol=1e-4, rtol=1e-4)


def test_auto_peft_model_without_a_task_type_loads_with_icml26_allowed(tmp_path):
    """peft's generic ``AutoPeftModel`` imports the base class the adapter names (``icml26.models.saisa.modeling``):
    peft refuses it until ``icml26`` is in ``import_allowlist``."""
    peft = pytest.importorskip("peft")
    model, processor = _build()
    model.save_pretrained(tmp_path / "base")
    model = AutoModelForImageTextToText.from_pretrained(tmp_path / "base")
    peft_model = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj"],
                                                            modules_to_save=["projectors"]))
    peft_model.save_pretrained(tmp_path / "adapter")
    with pytest.raises(ValueError, match="import_allowlist"):
        peft.AutoPeftModel.from_pretrained(tmp_path / "adapter")
    loaded = peft.AutoPeftModel.from_pretrained(tmp_path / "adapter", import_allowlist=["transformers", "icml26"])
    assert isinstance(loaded.get_base_model(), SaisaForConditionalGeneration)
    batch = _batch(processor)
    with torch.no_grad():
        torch.testing.assert_close(loaded(**batch).logits, peft_model(**batch).logits, atol=1e-5, rtol=1e-5)
