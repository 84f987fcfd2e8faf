"""SAISA: the public face of ``icml26.models.saisa``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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
    from icml26.models.saisa.processing import SaisaImageProcessor, SaisaProcessor

# Names whose modules import transformers or TRL load on first use, so importing this package
# stays a torch-only import.
_LAZY = {
    **dict.fromkeys(("ARCHITECTURES", "SaisaConfig", "SaisaForConditionalGeneration", "SaisaPatchEncoder", "SaisaPatchEncoderConfig", "SaisaProjector", "SaisaProjectors", "flops"), "modeling"),
    **dict.fromkeys(("SaisaImageProcessor", "SaisaProcessor"), "processing"),
}


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ARCHITECTURES", "SaisaConfig", "SaisaForConditionalGeneration", "SaisaImageProcessor", "SaisaPatchEncoder",
    "SaisaPatchEncoderConfig", "SaisaProcessor", "SaisaProjector", "SaisaProjectors", "flops",
]
