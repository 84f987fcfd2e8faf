import json

from icml26.cli import main


def test_sandbox_benchmark_times_commands_and_set_up(tmp_path, monkeypatch):
    from icml26.agents.sandbox import isolation_support
    from icml26.eval.benchmarks import sandbox as bench

    monkeypatch.setitem(bench.SIZES, "quick", {"commands": 3, "setups": 1, "files": 5})
    assert main(["bench", "sandbox", "--out", str(tmp_path), "--no-progress"]) == 0
    (entry,) = json.loads((tmp_path / "results.json").read_text())["experiments"]
    result = entry["result"]
    rows = {r["mode"]: r for r in result["tables"]["sandbox"]}
    assert "unisolated" in rows and ("isolated" in rows) == (isolation_support()[0] is not None)
    for row in rows.values():
        assert row["run_true_median_ms"] > 0 and row["commands_per_s"] > 0 and row["setup_median_ms"] > 0
        assert row["run_true_min_ms"] <= row["run_true_median_ms"] <= row["run_true_p90_ms"]
    if "isolated" in rows:
        assert "isolated_launcher_per_command" in rows
        fixed, served = result["claims"]
        assert fixed["measured"] == served["measured"] == rows["isolated"]["run_true_median_ms"]
        assert served["reference"] == rows["isolated_launcher_per_command"]["run_true_median_ms"]
