"""``icml26 bench r2g``: seconds per step on Grokfast's task, eager vs torch.compile (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_r2g_times_eager_and_compiled_steps_and_claims_the_speed_up(tmp_path):
    from icml26.eval.benchmarks.r2g import SIZES, run

    assert SIZES["quick"]["arms"] == ("baseline", "R2G")
    sizes = {"quick": {"steps": 2, "evals": 1, "arms": ("R2G",)}}
    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes=sizes)
    rows = result.tables["timings"]
    assert [(r["arm"], r["compiled"]) for r in rows] == [("R2G", False), ("R2G", True)]
    for row in rows:
        assert row["train_step_s"] > 0 and row["eval_s"] > 0
        assert row["per_step_s"] == row["train_step_s"] + row["eval_s"] / (4656 / 512)
    (claim,) = result.claims
    assert claim.relation == "less" and "torch.compile vs eager" in claim.statement
    assert (claim.measured, claim.reference) == (rows[1]["per_step_s"], rows[0]["per_step_s"])
    assert result.metrics["R2G/compile_s"] == rows[1]["warmup_s"] - rows[0]["warmup_s"]
