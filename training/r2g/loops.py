"""R2G's training loops on the grokking tasks, and what they measure along the way.

- :func:`train_grokking`: a full-batch AdamW loop on :func:`icml26.eval.tasks.r2g.modular_dataset` (the arms of
  the R2G experiment) that adds the same :class:`~icml26.training.r2g.R2GLoss` the trainers use, or applies
  Grokfast-EMA;
- :func:`train_anchor`: Grokfast's minibatch Adam loop (ironjr/grokfast ``main.py``: warm-up, per-epoch evaluation)
  on :func:`icml26.eval.tasks.r2g.anchor_dataset`, resumable from a checkpoint;
- the measurements both record: :func:`accuracy`, :func:`operand_geometry` (angular spread and norm of the operand
  value vectors), :func:`fourier_sparsity` (of the learned token embeddings).
"""

from __future__ import annotations

import dataclasses
import io
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from icml26.errors import describe, described, input_error
from icml26.utils import atomic_write_bytes
from icml26.validation import check_finite, check_int

if TYPE_CHECKING:
    from icml26.eval.tasks.r2g.modular import AnchorData

__all__ = ["AnchorHistory", "GrokkingHistory", "accuracy", "fourier_sparsity", "modular_tensors", "operand_geometry",
           "train_anchor", "train_grokking"]


def modular_tensors(dataset, device=None) -> tuple[torch.Tensor, torch.Tensor]:
    """``([N, 3] prompts a b =, [N] answers)`` of a :func:`modular_dataset` split."""
    ids = torch.tensor(dataset["input_ids"], device=device)
    return ids[:, :3].contiguous(), ids[:, 3].contiguous()


@torch.no_grad()
def accuracy(model, inputs: torch.Tensor, answers: torch.Tensor) -> float:
    """Share of prompts whose argmax at ``=`` is the answer."""
    logits = model(input_ids=inputs, logits_to_keep=1, use_cache=False).logits[:, -1]
    return float((logits.argmax(-1) == answers).float().mean())


@torch.no_grad()
def operand_geometry(model, p: int, positions: Sequence[int] = (0, 1),
                     template: Sequence[int | None] | None = None) -> dict[str, float]:
    """Angular spread and norm of the V vectors of the ``p`` operand tokens (first hooked layer).

    Feeds one prompt per number ``a`` (``template`` with ``a`` at its ``None`` slots; default
    ``[a, a, =]``) and reads the value projection at the operand positions: ``angular_dist`` is the
    mean pairwise cosine distance between the ``p`` operands (averaged over the positions),
    ``v_norm`` their mean L2 norm, ``r2g_term`` the mean Euclidean ``1 / D`` over a cyclic pairing
    of the numbers (a fixed one, the same for every run).
    """
    from icml26.training.r2g import R2GLoss, r2g_term, value_geometry

    device = next(model.parameters()).device
    a = torch.arange(p, device=device)
    check_int("operand_geometry", "p", p, low=2)
    template = (None, None, p) if template is None else tuple(template)
    if not all(isinstance(i, int) and not isinstance(i, bool) and -len(template) <= i < len(template)
               for i in positions) or not len(positions):
        raise input_error("operand_geometry", "positions", f"indices into the template of {len(template)} tokens",
                          positions)
    prompts = torch.stack([a if t is None else torch.full_like(a, t) for t in template], dim=1)
    with R2GLoss(model, layers=[0], alpha=0.0, track_stats=False) as hooks:
        model(input_ids=prompts, logits_to_keep=1, use_cache=False)
        mask = torch.zeros(len(template), dtype=torch.bool, device=device)
        mask[list(positions)] = True
        out = value_geometry(hooks.values[0], mask)
        cycle = torch.roll(torch.arange(p, device=device), 1)
        out["r2g_term"] = float(r2g_term(hooks.values[0], position_mask=mask, perm=cycle))
        return out


@torch.no_grad()
def fourier_sparsity(embedding: torch.Tensor, p: int | None = None) -> dict[str, float]:
    """How concentrated the token embeddings ``[p, d]`` are on a few Fourier frequencies.

    The power of each frequency ``k = 1..p//2`` is ``sum_d |DFT_a(E)[k, d]|^2`` (the constant
    ``k = 0`` left out). ``gini`` is the Gini coefficient of that spectrum (0: flat, towards 1:
    a few frequencies, the grokked "clock" of Nanda et al.); ``top_fraction`` is the share of the
    power in the top ``max(1, n_freq // 5)`` frequencies.
    """
    if not isinstance(embedding, torch.Tensor) or embedding.dim() != 2:
        raise input_error("fourier_sparsity", "embedding", "a [p, d] tensor (token embeddings)", describe(embedding))
    if p is not None:
        check_int("fourier_sparsity", "p", p, low=2, high=embedding.shape[0])
    E = embedding.detach().float()[: p if p is not None else embedding.shape[0]]
    power = torch.fft.rfft(E - E.mean(0), dim=0).abs().pow(2).sum(-1)[1:]
    share = power / power.sum().clamp_min(1e-30)
    s, _ = torch.sort(share)
    n = s.numel()
    gini = float(((2 * torch.arange(1, n + 1, dtype=s.dtype, device=s.device) - n - 1) * s).sum() / n)
    top = max(1, n // 5)
    return {"gini": gini, "top_fraction": float(s[-top:].sum())}


@dataclass
class _Curves:
    """The curves every grokking run records: accuracies and loss per measurement, the operand
    geometry (:func:`operand_geometry`) and the ``1 / D`` term; ``seconds`` is wall time."""

    step: list[int] = field(default_factory=list)
    train_acc: list[float] = field(default_factory=list)
    test_acc: list[float] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    r2g_term: list[float] = field(default_factory=list)
    angular_dist: list[float] = field(default_factory=list)
    v_norm: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class GrokkingHistory(_Curves):
    """What :func:`train_grokking` measured, one list entry per measurement (step 0 first).

    ``r2g_term`` is the ``1 / D`` the run would pay (logged for every arm, NaN at step 0);
    ``angular_dist`` and ``v_norm`` come from :func:`operand_geometry`, ``fourier_gini`` from
    :func:`fourier_sparsity`; ``seconds`` is the wall time of the whole run.
    """

    fourier_gini: list[float] = field(default_factory=list)

    def curves(self) -> dict[str, list]:
        """The measured lists by name (everything but ``seconds``)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "seconds"}

    def at(self, key: str, step: int) -> Any:
        """``key`` at the last measurement at or before ``step``."""
        index = max(i for i, s in enumerate(self.step) if s <= step)
        return getattr(self, key)[index]


def _update(model, total: torch.Tensor, hooks, optimizer, filt) -> None:
    """One optimizer step on ``total`` (the task loss with R2G's term added), the captured values
    dropped first and Grokfast's filter (when given) applied between backward and step."""
    hooks.clear()
    optimizer.zero_grad(set_to_none=True)
    total.backward()
    if filt is not None:
        filt(model)
    optimizer.step()


def train_grokking(model, data, *, steps: int, r2g: dict[str, Any] | None = None,
                   grokfast: dict[str, float] | None = None, lr: float = 1e-3, weight_decay: float = 1.0,
                   betas: tuple[float, float] = (0.9, 0.98), eval_every: int = 50, stop_at: float | None = None,
                   min_steps: int = 0, seed: int = 0, device: str | torch.device = "cpu",
                   phase_name: str = "train_grokking") -> GrokkingHistory:
    """Full-batch AdamW on a :func:`modular_dataset`, with optional R2G or Grokfast-EMA.

    Args:
        model: e.g. :func:`small_decoder`; trained in place on ``device``.
        data: the ``DatasetDict`` (``train`` and ``test``).
        steps: optimizer steps (one per epoch: the batch is the whole training set).
        r2g: keyword arguments of :class:`~icml26.training.r2g.loss.R2GLoss` (``alpha``, ``distance``,
            ...; ``positions`` defaults to the operands); None for plain cross-entropy.
        grokfast: keyword arguments of :class:`~icml26.training.r2g.grokfast.GrokfastEMA`, or None.
        eval_every: steps between measurements (accuracies, geometry, Fourier sparsity).
        stop_at: stop once test accuracy reaches this, but not before ``min_steps``.
        seed: seeds the pairing of the R2G term (a local generator; the model is seeded by its builder).
        phase_name: the :func:`icml26.progress.phase` that reports the steps.

    Returns a :class:`GrokkingHistory`.
    """
    from icml26.progress import phase
    from icml26.training.r2g import GrokfastEMA, R2GLoss, random_pairing

    fn = "train_grokking"
    try:
        has_splits = "train" in data and "test" in data
    except TypeError:
        has_splits = False
    if not has_splits:
        raise input_error(fn, "data", "a DatasetDict with 'train' and 'test' splits (modular_dataset)",
                          described(f"splits {list(data.keys())}" if hasattr(data, "keys") else type(data).__name__))
    _check_loop(fn, steps=steps, lr=lr, weight_decay=weight_decay, seed=seed)
    check_int(fn, "eval_every", eval_every, low=1)
    check_int(fn, "min_steps", min_steps, low=0)
    if stop_at is not None:
        check_finite(fn, "stop_at", stop_at, low=0, high=1)
    device = torch.device(device)
    model.to(device).train()
    x_train, y_train = modular_tensors(data["train"], device)
    x_test, y_test = modular_tensors(data["test"], device)
    p = int(x_train[0, 2])
    settings = {"alpha": 0.0, "positions": [0, 1], **(r2g or {})}
    hooks = R2GLoss(model, **settings)
    filt = GrokfastEMA(**grokfast) if grokfast else None
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay, betas=betas)
    history = GrokkingHistory()
    generator = torch.Generator().manual_seed(seed)
    start = time.perf_counter()

    def measure(step: int, loss: float) -> float:
        model.eval()
        test_acc = accuracy(model, x_test, y_test)
        geometry = operand_geometry(model, p)
        stats = hooks.pop_stats()
        for key, value in (("step", step), ("train_acc", accuracy(model, x_train, y_train)),
                           ("test_acc", test_acc), ("train_loss", loss), ("r2g_term", stats.get("term", math.nan)),
                           ("angular_dist", geometry["angular_dist"]), ("v_norm", geometry["v_norm"]),
                           ("fourier_gini", fourier_sparsity(model.transformer.wte.weight, p)["gini"])):
            getattr(history, key).append(value)
        model.train()
        return test_acc

    try:
        measure(0, math.nan)
        with phase(phase_name, total=steps) as bar:
            for step in range(1, steps + 1):
                logits = model(input_ids=x_train, logits_to_keep=1, use_cache=False).logits[:, -1]
                loss = F.cross_entropy(logits.float(), y_train)
                perm = random_pairing(x_train.shape[0], generator=generator, device=device) if hooks.alpha > 0 else None
                _update(model, loss + hooks(perm=perm), hooks, optimizer, filt)
                bar.update()
                if step % eval_every == 0 or step == steps:
                    test_acc = measure(step, float(loss.detach()))
                    if stop_at is not None and test_acc >= stop_at and step >= min_steps:
                        break
    finally:
        hooks.remove()
    history.seconds = time.perf_counter() - start
    return history


@dataclass
class AnchorHistory(_Curves):
    """What :func:`train_anchor` measured.

    Per epoch (Grokfast's evaluation schedule: after every pass over the training set): ``step``
    (optimizer steps so far), ``train_acc`` (the running accuracy of that epoch's minibatches, as
    Grokfast logs it), ``test_acc`` (the whole held-out set); every ``geometry_every`` epochs:
    ``geo_step``, ``angular_dist`` and ``v_norm`` of the operand value vectors
    (:func:`operand_geometry`, first layer), ``r2g_term`` (the mean ``1 / D`` the run would pay).
    ``seconds`` is the training wall time (measurements excluded) and ``steps_to_target`` the first
    step whose test accuracy reached ``target`` (None if none did).
    """

    geo_step: list[int] = field(default_factory=list)
    target: float = 0.95
    steps_to_target: int | None = None

    @property
    def seconds_per_step(self) -> float:
        return self.seconds / max(1, self.step[-1] if self.step else 0)

    @property
    def gap(self) -> list[float]:
        """Train minus test accuracy per epoch."""
        return [tr - te for tr, te in zip(self.train_acc, self.test_acc)]

    def at(self, key: str, step: int) -> Any:
        """``key`` at the last measurement at or before ``step`` (geometry keys use ``geo_step``)."""
        steps = self.geo_step if key in ("angular_dist", "v_norm", "r2g_term") else self.step
        index = max((i for i, s in enumerate(steps) if s <= step), default=0)
        return getattr(self, key)[index]

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "seconds_per_step": self.seconds_per_step}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AnchorHistory:
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})


def _check_loop(function: str, *, steps, lr, weight_decay, seed) -> None:
    """The arguments both loops share, checked before any work."""
    check_int(function, "steps", steps, low=1)
    check_finite(function, "lr", lr, positive=True)
    check_finite(function, "weight_decay", weight_decay, non_negative=True)
    check_int(function, "seed", seed, low=0)


def _warmup(update: int, warmup_steps: int) -> float:
    """Grokfast's ``LambdaLR`` factor: ``update / warmup`` up to ``warmup`` (so the first step has lr 0), then 1."""
    return 1.0 if update > warmup_steps else update / warmup_steps if warmup_steps else 1.0


def train_anchor(model, data: AnchorData, *, steps: int, r2g: dict[str, Any] | None = None,
                 grokfast: dict[str, float] | None = None, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.98),
                 weight_decay: float = 0.0, decay: str = "l2", batch_size: int = 512, warmup_steps: int = 10,
                 target: float = 0.95, stop_at_target: bool = True, geometry_every: int = 10, seed: int = 0,
                 device: str | torch.device = "cpu", phase_name: str = "train_anchor",
                 checkpoint: str | Path | None = None, checkpoint_every: int = 100,
                 compile: bool = False) -> AnchorHistory:
    """Grokfast's training loop (ironjr/grokfast ``main.py``) with optional R2G and Grokfast-EMA.

    Each epoch shuffles the training pairs (continuing the anchor's RNG stream, ``data.shuffle_state``,
    in a local generator, and composing the orders as Grokfast does), takes minibatches of ``batch_size`` (the last one smaller), and per
    minibatch: cross-entropy at ``=``, plus ``alpha / D`` of :class:`~icml26.training.r2g.loss.R2GLoss`
    when ``r2g`` is given (hooked on every layer's value projection at the operand positions unless
    ``r2g`` says otherwise), backward, the Grokfast-EMA filter when ``grokfast`` is given, then the
    optimizer step and the warm-up schedule. After every epoch the whole test set is evaluated.

    Args:
        weight_decay: the weight decay ``wd``, applied as ``decay`` says.
        decay: ``"l2"`` is Grokfast's ``torch.optim.Adam(weight_decay=wd)`` (the decay added to the
            gradient after the filter, "coupled"); ``"decoupled"`` is AdamW's (typically with a much
            larger ``wd``, e.g. 1.0, as Power et al.).
        steps: cap on optimizer steps (whole epochs: training stops at the first epoch end past it).
        stop_at_target: stop at the first epoch whose test accuracy reaches ``target``.
        geometry_every: epochs between geometry measurements.
        seed: seeds R2G's pairing (a local generator; the model and data carry their own seeds).
        checkpoint: a file that receives the whole training state (weights, optimizer, filter, RNG
            streams, data order, history) every ``checkpoint_every`` epochs and when the run ends,
            written atomically; a call that finds it resumes from it and gives the
            same result as an uninterrupted run (a checkpoint of other settings is refused). A
            finished run's checkpoint stays: the caller removes it once the result is kept.
        checkpoint_every: epochs between checkpoint writes.
        compile: run the training and evaluation forwards through ``torch.compile(model, dynamic=False)``
            (inductor; three shapes: the batch, the last smaller batch, the test set). The model and its
            weights are the same, only the kernels are fused, so each step agrees with the eager one to
            float rounding; training amplifies those differences over thousands of steps (as it would
            a change of BLAS), so a long compiled run is another sample of the run, not a bit-for-bit copy. Measured on one CPU core (``icml26 bench r2g``): about 10%
            less time per training step and 30% less per evaluation; it pays once a run is past about
            2,000 steps (compiling takes 20-30 s), so the full mode uses it and the quick mode does not.
    """
    from icml26.progress import phase
    from icml26.training.r2g import GrokfastEMA, R2GLoss, random_pairing

    fn = "train_anchor"
    if not all(hasattr(data, name) for name in ("x_train", "y_train", "x_test", "y_test", "shuffle_state")):
        raise TypeError(str(input_error(fn, "data", "an AnchorData (anchor_dataset)", described(type(data).__name__))))
    if decay not in ("l2", "decoupled"):
        raise input_error("train_anchor", "decay", "'l2' or 'decoupled'", decay)
    _check_loop(fn, steps=steps, lr=lr, weight_decay=weight_decay, seed=seed)
    check_int(fn, "warmup_steps", warmup_steps, low=0)
    check_int(fn, "geometry_every", geometry_every, low=1)
    check_finite(fn, "target", target, low=0, high=1)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 2:
        raise input_error("train_anchor", "batch_size", "an int >= 2", batch_size)
    if isinstance(checkpoint_every, bool) or not isinstance(checkpoint_every, int) or checkpoint_every < 1:
        raise input_error("train_anchor", "checkpoint_every", "an int >= 1", checkpoint_every)
    if not isinstance(compile, bool):
        raise input_error("train_anchor", "compile", "True or False", compile)
    device = torch.device(device)
    model.to(device).train()
    forward = torch.compile(model, dynamic=False) if compile else model
    x_train, y_train = data.x_train.to(device), data.y_train.to(device)
    x_test, y_test = data.x_test.to(device), data.y_test.to(device)
    positions = list(data.operand_positions)
    hooks = R2GLoss(model, **{"alpha": 0.0, "positions": positions, "track_stats": False, **(r2g or {})})
    filt = GrokfastEMA(**grokfast) if grokfast else None
    optim_cls = torch.optim.Adam if decay == "l2" else torch.optim.AdamW
    optimizer = optim_cls(model.parameters(), lr=lr, betas=betas, weight_decay=weight_decay)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda update: _warmup(update, warmup_steps))
    shuffler = torch.Generator().set_state(data.shuffle_state)
    pairing = torch.Generator().manual_seed(seed)
    history = AnchorHistory(target=target)
    n = x_train.shape[0]
    step, epoch, train_seconds = 0, 0, 0.0
    # What decides the trajectory (not the cap ``steps``: a resumed run may go further).
    fingerprint = {"r2g": r2g, "grokfast": grokfast, "lr": lr, "betas": list(betas), "weight_decay": weight_decay,
                   "decay": decay, "batch_size": batch_size, "warmup_steps": warmup_steps, "target": target,
                   "geometry_every": geometry_every, "seed": seed, "p": data.p, "op": data.op, "n_train": n,
                   "data": int(x_train.long().sum() * 31 + y_train.long().sum())}

    def save_state() -> None:
        state = {"fingerprint": fingerprint, "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                 "scheduler": scheduler.state_dict(), "ema": filt.ema if filt else None,
                 "shuffler": shuffler.get_state(), "pairing": pairing.get_state(), "x_train": x_train,
                 "y_train": y_train, "history": history.to_dict(), "counters": (step, epoch, train_seconds)}
        buffer = io.BytesIO()
        torch.save(state, buffer)
        atomic_write_bytes(checkpoint, buffer.getvalue())  # a run killed while saving keeps its previous one

    if checkpoint is not None and Path(checkpoint).is_file():
        state = torch.load(checkpoint, map_location=device, weights_only=False)
        if state["fingerprint"] != fingerprint:
            raise input_error("train_anchor", "checkpoint", "a checkpoint of a run with these settings",
                              described(f"{checkpoint} holds {state['fingerprint']}"))
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        if filt is not None:
            filt.ema = state["ema"]
        shuffler.set_state(state["shuffler"])
        pairing.set_state(state["pairing"])
        x_train, y_train = state["x_train"], state["y_train"]
        history = AnchorHistory.from_dict(state["history"])
        step, epoch, train_seconds = state["counters"]

    def measure_geometry() -> None:
        model.eval()
        geometry = operand_geometry(model, data.p, positions, template=(None, data.p + 1, None, data.p))
        model.train()
        history.geo_step.append(step)
        history.angular_dist.append(geometry["angular_dist"])
        history.v_norm.append(geometry["v_norm"])
        history.r2g_term.append(geometry["r2g_term"])

    try:
        if not history.geo_step:
            measure_geometry()
        with phase(phase_name, total=steps) as bar:
            bar.update(min(step, steps))
            while step < steps and not (stop_at_target and history.steps_to_target is not None):
                start = time.perf_counter()
                # Grokfast permutes the already shuffled set again each epoch (the orders compose).
                order = torch.randperm(n, generator=shuffler).to(device)
                x_train, y_train = x_train[order], y_train[order]
                correct, loss_sum = 0, 0.0
                for x, y in zip(x_train.split(batch_size), y_train.split(batch_size)):
                    logits = forward(input_ids=x, logits_to_keep=1, use_cache=False).logits[:, -1].float()
                    loss = F.cross_entropy(logits, y)
                    total = loss
                    if hooks.alpha > 0:
                        total = loss + hooks(perm=random_pairing(x.shape[0], generator=pairing, device=device))
                    _update(model, total, hooks, optimizer, filt)
                    scheduler.step()
                    step += 1
                    correct += int((logits.detach().argmax(-1) == y).sum())
                    loss_sum += float(loss.detach()) * x.shape[0]
                train_seconds += time.perf_counter() - start
                bar.update(math.ceil(n / batch_size))
                epoch += 1
                model.eval()
                test_acc = accuracy(forward, x_test, y_test)
                model.train()
                for key, value in (("step", step), ("train_acc", correct / n), ("test_acc", test_acc),
                                   ("train_loss", loss_sum / n)):
                    getattr(history, key).append(value)
                if history.steps_to_target is None and test_acc >= target:
                    history.steps_to_target = step
                reached = stop_at_target and history.steps_to_target is not None
                if epoch % geometry_every == 0 or step >= steps or reached:
                    measure_geometry()
                history.seconds = train_seconds
                if checkpoint is not None and (epoch % checkpoint_every == 0 or step >= steps or reached):
                    save_state()
    finally:
        hooks.remove()
    history.seconds = train_seconds
    return history
