"""One exception for bad user input, and the one way its message is spelt.

Every public function, config and CLI of icml26 raises :class:`InputError` (a ``ValueError``, so
``except ValueError`` keeps working) when a value is wrong, and ``TypeError`` when a type is. The
message always reads ``"<function>: <argument>: expected X, got Y"`` so a user sees at once which
call, which argument, what would have been accepted and what came. The CLIs map ``InputError`` to
exit code 2 with that one line; any other exception shows its traceback. The shared checks of numbers
and options (``check_int``, ``check_choice``, ``check_finite``) live in :mod:`icml26.validation`.
"""

from __future__ import annotations

from typing import Any


class InputError(ValueError):
    """Bad input from a user: ``<function>: <argument>: expected X, got Y``.

    Build it with :func:`input_error` (or ``InputError(function, argument, expected, got)``) so the
    message keeps its one form; ``function``, ``argument``, ``expected`` and ``got`` stay readable as
    attributes for callers that want to react to a particular argument.
    """

    def __init__(self, function: str, argument: str | None = None, expected: str | None = None,
                 got: Any = None, *, show_got: bool = True) -> None:
        self.function, self.argument, self.expected, self.got = function, argument, expected, got
        if argument is None and expected is None:  # a free-form message: InputError("...")
            message = function
        else:
            parts = [function] + ([argument] if argument else [])
            message = ": ".join(parts) + f": expected {expected}"
            if show_got:
                message += f", got {_short(got)}"
        super().__init__(message)


class InputTypeError(InputError, TypeError):
    """Bad input of the wrong type (a bool for a count, a string for a rate): an :class:`InputError` and a
    ``TypeError`` at once, as scikit-learn's ``InvalidParameterError``, so ``except InputError`` and
    ``except TypeError`` both catch it. The checks of :mod:`icml26.validation` raise it."""


def input_error(function: str, argument: str, expected: str, got: Any) -> InputError:
    """The :class:`InputError` ``"<function>: <argument>: expected <expected>, got <got>"``."""
    return InputError(function, argument, expected, got)


class Described(str):
    """Text that describes what came (``"a tensor of shape (2, 3)"``): printed as is, not quoted."""


def described(text: str) -> Described:
    """Mark ``text`` as a description of the bad value rather than the value itself."""
    return Described(text)


def describe(value: Any) -> Described:
    """A short description of a tensor or array (dtype, shape, device) or ``repr`` of anything else."""
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        device = getattr(value, "device", None)
        where = f" on {device}" if device is not None and str(device) != "cpu" else ""
        kind = "tensor" if type(value).__module__.startswith("torch") else "array"
        return Described(f"a {str(dtype).replace('torch.', '')} {kind} of shape {tuple(shape)}{where}")
    return Described(_short(value))


def _short(value: Any, limit: int = 120) -> str:
    text = value if isinstance(value, Described) else repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
