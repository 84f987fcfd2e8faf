"""SAISA: a multimodal LLM whose visual tokens are keys and values only, fed by per-layer projectors.

SAISA (Self-Attention Input Space Alignment, arXiv 2502.02458, its method section and the official code
``icip-cas/SAISA``) and its NAEViT attention ("no attention among visual tokens").

Three architectures share one class, chosen by ``SaisaConfig.architecture``:

- ``"saisa"`` (the paper): at every decoder layer ``l`` the visual slots are *overwritten* by
  ``Proj_l(F)`` (one 2-layer MLP per layer, ``F`` the vision features), pass through the layer's
  input RMSNorm and the LLM's own ``k_proj`` / ``v_proj`` with RoPE at their positions, and yield
  only keys and values. Queries, ``o_proj`` and the FFN run on text rows only: the visual work is
  skipped, not masked afterwards. Text attends with NAEViT attention (``j <= position``).
- ``"llava"``: one projector into the input embeddings, the LLM unchanged (full causal attention,
  FFN on every row): the baseline.
- ``"naevit_llava"``: the LLaVA layout (visual rows keep their residual stream and get the FFN)
  but visual rows issue no queries (the paper's pilot).

The SAISA / NAEViT layer is written here, driving the submodules of the wrapped HF decoder layer
(``input_layernorm``, ``self_attn.{q,k,v,o}_proj``, Qwen3's ``q_norm`` / ``k_norm``,
``post_attention_layernorm``, ``mlp``) and its rotary embedding: no library has a decoder layer
whose visual rows skip Q, O and the FFN. Llama, Mistral, Qwen2 and Qwen3 text configs are
supported (sliding-window attention is not applied); ``"llava"`` accepts any causal LM.

Sequence layout: ``input_ids`` hold ``n_visual`` consecutive ``image_token_id`` placeholders per
image (any number of images per sample, anywhere); their features come from ``pixel_values``
through the vision tower, or directly as ``image_features``. ``image_token_id`` only marks slots
(it is never embedded), so it may lie outside the text vocabulary: by default it is the text
vocabulary size.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForCausalLM,
    AutoModelForImageTextToText,
    GenerationMixin,
    PretrainedConfig,
    PreTrainedModel,
)
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.configuration_utils import SubConfigSpec
from transformers.modeling_outputs import BaseModelOutput, CausalLMOutputWithPast
from transformers.utils import logging

from icml26.errors import InputTypeError, describe, described, input_error
from icml26.kernels import values_checked
from icml26.kernels.naevit import BACKENDS as ATTENTION_BACKENDS
from icml26.kernels.naevit import naevit_attention
from icml26.utils import IGNORE_INDEX, atomic_write_text
from icml26.validation import check_choice, check_int

ARCHITECTURES = ("saisa", "llava", "naevit_llava")
LAYER_FAMILIES = ("llama", "mistral", "qwen2", "qwen3")  # whose decoder layers the SAISA loop drives

logger = logging.get_logger(__name__)




# ---------------------------------------------------------------------------------------------
# A small frozen patch encoder (tests, quick experiments)
# ---------------------------------------------------------------------------------------------
class SaisaPatchEncoderConfig(PretrainedConfig):
    """A fixed random patch embedding with 2-D sin-cos position codes: a CPU stand-in for CLIP.

    Reconstruction: the paper uses a frozen CLIP ViT-L/14-336; this encoder is not contextual (each
    visual token sees only its patch), which keeps tests and the quick experiment small.

    ``image_size`` x ``image_size`` images with ``num_channels`` channels are cut into
    ``patch_size`` x ``patch_size`` patches, each mapped by a seeded random linear map to
    ``hidden_size`` features, plus sin-cos codes of the patch's row and column.
    """

    model_type = "saisa_patch_encoder"
    image_size: int = 8
    patch_size: int = 2
    num_channels: int = 1
    hidden_size: int = 32
    seed: int = 0

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        name = "SaisaPatchEncoderConfig"
        for field in ("image_size", "patch_size", "num_channels", "hidden_size"):
            check_int(name, field, getattr(self, field), low=1)
        check_int(name, "seed", self.seed)
        if self.image_size % self.patch_size:
            raise input_error(name, "patch_size", f"a divisor of image_size ({self.image_size})", self.patch_size)

    @property
    def num_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2


def _sincos_2d(grid: int, dim: int) -> torch.Tensor:
    """[grid*grid, dim] codes: half the channels encode the row, half the column."""
    quarter = max(dim // 4, 1)
    freqs = 1.0 / (100.0 ** (torch.arange(quarter, dtype=torch.float32) / quarter))
    pos = torch.arange(grid, dtype=torch.float32)
    rows, cols = torch.meshgrid(pos, pos, indexing="ij")
    parts = []
    for coord in (rows.flatten(), cols.flatten()):
        angles = coord[:, None] * freqs[None]
        parts += [angles.sin(), angles.cos()]
    codes = torch.cat(parts, dim=1)
    return F.pad(codes, (0, max(dim - codes.shape[1], 0)))[:, :dim]


class SaisaPatchEncoder(PreTrainedModel):
    config_class = SaisaPatchEncoderConfig
    main_input_name = "pixel_values"

    def __init__(self, config: SaisaPatchEncoderConfig):
        super().__init__(config)
        if config.image_size % config.patch_size:
            raise input_error("SaisaPatchEncoder", "config.patch_size",
                              f"a divisor of image_size ({config.image_size})", config.patch_size)
        patch_dim = config.num_channels * config.patch_size ** 2
        self.proj = nn.Linear(patch_dim, config.hidden_size)
        grid = config.image_size // config.patch_size
        self.register_buffer("position_codes", _sincos_2d(grid, config.hidden_size), persistent=False)
        self.post_init()

    def _init_weights(self, module):
        if module is self.proj:
            gen = torch.Generator().manual_seed(self.config.seed)
            fan_in = module.weight.shape[1]
            init.copy_(module.weight, torch.randn(module.weight.shape, generator=gen) / math.sqrt(fan_in))
            init.zeros_(module.bias)
        elif module is self:
            grid = self.config.image_size // self.config.patch_size
            init.copy_(self.position_codes, _sincos_2d(grid, self.config.hidden_size))

    def forward(self, pixel_values: torch.Tensor, output_hidden_states: bool | None = None, return_dict=True,
                **kwargs) -> BaseModelOutput:
        c, size, p = self.config.num_channels, self.config.image_size, self.config.patch_size
        if pixel_values.dim() == 3 and c == 1:
            pixel_values = pixel_values[:, None]
        if pixel_values.dim() != 4 or tuple(pixel_values.shape[1:]) != (c, size, size):
            raise input_error("SaisaPatchEncoder", "pixel_values", f"shape [N, {c}, {size}, {size}]",
                              describe(pixel_values))
        n = pixel_values.shape[0]
        patches = pixel_values.reshape(n, c, size // p, p, size // p, p).permute(0, 2, 4, 1, 3, 5)
        patches = patches.reshape(n, (size // p) ** 2, c * p * p).to(self.proj.weight.dtype)
        embedded = self.proj(patches)
        features = embedded + self.position_codes.to(embedded.dtype)
        return BaseModelOutput(last_hidden_state=features, hidden_states=(embedded, features))


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
class SaisaConfig(PretrainedConfig):
    """Configuration of :class:`SaisaForConditionalGeneration`.

    Args:
        text_config: the decoder's config (Llama, Mistral, Qwen2 or Qwen3; any causal LM for
            ``"llava"``), a config object or a dict with ``model_type``.
        vision_config: any HF vision encoder config (CLIP, SigLIP...) or the built-in
            :class:`SaisaPatchEncoderConfig` (the default).
        architecture: ``"saisa"``, ``"llava"`` or ``"naevit_llava"`` (module docstring).
        image_token_id: id of the image placeholder in ``input_ids``; ``None`` means the text
            vocabulary size (a slot marker outside the vocabulary, never embedded).
        vision_feature_layer: which hidden state of the vision tower to read (-2 is LLaVA's choice
            for CLIP; -1, the last, for the built-in encoder).
        vision_feature_select_strategy: ``"default"`` drops the first (CLS) token, ``"full"`` keeps all.
        projector_hidden_act: activation between the projector's two linear maps.
        share_projectors: ``"saisa"`` only: every layer uses projector 0 (stage 1 of training;
            :meth:`SaisaForConditionalGeneration.untie_projectors` ends it).
        attention_backend: backend of :func:`icml26.kernels.naevit_attention` for ``"saisa"`` and
            ``"naevit_llava"`` (``"auto"``, ``"torch"``, ``"sdpa_split"``, ``"triton"``).
    """

    model_type = "saisa"
    keys_to_ignore_at_inference = ["cache", "past_key_values"]  # Trainer.evaluate/predict: logits only
    sub_configs_defaults = {
        "text_config": SubConfigSpec(config_class=AutoConfig, model_type="llama"),
        "vision_config": SubConfigSpec(config_class=AutoConfig, model_type="saisa_patch_encoder"),
    }
    text_config: dict | PretrainedConfig | None = None
    vision_config: dict | PretrainedConfig | None = None
    architecture: str = "saisa"
    image_token_id: int | None = None
    vision_feature_layer: int = -1
    vision_feature_select_strategy: str = "full"
    projector_hidden_act: str = "gelu"
    share_projectors: bool = False
    attention_backend: str = "auto"
    tie_word_embeddings: bool = False

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        from transformers.activations import ACT2CLS

        name = "SaisaConfig"
        check_choice(name, "architecture", self.architecture, ARCHITECTURES)
        check_choice(name, "vision_feature_select_strategy", self.vision_feature_select_strategy, ("default", "full"))
        if self.projector_hidden_act not in ACT2CLS:
            raise input_error(name, "projector_hidden_act", "an activation name of transformers' ACT2FN "
                              "('gelu', 'relu', 'silu', ...)", self.projector_hidden_act)
        check_choice(name, "attention_backend", self.attention_backend, ATTENTION_BACKENDS)
        if not isinstance(self.share_projectors, bool):
            raise InputTypeError(name, "share_projectors", "True or False", self.share_projectors)
        states = getattr(self.vision_config, "num_hidden_layers", None)
        states = 2 if isinstance(self.vision_config, SaisaPatchEncoderConfig) else (
            states + 1 if isinstance(states, int) else None)  # hidden states: the embeddings, then each layer
        check_int(name, "vision_feature_layer", self.vision_feature_layer,
                  **({"low": -states, "high": states - 1} if states else {}))
        if self.image_token_id is None:
            self.image_token_id = self.text_config.vocab_size
        check_int(name, "image_token_id", self.image_token_id, low=0)
        if self.architecture != "llava" and self.text_config.model_type not in LAYER_FAMILIES:
            # "saisa" and "naevit_llava" drive the decoder layers themselves
            raise input_error("SaisaConfig", "text_config",
                              f"a text config of type {LAYER_FAMILIES} for architecture {self.architecture!r}",
                              self.text_config.model_type)
        if not self.tie_word_embeddings and getattr(self.text_config, "tie_word_embeddings", False):
            self.tie_word_embeddings = True

    def save_pretrained(self, save_directory, *args, **kwargs):
        super().save_pretrained(save_directory, *args, **kwargs)
        write_remote_code_entry(save_directory, __name__, ["SaisaConfig", "SaisaForConditionalGeneration"])


AutoConfig.register(SaisaPatchEncoderConfig.model_type, SaisaPatchEncoderConfig, exist_ok=True)
AutoModel.register(SaisaPatchEncoderConfig, SaisaPatchEncoder, exist_ok=True)
AutoConfig.register(SaisaConfig.model_type, SaisaConfig, exist_ok=True)


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------
class SaisaProjector(nn.Module):
    """``Linear(d_v -> d) -> act -> Linear(d -> d)``, both with bias (one per layer in SAISA)."""

    def __init__(self, vision_dim: int, text_dim: int, act: str = "gelu"):
        super().__init__()
        from transformers.activations import ACT2FN

        self.linear_1 = nn.Linear(vision_dim, text_dim)
        self.act = ACT2FN[act]
        self.linear_2 = nn.Linear(text_dim, text_dim)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.linear_2(self.act(self.linear_1(features)))


class SaisaProjectors(nn.Module):
    """The model's projectors (one per decoder layer for ``"saisa"``, one for the other architectures).

    A module with a ``forward`` rather than an ``nn.ModuleList`` so that peft's
    ``modules_to_save=["projectors"]`` can wrap it (peft refuses containers without a forward); the
    model only ever calls it (``projectors(features, layer)``), never indexes it, so the wrapped copy
    is the one used. Children are named ``"0"``, ``"1"``, ... as a ``ModuleList``'s are: checkpoint
    keys stay ``projectors.<layer>.linear_1.weight``.
    """

    def __init__(self, count: int, vision_dim: int, text_dim: int, act: str = "gelu"):
        super().__init__()
        for i in range(count):
            self.add_module(str(i), SaisaProjector(vision_dim, text_dim, act))

    def __len__(self) -> int:
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, index: int | slice) -> SaisaProjector | list[SaisaProjector]:
        return list(self._modules.values())[index]

    def forward(self, features: torch.Tensor, layer: int = 0) -> torch.Tensor:
        return self._modules[str(layer)](features)


def _gather_rows(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """x [B, T, ...] rows at index [B, R] -> [B, R, ...].

    One ``index_select`` over the flattened rows: whole rows are copied, several times faster on CPU
    than ``torch.gather`` with an index expanded to every element.
    """
    b, t = x.shape[:2]
    flat = (index + t * torch.arange(b, device=index.device)[:, None]).reshape(-1)
    return x.reshape(b * t, *x.shape[2:]).index_select(0, flat).view(*index.shape, *x.shape[2:])


class _RowPlan:
    """Where the text and visual rows of a batch sit in sequence order, computed once per forward.

    ``text_idx [B, Tq]`` / ``vis_idx [B, Tv]``: each sample's text (visual) rows in order, padded
    with ``T`` (an out-of-range slot); ``text_valid`` / ``vis_valid`` mark the real entries;
    ``source [B, T]``: where each sequence row sits in ``cat([text rows, visual rows], dim=1)``.
    :meth:`interleave` writes both streams into sequence order with one copy per row.
    """

    def __init__(self, is_image: torch.Tensor):
        b, t = is_image.shape
        device = is_image.device
        order = torch.argsort(is_image.to(torch.int8), dim=1, stable=True)  # text rows first, in order
        n_vis = is_image.sum(1)
        n_text = t - n_vis
        tq, tv = (int(n_text.max()), int(n_vis.max())) if b else (0, 0)
        ar_q, ar_v = torch.arange(tq, device=device), torch.arange(tv, device=device)
        self.text_valid = ar_q[None] < n_text[:, None]
        self.text_idx = torch.where(self.text_valid, order[:, :tq], t)
        vis_order = torch.argsort((~is_image).to(torch.int8), dim=1, stable=True)  # visual rows first
        self.vis_valid = ar_v[None] < n_vis[:, None]
        self.vis_idx = torch.where(self.vis_valid, vis_order[:, :tv], t)
        source = torch.empty(b, t + 1, dtype=torch.long, device=device)  # slot t takes the padding entries
        source.scatter_(1, self.text_idx, ar_q.expand(b, tq))
        source.scatter_(1, self.vis_idx, (tq + ar_v).expand(b, tv))
        self.source = source[:, :t]
        # Flat destinations in a [B * (T + 1)] row buffer: padding entries all land in each sample's slot T.
        base = (t + 1) * torch.arange(b, device=device)[:, None]
        self._text_dest = (self.text_idx + base).reshape(-1)
        self._vis_dest = (self.vis_idx + base).reshape(-1)
        self.batch, self.length = b, t
        self.text_only = tv == 0  # no visual rows anywhere: text order is sequence order, no padding

    def interleave(self, text: torch.Tensor, visual: torch.Tensor | None) -> torch.Tensor:
        """text [B, Tq, ...] and visual [B, Tv, ...] rows -> [B, T, ...] in sequence order."""
        if visual is None or self.text_only:
            return text
        b, t = self.batch, self.length
        tail = text.shape[2:]
        out = text.new_empty(b * (t + 1), *tail)
        out.index_copy_(0, self._text_dest, text.reshape(-1, *tail))  # in place on a fresh buffer: autograd-safe
        out.index_copy_(0, self._vis_dest, visual.reshape(-1, *tail))
        return out.view(b, t + 1, *tail)[:, :t]


class SaisaPreTrainedModel(PreTrainedModel):
    config_class = SaisaConfig
    base_model_prefix = ""
    main_input_name = "input_ids"
    input_modalities = ("image", "text")
    supports_gradient_checkpointing = True  # non-reentrant by default (transformers' default kwargs)
    _supports_sdpa = True

    def save_pretrained(self, save_directory, *args, is_main_process: bool = True, **kwargs):
        if is_main_process:  # every Auto class resolves through the entry point, not only the registered one
            entry = "saisa.SaisaForConditionalGeneration"
            auto_map = getattr(self.config, "auto_map", None) or {}
            self.config.auto_map = {**auto_map, **dict.fromkeys(AUTO_MODEL_CLASSES, entry)}
        # the config's save_pretrained, called inside, writes the remote-code entry point
        super().save_pretrained(save_directory, *args, is_main_process=is_main_process, **kwargs)

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            std = getattr(self.config.text_config, "initializer_range", 0.02)
            init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)


class SaisaForConditionalGeneration(SaisaPreTrainedModel, GenerationMixin):
    """A vision tower, projector(s) and a causal LM, wired as SAISA, LLaVA or NAEViT-LLaVA.

    ``forward(input_ids, attention_mask, pixel_values | image_features, labels)`` returns a
    :class:`~transformers.modeling_outputs.CausalLMOutputWithPast`; the loss is next-token cross
    entropy on the labels that are not ``IGNORE_INDEX`` (-100; labels at visual slots, and labels whose predicting
    row is a visual slot, are ignored: visual rows produce no output in SAISA). Logits at visual
    slots are 0 for ``"saisa"`` and ``"naevit_llava"``.
    """

    def __init__(self, config: SaisaConfig, language_model: PreTrainedModel | None = None,
                 vision_tower: PreTrainedModel | None = None):
        super().__init__(config)
        self.language_model = language_model or AutoModelForCausalLM.from_config(config.text_config)
        self.vision_tower = vision_tower or AutoModel.from_config(config.vision_config)
        n_proj = config.text_config.num_hidden_layers if config.architecture == "saisa" else 1
        self.projectors = SaisaProjectors(n_proj, config.vision_config.hidden_size, config.text_config.hidden_size,
                                          config.projector_hidden_act)
        self.gradient_checkpointing = False  # set by gradient_checkpointing_enable(); the LM's layers get their own
        self.post_init()

    # -- construction ----------------------------------------------------------------------------
    @classmethod
    def from_text_model(cls, language_model: PreTrainedModel, vision_tower: PreTrainedModel | None = None, *,
                        architecture: str = "saisa", image_token_id: int | None = None,
                        **config_kwargs) -> SaisaForConditionalGeneration:
        """Wrap an existing HF causal LM (weights untouched) and vision encoder as a SAISA model.

        ``vision_tower`` defaults to the built-in patch encoder; ``config_kwargs`` go to
        :class:`SaisaConfig` (``vision_feature_layer``, ``vision_feature_select_strategy``, ...).
        Only the projectors are new (randomly initialised).
        """
        if not isinstance(language_model, PreTrainedModel):
            raise InputTypeError("SaisaForConditionalGeneration.from_text_model", "language_model",
                                 "a transformers causal LM (PreTrainedModel)", described(type(language_model).__name__))
        if vision_tower is not None and not isinstance(vision_tower, PreTrainedModel):
            raise InputTypeError("SaisaForConditionalGeneration.from_text_model", "vision_tower",
                                 "None or a transformers vision encoder (PreTrainedModel)",
                                 described(type(vision_tower).__name__))
        if vision_tower is None:
            vision_tower = SaisaPatchEncoder(SaisaPatchEncoderConfig())
        # A parent config sets its attention implementation on its sub-configs (None by default), and these
        # are the wrapped models' own configs: keep theirs, or the LM loses its causal mask.
        config_kwargs.setdefault("attn_implementation", {
            "text_config": language_model.config._attn_implementation,
            "vision_config": getattr(vision_tower.config, "_attn_implementation", None)})
        config = SaisaConfig(text_config=language_model.config, vision_config=vision_tower.config,
                             architecture=architecture, image_token_id=image_token_id, **config_kwargs)
        model = cls(config, language_model=language_model, vision_tower=vision_tower)
        return model.to(device=language_model.device, dtype=language_model.dtype)

    def untie_projectors(self) -> None:
        """End stage 1: copy the shared projector into every layer's projector and stop sharing."""
        if self.config.architecture != "saisa":
            raise input_error("untie_projectors", "architecture", "'saisa' (the one with per-layer projectors)",
                              self.config.architecture)
        state = self.projectors[0].state_dict()
        for projector in self.projectors[1:]:
            projector.load_state_dict(state)
        self.config.share_projectors = False

    def get_input_embeddings(self):
        """The wrapped language model's input embeddings."""
        return self.language_model.get_input_embeddings()

    def set_input_embeddings(self, value):
        """Set the wrapped language model's input embeddings to ``value``."""
        self.language_model.set_input_embeddings(value)

    def get_output_embeddings(self):
        """The wrapped language model's output embeddings (its LM head)."""
        return self.language_model.get_output_embeddings()

    @property
    def n_visual(self) -> int:
        """Visual tokens per image produced by the vision tower (after feature selection)."""
        vc = self.config.vision_config
        if isinstance(vc, SaisaPatchEncoderConfig):
            n = vc.num_patches
        else:
            n = (vc.image_size // vc.patch_size) ** 2 + 1  # ViT-style encoders emit a CLS token
        return n - 1 if self.config.vision_feature_select_strategy == "default" else n

    # -- vision -----------------------------------------------------------------------------------
    def get_image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Vision features ``[n_images, n_visual, d_v]`` (before any projector)."""
        out = self.vision_tower(pixel_values, output_hidden_states=True, return_dict=True)
        features = out.hidden_states[self.config.vision_feature_layer]
        if self.config.vision_feature_select_strategy == "default":
            features = features[:, 1:]
        return features

    def _visual_features(self, is_image, pixel_values, image_features) -> torch.Tensor | None:
        n_slots = int(is_image.sum())
        if n_slots == 0:  # text only (e.g. decode steps): any images given have no slot to fill
            return None
        if image_features is None and pixel_values is None:
            raise input_error("SaisaForConditionalGeneration", "pixel_values",
                              f"pixel_values or image_features for the {n_slots} image placeholder(s) "
                              f"(id {self.config.image_token_id}) in input_ids", None)
        argument = "image_features" if image_features is not None else "pixel_values"
        if image_features is None:
            if not isinstance(pixel_values, torch.Tensor) or not pixel_values.is_floating_point():
                raise input_error("SaisaForConditionalGeneration", "pixel_values",
                                  "a floating-point tensor of images (the processor's pixel_values)",
                                  describe(pixel_values))
            image_features = self.get_image_features(pixel_values)
        elif not isinstance(image_features, torch.Tensor) or not image_features.is_floating_point():
            raise input_error("SaisaForConditionalGeneration", "image_features",
                              "a floating-point tensor [n_images, n_visual, d_v]", describe(image_features))
        d_v = self.config.vision_config.hidden_size
        if image_features.dim() != 3 or image_features.shape[-1] != d_v:
            raise input_error("SaisaForConditionalGeneration", "image_features",
                              f"shape [n_images, n_visual, {d_v}] (vision_config.hidden_size = {d_v})",
                              describe(image_features))
        n_feat = image_features.shape[0] * image_features.shape[1]
        if n_feat != n_slots:
            raise input_error("SaisaForConditionalGeneration", argument,
                              f"one visual token per image placeholder (input_ids hold {n_slots} image placeholders)",
                              described(f"{image_features.shape[0]} image(s) giving {n_feat} visual tokens "
                                        f"({image_features.shape[1]} each)"))
        return image_features.reshape(-1, d_v)

    def _check_token_ids(self, input_ids: torch.Tensor, is_image: torch.Tensor) -> None:
        """Every id that is not an image placeholder is a token of the text vocabulary (reads values)."""
        vocab = self.config.text_config.vocab_size
        text = input_ids[~is_image]
        if text.numel() and (int(text.min()) < 0 or int(text.max()) >= vocab):
            bad = int(text.max()) if int(text.max()) >= vocab else int(text.min())
            raise input_error("SaisaForConditionalGeneration", "input_ids",
                              f"token ids in [0, {vocab}) or the image placeholder {self.config.image_token_id}", bad)

    # -- forward ----------------------------------------------------------------------------------
    def forward(self, input_ids: torch.LongTensor | None = None, pixel_values: torch.Tensor | None = None,
                image_features: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.LongTensor | None = None, cache: Cache | None = None,
                labels: torch.LongTensor | None = None, use_cache: bool | None = None,
                logits_to_keep: int = 0, inputs_embeds=None, past_key_values: Cache | None = None,
                **kwargs) -> CausalLMOutputWithPast:
        if inputs_embeds is not None:
            raise input_error("SaisaForConditionalGeneration", "inputs_embeds",
                              "None (pass input_ids with image placeholders)", described("a tensor"))
        if input_ids is None:
            raise input_error("SaisaForConditionalGeneration", "input_ids", "a [B, T] tensor of token ids", None)
        if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.is_floating_point() \
                or input_ids.is_complex() or input_ids.dtype == torch.bool:
            raise input_error("SaisaForConditionalGeneration", "input_ids", "a [B, T] integer tensor of token ids",
                              describe(input_ids))
        if labels is not None and labels.shape != input_ids.shape:
            raise input_error("SaisaForConditionalGeneration", "labels",
                              f"the shape of input_ids {tuple(input_ids.shape)}", describe(labels))
        if attention_mask is not None and (not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2
                                           or attention_mask.shape[0] != input_ids.shape[0]):
            raise input_error("SaisaForConditionalGeneration", "attention_mask",
                              f"a [B, past + T] tensor with B = {input_ids.shape[0]}", describe(attention_mask))
        check_int("SaisaForConditionalGeneration", "logits_to_keep", logits_to_keep, low=0)
        cache = cache if cache is not None else past_key_values
        is_image = input_ids == self.config.image_token_id
        if values_checked(input_ids):  # one check per forward, skipped on CUDA (it would sync)
            self._check_token_ids(input_ids, is_image)
        features = self._visual_features(is_image, pixel_values, image_features)
        if use_cache is None:
            use_cache = self.config.text_config.use_cache if hasattr(self.config.text_config, "use_cache") else True
        if use_cache and self.gradient_checkpointing and self.training:
            # a recomputed layer would write its keys and values into the cache a second time
            logger.warning_once("SaisaForConditionalGeneration: use_cache=True is incompatible with gradient "
                                "checkpointing; setting use_cache=False")
            use_cache = False
        text_ids = input_ids.masked_fill(is_image, 0)
        kwargs.pop("num_items_in_batch", None) if labels is None else None

        keep = 0 if labels is not None else logits_to_keep  # the loss needs every position
        if self.config.architecture == "llava":
            logits, cache = self._forward_llava(text_ids, is_image, features, attention_mask, position_ids, cache,
                                                use_cache, keep, kwargs)
        else:
            logits, cache = self._forward_naevit(text_ids, is_image, features, attention_mask, position_ids, cache,
                                                 use_cache, keep)
        loss = None
        if labels is not None:
            labels = labels.masked_fill(is_image, IGNORE_INDEX)
            labels[:, 1:] = labels[:, 1:].masked_fill(is_image[:, :-1], IGNORE_INDEX)  # predicted by a visual row
            loss = self.language_model.loss_function(logits=logits, labels=labels,
                                                     vocab_size=self.config.text_config.vocab_size,
                                                     **{k: v for k, v in kwargs.items() if k == "num_items_in_batch"})
        if logits_to_keep and logits.shape[1] != logits_to_keep:
            logits = logits[:, -logits_to_keep:]
        return CausalLMOutputWithPast(loss=loss, logits=logits, cache=cache if use_cache else None)

    def _forward_llava(self, text_ids, is_image, features, attention_mask, position_ids, cache, use_cache, keep,
                       kwargs):
        embeds = self.get_input_embeddings()(text_ids)
        if features is not None:
            visual = self.projectors(features.to(embeds.dtype))
            embeds = embeds.masked_scatter(is_image[..., None], visual.to(embeds.dtype))
        extra = {k: v for k, v in kwargs.items() if k != "num_items_in_batch"}
        out = self.language_model(inputs_embeds=embeds, attention_mask=attention_mask, position_ids=position_ids,
                                  cache=cache, use_cache=use_cache, logits_to_keep=keep, **extra)
        return out.logits, out.cache

    def _forward_naevit(self, text_ids, is_image, features, attention_mask, position_ids, cache, use_cache, keep):
        """The SAISA / NAEViT-LLaVA decoder loop: queries, o_proj and the FFN on text rows only.

        Text and visual rows travel as two streams (``h_text [B, Tq, d]``, ``h_vis [B, Tv, d]``);
        each layer normalises and projects them separately (the LLM's own modules, so adapters and
        hooks on ``k_proj`` / ``v_proj`` see every row) and writes their keys and values into
        sequence order once, for the attention and the cache.
        """
        cfg = self.config
        lm = self.language_model
        decoder = lm.model
        b, t = text_ids.shape
        if use_cache and cache is None:
            cache = DynamicCache(config=cfg.text_config)
        past = cache.get_seq_length() if cache is not None else 0
        if position_ids is None:
            position_ids = (past + torch.arange(t, device=text_ids.device)).expand(b, t)

        plan = _RowPlan(is_image)
        text_rows = plan.text_idx.clamp(max=t - 1)
        embeds = decoder.embed_tokens(text_ids)
        cos, sin = decoder.rotary_emb(embeds, position_ids)  # [B, T, D] each
        rope_text = (_gather_rows(cos, text_rows)[:, :, None], _gather_rows(sin, text_rows)[:, :, None])

        # Which keys are real, and which key index each text query sees up to (its own position).
        if attention_mask is not None:
            key_mask = attention_mask.bool()
            if key_mask.shape != (b, past + t):
                raise input_error("SaisaForConditionalGeneration", "attention_mask",
                                  f"shape ({b}, {past + t}) (past {past} + new {t})", describe(attention_mask))
            query_real = _gather_rows(key_mask[:, past:], text_rows) & plan.text_valid
        else:
            key_mask, query_real = None, plan.text_valid
        q_pos = torch.where(query_real, past + plan.text_idx, -1)

        h_text = _gather_rows(embeds, text_rows)  # [B, Tq, d]
        n_layers = cfg.text_config.num_hidden_layers
        packed_features = rope_vis = h_vis = shared = None
        if features is not None:
            tv = plan.vis_idx.shape[1]
            if features.shape[0] == b * tv:  # as many slots in every sample: nothing to pad
                packed_features = features.reshape(b, tv, features.shape[-1])
            else:
                packed_features = torch.zeros(b, tv, features.shape[-1], dtype=features.dtype, device=features.device)
                packed_features[plan.vis_valid] = features  # features come in sequence order, sample by sample
            packed_features = packed_features.to(embeds.dtype)
            vis_rows = plan.vis_idx.clamp(max=t - 1)
            rope_vis = (_gather_rows(cos, vis_rows)[:, :, None], _gather_rows(sin, vis_rows)[:, :, None])
            if cfg.architecture == "naevit_llava":  # one projector into the input space, then their own stream
                h_vis = self.projectors(packed_features)
            elif cfg.share_projectors:  # stage 1: every layer's Proj_l is projector 0, computed once
                shared = self.projectors(packed_features)

        checkpointed = self.gradient_checkpointing and self.training and torch.is_grad_enabled()
        for layer_idx, layer in enumerate(decoder.layers[:n_layers]):
            args = (layer, layer_idx, h_text, h_vis, packed_features, shared, plan, rope_text, rope_vis, q_pos,
                    key_mask, cache)
            if checkpointed:  # the layer's activations, its projector's included, are recomputed in backward
                h_text, h_vis = self._gradient_checkpointing_func(self._projected_layer, *args)
            else:
                h_text, h_vis = self._projected_layer(*args)

        hidden = decoder.norm(h_text)
        tq = h_text.shape[1]
        if keep and bool((plan.source[:, -keep:] < tq).all()):  # only the last rows, all of them text (generation)
            return lm.lm_head(_gather_rows(hidden, plan.source[:, -keep:])), cache
        logits_text = lm.lm_head(hidden)
        # Back to sequence order; visual rows have no output and get zero logits.
        zeros = logits_text.new_zeros(b, plan.vis_idx.shape[1], logits_text.shape[-1])
        return _gather_rows(torch.cat([logits_text, zeros], dim=1), plan.source), cache

    def _projected_layer(self, layer, layer_idx, h_text, h_vis, packed_features, shared, plan, rope_text, rope_vis,
                         q_pos, key_mask, cache):
        if packed_features is not None and self.config.architecture == "saisa":
            # SAISA overwrites the visual rows at every layer, never adds; one layer's at a time in memory
            h_vis = shared if shared is not None else self.projectors(packed_features, layer_idx)
        return self._layer(layer, layer_idx, h_text, h_vis, plan, rope_text, rope_vis, q_pos, key_mask, cache)

    def _layer(self, layer, layer_idx, h_text, h_vis, plan, rope_text, rope_vis, q_pos, key_mask, cache):
        attn = layer.self_attn
        rotate_half = sys.modules[type(attn).__module__].rotate_half  # the family's own RoPE helper
        b, tq, _ = h_text.shape
        head_dim = attn.head_dim
        qk_norm = getattr(attn, "k_norm", None) is not None  # Qwen3 normalises each head before RoPE

        def keys_values(normed, rope):  # [B, R, d] -> keys with RoPE at their positions, values: [B, R, Hkv, D]
            keys = attn.k_proj(normed).view(*normed.shape[:2], -1, head_dim)
            values = attn.v_proj(normed).view(*normed.shape[:2], -1, head_dim)
            if qk_norm:
                keys = attn.k_norm(keys)
            cos, sin = rope
            return keys * cos + rotate_half(keys) * sin, values

        # Keys and values of every row, text and visual, each stream through the layer's input norm.
        normed_text = layer.input_layernorm(h_text)
        keys, values = keys_values(normed_text, rope_text)
        if h_vis is not None:
            vis_keys, vis_values = keys_values(layer.input_layernorm(h_vis), rope_vis)
            keys, values = plan.interleave(keys, vis_keys), plan.interleave(values, vis_values)
        keys, values = keys.transpose(1, 2), values.transpose(1, 2)  # [B, Hkv, T, D], sequence order
        queries = attn.q_proj(normed_text).view(b, tq, -1, head_dim)
        if qk_norm:
            queries = attn.q_norm(queries)
        cos, sin = rope_text
        queries = (queries * cos + rotate_half(queries) * sin).transpose(1, 2)
        if cache is not None:
            keys, values = cache.update(keys, values, layer_idx)
        out = naevit_attention(queries, keys, values, q_pos, key_padding_mask=key_mask,
                               softmax_scale=attn.scaling, backend=self.config.attention_backend)
        out = attn.o_proj(out.transpose(1, 2).reshape(b, tq, -1))
        h_text = h_text + out
        h_text = h_text + layer.mlp(layer.post_attention_layernorm(h_text))
        if h_vis is not None and self.config.architecture == "naevit_llava":  # visual rows: FFN, no attention
            h_vis = h_vis + layer.mlp(layer.post_attention_layernorm(h_vis))
        return h_text, h_vis

    def prepare_inputs_for_generation(self, *args, image_features=None, is_first_iteration=False, **kwargs):
        inputs = super().prepare_inputs_for_generation(*args, is_first_iteration=is_first_iteration, **kwargs)
        if is_first_iteration or not kwargs.get("use_cache", True):
            inputs["image_features"] = image_features
        return inputs


# ---------------------------------------------------------------------------------------------
# Auto classes and remote code
# ---------------------------------------------------------------------------------------------
#: Auto classes that load a saved SAISA folder (after ``import icml26.models.saisa.modeling``, or through ``auto_map``).
AUTO_MODEL_CLASSES = ("AutoModel", "AutoModelForImageTextToText", "AutoModelForCausalLM")
for _auto in (AutoModel, AutoModelForImageTextToText, AutoModelForCausalLM):
    _auto.register(SaisaConfig, SaisaForConditionalGeneration, exist_ok=True)
SaisaConfig.register_for_auto_class()
SaisaForConditionalGeneration.register_for_auto_class("AutoModelForImageTextToText")


def write_remote_code_entry(folder: str | os.PathLike, module: str, names: Sequence[str]) -> Path:
    """Replace the module file ``register_for_auto_class`` copied into ``folder`` by a two-line entry point.

    transformers copies the defining module's source next to a checkpoint for ``trust_remote_code`` (as
    ``<last part of the module name>.py``, the file ``auto_map`` points at); that copy would import as a second,
    frozen set of classes. The entry point instead re-exports the installed toolkit's classes, so
    ``trust_remote_code=True`` loading needs ``icml26`` installed but not imported, and gives the same classes as
    ``import icml26.models.saisa``.

    Args:
        folder: the checkpoint folder being saved.
        module: the defining module's full name (``__name__``, e.g. ``icml26.models.saisa.modeling``).
        names: the classes the entry point re-exports.
    """
    text = (f'"""Remote-code entry point of an icml26 checkpoint: the classes come from the installed icml26 '
            f'package."""\n\nfrom {module} import {", ".join(names)}  # noqa: F401\n')
    return atomic_write_text(Path(folder) / f"{module.rsplit('.', 1)[-1]}.py", text)


# ---------------------------------------------------------------------------------------------
# Analytic prefill cost
# ---------------------------------------------------------------------------------------------
def flops(config: SaisaConfig | PretrainedConfig | dict[str, Any], n_visual: int, n_text: int,
          vision_dim: int | None = None) -> dict[str, float]:
    """Prefill FLOPs (2 x multiply-accumulates) of the three architectures, and projector sizes.

    Reconstruction: the paper's own derivation is in an appendix we could not read; these are our
    counts of the decoder only (no vision tower, no ``lm_head``), per layer, for
    ``N = n_visual + n_text``, hidden ``d``, FFN size ``m``, key/value width ``d_kv`` (= d without GQA)::

        llava         2Nd^2 + 2N d d_kv + 2N^2 d + 3Ndm
        naevit_llava  2N d d_kv + 2 n_t d^2 + 2 n_t N d + 3Ndm
        saisa         2N d d_kv + 2 n_t d^2 + 2 n_t N d + 3 n_t d m + n_v (d_v d + d^2)

    ``config`` is a :class:`SaisaConfig`, a text config, or a dict with ``hidden_size``,
    ``intermediate_size``, ``num_hidden_layers`` (and optionally ``num_attention_heads``,
    ``num_key_value_heads``, ``vision_dim``).

    Args:
        config: the model's config (or its text config, or a dict of those sizes).
        n_visual: visual tokens per sample (``n_v``, an int >= 0).
        n_text: text tokens per sample (``n_t``, an int >= 0).
        vision_dim: the vision features' width ``d_v``; ``None``: the config's (its vision tower's
            ``hidden_size``, or ``vision_dim``), else ``d``.
    """
    name = "flops"
    n_visual = check_int(name, "n_visual", n_visual, low=0)
    n_text = check_int(name, "n_text", n_text, low=0)
    if vision_dim is not None:
        vision_dim = check_int(name, "vision_dim", vision_dim, low=1)
    if isinstance(config, SaisaConfig):
        vision_dim = vision_dim or config.vision_config.hidden_size
        config = config.text_config
    if not isinstance(config, (dict, PretrainedConfig)):
        raise InputTypeError(name, "config", "a SaisaConfig, a text config or a dict of sizes",
                             described(type(config).__name__))
    get = config.get if isinstance(config, dict) else lambda k, default=None: getattr(config, k, default)
    d, m, layers = (check_int(name, f"config.{key}", get(key), low=1)
                    for key in ("hidden_size", "intermediate_size", "num_hidden_layers"))
    heads, kv_heads = get("num_attention_heads"), get("num_key_value_heads")
    if heads is not None and kv_heads is not None:
        heads = check_int(name, "config.num_attention_heads", heads, low=1)
        kv_heads = check_int(name, "config.num_key_value_heads", kv_heads, low=1)
    d_kv = d * kv_heads // heads if heads and kv_heads else d
    d_v = vision_dim or get("vision_dim") or d
    n = n_visual + n_text
    projector = d_v * d + d + d * d + d
    per_layer = {
        "llava": 2 * n * d * d + 2 * n * d * d_kv + 2 * n * n * d + 3 * n * d * m,
        "naevit_llava": 2 * n * d * d_kv + 2 * n_text * d * d + 2 * n_text * n * d + 3 * n * d * m,
        "saisa": 2 * n * d * d_kv + 2 * n_text * d * d + 2 * n_text * n * d + 3 * n_text * d * m
        + n_visual * (d_v * d + d * d),
    }
    out = {arch: 2.0 * macs * layers for arch, macs in per_layer.items()}
    out["projector_params_per_layer"] = float(projector)
    out["projector_params_total"] = float(projector * layers)
    return out


# The processor registers itself with AutoProcessor / AutoImageProcessor: importing this module is enough.
import icml26.models.saisa.processing  # noqa: E402,F401

__all__ = [
    "ARCHITECTURES",
    "SaisaConfig",
    "SaisaForConditionalGeneration",
    "SaisaPatchEncoder",
    "SaisaPatchEncoderConfig",
    "SaisaProjector",
    "SaisaProjectors",
    "flops",
]
