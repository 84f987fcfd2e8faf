"""``icml26 bench dp_select``: evaluations, CPU time and peak memory per selector (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_dp_select_measures_every_selector_at_every_n(tmp_path):
    from icml26.eval.benchmarks.dp_select import SELECTORS, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"ns": (100, 200), "s": 300, "reps": 1})
    rows = result.tables["selectors vs n"]
    assert [(r["n"], r["selector"]) for r in rows] == [(n, s) for n in (100, 200) for s in SELECTORS]
    for row in rows:
        assert row["scheffe_evals"] > 0 and row["cpu_ms"] >= 0 and row["peak_mb"] > 0
    full = {r["n"]: r["scheffe_evals"] for r in rows if r["selector"] == "full private MDE"}
    assert full == {100: 100 * 99, 200: 200 * 199}
    assert len(result.claims) == 3
    assert result.claims[-1].factor == 2.0 and result.claims[-1].relation == "at_most"
