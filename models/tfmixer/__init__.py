"""TFMixer: the public face of ``icml26.models.tfmixer``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from icml26.lazy import lazy_exports
from icml26.models.tfmixer.baselines import (
    HistoryMeanForecaster,
    LOCFForecaster,
    MeanReversionForecaster,
    MTANForecaster,
)
from icml26.models.tfmixer.data import KEYS, IMTSCollator, IMTSDataset, IMTSSplits, imts_sample

if TYPE_CHECKING:
    from icml26.models.tfmixer.modeling import (
        LABEL_NAMES,
        SLOT_BUCKET,
        TFMixerConfig,
        TFMixerForecastOutput,
        TFMixerForForecasting,
        TFMixerLabelsCallback,
        TFMixerPreTrainedModel,
        bucketed_nonzero,
        check_imts_inputs,
        masked_mse,
        squared_error_loss,
    )

# Names whose modules import transformers or TRL load on first use, so importing this package
# stays a torch-only import.
_LAZY = {
    **dict.fromkeys(("LABEL_NAMES", "SLOT_BUCKET", "TFMixerConfig", "TFMixerForForecasting", "TFMixerForecastOutput", "TFMixerLabelsCallback", "TFMixerPreTrainedModel", "bucketed_nonzero", "check_imts_inputs", "masked_mse", "squared_error_loss"), "modeling"),
}

__getattr__, __dir__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "HistoryMeanForecaster", "IMTSCollator", "IMTSDataset", "IMTSSplits", "KEYS", "LABEL_NAMES", "LOCFForecaster",
    "MTANForecaster", "MeanReversionForecaster", "SLOT_BUCKET", "TFMixerConfig", "TFMixerForForecasting",
    "TFMixerForecastOutput", "TFMixerLabelsCallback", "TFMixerPreTrainedModel", "bucketed_nonzero",
    "check_imts_inputs", "imts_sample", "masked_mse", "squared_error_loss",
]
