"""``icml26 bench infoloop``: seconds per round of :class:`icml26.training.infoloop.SyntheticLoop` for every task
and generator, and the loop's overhead on the digits round against the bare scikit-learn calls it wraps.

A round is what the loop does: sample from the current generator, apply the policy (here :class:`Replace` and, for
digits, :class:`Verify` with the exact verifier), refit. The bare digits round is a clone of the logistic
regression fitted on the same pairs, ``predict_proba`` on the pool and one draw per row. The claim: the loop's
bookkeeping (verifier statistics, containers, seeding) adds less than a quarter to that round. BLAS runs on one
thread, as in the experiment.
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: The sizes; the tests shrink them.
SIZES = {"rounds": 3, "repeats": 5, "warmup": 1, "pool": 1000}
OVERHEAD = 1.25


def _loops(pool: int, rounds: int, seed: int) -> dict:
    """name -> a closure running ``rounds`` rounds of one loop from its round-0 fit."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    from icml26.eval.tasks.infoloop import digits_split, linear_teacher, zipf
    from icml26.training.infoloop import (
        CategoricalMLE,
        ExactVerifier,
        GaussianMLE,
        Labels,
        LabelSampler,
        LinearStudent,
        Replace,
        SyntheticLoop,
        Verify,
        label_correctness,
    )

    rng = np.random.default_rng(seed)
    split = digits_split(seed, pool=pool)
    labelled = Labels(split.x_labelled, split.y_labelled, np.full(len(split.y_labelled), -1))
    correct = label_correctness(split.y_pool, 10)
    teacher = linear_teacher(10, 1.0, seed)
    cases = {
        "gaussian (n = 50)": (GaussianMLE(), Replace(), rng.standard_normal(50), None),
        "categorical (K = 100, n = 500)": (CategoricalMLE(100), Replace(), rng.choice(100, 500, p=zipf(100)), None),
        "linear (d = 10, n = 100)": (LinearStudent(10), Replace(), teacher.sample(100, seed), None),
        f"digits, logistic, replace (pool {pool})": (LabelSampler(LogisticRegression(max_iter=1000), split.x_pool, 10),
                                                      Replace(), labelled, pool),
        f"digits, logistic, exact verifier (pool {pool})": (
            LabelSampler(LogisticRegression(max_iter=1000), split.x_pool, 10), Verify(ExactVerifier(correct)),
            labelled, pool),
        f"digits, MLP, replace (pool {pool})": (
            LabelSampler(MLPClassifier((64,), max_iter=200, random_state=seed), split.x_pool, 10), Replace(), labelled,
            pool),
    }
    return {name: (lambda g=g, p=p, d=d, n=n: SyntheticLoop(g, p, rounds, n_samples=n, seed=seed).run(d))
            for name, (g, p, d, n) in cases.items()}


def _bare_digits_round(pool: int, seed: int):
    """The bare scikit-learn calls of one digits round (the loop's reference)."""
    import numpy as np
    from sklearn.base import clone
    from sklearn.linear_model import LogisticRegression

    from icml26.eval.tasks.infoloop import digits_split

    split = digits_split(seed, pool=pool)
    base = LogisticRegression(max_iter=1000)
    model = clone(base).fit(split.x_labelled, split.y_labelled)
    rng = np.random.default_rng(seed)
    p = model.predict_proba(split.x_pool)
    y = (p.cumsum(1) > rng.random((len(p), 1))).argmax(1)

    def round_():
        fitted = clone(base).fit(split.x_pool, y)
        q = fitted.predict_proba(split.x_pool)
        return (q.cumsum(1) > rng.random((len(q), 1))).argmax(1)

    return round_


@benchmark("infoloop", title="Synthetic data loops: seconds per round per task and generator", paper="infoloop")
def run(config, sizes: dict | None = None) -> Result:
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from threadpoolctl import threadpool_limits

    from icml26.eval.measure import interleaved_median_ms
    from icml26.eval.tasks.infoloop import digits_split
    from icml26.training.infoloop import Labels, LabelSampler, Replace

    size = dict(SIZES, **(sizes or {}))
    seed, device = config.seeds[0], config.torch_device()
    with threadpool_limits(1):
        ms = interleaved_median_ms(_loops(size["pool"], size["rounds"], seed), device, warmup=size["warmup"],
                                   repeats=size["repeats"])
        split = digits_split(seed, pool=size["pool"])
        generator = LabelSampler(LogisticRegression(max_iter=1000), split.x_pool, 10).fit(
            Labels(split.x_labelled, split.y_labelled, np.full(len(split.y_labelled), -1)))
        draws = np.random.SeedSequence(seed).spawn(1000)

        def loop_round():  # one round of the loop's own pieces: sample, policy, refit
            generator.fit(Replace()(generator.sample(size["pool"], draws.pop()), {}, 1, 0))

        pair = interleaved_median_ms({"loop": loop_round, "bare": _bare_digits_round(size["pool"], seed)}, device,
                                     warmup=size["warmup"], repeats=size["repeats"])
    rows = [{"loop": name, "rounds": size["rounds"], "ms per round": round(t / size["rounds"], 2)}
            for name, t in ms.items()]
    result = Result(tables={"seconds per round": rows,
                            "one digits round: the loop against the bare scikit-learn calls": [
                                {"path": k, "ms": round(v, 2)} for k, v in pair.items()]})
    for r in rows:
        result.metrics[f"ms_per_round: {r['loop']}"] = r["ms per round"]
    result.metrics.update({"loop_round_ms": pair["loop"], "bare_round_ms": pair["bare"]})
    result.add_claim(Claim.less(f"the loop's bookkeeping adds less than {OVERHEAD - 1:.0%} to a digits round (pool "
                                f"{size['pool']}, logistic regression, one BLAS thread)", pair["loop"], pair["bare"],
                                factor=OVERHEAD, unit="ms"))
    result.notes = (f"Median of {size['repeats']} interleaved repeats after {size['warmup']} warm-up; each loop runs "
                    f"{size['rounds']} rounds after its round-0 fit (included in its time); BLAS pinned to one "
                    "thread.")
    return result
