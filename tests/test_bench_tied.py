"""``icml26 bench tied``: images/s against K, M, H and cached vs fresh paths (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_tied_times_every_setting_and_compares_cached_with_fresh_paths(tmp_path):
    from icml26.eval.benchmarks.tied import run

    sizes = {"images": 4, "steps": (3, 6), "paths": (1, 2), "hypotheses": (2, 3), "so_draws": 50, "so_steps": 12,
             "so_paths": 4}
    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes=sizes)
    rows = result.tables["digits SE(2), PPCA energy"]
    assert len(rows) == 5 and {r["paths"] for r in rows} == {"cached", "fresh"}
    assert {(r["K"], r["M"], r["H"]) for r in rows} >= {(6, 1, 3), (3, 1, 3), (6, 2, 3), (6, 1, 2)}
    for row in rows:
        assert row["images_per_s"] > 0 and row["energy_evaluations_per_image"] == row["H"] * (1 + row["K"] * (row["M"] + 1))
    so = {r["paths"]: r for r in result.tables["SO(3) exp(10 X11^2), per-sample paths"]}
    (claim,) = result.claims
    assert claim.relation == "less" and abs(claim.measured - so["cached"]["seconds"]) < 1e-3
    assert abs(claim.reference - so["fresh"]["seconds"]) < 1e-3
