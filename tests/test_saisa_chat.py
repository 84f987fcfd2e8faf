"""SAISA's chat path: the processor's chat template, images of any channel layout, ``apply_chat_template`` ->
``generate``, and transformers' ``"image-text-to-text"`` pipeline, for 1- and 3-channel vision towers.

The tiny Llama of :mod:`icml26.tiny` (a Qwen2.5 ChatML template) wrapped with the built-in patch encoder
(8x8 images, 2x2 patches: 16 visual tokens per image).
"""

import numpy as np
import pytest
import torch
from PIL import Image
from transformers import AutoProcessor, pipeline

from icml26.errors import InputError
from icml26.models.saisa import (
    SaisaForConditionalGeneration,
    SaisaImageProcessor,
    SaisaPatchEncoder,
    SaisaPatchEncoderConfig,
    SaisaProcessor,
)
from icml26.models.saisa.processing import CHAT_TEMPLATE_MARK, chat_template_for
from icml26.tiny import load_tiny_model

N_V = 16

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _build(channels=1, seed=0):
    lm, tok = load_tiny_model("llama")
    processor = SaisaProcessor(SaisaImageProcessor(image_size=8, num_channels=channels), tok, patch_size=2)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        tower = SaisaPatchEncoder(SaisaPatchEncoderConfig(num_channels=channels))
        model = SaisaForConditionalGeneration.from_text_model(lm, tower, image_token_id=processor.image_token_id)
    processor.check_model(model)
    return model.eval(), processor


@pytest.fixture(scope="module")
def grey():
    return _build(1)


@pytest.fixture(scope="module")
def rgb():
    return _build(3)


def _pil(mode, size=8, seed=0):
    rng = np.random.default_rng(seed)
    bands = len(Image.new(mode, (1, 1)).getbands())
    pixels = rng.integers(0, 256, size=(size, size, bands) if bands > 1 else (size, size), dtype=np.uint8)
    return Image.fromarray(pixels, mode)


def _chat(*parts, system=None):
    messages = [{"role": "system", "content": system}] if system else []
    return messages + [{"role": "user", "content": list(parts)}]


def test_chat_template_maps_image_parts_to_the_image_token_in_the_models_own_format(grey):
    _, processor = grey
    tok = processor.tokenizer
    messages = _chat({"type": "image"}, {"type": "text", "text": "which digit?"}, system="be brief")
    text = processor.apply_chat_template(messages, add_generation_prompt=True)
    plain = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "<image>which digit?"}]
    # the image part became "<image>", and the turns are the tokenizer's own (ChatML) format
    assert text == tok.apply_chat_template(plain, add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>user\n<image>which digit?<|im_end|>\n<|im_start|>assistant\n")
    # string contents render exactly as the tokenizer's template does
    assert processor.apply_chat_template(plain) == tok.apply_chat_template(plain, tokenize=False)
    # wrapping is idempotent, and a tokenizer without a template gets LLaVA-1.5's Vicuna v1 format
    assert processor.chat_template.startswith(CHAT_TEMPLATE_MARK)
    assert chat_template_for(processor.chat_template) == processor.chat_template
    tok.chat_template, own = None, tok.chat_template
    try:
        vicuna = SaisaProcessor(SaisaImageProcessor(), tok)
    finally:
        tok.chat_template = own
    text = vicuna.apply_chat_template(messages + [{"role": "assistant", "content": "seven"}])
    assert text == f"be brief USER: <image>which digit? ASSISTANT: seven{tok.eos_token}"
    assert vicuna.apply_chat_template(messages, add_generation_prompt=True).endswith("which digit? ASSISTANT:")


def _generate_from_chat(model, processor, messages):
    inputs = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                           return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=3, do_sample=False)
    assert out.shape == (1, inputs["input_ids"].shape[1] + 3) and torch.equal(out[:, :-3], inputs["input_ids"])
    return inputs


@pytest.mark.parametrize("image", [
    _pil("L"), _pil("RGB"), _pil("RGBA"), _pil("LA"), _pil("L", size=16),
    np.arange(64, dtype=np.uint8).reshape(8, 8), np.random.default_rng(0).random((8, 8, 3), dtype=np.float32),
    torch.rand(1, 8, 8), torch.rand(3, 8, 8, dtype=torch.bfloat16)],
    ids=["pil-L", "pil-RGB", "pil-RGBA", "pil-LA", "pil-L-16x16", "np-HW-uint8", "np-HWC-rgb", "pt-CHW-grey",
         "pt-CHW-rgb-bf16"])
@pytest.mark.parametrize("channels", [1, 3])
def test_apply_chat_template_then_generate_for_every_image_kind(grey, rgb, image, channels):
    model, processor = grey if channels == 1 else rgb
    inputs = _generate_from_chat(model, processor, _chat({"type": "image", "image": image},
                                                         {"type": "text", "text": "which digit?"}))
    assert inputs["pixel_values"].shape == (1, channels, 8, 8)
    assert int((inputs["input_ids"] == processor.image_token_id).sum()) == N_V


def test_images_from_local_files_keep_their_mode_and_alpha_is_composited_on_white(grey, rgb, tmp_path):
    transparent = Image.new("RGBA", (8, 8), (0, 0, 0, 0))  # fully transparent black: white after compositing
    transparent.save(tmp_path / "clear.png")
    _pil("L").save(tmp_path / "grey.png")
    for model, processor in (grey, rgb):
        messages = _chat({"type": "image", "path": str(tmp_path / "clear.png")}, {"type": "text", "text": "and"},
                         {"type": "image", "path": str(tmp_path / "grey.png")})
        inputs = _generate_from_chat(model, processor, messages)
        pixels = inputs["pixel_values"]
        assert torch.equal(pixels[0], torch.ones_like(pixels[0]))
        expected = torch.tensor(np.asarray(_pil("L")), dtype=torch.float32) / 255
        torch.testing.assert_close(pixels[1], expected.expand_as(pixels[1]))  # grey repeated to RGB, or kept


def test_channel_conversions_match_pil():
    rgb_image = _pil("RGB")
    to_grey = SaisaImageProcessor(num_channels=1)
    from_pil = to_grey(rgb_image, return_tensors="pt")["pixel_values"][0, 0]
    torch.testing.assert_close(from_pil, torch.tensor(np.asarray(rgb_image.convert("L")), dtype=torch.float32) / 255)
    # arrays use the same ITU-R 601-2 luma as PIL's "L" (PIL rounds in integer arithmetic)
    from_array = to_grey(np.asarray(rgb_image), return_tensors="pt")["pixel_values"][0, 0]
    torch.testing.assert_close(from_array, from_pil, atol=1 / 255 + 1e-6, rtol=0)
    # CHW and HWC arrays, and the same image as a tensor, agree
    chw = np.moveaxis(np.asarray(rgb_image), -1, 0)
    to_rgb = SaisaImageProcessor(num_channels=3)
    reference = to_rgb(np.asarray(rgb_image), return_tensors="pt")["pixel_values"]
    assert torch.equal(to_rgb(chw, return_tensors="pt")["pixel_values"], reference)
    assert torch.equal(to_rgb(torch.from_numpy(chw.copy()), return_tensors="pt")["pixel_values"], reference)
    assert torch.equal(to_rgb(rgb_image, return_tensors="pt")["pixel_values"], reference)
    # a float RGBA array with alpha 0 is white, with alpha 1 its colour
    rgba = np.zeros((4, 8, 8), np.float32)
    rgba[0, :4] = 1.0
    rgba[3, :, :4] = 1.0
    out = to_rgb(rgba, return_tensors="pt")["pixel_values"][0]
    assert float(out[:, 0, 0].sum()) == 1.0 and float(out[:, 7, 0].sum()) == 0.0 and bool((out[:, :, 4:] == 1).all())


def test_nested_image_lists_per_sample_equal_the_flat_list(grey):
    _, processor = grey
    images = [_pil("L", seed=s) for s in range(3)]
    texts = ["one <image> two <image>", "<image> three"]
    flat = processor(text=texts, images=images, return_tensors="pt", padding=True)
    nested = processor(text=texts, images=[images[:2], images[2:]], return_tensors="pt", padding=True)
    assert torch.equal(flat["input_ids"], nested["input_ids"])
    assert torch.equal(flat["pixel_values"], nested["pixel_values"]) and flat["pixel_values"].shape[0] == 3
    batch = processor(text=texts, images=np.stack([np.asarray(i) for i in images])[:, None], return_tensors="pt",
                      padding=True)  # one 4-D batch [3, 1, 8, 8]
    assert torch.equal(batch["pixel_values"], flat["pixel_values"])
    with pytest.raises(InputError, match=r"SaisaProcessor: images: expected as many images per sample as its "
                                         r"<image> tokens \(\[2, 1\]\), got \[1, 2\]"):
        processor(text=texts, images=[images[:1], images[1:]])


def test_batched_conversations(grey):
    model, processor = grey
    chats = [_chat({"type": "image", "image": _pil("L", seed=s)}, {"type": "text", "text": "which digit?" * (s + 1)})
             for s in range(2)]
    processor.tokenizer.padding_side = "left"
    try:
        inputs = processor.apply_chat_template(chats, add_generation_prompt=True, tokenize=True, return_dict=True,
                                               return_tensors="pt", processor_kwargs={"padding": True})
    finally:
        processor.tokenizer.padding_side = "right"
    assert inputs["pixel_values"].shape == (2, 1, 8, 8)
    assert (inputs["input_ids"] == processor.image_token_id).sum(1).tolist() == [N_V, N_V]
    out = model.generate(**inputs, max_new_tokens=2, do_sample=False)
    for row in range(2):  # each sample generates what it generates alone
        alone = processor.apply_chat_template(chats[row], add_generation_prompt=True, tokenize=True,
                                              return_dict=True, return_tensors="pt")
        single = model.generate(**alone, max_new_tokens=2, do_sample=False)
        assert out[row, -2:].tolist() == single[0, -2:].tolist()


def test_pipeline_loads_a_saved_folder_through_the_auto_classes(rgb, tmp_path):
    model, processor = rgb
    model.save_pretrained(tmp_path)
    processor.save_pretrained(tmp_path)
    assert (tmp_path / "chat_template.jinja").read_text() == processor.chat_template
    loaded = AutoProcessor.from_pretrained(tmp_path)
    assert isinstance(loaded, SaisaProcessor) and loaded.chat_template == processor.chat_template
    messages = _chat({"type": "image", "image": _pil("L")}, {"type": "text", "text": "which digit?"})
    expected = _generate_from_chat(model, processor, messages)
    with torch.no_grad():
        direct = model.generate(**expected, max_new_tokens=3, do_sample=False)[0, -3:]
    pipe = pipeline("image-text-to-text", model=str(tmp_path))
    assert isinstance(pipe.model, SaisaForConditionalGeneration) and isinstance(pipe.processor, SaisaProcessor)
    out = pipe(text=messages, max_new_tokens=3, do_sample=False, return_full_text=False)
    text = processor.tokenizer.decode(direct, skip_special_tokens=True)
    assert out[0]["generated_text"] == text
    # the objects themselves, a grey tower, and a batch of two conversations
    grey_model, grey_processor = _build(1)
    pipe = pipeline("image-text-to-text", model=grey_model, processor=grey_processor)
    out = pipe(text=[messages, _chat({"type": "image", "image": torch.rand(3, 8, 8)}, {"type": "text", "text": "hi"})],
               max_new_tokens=2)
    assert [chat[0]["generated_text"][-1]["role"] for chat in out] == ["assistant", "assistant"]


def test_message_objects_and_openai_image_url_parts(grey, tmp_path):
    """Messages as dataclasses and OpenAI-style ``image_url`` parts (here a local file) go through transformers'
    normalisation before the processor checks them."""
    import dataclasses

    @dataclasses.dataclass
    class Message:
        role: str
        content: list

    model, processor = grey
    _pil("L").save(tmp_path / "digit.png")
    url_part = {"type": "image_url", "image_url": {"url": str(tmp_path / "digit.png")}}
    as_objects = [Message("user", [url_part, {"type": "text", "text": "which digit?"}])]
    as_dicts = _chat({"type": "image", "image": _pil("L")}, {"type": "text", "text": "which digit?"})
    first = _generate_from_chat(model, processor, as_objects)
    second = _generate_from_chat(model, processor, as_dicts)
    assert torch.equal(first["input_ids"], second["input_ids"])
    assert torch.equal(first["pixel_values"], second["pixel_values"])
