"""Timing helpers of the benchmarks."""

import time

from icml26.eval.measure import interleaved_median_ms, median_ms


def test_interleaved_rounds_call_each_function_once_per_round_and_take_medians():
    calls = []

    def fn(name, seconds):
        def run():
            calls.append(name)
            time.sleep(seconds)
        return run

    times = interleaved_median_ms({"a": fn("a", 0.002), "b": fn("b", 0.010)}, "cpu", warmup=1, repeats=3)
    assert calls == ["a", "b"] * 4  # one warm-up round, then three timed rounds, a and b alternating
    assert 2.0 <= times["a"] < 8.0 and 10.0 <= times["b"] < 30.0
    assert times["b"] > times["a"]


def test_a_slow_spell_lands_on_every_function_of_a_round():
    """A machine slow for one round slows both functions in it; medians over rounds ignore it."""
    rounds = {"n": 0}

    def first():
        rounds["n"] += 1
        time.sleep(0.02 if rounds["n"] == 3 else 0.001)  # round 2 (after the warm-up) is slow

    def second():
        time.sleep(0.02 if rounds["n"] == 3 else 0.001)

    times = interleaved_median_ms({"first": first, "second": second}, "cpu", warmup=1, repeats=5)
    assert max(times.values()) < 10.0
    assert median_ms(lambda: time.sleep(0.001), "cpu", warmup=0, repeats=3) >= 1.0


def test_minor_faults_count_fresh_pages_and_not_reused_ones():
    from icml26.eval.measure import minor_faults_per_call

    def fresh():  # 64 MiB, far above glibc's mmap threshold: new pages each call
        buffer = bytearray(64 * 2**20)
        buffer[::4096] = b"x" * len(buffer[::4096])

    kept = bytearray(64 * 2**20)

    def reused():
        kept[::4096] = b"y" * len(kept[::4096])

    assert minor_faults_per_call(fresh, "cpu") > 8000  # 16384 pages touched
    assert minor_faults_per_call(reused, "cpu") < 1000


def test_summaries_of_benchmark_rows_make_a_missing_measurement_fail_its_claim():
    import math

    import torch

    from icml26.eval.measure import error_text, geomean, max_abs_error, nanmax

    assert nanmax([1.0, 3.0, 2.0]) == 3.0
    assert math.isnan(nanmax([1.0, float("nan")])) and math.isnan(nanmax([]))
    assert math.isclose(geomean(x for x in (1.0, 4.0, 16.0)), 4.0)
    assert all(math.isnan(geomean(v)) for v in ([], [1.0, 0.0], [2.0, float("nan")]))
    assert max_abs_error(torch.tensor([1.0, 2.0], dtype=torch.bfloat16), torch.tensor([1.0, 2.5])) == 0.5
    assert error_text(ValueError("bad shape\nsecond line")) == "ValueError: bad shape"
    assert error_text(RuntimeError("x" * 400)) == ("RuntimeError: " + "x" * 400)[:300]
