"""R2G (Repel-to-Grokking): an inverse-distance repulsion between attention value vectors.

The method (spec ``r2g.md`` section 2, verified in the authors' tense-inflection code): a forward
hook stores each hooked layer's value projection ``V`` (``[B, S, d]``, before the head split);
every step pairs the batch by a random permutation ``pi`` and, for each selected position ``i``,
``dis_i = sum_b ||V[b, i] - V[pi(b), i]||`` (Euclidean, not squared, summed over the batch);
``D_layer = mean_i dis_i``, ``D = sum_l w_l D_layer`` and the loss is ``CE + alpha / D``.
Minimising ``1 / D`` pushes the values of different examples apart.

What this module adds or chooses, each a documented reconstruction:

- ``distance="angular"``: ``1 - cos(u, v)`` on the same pairs, the "angle, not radius" ablation of
  the ICML version (``"cosine"`` is accepted as its alias);
- ``reduction="mean"`` averages over the pairs instead of summing: with a full batch of hundreds
  of examples the summed ``1 / D`` is B times smaller (the code used batches of 8);
- the default pairing is a random *cycle* through the batch (a derangement) rather than
  ``torch.randperm``: a fixed point pairs an example with itself (distance 0), and for a batch of
  two the identity permutation would make ``1 / D`` infinite. Pass ``perm`` to pair otherwise;
- with a per-example mask the ``k``-th selected position of one example is paired with the
  ``k``-th selected position of its partner (the spec's same-position pairing when the masks are
  equal, and still aligned under left padding or prompts of different lengths).

Entry points: :func:`r2g_term` (pure), :class:`R2GLoss` (hooks), :class:`R2GTrainer` /
``R2GSFTTrainer`` (``compute_loss`` overrides), :class:`R2GConfig`, :class:`R2GCallback` (alpha
schedule and logged values) and the Grokfast-EMA baseline (:class:`GrokfastEMA`,
:class:`GrokfastCallback`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainerCallback, TrainingArguments

__all__ = [
    "DISTANCES", "FORMS", "REDUCTIONS", "SCHEDULES",
    "GrokfastCallback", "GrokfastEMA", "R2GCallback", "R2GConfig", "R2GDataCollator", "R2GLoss",
    "R2GSFTConfig", "R2GSFTTrainer", "R2GTrainer", "R2GTrainerMixin", "R2GTrainingArguments",
    "alpha_at", "find_value_projections", "r2g_distance", "r2g_term", "random_pairing", "value_geometry",
]

DISTANCES = ("euclidean", "angular")
FORMS = ("inverse", "negative")
REDUCTIONS = ("mean", "sum")
SCHEDULES = ("constant", "linear", "cosine")
_ALIASES = {"cosine": "angular"}  # the spec's name for the angular distance


def _choice(name: str, value: Any, choices: Sequence[str]) -> str:
    value = _ALIASES.get(value, value) if name.endswith("distance") else value
    if value not in choices:
        raise ValueError(f"{name} must be one of {list(choices)}, got {value!r}")
    return value


def _non_negative(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _count(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{name} must be an int >= 0, got {value!r}")
    return value


# -- the term (pure functions) -----------------------------------------------------------------
def random_pairing(batch_size: int, *, generator: torch.Generator | None = None,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """A uniformly random cyclic permutation of ``range(batch_size)``: no example is its own partner."""
    order = torch.randperm(batch_size, generator=generator)
    perm = torch.empty_like(order)
    perm[order] = order.roll(-1)
    return perm.to(device) if device is not None else perm


def _gather_selected(values: torch.Tensor, position_mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, K, d]`` selected vectors (k-th selected position of each example) and their ``[B, K]`` validity."""
    B, S, _ = values.shape
    if position_mask is None:
        return values, torch.ones(B, S, dtype=torch.bool, device=values.device)
    mask = position_mask.to(device=values.device, dtype=torch.bool)
    if mask.shape not in ((S,), (B, S)):
        raise ValueError(f"position_mask must have shape [S] or [B, S] = [{B}, {S}], got {tuple(mask.shape)}")
    mask = mask.expand(B, S)
    counts = mask.sum(1)
    K = int(counts.max()) if B else 0
    # Selected positions first, in their order (a stable sort of "not selected").
    index = torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices[:, :K]
    gathered = values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.shape[-1]))
    valid = torch.arange(K, device=values.device).unsqueeze(0) < counts.unsqueeze(1)
    return gathered, valid


def _check_values(values: Any) -> None:
    if not isinstance(values, torch.Tensor) or values.dim() != 3 or not values.is_floating_point():
        got = f"{tuple(values.shape)} {values.dtype}" if isinstance(values, torch.Tensor) else type(values).__name__
        raise ValueError(f"values must be a floating [B, S, d] tensor, got {got}")


def r2g_distance(values: torch.Tensor, *, position_mask: torch.Tensor | None = None,
                 perm: torch.Tensor | None = None, distance: str = "euclidean",
                 reduction: str = "mean") -> torch.Tensor:
    """``D`` for one layer: the mean over selected positions of the batch-reduced pair distances.

    Args:
        values: ``[B, S, d]`` value vectors (any float dtype; computed in fp32).
        position_mask: ``[S]`` or ``[B, S]`` booleans choosing the positions (None: all).
        perm: ``[B]`` permutation pairing example ``b`` with ``perm[b]`` (None: :func:`random_pairing`).
        distance: ``"euclidean"`` (``||u - v||``) or ``"angular"`` (``1 - cos(u, v)``).
        reduction: ``"sum"`` (the authors' code) or ``"mean"`` over the valid pairs of a position.

    Returns a 0-d fp32 tensor; 0 (still differentiable) when no pair is valid, e.g. a batch of one.
    """
    _check_values(values)
    distance = _choice("distance", distance, DISTANCES)
    reduction = _choice("reduction", reduction, REDUCTIONS)
    x, valid = _gather_selected(values.float(), position_mask)
    B = x.shape[0]
    if perm is None:
        perm = random_pairing(B, device=x.device)
    else:
        perm = torch.as_tensor(perm, device=x.device, dtype=torch.long)
        if perm.shape != (B,) or not torch.equal(perm.sort().values, torch.arange(B, device=x.device)):
            raise ValueError(f"perm must be a permutation of range({B}), got {perm.tolist()}")
    # A self-pair (a fixed point of a user's perm) has no partner to repel: it is not a pair.
    pair_valid = valid & valid[perm] & (perm != torch.arange(B, device=x.device)).unsqueeze(1)
    partner = x[perm]
    if distance == "euclidean":
        diff = torch.where(pair_valid.unsqueeze(-1), x - partner, torch.zeros((), device=x.device))
        dist = torch.linalg.vector_norm(diff, dim=-1)
    else:
        dist = 1.0 - F.cosine_similarity(x, partner, dim=-1, eps=1e-8)
        dist = torch.where(pair_valid, dist, torch.zeros((), device=x.device))
    n_pairs = pair_valid.sum(0)
    per_position = dist.sum(0)
    if reduction == "mean":
        per_position = per_position / n_pairs.clamp_min(1)
    used = n_pairs > 0
    # No valid pair (a batch of one, an empty mask): D = 0, which the term maps to 0.
    return (per_position * used).sum() / used.sum().clamp_min(1)


def _term_from_distance(D: torch.Tensor, form: str) -> torch.Tensor:
    if form == "negative":
        return -D
    # 1 / D, and 0 where D = 0 (no pair, or identical values: no direction to repel along). The
    # inner where keeps the gradient finite: 1 / 0 is never formed.
    positive = D > 0
    return torch.where(positive, 1.0 / torch.where(positive, D, torch.ones_like(D)), torch.zeros_like(D))


def r2g_term(values: torch.Tensor, *, position_mask: torch.Tensor | None = None, perm: torch.Tensor | None = None,
             distance: str = "euclidean", form: str = "inverse", reduction: str = "mean") -> torch.Tensor:
    """The R2G term (without alpha) of one ``[B, S, d]`` tensor: ``1 / D`` or ``-D``.

    ``D`` is :func:`r2g_distance`. A pure function, computed in fp32; a batch of one (or a mask that
    leaves no pair, or values that are all equal) gives 0 rather than an error or an infinity.

    >>> v = torch.tensor([[[0.0, 0.0]], [[3.0, 4.0]]])
    >>> float(r2g_term(v, perm=torch.tensor([1, 0]), reduction="sum"))  # D = 5 + 5
    0.1
    """
    form = _choice("form", form, FORMS)
    D = r2g_distance(values, position_mask=position_mask, perm=perm, distance=distance, reduction=reduction)
    return _term_from_distance(D, form)


def value_geometry(values: torch.Tensor, position_mask: torch.Tensor | None = None) -> dict[str, float]:
    """Mean pairwise cosine distance and mean L2 norm of the selected value vectors (no gradient).

    The pairs are all examples of the batch at the same selected slot (``1 - mean_{i != j} cos``,
    computed from the sum of unit vectors in O(B d)), averaged over the slots with two or more
    valid vectors.
    """
    _check_values(values)
    with torch.no_grad():
        x, valid = _gather_selected(values.detach().float(), position_mask)
        norms = torch.linalg.vector_norm(x, dim=-1)
        v_norm = float(norms[valid].mean()) if bool(valid.any()) else float("nan")
        unit = F.normalize(x, dim=-1) * valid.unsqueeze(-1)
        n = valid.sum(0).float()
        total = unit.sum(0)
        mean_cos = ((total * total).sum(-1) - n) / (n * (n - 1)).clamp_min(1)
        used = n >= 2
        angular = float((1.0 - mean_cos[used]).mean()) if bool(used.any()) else float("nan")
    return {"angular_dist": angular, "v_norm": v_norm}


# -- hooks on the value projections ------------------------------------------------------------
def find_value_projections(model: torch.nn.Module) -> list[tuple[str, torch.nn.Module, slice | None]]:
    """The value projections of a decoder, in layer order, as ``(name, module, output slice)``.

    ``*.v_proj`` modules (Llama, Qwen2/3, Mistral, Gemma... and their peft-wrapped forms) give their
    whole output; GPT-2's fused ``attn.c_attn`` (``Conv1D`` with ``nf = 3 d``) gives its last third.
    """
    found = []
    for name, module in model.named_modules():
        leaf = name.rsplit(".", 1)[-1]
        if leaf == "v_proj":
            found.append((name, module, None))
        elif leaf == "c_attn" and hasattr(module, "nf") and module.nf % 3 == 0:
            d = module.nf // 3
            found.append((name, module, slice(2 * d, 3 * d)))
    if not found:
        raise ValueError(f"model must have value projections named 'v_proj' (Llama, Qwen2, Qwen3, Mistral) or "
                         f"GPT-2's fused 'c_attn', got none in {type(model).__name__}")
    return found


class R2GLoss:
    """Forward hooks on a decoder's value projections and the R2G term computed from them.

    Use ``loss = ce + r2g(...)`` (``alpha * term``) right after the forward pass that computed
    ``ce``; the hooks keep the values with their graph, so the term's gradient flows into the
    model. Use as a context manager (or call :meth:`remove`) to take the hooks off.

    Args:
        model: a Hugging Face decoder (see :func:`find_value_projections`).
        layers: indices into the value projections (None: all; negative counts from the end).
        positions: token positions to repel when the batch gives no ``r2g_mask`` (None: all
            non-padding positions); positions beyond a sequence's length are ignored.
        alpha: weight of the term, >= 0 (0.08 for modular addition, 0.01 for multiplication).
        distance, form, reduction: see :func:`r2g_term`.
        layer_weights: one weight per hooked layer (None: 1 / number of layers).
        track_stats: record the term, angular distance and V norm of each call for logging.
    """

    def __init__(self, model: torch.nn.Module, layers: Iterable[int] | None = None,
                 positions: Iterable[int] | None = None, alpha: float = 0.08, distance: str = "euclidean",
                 form: str = "inverse", reduction: str = "mean", layer_weights: Sequence[float] | None = None,
                 track_stats: bool = True) -> None:
        self.alpha = _non_negative("alpha", alpha)
        self.distance = _choice("distance", distance, DISTANCES)
        self.form = _choice("form", form, FORMS)
        self.reduction = _choice("reduction", reduction, REDUCTIONS)
        targets = find_value_projections(model)
        n = len(targets)
        layers = list(range(n) if layers is None else layers)
        for layer in layers:
            if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer < n:
                raise ValueError(f"layers must be indices in [{-n}, {n - 1}] ({n} value projections), got {layer!r}")
        chosen = [layer % n for layer in layers]
        if not chosen or len(set(chosen)) != len(chosen):
            raise ValueError(f"layers must be distinct and non-empty, got {list(layers)}")
        self.layers = chosen
        self.targets = [targets[i] for i in chosen]
        layer_weights = [1.0 / len(chosen)] * len(chosen) if layer_weights is None else list(layer_weights)
        if len(layer_weights) != len(chosen):
            raise ValueError(f"layer_weights must have one weight per hooked layer ({len(chosen)}), "
                             f"got {len(layer_weights)}")
        self.layer_weights = [_non_negative("layer_weights[i]", w) for w in layer_weights]
        if positions is not None:
            positions = list(positions)
            if any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in positions) or not positions:
                raise ValueError(f"positions must be a non-empty list of non-negative ints, got {positions!r}")
        self.positions = positions
        self.track_stats = track_stats
        self.recording = True  # the trainers record only during their loss's forward pass
        self.values: dict[int, torch.Tensor] = {}
        self._handles: list[Any] = []
        self._stats: dict[str, list[float]] = {}
        self.attach()

    # -- hooks ---------------------------------------------------------------------------------
    def _hook(self, slot: int, out_slice: slice | None):
        def hook(module, args, output):
            if not self.recording:
                return
            out = output[0] if isinstance(output, tuple) else output
            if out_slice is not None:
                out = out[..., out_slice]
            kept = self.values.get(slot)
            # A later no-grad forward (metrics, generation) must not replace the values of the
            # forward pass whose loss we are about to complete.
            if kept is None or out.requires_grad or not kept.requires_grad:
                self.values[slot] = out
        return hook

    def attach(self) -> R2GLoss:
        """Register the hooks (done by the constructor; again after :meth:`remove`)."""
        if not self._handles:
            self._handles = [module.register_forward_hook(self._hook(slot, sl))
                             for slot, (_, module, sl) in enumerate(self.targets)]
        return self

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.values.clear()

    attached = property(lambda self: bool(self._handles))

    def clear(self) -> None:
        """Drop the stored values (and their graph) once the term has been computed."""
        self.values.clear()

    __enter__ = attach

    def __exit__(self, *exc) -> None:
        self.remove()

    # -- the term ------------------------------------------------------------------------------
    def position_mask(self, seq_len: int, batch_size: int, position_mask: torch.Tensor | None = None,
                      attention_mask: torch.Tensor | None = None, device=None) -> torch.Tensor | None:
        """The ``[B, S]`` selection: ``position_mask`` if given, else ``positions``; never padding."""
        if position_mask is not None:
            mask = torch.as_tensor(position_mask, device=device).bool()
            if mask.shape != (batch_size, seq_len):
                raise ValueError(f"r2g_mask must have shape [B, S] = [{batch_size}, {seq_len}], "
                                 f"got {tuple(mask.shape)}")
        elif self.positions is not None:
            mask = torch.zeros(batch_size, seq_len, dtype=torch.bool, device=device)
            mask[:, [p for p in self.positions if p < seq_len]] = True
        elif attention_mask is None:
            return None
        else:
            mask = torch.ones(batch_size, seq_len, dtype=torch.bool, device=device)
        if attention_mask is not None:
            mask = mask & torch.as_tensor(attention_mask, device=device).bool()
        return mask

    def compute(self, position_mask: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                perm: torch.Tensor | None = None) -> torch.Tensor:
        """The term (without alpha) from the values of the last forward pass: ``1 / D`` or ``-D``.

        ``D = sum_l w_l D_l`` over the hooked layers; each layer draws its own pairing unless
        ``perm`` is given.
        """
        if len(self.values) != len(self.targets):
            raise RuntimeError("R2GLoss.compute needs a forward pass of the hooked model first (no values stored; "
                               "were the hooks removed or cleared?)")
        first = self.values[0]
        B, S = first.shape[:2]
        mask = self.position_mask(S, B, position_mask, attention_mask, device=first.device)
        D = first.new_zeros((), dtype=torch.float32)
        for slot, weight in enumerate(self.layer_weights):
            D = D + weight * r2g_distance(self.values[slot], position_mask=mask, perm=perm,
                                          distance=self.distance, reduction=self.reduction)
        term = _term_from_distance(D, self.form)
        if self.track_stats:
            geometry = [value_geometry(self.values[s], mask) for s in range(len(self.targets))]
            self._record(term=float(term.detach()), distance=float(D.detach()),
                         angular_dist=sum(g["angular_dist"] for g in geometry) / len(geometry),
                         v_norm=sum(g["v_norm"] for g in geometry) / len(geometry))
        return term

    def __call__(self, position_mask: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                 perm: torch.Tensor | None = None) -> torch.Tensor:
        """``alpha * term``: the quantity to add to the task loss (exactly 0 when alpha is 0)."""
        if self.alpha == 0.0:  # skip the graph; still record the statistics (baseline runs log them too)
            if self.track_stats:
                with torch.no_grad():
                    self.compute(position_mask, attention_mask, perm)
            device = next(iter(self.values.values())).device if self.values else None
            return torch.zeros((), device=device)
        return self.alpha * self.compute(position_mask, attention_mask, perm)

    def _record(self, **stats: float) -> None:
        for key, value in stats.items():
            self._stats.setdefault(key, []).append(value)

    def pop_stats(self) -> dict[str, float]:
        """Means of the recorded statistics since the last call (NaNs skipped), then reset."""
        finite = {k: [v for v in vs if math.isfinite(v)] for k, vs in self._stats.items()}
        self._stats = {}
        return {k: sum(vs) / len(vs) if vs else float("nan") for k, vs in finite.items()}

    def __repr__(self) -> str:
        names = [name for name, _, _ in self.targets]
        return (f"R2GLoss(alpha={self.alpha}, distance={self.distance!r}, form={self.form!r}, "
                f"reduction={self.reduction!r}, layers={names}, positions={self.positions})")


# -- configuration, schedule and callbacks -----------------------------------------------------
@dataclass
class R2GConfig:
    """R2G settings; every field is prefixed ``r2g_`` so it merges with ``TrainingArguments``.

    Parse it next to any arguments class (``HfArgumentParser((SFTConfig, R2GConfig))``) or use the
    merged :class:`R2GTrainingArguments` / ``R2GSFTConfig``.
    """

    r2g_alpha: float = field(default=0.08, metadata={"help": "weight of the R2G term (>= 0); 0 disables it"})
    r2g_distance: str = field(default="euclidean", metadata={"help": "euclidean or angular (1 - cos)"})
    r2g_form: str = field(default="inverse", metadata={"help": "inverse (alpha / D, the authors' code) or negative"})
    r2g_reduction: str = field(default="mean", metadata={"help": "mean or sum of the pair distances per position"})
    r2g_layers: list[int] | None = field(default=None, metadata={"help": "indices of hooked layers (default all)"})
    r2g_positions: list[int] | None = field(
        default=None, metadata={"help": "positions to repel when the data has no r2g_mask column (default all)"})
    r2g_layer_weights: list[float] | None = field(default=None, metadata={"help": "per-layer weights (default 1/L)"})
    r2g_schedule: str = field(default="constant", metadata={"help": "alpha schedule: constant, linear or cosine"})
    r2g_warmup_steps: int = field(default=0, metadata={"help": "steps of linear alpha warm-up (linear, cosine)"})

    def __post_init__(self) -> None:
        self._validate_r2g()

    def _validate_r2g(self) -> None:
        _non_negative("r2g_alpha", self.r2g_alpha)
        self.r2g_distance = _choice("r2g_distance", self.r2g_distance, DISTANCES)
        _choice("r2g_form", self.r2g_form, FORMS)
        _choice("r2g_reduction", self.r2g_reduction, REDUCTIONS)
        _choice("r2g_schedule", self.r2g_schedule, SCHEDULES)
        _count("r2g_warmup_steps", self.r2g_warmup_steps)

    def r2g_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of :class:`R2GLoss`."""
        return dict(layers=self.r2g_layers, positions=self.r2g_positions, alpha=self.r2g_alpha,
                    distance=self.r2g_distance, form=self.r2g_form, reduction=self.r2g_reduction,
                    layer_weights=self.r2g_layer_weights)


def alpha_at(step: int, *, alpha: float, schedule: str = "constant", warmup_steps: int = 0,
             total_steps: int | None = None) -> float:
    """Alpha at ``step``: constant; linear warm-up from 0 to ``alpha`` over ``warmup_steps``; or
    cosine (the same warm-up, then a half-cosine decay to 0 at ``total_steps``)."""
    schedule = _choice("schedule", schedule, SCHEDULES)
    if schedule == "constant":
        return alpha
    if warmup_steps > 0 and step < warmup_steps:
        return alpha * step / warmup_steps
    if schedule == "linear" or not total_steps or total_steps <= warmup_steps:
        return alpha
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    return alpha * 0.5 * (1.0 + math.cos(math.pi * progress))


class R2GCallback(TrainerCallback):
    """Sets ``r2g.alpha`` from the schedule at each step and gathers the values to log.

    The R2G trainers bind it to their :class:`R2GLoss` and write :meth:`pop_logs` into every
    training log: ``r2g/term``, ``r2g/distance``, ``r2g/angular_dist`` (mean pairwise cosine
    distance of the hooked V at the selected positions), ``r2g/v_norm`` and ``r2g/alpha``.
    """

    def __init__(self, r2g: R2GLoss | None = None, *, alpha: float | None = None, schedule: str = "constant",
                 warmup_steps: int = 0, total_steps: int | None = None) -> None:
        self.r2g = r2g
        self.alpha = None if alpha is None else _non_negative("alpha", alpha)
        self.schedule = _choice("schedule", schedule, SCHEDULES)
        self.warmup_steps, self.total_steps = _count("warmup_steps", warmup_steps), total_steps

    def bind(self, r2g: R2GLoss) -> R2GCallback:
        self.r2g, self.alpha = r2g, r2g.alpha if self.alpha is None else self.alpha
        return self

    def alpha_at(self, step: int, total_steps: int | None = None) -> float:
        return alpha_at(step, alpha=self.alpha if self.alpha is not None else 0.0, schedule=self.schedule,
                        warmup_steps=self.warmup_steps, total_steps=self.total_steps or total_steps)

    def on_step_begin(self, args, state, control, **kwargs):
        if self.r2g is not None:
            self.r2g.alpha = self.alpha_at(state.global_step, state.max_steps)

    def pop_logs(self) -> dict[str, float]:
        if self.r2g is None:
            return {}
        return {**{f"r2g/{key}": value for key, value in self.r2g.pop_stats().items()}, "r2g/alpha": self.r2g.alpha}


class GrokfastEMA:
    """Grokfast's EMA gradient filter (ironjr/grokfast ``gradfilter_ema``), applied in place.

    Between ``backward()`` and ``step()``: ``ema = a * ema + (1 - a) * g`` (the EMA starts at the
    first gradient) and ``g += lamb * ema``. Paper values: ``a = 0.98, lamb = 2``.
    """

    def __init__(self, alpha: float = 0.98, lamb: float = 2.0) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"Grokfast alpha must be in [0, 1), got {alpha!r}")
        self.alpha, self.lamb = float(alpha), _non_negative("lamb", lamb)
        self.ema: dict[str, torch.Tensor] = {}

    @torch.no_grad()
    def __call__(self, model: torch.nn.Module) -> None:
        for name, param in model.named_parameters():
            if param.grad is None or not param.requires_grad:
                continue
            if name not in self.ema:
                self.ema[name] = param.grad.detach().clone()
            else:
                self.ema[name].mul_(self.alpha).add_(param.grad, alpha=1.0 - self.alpha)
            param.grad.add_(self.ema[name], alpha=self.lamb)


class GrokfastCallback(TrainerCallback):
    """Grokfast-EMA as a ``Trainer`` callback (after gradient clipping, before the optimizer step)."""

    def __init__(self, alpha: float = 0.98, lamb: float = 2.0) -> None:
        self.filter = GrokfastEMA(alpha, lamb)

    def on_pre_optimizer_step(self, args, state, control, model=None, **kwargs):
        if model is not None:
            self.filter(model)


# -- trainers ----------------------------------------------------------------------------------
class R2GDataCollator:
    """Wraps a collator so that a per-example ``r2g_mask`` column survives batching.

    The mask of each example is written onto its real tokens (``attention_mask == 1``, in
    order), so it follows left or right padding; a mask longer than the (truncated) sequence is
    cut at the end.
    """

    def __init__(self, base) -> None:
        self.base = base

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if not examples or "r2g_mask" not in examples[0]:
            return self.base(examples)
        masks = [ex["r2g_mask"] for ex in examples]
        batch = self.base([{k: v for k, v in ex.items() if k != "r2g_mask"} for ex in examples])
        if "attention_mask" in batch:
            attention = batch["attention_mask"].bool()
        elif "input_ids" in batch and batch["input_ids"].dim() == 2 and batch["input_ids"].shape[0] == len(masks) \
                and all(len(m) == batch["input_ids"].shape[1] for m in masks):
            attention = torch.ones_like(batch["input_ids"], dtype=torch.bool)  # unpadded, equal lengths
        else:
            raise ValueError("r2g_mask needs padded batches with an attention_mask, or sequences of equal length "
                             "(no packing / padding_free)")
        out = torch.zeros_like(attention)
        for row, mask in enumerate(masks):
            real = attention[row].nonzero().flatten()
            mask = torch.as_tensor(mask, dtype=torch.bool)[: real.numel()]
            out[row, real[: mask.numel()]] = mask
        batch["r2g_mask"] = out
        return batch


class R2GTrainerMixin:
    """``compute_loss`` = the parent's loss + ``alpha * term`` from the same forward pass.

    Put it first in the bases: ``class MyTrainer(R2GTrainerMixin, SomeTrainer)``. Settings come
    from ``r2g_config=`` or, when ``args`` is an :class:`R2GConfig` (the merged argument classes),
    from ``args``. Gradient accumulation: the term is computed per micro-batch and, when the
    parent's loss is already normalised over the accumulated batch, divided by the number of
    micro-batches, so the update uses the mean term exactly as it uses the mean token loss.
    """

    def __init__(self, *args, r2g_config: R2GConfig | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if r2g_config is None:
            r2g_config = self.args if isinstance(self.args, R2GConfig) else R2GConfig()
        if not isinstance(r2g_config, R2GConfig):
            raise ValueError(f"r2g_config must be an R2GConfig, got {type(r2g_config).__name__}")
        if getattr(self.args, "packing", False) or getattr(self.args, "padding_free", False):
            raise ValueError("R2G pairs examples across the batch: packing=True / padding_free=True put the whole "
                             "batch in one row; set both to False")
        self.r2g_config = r2g_config
        self.r2g = R2GLoss(self.accelerator.unwrap_model(self.model), **r2g_config.r2g_kwargs())
        callback = next((cb for cb in self.callback_handler.callbacks if isinstance(cb, R2GCallback)), None)
        if callback is None:
            callback = R2GCallback(schedule=r2g_config.r2g_schedule, warmup_steps=r2g_config.r2g_warmup_steps)
            self.add_callback(callback)
        self.r2g_callback = callback.bind(self.r2g)
        self.data_collator = R2GDataCollator(self.data_collator)

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if self._signature_columns is not None and "r2g_mask" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "r2g_mask"]

    def _loss_is_scaled_for_ga(self, num_items_in_batch) -> bool:
        if self.loss_is_scaled_for_ga is not None:
            return self.loss_is_scaled_for_ga
        return bool((self.model_accepts_loss_kwargs and num_items_in_batch is not None)
                    or self.compute_loss_func is not None)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        position_mask = inputs.pop("r2g_mask", None)
        attention_mask = inputs.get("attention_mask")
        self.r2g.clear()
        self.r2g.recording = True
        try:  # record only this forward, not a gradient-checkpointing recomputation during backward
            result = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                          num_items_in_batch=num_items_in_batch)
        finally:
            self.r2g.recording = False
        loss, outputs = result if return_outputs else (result, None)
        if model.training and self.r2g.values:
            extra = self.r2g(position_mask=position_mask, attention_mask=attention_mask)
            if self.r2g.alpha > 0 and not extra.requires_grad and torch.is_grad_enabled():
                raise RuntimeError("the R2G term carries no gradient: the hooked values were computed without "
                                   "autograd (reentrant gradient checkpointing?); use gradient_checkpointing_kwargs="
                                   "{'use_reentrant': False} or turn gradient checkpointing off")
            if self._loss_is_scaled_for_ga(num_items_in_batch):
                extra = extra / self.current_gradient_accumulation_steps
            loss = loss + extra.to(loss.dtype)
        self.r2g.clear()
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        inputs = {k: v for k, v in inputs.items() if k != "r2g_mask"}
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)

    def log(self, logs: dict[str, float], *args, **kwargs) -> None:
        if "loss" in logs:  # a training log
            logs.update(self.r2g_callback.pop_logs())
        super().log(logs, *args, **kwargs)


class R2GTrainer(R2GTrainerMixin, Trainer):
    """:class:`transformers.Trainer` with the R2G term added to its loss (see :class:`R2GTrainerMixin`)."""


@dataclass
class R2GTrainingArguments(TrainingArguments, R2GConfig):
    """``TrainingArguments`` with the :class:`R2GConfig` fields merged in (one HfArgumentParser class)."""

    def __post_init__(self) -> None:
        self._validate_r2g()
        super().__post_init__()


def _build_sft_classes() -> dict[str, type]:
    """``R2GSFTTrainer`` and ``R2GSFTConfig``, built on first use so that TRL loads only when needed."""
    from trl import SFTConfig, SFTTrainer

    class R2GSFTTrainer(R2GTrainerMixin, SFTTrainer):
        """:class:`trl.SFTTrainer` with the R2G term added to its loss (see :class:`R2GTrainerMixin`)."""

    @dataclass
    class R2GSFTConfig(SFTConfig, R2GConfig):
        """``trl.SFTConfig`` with the :class:`R2GConfig` fields merged in."""

        def __post_init__(self) -> None:
            self._validate_r2g()
            super().__post_init__()

    for cls in (R2GSFTTrainer, R2GSFTConfig):
        cls.__module__ = __name__
        cls.__qualname__ = cls.__name__
    return {"R2GSFTTrainer": R2GSFTTrainer, "R2GSFTConfig": R2GSFTConfig}


def __getattr__(name: str):
    if name in ("R2GSFTTrainer", "R2GSFTConfig"):
        classes = _build_sft_classes()
        globals().update(classes)
        return classes[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
