import json

from icml26.cli import main


def test_saisa_benchmark_runs_on_a_small_backbone(tmp_path, monkeypatch):
    from icml26.eval.benchmarks import saisa as bench

    small = {"text": dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, vocab_size=100),
             "vision_dim": 32, "n_visual": 64, "n_text": [8, 64], "batch": 1, "dtype": "float32"}
    monkeypatch.setitem(bench.SIZES, "cpu", small)
    assert main(["bench", "saisa", "--out", str(tmp_path), "--device", "cpu", "--no-progress"]) == 0
    result = json.loads((tmp_path / "results.json").read_text())["experiments"][0]["result"]
    rows = result["tables"]["cpu"]
    assert {(r["arch"], r["n_text"]) for r in rows} == {(a, n) for a in bench.ARCHS for n in (8, 64)}
    assert all(r["prefill_ms"] > 0 and r["peak_mb"] > 0 and r["finite"] for r in rows)
    at = {(r["arch"], r["n_text"]): r for r in rows}
    # the analytic count favours SAISA whatever the machine does
    assert at[("saisa", 64)]["analytic_gflops"] < at[("llava", 64)]["analytic_gflops"]
    assert len(result["claims"]) == 2 and (tmp_path / "saisa" / "cpu.png").exists()


def test_benchmark_models_are_seeded_without_touching_the_global_rng():
    import torch

    from icml26.eval.benchmarks import saisa as bench

    small = {"text": dict(model_type="llama", hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                          num_attention_heads=2, num_key_value_heads=1, vocab_size=50), "vision_dim": 16}
    state = torch.random.get_rng_state()
    first = bench._models(small, torch.device("cpu"), torch.float32, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)
    again = bench._models(small, torch.device("cpu"), torch.float32, seed=3)
    for arch in bench.ARCHS:
        for (name, p), q in zip(first[arch].named_parameters(), again[arch].parameters()):
            assert torch.equal(p, q), (arch, name)
