"""``icml26 bench ortho_flow``: step time of the forward-mode, torch.func and Hutchinson penalties (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_ortho_flow_times_every_path_on_every_dimension(tmp_path):
    from icml26.eval.benchmarks.ortho_flow import PATHS, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"d": (2, 4), "batch": 16, "steps": 2, "warmup": 1})
    rows = result.tables["step time"]
    assert [r["d"] for r in rows] == [2, 4]
    for row in rows:
        assert all(row[f"{p} ms/step"] > 0 for p in PATHS)
    (claim,) = result.claims
    closest = max(rows, key=lambda r: r["forward ms/step"] / r["func ms/step"])
    assert claim.relation == "less" and claim.measured == closest["forward ms/step"]
    assert claim.reference == closest["func ms/step"]
