"""TFMixer's PhysioNet study (full mode): resumable runs, the head as its own baseline, re-splits, a real kill."""

import dataclasses
import json

import pytest

torch = pytest.importorskip("torch")

from icml26.eval.experiments import tfmixer as exp  # noqa: E402
from icml26.runner import RunConfig  # noqa: E402


def _small(**changes):
    return dataclasses.replace(exp.SETTINGS["full"], physionet_steps=6, physionet_eval_every=3,
                               physionet_models=("tfmixer", "head_trained", "tfmixer_mean", "no_gfm", "no_ltm",
                                                 "mtan"),
                               physionet_split_seeds=(0,), physionet_checkpoint_every=3, **changes)


def test_full_settings_are_the_issue_protocol():
    full = exp.SETTINGS["full"]
    assert full.physionet_all_sets and full.physionet_split_seeds == (0, 1) and full.physionet_processes == 2
    assert set(full.physionet_models) == {"tfmixer", "head_trained", "tfmixer_mean", "no_gfm", "no_ltm", "mtan"}
    assert exp.PHYSIONET_VARIANTS["tfmixer_mean"] == {"forecast_level": "mean"}
    config = exp.PHYSIONET_CONFIG
    assert (config["initializer_range"], config["decoder_zero_init"], config["reconstruction_scale"]) == (0.2, True, 2.0)


def test_head_trained_is_the_head_alone_and_the_untrained_model_equals_the_head(physionet_folder):
    """The zero-started decoder makes the untrained TFMixer forecast exactly its least-squares head; the
    head_trained arm trains only the head's numbers."""
    from icml26.eval.tasks.tfmixer import evaluate_forecaster, load_physionet2012

    splits = load_physionet2012(physionet_folder / "set-a", "tpatchgnn")
    head = evaluate_forecaster(exp.build_physionet_model("blend", splits), splits.validation)["mse"]
    for name in ("tfmixer", "head_trained"):
        model = exp.build_physionet_model(name, splits)
        assert evaluate_forecaster(model, splits.validation)["mse"] == pytest.approx(head, rel=1e-5)
    trainable = {k for k, p in exp.build_physionet_model("head_trained", splits).named_parameters() if p.requires_grad}
    assert trainable == {"level_mix", "channel_fallback"}
    assert not exp.SETTINGS["quick"].physionet_all_sets


def test_full_mode_part_runs_resumes_and_names_the_head(physionet_folder, tmp_path):
    out_dir = tmp_path / "run"
    config = RunConfig(mode="full", seeds=(0, 1), out_dir=out_dir, data=str(physionet_folder))
    first = exp._physionet(config, _small(), torch.device("cpu"))
    rows = {r["model"]: r for r in first["table"]}
    assert exp.PHYSIONET_LABELS["blend"] in rows and exp.PHYSIONET_LABELS["tfmixer"] in rows
    assert rows[exp.PHYSIONET_LABELS["locf"]]["best step / steps run"] == ["-", "-"]
    files = sorted((out_dir / "runs").glob("*.json"))
    assert len(files) == 6 * 2 + 1  # six trained arms at two seeds, TFMixer on the other split
    assert not list((out_dir / "runs").glob("*.ckpt"))  # every checkpoint went with its kept result
    statements = [c.statement for c in first["claims"]]
    assert len(statements) == 9 and any("0.98 x the better of the head alone" in s for s in statements)
    assert {r["model"] for r in first["resplits"]} == {exp.PHYSIONET_LABELS[n] for n in ("tfmixer", "locf", "blend")}
    assert {r["breakdown"] for r in first["breakdown"]} >= {"overall", "group", "horizon", "history"}
    stamps = {f: f.stat().st_mtime_ns for f in files}
    second = exp._physionet(config, _small(), torch.device("cpu"))  # loaded, nothing trained again
    assert {f: f.stat().st_mtime_ns for f in files} == stamps
    assert [c.to_dict() for c in second["claims"]] == [c.to_dict() for c in first["claims"]]
    exp._physionet(config, _small(physionet_lr=1e-3), torch.device("cpu"))  # other settings: trained again
    assert json.loads(files[0].read_text())["settings"]["train"]["lr"] == 1e-3


def test_quick_mode_reports_physionet_without_a_claim(physionet_folder, tmp_path):
    small = dataclasses.replace(exp.SETTINGS["quick"], physionet_steps=4, physionet_eval_every=2)
    out = exp._physionet(RunConfig(mode="quick", seeds=(0,), out_dir=tmp_path, data=str(physionet_folder)), small,
                         torch.device("cpu"))
    assert out["claims"] == [] and out["resplits"] == [] and len(out["table"]) == 4


_KILLABLE = """
import dataclasses, sys, torch
from icml26.eval.experiments import tfmixer as exp
from icml26.runner import RunConfig
s = dataclasses.replace(exp.SETTINGS["full"], physionet_steps=int(sys.argv[3]), physionet_eval_every=20,
                        physionet_batch_size=8, physionet_patience=1000, physionet_models=("tfmixer",), physionet_split_seeds=(),
                        physionet_checkpoint_every=20, physionet_processes=1)
out = exp._physionet(RunConfig(mode="full", seeds=(0,), out_dir=sys.argv[1], data=sys.argv[2]), s, torch.device("cpu"))
print(out["median"]["tfmixer"])
"""


def test_a_killed_full_mode_resumes_from_its_checkpoint(physionet_folder, tmp_path):
    """SIGKILL mid-run, then the same command: it resumes from the run's checkpoint (not step 0) and ends where an
    uninterrupted run ends."""
    import subprocess
    import sys

    from orphans import kill_once_written

    steps, killed, whole = 400, tmp_path / "killed", tmp_path / "whole"
    ckpt = killed / "runs" / "physionet-tfmixer-seed0-split42.ckpt"
    kill_once_written([sys.executable, "-c", _KILLABLE, str(killed), str(physionet_folder), str(steps)], ckpt)
    assert not ckpt.with_suffix(".json").is_file()
    state = torch.load(ckpt, weights_only=False)
    assert 20 <= state["counters"][0] < steps
    # Mark the checkpoint: a rerun that resumes from it carries the mark into its training time, a restart does not.
    state["counters"] = (*state["counters"][:4], state["counters"][4] + 1e6)
    torch.save(state, ckpt)
    results = [subprocess.run([sys.executable, "-c", _KILLABLE, str(folder), str(physionet_folder), str(steps)],
                              check=True, capture_output=True, text=True).stdout for folder in (killed, whole)]
    assert results[0] == results[1]
    resumed, straight = (json.loads((f / "runs" / ckpt.with_suffix(".json").name).read_text())["result"]
                         for f in (killed, whole))
    assert resumed["val_history"] == straight["val_history"] and resumed["best_step"] == straight["best_step"]
    assert resumed["series_per_second"] < 0.01 < straight["series_per_second"]  # resumed: the marked time came along
    assert not ckpt.exists()
