"""Forecasting baselines of the TFMixer experiments, on the same IMTS batches and outputs as TFMixer.

:class:`LOCFForecaster` (last observation carried forward), :class:`HistoryMeanForecaster`,
:class:`MeanReversionForecaster` (a per-channel blend of LOCF, the stay's mean and the population's, fitted by
least squares) and :class:`MTANForecaster` (a small deterministic mTAN, Shukla & Marlin, ICLR 2021). Each returns a
:class:`~icml26.models.tfmixer.TFMixerForecastOutput` with ``loss`` when targets are given.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn

from icml26.errors import described, input_error
from icml26.models.tfmixer.data import IMTSCollator, IMTSDataset
from icml26.models.tfmixer.modeling import (
    LOSS_REDUCTIONS,
    TFMixerForecastOutput,
    TimeEncoding,
    check_imts_inputs,
    masked_mse,
)
from icml26.validation import check_int

__all__ = ["HistoryMeanForecaster", "LOCFForecaster", "MTANForecaster", "MeanReversionForecaster"]


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

    def fit(self, dataset: IMTSDataset, batch_size: int = 512) -> MeanReversionForecaster:
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
        for name, value, low in (("num_channels", num_channels, 1), ("hidden_size", hidden_size, 1),
                                 ("num_reference", num_reference, 1), ("time_dim", time_dim, 2),
                                 ("num_heads", num_heads, 1)):
            check_int("MTANForecaster", name, value, low=low)
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
