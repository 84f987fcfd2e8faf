"""The UHM experiment end to end (quick settings with smaller trace batches), each claim's direction."""

import dataclasses

import numpy as np
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


def test_neural_and_pointmaze_parts_run_at_tiny_size(tmp_path):
    """Full mode's neural claim and PointMaze2D study, shrunk to run (not to hold)."""
    from icml26.eval.experiments.uhm import SETTINGS, compounding_study
    from icml26.eval.experiments._uhm_pointmaze import pointmaze_figure, pointmaze_study

    s = dataclasses.replace(SETTINGS["full"], transitions=5000, neural_reps=1, neural_steps=5, neural_hidden=16,
                            neural_k_max=5, tv_horizon=5, pm_transitions=2000, pm_updates=3, pm_model_steps=2, pm_eval_every=2, k_max=5)
    comp = compounding_study(s, 0)
    assert 0 <= comp["direct_median"] <= 1 and 0 <= comp["composed_median"] <= 1
    pm = pointmaze_study(s, 0)
    assert [r["critic target"] for r in pm["rows"]] == ["1-step TD", "UHM"]
    assert pm["rows"][1]["model calls per target"] == 1
    # evaluated at update 2 and at the last update; the oracle value is one number per start state
    assert [r["update"] for r in pm["history"]["UHM"]] == [2, 3]
    assert len(pm["oracle"]) == 10 and pm["rows"][0]["oracle value at starts"] == pytest.approx(np.mean(pm["oracle"]), abs=0.01)
    assert pointmaze_figure(pm).axes
