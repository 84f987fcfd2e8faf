"""``icml26 bench mol_diffusion``: steps per second per stage, the Trainer path, pseudo-samples (shrunk sizes)."""

import pytest

from icml26.runner import RunConfig


def test_bench_mol_diffusion_times_every_stage_and_claims_the_trainer_overhead(tmp_path):
    from icml26.eval.benchmarks.mol_diffusion import TRAINER_OVERHEAD, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"),
                 sizes={"steps": 2, "long_steps": 6, "conditions": 64, "sampler_steps": 5, "repeats": 1, "warmup": 0})
    rows = result.tables["cost per stage"]
    assert [r["stage"] for r in rows[:3]] == ["specialist", "generalist", "generalist (DSMTrainer)"]
    assert rows[3]["stage"].startswith("pseudo-samples (64 conditions, 5 DDIM steps)")
    m = result.metrics
    assert m["pseudo-samples/s"] > 0
    (claim,) = result.claims
    assert claim.relation == "less" and claim.factor == TRAINER_OVERHEAD
    assert claim.measured == m["generalist (DSMTrainer) ms/step"] and claim.reference == m["generalist ms/step"]
    with pytest.raises(ValueError, match="long_steps"):
        run(RunConfig(out_dir=tmp_path, device="cpu"), sizes={"steps": 5, "long_steps": 5})
