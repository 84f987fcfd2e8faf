"""forecast_breakdown: the protocol's per-variable MSE by group, horizon and history count, checked in closed
form on a hand-built two-sample split, with a negative control and bad input."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from torch import nn

from icml26.errors import InputError
from icml26.eval.tasks.tfmixer import breakdown_rows, evaluate_forecaster, forecast_breakdown
from icml26.models.tfmixer import IMTSDataset, LOCFForecaster, imts_sample

GROUPS = {"first": ["a"], "second": ["b", "not_a_channel"]}


class Constant(nn.Module):
    """Forecasts ``value`` everywhere (errors known in closed form)."""

    def __init__(self, value: float):
        super().__init__()
        self.register_buffer("value", torch.tensor(float(value)))

    def forward(self, values, times, mask, query_times, **kwargs):
        b, h, c = values.shape[0], query_times.shape[1], values.shape[2]
        return SimpleNamespace(forecasts=self.value.expand(b, h, c).clone())


def _split(query_shift: float = 0.0) -> IMTSDataset:
    """Two samples, channels a and b, history [0, 1) = 24 h.

    Sample 0: a observed twice in the history, b never; targets a = 1, 2, 3 at 2.4 h, 12 h, 21.6 h after
    the history, b = 1 at 2.4 h. Sample 1: a and b once each; targets a = 0 at 0 h, b = 2 at 0 h and 4 at 7.2 h.
    """
    s0 = imts_sample(values=np.array([[0.5, 0.0], [0.7, 0.0]]), times=np.array([0.0, 0.5]),
                     mask=np.array([[True, False], [True, False]]),
                     query_times=np.array([1.1, 1.5, 1.9]) + query_shift,
                     targets=np.array([[1.0, 1.0], [2.0, 0.0], [3.0, 0.0]]),
                     target_mask=np.array([[True, True], [True, False], [True, False]]))
    s1 = imts_sample(values=np.array([[0.1, 0.3]]), times=np.array([0.2]), mask=np.array([[True, True]]),
                     query_times=np.array([1.0, 1.3]) + query_shift, targets=np.array([[0.0, 2.0], [0.0, 4.0]]),
                     target_mask=np.array([[True, True], [False, True]]))
    return IMTSDataset([s0, s1], ["a", "b"], {"metric": "per_variable"})


def test_closed_form_buckets_and_reference():
    data = _split()
    # zero forecast: squared errors a = 1, 4, 9 (sample 0), 0 (sample 1); b = 1 (sample 0), 4, 16 (sample 1)
    # reference (forecast 1): a = 0, 1, 4, 1; b = 0, 1, 9
    out = forecast_breakdown(Constant(0.0), data, Constant(1.0), groups=GROUPS, batch_size=1)
    assert out["overall"]["mse"] == pytest.approx((14 / 4 + 21 / 3) / 2)
    assert out["overall"]["reference_mse"] == pytest.approx((6 / 4 + 10 / 3) / 2)
    assert out["overall"]["gain"] == pytest.approx(1 - 5.25 / ((6 / 4 + 10 / 3) / 2))
    assert (out["overall"]["count"], out["overall"]["variables"]) == (7, 2)
    assert out["overall"]["mse"] == pytest.approx(evaluate_forecaster(Constant(0.0), data)["mse"])
    # groups: each its own variables' mean; a name the data lacks is ignored
    assert out["group"]["first"]["mse"] == pytest.approx(3.5)
    assert out["group"]["second"]["mse"] == pytest.approx(7.0)
    assert out["group"]["second"]["variables"] == 1
    # horizons: [0, 6) h: a {1, 0}, b {1, 4}; [6, 12) h: b {16}; 12 h+: a {4, 9} (12 h itself is in the last)
    hz = out["horizon"]
    assert list(hz) == ["0-6 h", "6-12 h", "12+ h"]
    assert hz["0-6 h"]["mse"] == pytest.approx((0.5 + 2.5) / 2)
    assert hz["6-12 h"]["mse"] == pytest.approx(16.0) and hz["6-12 h"]["variables"] == 1
    assert hz["12+ h"]["mse"] == pytest.approx(6.5)
    assert hz["12+ h"]["reference_mse"] == pytest.approx(2.5)
    # history counts: 0: b {1}; 1: a {0}, b {4, 16}; 2-4: a {1, 4, 9}; 5+: empty
    hi = out["history"]
    assert list(hi) == ["0", "1", "2-4", "5+"]
    assert hi["0"]["mse"] == pytest.approx(1.0)
    assert hi["1"]["mse"] == pytest.approx((0 + 10) / 2)
    assert hi["2-4"]["mse"] == pytest.approx(14 / 3)
    assert math.isnan(hi["5+"]["mse"]) and hi["5+"]["count"] == 0
    # two-way tables
    assert out["group_x_horizon"]["second"]["0-6 h"]["mse"] == pytest.approx(2.5)
    assert math.isnan(out["group_x_horizon"]["first"]["6-12 h"]["mse"])
    assert out["group_x_history"]["first"]["1"]["mse"] == pytest.approx(0.0)
    assert out["group_x_history"]["first"]["1"]["reference_mse"] == pytest.approx(1.0)
    # other edges and time units: 48 h per window puts sample 0's 0.1 query at 4.8 h, 0.5 at 24 h
    wide = forecast_breakdown(Constant(0.0), data, groups=GROUPS, history_hours=48.0, horizon_edges=(0.0, 20.0))
    assert wide["horizon"]["0-20 h"]["mse"] == pytest.approx((0.5 + (1 + 4 + 16) / 3) / 2)
    assert "reference_mse" not in wide["overall"]
    rows = breakdown_rows(out)
    assert rows[0]["breakdown"] == "overall" and any(r["bucket"] == "second / 0-6 h" for r in rows)


def test_negative_control_same_model_gains_nothing():
    data = _split()
    locf = LOCFForecaster(fill_value=[0.25, 0.25])
    out = forecast_breakdown(locf, data, LOCFForecaster(fill_value=[0.25, 0.25]), groups=GROUPS)
    for kind in ("group", "horizon", "history"):
        for entry in out[kind].values():
            assert entry["count"] == 0 or entry["gain"] == pytest.approx(0.0)
    perfect = forecast_breakdown(Constant(0.0), IMTSDataset(
        [imts_sample(np.zeros((1, 2)), np.zeros(1), np.ones((1, 2), bool), np.array([1.2]), np.zeros((1, 2)),
                     np.ones((1, 2), bool))], ["a", "b"]), groups=GROUPS)
    assert perfect["overall"]["mse"] == 0.0 and perfect["horizon"]["0-6 h"]["mse"] == 0.0


def test_bad_input():
    data = _split()
    model = Constant(0.0)
    with pytest.raises(TypeError, match="forecast_breakdown: model"):
        forecast_breakdown("model", data)
    with pytest.raises(TypeError, match="forecast_breakdown: reference"):
        forecast_breakdown(model, data, reference=3)
    with pytest.raises(TypeError, match="forecast_breakdown: dataset"):
        forecast_breakdown(model, [data[0]])
    with pytest.raises(InputError, match="dataset"):
        forecast_breakdown(model, IMTSDataset([], ["a", "b"]))
    with pytest.raises(InputError, match="history_hours"):
        forecast_breakdown(model, data, history_hours=0)
    with pytest.raises(InputError, match="horizon_edges"):
        forecast_breakdown(model, data, horizon_edges=(0.0, 6.0, 6.0))
    with pytest.raises(InputError, match="horizon_edges"):
        forecast_breakdown(model, data, horizon_edges=())
    with pytest.raises(InputError, match="history_edges"):
        forecast_breakdown(model, data, history_edges=(0, 1.5))
    with pytest.raises(InputError, match="history_edges"):  # sample 0's b has no history: below the first edge
        forecast_breakdown(model, data, groups=GROUPS, history_edges=(1, 2))
    with pytest.raises(InputError, match="groups"):
        forecast_breakdown(model, data, groups={"x": ["nope"]})
    with pytest.raises(InputError, match="groups"):
        forecast_breakdown(model, data, groups={"x": "a"})
    with pytest.raises(InputError, match="dataset"):  # a query before the end of the history
        forecast_breakdown(model, _split(query_shift=-0.5), groups=GROUPS)
    with pytest.raises(InputError, match="batch_size"):
        forecast_breakdown(model, data, groups=GROUPS, batch_size=0)
    with pytest.raises(InputError, match="breakdown"):
        breakdown_rows({"group": {}})
