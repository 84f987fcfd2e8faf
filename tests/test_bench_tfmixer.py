"""``icml26 bench tfmixer`` shrunk: each model in its own interpreter, the step breakdown, memory samples."""

import pytest

pytest.importorskip("torch")


def test_bench_tfmixer_reports_rates_shares_and_memory(tmp_path):
    from icml26.eval.benchmarks.tfmixer import run
    from icml26.runner import RunConfig

    data = {"source": "synthetic", "sizes": [80, 20, 20], "channels": 5, "label": "synthetic test data"}
    result = run(RunConfig(out_dir=tmp_path), sizes={"quick": {"steps": 3, "warmup": 1, "memory_steps": 20,
                                                               "defaults_steps": 2}}, data=data, models=("tfmixer",))
    m = result.metrics
    assert m["tfmixer/series_per_s_1_threads"] > 0 and m["tfmixer/series_per_s_2_threads"] > 0
    shares = m["tfmixer/step_shares_1_thread"]
    assert set(shares) == {"collate", "forward", "backward", "optimizer"}
    assert sum(shares.values()) == pytest.approx(1.0, abs=0.01)
    modules = m["tfmixer/forward_share_by_module_1_thread"]
    assert {"ltm", "time_mixer.0", "frequency_mixer.0", "decoder.mlp"} <= set(modules)
    assert 0 < sum(modules.values()) <= 1.01  # parts of the forward (the rest: the model's own code)
    (row,) = result.tables["runs"]
    assert not row["malloc_threshold_pinned"] and row["data"] == "synthetic test data"
    assert len(row["memory_samples_gb"]) >= 1 and row["memory_growth_gb"] is not None
    assert [c.reference for c in result.claims] == [500.0, m["tfmixer/series_per_s_1_threads"], 1.5, 0.05]
