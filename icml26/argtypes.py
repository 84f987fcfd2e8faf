"""argparse value types shared by every ``icml26`` command (argparse only: imported while building the parser).

Each names what it expected and what came, e.g. ``expected a positive integer, got '0'``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(kind: type, what: str, ok: Callable[[float], bool]) -> Callable[[str], float]:
    """An argparse ``type=`` that parses ``kind`` (int or float) and accepts it when ``ok(value)``."""

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None
        if isinstance(value, float) and math.isnan(value) or not ok(value):
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    parse.__name__ = what.replace(" ", "_")
    return parse


positive_int = number(int, "a positive integer", lambda v: v >= 1)
non_negative_float = number(float, "a non-negative number", lambda v: v >= 0)
positive_float = number(float, "a positive number", lambda v: v > 0)
probability = number(float, "a probability in [0, 1]", lambda v: 0 <= v <= 1)
