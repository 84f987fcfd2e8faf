"""R2G (Repel-to-Grokking): an inverse-distance repulsion between attention value vectors.

The method (R2G, ICLR 2026 submission #10469, OpenReview ``yiSic9R2r8``, the method section as its
reviews describe it, and the authors' tense-inflection code): a forward hook stores each hooked
layer's value projection ``V`` (``[B, S, d]``, before the head split); every step pairs the batch by
a random permutation ``pi`` and, for each selected position ``i``,
``dis_i = sum_b ||V[b, i] - V[pi(b), i]||`` (Euclidean, not squared, summed over the batch);
``D_layer = mean_i dis_i``, ``D = sum_l w_l D_layer`` and the loss is ``CE + alpha / D``.
Minimising ``1 / D`` pushes the values of different examples apart. The ICML 2026 version (its
arXiv id is not public) keeps the method and adds the angular reading below.

Reconstruction: what this module adds or chooses:

- ``distance="angular"``: ``1 - cos(u, v)`` on the same pairs, the "angle, not radius" ablation of
  the ICML version (``"cosine"`` is accepted as its alias);
- ``reduction="mean"`` averages over the pairs instead of summing: with a full batch of hundreds
  of examples the summed ``1 / D`` is B times smaller (the code used batches of 8);
- the default pairing is a random *cycle* through the batch (a derangement) rather than
  ``torch.randperm``: a fixed point pairs an example with itself (distance 0), and for a batch of
  two the identity permutation would make ``1 / D`` infinite. Pass ``perm`` to pair otherwise;
- with a per-example mask the ``k``-th selected position of one example is paired with the
  ``k``-th selected position of its partner (the paper's same-position pairing when the masks are
  equal, and still aligned under left padding or prompts of different lengths);
- NaN in the values gives a NaN term, as cross-entropy on NaN logits does, so a diverged run shows
  in the loss; the term is 0 only when no pair exists or every selected pair coincides.

This module holds the term and the hooks and imports only torch: :func:`r2g_term` (pure) and
:class:`R2GLoss` (hooks). The trainers and their configs live in :mod:`icml26.training.r2g.trainer`
(:class:`R2GTrainer`, ``R2GSFTTrainer``, :class:`R2GConfig`, :class:`R2GCallback`, ...) and the
Grokfast-EMA baseline in :mod:`icml26.training.r2g.grokfast`; both are importable from here too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from icml26.errors import describe, described, input_error
from icml26.kernels import values_checked
from icml26.validation import check_choice, check_finite, check_int

__all__ = ["DISTANCES", "FORMS", "REDUCTIONS", "SCHEDULES", "R2GLoss", "find_value_projections", "r2g_distance",
    "r2g_term", "random_pairing", "value_geometry"]

DISTANCES = ("euclidean", "angular")
FORMS = ("inverse", "negative")
REDUCTIONS = ("mean", "sum")
SCHEDULES = ("constant", "linear", "cosine")
_ALIASES = {"cosine": "angular"}  # the name the paper's reviewers use for the angular distance


def _canonical_distance(distance: Any) -> Any:
    return _ALIASES.get(distance, distance) if isinstance(distance, str) else distance


# -- the term (pure functions) -----------------------------------------------------------------
def random_pairing(batch_size: int, *, generator: torch.Generator | None = None,
                   device: torch.device | str | None = None) -> torch.Tensor:
    """A uniformly random cyclic permutation of ``range(batch_size)``: no example is its own partner."""
    check_int("random_pairing", "batch_size", batch_size, low=1)
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
        raise input_error("r2g_distance", "position_mask", f"shape [S] or [B, S] = [{B}, {S}]", describe(mask))
    mask = mask.expand(B, S)
    counts = mask.sum(1)
    K = int(counts.max()) if B else 0
    # Selected positions first, in their order (a stable sort of "not selected").
    index = torch.sort((~mask).to(torch.uint8), dim=1, stable=True).indices[:, :K]
    gathered = values.gather(1, index.unsqueeze(-1).expand(-1, -1, values.shape[-1]))
    valid = torch.arange(K, device=values.device).unsqueeze(0) < counts.unsqueeze(1)
    return gathered, valid


def _check_values(function: str, values: Any) -> None:
    if not isinstance(values, torch.Tensor):
        raise TypeError(f"{function}: values: expected a floating [B, S, d] tensor, got {type(values).__name__}")
    if values.dim() != 3 or not values.is_floating_point():
        raise input_error(function, "values", "a floating [B, S, d] tensor", describe(values))


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

    Returns a 0-d fp32 tensor; 0 (still differentiable) when no pair is valid, e.g. a batch of one;
    NaN when a selected value is NaN. A given ``perm`` is checked to be a permutation on CPU tensors
    (or with ``ICML26_CHECK_VALUES=1``); its shape always.
    """
    _check_values("r2g_distance", values)
    distance = check_choice("r2g_distance", "distance", _canonical_distance(distance), DISTANCES)
    reduction = check_choice("r2g_distance", "reduction", reduction, REDUCTIONS)
    x, valid = _gather_selected(values.float(), position_mask)
    B = x.shape[0]
    if perm is None:
        perm = random_pairing(B, device=x.device)
    else:
        perm = torch.as_tensor(perm, device=x.device, dtype=torch.long)
        if perm.shape != (B,):
            raise input_error("r2g_distance", "perm", f"a permutation of range({B})", describe(perm))
        if values_checked(perm) and not torch.equal(perm.sort().values, torch.arange(B, device=x.device)):
            raise input_error("r2g_distance", "perm", f"a permutation of range({B})", perm.tolist())
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
    # 1 / D, and 0 where D = 0 (no pair, or identical values: no direction to repel along); a NaN D
    # stays NaN. The inner where keeps the gradient finite: 1 / 0 is never formed.
    positive = D > 0
    other = torch.where(torch.isnan(D), D, torch.zeros_like(D))
    return torch.where(positive, 1.0 / torch.where(positive, D, torch.ones_like(D)), other)


def r2g_term(values: torch.Tensor, *, position_mask: torch.Tensor | None = None, perm: torch.Tensor | None = None,
             distance: str = "euclidean", form: str = "inverse", reduction: str = "mean") -> torch.Tensor:
    """The R2G term (without alpha) of one ``[B, S, d]`` tensor: ``1 / D`` or ``-D``.

    ``D`` is :func:`r2g_distance`. A pure function, computed in fp32; a batch of one (or a mask that
    leaves no pair, or values that are all equal) gives 0 rather than an error or an infinity, and
    NaN values give NaN (never a silent 0).

    >>> v = torch.tensor([[[0.0, 0.0]], [[3.0, 4.0]]])
    >>> float(r2g_term(v, perm=torch.tensor([1, 0]), reduction="sum"))  # D = 5 + 5
    0.1
    """
    form = check_choice("r2g_term", "form", form, FORMS)
    D = r2g_distance(values, position_mask=position_mask, perm=perm, distance=distance, reduction=reduction)
    return _term_from_distance(D, form)


def value_geometry(values: torch.Tensor, position_mask: torch.Tensor | None = None) -> dict[str, float]:
    """Mean pairwise cosine distance and mean L2 norm of the selected value vectors (no gradient).

    The pairs are all examples of the batch at the same selected slot (``1 - mean_{i != j} cos``,
    computed from the sum of unit vectors in O(B d)), averaged over the slots with two or more
    valid vectors.
    """
    _check_values("value_geometry", values)
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
        raise input_error("find_value_projections", "model",
                          "value projections named 'v_proj' (Llama, Qwen2, Qwen3, Mistral) or GPT-2's fused 'c_attn'",
                          described(f"none in {type(model).__name__}"))
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
        distance: see :func:`r2g_term`.
        form: see :func:`r2g_term`.
        reduction: see :func:`r2g_term`.
        layer_weights: one weight per hooked layer (None: 1 / number of layers).
        track_stats: record the term, angular distance and V norm of each call for logging.
    """

    def __init__(self, model: torch.nn.Module, layers: Iterable[int] | None = None,
                 positions: Iterable[int] | None = None, alpha: float = 0.08, distance: str = "euclidean",
                 form: str = "inverse", reduction: str = "mean", layer_weights: Sequence[float] | None = None,
                 track_stats: bool = True) -> None:
        self.alpha = check_finite("R2GLoss", "alpha", alpha, non_negative=True)
        self.distance = check_choice("R2GLoss", "distance", _canonical_distance(distance), DISTANCES)
        self.form = check_choice("R2GLoss", "form", form, FORMS)
        self.reduction = check_choice("R2GLoss", "reduction", reduction, REDUCTIONS)
        targets = find_value_projections(model)
        n = len(targets)
        layers = list(range(n) if layers is None else layers)
        for layer in layers:
            if isinstance(layer, bool) or not isinstance(layer, int) or not -n <= layer < n:
                raise input_error("R2GLoss", "layers", f"indices in [{-n}, {n - 1}] ({n} value projections)", layer)
        chosen = [layer % n for layer in layers]
        if not chosen or len(set(chosen)) != len(chosen):
            raise input_error("R2GLoss", "layers", "distinct indices, at least one", list(layers))
        self.layers = chosen
        self.targets = [targets[i] for i in chosen]
        layer_weights = [1.0 / len(chosen)] * len(chosen) if layer_weights is None else list(layer_weights)
        if len(layer_weights) != len(chosen):
            raise input_error("R2GLoss", "layer_weights", f"one weight per hooked layer ({len(chosen)})",
                              described(f"{len(layer_weights)} weights"))
        self.layer_weights = [check_finite("R2GLoss", f"layer_weights[{i}]", w, non_negative=True)
                              for i, w in enumerate(layer_weights)]
        if positions is not None:
            positions = list(positions)
            if any(isinstance(p, bool) or not isinstance(p, int) or p < 0 for p in positions) or not positions:
                raise input_error("R2GLoss", "positions", "a non-empty list of non-negative ints", positions)
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
                raise input_error("R2GLoss", "r2g_mask", f"shape [B, S] = [{batch_size}, {seq_len}]", describe(mask))
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
