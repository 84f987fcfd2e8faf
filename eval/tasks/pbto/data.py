"""The class-incremental streams of the PBTO audit and replacement poisoning.

:func:`digits_streams` builds the issue's small setting from scikit-learn's bundled digits (8 x 8, scaled to
[0, 1]): each class split into a victim pool and an attacker's proxy pool; the victim stream has the target digit
first (incremental label 0); the proxy stream holds the victim's first task and other digits, shifted by one pixel
(the mismatch of "public data"). Nothing is downloaded and nothing leaves the harness.

:func:`poison_indices` / :func:`poison` are the paper's replacement poisoning: exactly ``round(rate * N)`` training
images of the poisoned task, drawn from non-target classes only, stamped with the trigger and relabelled to the
target.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from icml26.errors import describe, input_error
from icml26.validation import check_finite, check_int


@dataclass
class CILTask:
    """One task: raw-pixel images ``[N, 1, H, W]`` in [0, 1] with incremental labels, and the original
    ``classes`` (digits) its labels stand for, in label order."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: tuple[int, ...]


@dataclass
class CILStream:
    """Tasks in order; ``target`` is the incremental label of the attacker's target class."""

    tasks: list[CILTask]
    target: int = 0

    def __len__(self) -> int:
        return len(self.tasks)

    def seen_test(self, t: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The test images and labels of tasks ``0..t``."""
        tasks = self.tasks[: t + 1]
        return torch.cat([k.x_test for k in tasks]), torch.cat([k.y_test for k in tasks])


def _split(rows: np.ndarray, share: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    rows = rng.permutation(rows)
    cut = int(round(share * len(rows)))
    return rows[:cut], rows[cut:]


def _shift(images: torch.Tensor, pixels: int) -> torch.Tensor:
    """Images moved ``pixels`` to the right and down, zeros coming in."""
    if pixels == 0:
        return images
    out = torch.zeros_like(images)
    out[..., pixels:, pixels:] = images[..., :-pixels, :-pixels]
    return out


def digits_streams(target_digit: int = 0, tasks: int = 5, proxy_tasks: int = 3, classes_per_task: int = 2,
                   victim_share: float = 0.7, train_share: float = 0.7, proxy_shift: int = 1,
                   seed: int = 0) -> tuple[CILStream, CILStream]:
    """The victim and proxy streams on digits.

    Args:
        target_digit: the attacker's target class: the first class of the victim's first task (label 0).
        tasks, proxy_tasks, classes_per_task: the streams' sizes (``tasks * classes_per_task <= 10``).
        victim_share: each digit's share in the victim pool (the rest is the proxy pool).
        train_share: the victim pool's train share per class (the rest is its test set; the proxy stream trains on
            its whole pool and is tested on the same images).
        proxy_shift: pixels the proxy images are moved by.
        seed: the pool split, the victim's class order after the target, the proxy's other digits.
    """
    fn = "digits_streams"
    from sklearn.datasets import load_digits

    target_digit = check_int(fn, "target_digit", target_digit, low=0, high=9)
    classes_per_task = check_int(fn, "classes_per_task", classes_per_task, low=1, high=10)
    tasks = check_int(fn, "tasks", tasks, low=1, high=10 // classes_per_task)
    proxy_tasks = check_int(fn, "proxy_tasks", proxy_tasks, low=1, high=10 // classes_per_task)
    victim_share = check_finite(fn, "victim_share", victim_share, low=0.0, high=1.0, low_open=True, high_open=True)
    train_share = check_finite(fn, "train_share", train_share, low=0.0, high=1.0, low_open=True, high_open=True)
    proxy_shift = check_int(fn, "proxy_shift", proxy_shift, low=0, high=3)
    seed = check_int(fn, "seed", seed, low=0)
    X, y = load_digits(return_X_y=True)
    X = torch.as_tensor(X / 16.0, dtype=torch.float32).reshape(-1, 1, 8, 8)
    rng = np.random.default_rng(seed)
    victim_rows, proxy_rows = {}, {}
    for digit in range(10):
        victim_rows[digit], proxy_rows[digit] = _split(np.flatnonzero(y == digit), victim_share, rng)
    others = [int(d) for d in rng.permutation([d for d in range(10) if d != target_digit])]
    order = [target_digit, *others][: tasks * classes_per_task]
    first = order[:classes_per_task]
    rest = [int(d) for d in rng.permutation([d for d in range(10) if d not in first])]
    proxy_order = (first + rest)[: proxy_tasks * classes_per_task]

    def stream(order: list[int], pools: dict, split: bool, shift: int) -> CILStream:
        out = []
        for t in range(len(order) // classes_per_task):
            classes = tuple(order[t * classes_per_task:(t + 1) * classes_per_task])
            parts = {"train": ([], []), "test": ([], [])}
            for digit in classes:
                label = order.index(digit)
                train, test = _split(pools[digit], train_share, rng) if split else (pools[digit], pools[digit])
                for name, rows in (("train", train), ("test", test)):
                    parts[name][0].append(_shift(X[rows], shift))
                    parts[name][1].append(torch.full((len(rows),), label, dtype=torch.long))
            out.append(CILTask(torch.cat(parts["train"][0]), torch.cat(parts["train"][1]),
                               torch.cat(parts["test"][0]), torch.cat(parts["test"][1]), classes))
        return CILStream(out, target=0)

    return stream(order, victim_rows, True, 0), stream(proxy_order, proxy_rows, False, proxy_shift)


def poison_indices(labels, target: int, rate: float, seed: int = 0) -> torch.Tensor:
    """Exactly ``round(rate * N)`` sorted indices of non-``target`` rows of ``labels`` (``N`` rows), drawn by
    ``seed``."""
    fn = "poison_indices"
    labels = torch.as_tensor(labels)
    if labels.ndim != 1 or labels.dtype.is_floating_point:
        raise input_error(fn, "labels", "a 1-d tensor of class ids", describe(labels))
    rate = check_finite(fn, "rate", rate, low=0.0, high=1.0, low_open=True, high_open=True)
    target = check_int(fn, "target", target)
    if not bool((labels == target).any()):
        raise input_error(fn, "target", f"a class of the poisoned task ({sorted(set(labels.tolist()))})", target)
    sources = torch.nonzero(labels != target).flatten()
    n = int(round(rate * len(labels)))
    if n < 1 or n > len(sources):
        raise input_error(fn, "rate", f"a rate giving between 1 and {len(sources)} non-target rows of "
                                      f"{len(labels)}", rate)
    gen = torch.Generator().manual_seed(check_int(fn, "seed", seed, low=0))
    return sources[torch.randperm(len(sources), generator=gen)[:n]].sort().values


def poison(images: torch.Tensor, labels, trigger, target: int, rate: float, seed: int = 0):
    """Replacement poisoning: ``(images', labels', flags)`` with the :func:`poison_indices` rows stamped by
    ``trigger.stamp`` and relabelled to ``target``; ``flags`` marks them (the learner never sees it)."""
    labels = torch.as_tensor(labels)
    rows = poison_indices(labels, target, rate, seed)
    images, labels = images.clone(), labels.clone()
    images[rows] = trigger.stamp(images[rows])
    labels[rows] = target
    flags = torch.zeros(len(labels), dtype=torch.bool)
    flags[rows] = True
    return images, labels, flags


__all__ = ["CILStream", "CILTask", "digits_streams", "poison", "poison_indices"]
