"""Where a forecaster gains or loses: the protocol's per-variable MSE broken down by variable group,
horizon and amount of history.

:func:`forecast_breakdown` scores a model (and optionally a reference, e.g. TFMixer's blend head alone,
:class:`~icml26.models.tfmixer.MeanReversionForecaster`) on one split and reduces the squared errors of
its observed targets within each bucket of

- ``group``: the variable groups (default :data:`~icml26.eval.tasks.tfmixer.physionet2012.PHYSIONET_GROUPS`);
- ``horizon``: the query time after the end of the history, in hours (times are hours / history hours,
  the history being [0, 1): a query at ``tau`` is ``(tau - 1) * history_hours`` hours after its end);
- ``history``: the number of observations of the target's channel in the sample's history (under
  t-PatchGNN's protocol the 00:00 descriptors count, as they are observations there);

and the two-way ``group x horizon`` and ``group x history`` tables. The metric of every bucket is the
protocol's per-variable one (``lib/evaluation.py`` of t-PatchGNN, as
:func:`~icml26.eval.tasks.tfmixer.imts.reduce_forecast_errors` ``"per_variable"``): each variable's mean
squared error over the bucket's targets, then the mean over the variables with a target in the bucket.
The whole split's entry (``"overall"``) is therefore :func:`~icml26.eval.tasks.tfmixer.imts.evaluate_forecaster`'s
MSE under ``metric="per_variable"``. Buckets are not additive: each averages over its own variables.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from icml26.errors import described, input_error
from icml26.eval.tasks.tfmixer.physionet2012 import PHYSIONET_GROUPS
from icml26.models.tfmixer.data import IMTSCollator, IMTSDataset
from icml26.validation import check_finite, check_int

#: Horizon bucket edges in hours after the end of the history: [0, 6), [6, 12), [12, inf) (t-PatchGNN's
#: protocol forecasts 24 h, so the last bucket is 12-24 h there).
HORIZON_EDGES_HOURS = (0.0, 6.0, 12.0)
#: History-count bucket edges (observations of the channel in the history): 0, 1, 2-4, 5+.
HISTORY_EDGES = (0, 1, 2, 5)
BREAKDOWNS = ("group", "horizon", "history", "group_x_horizon", "group_x_history")


def _edges(function: str, argument: str, edges, integer: bool) -> tuple:
    if isinstance(edges, (str, bytes)) or not isinstance(edges, Sequence) or len(edges) == 0:
        raise input_error(function, argument, "a non-empty sequence of increasing numbers >= 0", edges)
    checked = tuple(check_int(function, f"{argument}[{i}]", e, low=0) if integer
                    else check_finite(function, f"{argument}[{i}]", e, non_negative=True) for i, e in enumerate(edges))
    if any(b <= a for a, b in zip(checked, checked[1:])):
        raise input_error(function, argument, "strictly increasing edges", edges)
    return checked


def _labels(edges, unit: str, integer: bool) -> list[str]:
    labels = []
    for lo, hi in zip(edges, [*edges[1:], None]):
        if hi is None:
            labels.append(f"{lo:g}+{unit}")
        elif integer and hi - lo == 1:
            labels.append(f"{lo:g}{unit}")
        else:
            labels.append(f"{lo:g}-{hi - 1 if integer else hi:g}{unit}")
    return labels


def _check_groups(function: str, groups, channel_names: Sequence[str]) -> dict[str, list[int]]:
    if not isinstance(groups, Mapping) or not groups:
        raise input_error(function, "groups", "a non-empty dict {group name: [channel names]}", groups)
    out = {}
    for name, members in groups.items():
        if not isinstance(name, str) or isinstance(members, (str, bytes)) or not isinstance(members, Sequence) \
                or not all(isinstance(v, str) for v in members):
            raise input_error(function, "groups", "a dict {group name: [channel names]}",
                              described(f"entry {name!r}: {members!r}"))
        out[name] = [channel_names.index(v) for v in members if v in channel_names]
    if not any(out.values()):
        raise input_error(function, "groups", f"groups naming channels of the dataset ({list(channel_names)[:5]}...)",
                          described("no group names any of them"))
    return out


@torch.no_grad()
def target_errors(model: nn.Module, dataset: IMTSDataset, batch_size: int = 128, device=None,
                  function: str = "target_errors") -> dict[str, np.ndarray]:
    """Per observed target of ``dataset``: ``se`` (squared error, float64), ``channel``, ``query_time`` and
    ``history_count`` (observations of that channel in the sample's history), flat arrays in sample order."""
    if not isinstance(model, nn.Module):
        raise TypeError(str(input_error(function, "model", "a torch.nn.Module", described(type(model).__name__))))
    check_int(function, "batch_size", batch_size, low=1)
    was_training = model.training
    model.eval()
    collate, parts = IMTSCollator(), []
    try:
        for start in range(0, len(dataset), batch_size):
            batch = collate([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            inputs = {k: batch[k] if device is None else batch[k].to(device)
                      for k in ("values", "times", "mask", "query_times")}
            forecasts = model(**inputs).forecasts.detach().cpu().double()
            rows, queries, channels = batch["target_mask"].nonzero(as_tuple=True)
            error = forecasts[rows, queries, channels] - batch["targets"][rows, queries, channels].double()
            counts = batch["mask"].sum(1)  # [B, C]: padded history slots are unobserved
            parts.append((error.pow(2).numpy(), channels.numpy(), batch["query_times"][rows, queries].double().numpy(),
                          counts[rows, channels].numpy()))
    finally:
        model.train(was_training)
    return {key: np.concatenate([p[j] for p in parts]) for j, key in
            enumerate(("se", "channel", "query_time", "history_count"))}


def per_variable_mse(se: np.ndarray, channel: np.ndarray, num_channels: int,
                     channels: Sequence[int] | None = None) -> dict[str, Any]:
    """The protocol's metric over the given targets: each variable's MSE, then the mean over the variables
    with a target (restricted to ``channels`` if given); NaN when none has one."""
    total = np.bincount(channel, weights=se, minlength=num_channels)
    count = np.bincount(channel, minlength=num_channels)
    scored = count > 0
    if channels is not None:
        keep = np.zeros(num_channels, bool)
        keep[list(channels)] = True
        scored &= keep
    k = int(scored.sum())
    mse = float((total[scored] / count[scored]).sum() / k) if k else math.nan
    return {"mse": mse, "count": int(count[scored].sum()), "variables": k}


def forecast_breakdown(model: nn.Module, dataset: IMTSDataset, reference: nn.Module | None = None, *,
                       history_hours: float = 24.0, groups: Mapping[str, Sequence[str]] | None = None,
                       horizon_edges: Sequence[float] = HORIZON_EDGES_HOURS,
                       history_edges: Sequence[int] = HISTORY_EDGES, batch_size: int = 128,
                       device=None) -> dict[str, Any]:
    """The per-variable MSE of ``model`` on ``dataset`` (one split, e.g. ``splits.validation``) by bucket.

    Returns ``{"overall": entry, "group": {name: entry}, "horizon": {label: entry}, "history": {label: entry},
    "group_x_horizon": {group: {label: entry}}, "group_x_history": {group: {label: entry}}}`` where an
    ``entry`` is ``{"mse", "count" (targets), "variables"}`` (``mse`` NaN for an empty bucket) and, with a
    ``reference`` model scored on the same targets, also ``"reference_mse"`` and ``"gain"``
    (``1 - mse / reference_mse``: > 0 where ``model`` is better).

    ``history_hours``: the hours the history window [0, 1) stands for (t-PatchGNN's protocol: 24, its
    ``splits.info["history_hours"]``). ``horizon_edges`` (hours after the end of the history) and
    ``history_edges`` (observation counts) are the lower edges of the buckets, the last one open:
    the defaults give 0-6 h, 6-12 h, 12 h+ and 0, 1, 2-4, 5+. ``groups`` (default
    :data:`PHYSIONET_GROUPS`) maps group names to channel names; names the dataset lacks are ignored.
    Every observed target must be at or after the end of the history and a history count at or above
    the first edge, else :class:`~icml26.errors.InputError` (no target is dropped silently).
    """
    fn = "forecast_breakdown"
    if not isinstance(model, nn.Module):
        raise TypeError(str(input_error(fn, "model", "a torch.nn.Module", described(type(model).__name__))))
    if reference is not None and not isinstance(reference, nn.Module):
        raise TypeError(str(input_error(fn, "reference", "a torch.nn.Module or None",
                                        described(type(reference).__name__))))
    if not isinstance(dataset, IMTSDataset):
        raise TypeError(str(input_error(fn, "dataset", "an IMTSDataset (one split, e.g. splits.validation)",
                                        described(type(dataset).__name__))))
    if len(dataset) == 0:
        raise input_error(fn, "dataset", "at least one sample", described("an empty dataset"))
    history_hours = check_finite(fn, "history_hours", history_hours, positive=True)
    horizon_edges = _edges(fn, "horizon_edges", horizon_edges, integer=False)
    history_edges = _edges(fn, "history_edges", history_edges, integer=True)
    check_int(fn, "batch_size", batch_size, low=1)
    names = list(dataset.channel_names)
    group_index = _check_groups(fn, PHYSIONET_GROUPS if groups is None else groups, names)
    c = len(names)

    errors = target_errors(model, dataset, batch_size, device, function=fn)
    ref_se = None if reference is None else target_errors(reference, dataset, batch_size, device, function=fn)["se"]
    channel = errors["channel"]
    hours = (errors["query_time"] - 1.0) * history_hours
    # a float32 query time of exactly the history's end may read a hair below it: tolerate 1e-6 of the window
    hours = np.where((hours < 0) & (hours > -1e-6 * history_hours), 0.0, hours)
    horizon_bucket = np.searchsorted(np.asarray(horizon_edges), hours, side="right") - 1
    history_bucket = np.searchsorted(np.asarray(history_edges), errors["history_count"], side="right") - 1
    if (horizon_bucket < 0).any():
        raise input_error(fn, "dataset", f"observed targets at least {horizon_edges[0]:g} h after the end of the "
                          "history (query_times >= 1)", described(f"a target {hours.min():g} h after it"))
    if (history_bucket < 0).any():
        raise input_error(fn, "history_edges", f"a first edge <= every history count ({errors['history_count'].min()})",
                          history_edges)
    horizon_labels = _labels(horizon_edges, " h", integer=False)
    history_labels = _labels(history_edges, "", integer=True)

    def entry(selected: np.ndarray, channels=None) -> dict[str, Any]:
        out = per_variable_mse(errors["se"][selected], channel[selected], c, channels)
        if ref_se is not None:
            ref = per_variable_mse(ref_se[selected], channel[selected], c, channels)["mse"]
            out["reference_mse"] = ref
            out["gain"] = 1 - out["mse"] / ref if ref > 0 else math.nan
        return out

    everything = np.ones(len(channel), bool)
    result: dict[str, Any] = {
        "overall": entry(everything),
        "group": {g: entry(everything, idx) for g, idx in group_index.items()},
        "horizon": {lab: entry(horizon_bucket == j) for j, lab in enumerate(horizon_labels)},
        "history": {lab: entry(history_bucket == j) for j, lab in enumerate(history_labels)},
        "group_x_horizon": {g: {lab: entry(horizon_bucket == j, idx) for j, lab in enumerate(horizon_labels)}
                            for g, idx in group_index.items()},
        "group_x_history": {g: {lab: entry(history_bucket == j, idx) for j, lab in enumerate(history_labels)}
                            for g, idx in group_index.items()},
    }
    return result


def breakdown_rows(breakdown: Mapping[str, Any]) -> list[dict[str, Any]]:
    """:func:`forecast_breakdown`'s result as flat rows ``{"breakdown", "bucket", "mse", ...}`` (for a table)."""
    if not isinstance(breakdown, Mapping) or "overall" not in breakdown:
        raise input_error("breakdown_rows", "breakdown", "the dict forecast_breakdown returns",
                          described(type(breakdown).__name__))
    rows = [{"breakdown": "overall", "bucket": "all", **breakdown["overall"]}]
    for kind in BREAKDOWNS:
        for bucket, value in breakdown.get(kind, {}).items():
            if "mse" in value:
                rows.append({"breakdown": kind, "bucket": bucket, **value})
            else:
                rows.extend({"breakdown": kind, "bucket": f"{bucket} / {inner}", **v} for inner, v in value.items())
    return rows


__all__ = ["BREAKDOWNS", "HISTORY_EDGES", "HORIZON_EDGES_HOURS", "breakdown_rows", "forecast_breakdown",
           "per_variable_mse", "target_errors"]
