"""SAISA: the public face of ``icml26.models.saisa``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icml26.lazy import lazy_exports

if TYPE_CHECKING:
    from icml26.models.saisa.modeling import (
        ARCHITECTURES,
        SaisaConfig,
        SaisaForConditionalGeneration,
        SaisaPatchEncoder,
        SaisaPatchEncoderConfig,
        SaisaProjector,
        SaisaProjectors,
        flops,
    )
    from icml26.models.saisa.processing import SaisaImageProcessor, SaisaProcessor, chat_template_for

# Names whose modules import transformers or TRL load on first use, so importing this package
# stays a torch-only import.
_LAZY = {
    **dict.fromkeys(("ARCHITECTURES", "SaisaConfig", "SaisaForConditionalGeneration", "SaisaPatchEncoder", "SaisaPatchEncoderConfig", "SaisaProjector", "SaisaProjectors", "flops"), "modeling"),
    **dict.fromkeys(("SaisaImageProcessor", "SaisaProcessor", "chat_template_for"), "processing"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "ARCHITECTURES", "SaisaConfig", "SaisaForConditionalGeneration", "SaisaImageProcessor", "SaisaPatchEncoder",
    "SaisaPatchEncoderConfig", "SaisaProcessor", "SaisaProjector", "SaisaProjectors", "chat_template_for", "flops",
]
