"""``icml26 bench pbto``: seconds per trajectory, per PGD step and checkpoint, per refinement round (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_pbto_times_every_part_and_claims_the_per_checkpoint_overhead(tmp_path):
    from icml26.eval.benchmarks.pbto import PER_CHECKPOINT_OVERHEAD, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"),
                 sizes={"epochs": 2, "pgd_steps": 3, "repeats": 1, "warmup": 0})
    rows = result.tables["cost (one thread)"]
    assert len(rows) == 5 and all(r["value"] > 0 for r in rows)
    (claim,) = result.claims
    per = result.metrics["pgd_ms_per_step_checkpoint"]
    assert claim.factor == PER_CHECKPOINT_OVERHEAD
    assert claim.measured == per["full"] and claim.reference == per["no_sim_no_align"]
