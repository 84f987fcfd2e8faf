"""TFMixer: joint time-frequency forecasting of irregular multivariate time series (IMTS).

Reconstruction: of "Bridging Time and Frequency: A Joint Modeling Framework for Irregular
Multivariate Time Series Forecasting" (Qiu et al., arXiv 2602.00582). No official code exists and
the paper's abstract names the pieces below without their details; every ambiguous choice is a
:class:`TFMixerConfig` field. Inputs follow the PyOmniTS/APN convention:

- ``values [B, L, C]``, ``mask [B, L, C]`` (True = observed) and ``times [B, L]``: the union of
  the series' timestamps, normalised so that the history window is [0, 1];
- ``query_times [B, H]`` (usually > 1) where forecasts are wanted, with optional
  ``targets [B, H, C]`` and ``target_mask [B, H, C]``.

Slots that are not observed contribute nothing, even when they hold NaN or Inf. The model:

1. **Global Frequency Module (GFM)**: a learnable NUDFT (:class:`icml26.kernels.NUDFT`) of every
   channel at its raw timestamps gives ``(Re, Im)`` at K learnable frequencies, one token per
   frequency.
2. **Local Time Module (LTM)**: point embeddings ``LN(GELU(Lin(x) + MLP(TE(t))))``; a learnable
   patch query pools the observed points of each of P fixed patches (a masked softmax per patch;
   empty patches get a learnable embedding), then Q learnable query patches cross-attend over the
   non-empty patch tokens: Q time tokens per channel.
3. **Dual mixing blocks** on each branch: token mixing, feature MLP, variable mixing across the
   C channels, feature MLP (pre-LN residual MLP-Mixer blocks, TAC-Mixer's layout).
4. **Fusion and decoder**: the branches are mean-pooled per channel and fused (concat + linear or
   a gate); an MLP on ``[h_c, TE(tau)]`` gives ``y_time`` at every query time.
5. **Seasonal extrapolation**: coefficients ``(A, B)`` (the raw NUDFT ones, or refined by a
   zero-initialised head on the mixed frequency tokens) are synthesised at the query times with
   the inverse NUDFT: ``y = mu + y_time + iNUDFT(A, B, omega, tau)`` (``mu``: the channel's
   observed history mean when ``instance_norm``).
6. **Loss**: masked forecast MSE + ``reconstruction_weight`` x the masked MSE of
   ``iNUDFT(A, B, omega, t)`` against the (mean-removed) history at its own timestamps.

All frequency-domain work goes through :func:`icml26.kernels.nudft` / :func:`~icml26.kernels.inudft`;
with the Triton backend no phase tensor of size N x K is built, forward or backward.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel, TrainerCallback
from transformers import initialization as init
from transformers.utils import ModelOutput, logging

from icml26.errors import describe, described, input_error
from icml26.kernels import values_checked
from icml26.kernels.nudft import BACKENDS, NORMS
from icml26.kernels.nudft_layers import INITS, NUDFT, InverseNUDFT
from icml26.validation import check_finite

logger = logging.get_logger(__name__)

FREQUENCY_LAYOUTS = ("shared", "per_channel")
SEASONAL_COEFFICIENTS = ("refined", "raw")
FUSIONS = ("concat", "gate")
FORECAST_LEVELS = ("mean", "last", "blend")
LOSS_REDUCTIONS = ("pooled", "per_variable")


# ---------------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------------
class TFMixerConfig(PretrainedConfig):
    """Configuration of :class:`TFMixerForForecasting`. Defaults are a tiny CPU model (our choice).

    Args:
        num_channels: C, the number of variables (variable mixing is over this axis).
        d_model: width of every token.
        num_frequencies: K, learnable frequencies of the GFM.
        num_patches: P, fixed patches of the history window [0, 1] (patch size 1/P).
        num_query_patches: Q, learnable query patches (time tokens per channel).
        num_mixing_blocks: dual mixing blocks per branch.
        num_heads: heads of the patch pooling and of the query-patch attention.
        time_embedding_dim: size of the learnable time encoding ``[w0 t + b0, sin(W t + b)]``.
        mlp_ratio: hidden width of every mixing MLP, as a multiple of its input width (> 0; the
            hidden width is at least 2).
        dropout: dropout inside the mixing MLPs and the decoder, in [0, 1).
        use_gfm: the frequency branch (GFM, seasonal extrapolation and reconstruction loss);
            False is the "no GFM" (LTM-only) ablation.
        use_ltm: the time branch; False is the "no LTM" (GFM-only) ablation.
        reconstruction_weight: lambda of the history reconstruction loss; 0 is the
            "no reconstruction loss" ablation; a finite number >= 0. Reconstruction: default 1.0 (0.1
            and 1 are both plausible readings of the paper): on the synthetic
            task (150 steps, 2 seeds) it brought the learnt frequencies to within 0.003 cycles of
            the true ones, against 0.03 with 0.1 and 0.05 without the loss, at test MSE within 4%.
        frequency_layout: ``"shared"`` (one set of K frequencies, ``omega [K]``) or
            ``"per_channel"`` (``omega [C, K]``).
        frequency_init: ``"harmonic"`` (``omega_k = 2 pi k``) or ``"log"`` (log-spaced).
        max_cycles: upper bound of the learnt frequencies in cycles per history window
            (default ``2 K``); ``omega = 2 pi max_cycles sigmoid(raw)``.
        learnable_frequencies: whether the frequencies are trained.
        nudft_norm: ``"mean"`` (coefficients are averages, comparable across densities) or ``"sum"``.
        seasonal_coefficients: ``"refined"`` (raw NUDFT coefficients plus a zero-initialised
            linear head on the mixed frequency tokens) or ``"raw"`` (the NUDFT coefficients as they are).
        seasonal_coef: ``c_k`` of the synthesis (2 rebuilds a real sinusoid from mean-normalised
            coefficients).
        learnable_seasonal_scale: learn ``c_k`` per frequency (initialised to ``seasonal_coef``).
        fusion: ``"concat"`` (concatenate the pooled branches, then a linear map) or ``"gate"``
            (``g = sigmoid(W [h_time, h_freq])``, ``h = g h_time + (1 - g) h_freq``).
        instance_norm: remove each channel's observed history mean before both branches and add it
            back to the forecast (empty channels: mean 0).
        forecast_level: what the forecast is a residual over: ``"mean"`` (the channel's observed history
            mean, with ``instance_norm``; 0 without), ``"last"`` (its last observed value: the model
            starts as LOCF and learns the correction) or ``"blend"``: ``last + a_c (mean - last) +
            b_c (fallback_c - last) + d_c`` with ``a, b, d`` learnt per channel from 0 (it starts as
            LOCF and learns how far each variable reverts to the stay's mean and to the population's;
            on PhysioNet 2012 this head alone, fitted by least squares, beats LOCF by 19%).
        channel_fallback: the level of a channel with no observation in the history, per channel
            (``num_channels`` numbers, e.g. the training mean, which is what t-PatchGNN's baselines
            fill with), learnt from there; None: 0. Reconstruction, like ``forecast_level``: the
            paper does not say how empty channels are forecast.
        nudft_backend: backend of the NUDFT ops: ``"auto"`` (Triton on CUDA), ``"triton"``, ``"torch"``.
        loss_reduction: how the forecast MSE of the loss is averaged: ``"pooled"`` over every observed
            target, or ``"per_variable"``: each channel's mean, then the mean over the channels with
            targets in the batch (t-PatchGNN trains so, and its protocol's metric averages so; pooled,
            the dense vital signs outweigh the sparse labs the metric weighs equally).
        sparse_decoding: with ``targets``, run the decoder and the seasonal synthesis only at the observed
            target slots (``target_mask`` True), and the history reconstruction only at the observed
            points: the loss is the same as the dense computation's (tested), at a fraction of the cost
            on sparse data (PhysioNet 2012: about 4% of the padded ``[B, H, C]`` slots hold a target).
            ``forecasts`` is then NaN at the other slots. Without ``targets`` every slot is forecast.
        initializer_range: std of the normal initialisation of linear maps and embeddings.
        decoder_zero_init: start the decoder's last layer at zero, so the untrained model forecasts its
            level (and seasonal part) exactly: with ``forecast_level="blend"`` warm-started at its
            least-squares fit, training starts from the head alone. Reconstruction: on PhysioNet 2012 it
            keeps a larger ``initializer_range`` (0.2, where 0.02 leaves a d = 16 network only a constant
            offset) from starting worse than its head.
        reconstruction_scale: None (the history reconstruction synthesises with the forecast's own
            seasonal scale, ``seasonal_coef``), or a fixed ``c_k`` for the reconstruction alone (2 rebuilds a
            real sinusoid from mean-normalised coefficients). Reconstruction: with one shared scale the
            reconstruction loss drives the forecast's extrapolation scale, and on PhysioNet 2012 the forecast
            then replays the history's shape over the next 24 h (validation worsens from step ~100 while
            the reconstruction loss falls).
    """

    model_type = "tfmixer"
    num_channels: int = 6
    d_model: int = 32
    num_frequencies: int = 16
    num_patches: int = 16
    num_query_patches: int = 8
    num_mixing_blocks: int = 2
    num_heads: int = 2
    time_embedding_dim: int = 16
    mlp_ratio: float = 2.0
    dropout: float = 0.0
    use_gfm: bool = True
    use_ltm: bool = True
    reconstruction_weight: float = 1.0
    frequency_layout: str = "shared"
    frequency_init: str = "harmonic"
    max_cycles: float | None = None
    learnable_frequencies: bool = True
    nudft_norm: str = "mean"
    seasonal_coefficients: str = "refined"
    seasonal_coef: float = 2.0
    learnable_seasonal_scale: bool = False
    fusion: str = "concat"
    instance_norm: bool = True
    forecast_level: str = "mean"
    channel_fallback: list[float] | None = None
    nudft_backend: str = "auto"
    loss_reduction: str = "pooled"
    sparse_decoding: bool = False
    initializer_range: float = 0.02
    decoder_zero_init: bool = False
    reconstruction_scale: float | None = None

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        for name in ("num_channels", "d_model", "num_frequencies", "num_patches", "num_query_patches",
                     "num_heads", "time_embedding_dim"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise input_error("TFMixerConfig", name, "a positive int", value)
        if isinstance(self.num_mixing_blocks, bool) or not isinstance(self.num_mixing_blocks, int) \
                or self.num_mixing_blocks < 0:
            raise input_error("TFMixerConfig", "num_mixing_blocks", "an int >= 0", self.num_mixing_blocks)
        if self.d_model % self.num_heads:
            raise input_error("TFMixerConfig", "num_heads", f"a divisor of d_model={self.d_model}", self.num_heads)
        if self.time_embedding_dim < 2:
            raise input_error("TFMixerConfig", "time_embedding_dim", "an int >= 2", self.time_embedding_dim)
        for name in ("use_gfm", "use_ltm", "learnable_frequencies", "learnable_seasonal_scale", "instance_norm",
                     "sparse_decoding", "decoder_zero_init"):
            if not isinstance(getattr(self, name), bool):
                raise input_error("TFMixerConfig", name, "True or False", getattr(self, name))
        if not (self.use_gfm or self.use_ltm):
            raise input_error("TFMixerConfig", "use_gfm/use_ltm", "at least one branch True",
                              described("both False"))
        # NaN passes every comparison: check_finite refuses it (a NaN weight would drop the loss silently)
        self.reconstruction_weight = check_finite("TFMixerConfig", "reconstruction_weight",
                                                  self.reconstruction_weight, non_negative=True)
        self.mlp_ratio = check_finite("TFMixerConfig", "mlp_ratio", self.mlp_ratio, positive=True)
        dropout = check_finite("TFMixerConfig", "dropout", self.dropout, non_negative=True)
        if not dropout < 1:
            raise input_error("TFMixerConfig", "dropout", "a number in [0, 1)", self.dropout)
        check_finite("TFMixerConfig", "seasonal_coef", self.seasonal_coef)
        check_finite("TFMixerConfig", "initializer_range", self.initializer_range, non_negative=True)
        if self.reconstruction_scale is not None:
            self.reconstruction_scale = check_finite("TFMixerConfig", "reconstruction_scale", self.reconstruction_scale)
        choices = {"frequency_layout": FREQUENCY_LAYOUTS, "frequency_init": INITS, "nudft_norm": NORMS,
                   "seasonal_coefficients": SEASONAL_COEFFICIENTS, "fusion": FUSIONS, "nudft_backend": BACKENDS}
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise input_error("TFMixerConfig", name, f"one of {allowed}", getattr(self, name))
        if self.loss_reduction not in LOSS_REDUCTIONS:
            raise input_error("TFMixerConfig", "loss_reduction", f"one of {LOSS_REDUCTIONS}", self.loss_reduction)
        if self.forecast_level not in FORECAST_LEVELS:
            raise input_error("TFMixerConfig", "forecast_level", f"one of {FORECAST_LEVELS}", self.forecast_level)
        if self.channel_fallback is not None:
            fallback = self.channel_fallback
            if isinstance(fallback, torch.Tensor) or hasattr(fallback, "tolist"):
                fallback = fallback.tolist()
            if not isinstance(fallback, (list, tuple)) or len(fallback) != self.num_channels or not all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in fallback):
                raise input_error("TFMixerConfig", "channel_fallback",
                                  f"None or {self.num_channels} finite numbers (num_channels)", self.channel_fallback)
            self.channel_fallback = [float(v) for v in fallback]
        if self.max_cycles is not None:
            check_finite("TFMixerConfig", "max_cycles", self.max_cycles, positive=True)
            if self.max_cycles <= self.num_frequencies and self.frequency_init == "harmonic":
                raise input_error("TFMixerConfig", "max_cycles",
                                  f"more than num_frequencies={self.num_frequencies} with harmonic init",
                                  self.max_cycles)


AutoConfig.register(TFMixerConfig.model_type, TFMixerConfig, exist_ok=True)


@dataclass
class TFMixerForecastOutput(ModelOutput):
    """Output of :class:`TFMixerForForecasting` (and of the baselines in :mod:`icml26.eval.tasks.tfmixer.imts`).

    - ``loss``: ``forecast_loss + reconstruction_weight * reconstruction_loss`` (with targets);
    - ``forecasts [B, H, C]``: predictions at ``query_times``;
    - ``forecast_loss``: masked MSE over observed targets;
    - ``reconstruction_loss``: masked MSE of the seasonal reconstruction of the history (GFM only);
    - ``seasonal [B, H, C]`` / ``reconstruction [B, L, C]``: the iNUDFT parts, with
      ``output_components=True``.
    """

    loss: torch.FloatTensor | None = None
    forecasts: torch.FloatTensor | None = None
    forecast_loss: torch.FloatTensor | None = None
    reconstruction_loss: torch.FloatTensor | None = None
    seasonal: torch.FloatTensor | None = None
    reconstruction: torch.FloatTensor | None = None


# ---------------------------------------------------------------------------------------------
# Input checks and masked losses (shared with the baselines)
# ---------------------------------------------------------------------------------------------


def check_imts_inputs(values, times, mask, query_times, targets=None, target_mask=None, num_channels=None, *,
                      function: str = "check_imts_inputs"):
    """Validate the IMTS tensors; return ``(mask, target_mask)`` as bool tensors.

    Raises :class:`~icml26.errors.InputError` ``"<function>: <argument>: expected X, got Y"``
    (``TypeError`` for a non-tensor). Shapes are always checked; the checks that read values (a series
    with no observed point, NaN/Inf at observed slots) run on CPU tensors or with
    ``ICML26_CHECK_VALUES=1``, so a CUDA forward never syncs for them. ``mask`` and ``target_mask``
    may be bool or 0/1 numbers; ``target_mask`` defaults to "targets are finite".
    """
    for name, value in (("values", values), ("times", times), ("mask", mask), ("query_times", query_times)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{function}: {name}: expected a torch.Tensor, got {type(value).__name__}")
    if values.dim() != 3:
        raise input_error(function, "values", "[batch, length, channels]", describe(values))
    b, length, c = values.shape
    if num_channels is not None and c != num_channels:
        raise input_error(function, "values", f"{num_channels} channels (config.num_channels) in the last dim",
                          describe(values))
    if tuple(times.shape) != (b, length):
        raise input_error(function, "times", f"[batch, length] = {(b, length)} like values", describe(times))
    if tuple(mask.shape) != (b, length, c):
        raise input_error(function, "mask", f"{(b, length, c)} like values", describe(mask))
    if query_times.dim() != 2 or query_times.shape[0] != b:
        raise input_error(function, "query_times", f"[batch, horizon] with batch={b}", describe(query_times))
    mask = mask if mask.dtype == torch.bool else mask != 0
    if values_checked(values):
        observed_rows = mask.any(-1)  # [B, L]
        empty = (~observed_rows.any(-1)).nonzero().flatten().tolist()
        if empty:
            raise input_error(function, "mask", "at least one observed point in every series' history to forecast "
                              "from", described(f"none in rows {empty[:10]} of the batch (mask all False)"))
        if not torch.isfinite(torch.where(observed_rows, times, 0.0)).all():
            raise input_error(function, "times", "finite timestamps wherever some channel is observed",
                              described("NaN/Inf"))
        if not torch.isfinite(torch.where(mask, values, 0.0)).all():
            raise input_error(function, "values", "finite numbers at observed slots (mask True)",
                              described("NaN/Inf"))
    if targets is not None:
        h = query_times.shape[1]
        if not isinstance(targets, torch.Tensor) or tuple(targets.shape) != (b, h, c):
            raise input_error(function, "targets", f"[batch, horizon, channels] = {(b, h, c)}", describe(targets))
        if target_mask is None:
            target_mask = torch.isfinite(targets)
        elif not isinstance(target_mask, torch.Tensor) or tuple(target_mask.shape) != (b, h, c):
            raise input_error(function, "target_mask", f"{(b, h, c)} like targets", describe(target_mask))
        target_mask = target_mask if target_mask.dtype == torch.bool else target_mask != 0
    elif target_mask is not None:
        raise input_error(function, "target_mask", "None without targets", described("a mask"))
    return mask, target_mask


def squared_error_loss(squared: torch.Tensor, channels: torch.Tensor, num_channels: int,
                       reduction: str = "pooled") -> torch.Tensor:
    """The mean of ``squared [n]`` (errors at observed slots of channels ``channels [n]``).

    ``"pooled"``: over all slots (0 when there are none); ``"per_variable"``: each channel's mean,
    then the mean over the channels that have slots (t-PatchGNN's ``compute_error(reduce="mean")``,
    its training loss and the metric of its protocol).
    """
    if reduction == "pooled":
        return squared.sum() / max(squared.numel(), 1)
    if reduction != "per_variable":
        raise input_error("squared_error_loss", "reduction", f"one of {LOSS_REDUCTIONS}", reduction)
    total = squared.new_zeros(num_channels).index_add(0, channels, squared)
    count = torch.bincount(channels, minlength=num_channels)
    return (total / count.clamp(min=1)).sum() / (count > 0).sum().clamp(min=1)


def masked_mse(pred: torch.Tensor, target: torch.Tensor, mask: torch.Tensor, reduction: str = "pooled") -> torch.Tensor:
    """MSE over the slots where ``mask`` is True (others may hold NaN), channels on the last axis;
    ``reduction`` as in :func:`squared_error_loss`."""
    for name, value in (("target", target), ("mask", mask)):
        if not isinstance(value, torch.Tensor) or value.shape != pred.shape:
            raise input_error("masked_mse", name, f"a tensor of pred's shape {tuple(pred.shape)}", describe(value))
    if reduction not in LOSS_REDUCTIONS:
        raise input_error("masked_mse", "reduction", f"one of {LOSS_REDUCTIONS}", reduction)
    where = mask.nonzero(as_tuple=True)
    return squared_error_loss((pred[where] - target[where]).pow(2), where[-1], pred.shape[-1], reduction)


#: Index lists of observed points and targets are padded to a multiple of this many entries.
SLOT_BUCKET = 1024


def _bucketed(n: int, bucket: int) -> int:
    """``n`` rounded up to a multiple of ``bucket``, at least one bucket."""
    return max(-(-n // bucket) * bucket, bucket)


def bucketed_nonzero(mask: torch.Tensor, bucket: int = SLOT_BUCKET) -> tuple[tuple[torch.Tensor, ...], int]:
    """``mask.nonzero(as_tuple=True)`` padded with index 0 to a multiple of ``bucket`` entries (at least one
    bucket), and the true count.

    Why: on CPU the tensors sized by the number of observed points change size with every batch, and
    glibc's heap, which serves them once its mmap threshold has risen, fragments under ever-changing
    sizes (resident memory grew 1.0 -> 1.7 GB over 400 PhysioNet steps); pinning the threshold instead
    costs a page fault per touched page of every large tensor (a step 1.5x slower). With the lists
    padded (and the batch padded by ``IMTSCollator(pad_to_multiple_of=...)``) the sizes repeat and the
    heap reuses its blocks. The padded entries are computed and then dropped: they never reach an
    output, a loss or a gradient.
    """
    if isinstance(bucket, bool) or not isinstance(bucket, int) or bucket < 1:
        raise input_error("bucketed_nonzero", "bucket", "a positive int", bucket)
    index = mask.nonzero()
    n = index.shape[0]
    size = _bucketed(n, bucket)
    if size > n:
        index = torch.cat([index, index.new_zeros(size - n, index.shape[1])])
    return index.unbind(1), n


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------
class TimeEncoding(nn.Module):
    """Learnable ``TE(t) = [w0 t + b0, sin(W t + b)]`` (t-PatchGNN / APN); W starts log-spaced."""

    def __init__(self, dim: int, max_cycles: float = 16.0):
        super().__init__()
        self.linear = nn.Linear(1, 1)
        self.periodic = nn.Linear(1, dim - 1)
        self.max_cycles = max_cycles

    def initial_frequencies(self) -> torch.Tensor:
        n = self.periodic.out_features
        return 2 * math.pi * torch.logspace(math.log10(0.25), math.log10(self.max_cycles), n)[:, None]

    def initial_phases(self) -> torch.Tensor:
        return (torch.arange(self.periodic.out_features) % 2) * (math.pi / 2)  # sines and cosines

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        t = t[..., None]
        return torch.cat([self.linear(t), torch.sin(self.periodic(t))], dim=-1)


class MixerMLP(nn.Module):
    def __init__(self, dim: int, hidden: int, dropout: float):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(dim, hidden), nn.Linear(hidden, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.fc2(self.dropout(F.gelu(self.fc1(x)))))


class DualMixingBlock(nn.Module):
    """Token mixing, feature MLP, variable mixing, feature MLP on ``[B, C, T, d]`` (pre-LN, residual)."""

    def __init__(self, num_tokens: int, num_channels: int, d: int, ratio: float, dropout: float):
        super().__init__()
        hidden = lambda n: max(int(round(n * ratio)), 2)  # noqa: E731
        self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(4))
        self.token_mlp = MixerMLP(num_tokens, hidden(num_tokens), dropout)
        self.feature_mlp_1 = MixerMLP(d, hidden(d), dropout)
        self.variable_mlp = MixerMLP(num_channels, hidden(num_channels), dropout)
        self.feature_mlp_2 = MixerMLP(d, hidden(d), dropout)

    def forward(self, x):
        x = x + self.token_mlp(self.norms[0](x).transpose(-1, -2)).transpose(-1, -2)
        x = x + self.feature_mlp_1(self.norms[1](x))
        x = x + self.variable_mlp(self.norms[2](x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        return x + self.feature_mlp_2(self.norms[3](x))


class LocalTimeModule(nn.Module):
    """Points -> P patch tokens (masked softmax pooling per patch) -> Q time tokens per channel."""

    def __init__(self, config: TFMixerConfig):
        super().__init__()
        d, h = config.d_model, config.num_heads
        self.num_patches, self.num_heads, self.head_dim = config.num_patches, h, d // h
        self.value_embed = nn.Linear(1, d)
        self.time_encoding = TimeEncoding(config.time_embedding_dim, max_cycles=float(config.num_patches))
        self.time_embed = nn.Sequential(nn.Linear(config.time_embedding_dim, d), nn.GELU(), nn.Linear(d, d))
        self.channel_embedding = nn.Parameter(torch.zeros(config.num_channels, d))
        self.point_norm = nn.LayerNorm(d)
        # patch pooling: one learnable query per head attends over the points of a patch
        self.patch_query = nn.Parameter(torch.zeros(h, self.head_dim))
        self.patch_key = nn.Linear(d, d)
        self.patch_value = nn.Linear(d, d)
        self.patch_out = nn.Linear(d, d)
        self.empty_patch = nn.Parameter(torch.zeros(d))
        self.patch_position = nn.Parameter(torch.zeros(config.num_patches, d))
        # query patches over the patch tokens
        self.query_patches = nn.Parameter(torch.zeros(config.num_query_patches, d))
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d) for _ in range(4))
        self.token_norm = nn.LayerNorm(d)

    def forward(self, x, t, m, points=None):
        """``x, m [B, C, L]`` (x zero where not observed), ``t [B, L]`` -> ``[B, C, Q, d]``.

        ``points``: ``bucketed_nonzero(m, SLOT_BUCKET)`` when the caller has it already.

        Only observed points are embedded: they are gathered into one flat list, and each
        (series, patch) is a segment of it, so padding and unobserved slots cost nothing.
        """
        b, c, length = x.shape
        p, h, dh = self.num_patches, self.num_heads, self.head_dim
        (bi, ci, li), n_obs = points or bucketed_nonzero(m, SLOT_BUCKET)  # padded: entries n_obs: are dummies
        t_obs = t[bi, li]
        # the time embedding depends on (b, l) only: computed once per timestamp, shared by its channels
        time_embedding = self.time_embed(self.time_encoding(t)).view(b * length, -1)[bi * length + li]
        e = self.value_embed(x[bi, ci, li][:, None]) + time_embedding
        e = self.point_norm(F.gelu(e + self.channel_embedding[ci]))  # [n_points, d]
        # logits of the patch query against each point's key, with W_k folded into the query
        q = self.patch_query * dh ** -0.5
        w_k = self.patch_key.weight.view(h, dh, -1)
        logits = e @ torch.einsum("hk,hkd->dh", q, w_k) + (self.patch_key.bias.view(h, dh) * q).sum(-1)
        # a softmax per segment (series b, c; patch) over its points. Only the non-empty segments (a
        # fraction of the b * c * p on sparse data) are pooled, numbered in order by ``compact``, in a
        # bucketed number of rows whose last takes the dummy points.
        patch = (t_obs * p).floor().clamp(0, p - 1).long()
        segment = (bi * c + ci) * p + patch
        filled = torch.bincount(segment[:n_obs], minlength=b * c * p) > 0
        compact = filled.cumsum(0) - 1
        n_filled = int(compact[-1]) + 1
        rows = _bucketed(n_filled + 1, SLOT_BUCKET)
        segment = compact[segment]
        segment[n_obs:] = rows - 1
        index = segment[:, None].expand(-1, h)
        peak = logits.new_full((rows, h), -torch.inf).scatter_reduce(0, index, logits.detach(), "amax")
        weights = torch.exp(logits - peak.gather(0, index))
        denom = logits.new_zeros(rows, h).index_add(0, segment, weights)
        pooled = e.new_zeros(rows, h, e.shape[-1]).index_add(0, segment, weights[..., None] * e[:, None, :])
        pooled = pooled / denom[..., None].clamp(min=torch.finfo(e.dtype).tiny)  # rows with no point: 0
        w_v = self.patch_value.weight.view(h, dh, -1)  # values = W_v (weighted sum of e), per head
        values = torch.einsum("shd,hkd->shk", pooled, w_v) + self.patch_value.bias.view(h, dh)
        d = self.empty_patch.shape[0]
        # row r of ``values`` is segment where[r]; the rows past n_filled go to a discarded extra row
        where = torch.cat([filled.nonzero()[:, 0], filled.new_full((rows - n_filled,), b * c * p, dtype=torch.long)])
        tokens = self.empty_patch.expand(b * c * p + 1, d).index_put(
            (where,), self.patch_out(values.reshape(rows, h * dh)))
        tokens = tokens[:-1].view(b, c, p, d) + self.patch_position
        filled = filled.view(b, c, p)
        # Q query patches attend over the non-empty patch tokens (all of them for an empty channel); the
        # queries are parameters, so their projection is computed once, not once per series
        keep = (filled | ~filled.any(-1, keepdim=True)).reshape(b * c, 1, 1, p)
        flat = tokens.reshape(b * c, p, d)
        split = lambda z: z.view(b * c, p, h, dh).transpose(1, 2)  # noqa: E731  [bc, h, p, dh]
        query = self.q_proj(self.query_patches).view(-1, h, dh).transpose(0, 1) * dh ** -0.5  # [h, Q, dh]
        scores = torch.matmul(query, split(self.k_proj(flat)).transpose(-1, -2))  # [bc, h, Q, p]
        attention = torch.softmax(scores.masked_fill(~keep, -torch.inf), dim=-1)
        attended = torch.matmul(attention, split(self.v_proj(flat)))  # [bc, h, Q, dh]
        attended = self.o_proj(attended.transpose(1, 2).reshape(b * c, -1, h * dh))
        return self.token_norm(self.query_patches + attended).view(b, c, -1, d)


class QueryDecoder(nn.Module):
    """``MLP([h_c, TE(tau)])`` at every (channel, query time): ``h [B, C, d]``, ``tau [B, H]`` -> ``[B, C, H]``.

    The first layer is split into its ``h`` and ``TE(tau)`` halves (the same map as a linear
    layer on the concatenation), so it runs once per channel and once per query time.
    """

    def __init__(self, config: TFMixerConfig):
        super().__init__()
        d = config.d_model
        self.query_encoding = TimeEncoding(config.time_embedding_dim, max_cycles=float(config.num_patches))
        self.state_in = nn.Linear(d, d)
        self.time_in = nn.Linear(config.time_embedding_dim, d, bias=False)
        self.mlp = nn.Sequential(nn.GELU(), nn.Dropout(config.dropout), nn.Linear(d, d), nn.GELU(), nn.Linear(d, 1))

    def forward(self, h, tau):
        hidden = self.state_in(h)[:, :, None] + self.time_in(self.query_encoding(tau))[:, None]
        return self.mlp(hidden)[..., 0]

    def at(self, h, tau, rows, channels, queries):
        """The forecasts at the listed slots only, ``forward(h, tau)[rows, channels, queries]`` (``[n]``)."""
        hidden = self.state_in(h)[rows, channels] + self.time_in(self.query_encoding(tau))[rows, queries]
        return self.mlp(hidden)[..., 0]


class GlobalFrequencyModule(nn.Module):
    """Learnable NUDFT of every channel -> K frequency tokens per channel (and the raw coefficients)."""

    def __init__(self, config: TFMixerConfig):
        super().__init__()
        k, d = config.num_frequencies, config.d_model
        per_channel = config.frequency_layout == "per_channel"
        self.nudft = NUDFT(k, learnable=config.learnable_frequencies, init=config.frequency_init,
                           per_channel=per_channel, num_channels=config.num_channels if per_channel else None,
                           max_cycles=config.max_cycles, norm=config.nudft_norm, backend=config.nudft_backend)
        self.coefficient_embed = nn.Linear(2, d)
        self.frequency_position = nn.Parameter(torch.zeros(k, d))
        self.channel_embedding = nn.Parameter(torch.zeros(config.num_channels, d))

    def forward(self, x, t, m):
        """``x, m [B, C, L]``, ``t [B, L]`` -> tokens ``[B, C, K, d]``, ``(real, imag) [B, C, K]``."""
        real, imag = self.nudft(x, t[:, None, :], m)
        tokens = self.coefficient_embed(torch.stack([real, imag], dim=-1))
        return tokens + self.frequency_position + self.channel_embedding[:, None], (real, imag)


# ---------------------------------------------------------------------------------------------
# Model
# ---------------------------------------------------------------------------------------------
class TFMixerPreTrainedModel(PreTrainedModel):
    config_class = TFMixerConfig
    base_model_prefix = ""
    main_input_name = "values"
    supports_gradient_checkpointing = False

    def _init_weights(self, module):
        std = self.config.initializer_range
        if isinstance(module, nn.Linear):
            if getattr(module, "_zero_init", False):
                init.zeros_(module.weight)
            else:
                init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                init.zeros_(module.bias)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, TimeEncoding):
            init.copy_(module.periodic.weight, module.initial_frequencies())
            init.copy_(module.periodic.bias, module.initial_phases())
            init.ones_(module.linear.weight)
            init.zeros_(module.linear.bias)
        elif isinstance(module, NUDFT):
            # NUDFT holds the initial-frequency rule; a raw loaded from a checkpoint is flagged and kept.
            if not getattr(module.raw, "_is_hf_initialized", False):
                module.reset_parameters()
        elif isinstance(module, InverseNUDFT) and isinstance(module.coef, nn.Parameter):
            init.constant_(module.coef, self.config.seasonal_coef)
        elif isinstance(module, (LocalTimeModule, GlobalFrequencyModule)):
            for _name, param in module.named_parameters(recurse=False):
                init.normal_(param, mean=0.0, std=std)
        if isinstance(getattr(module, "channel_fallback", None), nn.Parameter):
            fallback = self.config.channel_fallback
            init.copy_(module.channel_fallback, torch.zeros(self.config.num_channels) if fallback is None
                       else torch.tensor(fallback, dtype=torch.float32))
        if isinstance(getattr(module, "level_mix", None), nn.Parameter):
            init.zeros_(module.level_mix)


class TFMixerForForecasting(TFMixerPreTrainedModel):
    """TFMixer (module docstring): ``forward(values, times, mask, query_times, targets, target_mask)``.

    Returns a :class:`TFMixerForecastOutput`; with ``targets`` its ``loss`` is the masked forecast
    MSE plus ``reconstruction_weight`` x the history reconstruction MSE, so ``Trainer`` trains it
    unchanged; ``Trainer.evaluate()`` reports ``eval_loss`` with default arguments, and with
    ``label_names=LABEL_NAMES`` (``["targets", "target_mask"]``) and
    :func:`icml26.eval.tasks.tfmixer.imts.compute_forecast_metrics` it early-stops on validation MSE.
    """

    def __init__(self, config: TFMixerConfig):
        if not isinstance(config, TFMixerConfig):
            raise TypeError(str(input_error("TFMixerForForecasting", "config", "a TFMixerConfig",
                                            described(type(config).__name__))))
        super().__init__(config)
        d, c = config.d_model, config.num_channels
        ratio, drop = config.mlp_ratio, config.dropout
        self.ltm = LocalTimeModule(config) if config.use_ltm else None
        self.time_mixer = nn.ModuleList(DualMixingBlock(config.num_query_patches, c, d, ratio, drop)
                                        for _ in range(config.num_mixing_blocks)) if config.use_ltm else None
        if config.use_gfm:
            self.gfm = GlobalFrequencyModule(config)
            self.frequency_mixer = nn.ModuleList(DualMixingBlock(config.num_frequencies, c, d, ratio, drop)
                                                 for _ in range(config.num_mixing_blocks))
            self.coefficient_head = nn.Linear(d, 2) if config.seasonal_coefficients == "refined" else None
            if self.coefficient_head is not None:
                self.coefficient_head._zero_init = True  # start from the raw NUDFT coefficients
            self.synthesis = InverseNUDFT(config.num_frequencies, coef=config.seasonal_coef,
                                          learnable_scale=config.learnable_seasonal_scale, backend=config.nudft_backend)
            # the history reconstruction's own fixed scale (None: the forecast's synthesis serves both)
            self.reconstruction_synthesis = None if config.reconstruction_scale is None else InverseNUDFT(
                config.num_frequencies, coef=config.reconstruction_scale, learnable_scale=False,
                backend=config.nudft_backend)
        else:
            self.gfm = self.frequency_mixer = self.coefficient_head = self.synthesis = None
            self.reconstruction_synthesis = None
        fallback = torch.zeros(c) if config.channel_fallback is None else torch.tensor(config.channel_fallback)
        self.channel_fallback = nn.Parameter(fallback.float())
        # (a, b, d) of forecast_level="blend" per channel, from 0 (LOCF)
        self.level_mix = nn.Parameter(torch.zeros(c, 3)) if config.forecast_level == "blend" else None
        both = config.use_gfm and config.use_ltm
        self.fusion = nn.Linear(2 * d, d) if both else None
        self.decoder = QueryDecoder(config)
        if config.decoder_zero_init:
            self.decoder.mlp[-1]._zero_init = True
        self.post_init()

    def _synthesis_at(self, a, b, omega, times, rows, channels, points, synthesis=None):
        """``synthesis(a, b, omega, times)[rows, channels, points]`` without the dense ``[B, C, N]`` result."""
        per_point_omega = omega[channels] if omega.dim() == 2 else omega
        return (synthesis or self.synthesis)(a[rows, channels], b[rows, channels], per_point_omega,
                                             times[rows, points][:, None])[:, 0]

    @property
    def frequencies(self) -> torch.Tensor | None:
        """The GFM's angular frequencies ``omega`` (``[K]`` or ``[C, K]``), None without GFM."""
        return self.gfm.nudft.omega if self.gfm is not None else None

    def forward(self, values, times, mask, query_times, targets=None, target_mask=None,
                output_components: bool = False, return_dict: bool | None = None, return_loss: bool = True,
                **kwargs) -> TFMixerForecastOutput:
        """Forecast at ``query_times`` from the history (shapes in the module docstring).

        ``return_loss`` (default True): compute ``loss`` whenever ``targets`` are given. Its default
        also tells ``Trainer`` that this model returns a loss, so ``Trainer.evaluate()`` reports
        ``eval_loss`` even without ``label_names`` (``compute_metrics`` needs
        ``label_names=["targets", "target_mask"]``; :class:`TFMixerLabelsCallback` warns when unset).

        Unobserved slots (``mask`` False) may hold anything, NaN included; ``times`` may be NaN
        where no channel is observed and ``query_times`` at padded queries (their forecasts are then
        meaningless, and masked out of the loss by ``target_mask``).
        """
        cfg = self.config
        mask, target_mask = check_imts_inputs(values, times, mask, query_times, targets, target_mask,
                                              num_channels=cfg.num_channels, function="TFMixerForForecasting")
        dtype = self.decoder.state_in.weight.dtype
        observed_rows = mask.any(-1)
        t = torch.where(observed_rows, times, 0.0).to(dtype)
        tau = torch.where(torch.isfinite(query_times), query_times, 0.0).to(dtype)
        x = torch.where(mask, values, 0.0).to(dtype).transpose(1, 2)  # [B, C, L]
        m = mask.transpose(1, 2)
        counts = m.sum(-1)
        mean = x.sum(-1) / counts.clamp(min=1)
        if cfg.instance_norm:
            x = torch.where(m, x - mean[..., None], 0.0)
        fallback = self.channel_fallback.to(x.dtype)
        if cfg.forecast_level in ("last", "blend"):  # times ascend within a series: the observed slot of largest index
            slot = torch.arange(m.shape[-1], device=m.device)
            last = torch.where(m, slot, -1).amax(-1).clamp(min=0)
            level = (x.gather(-1, last[..., None])[..., 0] + (mean if cfg.instance_norm else 0.0))
            if cfg.forecast_level == "blend":
                mix = self.level_mix.to(x.dtype)
                level = level + mix[:, 0] * (mean - level) + mix[:, 1] * (fallback - level) + mix[:, 2]
        else:
            level = mean if cfg.instance_norm else x.new_zeros(x.shape[:2])
        level = torch.where(counts > 0, level, fallback)

        pooled = []
        sparse = targets is not None and cfg.sparse_decoding
        # the observed points, listed once for the LTM and the sparse history reconstruction
        points = bucketed_nonzero(m, SLOT_BUCKET) if self.ltm is not None or (sparse and self.gfm is not None) else None
        if self.ltm is not None:
            time_tokens = self.ltm(x, t, m, points)
            for block in self.time_mixer:
                time_tokens = block(time_tokens)
            pooled.append(time_tokens.mean(2))
        seasonal = reconstruction = rec_loss = None
        # Sparse decoding: only the slots the loss reads (observed targets, observed history points).
        if sparse:  # bucketed lists (see bucketed_nonzero): entries n_targets: are dummies, dropped below
            (rows, queries, channels), n_targets = bucketed_nonzero(target_mask, SLOT_BUCKET)
            kept = slice(0, n_targets)
        if self.gfm is not None:
            freq_tokens, (real, imag) = self.gfm(x, t, m)
            for block in self.frequency_mixer:
                freq_tokens = block(freq_tokens)
            pooled.append(freq_tokens.mean(2))
            a, b = real, imag
            if self.coefficient_head is not None:
                delta = self.coefficient_head(freq_tokens)
                a, b = a + delta[..., 0], b + delta[..., 1]
            omega = self.frequencies
            if sparse:
                seasonal = self._synthesis_at(a, b, omega, tau, rows, channels, queries)  # [n]
            else:
                seasonal = self.synthesis(a, b, omega, tau[:, None, :])  # [B, C, H]
            rebuild = self.reconstruction_synthesis or self.synthesis
            if output_components or (targets is not None and not sparse):
                reconstruction = rebuild(a, b, omega, t[:, None, :])  # [B, C, L]
            if targets is not None:
                if sparse:
                    (hist_rows, hist_channels, hist_points), n_hist = points
                    rec = self._synthesis_at(a, b, omega, t, hist_rows, hist_channels, hist_points, rebuild)
                    error = (rec - x[hist_rows, hist_channels, hist_points])[:n_hist]
                    rec_loss = error.pow(2).sum() / max(n_hist, 1)
                else:
                    rec_loss = masked_mse(reconstruction, x, m)
        h = pooled[0]  # [B, C, d]
        if self.fusion is not None:
            joined = self.fusion(torch.cat(pooled, -1))
            if cfg.fusion == "gate":
                gate = torch.sigmoid(joined)
                h = gate * pooled[0] + (1 - gate) * pooled[1]
            else:
                h = joined
        if sparse:
            y = self.decoder.at(h, tau, rows, channels, queries) + level[rows, channels]
            if seasonal is not None:
                y = y + seasonal
            forecasts = x.new_full(target_mask.shape, math.nan).index_put(
                (rows[kept], queries[kept], channels[kept]), y[kept])
            seasonal = None  # the components are dense; output_components recomputes them below
            if output_components and self.gfm is not None:
                seasonal = self.synthesis(a, b, omega, tau[:, None, :])
        else:
            y = self.decoder(h, tau) + level[..., None]  # [B, C, H]
            if seasonal is not None:
                y = y + seasonal
            forecasts = y.transpose(1, 2)

        loss = forecast_loss = None
        if targets is not None and return_loss:
            if sparse:
                error = y[kept] - targets[rows[kept], queries[kept], channels[kept]].to(dtype)
                forecast_loss = squared_error_loss(error.pow(2), channels[kept], cfg.num_channels, cfg.loss_reduction)
            else:
                forecast_loss = masked_mse(forecasts, targets.to(dtype), target_mask, cfg.loss_reduction)
            loss = forecast_loss
            if rec_loss is not None and cfg.reconstruction_weight > 0:
                loss = loss + cfg.reconstruction_weight * rec_loss
        out = TFMixerForecastOutput(
            loss=loss, forecasts=forecasts, forecast_loss=forecast_loss, reconstruction_loss=rec_loss,
            seasonal=seasonal.transpose(1, 2) if output_components and seasonal is not None else None,
            reconstruction=reconstruction.transpose(1, 2) if output_components and reconstruction is not None else None)
        return out.to_tuple() if return_dict is False else out


AutoModel.register(TFMixerConfig, TFMixerForForecasting, exist_ok=True)

#: What ``Trainer`` must treat as labels for this model (its forward names no ``labels`` argument).
LABEL_NAMES = ["targets", "target_mask"]


class TFMixerLabelsCallback(TrainerCallback):
    """Warn once when ``Trainer`` runs a TFMixer without ``label_names``: ``compute_metrics`` then gets no targets.

    ``Trainer`` finds labels from the argument names of ``forward`` (names containing "label"); TFMixer's
    are ``targets`` and ``target_mask``, so ``TrainingArguments(label_names=LABEL_NAMES)`` is needed for
    metrics. ``eval_loss`` is reported either way (``forward``'s ``return_loss``).
    ``Trainer(..., callbacks=[TFMixerLabelsCallback()])``.
    """

    def __init__(self):
        self.warned = False

    def _check(self, args, model) -> None:
        if self.warned or not isinstance(model, TFMixerForForecasting):
            return
        if not set(LABEL_NAMES) <= set(args.label_names or ()):
            self.warned = True
            logger.warning("TFMixerForForecasting: Trainer sees no labels (TrainingArguments.label_names is %r), "
                           "so compute_metrics gets no targets; set TrainingArguments(label_names=%r)",
                           args.label_names, LABEL_NAMES)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        self._check(args, model)

    def on_evaluate(self, args, state, control, model=None, **kwargs):
        self._check(args, model)

    def on_predict(self, args, state, control, metrics=None, **kwargs):
        self._check(args, kwargs.get("model"))

__all__ = ["LABEL_NAMES", "SLOT_BUCKET", "TFMixerConfig", "TFMixerForForecasting", "TFMixerForecastOutput",
           "TFMixerLabelsCallback", "TFMixerPreTrainedModel", "bucketed_nonzero", "check_imts_inputs", "masked_mse",
           "squared_error_loss"]
