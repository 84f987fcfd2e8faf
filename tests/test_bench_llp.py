"""``icml26 bench llp``: the LLP losses' forward+backward timing and peak memory (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_llp_times_every_loss_and_compares_lowvar_with_easyllp(tmp_path):
    from icml26.eval.benchmarks.llp import METHODS, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"bags": 4, "k": 32, "c": 3, "d": 8})
    rows = result.tables["forward+backward"]
    assert [r["method"] for r in rows] == list(METHODS)
    for row in rows:
        assert row["fwd_bwd_ms"] > 0 and row["bags_per_s"] > 0 and row["peak_mb"] > 0
    (claim,) = result.claims
    assert claim.factor == 1.2 and claim.relation == "at_most"
    assert abs(claim.reference - result.metrics["easyllp_fwd_bwd_ms"]) <= 1e-3
    assert abs(claim.measured - result.metrics["lowvar_fwd_bwd_ms"]) <= 1e-3
