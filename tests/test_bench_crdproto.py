"""``icml26 bench crdproto``: episodes per second of detection, unguided and guided replacement (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_crdproto_times_every_path_and_claims_the_guidance_overhead(tmp_path):
    from icml26.eval.benchmarks.crdproto import GUIDANCE_OVERHEAD, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"),
                 sizes={"episodes": 2, "prior_steps": 5, "repeats": 1, "warmup": 0})
    rows = result.tables["support-set processing"]
    assert [r["path"] for r in rows] == ["detection (filter-only)", "unguided replacement", "guided replacement"]
    assert all(r["ms per episode"] > 0 for r in rows)
    (claim,) = result.claims
    assert claim.factor == GUIDANCE_OVERHEAD
    assert claim.measured == result.metrics["guided replacement ms/episode"]
    assert claim.reference == result.metrics["unguided replacement ms/episode"]
