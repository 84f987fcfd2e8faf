"""``icml26 bench rkme``: fit time and peak memory of the RKME specification (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_rkme_times_every_size_and_checks_memory_growth(tmp_path):
    from icml26.eval.benchmarks.rkme import run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"n": (100, 400), "m": (5, 10), "d": 8, "steps": 1})
    rows = result.tables["fit"]
    assert [(r["n"], r["m"]) for r in rows] == [(100, 5), (400, 5), (100, 10), (400, 10)]
    for row in rows:
        assert row["fit_cpu_s"] >= 0 and row["peak_mb"] > 0
    (claim,) = result.claims
    assert claim.relation == "less" and claim.factor == 4 ** 1.5
    assert abs(claim.measured - result.metrics["peak_mb_n400_m10"]) <= 1e-9
