"""The UHM experiment end to end (quick settings with smaller trace batches and a shorter sweep), each
claim's direction, and the budget sweep's consistency with the claim's budget."""

import dataclasses

import pytest

from icml26.runner import RunConfig


def test_quick_experiment_claims_hold(tmp_path):
    from icml26.eval.experiments.uhm import SETTINGS, run_experiment

    s = dataclasses.replace(SETTINGS["quick"], trace_batch=2000, variance_k_max=(10, 50), sweep_factors=(1, 2))
    result = run_experiment(RunConfig(out_dir=tmp_path, seeds=(0,)), s)
    assert len(result.claims) == 4 and all(c.holds for c in result.claims), [c.to_dict() for c in result.claims]
    # each claim names the model it uses
    control, q_error, variance, neural = (c.statement for c in result.claims)
    assert "tabular UHM" in control and "tabular UHM" in q_error and "true model" in variance
    assert neural.startswith("learned categorical UHM") and "learned 1-step network composed 20 times" in neural
    m = result.metrics
    assert m["explore_uhm_success"] - m["explore_1step_td_success"] >= 0.15
    assert 0.2 <= m["explore_1step_td_success"] <= 0.6  # the calibration: 1-step TD is mid-way
    assert m["variance_winsorized"] < m["variance_geometric"]
    assert max(m["tabular_uhm_tv"].values()) < 0.1
    # the learned models: the direct UHM wins at the long horizon, the 1-step network at n = 1 (not by construction)
    assert m["neural_direct_tv"] < m["neural_composed_tv"]
    assert m["neural_composed_tv_n1"] < m["neural_direct_tv_n1"]
    table = next(v for k, v in result.tables.items() if k.startswith("tabular critics"))
    calls = {r["target"]: r["model calls per target"] for r in table}
    assert calls == {"1-step TD": 0, "DTD(lambda)": 0, "MBTD(lambda)": 50, "GHM": 1, "UHM": 1}
    sweep = next(v for k, v in result.tables.items() if k.startswith("budget sweep, GridMaze-explore"))
    updates = next(r["updates"] for r in sweep if r["k"] == 1)
    assert [r["k"] for r in sweep] == [1, 2] and [r["updates"] for r in sweep] == [updates, 2 * updates]
    assert sweep[0]["UHM"] == round(m["explore_uhm_success"], 3)
    assert m["explore_1step_td_sweep_success"][2 * updates] > m["explore_1step_td_success"]  # 1-step TD catches up
    assert set(result.figures) == {"budget_sweep", "target_variance_vs_k_max", "tv_vs_horizon"}


def test_the_sweep_reads_the_claims_budget_off_the_longer_run():
    """The success at k x the budget in a sweep is the success of a run of that length: the loop does not
    depend on how long it runs (negative control: the longer budget gives another value)."""
    from icml26.eval.experiments.uhm import SETTINGS, control_study

    s = dataclasses.replace(SETTINGS["quick"], maze_size=9, transitions=5000, batch_size=5000, trace_batch=500, k_max=10,
                            sweep_factors=(1,))
    short = control_study(s, 0)
    long = control_study(dataclasses.replace(s, sweep_factors=(1, 3)), 0)
    assert short["updates"] == long["updates"]
    for name in ("1-step TD", "DTD(lambda)", "MBTD(lambda)", "GHM", "UHM"):
        assert long[name]["sweep"][1] == short[name]["success"] == long[name]["success"]
        assert long[name]["sweep_q_error"][1] == short[name]["q_error"]
        assert long[name]["sweep_q_error"][3] != short[name]["q_error"]
        assert len(long[name]["history"]) == 3 * long["updates"] + 1


def test_full_mode_runs_at_tiny_size_with_its_neural_and_pointmaze_claims(tmp_path):
    """Full mode end to end, shrunk to run (not to hold): the neural claim, the PointMaze2D study, its
    claim (start-state value error, UHM against 1-step TD), curves and figure."""
    from icml26.eval.experiments.uhm import SETTINGS, run_experiment

    s = dataclasses.replace(SETTINGS["full"], transitions=5000, batch_size=5000, trace_batch=2000, variance_k_max=(5, 10),
                            neural_reps=1, neural_steps=5, neural_hidden=16, neural_k_max=10, neural_maze_size=9,
                            neural_transitions=2000, tv_horizon=10, k_max=10, sweep_factors=(1, 2),
                            pm_transitions=2000, pm_updates=3, pm_model_steps=2, pm_eval_every=2, pm_claim_updates=(1, 3))
    result = run_experiment(RunConfig(mode="full", out_dir=tmp_path, seeds=(0,)), s)
    statements = [c.statement for c in result.claims]
    assert len(statements) == 7 and statements[3].startswith("learned categorical UHM")
    assert "direct TV to P_pi^10" in statements[3]
    pm_claim = result.claims[4]
    assert pm_claim.statement.startswith("PointMaze2D, 3 updates")
    pm = result.metrics["pointmaze"]
    assert pm_claim.measured == pm["UHM_start_value_error"] and pm_claim.reference == pm["1step_TD_start_value_error"]
    rows = result.tables["PointMaze2D (navigate data): flow UHM + ReBRAC-style actor-critic"]
    assert [r["critic target"] for r in rows] == ["1-step TD", "UHM", "UHM, true simulator"]
    assert [r["model calls per target"] for r in rows] == [0, 1, 1]
    assert rows[0]["oracle value at starts"] == pytest.approx(pm["oracle_start_value"], abs=0.01)
    assert pm["oracle_start_value"] > 0
    # the control claim at its two budgets, from the curves
    for claim, b in zip(result.claims[5:], (1, 3)):
        assert claim.statement.startswith(f"PointMaze2D, {b} updates, learned flow UHM")
        assert (claim.measured, claim.reference) == (pm[f"success_at_{b}"]["UHM"], pm[f"success_at_{b}"]["1-step TD"])
    # evaluated at the claim budgets, every 2 updates and at the last update, for each arm
    curve = result.tables["PointMaze2D over updates"]
    assert [(r["critic target"], r["update"]) for r in curve] == [
        (arm, u) for arm in ("1-step TD", "UHM", "UHM, true simulator") for u in (1, 2, 3)]
    quality = result.tables["PointMaze2D: learned flow UHM vs the true dynamics under the final actor (cell units)"]
    assert [r["n"] for r in quality] == [1, 10] and all(0 <= r["model samples in walls"] <= 1 for r in quality)
    assert result.figures["pointmaze_success_and_start_value"].axes
    # both datasets get a sweep table
    assert sum(k.startswith("budget sweep") for k in result.tables) == 2
