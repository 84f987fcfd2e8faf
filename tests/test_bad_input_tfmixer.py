"""Bad input for TFMixer: its config and forward, the IMTS containers, the baselines, the synthetic, CO2
and PhysioNet 2012 tasks (arguments only: no probe reads the data), the metrics, training, and the
PhysioNet baseline CLI.

Each probe makes one call with exactly one wrong value; see ``tests/probes.py`` for the verdicts.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from icml26.eval.tasks.tfmixer import (
    SyntheticIMTSConfig,
    evaluate_forecaster,
    forecast_errors,
    generate_synthetic_imts,
    load_co2_imts,
    load_physionet2012,
    make_synthetic_imts,
    physionet2012,
    read_physionet_record,
    reduce_forecast_errors,
    train_test_split_indices,
)
from icml26.models.tfmixer import (
    HistoryMeanForecaster,
    IMTSCollator,
    IMTSDataset,
    LOCFForecaster,
    MTANForecaster,
    TFMixerConfig,
    TFMixerForForecasting,
    bucketed_nonzero,
    imts_sample,
    masked_mse,
)
from icml26.training.tfmixer import train_forecaster
from probes import Probe, check, cli, ids

C = 3


@functools.cache
def _model():
    return TFMixerForForecasting(TFMixerConfig(num_channels=C, d_model=8, num_frequencies=4, num_patches=4,
                                               num_query_patches=2, num_heads=2, time_embedding_dim=4,
                                               nudft_backend="torch"))


@functools.cache
def _splits():
    cfg = SyntheticIMTSConfig(num_channels=C, num_queries=(2, 4), rate_range=(5.0, 10.0))
    return make_synthetic_imts((4, 2, 2), cfg, seed=0)


def _batch(**change):
    g = torch.Generator().manual_seed(0)
    batch = {"values": torch.randn(2, 5, C, generator=g), "times": torch.linspace(0, 0.9, 5).expand(2, 5).clone(),
             "mask": torch.ones(2, 5, C, dtype=torch.bool), "query_times": torch.tensor([[1.0, 1.2], [1.1, 1.3]]),
             "targets": torch.randn(2, 2, C, generator=g), "target_mask": torch.ones(2, 2, C, dtype=torch.bool)}
    batch.update(change)
    return batch


def forward(model=_model, **change):
    return lambda: model()(**_batch(**change))


def config(**change):
    return lambda: TFMixerConfig(**change)


def fit(**change):
    kwargs = {"steps": 2, "batch_size": 2, "lr": 1e-3, "eval_every": 1, "patience": 2, "seed": 0, "device": "cpu",
              **change}
    return lambda: train_forecaster(kwargs.pop("model", None) or MTANForecaster(C, hidden_size=4, num_reference=4,
                                                                                time_dim=4),
                                    kwargs.pop("splits", None) or _splits(), **kwargs)


def _sample(**change):
    args = {"values": np.zeros((4, C)), "times": np.linspace(0, 0.9, 4), "mask": np.ones((4, C), bool),
            "query_times": np.array([1.0, 1.1]), "targets": np.zeros((2, C)), "target_mask": np.ones((2, C), bool)}
    args.update(change)
    return lambda: imts_sample(**args)


PROBES = [
    # TFMixerConfig
    Probe("TFMixerConfig-num_channels-zero", config(num_channels=0), "num_channels"),
    Probe("TFMixerConfig-num_heads-not-divisor", config(d_model=32, num_heads=3), "num_heads"),
    Probe("TFMixerConfig-dropout-one", config(dropout=1.0), "dropout"),
    Probe("TFMixerConfig-fusion-unknown", config(fusion="sum"), "fusion"),
    Probe("TFMixerConfig-channel_fallback-wrong-length", config(num_channels=3, channel_fallback=[0.0, 1.0]),
          "channel_fallback"),
    Probe("TFMixerConfig-nudft_backend-unknown", config(nudft_backend="cuda"), "nudft_backend"),
    Probe("TFMixerConfig-reconstruction_weight-nan", config(reconstruction_weight=float("nan")),
          "reconstruction_weight"),
    Probe("TFMixerConfig-loss_reduction-unknown", config(loss_reduction="mean"), "loss_reduction"),
    Probe("TFMixerConfig-max_cycles-below-frequencies", config(num_frequencies=16, max_cycles=8.0), "max_cycles"),
    # TFMixerForForecasting
    Probe("TFMixerForForecasting-config-dict", lambda: TFMixerForForecasting({"num_channels": 3}), "config"),
    Probe("TFMixerForForecasting.forward-values-rank-2", forward(values=torch.zeros(5, C)), "values"),
    Probe("TFMixerForForecasting.forward-values-channels", forward(values=torch.zeros(2, 5, C + 1),
                                                                  mask=torch.ones(2, 5, C + 1, dtype=torch.bool)),
          "values"),
    Probe("TFMixerForForecasting.forward-values-list", forward(values=[[0.0] * C] * 5), "values"),
    Probe("TFMixerForForecasting.forward-times-wrong-shape", forward(times=torch.zeros(2, 4)), "times"),
    Probe("TFMixerForForecasting.forward-mask-all-false", forward(mask=torch.zeros(2, 5, C, dtype=torch.bool)),
          "mask"),
    Probe("TFMixerForForecasting.forward-values-nan-observed", forward(values=torch.full((2, 5, C), float("nan"))),
          "values"),
    Probe("TFMixerForForecasting.forward-query_times-batch", forward(query_times=torch.zeros(3, 2)), "query_times"),
    Probe("TFMixerForForecasting.forward-targets-wrong-shape", forward(targets=torch.zeros(2, 3, C)), "targets"),
    Probe("TFMixerForForecasting.forward-target_mask-wrong-shape",
          forward(target_mask=torch.ones(2, 2, C + 1, dtype=torch.bool)), "target_mask"),
    # losses and helpers
    Probe("masked_mse-reduction-unknown",
          lambda: masked_mse(torch.zeros(2, C), torch.zeros(2, C), torch.ones(2, C, dtype=torch.bool), "mean"),
          "reduction"),
    Probe("masked_mse-target-shape",
          lambda: masked_mse(torch.zeros(2, C), torch.zeros(3, C), torch.ones(2, C, dtype=torch.bool)), "target"),
    Probe("bucketed_nonzero-bucket-zero", lambda: bucketed_nonzero(torch.ones(3, dtype=torch.bool), 0), "bucket"),
    # data containers
    Probe("imts_sample-mask-wrong-shape", _sample(mask=np.ones((4, C + 1), bool)), "mask"),
    Probe("imts_sample-targets-wrong-horizon", _sample(targets=np.zeros((3, C))), "targets"),
    Probe("IMTSDataset-sample-missing-key", lambda: IMTSDataset([{"values": torch.zeros(3, C)}], ["a", "b", "c"]),
          "samples"),
    Probe("IMTSDataset-channel_names-count", lambda: IMTSDataset(list(_splits().train.samples), ["a", "b"]),
          "channel_names"),
    Probe("IMTSCollator-pad_to_multiple_of-zero", lambda: IMTSCollator(pad_to_multiple_of=0), "pad_to_multiple_of"),
    Probe("IMTSCollator-no-samples", lambda: IMTSCollator()([]), "samples"),
    # baselines
    Probe("LOCFForecaster-fill_value-nan", lambda: LOCFForecaster(fill_value=float("nan")), "fill_value"),
    Probe("HistoryMeanForecaster-fill_value-per-channel-mismatch",
          forward(model=lambda: HistoryMeanForecaster([0.0, 1.0]), mask=torch.tensor([[[True, True, False]] * 5] * 2)),
          "fill_value"),
    Probe("LOCFForecaster.forward-mask-wrong-shape", forward(model=LOCFForecaster, mask=torch.ones(2, 5, 1)), "mask"),
    Probe("MTANForecaster-num_channels-zero", lambda: MTANForecaster(0), "num_channels"),
    Probe("MTANForecaster-hidden_size-negative", lambda: MTANForecaster(C, hidden_size=-4), "hidden_size"),
    Probe("MTANForecaster-loss_reduction-unknown", lambda: MTANForecaster(C, loss_reduction="sum"), "loss_reduction"),
    # the synthetic and CO2 tasks
    Probe("SyntheticIMTSConfig-num_channels-zero", lambda: SyntheticIMTSConfig(num_channels=0), "num_channels"),
    Probe("SyntheticIMTSConfig-dropout_range-reversed", lambda: SyntheticIMTSConfig(dropout_range=(0.7, 0.3)),
          "dropout_range"),
    Probe("SyntheticIMTSConfig-burst_prob-above-one", lambda: SyntheticIMTSConfig(burst_prob=1.5), "burst_prob"),
    Probe("SyntheticIMTSConfig-noise_std-negative", lambda: SyntheticIMTSConfig(noise_std=-0.1), "noise_std"),
    Probe("SyntheticIMTSConfig-frequencies-empty", lambda: SyntheticIMTSConfig(frequencies=()), "frequencies"),
    Probe("generate_synthetic_imts-n-zero", lambda: generate_synthetic_imts(0), "n"),
    Probe("generate_synthetic_imts-seed-negative", lambda: generate_synthetic_imts(2, seed=-1), "seed"),
    Probe("generate_synthetic_imts-config-dict", lambda: generate_synthetic_imts(2, {"num_channels": 2}), "config"),
    Probe("make_synthetic_imts-sizes-zero-validation", lambda: make_synthetic_imts((4, 0, 2)), "sizes"),
    Probe("load_co2_imts-keep-zero", lambda: load_co2_imts(keep=0.0), "keep"),
    Probe("load_co2_imts-history-zero", lambda: load_co2_imts(history=0), "history"),
    Probe("load_co2_imts-split-above-one", lambda: load_co2_imts(split=(0.9, 0.3)), "split"),
    # PhysioNet 2012 (refused before any file is read)
    Probe("load_physionet2012-protocol-unknown", lambda: load_physionet2012("/nonexistent", "t-patchgnn"), "protocol"),
    Probe("load_physionet2012-source-missing", lambda: load_physionet2012("/nonexistent-icml26/set-a.tar.gz"),
          "source"),
    Probe("load_physionet2012-seed-negative", lambda: load_physionet2012("/nonexistent", "tpatchgnn", seed=-1), "seed"),
    Probe("load_physionet2012-seed-apn", lambda: load_physionet2012("/nonexistent", "apn", seed=1), "seed"),
    Probe("load_physionet2012-seed-str", lambda: load_physionet2012("/nonexistent", "tpatchgnn", seed="1"), "seed"),
    Probe("load_physionet2012-quantization-negative",
          lambda: load_physionet2012("/nonexistent", "tpatchgnn", quantization=-1.0), "quantization"),
    Probe("load_physionet2012-normalization-unknown",
          lambda: load_physionet2012("/nonexistent", "zscore_24h", normalization="robust"), "normalization"),
    Probe("load_physionet2012-split-not-summing",
          lambda: load_physionet2012("/nonexistent", "zscore_24h", split=(0.5, 0.2, 0.2)), "split"),
    Probe("load_physionet2012-variables-unknown",
          lambda: load_physionet2012("/nonexistent", "zscore_24h", variables=["HR", "Pulse"]), "variables"),
    Probe("load_physionet2012-split-fixed-by-tpatchgnn",
          lambda: load_physionet2012("/nonexistent", "tpatchgnn", split=(0.6, 0.2, 0.2)), "split"),
    Probe("read_physionet_record-missing", lambda: read_physionet_record("/nonexistent-icml26/132539.txt"), "path"),
    Probe("train_test_split_indices-train_size-above-one", lambda: train_test_split_indices(10, train_size=1.5),
          "train_size"),
    Probe("train_test_split_indices-n-zero", lambda: train_test_split_indices(0, train_size=0.8), "n"),
    cli("physionet-cli-data-missing", ["--data", "/nonexistent-icml26/set-a.tar.gz"], "--data",
        main=physionet2012.main, forbid=["icml26.eval.tasks.tfmixer.physionet2012.physionet_rows"]),
    cli("physionet-cli-protocol-unknown", ["--data", "/nonexistent", "--protocol", "t-patchgnn"], "--protocol",
        main=physionet2012.main, forbid=["icml26.eval.tasks.tfmixer.physionet2012.physionet_rows"]),
    # metrics
    Probe("forecast_errors-targets-shape",
          lambda: forecast_errors(torch.zeros(2, 2, C), torch.zeros(2, 3, C), torch.ones(2, 2, C, dtype=torch.bool)),
          "targets"),
    Probe("reduce_forecast_errors-metric-unknown",
          lambda: reduce_forecast_errors({"se": 1.0, "ae": 1.0, "count": 2}, "median"), "metric"),
    Probe("reduce_forecast_errors-totals-missing-count",
          lambda: reduce_forecast_errors({"se": 1.0, "ae": 1.0}), "totals"),
    Probe("evaluate_forecaster-batch_size-zero",
          lambda: evaluate_forecaster(LOCFForecaster(), _splits().validation, batch_size=0), "batch_size"),
    Probe("evaluate_forecaster-metric-unknown",
          lambda: evaluate_forecaster(LOCFForecaster(), _splits().validation, metric="mse"), "metric"),
    Probe("evaluate_forecaster-dataset-splits",
          lambda: evaluate_forecaster(LOCFForecaster(), _splits()), "dataset"),
    # training
    Probe("train_forecaster-steps-zero", fit(steps=0), "steps"),
    Probe("train_forecaster-batch_size-zero", fit(batch_size=0), "batch_size"),
    Probe("train_forecaster-lr-negative", fit(lr=-1e-3), "lr"),
    Probe("train_forecaster-eval_every-zero", fit(eval_every=0), "eval_every"),
    Probe("train_forecaster-patience-zero", fit(patience=0), "patience"),
    Probe("train_forecaster-device-unknown", fit(device="gpu0"), "device"),
    Probe("train_forecaster-splits-dataset", fit(splits=SimpleNamespace(train=[])), "splits"),
    Probe("train_forecaster-model-config", fit(model=TFMixerConfig(num_channels=C)), "model"),
    Probe("train_forecaster-model-without-parameters", fit(model=LOCFForecaster()), "model"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
