"""Training the RDL structure optimiser (:mod:`icml26.models.rdl_graph.modeling`): one readable loop.

Full batch per snapshot (a graph of the database up to one seed time, with that seed time's labels):
each epoch visits ``snapshots_per_epoch`` training snapshots (all by default) in a seeded order, one Adam
step each (lr 5e-3, weight decay 5e-4 as the release; the gates' ``log_alpha`` get their own learning rate
``gate_lr`` and no weight decay, so that a useless gate can travel from 2 to the closing point -2.4 within
the budget). The hard-concrete temperature is annealed by :func:`anneal_temperature`. After every epoch the
model is scored on the validation snapshots (deterministic gates, VIB mean) and the best epoch's weights are
kept (RelBench's protocol: train, validation and test windows ordered in time).

Template penalty chosen on validation (:func:`select_penalty`): the paper's objective weighs each template's
L0 gate by ``lambda_template`` but gives no rule for it, and at a small weight a template that only fits noise
stays open ("open" meaning "not harmful", not "useful"). Reconstruction: the full optimiser is trained at a
grid of template penalties and the largest one whose validation AUROC is within one standard error of the
best is kept (the one-standard-error rule of Breiman et al., *Classification and Regression Trees*, 1984,
sec. 3.4.3; Hastie, Tibshirani & Friedman, *Elements of Statistical Learning*, sec. 7.10), the standard
error being Hanley & McNeil's (1982) for an AUROC.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch

from icml26.errors import described, input_error
from icml26.validation import check_finite, check_int

__all__ = ["RDLTrainConfig", "RDLTrainResult", "anneal_temperature", "train", "evaluate", "auroc",
           "auroc_standard_error", "select_penalty"]


@dataclass
class RDLTrainConfig:
    """Hyperparameters of :func:`train`.

    Args:
        epochs: passes; each visits ``snapshots_per_epoch`` training snapshots (None: all of them).
        lr / weight_decay: Adam on every weight but the gates (the release: 5e-3, 5e-4).
        gate_lr: Adam learning rate of the gates' ``log_alpha`` (no weight decay).
        gate_warmup_epochs: epochs the gates are held where they start (learning rate 0) while the network
            learns what each table and template carries (Reconstruction: without it a penalty strong enough to
            close a useless table closes the useful ones first, before the network has learnt to use them).
        temperature_start / temperature_end / warmup_epochs: the gate temperature is ``temperature_start`` for
            ``warmup_epochs`` epochs, then linear to ``temperature_end`` at the last epoch (Reconstruction:
            the release defines 2.0 -> 0.3 after 5 warm-up epochs but never calls it; the shape is ours).
        select_from_epoch: the first epoch eligible for model selection on validation (0: any).
        seed: the order of snapshots and every gate and VIB draw (a local ``torch.random.fork_rng``).
    """

    epochs: int = 30
    snapshots_per_epoch: int | None = None
    lr: float = 5e-3
    weight_decay: float = 5e-4
    gate_lr: float = 5e-2
    gate_warmup_epochs: int = 5
    temperature_start: float = 2.0
    temperature_end: float = 0.3
    warmup_epochs: int = 5
    select_from_epoch: int = 0
    seed: int = 0

    def __post_init__(self):
        fn = "RDLTrainConfig"
        for name in ("epochs",):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise input_error(fn, name, "a positive int", v)
        for name in ("warmup_epochs", "select_from_epoch", "gate_warmup_epochs"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise input_error(fn, name, "an int >= 0", v)
        if self.snapshots_per_epoch is not None and (not isinstance(self.snapshots_per_epoch, int)
                                                     or self.snapshots_per_epoch < 1):
            raise input_error(fn, "snapshots_per_epoch", "None or a positive int", self.snapshots_per_epoch)
        for name in ("lr", "gate_lr", "temperature_start", "temperature_end"):
            check_finite(fn, name, getattr(self, name), positive=True)
        check_finite(fn, "weight_decay", self.weight_decay, non_negative=True)
        self.seed = check_int(fn, "seed", self.seed, low=0)


def anneal_temperature(epoch: int, config: RDLTrainConfig) -> float:
    """The gate temperature at ``epoch`` (0-based): constant through the warm-up, then linear to the end value."""
    check_int("anneal_temperature", "epoch", epoch, low=0)
    _check_config("anneal_temperature", config, none_ok=False)
    if epoch < config.warmup_epochs:
        return config.temperature_start
    span = max(1, config.epochs - 1 - config.warmup_epochs)
    frac = min(1.0, (epoch - config.warmup_epochs) / span)
    return config.temperature_start + frac * (config.temperature_end - config.temperature_start)


def _check_config(function: str, config, *, none_ok: bool = True) -> None:
    if not (isinstance(config, RDLTrainConfig) or (none_ok and config is None)):
        raise TypeError(str(input_error(function, "config", "an RDLTrainConfig" + (" or None" if none_ok else ""),
                                        described(type(config).__name__))))


def _check_task(function: str, task) -> None:
    if not isinstance(getattr(task, "entity_table", None), str):
        raise TypeError(str(input_error(function, "task", "an EntityTask (premium_purchase_task(), load_relbench_task)",
                                        described(type(task).__name__))))


def auroc(y: np.ndarray, score: np.ndarray) -> float:
    """ROC AUC of ``score`` against 0/1 labels ``y`` (NaN when ``y`` holds one class only)."""
    y, score = np.asarray(y, dtype=float), np.asarray(score, dtype=float)
    if y.ndim != 1:
        raise input_error("auroc", "y", "a 1-D array of 0/1 labels", described(f"an array of shape {y.shape}"))
    if score.shape != y.shape:
        raise input_error("auroc", "score", f"a 1-D array of {len(y)} scores, one per label",
                          described(f"an array of shape {score.shape}"))
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, score)) if 0 < y.mean() < 1 else float("nan")


def auroc_standard_error(value: float, n_pos: int, n_neg: int) -> float:
    """Standard error of an AUROC ``value`` measured on ``n_pos`` positives and ``n_neg`` negatives.

    Hanley & McNeil, "The meaning and use of the area under a ROC curve", Radiology 143 (1982), eq. 2:
    ``SE^2 = (A (1 - A) + (n_pos - 1) (Q1 - A^2) + (n_neg - 1) (Q2 - A^2)) / (n_pos n_neg)`` with
    ``Q1 = A / (2 - A)``, ``Q2 = 2 A^2 / (1 + A)``. At ``A = 0.5`` it is the exact null variance of the
    Mann-Whitney statistic, ``(n_pos + n_neg + 1) / (12 n_pos n_neg)``.
    """
    fn = "auroc_standard_error"
    a = check_finite(fn, "value", value, low=0.0, high=1.0)
    n1, n2 = check_int(fn, "n_pos", n_pos, low=1), check_int(fn, "n_neg", n_neg, low=1)
    q1, q2 = a / (2.0 - a), 2.0 * a * a / (1.0 + a)
    var = (a * (1.0 - a) + (n1 - 1) * (q1 - a * a) + (n2 - 1) * (q2 - a * a)) / (n1 * n2)
    return float(np.sqrt(max(var, 0.0)))


def select_penalty(penalties: Sequence[float], val_aurocs: Sequence[float], n_pos: int, n_neg: int) -> int:
    """Index of the largest penalty whose validation AUROC is within one standard error of the best.

    The one-standard-error rule (Breiman et al. 1984; Hastie et al., *Elements of Statistical Learning*,
    sec. 7.10): among models whose validation scores differ by less than the validation noise, keep the
    sparsest, here the one trained with the largest L0 weight. The standard error is the best model's
    (:func:`auroc_standard_error` on the validation set's ``n_pos`` positives and ``n_neg`` negatives).
    Reconstruction: the paper fixes ``lambda_template`` (1e-4 in its release) and gives no selection rule.

    Args:
        penalties: the distinct, non-negative penalty weights the models were trained with.
        val_aurocs: each model's validation AUROC (same order).
        n_pos: positive validation labels.
        n_neg: negative validation labels.
    """
    fn = "select_penalty"
    for name, values in (("penalties", penalties), ("val_aurocs", val_aurocs)):
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence | np.ndarray) or len(values) == 0:
            raise input_error(fn, name, "a non-empty list of numbers", values)
    lams = [check_finite(fn, "penalties", p, non_negative=True) for p in penalties]
    vals = [check_finite(fn, "val_aurocs", v, low=0.0, high=1.0) for v in val_aurocs]
    if len(vals) != len(lams):
        raise input_error(fn, "val_aurocs", f"{len(lams)} values, one per penalty",
                          described(f"{len(vals)} values"))
    if len(set(lams)) != len(lams):
        raise input_error(fn, "penalties", "distinct values", described(str(lams)))
    best = int(np.argmax(vals))
    floor = vals[best] - auroc_standard_error(vals[best], n_pos, n_neg)
    eligible = [i for i, v in enumerate(vals) if v >= floor]
    return max(eligible, key=lambda i: lams[i])


@torch.no_grad()
def evaluate(model, graphs: Sequence, task, plan=None) -> dict[str, float]:
    """AUROC over the labelled target rows of ``graphs`` (eval mode); with ``plan``, on the pruned graphs.

    Also the messages sent per layer (mean over graphs), the seconds of the forward passes and the numbers of
    positive and negative labels scored (``n_pos``, ``n_neg``; for :func:`auroc_standard_error`).
    """
    from icml26.models.rdl_graph import count_messages

    if isinstance(graphs, (str, dict)) or not isinstance(graphs, Sequence) or not graphs:
        raise input_error("evaluate", "graphs", "a non-empty list of snapshots",
                          described(f"{type(graphs).__name__} of length {len(graphs)}" if hasattr(graphs, "__len__")
                                    else type(graphs).__name__))
    _check_task("evaluate", task)
    was = model.training
    model.eval()
    ys, ss, edges, seconds = [], [], [], 0.0
    for data in graphs:
        g = plan.apply(data) if plan is not None else data
        start = time.perf_counter()
        out = model(g)
        seconds += time.perf_counter() - start
        node = g[task.entity_table]
        mask = node.label_mask
        ys.append(node.y[mask].numpy())
        ss.append(out.logits[mask].numpy())
        edges.append(count_messages(g))
    model.train(was)
    y = np.concatenate(ys)
    return {"auroc": auroc(y, np.concatenate(ss)), "messages": float(np.mean(edges)), "forward_seconds": seconds,
            "n_pos": int((y == 1).sum()), "n_neg": int((y == 0).sum())}


@dataclass
class RDLTrainResult:
    """What :func:`train` measured: the selected epoch, its validation (and test) AUROC, the plan of the
    selected weights, and per epoch the validation AUROC, temperature and deterministic gate values."""

    best_epoch: int
    val_auroc: float
    test_auroc: float | None
    plan: dict[str, Any]
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    steps: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gate_snapshot(model) -> dict[str, Any]:
    plan = model.optimized_plan()
    return plan.gate_values


def train(model, graphs: dict[str, Sequence], task, config: RDLTrainConfig | None = None) -> RDLTrainResult:
    """Train ``model`` on ``graphs["train"]``, select on ``graphs["val"]``, score ``graphs["test"]`` if given.

    ``graphs`` maps split -> snapshots (``HeteroData`` with ``y``/``label_mask`` on ``task.entity_table``,
    templates already added); the model ends holding the selected epoch's weights.
    """
    fn = "train"
    _check_config(fn, config)
    _check_task(fn, task)
    cfg = config or RDLTrainConfig()
    if not isinstance(graphs, dict):
        raise TypeError(str(input_error(fn, "graphs", "a dict of split -> snapshots ('train', 'val', optionally "
                                        "'test')", described(type(graphs).__name__))))
    for split in ("train", "val"):
        if not graphs.get(split):
            raise input_error(fn, "graphs", f"a non-empty {split!r} list of snapshots", sorted(graphs))
    start = time.perf_counter()
    gate_params = {id(p) for p in model.gate_parameters()}
    groups = [{"params": [p for p in model.parameters() if id(p) not in gate_params], "lr": cfg.lr,
               "weight_decay": cfg.weight_decay}]
    if gate_params:
        groups.append({"params": model.gate_parameters(), "lr": cfg.gate_lr, "weight_decay": 0.0})
    opt = torch.optim.Adam(groups)
    train_graphs = list(graphs["train"])
    per_epoch = cfg.snapshots_per_epoch or len(train_graphs)
    best = (-np.inf, -1, None)
    history, steps = [], 0
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        order_rng = np.random.default_rng(cfg.seed)
        model.train()
        for epoch in range(cfg.epochs):
            beta = anneal_temperature(epoch, cfg)
            model.set_temperature(beta)
            if len(opt.param_groups) > 1:
                opt.param_groups[1]["lr"] = 0.0 if epoch < cfg.gate_warmup_epochs else cfg.gate_lr
            losses = []
            for i in order_rng.permutation(len(train_graphs))[:per_epoch]:
                out = model(train_graphs[i])
                opt.zero_grad(set_to_none=True)
                out.loss.backward()
                opt.step()
                losses.append(out.task_loss.item())
                steps += 1
            val = evaluate(model, graphs["val"], task)["auroc"]
            history.append({"epoch": epoch, "temperature": beta, "train_loss": float(np.mean(losses)),
                            "val_auroc": val, "gates": _gate_snapshot(model)})
            if epoch >= cfg.select_from_epoch and val > best[0]:
                best = (val, epoch, copy.deepcopy(model.state_dict()))
    if best[2] is not None:
        model.load_state_dict(best[2])
    model.eval()
    test = evaluate(model, graphs["test"], task)["auroc"] if graphs.get("test") else None
    return RDLTrainResult(best_epoch=best[1], val_auroc=float(best[0]), test_auroc=test,
                          plan=model.optimized_plan().to_dict(), history=history,
                          seconds=time.perf_counter() - start, steps=steps)
