import json

from icml26.cli import main


def test_nudft_benchmark_runs_and_checks_itself(tmp_path, monkeypatch):
    from icml26.eval.benchmarks import nudft as bench

    monkeypatch.setitem(bench.SIZES, "cpu", {"rows": 4, "channels": 3, "n": [32, 128], "k": [8], "chunk": 16})
    assert main(["bench", "nudft", "--out", str(tmp_path), "--device", "cpu", "--no-progress"]) == 0
    data = json.loads((tmp_path / "results.json").read_text())
    (entry,) = data["experiments"]
    result = entry["result"]
    rows = result["tables"]["cpu"]
    assert {r["backend"] for r in rows} == {"torch materialised", "torch chunked (16)"}
    assert all(r["fwd_bwd_ms"] > 0 and r["peak_mb"] > 0 for r in rows)
    assert result["metrics"]["cpu_max_rel_err"] < 1e-4
    assert all(c["holds"] for c in result["claims"]), result["claims"]
    assert (tmp_path / "nudft" / "cpu.png").read_bytes()[:4] == b"\x89PNG"


def test_benchmarks_refuse_a_cuda_device_without_a_gpu(tmp_path):
    import pytest
    import torch

    from icml26 import InputError, RunConfig
    from icml26.eval.benchmarks import naevit, nudft

    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    for bench, name in ((nudft, "nudft"), (naevit, "naevit")):
        with pytest.raises(InputError, match=f"icml26 bench {name}: --device: expected 'auto' or 'cpu'.*got 'cuda'"):
            bench.run(RunConfig(device="cuda", out_dir=tmp_path))
