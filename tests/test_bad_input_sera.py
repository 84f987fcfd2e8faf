"""Bad input to SERA's public API and to ``icml26 sera generate|export|train``: each probe is one wrong value in an
otherwise valid call, and must be refused clearly (see ``tests/probes.py``), before any work: no instance runs,
no model loads, nothing trains (the ``forbid`` lists).

Resources the valid parts of the calls need (a git repository, a finished generate run, a tiny model) are made
once, on first use, in a scratch folder.
"""

from __future__ import annotations

import atexit
import functools
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from probes import Probe, check, cli, ids

pytest.importorskip("trl")

NO_INSTANCE = ["icml26.agents.sera.pipeline.plan_instances", "icml26.agents.sera.pipeline._run_pool"]
NO_MODEL = ["transformers.AutoModelForCausalLM.from_pretrained", "icml26.training.sera.sft._train"]  # no model, no training


@functools.cache
def _scratch() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="sera-probes-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _new(name: str) -> Path:
    """A fresh path in the scratch folder (not created)."""
    return Path(tempfile.mkdtemp(dir=_scratch(), prefix=name)) / "x"


@functools.cache
def repo() -> str:
    from icml26.agents.sera import make_git_repo_from_package

    return str(make_git_repo_from_package("jmespath", _scratch() / "repo"))


@functools.cache
def run_dir() -> str:
    """A finished ``generate`` run (scripted teacher, one instance)."""
    from icml26.agents.sera import ScriptedTeacher, generate

    out = _scratch() / "run"
    generate(repo(), ScriptedTeacher(seed=1, q=1.0), out, limit=1, progress=False)
    return str(out)


@functools.cache
def model() -> str:
    from icml26.tiny import build_tiny_model

    return str(build_tiny_model("qwen3", max_position_embeddings=8192))


@functools.cache
def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(model())


def a_file(name: str, text: str) -> str:
    path = _scratch() / "files" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def plain_folder() -> str:
    folder = _scratch() / "plain"
    folder.mkdir(exist_ok=True)
    (folder / "m.py").write_text("def f():\n    return 1\n")
    return str(folder)


def under_a_file() -> str:
    """A path whose parent is a file: it can never be created."""
    return str(Path(a_file("blocker", "")) / "out")


def rows() -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir()) / "trajectories.jsonl").read_text().splitlines()]


def row_with(mutate) -> list[dict]:
    row = json.loads(json.dumps(rows()[0]))
    mutate(row)
    return [row]


def _set_role(row, role):
    row["messages"][1]["role"] = role


def _bad_arguments(row):
    call = next(m for m in row["messages"] if m.get("tool_calls"))["tool_calls"][0]
    call["function"]["arguments"] = "{not json"


def no_template():
    import copy

    tok = copy.deepcopy(tokenizer())
    tok.chat_template = None
    return tok


# ------------------------------------------------------------------------------------------------ API
def _generate(**kw):
    from icml26.agents.sera import generate

    args = {"repo": repo(), "backend": "scripted", "out_dir": _new("gen"), "limit": 1, "progress": False}
    args.update(kw)
    return generate(args.pop("repo"), args.pop("backend"), args.pop("out_dir"), **args)


def _export(**kw):
    from icml26.agents.sera import export

    return export(kw.pop("out_dir", run_dir()), **kw)


def _config(**kw):
    from icml26.training.sera import SeraSFTConfig

    return SeraSFTConfig(output_dir=str(_new("cfg")), use_cpu=True, **kw)


def _train(**kw):
    from icml26.training.sera import train_sera

    args = {"data": run_dir(), "model": model(), "output_dir": str(_new("sft")), "max_steps": 1, "use_cpu": True,
            "max_length": 8192}
    args.update(kw)
    return train_sera(args.pop("data"), args.pop("model"), args.pop("output_dir"), **args)


def _api(name):
    import importlib

    module, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module), attr)


API = [
    Probe("generate-threshold-above-1", lambda: _generate(threshold=1.5), "threshold"),
    Probe("generate-workers-zero", lambda: _generate(workers=0), "workers"),
    Probe("generate-limit-negative", lambda: _generate(limit=-3), "limit"),
    Probe("generate-max-steps-zero", lambda: _generate(max_steps=0), "max_steps"),
    Probe("generate-repo-missing", lambda: _generate(repo=str(_new("norepo"))), "repo"),
    Probe("generate-repo-not-under-git", lambda: _generate(repo=plain_folder()), "repo"),
    Probe("generate-backend-missing-model-path", lambda: _generate(backend="./no/such/model"), "backend"),
    Probe("generate-backend-wrong-type", lambda: _generate(backend=3), "backend"),
    Probe("generate-demonstrations-missing", lambda: _generate(demonstrations=str(_new("demo"))), "demonstrations"),
    Probe("generate-demonstrations-empty-list", lambda: _generate(demonstrations=[]), "demonstrations"),
    Probe("generate-demonstrations-malformed-json",
          lambda: _generate(demonstrations=a_file("bad.json", '["one issue", ')), "demonstrations"),
    Probe("generate-out-dir-under-a-file", lambda: _generate(out_dir=under_a_file()), "out_dir"),
    Probe("generate-teacher-q-above-1", lambda: _generate(teacher_q=1.5), "teacher_q"),
    Probe("generate-memory-limit-too-small", lambda: _generate(sandbox_kwargs={"memory_limit_mb": 1}),
          "memory_limit_mb"),
    Probe("generate-review-submit-not-bool", lambda: _generate(review_submit="no"), "review_submit"),
    Probe("generate-tokenizer-missing", lambda: _generate(tokenizer=str(_new("tok"))), "tokenizer"),
    Probe("export-out-dir-without-ledger", lambda: _export(out_dir=str(_scratch())), "out_dir"),
    Probe("export-threshold-nan", lambda: _export(threshold=float("nan")), "threshold"),
    Probe("export-filters-a-dict", lambda: _export(filters={"max_changed_lines": 40}), "filters"),
    Probe("FilterConfig-max-changed-lines-negative", lambda: _api("icml26.agents.sera.FilterConfig")(
        max_changed_lines=-1), "max_changed_lines"),
    Probe("FilterConfig-max-avg-tool-tokens-nan", lambda: _api("icml26.agents.sera.FilterConfig")(
        max_avg_tool_tokens=float("nan")), "max_avg_tool_tokens"),
    Probe("FilterConfig-max-tokens-zero", lambda: _api("icml26.agents.sera.FilterConfig")(max_tokens=0),
          "max_tokens"),
    Probe("FilterConfig-enforce-submit-a-string", lambda: _api("icml26.agents.sera.FilterConfig")(
        enforce_submit="yes"), "enforce_submit"),
    Probe("ScriptedTeacher-q-above-1", lambda: _api("icml26.agents.sera.ScriptedTeacher")(q=1.5), "q"),
    Probe("ScriptedTeacher-q-range-reversed", lambda: _api("icml26.agents.sera.ScriptedTeacher")(q=(0.9, 0.1)), "q"),
    Probe("patch_recall-p1-bytes", lambda: _api("icml26.agents.sera.patch_recall")(b"+x\n", "+x\n"), "p1"),
    Probe("patch_recall-p2-int", lambda: _api("icml26.agents.sera.patch_recall")("+x\n", 3), "p2"),
    Probe("verify-threshold-negative", lambda: _api("icml26.agents.sera.verify")("+x\n", "+x\n", -0.1), "threshold"),
    Probe("filter_trajectory-messages-a-dict", lambda: _api("icml26.agents.sera.filter_trajectory")(
        {"role": "user"}, "", True), "messages"),
    Probe("make_git_repo_from_package-not-installed", lambda: _api("icml26.agents.sera.make_git_repo_from_package")(
        "no_such_package_xyz", _new("pkg")), "name"),
    Probe("make_git_repo_from_package-dest-not-empty", lambda: _api("icml26.agents.sera.make_git_repo_from_package")(
        "jmespath", _scratch()), "dest"),
    Probe("plan_instances-limit-zero", lambda: _api("icml26.agents.sera.plan_instances")(repo(), limit=0), "limit"),
    Probe("find_seed_functions-max-folder-depth-negative", lambda: _api("icml26.agents.sera.find_seed_functions")(
        repo(), max_folder_depth=-1), "max_folder_depth"),
    Probe("load_demonstrations-unknown-suffix", lambda: _api("icml26.agents.sera.load_demonstrations")(
        a_file("issues.csv", "a,b\n")), "source"),
    Probe("load_trajectories-missing", lambda: _api("icml26.training.sera.load_trajectories")(str(_new("traj"))),
          "source"),
    Probe("load_trajectories-malformed-line", lambda: _api("icml26.training.sera.load_trajectories")(
        a_file("t.jsonl", '{"messages": []}\n{"messages": [\n')), "source"),
    Probe("load_trajectories-a-number", lambda: _api("icml26.training.sera.load_trajectories")(42), "source"),
    Probe("trajectories_to_dataset-no-assistant-turn", lambda: _api("icml26.training.sera.trajectories_to_dataset")(
        row_with(lambda r: r.update(messages=r["messages"][:2]))), "assistant"),
    Probe("trajectories_to_dataset-unknown-role", lambda: _api("icml26.training.sera.trajectories_to_dataset")(
        row_with(lambda r: _set_role(r, "human"))), "role"),
    Probe("tokenize_trajectory-arguments-not-json", lambda: _api("icml26.training.sera.tokenize_trajectory")(
        tokenizer(), row_with(_bad_arguments)[0]["messages"]), "arguments"),
    Probe("tokenize_trajectory-tokenizer-without-template", lambda: _api("icml26.training.sera.tokenize_trajectory")(
        no_template(), rows()[0]["messages"]), "tokenizer"),
    Probe("tokenize_trajectory-max-length-zero", lambda: _api("icml26.training.sera.tokenize_trajectory")(
        tokenizer(), rows()[0]["messages"], max_length=0), "max_length"),
    Probe("assistant_token_loss-batch-size-zero", lambda: _api("icml26.training.sera.assistant_token_loss")(
        None, tokenizer(), rows(), batch_size=0), "batch_size"),
    Probe("SeraSFTConfig-learning-rate-negative", lambda: _config(learning_rate=-1e-5), "learning_rate"),
    Probe("SeraSFTConfig-max-length-zero", lambda: _config(max_length=0), "max_length"),
    Probe("SeraSFTConfig-overlong-unknown", lambda: _config(overlong="cut"), "overlong"),
    Probe("SeraSFTConfig-lora-dropout-one", lambda: _config(use_peft=True, lora_dropout=1.0), "lora_dropout"),
    Probe("SeraSFTConfig-sera-stages-unknown", lambda: _config(sera_stages=["T3"]), "sera_stages"),
    Probe("SeraSFTConfig-scheduler-unknown", lambda: _config(lr_scheduler_type="cosine_warm"), "lr_scheduler_type"),
    Probe("SeraSFTConfig-gradient-accumulation-zero", lambda: _config(gradient_accumulation_steps=0),
          "gradient_accumulation_steps"),
    Probe("train_sera-data-missing", lambda: _train(data=str(_new("nodata"))), "data", forbid=NO_MODEL),
    Probe("train_sera-model-missing-folder", lambda: _train(model="./no/such/model"), "model", forbid=NO_MODEL),
    Probe("train_sera-max-length-leaves-no-assistant-token", lambda: _train(max_length=64), "max_length",
          forbid=NO_MODEL),
    Probe("train_sera-config-a-dict", lambda: _api("icml26.training.sera.train_sera")(
        run_dir(), model(), str(_new("sft")), config={"max_steps": 1}), "config", forbid=NO_MODEL),
    Probe("heldout_prompts-n-zero", lambda: _api("icml26.eval.tasks.sera.heldout_prompts")(rows(), n=0), "n"),
    Probe("tool_call_validity-no-prompts", lambda: _api("icml26.eval.tasks.sera.tool_call_validity")(
        None, tokenizer(), []), "prompts"),
]


def _wrapped(probe: Probe) -> Probe:
    """An API probe whose forbidden names really stay uncalled (the harness patches them for CLI probes only)."""
    if not probe.forbid:
        return probe
    from probes import _forbidden

    def call():
        import contextlib

        with contextlib.ExitStack() as stack:
            for name in probe.forbid:
                stack.enter_context(_forbidden(name))
            return probe.call()

    return Probe(probe.id, call, probe.argument, forbid=probe.forbid)


API = [_wrapped(p) for p in API]


# ------------------------------------------------------------------------------------------------ CLI
def _gen_argv(*extra):
    return ["sera", "generate", "--repo", repo(), "--backend", "scripted", "--out", str(_new("cli")), "--limit", "1",
            "--no-progress", *extra]


def _gen(id, option, *extra, **swap):
    """``icml26 sera generate`` with ``extra`` words added and the values of ``swap``'s options replaced."""
    def call():
        argv = _gen_argv()
        for flag, value in swap.items():
            argv[argv.index(f"--{flag}") + 1] = value()
        return cli(id, argv + list(extra), option, forbid=NO_INSTANCE).call()

    return Probe(f"cli-generate-{id}", call, option, kind="cli")


def _train_argv(**swap):
    argv = {"--data": run_dir(), "--model": model(), "--out": str(_new("cli-sft")), "--max_steps": "1",
            "--use_cpu": "true"}
    argv.update({k: v() if callable(v) else v for k, v in swap.items()})
    return ["sera", "train", *[w for item in argv.items() for w in item if w is not None]]


def _train_cli(id, option, extra=(), **swap):
    """``icml26 sera train`` with ``extra`` words (or a function making them) added, ``swap``'s options replaced."""
    def call():
        argv = _train_argv(**swap) + list(extra() if callable(extra) else extra)
        return cli(id, argv, option, forbid=NO_MODEL).call()

    return Probe(f"cli-train-{id}", call, option, kind="cli")


def _drop(flag):
    """Remove ``flag`` and its value from a train command line (a missing required option)."""
    def call():
        argv = _train_argv()
        i = argv.index(flag)
        return cli(f"missing{flag}", argv[:i] + argv[i + 2:], flag, forbid=NO_MODEL).call()

    return Probe(f"cli-train-missing{flag.replace('-', '_')}", call, flag, kind="cli")


CLI = [
    _gen("repo-missing", "--repo", repo=lambda: str(_new("norepo"))),
    _gen("repo-not-under-git", "--repo", repo=plain_folder),
    _gen("threshold-above-1", "--threshold", "--threshold", "1.5"),
    _gen("workers-zero", "--workers", "--workers", "0"),
    _gen("demonstrations-missing", "--demonstrations", "--demonstrations", "/no/such/issues"),
    Probe("cli-generate-demonstrations-malformed", lambda: cli("x", _gen_argv(
        "--demonstrations", a_file("bad.jsonl", '{"body": "ok"}\n{"body": \n')), "--demonstrations",
        forbid=NO_INSTANCE).call(), "--demonstrations", kind="cli"),
    _gen("out-under-a-file", "--out", out=under_a_file),
    _gen("teacher-q-above-1", "--teacher-q", "--teacher-q", "2"),
    _gen("tokenizer-missing", "--tokenizer", "--tokenizer", "/no/such/tokenizer"),
    _gen("memory-too-small", "memory_limit_mb", "--memory-mb", "1"),
    _gen("max-steps-negative", "--max-steps", "--max-steps", "-5"),
    Probe("cli-export-out-without-ledger", lambda: cli("x", ["sera", "export", "--out", str(_scratch())], "--out",
                                                         forbid=NO_INSTANCE).call(), "--out", kind="cli"),
    Probe("cli-export-threshold-nan", lambda: cli("x", ["sera", "export", "--out", run_dir(), "--threshold", "nan"],
                                                    "--threshold").call(), "--threshold", kind="cli"),
    Probe("cli-export-max-changed-lines-negative", lambda: cli(
        "x", ["sera", "export", "--out", run_dir(), "--max-changed-lines", "-1"], "--max-changed-lines").call(),
        "--max-changed-lines", kind="cli"),
    _train_cli("data-missing", "--data", **{"--data": lambda: str(_new("nodata"))}),
    _train_cli("data-malformed-jsonl", "--data", **{"--data": lambda: a_file("bad-traj.jsonl", '{"messages": [}\n')}),
    _train_cli("data-folder-without-trajectories", "--data", **{"--data": lambda: str(_scratch() / "files")}),
    _train_cli("data-row-without-assistant", "--data", **{"--data": lambda: a_file(
        "no-assistant.jsonl", json.dumps(row_with(lambda r: r.update(messages=r["messages"][:2]))[0]) + "\n")}),
    _train_cli("model-missing-folder", "--model", **{"--model": "./no/such/model"}),
    _train_cli("out-under-a-file", "--out", **{"--out": under_a_file}),
    _train_cli("learning-rate-negative", "--learning_rate", ["--learning_rate", "-1"]),
    _train_cli("learning-rate-not-a-number", "--learning_rate", ["--learning_rate", "fast"]),
    _train_cli("max-length-leaves-no-assistant-token", "--max_length", ["--max_length", "64"]),
    _train_cli("max-steps-zero", "--max_steps", **{"--max_steps": "0"}),
    _train_cli("lora-dropout-above-1", "--lora_dropout", ["--use_peft", "--lora_dropout", "1.5"]),
    _train_cli("overlong-unknown", "--overlong", ["--overlong", "cut"]),
    _train_cli("sera-stages-unknown", "--sera_stages", ["--sera_stages", "T3"]),
    _train_cli("unknown-option", "--epochs", ["--epochs", "2"]),
    _train_cli("config-missing", "--config", ["--config", "/no/such/sft.yaml"]),
    _train_cli("config-malformed", "--config", lambda: ["--config", a_file("bad.yaml", "learning_rate: [1e-5\n")]),
    _train_cli("config-unknown-key", "--config", lambda: ["--config", a_file("typo.yaml", "learning_rat: 0.001\n")]),
    _drop("--data"),
]


PROBES = API + CLI


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)


def test_a_malformed_demonstrations_file_is_named_with_its_option(capsys):
    """The option alone is not enough: the message names the file and the line that does not parse."""
    from icml26.cli import main

    path = a_file("broken.jsonl", '{"body": "ok"}\n{"body": \n')
    code = main(_gen_argv("--demonstrations", path))
    err = capsys.readouterr().err
    assert code == 2 and "--demonstrations" in err and path in err and "line 2" in err
