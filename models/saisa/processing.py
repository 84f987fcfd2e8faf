"""Images and text to SAISA inputs: :class:`SaisaImageProcessor` and :class:`SaisaProcessor`.

:class:`SaisaProcessor` follows transformers' ``LlavaProcessor`` (``models/llava/processing_llava.py``,
transformers 5.24): a ``ProcessorMixin`` holding an image processor and a tokenizer, whose image
token (``"<image>"``, added to the tokenizer as a special token when missing) is expanded to one
slot per visual token, ``(height // patch_size) * (width // patch_size)`` (+ extra tokens such as
a CLS, - 1 for ``vision_feature_select_strategy="default"``). Build the model with
``image_token_id=processor.image_token_id`` so the model fills the slots the processor wrote.

Images may come one per call, as a list, as a list of lists (one list per sample, as
``apply_chat_template`` and the ``"image-text-to-text"`` pipeline pass them), as a 4-D batch, or as
paths of local image files; grey, RGB and RGBA images are converted to the channels the vision
tower takes (``SaisaImageProcessor.num_channels``).

The processor ships a chat template (:func:`chat_template_for`): content parts ``{"type": "image"}``
become the image token, ``{"type": "text"}`` parts their text, and the language model's own
template (the tokenizer's) formats the turns; ``save_pretrained`` writes it as ``chat_template.jinja``.

Example::

    processor = SaisaProcessor(SaisaImageProcessor(image_size=8), tokenizer, patch_size=2)
    inputs = processor(text="look <image> which digit?", images=image, return_tensors="pt")
    model(**inputs)
    messages = [{"role": "user", "content": [{"type": "image", "image": image}, {"type": "text", "text": "which digit?"}]}]
    inputs = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, return_dict=True,
                                           return_tensors="pt")
    model.generate(**inputs, max_new_tokens=4)
    processor.save_pretrained(folder)   # AutoProcessor.from_pretrained(folder) loads it back
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AddedToken, AutoImageProcessor, AutoProcessor, ProcessorMixin
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature
from transformers.image_utils import is_pil_image, load_image

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.models.saisa.modeling import SaisaConfig, write_remote_code_entry
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["SaisaImageProcessor", "SaisaProcessor", "chat_template_for"]

#: ``torch.nn.functional.interpolate`` modes for 2-D images.
RESAMPLE_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "area")
#: Channel counts converted to the model's: grey (1), grey + alpha (2), RGB (3), RGBA (4).
CONVERTIBLE_CHANNELS = (1, 2, 3, 4)
# ITU-R 601-2 luma, the weights of PIL's "L" conversion, so arrays and PIL images turn grey alike.
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)
_IMAGES_EXPECTED = ("images (PIL images, numpy arrays or torch tensors; HW, CHW or HWC), lists of them "
                    "(one list per sample), 4-D batches, or paths of image files")


# ---------------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------------
def _load_path(path: str, function: str) -> Any:
    """A local image file as a PIL image in its own mode (alpha kept, so it is composited on white later)."""
    if path.startswith(("http://", "https://", "data:image/")):
        return load_image(path)  # transformers' loader: remote or inline images, converted to RGB
    if not os.path.isfile(path):
        raise input_error(function, "images", "an image or the path of an existing image file", path)
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(path) as opened:
            image = ImageOps.exif_transpose(opened)
            image.load()
    except (UnidentifiedImageError, OSError) as exc:
        raise input_error(function, "images", "the path of an image file PIL can read",
                          described(f"{path!r} ({exc})")) from None
    return image


def _flatten(images: Any, function: str) -> list[Any]:
    """One flat list of single images, in order, from any of the accepted layouts.

    As transformers' ``make_flat_list_of_images`` (``image_utils.py``), and also for HW arrays and
    paths, which it does not take: nested lists and tuples are flattened, 4-D arrays and tensors
    are batches, strings and ``os.PathLike`` are paths of image files.
    """
    if isinstance(images, (list, tuple)):
        return [image for item in images for image in _flatten(item, function)]
    if isinstance(images, (str, os.PathLike)):
        return [_load_path(os.fspath(images), function)]
    if is_pil_image(images):
        return [images]
    if isinstance(images, (np.ndarray, torch.Tensor)):
        if images.ndim == 4:
            return list(images)
        if images.ndim in (2, 3):
            return [images]
        raise input_error(function, "images", "images of 2 (HW) or 3 (CHW, HWC) dimensions, or a 4-D batch",
                          describe(images))
    raise InputTypeError(function, "images", _IMAGES_EXPECTED, described(type(images).__name__))


def _pil_to_array(image: Any, num_channels: int) -> np.ndarray:
    """A PIL image as an HWC array: a mode with ``num_channels`` bands as it is, 16/32-bit grey with its
    values, anything else through RGB (alpha composited onto white) and, for one channel, PIL's ``"L"``."""
    from PIL import Image

    if image.mode in ("I", "I;16", "I;16B", "I;16L", "F"):
        return np.asarray(image)[..., None]
    if image.mode in ("L", "LA", "RGB", "RGBA") and len(image.getbands()) == num_channels:
        array = np.asarray(image)
        return array[..., None] if array.ndim == 2 else array
    if "A" in image.getbands() or image.info.get("transparency") is not None:
        rgba = image.convert("RGBA")
        image = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255, 255)), rgba)
    if num_channels == 1:
        return np.asarray(image.convert("L"))[..., None]
    return np.asarray(image.convert("RGB"))


def _channels_first(array: np.ndarray, num_channels: int) -> np.ndarray:
    """HW, CHW or HWC -> CHW. The channel axis is the one of length ``num_channels`` (the first when
    both are), else the one of length 1 to 4 (as transformers' ``infer_channel_dimension_format``)."""
    if array.ndim == 2:
        return array[None]
    first, last = array.shape[0], array.shape[-1]
    if first == num_channels:
        return array
    if last == num_channels:
        return np.moveaxis(array, -1, 0)
    if first in CONVERTIBLE_CHANNELS:
        return array
    if last in CONVERTIBLE_CHANNELS:
        return np.moveaxis(array, -1, 0)
    return array  # refused by the caller, which names the channel count it expected


def _convert_channels(array: np.ndarray, num_channels: int, function: str) -> np.ndarray:
    """CHW with 1, 2, 3 or 4 channels -> CHW with ``num_channels`` (alpha composited onto white, RGB to
    grey by ITU-R 601-2 luma, grey repeated to RGB). Integer images stay integer (rounded)."""
    channels = array.shape[0]
    if channels == num_channels:
        return array
    if channels not in CONVERTIBLE_CHANNELS or num_channels not in (1, 3):
        raise input_error(function, "images",
                          f"images with {num_channels} channel(s), or grey / RGB / RGBA images to convert "
                          f"(HW, CHW or HWC)", described(f"an image of shape {tuple(array.shape)}"))
    integer = not np.issubdtype(array.dtype, np.floating)
    pixels = array.astype(np.float32)
    if channels in (2, 4):  # alpha last: composite onto white, as transformers' convert_to_rgb does
        white = 255.0 if integer else 1.0
        alpha = pixels[-1:] / white
        pixels = alpha * pixels[:-1] + (1.0 - alpha) * white
        channels -= 1
    if channels == 3 and num_channels == 1:
        pixels = np.tensordot(_LUMA, pixels, axes=1)[None]
    elif channels == 1 and num_channels == 3:
        pixels = np.repeat(pixels, 3, axis=0)
    return np.round(pixels).astype(array.dtype) if integer else pixels.astype(array.dtype)


def _as_chw(image: Any, num_channels: int, function: str = "SaisaImageProcessor") -> np.ndarray:
    """One image (PIL, array or tensor; HW, CHW or HWC) as a CHW array with ``num_channels`` channels,
    in its own dtype (integer pixels stay integer, so rescaling still knows them)."""
    if is_pil_image(image):
        array = np.moveaxis(_pil_to_array(image, num_channels), -1, 0)
    else:
        if isinstance(image, torch.Tensor):
            tensor = image.detach().cpu()
            if tensor.dtype in (torch.bfloat16, torch.float16):  # numpy has no bfloat16
                tensor = tensor.float()
            image = tensor.numpy()
        array = np.asarray(image)
        if array.dtype == np.bool_ or not (np.issubdtype(array.dtype, np.integer)
                                           or np.issubdtype(array.dtype, np.floating)):
            raise input_error(function, "images", "images of real-valued pixels (integer or float)",
                              describe(array))
        if array.ndim not in (2, 3):
            raise input_error(function, "images", f"images with {num_channels} channel(s) (HW, CHW or HWC)",
                              describe(array))
        array = _channels_first(array, num_channels)
    if array.shape[1] == 0 or array.shape[2] == 0:
        raise input_error(function, "images", "images with a positive height and width",
                          described(f"an image of shape {tuple(array.shape)}"))
    if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
        raise input_error(function, "images", "finite pixel values", described("NaN or infinite pixels"))
    return _convert_channels(array, num_channels, function)


class SaisaImageProcessor(BaseImageProcessor):
    """Turns images into ``pixel_values [N, num_channels, image_size, image_size]`` (float32).

    Images with another channel count are converted to ``num_channels``: grey images are repeated to
    RGB, RGB images turn grey by ITU-R 601-2 luma (PIL's ``"L"`` mode), and alpha (RGBA, grey +
    alpha, PIL's ``"LA"`` / ``"P"`` with transparency) is composited onto white as transformers'
    ``convert_to_rgb`` does.

    Args:
        image_size: side of the square images the vision tower takes (8 for the built-in patch encoder).
        num_channels: 1 for grey images, 3 for RGB (any positive count for images that already have it).
        do_rescale: multiply by ``rescale_factor``; ``None`` rescales integer images only (``uint8``
            pixels to [0, 1]) and leaves float images as they are.
        rescale_factor: the factor applied when rescaling (``1 / 255`` by default).
        image_mean: per-channel mean of the normalisation after rescaling (``None``: no normalisation).
        image_std: per-channel standard deviation of that normalisation (``None``: 1 for every channel).
        resample: ``torch.nn.functional.interpolate`` mode used when an image is not
            ``image_size`` x ``image_size`` (one of ``RESAMPLE_MODES``).
    """

    model_input_names = ["pixel_values"]

    def __init__(self, image_size: int = 8, num_channels: int = 1, do_rescale: bool | None = None,
                 rescale_factor: float = 1 / 255, image_mean: list[float] | None = None,
                 image_std: list[float] | None = None, resample: str = "bilinear", **kwargs):
        super().__init__(**kwargs)
        name = "SaisaImageProcessor"
        self.image_size = check_int(name, "image_size", image_size, low=1)
        self.num_channels = check_int(name, "num_channels", num_channels, low=1)
        if do_rescale is not None and not isinstance(do_rescale, bool):
            raise InputTypeError(name, "do_rescale", "True, False or None (rescale integer images only)", do_rescale)
        self.do_rescale = do_rescale
        self.rescale_factor = check_finite(name, "rescale_factor", rescale_factor, positive=True)
        self.image_mean = self._per_channel("image_mean", image_mean, positive=False)
        self.image_std = self._per_channel("image_std", image_std, positive=True)
        self.resample = check_choice(name, "resample", resample, RESAMPLE_MODES)

    def _per_channel(self, argument: str, values: Any, *, positive: bool) -> list[float] | None:
        if values is None:
            return None
        if isinstance(values, (int, float)) and not isinstance(values, bool):
            values = [values] * self.num_channels
        if not isinstance(values, (list, tuple)) or len(values) != self.num_channels:
            raise input_error("SaisaImageProcessor", argument, f"None or {self.num_channels} number(s), one per channel",
                              values)
        return [check_finite("SaisaImageProcessor", argument, v, positive=positive) for v in values]

    def fetch_images(self, image_url_or_urls: Any) -> Any:
        """Load the paths in a (nested) list of images as PIL images; everything else is returned as it is.

        ``ProcessorMixin`` calls this before processing. Unlike transformers' default, a local file keeps its
        mode (grey stays grey, alpha is composited onto white later rather than dropped), a missing file is
        an :class:`~icml26.errors.InputError`, and objects that are not images are left for
        :meth:`preprocess` to refuse by name.
        """
        if isinstance(image_url_or_urls, (list, tuple)):
            return [self.fetch_images(x) for x in image_url_or_urls]
        if isinstance(image_url_or_urls, (str, os.PathLike)):
            return _load_path(os.fspath(image_url_or_urls), "SaisaImageProcessor")
        return image_url_or_urls

    def to_channels_first(self, images: Any, function: str = "SaisaImageProcessor") -> list[np.ndarray]:
        """A flat list of CHW arrays with ``num_channels`` channels, in their own dtypes, from any accepted layout.

        Args:
            images: one image, a (nested) list of images, a 4-D batch, or paths (see :meth:`preprocess`).
            function: the caller named in error messages.
        """
        flat = _flatten(images, function)
        return [_as_chw(image, self.num_channels, function) for image in flat]

    def preprocess(self, images: Any, return_tensors: str | None = None, **kwargs) -> BatchFeature:
        """Turn one image or a batch of images into ``pixel_values``.

        Args:
            images: one image (PIL, array or tensor; HW, CHW or HWC; grey, RGB or RGBA), a list of them,
                a list of lists (one list per sample), a 4-D array holding a batch, or paths of image files.
            return_tensors: tensor type of the output (``"pt"``, ``"np"``, ...), as in transformers'
                ``BatchFeature``; ``None`` keeps numpy arrays.
            **kwargs: per-call ``image_size`` and ``do_rescale`` overrides. ``ProcessorMixin`` passes its
                merged image options: those left at ``None`` mean the processor's own; names the processor
                does not have raise an error.

        Returns:
            A ``BatchFeature`` with ``pixel_values [N, num_channels, image_size, image_size]`` (float32).
        """
        name = "SaisaImageProcessor.preprocess"
        # ProcessorMixin passes its merged image kwargs; those left at None mean "the processor's own"
        unknown = sorted(k for k, v in kwargs.items() if v is not None and not hasattr(self, k))
        if unknown:
            raise input_error(name, "kwargs", "no options beyond the processor's own", unknown)
        options = {k: v for k, v in kwargs.items() if v is not None and hasattr(self, k)}
        size = check_int(name, "image_size", options.get("image_size", self.image_size), low=1)
        do_rescale = options.get("do_rescale", self.do_rescale)
        arrays = self.to_channels_first(images, name)
        if not arrays:
            raise input_error(name, "images", "at least one image", described("an empty list"))
        out = []
        for array in arrays:
            rescale = do_rescale if do_rescale is not None else not np.issubdtype(array.dtype, np.floating)
            pixels = torch.as_tensor(array.astype(np.float32))
            if rescale:
                pixels = pixels * self.rescale_factor
            if tuple(pixels.shape[1:]) != (size, size):
                pixels = F.interpolate(pixels[None], size=(size, size), mode=self.resample)[0]
            if self.image_mean is not None:
                mean = torch.tensor(self.image_mean, dtype=torch.float32)[:, None, None]
                std = torch.tensor(self.image_std or [1.0] * self.num_channels, dtype=torch.float32)[:, None, None]
                pixels = (pixels - mean) / std
            out.append(pixels.numpy())
        return BatchFeature({"pixel_values": np.stack(out)}, tensor_type=return_tensors)


# ---------------------------------------------------------------------------------------------
# Chat template
# ---------------------------------------------------------------------------------------------
#: First line of every template :func:`chat_template_for` writes (it never wraps one twice).
CHAT_TEMPLATE_MARK = "{#- icml26 SAISA chat template: content parts to text, then the conversation format -#}"

# Content parts -> one string per message. A top-level `set` rebinds `messages` for the rest of the
# template, so the language model's own template, appended below, sees plain string contents.
_FLATTEN_PARTS = """
{%- set saisa = namespace(messages=[]) -%}
{%- for message in messages -%}
  {%- if message['content'] is not defined or message['content'] is none or message['content'] is string -%}
    {%- set saisa.messages = saisa.messages + [message] -%}
  {%- else -%}
    {%- set text = namespace(value='') -%}
    {%- for part in message['content'] -%}
      {%- if part['type'] == 'image' -%}
        {%- set text.value = text.value + IMAGE_TOKEN -%}
      {%- elif part['type'] == 'text' -%}
        {%- set text.value = text.value + part['text'] -%}
      {%- endif -%}
    {%- endfor -%}
    {%- set saisa.messages = saisa.messages + [dict(message, content=text.value)] -%}
  {%- endif -%}
{%- endfor -%}
{%- set messages = saisa.messages -%}
"""

#: The conversation format when the tokenizer has none: LLaVA-1.5's ``conv_vicuna_v1`` (the official SAISA
#: code is a LLaVA fork), ``"<system> USER: <image>\\nquestion ASSISTANT: answer</s>"``.
LLAVA_V1_TEMPLATE = """
{%- set system = "A chat between a curious human and an artificial intelligence assistant. The assistant gives helpful, detailed, and polite answers to the human's questions." -%}
{%- if messages and messages[0]['role'] == 'system' -%}
  {%- set system = messages[0]['content'] -%}
{%- endif -%}
{{- system + ' ' -}}
{%- for message in messages -%}
  {%- if message['role'] == 'user' -%}
    {{- 'USER: ' + message['content'] + ' ' -}}
  {%- elif message['role'] == 'assistant' -%}
    {{- 'ASSISTANT: ' -}}
    {%- generation -%}{{- message['content'] + (eos_token or '') -}}{%- endgeneration -%}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- 'ASSISTANT:' -}}
{%- endif -%}
"""


def chat_template_for(conversation_template: str | None, image_token: str = "<image>") -> str:
    """The processor's chat template: content parts to text, then ``conversation_template``.

    A message whose ``content`` is a list of parts becomes one string: ``{"type": "image"}`` parts
    (with or without the image itself) become ``image_token``, ``{"type": "text"}`` parts their
    ``text``, in order and with nothing between them, as the chat templates of transformers'
    LLaVA-family processors place their image tokens. ``conversation_template`` (the tokenizer's own
    chat template: ChatML, Llama 3, ...) then formats the turns, so a wrapped LM keeps the format it
    was trained with; ``None`` falls back to LLaVA-1.5's Vicuna v1 format (:data:`LLAVA_V1_TEMPLATE`).
    A template this function wrote already is returned unchanged.

    Args:
        conversation_template: a Jinja chat template over string contents, or ``None``.
        image_token: the processor's image placeholder.
    """
    if conversation_template is not None and not isinstance(conversation_template, str):
        raise InputTypeError("chat_template_for", "conversation_template", "a Jinja template string or None",
                             described(type(conversation_template).__name__))
    if conversation_template is not None and conversation_template.startswith(CHAT_TEMPLATE_MARK):
        return conversation_template
    flatten = _FLATTEN_PARTS.replace("IMAGE_TOKEN", json.dumps(image_token))
    body = conversation_template if conversation_template is not None else LLAVA_V1_TEMPLATE
    return CHAT_TEMPLATE_MARK + flatten + body


_CHAT = "SaisaProcessor.apply_chat_template"


def _check_messages(messages: list[dict]) -> None:
    """Normalised messages (dicts) have a ``role`` and a ``content`` that is text or a list of image / text parts."""
    if not messages:
        raise input_error(_CHAT, "conversation", "non-empty lists of messages", messages)
    for message in messages:
        if "role" not in message:
            raise input_error(_CHAT, "conversation", "messages with a 'role'", described(f"keys {sorted(message)}"))
        content = message.get("content")
        if content is None or isinstance(content, str):
            continue
        if not isinstance(content, (list, tuple)):
            raise InputTypeError(_CHAT, "conversation", "a message content that is a string or a list of parts",
                                 described(type(content).__name__))
        for part in content:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind not in ("image", "text"):  # OpenAI "image_url" parts are "image" parts by now
                raise input_error(_CHAT, "conversation",
                                  "content parts {'type': 'image', ...} or {'type': 'text', 'text': ...}", part)
            if kind == "text" and not isinstance(part.get("text"), str):
                raise input_error(_CHAT, "conversation", "a string 'text' in every text part", part)


# ---------------------------------------------------------------------------------------------
# Processor
# ---------------------------------------------------------------------------------------------
class SaisaProcessor(ProcessorMixin):
    """An image processor and a tokenizer; ``<image>`` in the text becomes one slot per visual token.

    Args:
        image_processor: a :class:`SaisaImageProcessor` (or any image processor returning ``pixel_values``).
        tokenizer: any transformers tokenizer; the image token is added to it (as a special token)
            when it is not in its vocabulary yet.
        patch_size: the vision tower's patch size (2 for the built-in patch encoder).
        vision_feature_select_strategy: as in the model config; ``"default"`` drops one (CLS) token.
        image_token: the placeholder written in the text.
        num_additional_image_tokens: tokens the vision tower adds to the patches (1 for a CLS token).
        chat_template: a Jinja chat template; ``None`` builds one with :func:`chat_template_for` from the
            tokenizer's (image content parts become ``image_token``).
    """

    def __init__(self, image_processor=None, tokenizer=None, patch_size: int = 2,
                 vision_feature_select_strategy: str = "full", image_token: str = "<image>",
                 num_additional_image_tokens: int = 0, chat_template: str | None = None, **kwargs):
        name = "SaisaProcessor"
        if tokenizer is None or image_processor is None:
            raise input_error(name, "tokenizer" if tokenizer is None else "image_processor",
                              "a tokenizer and an image processor", None)
        if not hasattr(tokenizer, "get_vocab") or not callable(tokenizer):
            raise InputTypeError(name, "tokenizer", "a transformers tokenizer", described(type(tokenizer).__name__))
        if not callable(image_processor):
            raise InputTypeError(name, "image_processor", "an image processor (SaisaImageProcessor)",
                                 described(type(image_processor).__name__))
        self.patch_size = check_int(name, "patch_size", patch_size, low=1)
        self.vision_feature_select_strategy = check_choice(name, "vision_feature_select_strategy",
                                                           vision_feature_select_strategy, ("default", "full"))
        self.num_additional_image_tokens = check_int(name, "num_additional_image_tokens",
                                                     num_additional_image_tokens, low=0)
        if not isinstance(image_token, str) or not image_token.strip():
            raise input_error(name, "image_token", "a non-empty string", image_token)
        if image_token not in tokenizer.get_vocab():
            tokenizer.add_tokens([AddedToken(image_token, special=True, normalized=False)], special_tokens=True)
        self.image_token = image_token
        self.image_token_id = tokenizer.convert_tokens_to_ids(image_token)
        if chat_template is None:
            own = getattr(tokenizer, "chat_template", None)
            if isinstance(own, dict):
                chat_template = {key: chat_template_for(value, image_token) for key, value in own.items()}
            else:
                chat_template = chat_template_for(own, image_token)
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def num_image_tokens(self, height: int, width: int) -> int:
        """Slots one ``height`` x ``width`` processed image takes (the model's ``n_visual``)."""
        n = (height // self.patch_size) * (width // self.patch_size) + self.num_additional_image_tokens
        return n - 1 if self.vision_feature_select_strategy == "default" else n

    def replace_image_token(self, image_inputs: dict, image_idx: int, **kwargs) -> str:
        height, width = np.shape(image_inputs["pixel_values"][image_idx])[-2:]
        return self.image_token * self.num_image_tokens(height, width)

    def prepare_inputs_layout(self, images=None, text=None, videos=None, audio=None, **kwargs):
        """Flatten the images (nested lists per sample, batches, paths) into single CHW images with the
        model's channels, and check there is one image per image token (per sample when the images come
        as one list per sample)."""
        name = "SaisaProcessor"
        if text is not None and not isinstance(text, str) and not (
                isinstance(text, (list, tuple)) and all(isinstance(t, str) for t in text)):
            raise InputTypeError(name, "text", "a string or a list of strings", described(type(text).__name__))
        if images is not None:
            per_sample = None
            if (isinstance(images, (list, tuple)) and isinstance(text, (list, tuple)) and len(images) == len(text)
                    and all(isinstance(group, (list, tuple)) for group in images)):
                per_sample = [len(_flatten(group, name)) for group in images]
            flat = self.image_processor.to_channels_first(images, name) if hasattr(
                self.image_processor, "to_channels_first") else images
            if text is not None:
                texts = [text] if isinstance(text, str) else list(text)
                counts = [t.count(self.image_token) for t in texts]
                if sum(counts) != len(flat):
                    raise input_error(name, "images", f"one image per {self.image_token} in the text "
                                      f"({sum(counts)} in all)", described(f"{len(flat)} image(s)"))
                if per_sample is not None and per_sample != counts:
                    raise input_error(name, "images", f"as many images per sample as its {self.image_token} tokens "
                                      f"({counts})", described(f"{per_sample} image(s) per sample"))
            images = flat if flat else None
        elif text is not None:
            texts = [text] if isinstance(text, str) else list(text)
            found = sum(t.count(self.image_token) for t in texts)
            if found:
                raise input_error(name, "images", f"one image per {self.image_token} in the text ({found} in all)",
                                  None)
        return super().prepare_inputs_layout(images=images, text=text, videos=videos, audio=audio, **kwargs)

    def apply_chat_template(self, conversation, chat_template: str | None = None, **kwargs):
        """transformers' ``ProcessorMixin.apply_chat_template``, with the conversation checked first.

        Image parts carry the image under ``"image"`` (PIL, array or tensor), ``"path"`` (a local file) or
        ``"url"``; with ``tokenize=True, return_dict=True`` the result holds ``pixel_values`` and goes to
        ``model.generate(**inputs)`` as it is.

        Args:
            conversation: a list of ``{"role", "content"}`` messages, or a list of such lists; ``content`` is
                a string or a list of ``{"type": "image", ...}`` / ``{"type": "text", "text": ...}`` parts.
            chat_template: a template (or a template name) instead of the processor's.
            **kwargs: as transformers' (``add_generation_prompt``, ``tokenize``, ``return_dict``,
                ``return_tensors``, ``processor_kwargs``, ...).
        """
        if isinstance(conversation, (str, bytes)) or not (
                (isinstance(conversation, (list, tuple)) and conversation) or hasattr(conversation, "messages")):
            raise InputTypeError(_CHAT, "conversation", "a non-empty list of messages (or a list of such lists)",
                                 described(repr(conversation) if not conversation else type(conversation).__name__))
        return super().apply_chat_template(conversation, chat_template=chat_template, **kwargs)

    def _normalize_conversations(self, conversation) -> tuple[list, bool]:
        # transformers' normalisation (message objects to dicts, batching, OpenAI image_url parts), then our checks,
        # so a wrong message reads as a wrong argument rather than as an error deep inside the template
        try:
            conversations, is_batched = super()._normalize_conversations(conversation)
        except (TypeError, AttributeError) as exc:
            raise InputTypeError(_CHAT, "conversation", "messages as dicts (or dataclasses, pydantic models) with "
                                 "'role' and 'content'", described(str(exc))) from None
        for messages in conversations:
            _check_messages(messages)
        return conversations, is_batched

    def check_model(self, model) -> None:
        """Raise if ``model`` would not fill the slots this processor writes (image token id, slot count)."""
        if model.config.image_token_id != self.image_token_id:
            raise input_error("SaisaProcessor.check_model", "model.config.image_token_id",
                              f"the processor's image token id {self.image_token_id}", model.config.image_token_id)
        size = getattr(self.image_processor, "image_size", None)
        if size is not None and self.num_image_tokens(size, size) != model.n_visual:
            raise input_error("SaisaProcessor.check_model", "patch_size",
                              f"{model.n_visual} slots per image (model.n_visual)",
                              self.num_image_tokens(size, size))
        channels = getattr(self.image_processor, "num_channels", None)
        vision_channels = getattr(model.config.vision_config, "num_channels", None)
        if channels is not None and vision_channels is not None and channels != vision_channels:
            raise input_error("SaisaProcessor.check_model", "image_processor.num_channels",
                              f"the vision tower's {vision_channels} channel(s)", channels)

    def save_pretrained(self, save_directory, *args, **kwargs):
        out = super().save_pretrained(save_directory, *args, **kwargs)
        write_remote_code_entry(save_directory, __name__, ["SaisaImageProcessor", "SaisaProcessor"])
        return out


AutoImageProcessor.register(SaisaConfig, image_processor_classes={"pil": SaisaImageProcessor,
                                                                  "torchvision": SaisaImageProcessor}, exist_ok=True)
AutoProcessor.register(SaisaConfig, SaisaProcessor, exist_ok=True)
SaisaImageProcessor.register_for_auto_class()
SaisaProcessor.register_for_auto_class()

