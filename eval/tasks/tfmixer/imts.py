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
:func:`load_physionet2012` (the PhysioNet/CinC Challenge 2012 records, from the archive or folder the
user gives; nothing is downloaded; it lives in :mod:`icml26.eval.tasks.tfmixer.physionet2012` and is re-exported
here). Baselines: :class:`LOCFForecaster`, :class:`HistoryMeanForecaster`
and :class:`MTANForecaster` (a small deterministic mTAN, Shukla & Marlin, ICLR 2021).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence
from torch import nn

from icml26.errors import described, input_error
from icml26.models.tfmixer.modeling import (LOSS_REDUCTIONS, TFMixerForecastOutput, TimeEncoding, check_imts_inputs,
                                   masked_mse)
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
        for i, s in enumerate(samples):
            if s["values"].shape[-1] != c or s["targets"].shape[-1] != c:
                raise input_error("IMTSCollator", f"sample {i}", f"{c} channels like sample 0",
                                  described(f"values {tuple(s['values'].shape)} and targets "
                                            f"{tuple(s['targets'].shape)}"))
        length = self._round(max(s["values"].shape[0] for s in samples))
        horizon = self._round(max(s["query_times"].shape[0] for s in samples))
        out = {}
        for key in KEYS:  # one padding call per key, not a copy per sample and key
            padded = pad_sequence([s[key] for s in samples], batch_first=True)
            size = length if key in ("values", "times", "mask") else horizon
            if padded.shape[1] < size:
                extra = padded.new_zeros((len(samples), size - padded.shape[1], *padded.shape[2:]))
                padded = torch.cat([padded, extra], 1)
            out[key] = padded.bool() if key.endswith("mask") else padded.float()
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
# Metrics
# ---------------------------------------------------------------------------------------------
def forecast_errors(forecasts, targets, target_mask, per_variable: bool = False) -> dict:
    """Sums over observed targets: ``{"se", "ae", "count"}`` (pool batches, then divide).

    With ``per_variable`` each sum is a ``[C]`` float64 array (one per channel, the last axis) for
    :func:`reduce_forecast_errors`; otherwise floats.
    """
    forecasts, targets, target_mask = (torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v
                                       for v in (forecasts, targets, target_mask))
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


# ---------------------------------------------------------------------------------------------
# Baselines
# ---------------------------------------------------------------------------------------------
class _Baseline(nn.Module):
    """Shared forward: validate, predict ``[B, H, C]``, masked MSE loss with targets
    (``loss_reduction`` as :class:`~icml26.models.tfmixer.modeling.TFMixerConfig`'s)."""

    loss_reduction = "pooled"

    def predict(self, values, times, mask, query_times):  # pragma: no cover - abstract
        raise NotImplementedError

    def forward(self, values, times, mask, query_times, targets=None, target_mask=None, **kwargs):
        mask, target_mask = check_imts_inputs(values, times, mask, query_times, targets, target_mask,
                                              function=type(self).__name__)
        forecasts = self.predict(torch.where(mask, values, 0.0), torch.where(mask.any(-1), times, 0.0), mask,
                                 torch.where(torch.isfinite(query_times), query_times, 0.0))
        loss = masked_mse(forecasts, targets, target_mask, self.loss_reduction) if targets is not None else None
        return TFMixerForecastOutput(loss=loss, forecasts=forecasts, forecast_loss=loss)


class _FillBaseline(_Baseline):
    """A baseline that forecasts ``fill_value`` for a channel with no history: one number, or one per
    channel (``[C]``, e.g. the training mean, as t-PatchGNN's protocol fills empty channels)."""

    def __init__(self, fill_value: float | Sequence[float] | torch.Tensor | np.ndarray = 0.0):
        super().__init__()
        fill = torch.as_tensor(np.asarray(fill_value, dtype=np.float32) if not isinstance(fill_value, torch.Tensor)
                               else fill_value, dtype=torch.float32)
        if fill.ndim > 1 or not torch.isfinite(fill).all():
            raise input_error(type(self).__name__, "fill_value", "a finite number or a [C] vector",
                              described(f"shape {tuple(fill.shape)}"))
        self.register_buffer("fill_value", fill, persistent=False)

    def _fill(self, estimate: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
        fill = self.fill_value.to(estimate)
        if fill.ndim == 1 and fill.shape[0] != estimate.shape[-1]:
            raise input_error(type(self).__name__, "fill_value", f"{estimate.shape[-1]} values (one per channel)",
                              described(f"{fill.shape[0]} values"))
        return torch.where(observed, estimate, fill)


def _last_and_mean(values, times, mask):
    """Each channel's last observed value and observed mean, ``[B, C]`` each (0 where it has none)."""
    latest = torch.where(mask, times[..., None], -torch.inf).argmax(1, keepdim=True)  # [B, 1, C]
    count = mask.sum(1)
    return values.gather(1, latest)[:, 0], values.sum(1) / count.clamp(min=1)


class LOCFForecaster(_FillBaseline):
    """Last observation carried forward, per channel (``fill_value`` for a channel with no history)."""

    def predict(self, values, times, mask, query_times):
        last = self._fill(_last_and_mean(values, times, mask)[0], mask.any(1))
        return last[:, None].expand(-1, query_times.shape[1], -1)


class HistoryMeanForecaster(_FillBaseline):
    """The mean of each channel's observed history (``fill_value`` for an empty channel)."""

    def predict(self, values, times, mask, query_times):
        mean = self._fill(_last_and_mean(values, times, mask)[1], mask.any(1))
        return mean[:, None].expand(-1, query_times.shape[1], -1)


class MeanReversionForecaster(_FillBaseline):
    """A linear baseline of ours: ``last + a_c (mean - last) + b_c (fill_c - last) + d_c`` per channel,
    ``a, b, d`` fitted by least squares on a training split (:meth:`fit`); before fitting it is LOCF.

    The head TFMixer's ``forecast_level="blend"`` learns, alone: how far each variable reverts from its
    last value to the stay's mean and to the population's (``fill_value``, e.g. the training mean).
    Written by hand: 3 numbers per channel from a closed-form least-squares fit (``numpy.linalg.lstsq``).
    """

    def __init__(self, fill_value=0.0):
        super().__init__(fill_value)
        self.register_buffer("coef", torch.zeros(0, 3), persistent=False)

    def _parts(self, values, times, mask):
        last, mean = _last_and_mean(values, times, mask)
        observed = mask.any(1)
        fill = self._fill(torch.zeros_like(last), torch.zeros_like(observed))  # fill_value everywhere
        return self._fill(last, observed), self._fill(mean, observed), fill

    def fit(self, dataset: IMTSDataset, batch_size: int = 512) -> "MeanReversionForecaster":
        """Fit ``a, b, d`` per channel on every observed target of ``dataset``; returns self."""
        collate = IMTSCollator()
        rows: list[list[np.ndarray]] = []
        for start in range(0, len(dataset), batch_size):
            b = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            last, mean, fill = self._parts(b["values"], b["times"], b["mask"])
            if not rows:
                rows = [[] for _ in range(last.shape[-1])]
            for c in range(last.shape[-1]):
                tm = b["target_mask"][:, :, c]
                rep = lambda z: z[:, c, None].expand_as(tm)[tm]  # noqa: E731
                l_, m_, f_ = rep(last), rep(mean), rep(fill)
                rows[c].append(np.stack([(m_ - l_).numpy(), (f_ - l_).numpy(), np.ones(len(l_)),
                                         (b["targets"][:, :, c][tm] - l_).numpy()], 1))
        coef = np.zeros((len(rows), 3))
        for c, parts in enumerate(rows):
            data = np.concatenate(parts) if parts else np.zeros((0, 4))
            if len(data):
                coef[c] = np.linalg.lstsq(data[:, :3], data[:, 3], rcond=None)[0]
        self.coef = torch.as_tensor(coef, dtype=torch.float32)
        return self

    def predict(self, values, times, mask, query_times):
        last, mean, fill = self._parts(values, times, mask)
        coef = self.coef.to(last) if len(self.coef) else last.new_zeros(last.shape[-1], 3)
        level = last + coef[:, 0] * (mean - last) + coef[:, 1] * (fill - last) + coef[:, 2]
        return torch.where(mask.any(1), level, fill)[:, None].expand(-1, query_times.shape[1], -1)


class MTANForecaster(_FillBaseline):
    """mTAN (Shukla & Marlin, "Multi-Time Attention Networks for Irregularly Sampled Time Series",
    ICLR 2021), deterministic encoder-decoder (mTAND-Enc + mTAND-Dec, no VAE), small.

    Chosen over GRU-D because it takes the raw timestamps and arbitrary query times natively (GRU-D
    needs a step sequence and forecasts by rolling out), and because it runs in parallel over time,
    where GRU-D loops over every observation (slow on CPU). Each channel is read into
    ``num_reference`` reference points by multi-time attention (a softmax over that channel's
    observed times only), a bidirectional GRU runs over the reference points, and the decoder
    attends from each query time to them. ``instance_norm`` removes the channel's history mean,
    as TFMixer does, for a like-for-like comparison; ``fill_value`` is then the level of a channel
    with no history (as TFMixer's ``channel_fallback``, here fixed), and ``loss_reduction`` as
    TFMixer's.
    """

    def __init__(self, num_channels: int, hidden_size: int = 32, num_reference: int = 16, time_dim: int = 16,
                 num_heads: int = 1, instance_norm: bool = True,
                 fill_value: float | Sequence[float] | torch.Tensor | np.ndarray = 0.0, loss_reduction: str = "pooled"):
        super().__init__(fill_value)
        if loss_reduction not in LOSS_REDUCTIONS:
            raise input_error("MTANForecaster", "loss_reduction", f"one of {LOSS_REDUCTIONS}", loss_reduction)
        self.num_heads, self.instance_norm, self.loss_reduction = num_heads, instance_norm, loss_reduction
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
            count = mask.sum(1)
            level = values.sum(1) / count.clamp(min=1)
            values = torch.where(mask, values - level[:, None], 0.0)
            level = self._fill(level, count > 0)
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


__all__ = ["HistoryMeanForecaster", "IMTSCollator", "IMTSDataset", "IMTSSplits", "LOCFForecaster", "METRICS",
           "MeanReversionForecaster",
           "MTANForecaster", "SyntheticIMTSConfig", "co2_weekly", "compute_forecast_metrics", "evaluate_forecaster",
           "forecast_errors", "generate_synthetic_imts", "load_co2_imts", "make_synthetic_imts",
           "reduce_forecast_errors", "synthetic_signal"]
