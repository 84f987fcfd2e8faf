"""The backdoor-persistence audit for class-incremental pipelines (the spec's framing of PBTO).

:class:`PersistenceAudit` trains a learner on a stream whose ``poison_task`` is poisoned with a trigger, and the
same learner (same seed: same initialisation and batch order) on the clean stream, then reports per task:

- ASR(t) of the poisoned victim, and the same trigger's ASR on the clean victim: an optimised epsilon-ball trigger
  is also a universal adversarial perturbation, so ASR means something only beside the clean run's;
- half-life (tasks after the poisoned one until ASR < 50%; ``None`` when it never falls below) and the mean ASR from
  the poisoned task on (the area under the curve per task);
- balanced accuracy (BA, clean accuracy over the seen classes) of both runs;
- the poisoned share of the replay memory and the poisoned images among the target class's exemplars;
- linear CKA per layer between the poisoned task's checkpoint and each later one, on that task's images (clean run);
- the learner's memory protocol, loss and inference rule, and the defence.

A ``defence`` (a memory filter, :mod:`.defences`) runs as the learner's ``memory_hook`` in both runs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from icml26.errors import describe, input_error
from icml26.models.pbto import LAYERS
from icml26.validation import check_finite, check_int

from .data import CILStream, poison
from .diagnostics import linear_cka
from .triggers import attack_success_rate


def train_stream(learner, stream: CILStream, poisoned: dict[int, tuple[torch.Tensor, torch.Tensor]] | None = None):
    """Fit ``learner`` on every task of ``stream`` in order, ``poisoned[t]`` replacing task ``t``'s training data."""
    for t, task in enumerate(stream.tasks):
        x, y = (poisoned or {}).get(t, (task.x_train, task.y_train))
        learner.fit_task(x, y)
    return learner


def accuracy_curve(learner, stream: CILStream) -> list[float]:
    """Clean accuracy on the seen classes' test images after each task."""
    out = []
    for t in range(len(learner.checkpoints)):
        x, y = stream.seen_test(t)
        out.append(float((learner.predict(x, t) == y).float().mean()))
    return out


def asr_curve(learner, stream: CILStream, trigger) -> list[float]:
    """The trigger's ASR on the seen classes' non-target test images after each task."""
    out = []
    for t in range(len(learner.checkpoints)):
        x, y = stream.seen_test(t)
        out.append(attack_success_rate(lambda images, t=t: learner.predict(images, t), x, y, trigger, stream.target))
    return out


@torch.no_grad()
def cka_profile(learner, images: torch.Tensor, reference: int = 0, layers=LAYERS) -> dict[str, list[float]]:
    """Per layer, linear CKA between checkpoint ``reference`` and every checkpoint, on ``images`` (activations
    flattened per image)."""
    feats = []
    for c in learner.checkpoints:
        _, acts = c.model.forward_with_features(images, layers)
        feats.append({name: a.flatten(1) for name, a in acts.items()})
    return {name: [linear_cka(feats[reference][name], f[name]) for f in feats] for name in layers}


def half_life(asr: list[float], start: int = 0, level: float = 0.5) -> int | None:
    """Tasks after ``start`` until the ASR first falls below ``level`` (0 when it starts below); ``None`` when it
    never does (censored at the stream's end)."""
    for t in range(start, len(asr)):
        if asr[t] < level:
            return t - start
    return None


@dataclass
class AuditReport:
    """What :meth:`PersistenceAudit.run` measured; lists run over tasks (index 0: the first task)."""

    trigger: str
    defence: str | None
    protocol: dict[str, Any]
    poison_task: int
    poisoned: int
    asr: list[float]
    clean_asr: list[float]
    ba: list[float]
    clean_ba: list[float]
    half_life: int | None
    asr_area: float
    memory_poison_share: list[float]
    target_memory_poisoned: list[int]
    cka: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class PersistenceAudit:
    """Does a class-incremental learner keep or wash out a behaviour planted in one task?

    Args:
        learner_factory: ``learner_factory(memory_hook)`` returns a fresh learner (the same seed every call), e.g.
            ``lambda hook: ICaRL(CILConfig(seed=0), memory_hook=hook)``.
        stream: the victim's :class:`~.data.CILStream`.
        trigger: anything with ``stamp(images)`` (a :class:`~.triggers.PatchTrigger`, a fitted
            :class:`~.triggers.AnchoredTrigger`).
        poison_task: the task whose training data is poisoned (it must hold the target class).
        rate: the replacement-poisoning rate of that task.
        defence: a memory filter run on each new class's candidates in both runs, or ``None``.
        seed: which rows are poisoned.
    """

    def __init__(self, learner_factory: Callable, stream: CILStream, trigger, poison_task: int = 0,
                 rate: float = 0.1, defence=None, seed: int | None = None) -> None:
        fn = "PersistenceAudit"
        if not callable(learner_factory):
            raise input_error(fn, "learner_factory", "a callable (memory_hook) -> learner", describe(learner_factory))
        if not isinstance(stream, CILStream):
            raise input_error(fn, "stream", "a CILStream", describe(stream))
        if not callable(getattr(trigger, "stamp", None)):
            raise input_error(fn, "trigger", "an object with stamp(images)", describe(trigger))
        self.poison_task = check_int(fn, "poison_task", poison_task, low=0, high=len(stream) - 1)
        if not bool((stream.tasks[self.poison_task].y_train == stream.target).any()):
            raise input_error(fn, "poison_task", f"a task holding the target class {stream.target}", poison_task)
        self.rate = check_finite(fn, "rate", rate, low=0.0, high=1.0, low_open=True, high_open=True)
        if defence is not None and not callable(defence):
            raise input_error(fn, "defence", "None or a memory filter (model, images, label) -> kept rows",
                              describe(defence))
        self.seed = 0 if seed is None else check_int(fn, "seed", seed, low=0)
        self.learner_factory, self.stream, self.trigger, self.defence = learner_factory, stream, trigger, defence

    def clean_run(self):
        """The learner trained on the clean stream (with the defence): pass it to :meth:`run` to reuse it."""
        return train_stream(self.learner_factory(self.defence), self.stream)

    def run(self, clean_learner=None) -> AuditReport:
        """Train the poisoned and (unless ``clean_learner`` is given) the clean learner and measure both; the
        poisoned learner stays as ``learner_`` and the poison flags of the task's rows as ``poison_flags_``."""
        task = self.stream.tasks[self.poison_task]
        x, y, flags = poison(task.x_train, task.y_train, self.trigger, self.stream.target, self.rate, self.seed)
        learner = train_stream(self.learner_factory(self.defence), self.stream, {self.poison_task: (x, y)})
        self.learner_, self.poison_flags_ = learner, flags
        clean = clean_learner if clean_learner is not None else self.clean_run()
        asr = asr_curve(learner, self.stream, self.trigger)
        share, in_target = [], []
        for t in range(len(learner.checkpoints)):
            stored = sum(len(v) for v in learner.memory_history[t].values())
            rows = learner.memory_history[t].get(self.stream.target)
            bad = int(flags[rows].sum()) if rows is not None and t >= self.poison_task else 0
            in_target.append(bad)
            share.append(bad / stored if stored else 0.0)
        images = torch.cat([task.x_train, task.x_test])
        return AuditReport(
            trigger=getattr(self.trigger, "name", type(self.trigger).__name__),
            defence=None if self.defence is None else getattr(self.defence, "name", type(self.defence).__name__),
            protocol=learner.protocol(), poison_task=self.poison_task, poisoned=int(flags.sum()), asr=asr,
            clean_asr=asr_curve(clean, self.stream, self.trigger), ba=accuracy_curve(learner, self.stream),
            clean_ba=accuracy_curve(clean, self.stream), half_life=half_life(asr, self.poison_task),
            asr_area=sum(asr[self.poison_task:]) / len(asr[self.poison_task:]), memory_poison_share=share,
            target_memory_poisoned=in_target,
            cka={k: v[self.poison_task:] for k, v in cka_profile(clean, images, self.poison_task).items()})


__all__ = ["AuditReport", "PersistenceAudit", "accuracy_curve", "asr_curve", "cka_profile", "half_life",
           "train_stream"]
