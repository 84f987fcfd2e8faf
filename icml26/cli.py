"""The ``icml26`` command line (also ``python -m icml26``).

``list`` and argument parsing import nothing heavy: torch is imported only by what runs.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import shlex
import socket
import sys
from collections.abc import Sequence
from pathlib import Path

from . import __version__
from .argtypes import positive_int
from .errors import InputError, described


class _Parser(argparse.ArgumentParser):
    """argparse that reports a bad command line in one line (no usage block) with exit code 2, and takes options
    only as spelt: argparse's abbreviations would read ``--seed 3`` as ``--seeds 3`` (three seeds, not seed 3)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _device(text: str) -> str:
    base = text.split(":", 1)[0]
    if base not in ("auto", "cpu", "cuda", "mps", "xpu") or (":" in text and not text.split(":", 1)[1].isdigit()):
        raise argparse.ArgumentTypeError(f"expected auto, cpu, cuda or cuda:N, got {text!r}")
    return text


def _add_run_options(p: argparse.ArgumentParser, kind: str) -> None:
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", dest="mode", action="store_const", const="quick",
                      help="small settings, about a minute each on 2 CPU cores (default)")
    mode.add_argument("--full", dest="mode", action="store_const", const="full",
                      help="settings closer to the paper (much longer)")
    p.set_defaults(mode="quick")
    p.add_argument("--seeds", type=positive_int, metavar="N",
                   help="run seeds 0..N-1 (default: 1 in quick mode, 3 in full mode)")
    p.add_argument("--out", metavar="DIR",
                   help=f"run folder (default: runs/{'' if kind == 'experiment' else 'bench-'}<timestamp>/)")
    p.add_argument("--device", type=_device, default="auto", help="auto (default), cpu, cuda or cuda:N")
    p.add_argument("--data", metavar="PATH",
                   help="a data file or folder for the ones that read one (tfmixer: PhysioNet 2012's set-a.tar.gz; "
                        "default: ICML26_PHYSIONET, else the repository's ../shared/data)")
    p.add_argument("--strict", action="store_true", help="also exit non-zero when a claim does not hold")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")


# Per-method command groups (``icml26 sera ...``, ``icml26 optminer ...``). Each module must stay light
# at import time (argparse only; torch and friends are imported inside ``run``), because building the
# parser imports it, and ``icml26 list`` must not pay for torch. A module defines
# ``add_arguments(parser)`` (it adds its own sub-commands) and ``run(args) -> int``.
METHOD_COMMANDS = {
    "sera": ("icml26.agents.sera.cli", "SERA: generate soft-verified agent trajectories from a repository, SFT on them"),
    "optminer": ("icml26.agents.optminer.cli", "Opt-Miner: synthesise optimisation problems, evaluate chat backends"),
}


def _method_module(name: str):
    return importlib.import_module(METHOD_COMMANDS[name][0])


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="icml26", description="Methods of ICML 2026 papers: reproduce, benchmark, inspect.")
    parser.add_argument("--version", action="version", version=f"icml26 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    p = sub.add_parser("list", help="list papers, experiments and benchmarks with their status")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    p = sub.add_parser("reproduce", help="run reproduction experiments and write a report")
    p.add_argument("keys", nargs="*", metavar="KEY", help="experiment keys (default: every registered one)")
    _add_run_options(p, "experiment")

    p = sub.add_parser("bench", help="run benchmarks (JSON + PNG results)")
    p.add_argument("keys", nargs="*", metavar="NAME", help="benchmark names (default: every registered one)")
    _add_run_options(p, "benchmark")

    p = sub.add_parser("status", help="what a run folder holds, and whether its run is still alive")
    p.add_argument("run_dir", metavar="DIR", help="a run folder (holding results.json)")
    p.add_argument("--json", action="store_true", help="print JSON")

    p = sub.add_parser("report", help="docs results pages (K.json, K.md, K/*.png) from a run folder",
                       description="Write DIR/K.json (what the page shows), DIR/K.md (rendered from K.json alone) and "
                                   "DIR/K/<figure>.png for each experiment of a run folder; or, with --regenerate, "
                                   "re-render every K.md of a folder from its K.json.")
    p.add_argument("run_dir", metavar="RUN_DIR", nargs="?", help="a run folder of icml26 reproduce (results.json)")
    p.add_argument("--docs", metavar="DIR", help="where the pages go (e.g. docs/results)")
    p.add_argument("--key", dest="keys", metavar="KEY", nargs="+", action="extend",
                   help="only these experiments of the run (default: all)")
    p.add_argument("--regenerate", metavar="DIR", help="re-render every K.md in DIR from its K.json (no run folder)")

    p = sub.add_parser("env", help="git commit, versions of every dependency, device and Triton mode")
    p.add_argument("--json", action="store_true", help="print JSON")

    for name, (_module, help_text) in METHOD_COMMANDS.items():
        if importlib.util.find_spec(_module) is None:  # the method is not built in this version
            continue
        _method_module(name).add_arguments(sub.add_parser(name, help=help_text))
    return parser


def _cmd_list(args: argparse.Namespace) -> int:
    import json

    from .papers import PAPERS, PAPERS_BY_KEY
    from .registry import entries

    experiments, benchmarks = entries("experiment"), entries("benchmark")
    rows = []
    for paper in PAPERS:
        exp = experiments.get(paper.key)
        rows.append({"kind": "experiment", "key": paper.key,
                     "title": exp.title if exp else paper.title, "status": paper.status,
                     "registered": exp is not None})
    for key, exp in experiments.items():
        if key not in PAPERS_BY_KEY:
            rows.append({"kind": "experiment", "key": key, "title": exp.title, "status": "plugin",
                         "registered": True})
    for key, bench in benchmarks.items():
        rows.append({"kind": "benchmark", "key": key, "title": bench.title, "status": "registered",
                     "registered": True})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    width = max(len(r["key"]) for r in rows)
    for kind in ("experiment", "benchmark"):
        chosen = [r for r in rows if r["kind"] == kind]
        print(f"{kind}s ({sum(r['registered'] for r in chosen)} registered):")
        if not chosen:
            print("  (none)")
        for r in chosen:
            mark = "" if r["registered"] else "  [no experiment yet]"
            print(f"  {r['key']:<{width}}  {r['status']:<10}  {r['title']}{mark}")
    return 0


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def _cmd_run(args: argparse.Namespace, kind: str, argv: Sequence[str]) -> int:
    import signal
    import threading

    from .runner import check_device, new_run_dir, run_all, run_folder_status, select

    selected = select(kind, args.keys, command=args.command)
    check_device(args.device, args.command)
    if args.data is not None:
        _check_data(args.command, args.data, selected)
    if args.out and (Path(args.out) / "results.json").is_file():
        try:
            before = run_folder_status(args.out)
        except InputError:
            before = {}
        if before.get("state") == "running":
            record = before["record"]
            if before["alive"] is False and record.get("host") == socket.gethostname():
                print(f"icml26: {args.out} held a run that never finished ({before['reason']}); it is replaced",
                      file=sys.stderr)
            elif before["alive"]:
                raise InputError(args.command, "--out", f"a folder no live run is writing to (pid "
                                 f"{record.get('pid')} is still running there)", described(str(args.out)))
            else:  # written on another host: its pid cannot be checked, so it may still be running
                raise InputError(args.command, "--out", f"a folder no live run is writing to (pid {record.get('pid')} "
                                 f"on {record.get('host')} may still be running there; remove its results.json to "
                                 "reuse the folder)", described(str(args.out)))
    run_dir = new_run_dir(args.out, kind, command=args.command)
    if not selected:
        print(f"icml26: no {kind}s are registered yet; wrote an empty report to {run_dir}", file=sys.stderr)
    seeds = tuple(range(args.seeds)) if args.seeds else None
    # `kill` (SIGTERM) ends a run like Ctrl-C: the report is closed as interrupted, not left running.
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _raise_interrupt) if in_main_thread else None
    # A shell that starts a job in the background makes it ignore SIGINT, and Python keeps an
    # inherited "ignore": restore Ctrl-C / `kill -INT` so they close the report as interrupted too.
    previous_int = signal.signal(signal.SIGINT, signal.default_int_handler) if in_main_thread else None
    try:
        outcome = run_all(kind, selected, mode=args.mode, seeds=seeds, run_dir=run_dir, device=args.device,
                          data=args.data, command=shlex.join(["icml26", *argv]), progress=args.progress)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
            signal.signal(signal.SIGINT, previous_int)
    print(f"\nreport: {run_dir / 'report.md'}\nresults: {run_dir / 'results.json'}")
    if outcome.interrupted:
        print("icml26: interrupted; the report holds what finished", file=sys.stderr)
        return 130
    if outcome.errors:
        print(f"icml26: {outcome.errors} {kind}(s) raised; tracebacks are in the report", file=sys.stderr)
        return 1
    if args.strict and outcome.failed_claims:
        print(f"icml26: {outcome.failed_claims} claim(s) do not hold (--strict)", file=sys.stderr)
        return 1
    return 0


def _check_data(command: str, data: str, selected) -> None:
    """``--data`` must exist, and each selected experiment whose module defines ``check_data(path)`` (a cheap
    look at the format, raising :class:`~icml26.errors.InputError`) must accept it: a bad path fails now, not
    after the experiments before the one that reads it."""
    if not data.strip() or not Path(data).expanduser().exists():
        raise InputError(command, "--data", "an existing data file or folder", data)
    for entry in selected:
        hook = getattr(sys.modules.get(entry.module) or importlib.import_module(entry.module), "check_data", None)
        if hook is None:
            continue
        try:
            hook(str(Path(data).expanduser()))
        except InputError as exc:
            raise InputError(command, "--data", f"data {entry.key} can read: {exc.expected or exc}",
                             exc.got if exc.expected else described(data), show_got=True) from None


def _cmd_status(args: argparse.Namespace) -> int:
    import json

    from .runner import run_folder_status

    status = run_folder_status(args.run_dir)
    record = status.pop("record")
    state = status["state"]
    if state == "running" and status["alive"] is False:
        state = "stale"
    if args.json:
        rows = [{"key": e["key"], "status": e["status"], "phase": e.get("phase"), "seconds": e.get("seconds")}
                for e in record.get("experiments", [])]
        print(json.dumps({**status, "state": state, "experiments": rows}, indent=2))
    else:
        age = status["heartbeat_age_s"]
        beat = f", last heartbeat {age:.0f} s ago" if age is not None else ""
        print(f"{args.run_dir}: {state} (started {record.get('started')}{beat})")
        if status["reason"]:
            print(f"  {status['reason']}")
        for exp in record.get("experiments", []):
            phase = f"  [{exp['phase']}]" if exp.get("phase") else ""
            took = f"  {exp['seconds']:.0f} s" if exp.get("seconds") is not None else ""
            print(f"  {exp['key']:<12} {exp['status']:<11}{took}{phase}")
    return 0 if state != "stale" else 1


def _cmd_report(args: argparse.Namespace) -> int:
    from .docs_results import regenerate, write_results_pages

    if args.regenerate is not None:
        extra = [name for name, given in (("RUN_DIR", args.run_dir), ("--docs", args.docs), ("--key", args.keys))
                 if given is not None]
        if extra:
            raise InputError("report", "--regenerate", "no RUN_DIR, --docs or --key with it",
                             described(", ".join(extra)))
        changed = regenerate(args.regenerate)
        for path in changed:
            print(path)
        print(f"icml26 report: {len(changed)} page(s) re-rendered in {args.regenerate}", file=sys.stderr)
        return 0
    if args.run_dir is None:
        raise InputError("report", "RUN_DIR", "a run folder (or --regenerate DIR)", described("nothing"))
    if args.docs is None:
        raise InputError("report", "--docs", "the folder the pages go to (e.g. --docs docs/results)",
                         described("nothing"))
    for path in write_results_pages(args.run_dir, args.docs, args.keys):
        print(path)
    return 0


def _cmd_env(args: argparse.Namespace) -> int:
    import json

    from .envinfo import collect

    info = collect()
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        width = max(map(len, info))
        for key, value in info.items():
            shown = "unknown" if value is None and key.startswith("git_") else value
            print(f"{key:<{width}}  {shown}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    try:
        if args.command == "list":
            return _cmd_list(args)
        if args.command == "env":
            return _cmd_env(args)
        if args.command == "status":
            return _cmd_status(args)
        if args.command == "report":
            return _cmd_report(args)
        if args.command in METHOD_COMMANDS:
            return int(_method_module(args.command).run(args) or 0)
        return _cmd_run(args, "experiment" if args.command == "reproduce" else "benchmark", argv)
    except InputError as exc:
        print(f"icml26 {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
