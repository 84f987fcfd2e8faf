"""``icml26 sera generate|export|train``: SERA's soft-verified generation and SFT on its trajectories.

Light at import time (argparse only); the pipeline and the trainer are imported inside :func:`run`.
"""

from __future__ import annotations

import argparse
import sys

from icml26.agents.backends import add_backend_arguments
from icml26.argtypes import number, positive_float, positive_int

_threshold = number(float, "a threshold in [0, 1] (1 = hard verification)", lambda v: 0 <= v <= 1)
_dropout = number(float, "a dropout probability in [0, 1)", lambda v: 0 <= v < 1)


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sera_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("generate", help="generate soft-verified trajectories from a git repository (resumable)")
    p.add_argument("--repo", required=True, help="git repository of Python code")
    add_backend_arguments(p, scripted="the offline scripted teacher", temperature=0.6)
    p.add_argument("--out", required=True, help="output folder: ledger.jsonl, dataset/, trajectories.jsonl, "
                                                "summary.json; rerunning resumes")
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

    p = sub.add_parser("export", help="rebuild dataset/, trajectories.jsonl and summary.json from a ledger "
                                      "(another threshold or filter, no generation)")
    p.add_argument("--out", required=True, help="folder of a generate run")
    _add_filter_options(p)

    p = sub.add_parser("train", help="SFT a model on generated trajectories (assistant-only loss)")
    p.add_argument("--data", required=True, help="a generate output folder, a trajectories .jsonl or a saved dataset")
    p.add_argument("--model", required=True, help="model folder or name to fine-tune")
    p.add_argument("--out", required=True, help="output folder for the fine-tuned model")
    p.add_argument("--epochs", type=positive_float, help="training epochs (default: the recipe's, 3)")
    p.add_argument("--lr", type=positive_float, help="learning rate (default: the recipe's, 1e-5)")
    p.add_argument("--use-peft", "--use_peft", dest="use_peft", action="store_true",
                   help="train LoRA adapters instead of all weights (TRL's ModelConfig spelling)")
    p.add_argument("--lora-r", "--lora_r", dest="lora_r", type=positive_int, help="LoRA rank (16)")
    p.add_argument("--lora-alpha", "--lora_alpha", dest="lora_alpha", type=positive_int, help="LoRA alpha (32)")
    p.add_argument("--lora-dropout", "--lora_dropout", dest="lora_dropout", type=_dropout, help="LoRA dropout (0.05)")
    p.add_argument("--lora-target-modules", "--lora_target_modules", dest="lora_target_modules", nargs="+",
                   metavar="NAME", help="modules LoRA adapts (default: every linear layer except the head)")
    p.add_argument("--max-length", type=positive_int, help="sequence length (default: the recipe's, 32768)")
    p.add_argument("--max-steps", type=positive_int, help="stop after this many optimizer steps")
    p.add_argument("--batch-size", type=positive_int, help="sequences per device per micro-batch (default: 1)")
    p.add_argument("--gradient-accumulation-steps", type=positive_int,
                   help="micro-batches per optimizer step (default: the recipe's, 8); the global batch is "
                        "batch size x this x the number of processes")


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
    print(f"dataset: {out}/dataset  jsonl: {out}/trajectories.jsonl  summary: {out}/summary.json")


def run(args: argparse.Namespace) -> int:
    from icml26.errors import InputError

    if args.sera_command == "train":
        from icml26.training.sera import main_train

        try:
            summary = main_train(args)
        except (FileNotFoundError, ValueError) as exc:
            raise InputError(str(exc)) from None
        from icml26.training.distributed import is_main_process

        if is_main_process():  # one report under accelerate launch / torchrun
            print(f"trained model written to {args.out}")
            if isinstance(summary, dict) and summary.get("final_loss") is not None:
                print(f"final loss: {summary['final_loss']}")
        return 0

    from .pipeline import RepoError, export, generate

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
    except (RepoError, FileNotFoundError, ValueError) as exc:
        raise InputError(str(exc)) from None
    except RuntimeError as exc:
        print(f"icml26 sera {args.sera_command}: error: {exc}", file=sys.stderr)
        return 1
    _print_summary(summary)
    if summary.planned and summary.status_counts.get("error", 0) == summary.completed:
        print("icml26 sera generate: every instance failed; see the 'error' field in ledger.jsonl", file=sys.stderr)
        return 1
    return 0
