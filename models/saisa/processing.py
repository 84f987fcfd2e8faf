"""Images and text to SAISA inputs: :class:`SaisaImageProcessor` and :class:`SaisaProcessor`.

:class:`SaisaProcessor` follows transformers' ``LlavaProcessor`` (``models/llava/processing_llava.py``,
transformers 5.24): a ``ProcessorMixin`` holding an image processor and a tokenizer, whose image
token (``"<image>"``, added to the tokenizer as a special token when missing) is expanded to one
slot per visual token, ``(height // patch_size) * (width // patch_size)`` (+ extra tokens such as
a CLS, - 1 for ``vision_feature_select_strategy="default"``). Build the model with
``image_token_id=processor.image_token_id`` so the model fills the slots the processor wrote.

Example::

    processor = SaisaProcessor(SaisaImageProcessor(image_size=8), tokenizer, patch_size=2)
    inputs = processor(text="look <image> which digit?", images=image, return_tensors="pt")
    model(**inputs)
    processor.save_pretrained(folder)   # AutoProcessor.from_pretrained(folder) loads it back
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from transformers import AddedToken, AutoImageProcessor, AutoProcessor, ProcessorMixin
from transformers.image_processing_utils import BaseImageProcessor, BatchFeature

from icml26.errors import input_error
from icml26.models.saisa.modeling import SaisaConfig, write_remote_code_entry

__all__ = ["SaisaImageProcessor", "SaisaProcessor"]


def _as_chw(image: Any, num_channels: int) -> np.ndarray:
    """One image (PIL, array or tensor; HW, CHW or HWC) as a float32 CHW array."""
    if isinstance(image, torch.Tensor):
        image = image.detach().cpu().numpy()
    array = np.asarray(image)
    if array.ndim == 2:
        array = array[None]
    elif array.ndim == 3 and array.shape[0] != num_channels and array.shape[-1] == num_channels:
        array = np.moveaxis(array, -1, 0)  # channels last (PIL, numpy images)
    if array.ndim != 3 or array.shape[0] != num_channels:
        raise input_error("SaisaImageProcessor", "images", f"images with {num_channels} channel(s) (HW, CHW or HWC)",
                          f"an array of shape {tuple(array.shape)}")
    return array


class SaisaImageProcessor(BaseImageProcessor):
    """Turns images into ``pixel_values [N, num_channels, image_size, image_size]`` (float32).

    Args:
        image_size: side of the square images the vision tower takes (8 for the built-in patch encoder).
        num_channels: 1 for grey images, 3 for RGB.
        do_rescale: multiply by ``rescale_factor``; ``None`` rescales integer images only (``uint8``
            pixels to [0, 1]) and leaves float images as they are.
        rescale_factor: the factor applied when rescaling (``1 / 255`` by default).
        image_mean: per-channel mean of the normalisation after rescaling (``None``: no normalisation).
        image_std: per-channel standard deviation of that normalisation (``None``: 1 for every channel).
        resample: ``torch.nn.functional.interpolate`` mode used when an image is not
            ``image_size`` x ``image_size``.
    """

    model_input_names = ["pixel_values"]

    def __init__(self, image_size: int = 8, num_channels: int = 1, do_rescale: bool | None = None,
                 rescale_factor: float = 1 / 255, image_mean: list[float] | None = None,
                 image_std: list[float] | None = None, resample: str = "bilinear", **kwargs):
        super().__init__(**kwargs)
        if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
            raise input_error("SaisaImageProcessor", "image_size", "a positive int", image_size)
        self.image_size = image_size
        self.num_channels = num_channels
        self.do_rescale = do_rescale
        self.rescale_factor = rescale_factor
        self.image_mean = image_mean
        self.image_std = image_std
        self.resample = resample

    def preprocess(self, images: Any, return_tensors: str | None = None, **kwargs) -> BatchFeature:
        """Turn one image or a batch of images into ``pixel_values``.

        Args:
            images: one image (PIL, array or tensor; HW, CHW or HWC), a list or tuple of them, or a
                4-D array holding a batch.
            return_tensors: tensor type of the output (``"pt"``, ``"np"``, ...), as in transformers'
                ``BatchFeature``; ``None`` keeps numpy arrays.
            **kwargs: per-call ``image_size`` and ``do_rescale`` overrides. ``ProcessorMixin`` passes its
                merged image options: those left at ``None`` mean the processor's own; names the processor
                does not have raise an error.

        Returns:
            A ``BatchFeature`` with ``pixel_values [N, num_channels, image_size, image_size]`` (float32).
        """
        # ProcessorMixin passes its merged image kwargs; those left at None mean "the processor's own"
        unknown = sorted(k for k, v in kwargs.items() if v is not None and not hasattr(self, k))
        if unknown:
            raise input_error("SaisaImageProcessor.preprocess", "kwargs", "no options beyond the processor's own",
                              unknown)
        options = {k: v for k, v in kwargs.items() if v is not None and hasattr(self, k)}
        size = options.get("image_size", self.image_size)
        do_rescale = options.get("do_rescale", self.do_rescale)
        flat = list(images) if isinstance(images, (list, tuple)) else (
            list(images) if np.ndim(images) == 4 else [images])
        out = []
        for image in flat:
            array = _as_chw(image, self.num_channels)
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
        chat_template: a Jinja chat template (the tokenizer's by default).
    """

    def __init__(self, image_processor=None, tokenizer=None, patch_size: int = 2,
                 vision_feature_select_strategy: str = "full", image_token: str = "<image>",
                 num_additional_image_tokens: int = 0, chat_template: str | None = None, **kwargs):
        if tokenizer is None or image_processor is None:
            raise input_error("SaisaProcessor", "tokenizer" if tokenizer is None else "image_processor",
                              "a tokenizer and an image processor", None)
        if vision_feature_select_strategy not in ("default", "full"):
            raise input_error("SaisaProcessor", "vision_feature_select_strategy", "'default' or 'full'",
                              vision_feature_select_strategy)
        if image_token not in tokenizer.get_vocab():
            tokenizer.add_tokens([AddedToken(image_token, special=True, normalized=False)], special_tokens=True)
        self.patch_size = patch_size
        self.vision_feature_select_strategy = vision_feature_select_strategy
        self.num_additional_image_tokens = num_additional_image_tokens
        self.image_token = image_token
        self.image_token_id = tokenizer.convert_tokens_to_ids(image_token)
        if chat_template is None:
            chat_template = getattr(tokenizer, "chat_template", None)
        super().__init__(image_processor, tokenizer, chat_template=chat_template)

    def num_image_tokens(self, height: int, width: int) -> int:
        """Slots one ``height`` x ``width`` processed image takes (the model's ``n_visual``)."""
        n = (height // self.patch_size) * (width // self.patch_size) + self.num_additional_image_tokens
        return n - 1 if self.vision_feature_select_strategy == "default" else n

    def replace_image_token(self, image_inputs: dict, image_idx: int, **kwargs) -> str:
        height, width = np.shape(image_inputs["pixel_values"][image_idx])[-2:]
        return self.image_token * self.num_image_tokens(height, width)

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

    def save_pretrained(self, save_directory, *args, **kwargs):
        out = super().save_pretrained(save_directory, *args, **kwargs)
        write_remote_code_entry(save_directory, __name__, ["SaisaImageProcessor", "SaisaProcessor"])
        return out


AutoImageProcessor.register(SaisaConfig, image_processor_classes={"pil": SaisaImageProcessor,
                                                                  "torchvision": SaisaImageProcessor}, exist_ok=True)
AutoProcessor.register(SaisaConfig, SaisaProcessor, exist_ok=True)
SaisaImageProcessor.register_for_auto_class()
SaisaProcessor.register_for_auto_class()
