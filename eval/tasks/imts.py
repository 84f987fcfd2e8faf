"""Irregular multivariate time series (IMTS) forecasting data, collation, metrics and baselines.

Every data set here is a list of samples in one format (the PyOmniTS/APN convention TFMixer takes):

- ``values [L, C]`` float32, ``mask [L, C]`` bool (True = observed) and ``times [L]``: the union
  of the sample's observation times, normalised so that the history window is [0, 1];
- ``query_times [H]`` (after the history, usually > 1), ``targets [H, C]`` (0 where not
  observed) and ``target_mask [H, C]``.

:class:`IMTSCollator` pads samples of different ``L`` and ``H`` into a batch whose padded slots
are unobserved (mask False), so they change nothing in any model here.

Sources: :func:`make_synthetic_imts` (seeded; our generator, see :class:`SyntheticIMTSConfig`), :func:`load_co2_imts` (the
weekly Mauna Loa CO2 record that ships inside statsmodels, with its genuine gaps) and
:func:`load_physionet2012` (the PhysioNet/CinC Challenge 2012 record files, from a folder the user
gives; nothing is downloaded). Baselines: :class:`LOCFForecaster`, :class:`HistoryMeanForecaster`
and :class:`MTANForecaster` (a small deterministic mTAN, Shukla & Marlin, ICLR 2021).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from icml26.errors import described, input_error
from icml26.models.tfmixer import TFMixerForecastOutput, TimeEncoding, check_imts_inputs, masked_mse
from icml26.utils import IGNORE_INDEX

KEYS = ("values", "times", "mask", "query_times", "targets", "target_mask")


# ---------------------------------------------------------------------------------------------
# Containers and collation
# ---------------------------------------------------------------------------------------------
class IMTSDataset(torch.utils.data.Dataset):
    """A list of IMTS samples (dicts of tensors, keys :data:`KEYS`) with channel names and metadata."""

    def __init__(self, samples: list[dict[str, torch.Tensor]], channel_names: Sequence[str], info: dict | None = None):
        self.samples = samples
        self.channel_names = list(channel_names)
        self.info = info or {}

    @property
    def num_channels(self) -> int:
        return len(self.channel_names)

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.samples[i]


@dataclass
class IMTSSplits:
    train: IMTSDataset
    validation: IMTSDataset
    test: IMTSDataset
    info: dict = field(default_factory=dict)


def _sample(values, times, mask, query_times, targets, target_mask) -> dict[str, torch.Tensor]:
    targets = np.where(target_mask, targets, 0.0)
    return {"values": torch.as_tensor(np.where(mask, values, 0.0), dtype=torch.float32),
            "times": torch.as_tensor(times, dtype=torch.float32), "mask": torch.as_tensor(mask, dtype=torch.bool),
            "query_times": torch.as_tensor(query_times, dtype=torch.float32),
            "targets": torch.as_tensor(targets, dtype=torch.float32),
            "target_mask": torch.as_tensor(target_mask, dtype=torch.bool)}


class IMTSCollator:
    """Pad samples to the batch's longest history and horizon; padded slots are unobserved.

    ``pad_to_multiple_of`` rounds both lengths up (fewer shapes for compiled kernels). Padded
    times and query times are 0 and padded values/targets 0 with mask False, so padding changes
    no forecast at a real query and no loss.
    """

    def __init__(self, pad_to_multiple_of: int | None = None):
        if pad_to_multiple_of is not None and (not isinstance(pad_to_multiple_of, int) or pad_to_multiple_of < 1):
            raise input_error("IMTSCollator", "pad_to_multiple_of", "a positive int or None", pad_to_multiple_of)
        self.multiple = pad_to_multiple_of

    def _round(self, n: int) -> int:
        return n if self.multiple is None else max(-(-n // self.multiple) * self.multiple, self.multiple)

    def __call__(self, samples: Sequence[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        if not samples:
            raise input_error("IMTSCollator", "samples", "at least one sample", described("an empty list"))
        for i, s in enumerate(samples):
            missing = [k for k in KEYS if k not in s]
            if missing:
                raise input_error("IMTSCollator", f"sample {i}", f"keys {KEYS}", described(f"{missing} missing"))
        c = samples[0]["values"].shape[-1]
        length = self._round(max(s["values"].shape[0] for s in samples))
        horizon = self._round(max(s["query_times"].shape[0] for s in samples))
        b = len(samples)
        out = {"values": torch.zeros(b, length, c), "times": torch.zeros(b, length),
               "mask": torch.zeros(b, length, c, dtype=torch.bool), "query_times": torch.zeros(b, horizon),
               "targets": torch.zeros(b, horizon, c), "target_mask": torch.zeros(b, horizon, c, dtype=torch.bool)}
        for i, s in enumerate(samples):
            if s["values"].shape[-1] != c or s["targets"].shape[-1] != c:
                raise input_error("IMTSCollator", f"sample {i}", f"{c} channels like sample 0",
                                  described(f"values {tuple(s['values'].shape)} and targets "
                                            f"{tuple(s['targets'].shape)}"))
            n, h = s["values"].shape[0], s["query_times"].shape[0]
            for key, size in (("values", n), ("times", n), ("mask", n), ("query_times", h), ("targets", h),
                              ("target_mask", h)):
                out[key][i, :size] = s[key]
        out["values"] = torch.where(out["mask"], out["values"], 0.0)
        out["targets"] = torch.where(out["target_mask"], out["targets"], 0.0)
        return out


# ---------------------------------------------------------------------------------------------
# Synthetic IMTS
# ---------------------------------------------------------------------------------------------
@dataclass
class SyntheticIMTSConfig:
    """Reconstruction: a synthetic IMTS task, ``x_c(t) = a_c + b_c t + sum_r A_cr cos(2 pi f_r t + phi_cr) + noise``.

    Frequencies are shared by all channels and samples (cycles per history window, non-integer so
    that on-grid FFTs leak); offsets, trends, amplitudes and phases are drawn per sample and
    channel. Each channel is observed at the points of its own Poisson process (rate drawn in
    ``rate_range`` per unit time) plus, with ``burst_prob``, a dense burst of ``burst_size`` points
    within ``burst_width``; then a fraction drawn in ``dropout_range`` of its points is dropped
    ("channel dropout": the channels end up asynchronous and of very different densities), and
    with ``empty_channel_prob`` the channel has no history at all. ``num_queries`` forecast
    times are drawn in ``horizon`` and each channel is observed at each of them with
    ``query_observe_prob`` (at least one channel per query).
    """

    num_channels: int = 6
    frequencies: tuple[float, ...] = (2.3, 5.7, 9.1)
    amplitude_range: tuple[float, float] = (0.3, 1.0)
    offset_std: float = 0.5
    trend_std: float = 0.5
    noise_std: float = 0.1
    rate_range: tuple[float, float] = (15.0, 60.0)
    burst_prob: float = 0.5
    burst_size: tuple[int, int] = (5, 15)
    burst_width: float = 0.03
    dropout_range: tuple[float, float] = (0.3, 0.7)
    empty_channel_prob: float = 0.05
    horizon: tuple[float, float] = (1.0, 1.5)
    num_queries: tuple[int, int] = (10, 30)
    query_observe_prob: float = 0.5


def synthetic_signal(params: dict[str, np.ndarray], index: int, t: np.ndarray, frequencies) -> np.ndarray:
    """The noise-free signal of sample ``index`` at times ``t``: ``[len(t), C]``."""
    f = np.asarray(frequencies)[None, None, :]
    amp, phase = params["amplitude"][index][None], params["phase"][index][None]  # [1, C, R]
    periodic = (amp * np.cos(2 * np.pi * f * t[:, None, None] + phase)).sum(-1)
    return params["offset"][index][None] + params["trend"][index][None] * t[:, None] + periodic


def generate_synthetic_imts(n: int, config: SyntheticIMTSConfig | None = None, seed: int = 0) -> IMTSDataset:
    """``n`` samples of the synthetic IMTS task (see :class:`SyntheticIMTSConfig`), reproducible by seed."""
    cfg = config or SyntheticIMTSConfig()
    if not isinstance(n, int) or n < 1:
        raise input_error("generate_synthetic_imts", "n", "a positive int", n)
    rng = np.random.default_rng(seed)
    c, r = cfg.num_channels, len(cfg.frequencies)
    params = {"offset": rng.normal(0, cfg.offset_std, (n, c)), "trend": rng.normal(0, cfg.trend_std, (n, c)),
              "amplitude": rng.uniform(*cfg.amplitude_range, (n, c, r)), "phase": rng.uniform(0, 2 * np.pi, (n, c, r))}
    samples = []
    for i in range(n):
        times, channels = [], []
        for ch in range(c):
            if rng.random() < cfg.empty_channel_prob:
                continue
            pts = rng.uniform(0, 1, rng.poisson(rng.uniform(*cfg.rate_range)))
            if rng.random() < cfg.burst_prob:
                centre = rng.uniform(0, 1)
                size = rng.integers(*cfg.burst_size, endpoint=True)
                burst = centre + rng.uniform(-cfg.burst_width / 2, cfg.burst_width / 2, size)
                pts = np.concatenate([pts, np.clip(burst, 0, 1)])
            pts = pts[rng.random(len(pts)) >= rng.uniform(*cfg.dropout_range)]
            times.append(pts)
            channels.append(np.full(len(pts), ch))
        t = np.concatenate(times) if times else np.zeros(0)
        ch_of = np.concatenate(channels).astype(int) if channels else np.zeros(0, int)
        if len(t) == 0:  # a sample needs some history: observe one channel once
            t, ch_of = rng.uniform(0, 1, 1), rng.integers(0, c, 1)
        order = np.argsort(t, kind="stable")
        t, ch_of = t[order], ch_of[order]
        mask = np.zeros((len(t), c), bool)
        mask[np.arange(len(t)), ch_of] = True
        clean = synthetic_signal(params, i, t, cfg.frequencies)
        values = clean + rng.normal(0, cfg.noise_std, clean.shape)
        h = int(rng.integers(*cfg.num_queries, endpoint=True))
        tau = np.sort(rng.uniform(*cfg.horizon, h))
        target_mask = rng.random((h, c)) < cfg.query_observe_prob
        target_mask[np.arange(h), rng.integers(0, c, h)] = True
        targets = synthetic_signal(params, i, tau, cfg.frequencies) + rng.normal(0, cfg.noise_std, (h, c))
        samples.append(_sample(values, t, mask, tau, targets, target_mask))
    info = {"source": "synthetic", "frequencies": tuple(cfg.frequencies), "params": params, "config": cfg, "seed": seed}
    return IMTSDataset(samples, [f"x{j}" for j in range(c)], info)


def make_synthetic_imts(sizes: tuple[int, int, int] = (3000, 500, 500), config: SyntheticIMTSConfig | None = None,
                        seed: int = 0) -> IMTSSplits:
    """Train/validation/test splits, each generated from its own stream (seeds ``1000 seed + 0, 1, 2``)."""
    cfg = config or SyntheticIMTSConfig()
    parts = [generate_synthetic_imts(n, cfg, seed=1000 * seed + j) for j, n in enumerate(sizes)]
    return IMTSSplits(*parts, info={"source": "synthetic", "frequencies": tuple(cfg.frequencies), "config": cfg})


# ---------------------------------------------------------------------------------------------
# Mauna Loa CO2 (statsmodels)
# ---------------------------------------------------------------------------------------------
def co2_weekly() -> np.ndarray:
    """Weekly Mauna Loa CO2 from 1958-03-29 (2284 weeks, NaN where the record has a gap).

    Read from ``co2.csv`` inside the installed statsmodels package (nothing is downloaded).
    """
    try:
        import statsmodels
    except ImportError as exc:  # pragma: no cover - statsmodels is a dependency
        raise ImportError("load_co2_imts needs statsmodels (it ships the co2 data): pip install statsmodels") from exc
    path = Path(statsmodels.__file__).parent / "datasets" / "co2" / "co2.csv"
    rows = path.read_text().strip().splitlines()[1:]
    return np.array([float(v) if v.strip() else np.nan for _, v in (row.split(",") for row in rows)])


def load_co2_imts(history: int = 156, horizon: int = 52, stride: int = 4, keep: float = 0.5,
                  split: tuple[float, float] = (0.6, 0.2), seed: int = 0) -> IMTSSplits:
    """Forecast ``horizon`` weeks of CO2 from ``history`` weeks with a fraction ``keep`` observed.

    The series is cut chronologically into train/validation/test segments (``split`` fractions of
    the weeks, the rest is test); windows of ``history + horizon`` weeks slide by ``stride`` inside
    each segment, so no window crosses a split. Besides the record's genuine gaps, each history
    week is kept with probability ``keep`` (seeded). Each window is normalised by the mean and
    std of its observed history; times are weeks / ``history`` (history in [0, 1)).
    """
    if not 0 < keep <= 1:
        raise input_error("load_co2_imts", "keep", "a fraction in (0, 1]", keep)
    series = co2_weekly()
    rng = np.random.default_rng(seed)
    n = len(series)
    bounds = [0, int(split[0] * n), int((split[0] + split[1]) * n), n]
    window = history + horizon
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        samples = []
        for start in range(lo, hi - window + 1, stride):
            hist, fut = series[start:start + history], series[start + history:start + window]
            mask = np.isfinite(hist) & (rng.random(history) < keep)
            if mask.sum() < 2 or not np.isfinite(fut).any():
                continue
            mean, std = hist[mask].mean(), max(hist[mask].std(), 1e-6)
            times = np.arange(history) / history
            tau = (history + np.arange(horizon)) / history
            fut_mask = np.isfinite(fut)
            samples.append(_sample(((hist - mean) / std)[:, None], times, mask[:, None], tau,
                                   np.nan_to_num((fut - mean) / std)[:, None], fut_mask[:, None]))
        parts.append(IMTSDataset(samples, ["co2"], {"source": "co2", "history": history, "horizon": horizon}))
    cycles = history / 52.1775  # the annual cycle, in cycles per history window
    return IMTSSplits(*parts, info={"source": "co2", "annual_cycles_per_window": cycles, "weeks": n,
                                    "missing_weeks": int(np.isnan(series).sum())})


# ---------------------------------------------------------------------------------------------
# PhysioNet/CinC Challenge 2012
# ---------------------------------------------------------------------------------------------
#: t-PatchGNN's variable list (Latent ODE's): 4 static descriptors, then the time series (Weight is both).
PHYSIONET_VARIABLES = (
    "Age", "Gender", "Height", "ICUType", "Weight", "Albumin", "ALP", "ALT", "AST", "Bilirubin", "BUN",
    "Cholesterol", "Creatinine", "DiasABP", "FiO2", "GCS", "Glucose", "HCO3", "HCT", "HR", "K", "Lactate", "Mg",
    "MAP", "MechVent", "Na", "NIDiasABP", "NIMAP", "NISysABP", "PaCO2", "PaO2", "pH", "Platelets", "RespRate",
    "SaO2", "SysABP", "Temp", "TroponinI", "TroponinT", "Urine", "WBC")
PHYSIONET_STATIC = ("RecordID", "Age", "Gender", "Height", "ICUType", "Weight")
#: protocol -> (history hours, forecast hours after the history, or None; forecast steps, or None)
PHYSIONET_PROTOCOLS = {"tpatchgnn": (24.0, 24.0, None), "apn": (36.0, None, 3)}


def read_physionet_record(path: str | os.PathLike) -> dict[str, Any]:
    """Parse one record file: ``{"record_id", "static": {name: value}, "observations": [(hours, name, value)]}``.

    Rows are ``Time,Parameter,Value`` with ``Time`` as ``HH:MM`` since admission; the static
    descriptors are the rows at 00:00 named in :data:`PHYSIONET_STATIC` (-1 means unknown).
    """
    path = Path(path)
    lines = [ln.strip() for ln in path.read_text().splitlines() if ln.strip()]
    if not lines or lines[0].replace(" ", "") != "Time,Parameter,Value":
        raise input_error("read_physionet_record", str(path),
                          "a PhysioNet 2012 record starting with 'Time,Parameter,Value'",
                          lines[0][:40] if lines else described("an empty file"))
    static, observations = {}, []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split(",")
        try:
            stamp, name, value = parts[0], parts[1].strip(), float(parts[2])
            hh, mm = stamp.split(":")
            hours = int(hh) + int(mm) / 60.0
        except (ValueError, IndexError):
            raise input_error("read_physionet_record", f"{path}:{number}", "'HH:MM,Parameter,Value'", line) from None
        if hours == 0 and name in PHYSIONET_STATIC and name not in static:
            static[name] = value
            if name == "RecordID":
                continue
            if value == -1:  # an unknown descriptor: not an observation
                continue
        observations.append((hours, name, value))
    record_id = str(int(static["RecordID"])) if "RecordID" in static else path.stem
    return {"record_id": record_id, "static": static, "observations": observations}


def load_physionet2012(folder: str | os.PathLike, protocol: str = "tpatchgnn", *,
                       variables: Sequence[str] = PHYSIONET_VARIABLES, include_static: bool = True,
                       normalization: str = "zscore", split: tuple[float, float, float] = (0.6, 0.2, 0.2),
                       seed: int = 0) -> IMTSSplits:
    """PhysioNet 2012 records from ``folder`` (searched recursively for ``*.txt``) as IMTS splits.

    Protocols (``PHYSIONET_PROTOCOLS``): ``"tpatchgnn"`` observes the first 24 h and forecasts
    every observation in the next 24 h (t-PatchGNN, ICML 2024); ``"apn"`` observes 36 h and
    forecasts the next 3 observation times (APN / PyOmniTS). Several values of one variable at one
    time are averaged (t-PatchGNN's ``reduce="average"``). With ``include_static`` the static
    descriptors in ``variables`` are observations at time 0 (t-PatchGNN keeps them; -1 = unknown
    is dropped). Records are split at random by ``split`` (seeded); per-variable ``"zscore"`` or
    ``"minmax"`` statistics are fit on the training records only and applied to all splits.
    Times are hours / history hours (history [0, 1]). Records with no observation in the history
    or none to forecast are left out (counted in ``info["dropped"]``). Files that are not records
    (e.g. ``Outcomes-a.txt``) are skipped.
    """
    if protocol not in PHYSIONET_PROTOCOLS:
        raise input_error("load_physionet2012", "protocol", f"one of {tuple(PHYSIONET_PROTOCOLS)}", protocol)
    if normalization not in ("zscore", "minmax"):
        raise input_error("load_physionet2012", "normalization", "'zscore' or 'minmax'", normalization)
    if len(split) != 3 or abs(sum(split) - 1) > 1e-6 or min(split) < 0:
        raise input_error("load_physionet2012", "split", "three fractions summing to 1", split)
    folder = Path(folder)
    if not folder.is_dir():
        raise input_error("load_physionet2012", "folder", "a directory of record files", str(folder))
    records = []
    for path in sorted(folder.rglob("*.txt")):
        with path.open() as handle:
            first = handle.readline().replace(" ", "").strip()
        if first == "Time,Parameter,Value":
            records.append(read_physionet_record(path))
    if not records:
        raise input_error("load_physionet2012", "folder", "record files ('Time,Parameter,Value' .txt)",
                          described(f"none under {str(folder)!r}"))
    history_h, horizon_h, steps = PHYSIONET_PROTOCOLS[protocol]
    column = {name: j for j, name in enumerate(variables)}
    skip = set() if include_static else set(PHYSIONET_STATIC)

    def to_arrays(record):  # union times (hours) and [T, C] values/mask, duplicates averaged
        sums: dict[float, np.ndarray] = {}
        counts: dict[float, np.ndarray] = {}
        for hours, name, value in record["observations"]:
            if name not in column or (name in skip and hours == 0):
                continue
            if hours not in sums:
                sums[hours], counts[hours] = np.zeros(len(variables)), np.zeros(len(variables))
            sums[hours][column[name]] += value
            counts[hours][column[name]] += 1
        times = np.array(sorted(sums))
        if not len(times):
            return times, np.zeros((0, len(variables))), np.zeros((0, len(variables)), bool)
        cnt = np.stack([counts[h] for h in times])
        return times, np.stack([sums[h] for h in times]) / np.maximum(cnt, 1), cnt > 0

    rng = np.random.default_rng(seed)
    order = rng.permutation(len(records))
    n_train, n_val = int(round(split[0] * len(records))), int(round(split[1] * len(records)))
    groups = [order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]]
    arrays = [to_arrays(r) for r in records]
    stats = np.zeros((2, len(variables)))
    for j in range(len(variables)):
        seen = np.concatenate([arrays[i][1][arrays[i][2][:, j], j] for i in groups[0]] or [np.zeros(0)])
        if not len(seen):
            stats[:, j] = (0.0, 1.0)
        elif normalization == "zscore":
            stats[:, j] = (seen.mean(), seen.std() if seen.std() > 0 else 1.0)
        else:
            stats[:, j] = (seen.min(), seen.max() - seen.min() if seen.max() > seen.min() else 1.0)
    parts, dropped = [], {"no_history": 0, "no_forecast": 0}
    for g in groups:
        samples, ids = [], []
        for i in g:
            times, vals, mask = arrays[i]
            vals = (vals - stats[0]) / stats[1]
            hist = times < history_h  # t-PatchGNN: observed strictly before the cut
            fut = ~hist
            if horizon_h is not None:
                fut &= times <= history_h + horizon_h
            fut_idx = np.flatnonzero(fut & mask.any(1))[: steps or None]
            if not mask[hist].any():
                dropped["no_history"] += 1
                continue
            if not len(fut_idx):
                dropped["no_forecast"] += 1
                continue
            samples.append(_sample(vals[hist], times[hist] / history_h, mask[hist], times[fut_idx] / history_h,
                                   vals[fut_idx], mask[fut_idx]))
            ids.append(records[i]["record_id"])
        parts.append(IMTSDataset(samples, variables, {"source": "physionet2012", "record_ids": ids}))
    info = {"source": "physionet2012", "protocol": protocol,
            "split_record_ids": {name: [records[i]["record_id"] for i in g]
                                 for name, g in zip(("train", "validation", "test"), groups)},
            "history_hours": history_h, "horizon_hours": horizon_h,
            "forecast_steps": steps, "normalization": normalization, "variables": tuple(variables),
            "center": stats[0], "scale": stats[1], "dropped": dropped, "records": len(records)}
    return IMTSSplits(*parts, info=info)


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------
def forecast_errors(forecasts, targets, target_mask) -> dict[str, float]:
    """Sums over observed targets: ``{"se", "ae", "count"}`` (pool batches, then divide)."""
    forecasts, targets, target_mask = (torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v
                                       for v in (forecasts, targets, target_mask))
    target_mask = target_mask.bool() if target_mask.dtype == torch.bool else target_mask == 1
    # Trainer pads concatenated batches with IGNORE_INDEX (-100; a bool mask padded so reads True): not a target
    target_mask = target_mask & ~((targets == IGNORE_INDEX) & (forecasts == IGNORE_INDEX))
    err = torch.where(target_mask, forecasts.double() - torch.where(target_mask, targets, 0).double(), 0.0)
    return {"se": float(err.pow(2).sum()), "ae": float(err.abs().sum()), "count": int(target_mask.sum())}


def compute_forecast_metrics(eval_pred) -> dict[str, float]:
    """``compute_metrics`` for ``Trainer``: masked MSE and MAE over all observed targets.

    Use with ``label_names=["targets", "target_mask"]`` and, preferably,
    ``eval_do_concat_batches=False`` (batches keep their own horizon length). With concatenation,
    Trainer pads horizons with -100; slots where both forecast and target are -100 are ignored.
    """
    preds, labels = eval_pred.predictions, eval_pred.label_ids
    if labels is None or (isinstance(labels, (tuple, list)) and len(labels) == 0):
        raise input_error("compute_forecast_metrics", "eval_pred.label_ids",
                          "(targets, target_mask): set TrainingArguments(label_names=['targets', 'target_mask'])",
                          described("no labels"))
    batches = list(zip(preds, labels)) if isinstance(preds, list) else [(preds, labels)]
    total = {"se": 0.0, "ae": 0.0, "count": 0}
    for pred, (targets, target_mask) in batches:
        forecasts = pred[0] if isinstance(pred, (tuple, list)) else pred
        for key, value in forecast_errors(forecasts, targets, target_mask).items():
            total[key] += value
    n = max(total["count"], 1)
    return {"mse": total["se"] / n, "mae": total["ae"] / n}


@torch.no_grad()
def evaluate_forecaster(model: nn.Module, dataset: IMTSDataset, batch_size: int = 128, device=None) -> dict[str, float]:
    """Masked MSE and MAE of ``model`` over every observed target of ``dataset``."""
    was_training = model.training
    model.eval()
    collate = IMTSCollator()
    total = {"se": 0.0, "ae": 0.0, "count": 0}
    for start in range(0, len(dataset), batch_size):
        batch = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
        if device is not None:
            batch = {k: v.to(device) for k, v in batch.items()}
        out = model(batch["values"], batch["times"], batch["mask"], batch["query_times"])
        for key, value in forecast_errors(out.forecasts, batch["targets"], batch["target_mask"]).items():
            total[key] += value
    model.train(was_training)
    n = max(total["count"], 1)
    return {"mse": total["se"] / n, "mae": total["ae"] / n, "count": total["count"]}


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------
class _Baseline(nn.Module):
    """Shared forward: validate, predict ``[B, H, C]``, masked MSE loss with targets."""

    def predict(self, values, times, mask, query_times):  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, values, times, mask, query_times, targets=None, target_mask=None, **kwargs):
        mask, target_mask = check_imts_inputs(values, times, mask, query_times, targets, target_mask,
                                              function=type(self).__name__)
        forecasts = self.predict(torch.where(mask, values, 0.0), torch.where(mask.any(-1), times, 0.0), mask,
                                 torch.where(torch.isfinite(query_times), query_times, 0.0))
        loss = masked_mse(forecasts, targets, target_mask) if targets is not None else None
        return TFMixerForecastOutput(loss=loss, forecasts=forecasts, forecast_loss=loss)


class LOCFForecaster(_Baseline):
    """Last observation carried forward, per channel (``fill_value`` for a channel with no history)."""

    def __init__(self, fill_value: float = 0.0):
        super().__init__()
        self.fill_value = fill_value

    def predict(self, values, times, mask, query_times):
        latest = torch.where(mask, times[..., None], -torch.inf).argmax(1, keepdim=True)  # [B, 1, C]
        last = values.gather(1, latest)[:, 0]
        last = torch.where(mask.any(1), last, self.fill_value)
        return last[:, None].expand(-1, query_times.shape[1], -1)


class HistoryMeanForecaster(_Baseline):
    """The mean of each channel's observed history (``fill_value`` for an empty channel)."""

    def __init__(self, fill_value: float = 0.0):
        super().__init__()
        self.fill_value = fill_value

    def predict(self, values, times, mask, query_times):
        count = mask.sum(1)
        mean = torch.where(count > 0, values.sum(1) / count.clamp(min=1), self.fill_value)
        return mean[:, None].expand(-1, query_times.shape[1], -1)


class MTANForecaster(_Baseline):
    """mTAN (Shukla & Marlin, "Multi-Time Attention Networks for Irregularly Sampled Time Series",
    ICLR 2021), deterministic encoder-decoder (mTAND-Enc + mTAND-Dec, no VAE), small.

    Chosen over GRU-D because it takes the raw timestamps and arbitrary query times natively (GRU-D
    needs a step sequence and forecasts by rolling out), and because it runs in parallel over time,
    where GRU-D loops over every observation (slow on CPU). Each channel is read into
    ``num_reference`` reference points by multi-time attention (a softmax over that channel's
    observed times only), a bidirectional GRU runs over the reference points, and the decoder
    attends from each query time to them. ``instance_norm`` removes the channel's history mean,
    as TFMixer does, for a like-for-like comparison.
    """

    def __init__(self, num_channels: int, hidden_size: int = 32, num_reference: int = 16, time_dim: int = 16,
                 num_heads: int = 1, instance_norm: bool = True):
        super().__init__()
        self.num_heads, self.instance_norm = num_heads, instance_norm
        self.encoding = TimeEncoding(time_dim, max_cycles=num_reference)
        self.register_buffer("reference", torch.linspace(0, 1, num_reference), persistent=False)
        self.enc_q, self.enc_k = nn.Linear(time_dim, time_dim * num_heads), nn.Linear(time_dim, time_dim * num_heads)
        self.enc_in = nn.Linear(2 * num_channels * num_heads, hidden_size)
        self.gru = nn.GRU(hidden_size, hidden_size, batch_first=True, bidirectional=True)
        self.dec_q, self.dec_k = nn.Linear(time_dim, time_dim), nn.Linear(time_dim, time_dim)
        self.dec_out = nn.Sequential(nn.Linear(2 * hidden_size, hidden_size), nn.GELU(),
                                     nn.Linear(hidden_size, num_channels))
        with torch.no_grad():
            self.encoding.periodic.weight.copy_(self.encoding.initial_frequencies())

    def predict(self, values, times, mask, query_times):
        b, length, c = values.shape
        h, e = self.num_heads, self.encoding.periodic.out_features + 1
        level = values.new_zeros(b, c)
        if self.instance_norm:
            level = values.sum(1) / mask.sum(1).clamp(min=1)
            values = torch.where(mask, values - level[:, None], 0.0)
        ref = self.encoding(self.reference)  # [R, E]
        q = self.enc_q(ref).view(-1, h, e).transpose(0, 1)  # [h, R, E]
        k = self.enc_k(self.encoding(times)).view(b, length, h, e).permute(0, 2, 3, 1)  # [B, h, E, L]
        scores = (q[None] @ k) / math.sqrt(e)  # [B, h, R, L]
        weights = torch.exp(scores - scores.amax(-1, keepdim=True).detach())[..., None] * mask[:, None, None]
        weights = weights / weights.sum(3, keepdim=True).clamp(min=torch.finfo(values.dtype).tiny)  # per channel
        inputs = torch.stack([values, mask.to(values.dtype)], -1)  # [B, L, C, 2]
        read = torch.einsum("bhrlc,blcv->brhcv", weights, inputs).reshape(b, len(self.reference), -1)
        latent, _ = self.gru(torch.relu(self.enc_in(read)))  # [B, R, 2 hidden]
        att = self.dec_q(self.encoding(query_times)) @ self.dec_k(ref).T / math.sqrt(e)  # [B, H, R]
        decoded = torch.softmax(att, -1) @ latent
        return self.dec_out(decoded) + level[:, None]


__all__ = ["HistoryMeanForecaster", "IMTSCollator", "IMTSDataset", "IMTSSplits", "LOCFForecaster", "MTANForecaster",
           "PHYSIONET_PROTOCOLS", "PHYSIONET_VARIABLES", "SyntheticIMTSConfig", "co2_weekly",
           "compute_forecast_metrics",
           "evaluate_forecaster", "forecast_errors", "generate_synthetic_imts", "load_co2_imts", "load_physionet2012",
           "make_synthetic_imts", "read_physionet_record", "synthetic_signal"]
