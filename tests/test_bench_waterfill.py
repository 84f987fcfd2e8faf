"""``icml26 bench waterfill``: step time of the spectral CNN's two feature paths (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_waterfill_times_both_paths_on_every_size(tmp_path):
    from icml26.eval.benchmarks.waterfill import run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"n": (6, 12), "k": (4,), "batch": 16, "steps": 2,
                                                                   "warmup": 1})
    rows = result.tables["step time"]
    assert [(r["N"], r["K"]) for r in rows] == [(6, 4), (12, 4)]
    for row in rows:
        assert row["parseval ms/step"] > 0 and row["conv ms/step"] > 0
    (claim,) = result.claims
    assert claim.relation == "less" and claim.measured == rows[-1]["parseval ms/step"]
    assert claim.reference == rows[-1]["conv ms/step"]
