"""The ``optminer`` experiment end to end (reduced: 40 instances, no toy training) and its registration."""

from dataclasses import replace

import pytest

from icml26.agents.optminer.bench import ENV_FOLDER, bench_folder
from icml26.runner import RunConfig


def test_optminer_experiment_reduced_end_to_end(tmp_path):
    from icml26.eval.experiments.optminer import SETTINGS, run_experiment

    result = run_experiment(RunConfig(out_dir=tmp_path), replace(SETTINGS["quick"], n_instances=40, toy=False))
    m = result.metrics
    assert m["instances"] == 40 and m["fresh_cbc_agreement"] == 1.0 and m["text_validator_differ"] == 0
    assert any(c.statement.startswith("text-faithful synthesis") for c in result.claims)
    assert m["fail_text_only_fogged"] > m["fail_text_only_unfogged"]
    assert m["success_fogged_with_retrieval"] > 1 - m["fail_text_only_fogged"]
    failed = [c.statement for c in result.claims if not c.holds]
    assert not failed, failed
    folder = bench_folder()
    has_bench = folder is not None and folder.is_dir()
    assert any("harness check" in c.statement for c in result.claims) == has_bench
    if not has_bench:
        assert ENV_FOLDER in result.notes
    assert (tmp_path / "instances.json").exists()
    assert "optminer" in result.figures


def test_optminer_synthesis_claims_over_two_seeds_use_the_median(tmp_path):
    from icml26.eval.experiments.optminer import SETTINGS, run_experiment

    small = replace(SETTINGS["quick"], n_instances=20, unions=5, toy=False)
    two = run_experiment(RunConfig(out_dir=tmp_path, seeds=(0, 1)), small)
    rows = two.tables["claims per seed"]
    assert {r["seed"] for r in rows} == {0, 1} and len(rows) == 2 * 6
    assert all(c.statement.endswith("(median over seeds 0, 1)") for c in two.claims[:6])
    one = run_experiment(RunConfig(out_dir=tmp_path / "one", seeds=(1,)), small)
    seed1 = {r["claim"]: r["measured"] for r in rows if r["seed"] == 1}
    assert [seed1[c.statement] for c in one.claims[:6]] == [c.measured for c in one.claims[:6]]


def test_optminer_experiment_is_registered():
    from icml26.registry import entries

    entry = entries("experiment")["optminer"]
    assert entry.paper == "optminer" and entry.module == "icml26.eval.experiments.optminer"


@pytest.mark.slow
def test_optminer_experiment_with_toy_over_three_seeds(tmp_path):
    """Claim 3 as ``--full`` runs it (three seeds of the toy, about 10 minutes), with fewer synthesis instances."""
    from icml26.eval.experiments.optminer import SETTINGS, run_experiment

    result = run_experiment(RunConfig(out_dir=tmp_path, device="cpu", mode="full", seeds=(0, 1, 2)),
                            replace(SETTINGS["full"], n_instances=40, toy=True))
    assert all(c.holds for c in result.claims), [c.to_dict() for c in result.claims if not c.holds]
    assert len(result.tables["toy"]) == 3


def test_optminer_metrics_keep_the_synthesis_wall_time_and_its_phases(tmp_path):
    from icml26.eval.experiments.optminer import SETTINGS, run_experiment

    m = run_experiment(RunConfig(out_dir=tmp_path), replace(SETTINGS["quick"], n_instances=8, unions=2)).metrics
    assert isinstance(m["synthesis_seconds"], float) and m["synthesis_seconds"] > 0
    assert {"highs", "cbc_wait", "draw"} <= set(m["synthesis_phase_seconds"])
