"""The bad-input probe harness: one wrong value per call, and a verdict on what the user saw.

Each ``tests/test_bad_input_<area>.py`` lists ``PROBES``, calls a user could make with exactly one
bad value (a negative horizon, a policy that is not a distribution, a missing file behind a CLI
option), and runs them through :func:`verdict`:

- ``clear``: the call raised :class:`~icml26.errors.InputError` (or a ``TypeError``) whose message
  names the argument (or CLI option) and says what was expected; a CLI exited 2 with such a line
  on stderr, before any model loaded or experiment ran;
- ``silent``: the call returned (or the CLI exited 0): the bad value went through unnoticed;
- ``cryptic``: anything else (another exception, a message that names neither the argument nor
  what was expected, a traceback from deep inside a library, another exit code).

A probe passes only when its verdict is ``clear``. ``tests/test_bad_input_suite.py`` counts the
probes of every area (the suite must hold at least 300) so the count cannot shrink unnoticed.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from icml26.errors import InputError


@dataclass(frozen=True)
class Probe:
    """One bad call.

    Args:
        id: a short readable name (the pytest id), e.g. ``"premium_purchase_task-horizon-negative"``.
        call: a zero-argument callable making the bad call (a lambda).
        argument: text the error message must contain: the argument's name (``"horizon"``) or the
            CLI option (``"--data"``).
        kind: ``"api"`` for a Python call, ``"cli"`` for :func:`cli` probes.
    """

    id: str
    call: Callable[[], Any]
    argument: str
    kind: str = "api"
    forbid: Sequence[str] = field(default=())


def verdict(probe: Probe) -> tuple[str, str]:
    """``("clear" | "silent" | "cryptic", what happened)`` for one probe."""
    if probe.kind == "cli":
        return _cli_verdict(probe)
    try:
        probe.call()
    except (InputError, TypeError) as exc:
        text = str(exc)
        if probe.argument in text and "expected" in text:
            return "clear", f"{type(exc).__name__}: {text}"
        return "cryptic", f"{type(exc).__name__} not naming {probe.argument!r} with what was expected: {text}"
    except Exception as exc:  # noqa: BLE001 - classifying is the point
        return "cryptic", f"{type(exc).__name__}: {exc}"
    return "silent", "returned without an error"


def _cli_verdict(probe: Probe) -> tuple[str, str]:
    err = io.StringIO()
    out = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            code = probe.call()
    except SystemExit as exc:  # argparse errors exit through SystemExit
        code = exc.code
    except Exception as exc:  # noqa: BLE001
        return "cryptic", f"{type(exc).__name__} escaped the CLI: {exc}"
    text = err.getvalue()
    if code in (0, None):
        return "silent", f"exit {code}; stderr: {text.strip()[:300]}"
    if code != 2:
        return "cryptic", f"exit {code} (expected 2); stderr: {text.strip()[-300:]}"
    if probe.argument not in text or "Traceback" in text:
        return "cryptic", f"exit 2 but stderr does not name {probe.argument!r}: {text.strip()[-300:]}"
    return "clear", text.strip()


class WorkStarted(AssertionError):
    """Raised by a forbidden function: the CLI started real work before checking its options."""


def cli(id: str, argv: Sequence[str], option: str, *, main: Callable[[Sequence[str]], int] | None = None,
        forbid: Sequence[str] = ()) -> Probe:
    """A probe running ``icml26 <argv>`` in process; it is clear when the CLI exits 2 naming ``option``.

    ``forbid`` lists dotted names (``"icml26.runner.run_all"``, ``"transformers.AutoModelForCausalLM.from_pretrained"``)
    that must not be called before the option is refused: the probe replaces them with a function
    raising :class:`WorkStarted` for the duration of the call.
    """
    def call() -> int:
        with contextlib.ExitStack() as stack:
            for name in forbid:
                stack.enter_context(_forbidden(name))
            entry = main
            if entry is None:
                from icml26.cli import main as entry
            return entry(list(argv))

    return Probe(id=id, call=call, argument=option, kind="cli", forbid=tuple(forbid))


@contextlib.contextmanager
def _forbidden(dotted: str):
    import importlib

    module_name, _, attr = dotted.rpartition(".")
    owner: Any
    try:
        owner = importlib.import_module(module_name)
    except ImportError:  # "package.module.Class.method"
        parent, _, cls = module_name.rpartition(".")
        owner = getattr(importlib.import_module(parent), cls)
    original = getattr(owner, attr)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise WorkStarted(f"{dotted} was called before the bad option was refused")

    setattr(owner, attr, refuse)
    try:
        yield
    finally:
        setattr(owner, attr, original)


def check(probe: Probe) -> None:
    """Assert that ``probe`` is clear (the body of every bad-input test)."""
    result, detail = verdict(probe)
    assert result == "clear", f"{probe.id}: {result}: {detail}"


def ids(probes: Sequence[Probe]) -> list[str]:
    """The pytest ids of ``probes`` (their ``id`` fields), checked to be unique."""
    names = [p.id for p in probes]
    duplicates = {n for n in names if names.count(n) > 1}
    assert not duplicates, f"duplicate probe ids: {sorted(duplicates)}"
    return names
