"""The shared parameter checks of ``icml26.validation``: what they accept, refuse and say."""

from __future__ import annotations

import math
import re
import sys

import numpy as np
import pytest

from icml26.errors import InputError, InputTypeError
from icml26.validation import check_choice, check_finite, check_int


# -- check_int ---------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, 3, -2, 10**30, np.int64(3), np.int8(-1), np.uint16(7)])
def test_check_int_accepts_python_and_numpy_ints_and_returns_int(value):
    out = check_int("f", "n", value)
    assert out == int(value) and type(out) is int


@pytest.mark.parametrize("value, got", [
    (True, "bool True"), (False, "bool False"), (np.bool_(True), re.escape(f"{type(np.bool_(True)).__name__} {np.bool_(True)!r}")),
    (2.0, "2.0"), (1.5, "1.5"), (np.float64(2.0), re.escape(repr(np.float64(2.0)))), ("3", "str '3'"),
    (None, "NoneType None"), ([1], r"list \[1\]"),
])
def test_check_int_refuses_bools_floats_and_others_as_type_errors(value, got):
    with pytest.raises(InputTypeError, match=rf"^f: n: expected an int >= 1, got {got}$") as info:
        check_int("f", "n", value, low=1)
    # both kinds of caller catch it: ``except InputError`` (a ValueError) and ``except TypeError``
    assert isinstance(info.value, InputError) and isinstance(info.value, TypeError)
    assert isinstance(info.value, ValueError)
    assert (info.value.function, info.value.argument) == ("f", "n")


@pytest.mark.parametrize("kwargs, expected, ok, bad", [
    ({}, "an int", [-(10**9), 0, 10**9], []),
    ({"low": 1}, "an int >= 1", [1, 5], [0, -1]),
    ({"low": 0}, "an int >= 0", [0], [-1]),
    ({"high": 5}, "an int <= 5", [5, -3], [6]),
    ({"low": 1, "high": 5}, r"an int in \[1, 5\]", [1, 5], [0, 6]),
])
def test_check_int_bounds_are_closed(kwargs, expected, ok, bad):
    for value in ok:
        assert check_int("f", "n", value, **kwargs) == value
        assert check_int("f", "n", np.int32(value) if abs(value) < 2**31 else value, **kwargs) == value
    for value in bad:
        with pytest.raises(InputError, match=rf"^f: n: expected {expected}, got {value}$") as info:
            check_int("f", "n", value, **kwargs)
        assert not isinstance(info.value, TypeError)  # a value out of range is not a type error
        with pytest.raises(InputError, match=rf"^f: n: expected {expected}, got "):
            check_int("f", "n", np.int64(value), **kwargs)


# -- check_choice ------------------------------------------------------------------------------
def test_check_choice_returns_the_value_and_lists_the_choices():
    assert check_choice("f", "mode", "sum", ("mean", "sum")) == "sum"
    assert check_choice("f", "mode", "a", {"a": 1, "b": 2}) == "a"  # any iterable of choices
    assert check_choice("f", "k", None, [None, 1]) is None
    with pytest.raises(InputError, match=r"^f: mode: expected one of \['mean', 'sum'\], got 'max'$") as info:
        check_choice("f", "mode", "max", ("mean", "sum"))
    assert not isinstance(info.value, TypeError)


def test_check_choice_refuses_bools_for_ints_and_odd_values():
    assert check_choice("f", "k", 1, (1, 2)) == 1
    assert check_choice("f", "flag", True, (True, False)) is True
    with pytest.raises(InputError, match=r"^f: k: expected one of \[1, 2\], got True$"):
        check_choice("f", "k", True, (1, 2))
    with pytest.raises(InputError, match=r"^f: mode: expected one of \['mean'\], got \['mean'\]$"):
        check_choice("f", "mode", ["mean"], ("mean",))  # unhashable: compared, not hashed
    with pytest.raises(InputError, match=r"^f: mode: expected one of \['a', 'b'\], got array"):
        check_choice("f", "mode", np.array(["a", "b"]), ("a", "b"))  # no ambiguous truth value


# -- check_finite ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [0, 1, -2.5, np.float32(0.5), np.int64(3), np.float64(1e300), np.array(2.0)])
def test_check_finite_accepts_real_numbers_and_returns_float(value):
    out = check_finite("f", "x", value)
    assert out == float(value) and type(out) is float


@pytest.mark.parametrize("kwargs, expected", [
    ({}, "a finite number"),
    ({"positive": True}, "a positive finite number"),
    ({"non_negative": True}, "a non-negative finite number"),
    ({"allow_inf": True}, "a number"),
    ({"positive": True, "allow_inf": True}, "a positive number"),
])
def test_check_finite_keeps_its_keywords(kwargs, expected):
    for value in (True, False):
        with pytest.raises(TypeError, match=rf"^f: x: expected {expected}, got bool {value}$") as info:
            check_finite("f", "x", value, **kwargs)
        assert isinstance(info.value, InputError)
    for value in ("0.5", b"1", None, [1.0], object()):
        with pytest.raises(InputTypeError, match=rf"^f: x: expected {expected}, got {type(value).__name__} "):
            check_finite("f", "x", value, **kwargs)
    with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got nan$"):
        check_finite("f", "x", float("nan"), **kwargs)
    nan32 = re.escape(repr(np.float32("nan")))  # nan or np.float32(nan), by numpy version
    with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got {nan32}$"):
        check_finite("f", "x", np.float32("nan"), **kwargs)
    if kwargs.get("allow_inf"):
        assert check_finite("f", "x", math.inf, **kwargs) == math.inf
    else:
        with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got inf$"):
            check_finite("f", "x", math.inf, **kwargs)
    if kwargs.get("positive"):
        for value in (0, 0.0, -1e-300):
            with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got "):
                check_finite("f", "x", value, **kwargs)
    if kwargs.get("non_negative"):
        assert check_finite("f", "x", 0, **kwargs) == 0.0
        with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got -0.1$"):
            check_finite("f", "x", -0.1, **kwargs)


@pytest.mark.parametrize("kwargs, expected, ok, bad", [
    ({"low": 0, "high": 1}, r"a number in \[0, 1\]", [0, 0.5, 1], [-1e-9, 1.000001]),
    ({"low": 0, "high": 1, "low_open": True}, r"a number in \(0, 1\]", [1e-300, 1], [0, 1.5]),
    ({"low": 0, "high": 1, "high_open": True}, r"a number in \[0, 1\)", [0, 0.999], [1, -0.5]),
    ({"low": 0, "high": 1, "low_open": True, "high_open": True}, r"a number in \(0, 1\)", [0.5], [0, 1]),
    ({"low": 0.5, "high": 1, "low_open": True}, r"a number in \(0.5, 1\]", [0.75], [0.5]),
    ({"low": 1}, "a finite number >= 1", [1, 1e300], [0.999, math.inf]),
    ({"low": 0, "low_open": True}, "a finite number > 0", [1e-300], [0, -1]),
    ({"high": 2.5}, "a finite number <= 2.5", [2.5, -1], [2.6, -math.inf]),
    ({"high": 0, "high_open": True}, "a finite number < 0", [-1], [0]),
    ({"low": 1, "allow_inf": True}, "a number >= 1", [1, math.inf], [0, -math.inf]),
    ({"low": 1e-6}, "a finite number >= 1e-06", [1e-6], [0]),
    ({"low": 0, "high": 1, "positive": True}, r"a positive number in \[0, 1\]", [1], [0]),
])
def test_check_finite_bounds(kwargs, expected, ok, bad):
    for value in ok:
        assert check_finite("f", "x", value, **kwargs) == value
    for value in bad:
        with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got ") as info:
            check_finite("f", "x", value, **kwargs)
        assert not isinstance(info.value, TypeError)
    with pytest.raises(InputError, match=rf"^f: x: expected {expected}, got nan$"):
        check_finite("f", "x", math.nan, **kwargs)


def test_long_values_are_shortened():
    with pytest.raises(InputTypeError) as info:
        check_finite("f", "x", list(range(1000)))
    assert str(info.value).startswith("f: x: expected a finite number, got list [0, 1, 2")
    assert str(info.value).endswith("...") and len(str(info.value)) < 200


def test_core_imports_neither_torch_nor_numpy():
    import subprocess

    code = "import sys, icml26.validation; print('torch' in sys.modules, 'numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_errors_no_longer_holds_the_checks():
    import icml26.errors

    assert not hasattr(icml26.errors, "check_finite")


def test_check_output_dir_creates_the_folder_and_refuses_what_cannot_be_written(tmp_path):
    from icml26.validation import check_output_dir, check_output_file

    made = check_output_dir("f", "--out", tmp_path / "a" / "b")
    assert made.is_dir() and list(made.iterdir()) == []  # the write probe is gone
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match=r"^f: --out: expected a folder that can be created and written to, got "
                                         r"'.*file/run' \(Not a directory\)$"):
        check_output_dir("f", "--out", blocker / "run")
    with pytest.raises(InputTypeError, match="^f: --out: expected a path"):
        check_output_dir("f", "--out", 3)
    target = check_output_file("f", "--json", tmp_path / "new" / "report.json")
    assert target.parent.is_dir() and not target.exists()
    assert check_output_file("f", "--json", blocker) == blocker  # an existing file: the caller decides
    with pytest.raises(InputError, match="^f: --json: expected a file path .not a folder."):
        check_output_file("f", "--json", tmp_path)
    with pytest.raises(InputError, match="^f: --json: expected a file path whose folder can be created"):
        check_output_file("f", "--json", blocker / "report.json")


def test_random_state_and_generator_checks():
    import numpy as np

    from icml26.errors import InputTypeError
    from icml26.validation import check_generator, check_random_state

    for ok in (None, 0, 7, np.int64(3)):
        check_random_state("f", "random_state", ok)
    for bad in (True, 1.0, "1"):
        with pytest.raises(InputTypeError, match="f: random_state: expected None or an int"):
            check_random_state("f", "random_state", bad)
    rng = np.random.default_rng(0)
    assert check_generator("f", "rng", rng) is rng
    with pytest.raises(InputTypeError, match="f: rng: expected a numpy.random.Generator"):
        check_generator("f", "rng", 0)
