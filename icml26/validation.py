"""The shared checks of user-supplied parameters: one place, as scikit-learn's ``_param_validation``.

Every module validates its numbers and options through these helpers, so one rule (bools are not
numbers, numpy integers are ints, NaN is never accepted) and one message form hold everywhere::

    from icml26.validation import check_choice, check_finite, check_int

    n = check_int("garnet", "n_states", n_states, low=2)            # an int >= 2
    p = check_finite("river_swim", "p_forward", p, low=0, high=1)   # a number in [0, 1]
    mode = check_choice("R2GLoss", "reduction", reduction, ("mean", "sum"))

A bad value raises :class:`~icml26.errors.InputError` (``"<function>: <argument>: expected X, got Y"``).
A value of the wrong type (a bool, a string, a float where an int is expected) raises
:class:`~icml26.errors.InputTypeError`, which is both an ``InputError`` and a ``TypeError``, as
scikit-learn's ``InvalidParameterError`` is both a ``ValueError`` and a ``TypeError``. This module
imports neither torch nor numpy.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, TypeVar

from icml26.errors import InputError, InputTypeError, described

__all__ = ["check_choice", "check_finite", "check_generator", "check_int", "check_output_dir", "check_output_file",
           "check_random_state"]

T = TypeVar("T")


def _fmt(bound: Any) -> str:
    """A bound as the message shows it: ``1``, ``0.5``, ``1e-06`` (``1.0`` reads ``1``)."""
    if isinstance(bound, numbers.Integral):
        return str(int(bound))
    return f"{float(bound):g}"


def _bounds(low: Any, high: Any, low_open: bool, high_open: bool) -> str:
    """`` in [low, high)``, `` >= low``, `` < high`` or ``""``."""
    if low is not None and high is not None:
        return f" in {'(' if low_open else '['}{_fmt(low)}, {_fmt(high)}{')' if high_open else ']'}"
    if low is not None:
        return f" {'>' if low_open else '>='} {_fmt(low)}"
    if high is not None:
        return f" {'<' if high_open else '<='} {_fmt(high)}"
    return ""


def _type_error(function: str, argument: str, expected: str, value: Any) -> InputTypeError:
    got = described(f"{type(value).__name__} {value!r}" if isinstance(value, (bool, str, bytes)) or
                    not isinstance(value, numbers.Number) else repr(value))
    return InputTypeError(function, argument, expected, got)


def check_int(function: str, argument: str, value: Any, *, low: int | None = None,
              high: int | None = None) -> int:
    """``int(value)`` when ``value`` is an integer with ``low <= value <= high``, else an error.

    Python and numpy integers (any ``numbers.Integral``) are accepted and returned as a Python
    ``int``; bools, floats (even ``2.0``) and strings are refused with
    :class:`~icml26.errors.InputTypeError`, values out of range with
    :class:`~icml26.errors.InputError`. The message reads ``"an int >= {low}"``,
    ``"an int <= {high}"``, ``"an int in [{low}, {high}]"`` or ``"an int"``.

    Args:
        function: the public function, class or config named first in the message.
        argument: the argument named second in the message.
        value: the value to check.
        low: the smallest accepted value (``None``: no lower bound).
        high: the largest accepted value (``None``: no upper bound).
    """
    expected = "an int" + _bounds(low, high, False, False)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _type_error(function, argument, expected, value)
    number = int(value)
    if (low is not None and number < low) or (high is not None and number > high):
        raise InputError(function, argument, expected, value)
    return number


def check_choice(function: str, argument: str, value: T, choices: Iterable[Any]) -> T:
    """``value`` when it is one of ``choices``, else :class:`~icml26.errors.InputError` (``"one of [...]"``).

    Membership is equality, except that a bool never stands for ``0`` or ``1``.

    Args:
        function: the public function, class or config named first in the message.
        argument: the argument named second in the message.
        value: the value to check.
        choices: the accepted values, listed in the message in this order.
    """
    choices = list(choices)
    try:
        found = any(value == choice and isinstance(value, bool) == isinstance(choice, bool) for choice in choices)
    except (TypeError, ValueError):  # a value whose == is not a bool (an array)
        found = False
    if not found:
        raise InputError(function, argument, f"one of {choices}", value)
    return value


def check_finite(function: str, argument: str, value: Any, *, positive: bool = False, non_negative: bool = False,
                 allow_inf: bool = False, low: float | None = None, high: float | None = None,
                 low_open: bool = False, high_open: bool = False) -> float:
    """``float(value)`` when it is a real number (finite unless ``allow_inf``) within the bounds, else an error.

    Anything ``float()`` takes is a number (Python and numpy scalars, 0-d arrays and tensors) except
    bools and strings, which are refused with :class:`~icml26.errors.InputTypeError`; NaN is always
    refused. ``positive`` / ``non_negative`` add ``> 0`` / ``>= 0``; ``low`` / ``high`` add
    ``>= low`` / ``<= high`` (``>`` / ``<`` with ``low_open`` / ``high_open``). The message reads
    ``"a positive finite number"``, ``"a non-negative number"`` (with ``allow_inf``),
    ``"a finite number >= 1"``, ``"a number in (0, 1]"`` (both bounds: finite goes without saying).

    Args:
        function: the public function, class or config named first in the message.
        argument: the argument named second in the message.
        value: the value to check.
        positive: refuse values ``<= 0``.
        non_negative: refuse values ``< 0``.
        allow_inf: accept ``inf`` and ``-inf`` (when the bounds do).
        low: the lower bound (``None``: none).
        high: the upper bound (``None``: none).
        low_open: refuse ``value == low``.
        high_open: refuse ``value == high``.
    """
    what = "a positive" if positive else "a non-negative" if non_negative else "a"
    bounded = low is not None and high is not None and math.isfinite(low) and math.isfinite(high)
    kind = "number" if allow_inf or bounded else "finite number"
    expected = f"{what} {kind}{_bounds(low, high, low_open, high_open)}"
    if isinstance(value, (bool, str, bytes)):
        raise _type_error(function, argument, expected, value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _type_error(function, argument, expected, value) from None
    if math.isnan(number) or (math.isinf(number) and not allow_inf) or (positive and not number > 0) \
            or (non_negative and not number >= 0) \
            or (low is not None and not (number > low if low_open else number >= low)) \
            or (high is not None and not (number < high if high_open else number <= high)):
        raise InputError(function, argument, expected, value)
    return number


def check_random_state(function: str, argument: str, value: Any) -> None:
    """A scikit-learn-style ``random_state`` (or an optional seed): ``None`` or an int (Python or numpy); anything
    else (a bool, a float, a string) is an :class:`~icml26.errors.InputTypeError` reading ``"None or an int"``."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Integral)):
        raise InputTypeError(function, argument, "None or an int", described(f"{type(value).__name__} {value!r}"))


def check_generator(function: str, argument: str, value: Any):
    """``value`` when it is a ``numpy.random.Generator`` (what a function drawing from a caller's stream takes),
    else an :class:`~icml26.errors.InputTypeError`. numpy is imported only when the check runs."""
    import numpy as np

    if not isinstance(value, np.random.Generator):
        raise InputTypeError(function, argument, "a numpy.random.Generator (numpy.random.default_rng(seed))",
                             described(type(value).__name__))
    return value


def _path(function: str, argument: str, value: Any) -> Path:
    if isinstance(value, bool) or not isinstance(value, (str, os.PathLike)) or isinstance(os.fspath(value), bytes):
        raise InputTypeError(function, argument, "a path (a str or os.PathLike)", described(type(value).__name__))
    if not os.fspath(value).strip():
        raise InputError(function, argument, "a path", value)
    return Path(value).expanduser()


def check_output_dir(function: str, argument: str, value: Any) -> Path:
    """``Path(value)``, created if needed, once a file could be written in it; else :class:`~icml26.errors.InputError`.

    What a command checks before its work starts, so that a folder it cannot write (``/proc/x``, a path
    under a file, a read-only mount) is refused at once instead of after an hour of computing. The folder is
    created (with its parents) because creating it is the only test that holds for every file system and user
    (root passes ``os.access`` on folders it still cannot write); a probe file is written and removed.

    Args:
        function: the public function or command named first in the message.
        argument: the argument or option named second in the message (``"--out"``).
        value: the folder's path.
    """
    path = _path(function, argument, value)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / f".icml26-write-test-{os.getpid()}"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise InputError(function, argument, "a folder that can be created and written to",
                         described(f"{str(path)!r} ({exc.strerror or exc})")) from None
    return path


def check_output_file(function: str, argument: str, value: Any) -> Path:
    """``Path(value)`` when a file can be written there (its folder is created if needed); else
    :class:`~icml26.errors.InputError`. An existing folder at ``value`` is refused; an existing file is kept
    (the caller decides whether to overwrite it).

    Args:
        function: the public function or command named first in the message.
        argument: the argument or option named second in the message (``"--json"``).
        value: the file's path.
    """
    path = _path(function, argument, value)
    if path.is_dir():
        raise InputError(function, argument, "a file path (not a folder)", str(path))
    try:
        check_output_dir(function, argument, path.parent)
    except InputError as exc:
        raise InputError(function, argument, "a file path whose folder can be created and written to",
                         described(f"{str(path)!r} ({exc.got})")) from None
    return path
