"""``icml26 sera train`` as TRL's parser sees it (every ``SeraSFTConfig`` field an option, ``--config sft.yaml``),
and SERA's logging of failed instances."""

from __future__ import annotations

import dataclasses
import logging
import re

import pytest

pytest.importorskip("trl")

from icml26.agents.sera.cli import SeraTrainArguments, parse_train_args  # noqa: E402
from icml26.errors import InputError  # noqa: E402
from icml26.training.sera import SeraSFTConfig  # noqa: E402


def _help(capsys) -> str:
    from icml26.cli import main

    with pytest.raises(SystemExit) as done:
        main(["sera", "train", "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def test_help_lists_every_config_field_and_the_commands_own_options(capsys):
    text = _help(capsys)
    listed = set(re.findall(r"^\s+(--[a-z0-9_]+)", text, re.M))
    fields = {f"--{f.name}" for f in dataclasses.fields(SeraSFTConfig)}
    assert len(fields) == 144  # TRL 1.16's SFTConfig and SERA's own fields, all settable on the command line
    assert fields - listed == set()
    own = {"--data", "--model", "--config"}
    assert own <= listed
    assert {f"--no_{f[2:]}" for f in fields} >= listed - fields - own  # the rest: --no_<flag> of boolean fields
    for spelling in ("--out OUTPUT_DIR", "--use_peft", "--lora_r", "--lora_alpha", "--lora_dropout",
                     "--lora_target_modules", "--model_name_or_path"):
        assert spelling in text


def test_every_field_is_parsed_and_the_yaml_file_sets_defaults(tmp_path):
    (tmp_path / "sft.yaml").write_text("data: runs/sera\nmodel: m\nlearning_rate: 0.0002\nnum_train_epochs: 2\n"
                                       "use_peft: true\nlora_r: 4\nsera_stages: [T2]\nenv:\n  SERA_TEST_VAR: set\n")
    script, config = parse_train_args(["--config", str(tmp_path / "sft.yaml"), "--out", str(tmp_path / "o"),
                                       "--num_train_epochs", "1", "--lora-alpha", "8", "--use_cpu", "true"])
    assert script == SeraTrainArguments(data="runs/sera", model="m")
    assert config.output_dir == str(tmp_path / "o")  # --out is --output_dir
    assert (config.learning_rate, config.num_train_epochs, config.use_peft) == (2e-4, 1.0, True)  # the command line wins
    assert (config.lora_r, config.lora_alpha, config.sera_stages) == (4, 8, ["T2"])
    assert config.save_strategy == "no" and config.logging_first_step  # the CLI's own defaults
    import os

    assert os.environ.pop("SERA_TEST_VAR") == "set"
    # defaults are SERA's, not TRL's
    _, plain = parse_train_args(["--data", "d", "--model", "m", "--output_dir", str(tmp_path / "p"), "--use_cpu",
                                 "true"])
    assert (plain.learning_rate, plain.max_length, plain.assistant_only_loss) == (1e-5, 32768, True)


def test_bad_values_name_the_option():
    with pytest.raises(InputError, match=r"^train: --lora_dropout: expected a number in \[0, 1\), got 1.5$"):
        parse_train_args(["--data", "d", "--model", "m", "--out", "o", "--lora_dropout", "1.5", "--use_cpu", "true"])
    with pytest.raises(InputError, match="train: --out: expected an output folder"):
        parse_train_args(["--data", "d", "--model", "m", "--use_cpu", "true"])


def test_a_failed_instance_is_logged_with_its_id_and_reason(tmp_path, make_git_repo, caplog):
    from icml26.agents.sera import generate, plan_instances

    class Broken:
        def chat(self, messages, tools=None, **kw):
            raise ConnectionError("teacher unreachable")

    repo = make_git_repo(tmp_path / "repo", {"pkg/m.py": "def f(x):\n    y = x + 1\n    return y\n"})
    with caplog.at_level(logging.INFO, logger="icml26"):
        summary = generate(repo, Broken(), tmp_path / "out", limit=1, progress=False)
    assert summary.status_counts == {"error": 1}
    (inst,) = plan_instances(repo, limit=1)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name.startswith("icml26.agents.sera")]
    assert len(warnings) == 1 and inst.id in warnings[0].getMessage()
    assert "teacher unreachable" in warnings[0].getMessage()
    assert any(r.levelno == logging.INFO and "1 instances planned" in r.getMessage() for r in caplog.records)
    assert not logging.getLogger("icml26").handlers  # the library never configures handlers
