"""``icml26 sera generate|export|train``: SERA's soft-verified generation and SFT on its trajectories.

Light at import time (argparse only); the pipeline and the trainer are imported inside :func:`run`.
``generate`` and ``export`` are argparse sub-commands; ``train`` hands the words after it to TRL's
``TrlParser`` (:func:`parse_train_args`), so every :class:`~icml26.training.sera.SeraSFTConfig` field is an
option and ``--config sft.yaml`` works as in TRL's scripts.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

from icml26.agents.backends import add_backend_arguments
from icml26.argtypes import number, positive_float, positive_int
from icml26.errors import described

_threshold = number(float, "a threshold in [0, 1] (1 = hard verification)", lambda v: 0 <= v <= 1)


def _q(text: str):
    parts = text.split(",")
    try:
        values = [float(p) for p in parts]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a probability or LOW,HIGH, got {text!r}") from None
    if len(values) not in (1, 2) or not all(0 <= v <= 1 for v in values) or values != sorted(values):
        raise argparse.ArgumentTypeError(f"expected a probability or LOW,HIGH with 0 <= LOW <= HIGH <= 1, got {text!r}")
    return values[0] if len(values) == 1 else tuple(values)


def _add_filter_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threshold", type=_threshold, default=0.5,
                   help="soft-verification threshold on patch recall: 1 = hard, 0 = none (default 0.5)")
    p.add_argument("--max-changed-lines", type=positive_int, default=40, help="drop longer patches (40)")
    p.add_argument("--max-avg-tool-tokens", type=positive_float, default=600,
                   help="drop trajectories whose tool responses average more tokens (600)")
    p.add_argument("--max-trajectory-tokens", type=positive_int, default=32768,
                   help="token budget of a trajectory (32768)")
    p.add_argument("--no-truncate", dest="truncate", action="store_false",
                   help="drop over-budget trajectories instead of truncating them at a message boundary")
    p.add_argument("--no-enforce-submit", dest="enforce_submit", action="store_false",
                   help="also keep trajectories that did not submit")
    p.add_argument("--tokenizer", metavar="PATH", help="tokenizer for token counts (default: whitespace words)")


def _parser_class(base: type) -> type:
    """``base`` (the parser class of ``icml26``) whose instances made with ``passthrough=True`` keep their words
    unparsed in ``args.train_argv``: argparse's own ``REMAINDER`` refuses a first word that looks like an option."""

    class SeraParser(base):
        def __init__(self, *args, passthrough: bool = False, **kwargs):
            super().__init__(*args, **kwargs)
            self.passthrough = passthrough

        def parse_known_args(self, args=None, namespace=None):
            if not self.passthrough:
                return super().parse_known_args(args, namespace)
            namespace = argparse.Namespace() if namespace is None else namespace
            namespace.train_argv = list(sys.argv[1:] if args is None else args)
            return namespace, []

        def _parse_known_args2(self, args, namespace, *rest, **kwargs):  # what newer Pythons may call instead
            if not self.passthrough:
                return super()._parse_known_args2(args, namespace, *rest, **kwargs)
            return self.parse_known_args(args, namespace)

    return SeraParser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sera_command", metavar="SUBCOMMAND", required=True,
                                parser_class=_parser_class(type(parser)))

    p = sub.add_parser("generate", help="generate soft-verified trajectories from a git repository (resumable)")
    p.add_argument("--repo", required=True, help="git repository of Python code")
    add_backend_arguments(p, scripted="the offline scripted teacher", temperature=0.6)
    p.add_argument("--out", required=True, help="output folder: ledger.jsonl, dataset/, trajectories.jsonl (for TRL), "
                                                "trajectories.openai.jsonl, summary.json; rerunning resumes")
    p.add_argument("--workers", type=positive_int, default=1, help="instances in parallel (default 1)")
    p.add_argument("--limit", type=positive_int, help="number of instances (default: one per seed function)")
    p.add_argument("--seed", type=int, default=0, help="seed of the instance plan and the scripted teacher (0)")
    p.add_argument("--insts-per-fn", type=positive_int, default=1, help="instances per seed function (1)")
    p.add_argument("--max-steps", type=positive_int, default=115, help="agent steps per rollout (115)")
    p.add_argument("--demonstrations", metavar="PATH",
                   help="style demonstrations: a folder of .txt/.md issues or a .json/.jsonl file (default: bundled)")
    p.add_argument("--no-judge", dest="judge", action="store_false", help="skip the patch-validity judge call")
    p.add_argument("--no-dedupe", dest="dedupe", action="store_false", help="keep duplicate first-rollout patches")
    p.add_argument("--no-review-submit", dest="review_submit", action="store_false",
                   help="finish at the first submit (default: SWE-agent's review step, submit twice)")
    p.add_argument("--exec-timeout", type=positive_float, default=300.0, help="seconds per command (300)")
    p.add_argument("--memory-mb", type=positive_int, default=2048, help="memory limit per command in MB (2048)")
    p.add_argument("--allow-unisolated", action="store_true",
                   help="run commands without network/filesystem isolation where namespaces are unavailable")
    p.add_argument("--teacher-q", type=_q, default=0.8,
                   help="scripted teacher only: chance that rollout 2 reproduces each line, or LOW,HIGH (0.8)")
    _add_filter_options(p)
    p.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")

    p = sub.add_parser("export", help="rebuild dataset/, trajectories.jsonl, trajectories.openai.jsonl and "
                                      "summary.json from a ledger (another threshold or filter, no generation)")
    p.add_argument("--out", required=True, help="folder of a generate run")
    _add_filter_options(p)

    # `train` parses its own command line with TRL's parser (every SeraSFTConfig field is an option), so argparse
    # here passes the words after `train` through untouched (see parse_train_args).
    sub.add_parser("train", passthrough=True, add_help=False,
                   help="SFT a model on generated trajectories (assistant-only loss); every SeraSFTConfig field is "
                        "an option, --config sft.yaml sets them as in TRL's scripts")


def _filters(args):
    from .verification import FilterConfig

    return FilterConfig(max_changed_lines=args.max_changed_lines, max_avg_tool_tokens=args.max_avg_tool_tokens,
                        enforce_submit=args.enforce_submit, max_tokens=args.max_trajectory_tokens,
                        truncate=args.truncate)


def _print_summary(summary) -> None:
    print(summary.describe())
    for key, row in summary.by_threshold.items():
        per = f"{row['tokens_per_kept']:.0f}" if row["tokens_per_kept"] is not None else "n/a"
        print(f"  threshold {key:>4}: {row['T2_verified']} T2 verified, {row['kept']} kept in total, "
              f"{per} tokens per kept trajectory")
    out = summary.out_dir
    print(f"dataset: {out}/dataset  for TRL: {out}/trajectories.jsonl  OpenAI wire format: "
          f"{out}/trajectories.openai.jsonl  summary: {out}/summary.json")


#: The library's argument names -> the options of ``icml26 sera generate|export`` that carry them. The sandbox
#: limits keep their library names (``memory_limit_mb``): the sandbox's tests read them so.
FLAGS = {"repo": "--repo", "out_dir": "--out", "demonstrations": "--demonstrations", "threshold": "--threshold",
         "tokenizer": "--tokenizer", "workers": "--workers", "limit": "--limit", "seed": "--seed",
         "insts_per_fn": "--insts-per-fn", "max_steps": "--max-steps",
         "time_limit": "--exec-timeout", "teacher_q": "--teacher-q", "backend": "--backend", "model": "--model",
         "max_changed_lines": "--max-changed-lines", "max_avg_tool_tokens": "--max-avg-tool-tokens",
         "max_tokens": "--max-trajectory-tokens"}


def _as_flag(exc, command: str):
    """``exc`` (an InputError of the library) naming the command-line option of its argument."""
    from icml26.errors import InputError

    flag = FLAGS.get(exc.argument or "")
    if flag is None or exc.expected is None:
        return exc
    return InputError(command, flag, exc.expected, exc.got)


def run(args: argparse.Namespace) -> int:
    from icml26.errors import InputError

    if args.sera_command == "train":
        from icml26.training.distributed import finish_processes, is_main_process

        summary = main_train(args.train_argv)
        if is_main_process():  # one report under accelerate launch / torchrun
            print(f"trained model written to {summary['output_dir']}")
            if summary.get("final_loss") is not None:
                print(f"final loss: {summary['final_loss']}")
        finish_processes()
        return 0

    from .pipeline import export, generate

    try:
        if args.sera_command == "export":
            summary = export(args.out, threshold=args.threshold, filters=_filters(args), tokenizer=args.tokenizer)
            _print_summary(summary)
            return 0
        from icml26.agents.backends import backend_from_args, sampling_from_args

        if (args.base_url or args.backend or "").startswith(("http://", "https://")) and not args.model:
            raise InputError("generate", "--model", "the name the server serves, with a server URL", None)
        backend = backend_from_args(args, command="generate", scripted=lambda: "scripted")
        sampling = sampling_from_args(args)
        summary = generate(args.repo, backend, args.out, threshold=args.threshold, workers=args.workers,
                           limit=args.limit, seed=args.seed, model=args.model, insts_per_fn=args.insts_per_fn,
                           max_steps=args.max_steps, sampling=sampling, judge=args.judge, dedupe=args.dedupe,
                           demonstrations=args.demonstrations, filters=_filters(args), tokenizer=args.tokenizer,
                           sandbox_kwargs={"time_limit": args.exec_timeout, "memory_limit_mb": args.memory_mb,
                                           "allow_unisolated": args.allow_unisolated},
                           teacher_q=args.teacher_q, progress=args.progress, review_submit=args.review_submit)
    except InputError as exc:
        raise _as_flag(exc, args.sera_command) from None
    except RuntimeError as exc:
        print(f"icml26 sera {args.sera_command}: error: {exc}", file=sys.stderr)
        return 1
    _print_summary(summary)
    if summary.planned and summary.status_counts.get("error", 0) == summary.completed:
        print("icml26 sera generate: every instance failed; see the 'error' field in ledger.jsonl", file=sys.stderr)
        return 1
    return 0


# ----------------------------------------------------------------------------------------- train

@dataclass
class SeraTrainArguments:
    """``icml26 sera train``'s own options; every other option is a field of
    :class:`~icml26.training.sera.SeraSFTConfig` (``--out`` is its ``output_dir``)."""

    data: str = field(metadata={"help": "A generate output folder (trajectories.jsonl or dataset/), a trajectories "
                                        ".jsonl file or a saved dataset folder."})
    model: str = field(metadata={"help": "The model to fine-tune: a folder or a hub id (TRL's model_name_or_path).",
                                 "aliases": ["--model_name_or_path", "--model-name-or-path"]})


def train_parser(prog: str = "icml26 sera train"):
    """TRL's ``TrlParser`` over :class:`SeraTrainArguments` and ``SeraSFTConfig``, reporting errors in one line."""
    from trl import TrlParser

    from icml26.training.sera import SeraSFTConfig

    class TrainParser(TrlParser):  # options only as spelt (allow_abbrev=False below), as every icml26 command
        def error(self, message: str):  # the full usage line lists ~150 options: name the problem only
            self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    parser = TrainParser((SeraTrainArguments, SeraSFTConfig), prog=prog,
                         usage=f"{prog} --data PATH --model MODEL --out DIR [--config FILE.yaml] [OPTION ...]",
                         allow_abbrev=False,
                         description="Fine-tune a model on SERA trajectories with SERA's SFT recipe (TRL's SFTTrainer, "
                                     "loss on assistant turns only). Every option below is a SeraSFTConfig field "
                                     "(TRL's SFTConfig with SERA's defaults) or --data / --model; --config FILE.yaml "
                                     "sets any of them (command-line options win), as in TRL's scripts.")
    parser.add_argument("--config", metavar="FILE.yaml", help="a YAML mapping of option names to values (and an "
                                                              "optional `env` mapping of environment variables)")
    parser.set_defaults(save_strategy="no", logging_first_step=True)  # the CLI saves the final model itself
    return parser


def parse_train_args(argv: Sequence[str], prog: str = "icml26 sera train"):
    """``(SeraTrainArguments, SeraSFTConfig)`` from ``icml26 sera train``'s command line (``--config`` as TRL's).

    Exits 2 with one line for an unknown or malformed option (argparse); raises
    :class:`~icml26.errors.InputError` naming the option for a bad value or a bad ``--config`` file.
    """
    import dataclasses

    from icml26.errors import InputError
    from icml26.training.sera import SeraSFTConfig

    parser = train_parser(prog)
    argv = list(argv)
    config_path = _pop_config(argv)
    if config_path is not None:
        remaining = parser.set_defaults_with_config(**_read_config(config_path))
        if remaining:
            raise InputError("train", "--config", "keys that name options of icml26 sera train",
                             described(f"unknown keys {[k.removeprefix('--') for k in remaining[::2]]} in "
                                       f"{config_path!r}"))
    namespace, unknown = parser.parse_known_args(argv)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    values = vars(namespace)
    if not values.get("output_dir"):  # TrainingArguments would pick ./trainer_output
        raise InputError("train", "--out", "an output folder (--out or --output_dir)", described("none"))
    script = SeraTrainArguments(**{f.name: values[f.name] for f in dataclasses.fields(SeraTrainArguments)})
    try:
        config = SeraSFTConfig(**{f.name: values[f.name] for f in dataclasses.fields(SeraSFTConfig) if f.init})
    except InputError as exc:
        if exc.function != "SeraSFTConfig" or exc.expected is None:
            raise
        raise InputError("train", f"--{exc.argument}", exc.expected, exc.got) from None
    except ValueError as exc:  # TrainingArguments' own checks of option combinations
        raise InputError(f"train: {exc}") from None
    return script, config


def _pop_config(argv: list[str]) -> str | None:
    for i, word in enumerate(argv):
        if word == "--config":
            if i + 1 >= len(argv) or argv[i + 1].startswith("--"):
                from icml26.errors import InputError

                raise InputError("train", "--config", "a YAML file after --config", described("nothing"))
            del argv[i]
            return argv.pop(i)
        if word.startswith("--config="):
            del argv[i]
            return word.split("=", 1)[1]
    return None


def _read_config(path: str) -> dict:
    """``--config``'s mapping, its ``env`` entries applied to ``os.environ`` (as TRL's scripts do)."""
    import os

    import yaml

    from icml26.errors import InputError

    try:
        with open(path, encoding="utf-8") as handle:
            values = yaml.safe_load(handle)
    except OSError as exc:
        raise InputError("train", "--config", "a readable YAML file",
                         described(f"{path!r} ({exc.strerror or exc})")) from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError("train", "--config", "a YAML file",
                         described(f"{path!r}, which does not parse ({str(exc).splitlines()[0]})")) from None
    if not isinstance(values, dict):
        raise InputError("train", "--config", "a YAML mapping of option names to values",
                         described(f"{path!r}, holding a {type(values).__name__}"))
    env = values.pop("env", {}) or {}
    if not isinstance(env, dict):
        raise InputError("train", "--config", "an `env` mapping of environment variables",
                         described(f"a {type(env).__name__} in {path!r}"))
    for key, value in env.items():
        os.environ[str(key)] = str(value)
    return values


def main_train(args: Sequence[str]) -> dict:
    """``icml26 sera train``: ``args`` is its command line (``["--data", DIR, "--model", M, "--out", DIR, ...]``).

    Every :class:`~icml26.training.sera.SeraSFTConfig` field is an option (``--learning_rate``, ``--max_length``,
    ``--use_peft``, ...; ``--out`` is ``--output_dir``), with ``--data`` and ``--model``, and ``--config sft.yaml``
    sets any of them as in TRL's scripts (:func:`parse_train_args`). ``--out``, the data, the model's tokenizer
    and ``max_length`` are checked before the model loads (:func:`~icml26.training.sera.train_sera`), and a bad
    one is reported naming its option. Writes the model, the tokenizer and ``sera_train.json`` (counts, final
    loss, log history) into the output folder and returns that summary.

    Under ``accelerate launch`` / ``torchrun`` every process trains its share of each batch and rank 0
    alone writes the model and ``sera_train.json`` (whose ``train_loss`` is the mean over processes).
    """
    from pathlib import Path

    from icml26.errors import InputError
    from icml26.results import to_jsonable
    from icml26.training.distributed import is_main_process
    from icml26.training.sera import train_sera
    from icml26.utils import atomic_write_json

    script, config = parse_train_args(args)
    out = _writable_folder(config.output_dir)
    local = Path(script.model).expanduser()
    try:
        output = train_sera(script.data, str(local) if local.exists() else script.model, out, config=config)
    except InputError as exc:
        raise _train_option(exc) from None
    summary = output.to_dict()
    logged = [e["loss"] for e in output.log_history if "loss" in e]
    summary["final_loss"] = logged[-1] if logged else None
    summary["config"] = {k: getattr(config, k) for k in (
        "learning_rate", "lr_scheduler_type", "num_train_epochs", "max_steps", "max_length", "use_peft",
        "assistant_only_loss", "per_device_train_batch_size", "gradient_accumulation_steps", "overlong")}
    summary["config"]["lr_scheduler_type"] = str(getattr(config.lr_scheduler_type, "value", config.lr_scheduler_type))
    if is_main_process():
        atomic_write_json(out / "sera_train.json", to_jsonable(summary))
    return summary


def _train_option(exc):
    """An InputError of ``train_sera``'s checks, naming the option of ``icml26 sera train`` that carries the value."""
    from icml26.errors import InputError

    argument = exc.argument or ""
    if exc.expected is None:
        return exc
    if argument == "data" or argument.startswith("data: "):
        flag, inner = "--data", argument[len("data: "):]
    elif argument in ("model", "tokenizer"):
        flag, inner = "--model", ""
    elif argument in ("config.max_length", "max_length"):
        flag, inner = "--max_length", ""
    else:
        return exc
    return InputError("train", f"{flag}: {inner}" if inner else flag, exc.expected, exc.got)


def _writable_folder(path: str | None):
    """``--out`` as a folder that can be written (created if needed), checked before the model loads."""
    from icml26.errors import input_error
    from icml26.validation import check_output_dir

    if not path:
        raise input_error("train", "--out", "an output folder (--out or --output_dir)", described("none"))
    return check_output_dir("train", "--out", path)
