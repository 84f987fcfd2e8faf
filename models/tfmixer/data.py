"""The irregular multivariate time series (IMTS) format TFMixer and its baselines take: data set and collator.

Every sample is a dict in one format (the PyOmniTS/APN convention TFMixer takes):

- ``values [L, C]`` float32, ``mask [L, C]`` bool (True = observed) and ``times [L]``: the union
  of the sample's observation times, normalised so that the history window is [0, 1];
- ``query_times [H]`` (after the history, usually > 1), ``targets [H, C]`` (0 where not
  observed) and ``target_mask [H, C]``.

:class:`IMTSCollator` pads samples of different ``L`` and ``H`` into a batch whose padded slots
are unobserved (mask False), so they change nothing in any model here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn.utils.rnn import pad_sequence

from icml26.errors import described, input_error

__all__ = ["KEYS", "IMTSCollator", "IMTSDataset", "IMTSSplits", "imts_sample"]


KEYS = ("values", "times", "mask", "query_times", "targets", "target_mask")


# ---------------------------------------------------------------------------------------------
# Containers and collation
# ---------------------------------------------------------------------------------------------
class IMTSDataset(torch.utils.data.Dataset):
    """A list of IMTS samples (dicts of tensors, keys :data:`KEYS`) with channel names and metadata."""

    def __init__(self, samples: list[dict[str, torch.Tensor]], channel_names: Sequence[str], info: dict | None = None):
        fn = "IMTSDataset"
        if isinstance(samples, (dict, str)) or not isinstance(samples, Sequence):
            raise TypeError(str(input_error(fn, "samples", "a list of samples (dicts from imts_sample)",
                                            described(type(samples).__name__))))
        if isinstance(channel_names, str) or not isinstance(channel_names, Sequence):
            raise input_error(fn, "channel_names", "a list of channel names", channel_names)
        for i, s in enumerate(samples):  # shapes only: cheap, and the collator relies on them
            missing = [k for k in KEYS if not isinstance(s, dict) or k not in s]
            if missing:
                raise input_error(fn, "samples", f"dicts with keys {KEYS} (imts_sample)",
                                  described(f"sample {i} without {missing}"))
            if s["values"].dim() != 2 or s["values"].shape[-1] != len(channel_names):
                raise input_error(fn, "channel_names", "one name per channel of the samples' values [length, channels]",
                                  described(f"{len(channel_names)} names for values of shape "
                                            f"{tuple(s['values'].shape)} in sample {i}"))
        if info is not None and not isinstance(info, dict):
            raise TypeError(str(input_error(fn, "info", "a dict or None", described(type(info).__name__))))
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


def imts_sample(values, times, mask, query_times, targets, target_mask) -> dict[str, torch.Tensor]:
    """One sample in the IMTS format from arrays: unobserved values and targets set to 0, dtypes fixed.

    Shapes: ``values`` and ``mask`` ``[L, C]``, ``times`` ``[L]``, ``query_times`` ``[H]``, ``targets`` and
    ``target_mask`` ``[H, C]``.
    """
    shapes = {k: np.shape(v) for k, v in (("values", values), ("times", times), ("mask", mask),
                                          ("query_times", query_times), ("targets", targets),
                                          ("target_mask", target_mask))}
    if len(shapes["values"]) != 2:
        raise input_error("imts_sample", "values", "an array [length, channels]",
                          described(f"shape {shapes['values']}"))
    (length, c), h = shapes["values"], shapes["query_times"][0] if len(shapes["query_times"]) == 1 else -1
    if h < 0:
        raise input_error("imts_sample", "query_times", "an array [horizon]", described(f"shape {shapes['query_times']}"))
    expected = {"times": (length,), "mask": (length, c), "targets": (h, c), "target_mask": (h, c)}
    for name, shape in expected.items():
        if tuple(shapes[name]) != shape:
            raise input_error("imts_sample", name, f"shape {shape}", described(f"shape {tuple(shapes[name])}"))
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
