"""Test-only experiments and benchmarks, registered when ICML26_PLUGINS names this module."""

import os
import time
from pathlib import Path

from icml26 import Claim, Result, benchmark, experiment


def _sample_mean(seed: int, n: int = 2000) -> float:
    import numpy as np

    return float(np.random.default_rng(seed).normal(loc=1.0, scale=0.1, size=n).mean())


@experiment("t_ok", title="test: every claim holds", paper=None)
def run_ok(config):
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    means = [_sample_mean(s) for s in config.seeds]
    fig = Figure(figsize=(3, 2))
    fig.add_subplot().plot(means, marker="o")
    (config.out_dir / "artifact.txt").write_text("kept")
    return Result(
        metrics={"mean": sum(means) / len(means), "n_seeds": len(config.seeds), "mode": config.mode},
        tables={"per seed": [{"seed": s, "mean": m} for s, m in zip(config.seeds, means)]},
        figures={"means": fig},
        claims=[Claim.close("sample mean is near 1", means[0], 1.0, rtol=0.05),
                Claim.less("sample mean is below 2", means[0], 2.0)],
        notes="A sampled mean compared with its population value.",
    )


@experiment("t_fail_claim", title="test: a claim that does not hold", paper=None)
def run_fail_claim(config):
    mean = _sample_mean(config.seeds[0])
    return Result(metrics={"mean": mean}, claims=[Claim.greater("sample mean exceeds 5", mean, 5.0)])


@experiment("t_raise", title="test: an experiment that raises", paper=None)
def run_raise(config):
    raise RuntimeError("deliberate failure inside the experiment")


@experiment("t_slow", title="test: waits until interrupted", paper=None)
def run_slow(config):
    from icml26.progress import phase

    with phase("waiting", total=3) as bar:
        bar.update()
        Path(os.environ["ICML26_TEST_MARKER"]).write_text("started")
        time.sleep(120)
    return Result(metrics={"slept": 120.0})


@benchmark("t_bench", title="test: time a tiny loop")
def run_bench(config):
    start = time.perf_counter()
    total = sum(i * i for i in range(20000))
    seconds = time.perf_counter() - start
    return Result(metrics={"seconds": seconds, "checksum": total},
                  claims=[Claim.less("loop takes under 10 s", seconds, 10.0, unit="s")])


@experiment("t_phases", title="test: reports two phases", paper=None)
def run_phases(config):
    from icml26.progress import phase

    for name in ("stage 1", "stage 2"):
        with phase(name, total=4) as bar:
            for _ in range(4):
                bar.update()
    return Result(metrics={"phases": 2})


@experiment("t_nested", title="test: reads its own phase back from results.json", paper=None)
def run_nested(config):
    import json

    from icml26.progress import phase

    with phase("seeds", total=2) as outer:
        outer.update()
        with phase("sft", total=5):  # opening a phase rewrites results.json
            record = json.loads((config.out_dir.parent / "results.json").read_text())
    return Result(metrics={"phase_seen": record["experiments"][0]["phase"]})
