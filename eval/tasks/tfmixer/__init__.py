"""TFMixer's tasks: the public face of ``icml26.eval.tasks.tfmixer``."""

from __future__ import annotations

from icml26.eval.tasks.tfmixer.breakdown import breakdown_rows, forecast_breakdown
from icml26.eval.tasks.tfmixer.imts import (
    METRICS,
    SyntheticIMTSConfig,
    co2_weekly,
    compute_forecast_metrics,
    evaluate_forecaster,
    forecast_errors,
    generate_synthetic_imts,
    load_co2_imts,
    make_synthetic_imts,
    reduce_forecast_errors,
    synthetic_signal,
)
from icml26.eval.tasks.tfmixer.physionet2012 import (
    APN_VARIABLES,
    PHYSIONET_GROUPS,
    PHYSIONET_PROTOCOLS,
    PHYSIONET_STATIC,
    PHYSIONET_VARIABLES,
    TPATCHGNN_SPLIT_SEED,
    PhysioNetProtocol,
    default_physionet_path,
    load_physionet2012,
    physionet_rows,
    read_physionet_record,
    train_test_split_indices,
)

__all__ = [
    "APN_VARIABLES", "METRICS", "PHYSIONET_GROUPS", "PHYSIONET_PROTOCOLS", "PHYSIONET_STATIC",
    "PHYSIONET_VARIABLES", "PhysioNetProtocol", "SyntheticIMTSConfig", "TPATCHGNN_SPLIT_SEED", "co2_weekly",
    "breakdown_rows", "compute_forecast_metrics", "forecast_breakdown",
    "default_physionet_path", "evaluate_forecaster", "forecast_errors", "generate_synthetic_imts", "load_co2_imts",
    "load_physionet2012", "make_synthetic_imts", "physionet_rows", "read_physionet_record",
    "reduce_forecast_errors", "synthetic_signal", "train_test_split_indices",
]
