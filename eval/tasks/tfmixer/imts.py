"""Irregular multivariate time series (IMTS) forecasting tasks and metrics for TFMixer.

Every data set here is an :class:`icml26.models.tfmixer.IMTSDataset` of samples in the format TFMixer takes
(see :mod:`icml26.models.tfmixer.data`).

Sources: :func:`make_synthetic_imts` (seeded; our generator, see :class:`SyntheticIMTSConfig`), :func:`load_co2_imts` (the
weekly Mauna Loa CO2 record that ships inside statsmodels, with its genuine gaps) and
:func:`load_physionet2012` (the PhysioNet/CinC Challenge 2012 records, from the archive or folder the
user gives; nothing is downloaded; :mod:`icml26.eval.tasks.tfmixer.physionet2012`). The baselines are models:
:mod:`icml26.models.tfmixer.baselines`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from icml26.errors import describe, described, input_error
from icml26.models.tfmixer.data import IMTSCollator, IMTSDataset, IMTSSplits, imts_sample
from icml26.utils import IGNORE_INDEX
from icml26.validation import check_finite, check_int


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

    def __post_init__(self) -> None:
        fn = "SyntheticIMTSConfig"
        check_int(fn, "num_channels", self.num_channels, low=1)
        if isinstance(self.frequencies, (str, bytes)) or not hasattr(self.frequencies, "__len__") \
                or len(self.frequencies) == 0:
            raise input_error(fn, "frequencies", "a non-empty tuple of frequencies (cycles per history window)",
                              self.frequencies)
        for i, f in enumerate(self.frequencies):
            check_finite(fn, f"frequencies[{i}]", f, non_negative=True)
        for name in ("offset_std", "trend_std", "noise_std", "burst_width"):
            check_finite(fn, name, getattr(self, name), non_negative=True)
        for name in ("burst_prob", "empty_channel_prob", "query_observe_prob"):
            check_finite(fn, name, getattr(self, name), low=0, high=1)
        ranges = {"amplitude_range": {"non_negative": True}, "rate_range": {"non_negative": True},
                  "dropout_range": {"low": 0, "high": 1, "high_open": True}, "horizon": {},
                  "burst_size": None, "num_queries": None}
        for name, bounds in ranges.items():
            pair = getattr(self, name)
            if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
                raise input_error(fn, name, "a pair (low, high)", pair)
            lo, hi = ((check_int(fn, name, v, low=1 if name == "num_queries" else 0) for v in pair) if bounds is None
                      else (check_finite(fn, name, v, **bounds) for v in pair))
            if lo > hi:
                raise input_error(fn, name, "a pair (low, high) with low <= high", pair)


def synthetic_signal(params: dict[str, np.ndarray], index: int, t: np.ndarray, frequencies) -> np.ndarray:
    """The noise-free signal of sample ``index`` at times ``t``: ``[len(t), C]``."""
    f = np.asarray(frequencies)[None, None, :]
    amp, phase = params["amplitude"][index][None], params["phase"][index][None]  # [1, C, R]
    periodic = (amp * np.cos(2 * np.pi * f * t[:, None, None] + phase)).sum(-1)
    return params["offset"][index][None] + params["trend"][index][None] * t[:, None] + periodic


def generate_synthetic_imts(n: int, config: SyntheticIMTSConfig | None = None, seed: int = 0) -> IMTSDataset:
    """``n`` samples of the synthetic IMTS task (see :class:`SyntheticIMTSConfig`), reproducible by seed."""
    cfg = _check_config("generate_synthetic_imts", config)
    check_int("generate_synthetic_imts", "n", n, low=1)
    check_int("generate_synthetic_imts", "seed", seed, low=0)
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
        samples.append(imts_sample(values, t, mask, tau, targets, target_mask))
    info = {"source": "synthetic", "frequencies": tuple(cfg.frequencies), "params": params, "config": cfg, "seed": seed}
    return IMTSDataset(samples, [f"x{j}" for j in range(c)], info)


def _check_config(function: str, config) -> SyntheticIMTSConfig:
    if config is None:
        return SyntheticIMTSConfig()
    if not isinstance(config, SyntheticIMTSConfig):
        raise TypeError(str(input_error(function, "config", "a SyntheticIMTSConfig or None",
                                        described(type(config).__name__))))
    return config


def make_synthetic_imts(sizes: tuple[int, int, int] = (3000, 500, 500), config: SyntheticIMTSConfig | None = None,
                        seed: int = 0) -> IMTSSplits:
    """Train/validation/test splits, each generated from its own stream (seeds ``1000 seed + 0, 1, 2``)."""
    fn = "make_synthetic_imts"
    cfg = _check_config(fn, config)
    if isinstance(sizes, (str, bytes)) or not hasattr(sizes, "__len__") or len(sizes) != 3 or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) and n >= 1 for n in sizes):
        raise input_error(fn, "sizes", "three positive ints (train, validation, test samples)", sizes)
    check_int(fn, "seed", seed, low=0)
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
    fn = "load_co2_imts"
    for name, value in (("history", history), ("horizon", horizon), ("stride", stride)):
        check_int(fn, name, value, low=1)
    check_finite(fn, "keep", keep, low=0, high=1, low_open=True)
    check_int(fn, "seed", seed, low=0)
    if isinstance(split, (str, bytes)) or not hasattr(split, "__len__") or len(split) != 2 or not all(
            isinstance(f, (int, float)) and not isinstance(f, bool) and 0 < f < 1 for f in split) or sum(split) >= 1:
        raise input_error(fn, "split", "two fractions in (0, 1) (train, validation) summing to less than 1 "
                          "(the rest is test)", split)
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
            samples.append(imts_sample(((hist - mean) / std)[:, None], times, mask[:, None], tau,
                                   np.nan_to_num((fut - mean) / std)[:, None], fut_mask[:, None]))
        parts.append(IMTSDataset(samples, ["co2"], {"source": "co2", "history": history, "horizon": horizon}))
    cycles = history / 52.1775  # the annual cycle, in cycles per history window
    return IMTSSplits(*parts, info={"source": "co2", "annual_cycles_per_window": cycles, "weeks": n,
                                    "missing_weeks": int(np.isnan(series).sum())})


# ---------------------------------------------------------------------------------------------
# Metrics
# ---------------------------------------------------------------------------------------------
def forecast_errors(forecasts, targets, target_mask, per_variable: bool = False) -> dict:
    """Sums over observed targets: ``{"se", "ae", "count"}`` (pool batches, then divide).

    With ``per_variable`` each sum is a ``[C]`` float64 array (one per channel, the last axis) for
    :func:`reduce_forecast_errors`; otherwise floats.
    """
    forecasts, targets, target_mask = (torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v
                                       for v in (forecasts, targets, target_mask))
    for name, value in (("targets", targets), ("target_mask", target_mask)):
        if value.shape != forecasts.shape:
            raise input_error("forecast_errors", name, f"the shape of forecasts {tuple(forecasts.shape)}",
                              describe(value))
    target_mask = target_mask.bool() if target_mask.dtype == torch.bool else target_mask == 1
    # Trainer pads concatenated batches with IGNORE_INDEX (-100; a bool mask padded so reads True): not a target
    target_mask = target_mask & ~((targets == IGNORE_INDEX) & (forecasts == IGNORE_INDEX))
    err = torch.where(target_mask, forecasts.double() - torch.where(target_mask, targets, 0).double(), 0.0)
    if per_variable:
        c = err.shape[-1]
        return {"se": err.pow(2).reshape(-1, c).sum(0).numpy(), "ae": err.abs().reshape(-1, c).sum(0).numpy(),
                "count": target_mask.reshape(-1, c).sum(0).double().numpy()}
    return {"se": float(err.pow(2).sum()), "ae": float(err.abs().sum()), "count": int(target_mask.sum())}


METRICS = ("pooled", "per_variable")


def reduce_forecast_errors(totals: dict, metric: str = "pooled") -> dict[str, float]:
    """MSE and MAE from per-variable sums (:func:`forecast_errors` with ``per_variable=True``).

    ``"pooled"`` divides the summed errors by the number of targets (every target weighs the same).
    ``"per_variable"`` is t-PatchGNN's (``usail-hkust/t-PatchGNN``, ``lib/evaluation.py``,
    ``evaluation``): each variable's mean error over the split, then the mean over the variables that
    have at least one target, so a lab measured twice a day weighs as much as the heart rate.
    """
    if metric not in METRICS:
        raise input_error("reduce_forecast_errors", "metric", f"one of {METRICS}", metric)
    if not isinstance(totals, dict) or not {"se", "ae", "count"} <= set(totals):
        raise input_error("reduce_forecast_errors", "totals", "a dict with 'se', 'ae' and 'count' (forecast_errors)",
                          described(str(sorted(totals)) if isinstance(totals, dict) else type(totals).__name__))
    se, ae, count = (np.asarray(totals[k], np.float64) for k in ("se", "ae", "count"))
    if metric == "pooled":
        n = max(count.sum(), 1)
        return {"mse": float(se.sum() / n), "mae": float(ae.sum() / n), "count": int(count.sum())}
    scored = count > 0
    k = max(int(scored.sum()), 1)
    return {"mse": float((se[scored] / count[scored]).sum() / k), "mae": float((ae[scored] / count[scored]).sum() / k),
            "count": int(count.sum()), "variables": int(scored.sum())}


def compute_forecast_metrics(eval_pred, metric: str = "pooled") -> dict[str, float]:
    """``compute_metrics`` for ``Trainer``: masked MSE and MAE over all observed targets.

    ``metric``: ``"pooled"`` or ``"per_variable"`` (t-PatchGNN's; pass
    ``functools.partial(compute_forecast_metrics, metric="per_variable")`` to select on it).
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
    total = {"se": 0.0, "ae": 0.0, "count": 0.0}
    for pred, (targets, target_mask) in batches:
        forecasts = pred[0] if isinstance(pred, (tuple, list)) else pred
        for key, value in forecast_errors(forecasts, targets, target_mask, per_variable=True).items():
            total[key] = total[key] + value
    result = reduce_forecast_errors(total, metric)
    return {"mse": result["mse"], "mae": result["mae"]}


@torch.no_grad()
def evaluate_forecaster(model: nn.Module, dataset: IMTSDataset, batch_size: int = 128, device=None,
                        metric: str | None = None, per_channel: bool = False) -> dict[str, Any]:
    """MSE and MAE of ``model`` over every observed target of ``dataset``.

    ``metric`` (see :func:`reduce_forecast_errors`): ``"pooled"`` or ``"per_variable"``; None takes
    the dataset's protocol (``dataset.info["metric"]``, as :func:`load_physionet2012` sets it), else pooled.
    ``per_channel``: add ``"channel_mse"``, ``"channel_mae"`` and ``"channel_count"``, one entry per
    channel (NaN errors where a channel has no target).
    """
    fn = "evaluate_forecaster"
    if not isinstance(model, nn.Module):
        raise TypeError(str(input_error(fn, "model", "a torch.nn.Module", described(type(model).__name__))))
    if not isinstance(dataset, IMTSDataset):
        raise TypeError(str(input_error(fn, "dataset", "an IMTSDataset (one split, e.g. splits.validation)",
                                        described(type(dataset).__name__))))
    if len(dataset) == 0:
        raise input_error(fn, "dataset", "at least one sample", described("an empty dataset"))
    check_int(fn, "batch_size", batch_size, low=1)
    metric = metric or dataset.info.get("metric", "pooled")
    if metric not in METRICS:
        raise input_error("evaluate_forecaster", "metric", f"one of {METRICS} or None", metric)
    was_training = model.training
    model.eval()
    collate = IMTSCollator()
    total = {"se": 0.0, "ae": 0.0, "count": 0.0}
    for start in range(0, len(dataset), batch_size):
        batch = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
        if device is not None:
            batch = {k: v.to(device) for k, v in batch.items()}
        out = model(batch["values"], batch["times"], batch["mask"], batch["query_times"])
        errors = forecast_errors(out.forecasts.cpu(), batch["targets"].cpu(), batch["target_mask"].cpu(),
                                 per_variable=True)
        for key, value in errors.items():
            total[key] = total[key] + value
    model.train(was_training)
    result: dict[str, Any] = reduce_forecast_errors(total, metric)
    if per_channel:
        count = np.asarray(total["count"], np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            result.update(channel_mse=(np.asarray(total["se"]) / count).tolist(),
                          channel_mae=(np.asarray(total["ae"]) / count).tolist(), channel_count=count.astype(int).tolist())
    return result


__all__ = ["METRICS", "SyntheticIMTSConfig", "co2_weekly", "compute_forecast_metrics", "evaluate_forecaster",
           "forecast_errors", "generate_synthetic_imts", "load_co2_imts", "make_synthetic_imts",
           "reduce_forecast_errors", "synthetic_signal"]
