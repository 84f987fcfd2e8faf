"""``icml26 bench uhm``: critic-update time against k_max (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_uhm_times_every_target_and_counts_model_calls(tmp_path):
    from icml26.eval.benchmarks.uhm import run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"batch": 256, "transitions": 5000}, k_values=(5, 20))
    rows = {r["target"]: r for r in result.tables["critic update"]}
    assert set(rows) == {"1-step TD", "UHM k=5", "UHM k=20", "MBTD k=5", "MBTD k=20"}
    assert rows["UHM k=20"]["model_calls_per_target"] == 1 and rows["MBTD k=20"]["model_calls_per_target"] == 20
    assert rows["1-step TD"]["model_calls_per_target"] == 0
    for row in rows.values():
        assert row["update_ms"] > 0 and row["peak_mb"] > 0
    uhm_claim, mbtd_claim = result.claims
    assert uhm_claim.factor == 1.5 and uhm_claim.relation == "at_most"
    assert abs(uhm_claim.measured - rows["UHM k=20"]["update_ms"]) < 1e-2
    assert mbtd_claim.relation == "greater"
