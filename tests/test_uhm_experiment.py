"""The UHM experiment end to end (quick settings with smaller trace batches), each claim's direction."""

import dataclasses

import pytest

from icml26.runner import RunConfig


def test_quick_experiment_claims_hold(tmp_path):
    from icml26.eval.experiments.uhm import SETTINGS, run_experiment

    s = dataclasses.replace(SETTINGS["quick"], trace_batch=2000, variance_k_max=(10, 50))
    result = run_experiment(RunConfig(out_dir=tmp_path, seeds=(0,)), s)
    claims = {c.statement.split(":")[0]: c for c in result.claims}
    assert len(result.claims) == 3 and all(c.holds for c in result.claims), [c.to_dict() for c in result.claims]
    m = result.metrics
    assert m["explore_uhm_success"] - m["explore_1step_td_success"] >= 0.15
    assert 0.2 <= m["explore_1step_td_success"] <= 0.6  # the calibration: 1-step TD is mid-way
    assert m["variance_winsorized"] < m["variance_geometric"]
    assert max(m["tabular_uhm_tv"].values()) < 0.1
    table = next(v for k, v in result.tables.items() if k.startswith("tabular critics"))
    calls = {r["target"]: r["model calls per target"] for r in table}
    assert calls == {"1-step TD": 0, "DTD(lambda)": 0, "MBTD(lambda)": 50, "GHM": 1, "UHM": 1}
    assert set(result.figures) == {"success_and_q_error", "target_variance_vs_k_max", "tv_vs_horizon"}
    assert claims


def test_full_mode_runs_at_tiny_size_with_its_neural_and_pointmaze_claims(tmp_path):
    """Full mode end to end, shrunk to run (not to hold): the neural claim, the PointMaze2D study, its
    claim (start-state value error, UHM against 1-step TD), curves and figure."""
    from icml26.eval.experiments.uhm import SETTINGS, run_experiment

    s = dataclasses.replace(SETTINGS["full"], transitions=5000, batch_size=5000, trace_batch=2000, variance_k_max=(5, 10),
                            neural_reps=1, neural_steps=5, neural_hidden=16, neural_k_max=10, tv_horizon=10, k_max=10,
                            pm_transitions=2000, pm_updates=3, pm_model_steps=2, pm_eval_every=2)
    result = run_experiment(RunConfig(mode="full", out_dir=tmp_path, seeds=(0,)), s)
    statements = [c.statement for c in result.claims]
    assert len(statements) == 5 and statements[3].startswith("neural UHM direct TV to P_pi^10")
    pm_claim = result.claims[4]
    assert pm_claim.statement.startswith("PointMaze2D, 3 updates: UHM critic's")
    pm = result.metrics["pointmaze"]
    assert pm_claim.measured == pm["UHM_start_value_error"] and pm_claim.reference == pm["1step_TD_start_value_error"]
    rows = result.tables["PointMaze2D (navigate data): flow UHM + ReBRAC-style actor-critic"]
    assert [r["critic target"] for r in rows] == ["1-step TD", "UHM"]
    assert rows[0]["model calls per target"] == 0 and rows[1]["model calls per target"] == 1
    assert rows[0]["oracle value at starts"] == pytest.approx(pm["oracle_start_value"], abs=0.01)
    assert pm["oracle_start_value"] > 0
    # evaluated at update 2 and at the last update, for each arm
    curve = result.tables["PointMaze2D over updates"]
    assert [(r["critic target"], r["update"]) for r in curve] == [("1-step TD", 2), ("1-step TD", 3), ("UHM", 2), ("UHM", 3)]
    assert result.figures["pointmaze_success_and_start_value"].axes
