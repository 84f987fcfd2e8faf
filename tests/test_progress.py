from types import SimpleNamespace

import pytest

from icml26 import InputError
from icml26.cli import main
from icml26.progress import listening, phase, trainer_callback


def test_phases_reach_listeners_and_close_on_error():
    events = []
    with listening(lambda p, e: events.append((p.describe(), e))):
        with phase("stage 1", total=2) as bar:
            bar.update()
            bar.update()
        with pytest.raises(RuntimeError):
            with phase("stage 2"):
                raise RuntimeError("boom")
    assert events == [("stage 1 0/2", "open"), ("stage 1 1/2", "update"), ("stage 1 2/2", "update"),
                      ("stage 1 2/2", "close"), ("stage 2", "open"), ("stage 2", "close")]
    with phase("nobody listens", total=1) as bar:  # no listener: a no-op
        bar.update()


def test_phase_name_is_checked():
    with pytest.raises(InputError, match="phase: name: expected a non-empty string"):
        with phase(""):
            pass


def test_trainer_callback_reports_optimizer_steps_on_the_main_process_only():
    pytest.importorskip("transformers")
    events = []
    with listening(lambda p, e: events.append((p.describe(), e))):
        for zero in (True, False):
            callback = trainer_callback("sft")
            state = SimpleNamespace(is_world_process_zero=zero, max_steps=3, global_step=1)  # resumed at step 1
            callback.on_train_begin(None, state, None)
            for step in (2, 3):
                state.global_step = step
                callback.on_step_end(None, state, None)
            callback.on_train_end(None, state, None)
    assert events == [("sft 1/3", "open"), ("sft 2/3", "update"), ("sft 3/3", "update"), ("sft 3/3", "close")]


def test_reproduce_shows_each_phase_as_a_nested_bar(plugin_env, tmp_path, capsys):
    assert main(["reproduce", "t_phases", "--out", str(tmp_path / "run")]) == 0
    err = capsys.readouterr().err
    assert "t_phases: stage 1" in err and "t_phases: stage 2" in err


def test_results_json_shows_the_open_phases_outermost_first(plugin_env, tmp_path):
    import json

    assert main(["reproduce", "t_nested", "--out", str(tmp_path / "run"), "--no-progress"]) == 0
    (exp,) = json.loads((tmp_path / "run" / "results.json").read_text())["experiments"]
    assert exp["result"]["metrics"]["phase_seen"] == "seeds 1/2 > sft 0/5"
    assert "phase" not in exp  # cleared once the experiment ends
