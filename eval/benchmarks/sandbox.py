"""``icml26 bench sandbox``: what the agent sandbox costs per command, per set-up, and in memory.

Times :meth:`icml26.agents.sandbox.Sandbox.run` of ``true`` (the fixed cost every tool call of
SERA's agents and every program the Opt-Miner scorer runs pays: namespaces, the new root, the
seccomp filter, the per-command cgroup) in interleaved rounds against the same call with a launcher
started for each command (``ICML26_SANDBOX_SERVER=0``: the interpreter start every command paid
before the launch server) and without isolation (``isolation="none"``), so a slow spell of a
shared machine lands on all of them; the construction of a
sandbox over a small repository (copy, base commit, size-capped folder); and the memory: what the
command's processes held together at their peak (from its cgroup, where there is one).
"""

from __future__ import annotations

import contextlib
import os
import statistics
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: sizes of each mode; the tests shrink them
SIZES = {"quick": {"commands": 40, "setups": 5, "files": 200}, "full": {"commands": 300, "setups": 20, "files": 2000}}
#: median of ``sb.run("true")`` before the sandbox got its own root and cgroups, on a loaded 2-core machine
BASELINE_RUN_TRUE_MS = 170.0


def _repo(folder: Path, files: int) -> Path:
    for i in range(files):
        path = folder / f"pkg{i % 10}" / f"mod{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"def f{i}():\n    return {i}\n")
    env = dict(os.environ, GIT_AUTHOR_NAME="b", GIT_AUTHOR_EMAIL="b@b", GIT_COMMITTER_NAME="b",
               GIT_COMMITTER_EMAIL="b@b")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "init"]):
        subprocess.run(["git", *args], cwd=folder, env=env, check=True, capture_output=True)
    return folder


@contextlib.contextmanager
def _server(on: bool):
    """The launch server on (the default) or off (``ICML26_SANDBOX_SERVER=0``) for the calls inside."""
    before = os.environ.get("ICML26_SANDBOX_SERVER")
    os.environ["ICML26_SANDBOX_SERVER"] = "1" if on else "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("ICML26_SANDBOX_SERVER")
        else:
            os.environ["ICML26_SANDBOX_SERVER"] = before


def _ms(times: list[float]) -> dict:
    ordered = sorted(times)
    return {"median_ms": round(statistics.median(ordered) * 1e3, 2), "min_ms": round(ordered[0] * 1e3, 2),
            "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1e3, 2)}


@benchmark("sandbox", title="Agent sandbox: cost of a command, of a set-up, and memory")
def run(config):
    from icml26.agents.sandbox import Sandbox, isolation_support

    size = SIZES["full" if config.mode == "full" else "quick"]
    prefix, reason = isolation_support()
    with tempfile.TemporaryDirectory(prefix="icml26-bench-sandbox-") as tmp:
        repo = _repo(Path(tmp) / "repo", size["files"])
        modes = {"isolated": {}, "isolated_launcher_per_command": {}} if prefix is not None else {}
        modes["unisolated"] = {"isolation": "none", "allow_unisolated": True}
        rows, boxes = [], {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for name, kwargs in modes.items():
                setups = []
                for _ in range(size["setups"]):
                    start = time.perf_counter()
                    Sandbox(repo, time_limit=30, **kwargs).close()
                    setups.append(time.perf_counter() - start)
                boxes[name] = (Sandbox(repo, time_limit=30, **kwargs), setups)
        try:
            times: dict[str, list[float]] = {name: [] for name in boxes}
            peaks: dict[str, list[float]] = {name: [] for name in boxes}
            for box, _ in boxes.values():
                box.run("true")  # warm-up
            for _ in range(size["commands"]):
                for name, (box, _) in boxes.items():
                    with _server(name != "isolated_launcher_per_command"):
                        start = time.perf_counter()
                        result = box.run("true")
                        times[name].append(time.perf_counter() - start)
                    if result.returncode != 0:
                        raise RuntimeError(f"`true` failed in the {name} sandbox: {result.output}")
                    if result.peak_memory_mb is not None:
                        peaks[name].append(result.peak_memory_mb)
            for name, (box, setups) in boxes.items():
                run_true = _ms(times[name])
                rows.append({"mode": name, "run_true_median_ms": run_true["median_ms"],
                             "run_true_min_ms": run_true["min_ms"], "run_true_p90_ms": run_true["p90_ms"],
                             "commands_per_s": round(1e3 / run_true["median_ms"], 1),
                             "setup_median_ms": _ms(setups)["median_ms"],
                             "command_peak_memory_mb": max(peaks[name]) if peaks[name] else None,
                             "limits": ", ".join(f"{k}: {v.mechanism}" for k, v in box.limits.items()
                                                 if v.scope != "none")})
        finally:
            for box, _ in boxes.values():
                box.close()
    result = Result(tables={"sandbox": rows})
    by_mode = {r["mode"]: r for r in rows}
    for row in rows:
        for key in ("run_true_median_ms", "run_true_min_ms", "commands_per_s", "setup_median_ms",
                    "command_peak_memory_mb"):
            if row[key] is not None:
                result.metrics[f"{row['mode']}_{key}"] = row[key]
    if "isolated" in by_mode:
        result.add_claim(Claim.at_most(
            "an isolated `sb.run('true')` costs no more than before the sandbox got its own root and whole-command "
            f"limits (median {BASELINE_RUN_TRUE_MS:g} ms on a loaded 2-core machine)",
            by_mode["isolated"]["run_true_median_ms"], BASELINE_RUN_TRUE_MS, unit="ms"))
        result.add_claim(Claim.at_most(
            "with the launch server an isolated `sb.run('true')` costs no more than with a launcher started for each "
            "command (what every command paid before the server; same run, interleaved)",
            by_mode["isolated"]["run_true_median_ms"], by_mode["isolated_launcher_per_command"]["run_true_median_ms"],
            unit="ms"))
        result.notes = (f"{size['commands']} interleaved rounds of `true` in each mode after one warm-up; set-up over "
                        f"a repository of {size['files']} files, {size['setups']} times. Peak memory of a command is "
                        "what its cgroup saw (the command's first process and bash; the launcher that waits is "
                        "outside it).")
    else:
        result.notes = f"No namespace isolation here ({reason}): only the unisolated sandbox was timed."
    return result
