"""Progress inside a long run: named phases with step counts, shown by whoever listens.

Library code reports what it is doing and never prints a bar itself::

    from icml26.progress import phase

    with phase("stage 2", total=300) as bar:
        for step in range(300):
            ...
            bar.update()

Outside ``icml26 reproduce`` nobody listens and a phase costs a function call. Under the runner, each
phase shows as a second bar below the one over experiments (``saisa: stage 2  120/300``), and the phase
and step are written into ``results.json`` with the run's heartbeat. :func:`trainer_callback` reports an HF
``Trainer``'s optimizer steps the same way. Only the main process of a multi-process launch should report
(the callbacks check ``state.is_world_process_zero``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_listeners: list[Callable[[Phase, str], None]] = []


class Phase:
    """One named step of a run: ``name``, optional ``total``, the count ``n`` so far."""

    def __init__(self, name: str, total: int | None = None) -> None:
        if not isinstance(name, str) or not name:
            from .errors import input_error

            raise input_error("phase", "name", "a non-empty string", name)
        self.name, self.total, self.n, self.started = name, total, 0, time.monotonic()
        self.closed = False

    def update(self, n: int = 1) -> None:
        """Count ``n`` more steps done."""
        self.n += n
        _emit(self, "update")

    def set(self, n: int, total: int | None = None) -> None:
        """Say that ``n`` steps (of ``total``, when it changes) are done."""
        self.n = n
        if total is not None:
            self.total = total
        _emit(self, "update")

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            _emit(self, "close")

    def describe(self) -> str:
        count = f"{self.n}/{self.total}" if self.total else (str(self.n) if self.n else "")
        return f"{self.name} {count}".strip()


def _emit(tracker: Phase, event: str) -> None:
    for listener in list(_listeners):
        listener(tracker, event)


@contextmanager
def phase(name: str, total: int | None = None) -> Iterator[Phase]:
    """A :class:`Phase` that opens now and closes when the block ends (also on an exception)."""
    tracker = Phase(name, total)
    _emit(tracker, "open")
    try:
        yield tracker
    finally:
        tracker.close()


@contextmanager
def listening(listener: Callable[[Phase, str], None]) -> Iterator[None]:
    """Call ``listener(phase, event)`` (event: ``open``, ``update``, ``close``) for every phase in the block."""
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


def reset_listeners(*listeners: Callable[[Phase, str], None]) -> None:
    """Replace every listener by ``listeners``: for a worker process, whose inherited listeners (the parent's
    bars and ``results.json`` writer) belong to the parent; it installs one that relays to the parent instead."""
    _listeners[:] = listeners


def trainer_callback(name: str = "training") -> Any:
    """A ``transformers.TrainerCallback`` that reports the trainer's optimizer steps as phase ``name``.

    Add it with ``trainer.add_callback(trainer_callback("stage 2"))`` or ``callbacks=[...]``. It imports
    transformers only when called, so the core stays light.
    """
    from transformers import TrainerCallback

    class _PhaseCallback(TrainerCallback):
        def __init__(self) -> None:
            self.tracker: Phase | None = None

        def on_train_begin(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                self.tracker = Phase(name, state.max_steps or None)
                self.tracker.n = state.global_step  # a resumed run starts where it stopped
                _emit(self.tracker, "open")

        def on_step_end(self, args, state, control, **kwargs):
            if self.tracker is not None:
                self.tracker.set(state.global_step, state.max_steps or None)

        def on_train_end(self, args, state, control, **kwargs):
            if self.tracker is not None:
                self.tracker.close()
                self.tracker = None

    return _PhaseCallback()
