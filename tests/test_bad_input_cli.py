"""Bad input to the ``icml26`` command line and to ``icml26 optminer``: each option is refused (exit 2, one line
naming it) before an experiment runs, a model loads or a server is asked anything."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import pytest
from probes import check, cli, ids

# Work a probe must not reach: the runner, a chat backend, a model, Opt-Miner's synthesis and evaluation.
RUN = ["icml26.runner.run_all"]
MODEL = ["icml26.agents.backends.backend_from_args", "icml26.agents.backends.backend_from_spec",
         "transformers.AutoModelForCausalLM.from_pretrained"]
SYNTH = ["icml26.agents.optminer.synth.synthesize"]
EVAL = [*MODEL, "icml26.agents.optminer.bench.evaluate_folder"]

_SCRATCH = Path(tempfile.mkdtemp(prefix="icml26-bad-input-cli-"))
atexit.register(shutil.rmtree, _SCRATCH, ignore_errors=True)
MISSING = str(_SCRATCH / "missing")
A_FILE = _SCRATCH / "a-file.txt"
A_FILE.write_text("not a folder, not an archive\n")
EMPTY_DIR = _SCRATCH / "empty"
EMPTY_DIR.mkdir()
UNDER_A_FILE = str(A_FILE / "out")  # a folder that cannot be made: its parent is a file
PROC = "/proc/icml26-bad-input/out"  # no one can create folders in /proc
BENCH = _SCRATCH / "bench"
BENCH.mkdir()
(BENCH / "tiny.jsonl").write_text('{"en_question": "Maximise x with x <= 1.", "en_answer": "1"}\n')
TRAIN = _SCRATCH / "train.jsonl"
TRAIN.write_text('{"en_question": "Minimise y with y >= 2."}\n')
A_RUN = _SCRATCH / "run"  # a run folder without results.json
A_RUN.mkdir()
URL = ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]  # a server never asked: options fail first
EVAL_OK = ["optminer", "eval", *URL, "--bench-dir", str(BENCH), "--out", str(_SCRATCH / "eval-out")]


def _eval(*changed: str) -> list[str]:
    """``optminer eval`` with valid options, then ``changed`` (argparse keeps the last value of an option)."""
    return [*EVAL_OK, *changed]


PROBES = [
    # icml26 reproduce / bench: keys, run options, output folder, data
    cli("reproduce-key-unknown", ["reproduce", "no_such_experiment", "--no-progress"], "KEY", forbid=RUN),
    cli("bench-name-unknown", ["bench", "no_such_benchmark", "--no-progress"], "NAME", forbid=RUN),
    cli("reproduce-seeds-zero", ["reproduce", "r2g", "--seeds", "0"], "--seeds", forbid=RUN),
    cli("reproduce-seeds-negative", ["reproduce", "r2g", "--seeds", "-1"], "--seeds", forbid=RUN),
    cli("reproduce-seeds-not-a-number", ["reproduce", "r2g", "--seeds", "three"], "--seeds", forbid=RUN),
    cli("bench-seeds-zero", ["bench", "--seeds", "0"], "--seeds", forbid=RUN),
    cli("reproduce-device-unknown", ["reproduce", "r2g", "--device", "gpu"], "--device", forbid=RUN),
    cli("reproduce-device-index-not-a-number", ["reproduce", "r2g", "--device", "cuda:first"], "--device",
        forbid=RUN),
    cli("bench-device-unknown", ["bench", "--device", "tpu"], "--device", forbid=RUN),
    cli("reproduce-out-in-proc", ["reproduce", "r2g", "--out", PROC, "--no-progress"], "--out", forbid=RUN),
    cli("reproduce-out-under-a-file", ["reproduce", "r2g", "--out", UNDER_A_FILE, "--no-progress"], "--out",
        forbid=RUN),
    cli("bench-out-in-proc", ["bench", "--out", PROC, "--no-progress"], "--out", forbid=RUN),
    cli("reproduce-data-missing", ["reproduce", "tfmixer", "--data", str(_SCRATCH / "missing.tar.gz")], "--data",
        forbid=RUN),
    cli("reproduce-data-empty-string", ["reproduce", "tfmixer", "--data", ""], "--data", forbid=RUN),
    cli("reproduce-data-not-an-archive", ["reproduce", "tfmixer", "--data", str(A_FILE)], "--data", forbid=RUN),
    cli("reproduce-data-folder-without-records", ["reproduce", "tfmixer", "--data", str(EMPTY_DIR)], "--data",
        forbid=RUN),
    cli("reproduce-quick-and-full", ["reproduce", "r2g", "--quick", "--full"], "--full", forbid=RUN),
    cli("reproduce-option-unknown", ["reproduce", "r2g", "--seed", "3"], "--seed", forbid=RUN),
    # the other core commands
    cli("command-unknown", ["reproduse"], "reproduse", forbid=RUN),
    cli("list-option-unknown", ["list", "--jsn"], "--jsn"),
    cli("env-option-unknown", ["env", "--all"], "--all"),
    cli("status-dir-missing", ["status", MISSING], "DIR"),
    cli("status-dir-without-results", ["status", str(A_RUN)], "DIR"),
    cli("report-run-dir-without-results", ["report", str(A_RUN), "--docs", str(_SCRATCH / "docs")], "RUN_DIR"),
    cli("report-docs-missing", ["report", str(A_RUN)], "--docs"),
    cli("report-regenerate-missing", ["report", "--regenerate", MISSING], "docs_dir"),
    cli("report-regenerate-with-run-dir", ["report", str(A_RUN), "--regenerate", str(EMPTY_DIR)], "--regenerate"),
    # icml26 optminer synthesize
    cli("optminer-synthesize-out-in-proc", ["optminer", "synthesize", "--n", "2", "--out", PROC], "--out",
        forbid=SYNTH),
    cli("optminer-synthesize-out-under-a-file", ["optminer", "synthesize", "--n", "2", "--out", UNDER_A_FILE],
        "--out", forbid=SYNTH),
    cli("optminer-synthesize-n-zero", ["optminer", "synthesize", "--n", "0", "--out", str(_SCRATCH / "s")], "--n",
        forbid=SYNTH),
    cli("optminer-synthesize-seed-negative", ["optminer", "synthesize", "--n", "2", "--seed", "-4", "--out",
                                              str(_SCRATCH / "s")], "--seed", forbid=SYNTH),
    cli("optminer-synthesize-fog-prob-above-1", ["optminer", "synthesize", "--n", "2", "--fog-prob", "1.5", "--out",
                                                 str(_SCRATCH / "s")], "--fog-prob", forbid=SYNTH),
    cli("optminer-synthesize-union-prob-nan", ["optminer", "synthesize", "--n", "2", "--union-prob", "nan", "--out",
                                               str(_SCRATCH / "s")], "--union-prob", forbid=SYNTH),
    cli("optminer-synthesize-transfer-prob-negative", ["optminer", "synthesize", "--n", "2", "--transfer-prob",
                                                       "-0.1", "--out", str(_SCRATCH / "s")], "--transfer-prob",
        forbid=SYNTH),
    cli("optminer-synthesize-distractors-negative", ["optminer", "synthesize", "--n", "2", "--distractors", "-1",
                                                     "--out", str(_SCRATCH / "s")], "--distractors", forbid=SYNTH),
    cli("optminer-synthesize-rtol-zero", ["optminer", "synthesize", "--n", "2", "--rtol", "0", "--out",
                                          str(_SCRATCH / "s")], "--rtol", forbid=SYNTH),
    cli("optminer-synthesize-workers-zero", ["optminer", "synthesize", "--n", "2", "--workers", "0", "--out",
                                             str(_SCRATCH / "s")], "--workers", forbid=SYNTH),
    cli("optminer-subcommand-unknown", ["optminer", "synthesise"], "synthesise"),
    # icml26 optminer validate / decontaminate
    cli("optminer-validate-dir-missing", ["optminer", "validate", MISSING], "DIR"),
    cli("optminer-validate-limit-zero", ["optminer", "validate", str(EMPTY_DIR), "--limit", "0"], "--limit"),
    cli("optminer-validate-json-in-proc", ["optminer", "validate", str(EMPTY_DIR), "--json", PROC + ".json"],
        "--json"),
    cli("optminer-decontaminate-train-missing", ["optminer", "decontaminate", MISSING, str(BENCH)], "TRAIN"),
    cli("optminer-decontaminate-bench-missing", ["optminer", "decontaminate", str(TRAIN), MISSING], "BENCH"),
    cli("optminer-decontaminate-threshold-1", ["optminer", "decontaminate", str(TRAIN), str(BENCH), "--threshold",
                                               "1"], "--threshold"),
    cli("optminer-decontaminate-drop-exists", ["optminer", "decontaminate", str(TRAIN), str(BENCH), "--drop",
                                               str(A_FILE)], "--drop"),
    cli("optminer-decontaminate-json-in-proc", ["optminer", "decontaminate", str(TRAIN), str(BENCH), "--json",
                                                PROC + ".json"], "--json"),
    # icml26 optminer eval: every option before a model is built or a server asked
    cli("optminer-eval-out-in-proc", _eval("--out", PROC), "--out", forbid=EVAL),
    cli("optminer-eval-bench-dir-missing", _eval("--bench-dir", MISSING), "--bench-dir", forbid=EVAL),
    cli("optminer-eval-corpus-missing", _eval("--corpus", MISSING), "--corpus", forbid=EVAL),
    cli("optminer-eval-embedding-model-missing", _eval("--retriever", "embedding", "--corpus", str(EMPTY_DIR),
                                                       "--embedding-model", MISSING), "--embedding-model", forbid=EVAL),
    cli("optminer-eval-retriever-unknown", _eval("--retriever", "tfidf"), "--retriever", forbid=EVAL),
    cli("optminer-eval-base-url-not-http", _eval("--base-url", "127.0.0.1:8000"), "--base-url",
        forbid=["icml26.agents.backends.backend_from_spec", "icml26.agents.optminer.bench.evaluate_folder"]),
    cli("optminer-eval-temperature-negative", _eval("--temperature", "-0.5"), "--temperature", forbid=EVAL),
    cli("optminer-eval-max-new-tokens-zero", _eval("--max-new-tokens", "0"), "--max-new-tokens", forbid=EVAL),
    cli("optminer-eval-limit-zero", _eval("--limit", "0"), "--limit", forbid=EVAL),
    cli("optminer-eval-rtol-zero", _eval("--rtol", "0"), "--rtol", forbid=EVAL),
    cli("optminer-eval-atol-negative", _eval("--atol", "-0.001"), "--atol", forbid=EVAL),
    cli("optminer-eval-time-limit-zero", _eval("--time-limit", "0"), "--time-limit", forbid=EVAL),
    cli("optminer-eval-memory-mb-zero", _eval("--memory-mb", "0"), "--memory-mb", forbid=EVAL),
    cli("optminer-eval-top-k-zero", _eval("--top-k", "0"), "--top-k", forbid=EVAL),
    cli("optminer-eval-max-turns-zero", _eval("--max-turns", "0"), "--max-turns", forbid=EVAL),
    cli("optminer-eval-api-key-with-a-local-folder", ["optminer", "eval", "--backend", str(EMPTY_DIR), "--api-key",
                                                      "sk-1", "--bench-dir", str(BENCH), "--out",
                                                      str(_SCRATCH / "eval-out")], "--api-key",
        forbid=["icml26.agents.backends.backend_from_spec", "transformers.AutoModelForCausalLM.from_pretrained"]),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)

