"""Class-incremental learners for the PBTO persistence audit ("Persistent Backdoor Attacks in Class-Incremental
Learning via Structural Invariant Anchoring", ICML 2026; after the public reproduction hjhkkkc/PBTO).

The paper's victim is iCaRL (Rebuffi et al. 2017): one-vs-rest BCE whose old-class targets are the frozen previous
model's sigmoid outputs (distillation), an exemplar memory chosen by herding, nearest-mean-of-exemplars (NME)
inference. :class:`ICaRL` is that learner; :class:`LwF` is the same loss without a memory (iCaRL's LwF-MC baseline,
logits inference) and :class:`Finetune` a plain lower bound (no distillation, no memory).

Written here rather than taken from a library: Avalanche 0.6.0 (the one pip-installable CIL library) would replace
torch 2.13 CPU by torch 2.14 with 17 CUDA packages, torchvision, wandb and gdown; PyCIL and Mammoth are not on PyPI.
CIL results are hard to compare across codebases because of the memory protocol, the loss and the inference rule
(the spec's lesson from iCaRL reproduction threads), so every learner reports them (:meth:`CILLearner.protocol`).

The learners never see poison flags: they get images and labels per task. ``memory_hook(model, images, label)``
(a memory defence) sees each new class's candidates before herding and returns the rows it keeps.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch
from torch import nn

from icml26.errors import describe, input_error
from icml26.models.pbto import SmallConvNet, SmallConvNetConfig
from icml26.utils import inner_seed
from icml26.validation import check_choice, check_finite, check_int

MemoryHook = Callable[[SmallConvNet, torch.Tensor, int], torch.Tensor]


@dataclass(frozen=True)
class CILConfig:
    """How a class-incremental learner trains, remembers and predicts.

    Args:
        epochs, lr, momentum, weight_decay, batch_size: SGD per task (the issue's small scale: 30 epochs, lr 0.05,
            momentum 0.9, batch 64; the reproduction's CIFAR values are 70 epochs, lr 0.01, weight decay 5e-4).
        memory_size: exemplars in all (``memory_protocol="fixed_total"``: the quota per class is
            ``memory_size // classes seen``, iCaRL's) or per class (``"per_class"``); 0 for no memory.
        loss: ``"bce_distill"`` (iCaRL's BCE with the previous model's sigmoids as old-class targets) or ``"ce"``
            (cross-entropy over the seen classes, no distillation).
        inference: ``"nme"`` (nearest mean of exemplars; needs a memory) or ``"logits"``.
        seed: the model's initialisation and every task's batch order.
        channels: the widths of the network (:class:`~icml26.models.pbto.SmallConvNetConfig`).
    """

    epochs: int = 30
    lr: float = 0.05
    momentum: float = 0.9
    weight_decay: float = 0.0
    batch_size: int = 64
    memory_size: int = 100
    memory_protocol: str = "fixed_total"
    loss: str = "bce_distill"
    inference: str = "nme"
    seed: int = 0
    channels: tuple[int, int, int] = (16, 32, 64)

    def __post_init__(self) -> None:
        fn = "CILConfig"
        check_int(fn, "epochs", self.epochs, low=1)
        check_finite(fn, "lr", self.lr, positive=True)
        check_finite(fn, "momentum", self.momentum, low=0.0, high=1.0, high_open=True)
        check_finite(fn, "weight_decay", self.weight_decay, non_negative=True)
        check_int(fn, "batch_size", self.batch_size, low=1)
        check_int(fn, "memory_size", self.memory_size, low=0)
        check_choice(fn, "memory_protocol", self.memory_protocol, ("fixed_total", "per_class"))
        check_choice(fn, "loss", self.loss, ("bce_distill", "ce"))
        check_choice(fn, "inference", self.inference, ("nme", "logits"))
        check_int(fn, "seed", self.seed, low=0)
        if self.inference == "nme" and self.memory_size == 0:
            raise input_error(fn, "inference", "'logits' when memory_size is 0 (NME needs exemplars)", "nme")


def herding(features: torch.Tensor, m: int) -> torch.Tensor:
    """iCaRL's herding: the indices of ``m`` rows of l2-normalised ``features`` chosen one by one so that the running
    mean of the chosen stays closest to the mean of all rows (no row twice). The order is the priority: a smaller
    quota later keeps a prefix."""
    phi = nn.functional.normalize(features.detach().to(torch.float64), dim=1)
    mu = phi.mean(0)
    m = min(int(m), phi.shape[0])
    chosen: list[int] = []
    running = torch.zeros_like(mu)
    free = torch.ones(phi.shape[0], dtype=torch.bool)
    for k in range(1, m + 1):
        gaps = (mu - (running + phi) / k).norm(dim=1)
        gaps[~free] = float("inf")
        i = int(gaps.argmin())
        chosen.append(i)
        free[i] = False
        running += phi[i]
    return torch.tensor(chosen, dtype=torch.long)


@dataclass
class Checkpoint:
    """The learner after one task: a frozen copy of the network, the class means NME predicts with (``None`` for
    logits inference) and the number of classes seen."""

    model: SmallConvNet
    class_means: torch.Tensor | None
    classes: int

    @torch.no_grad()
    def predict(self, images: torch.Tensor) -> torch.Tensor:
        logits, acts = self.model.forward_with_features(images, ("pooled",))
        if self.class_means is None:
            return logits.argmax(1)
        phi = nn.functional.normalize(acts["pooled"], dim=1)
        return torch.cdist(phi, self.class_means).argmin(1)


class CILLearner:
    """A class-incremental learner: :meth:`fit_task` once per task (labels are incremental class ids, new ones
    following the seen ones), :meth:`predict` with any checkpoint, :attr:`memory` (per class, the rows of the task
    where the class arrived that are kept as exemplars, in herding order), :attr:`memory_history` (the memory after
    each task) and :attr:`checkpoints` (one per task)."""

    #: the defaults a subclass changes (LwF and finetune have no memory and predict from logits)
    defaults: dict = {}

    def __init__(self, config: CILConfig | None = None, memory_hook: MemoryHook | None = None, **overrides) -> None:
        if config is None:
            config = CILConfig(**{**self.defaults, **overrides})
        elif overrides:
            config = CILConfig(**{**asdict(config), **overrides})
        if not isinstance(config, CILConfig):
            raise input_error(type(self).__name__, "config", "a CILConfig", describe(config))
        if memory_hook is not None and not callable(memory_hook):
            raise input_error(type(self).__name__, "memory_hook", "a callable (model, images, label) -> kept rows",
                              describe(memory_hook))
        self.config = config
        self.memory_hook = memory_hook
        self.model: SmallConvNet | None = None
        self.classes = 0
        self.checkpoints: list[Checkpoint] = []
        self.memory: dict[int, torch.Tensor] = {}       # class -> row indices into its task's images
        self.memory_history: list[dict[int, torch.Tensor]] = []  # the memory after each task
        self._exemplars: dict[int, torch.Tensor] = {}   # class -> the images of memory[class], in that order

    # ------------------------------------------------------------------------------------------
    def protocol(self) -> dict:
        """What a CIL result depends on beyond the data: the learner, memory protocol and size, loss, inference."""
        c = self.config
        return {"learner": type(self).__name__, "memory_protocol": c.memory_protocol, "memory_size": c.memory_size,
                "loss": c.loss, "inference": c.inference, "epochs": c.epochs, "lr": c.lr, "batch_size": c.batch_size}

    def _quota(self) -> int:
        c = self.config
        if c.memory_size == 0:
            return 0
        if c.memory_protocol == "per_class":
            return c.memory_size
        return c.memory_size // self.classes

    def _check_task(self, images, labels) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
        fn = f"{type(self).__name__}.fit_task"
        if not isinstance(images, torch.Tensor) or not images.dtype.is_floating_point or images.ndim not in (3, 4):
            raise input_error(fn, "images", "a float [N, H, W] or [N, C, H, W] tensor of raw pixels", describe(images))
        if images.ndim == 3:
            images = images[:, None]
        labels = torch.as_tensor(labels)
        if labels.shape != (images.shape[0],) or labels.dtype.is_floating_point:
            raise input_error(fn, "labels", f"[{images.shape[0]}] integer class ids", describe(labels))
        new = sorted(set(labels.tolist()) - set(range(self.classes)))
        if not new or new != list(range(self.classes, self.classes + len(new))) or int(labels.min()) < 0:
            raise input_error(fn, "labels", f"new classes numbered from {self.classes} on (old ones may recur)",
                              sorted(set(labels.tolist())))
        return images.float(), labels.long(), new

    def _init_model(self, in_channels: int) -> None:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.config.seed)
            self.model = SmallConvNet(SmallConvNetConfig(in_channels=in_channels, channels=self.config.channels))

    def fit_task(self, images: torch.Tensor, labels) -> CILLearner:
        """Learn one task: ``images`` (raw pixels) and ``labels`` (new classes numbered after the seen ones), then
        rebuild the memory and store a checkpoint."""
        images, labels, new = self._check_task(images, labels)
        c = self.config
        if c.memory_protocol == "fixed_total" and 0 < c.memory_size < self.classes + len(new):
            raise input_error(f"{type(self).__name__}.fit_task", "config.memory_size",
                              f">= the classes seen after this task ({self.classes + len(new)})", c.memory_size)
        if self.model is None:
            self._init_model(images.shape[1])
        previous = copy.deepcopy(self.model).eval() if self.classes and self.config.loss == "bce_distill" else None
        old = self.classes
        with torch.random.fork_rng(devices=[]):  # the new head rows are seeded too
            torch.manual_seed(inner_seed(c.seed, 2, len(self.checkpoints)))
            self.model.add_classes(len(new))
        self.classes += len(new)
        x, y = images, labels
        if self._exemplars:
            x = torch.cat([images, *self._exemplars.values()])
            y = torch.cat([labels, *[torch.full((len(v),), k) for k, v in self._exemplars.items()]])
        self._train(x, y, old, previous, task=len(self.checkpoints))
        self._rebuild_memory(images, labels, new)
        self.memory_history.append(dict(self.memory))
        self.checkpoints.append(Checkpoint(copy.deepcopy(self.model).eval(), self._class_means(), self.classes))
        return self

    def _loss(self, logits: torch.Tensor, y: torch.Tensor, xb: torch.Tensor, old: int, previous) -> torch.Tensor:
        if self.config.loss == "ce":
            return nn.functional.cross_entropy(logits, y)
        target = nn.functional.one_hot(y, self.classes).float()
        if previous is not None and old:
            with torch.no_grad():
                target[:, :old] = torch.sigmoid(previous(xb).logits[:, :old])
        return nn.functional.binary_cross_entropy_with_logits(logits, target)

    def _train(self, x: torch.Tensor, y: torch.Tensor, old: int, previous, task: int) -> None:
        c = self.config
        model = self.model.train()
        opt = torch.optim.SGD(model.parameters(), lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay)
        gen = torch.Generator().manual_seed(inner_seed(c.seed, 1, task))
        for _ in range(c.epochs):
            order = torch.randperm(len(x), generator=gen)
            for start in range(0, len(x), c.batch_size):
                batch = order[start:start + c.batch_size]
                if len(batch) < 2:  # BatchNorm needs two rows
                    continue
                loss = self._loss(model(x[batch]).logits, y[batch], x[batch], old, previous)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
        model.eval()

    @torch.no_grad()
    def _features(self, images: torch.Tensor) -> torch.Tensor:
        return self.model.eval()(images).features

    def _rebuild_memory(self, images: torch.Tensor, labels: torch.Tensor, new: list[int]) -> None:
        quota = self._quota()
        if quota == 0:
            return
        # old classes keep the prefix of their herding order (new dicts: the history keeps the old ones)
        self.memory = {cls: order[:quota] for cls, order in self.memory.items()}
        self._exemplars = {cls: ex[:quota] for cls, ex in self._exemplars.items()}
        for cls in new:
            rows = torch.nonzero(labels == cls).flatten()
            candidates = images[rows]
            keep = torch.ones(len(rows), dtype=torch.bool)
            if self.memory_hook is not None:
                keep = torch.as_tensor(self.memory_hook(self.model, candidates, cls), dtype=torch.bool)
                if keep.shape != (len(rows),):
                    raise input_error(f"{type(self).__name__}.memory_hook", "return value",
                                      f"a [{len(rows)}] boolean mask of kept candidates", describe(keep))
                if not bool(keep.any()):
                    keep[:] = True  # a defence that rejects a whole class keeps nothing to replay: ignore it
            chosen = torch.nonzero(keep).flatten()
            chosen = chosen[herding(self._features(candidates[chosen]), quota)]
            self.memory[cls] = rows[chosen]
            self._exemplars[cls] = candidates[chosen]

    def _class_means(self) -> torch.Tensor | None:
        if self.config.inference == "logits":
            return None
        means = [nn.functional.normalize(nn.functional.normalize(self._features(self._exemplars[c]), dim=1).mean(0),
                                         dim=0) for c in range(self.classes)]
        return torch.stack(means)

    def predict(self, images: torch.Tensor, checkpoint: int = -1) -> torch.Tensor:
        """Class ids of raw-pixel ``images`` by the learner's inference rule, with checkpoint ``checkpoint``."""
        if not self.checkpoints:
            raise input_error(f"{type(self).__name__}.predict", "self", "a learner that has fit a task", "none fit")
        n = len(self.checkpoints)
        checkpoint = check_int(f"{type(self).__name__}.predict", "checkpoint", checkpoint, low=-n, high=n - 1)
        if not isinstance(images, torch.Tensor) or not images.dtype.is_floating_point:
            raise input_error(f"{type(self).__name__}.predict", "images", "a float tensor of raw pixels",
                              describe(images))
        return self.checkpoints[checkpoint].predict(images[:, None] if images.ndim == 3 else images)


class ICaRL(CILLearner):
    """iCaRL (Rebuffi et al. 2017) as the PBTO reproduction implements it: BCE with distillation, herding into a
    fixed total memory (100 here), NME inference. Poisoned images relabelled to the target enter the target
    class's herding pool and can be replayed: a persistence channel the audit measures."""

    defaults: dict = {}


class LwF(CILLearner):
    """Learning without Forgetting in iCaRL's multi-class form (LwF-MC): the same BCE distillation, no memory,
    logits inference; persistence cannot come from replayed poisoned images."""

    defaults = {"memory_size": 0, "inference": "logits"}


class Finetune(CILLearner):
    """The lower bound: cross-entropy on each task's data alone, no distillation, no memory, logits inference."""

    defaults = {"memory_size": 0, "inference": "logits", "loss": "ce"}


LEARNERS = {"icarl": ICaRL, "lwf": LwF, "finetune": Finetune}

__all__ = ["CILConfig", "CILLearner", "Checkpoint", "Finetune", "ICaRL", "LEARNERS", "LwF", "MemoryHook", "herding"]
