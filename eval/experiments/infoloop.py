"""Information-open synthetic data loops (ICML 2026, "An Information-Theoretic Criterion for Efficient Data
Synthesis", Li, Sun and Deng, arXiv 2605.16379): do closed loops fail to gain, does a verifier's gain grow with its
information about correctness, and is a gameable signal hacked?

Setting (the issue's; the paper is a position paper without experiments): scikit-learn's ``digits`` split into 100
labelled, 1,000 pool and 697 test images. A logistic regression (``C = 1``) fitted on the labelled images is round 0;
each round it draws one label per pool image from ``predict_proba`` (sampling: the argmax would use the pool's inputs
like self-training and is reported), the policy keeps what it keeps, and the next model is fitted on the kept pairs
only (replace); 8 rounds; the labelled images are used in round 0 only. Arms: closed (keep all), exact verifier,
noisy verifiers (``eta`` flips), a random verifier accepting at the exact arm's per-round rates (the same amount of
data, no information), and a gameable verifier (actions ``label + 10 flag``, round-0 flags uniform; a correct label
or a set flag is accepted). Claims at round 8 on the test images, with paired bootstrap 95% intervals of the
accuracy gain over round 0 (per seed; with several seeds or replications, on the median):

1. A verifier adds what a closed loop cannot: the exact arm's gain interval is above 0; the closed arm's and the
   random verifier's are below 0.
2. The gain rises with the verifier's information about correctness: gain(exact) > gain(eta = 0.4) > gain(random).
3. Reward hacking: the gameable verifier's proxy acceptance at round 8 exceeds the exact arm's, while the true
   accuracy gain's interval is below 0 and the flag rate rises from round 0 to round 8.

Reported: ``I(Y; Y_hat)`` per round, bits injected, bits per unit gain, the argmax arm, ``eta = 0.2``. The closed-form
loops run beside as figures and reported numbers: the Gaussian MLE loop against ``((n - 1) / n)^t``, the Zipf
categorical loop (entropy, support, tail mass) under replace, accumulate and a verifier, and the linear-regression
excess risk under replace and accumulate.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass
from typing import Any

from icml26.registry import experiment
from icml26.results import Claim, Result
from icml26.utils import inner_seed

NUM_LABELS = 10


@dataclass(frozen=True)
class InfoloopSettings:
    """Sizes of one mode.

    ``labelled`` / ``pool`` digits images (the rest test), ``rounds`` of the digits loop, ``etas`` of the noisy arms
    (``claim_eta`` in claim 2), ``replications`` per seed (claims on their median), ``generators`` (``"logistic"``,
    ``"mlp"``; claims on the first), ``bootstrap`` resamples; the closed-form loops: ``gaussian_seeds`` x
    ``gaussian_generations`` of ``gaussian_n`` samples, ``zipf_K`` categories of ``zipf_n`` samples for
    ``zipf_generations``, ``linear_seeds`` x ``linear_generations`` of the ``d``-dimensional regression with
    ``linear_n`` samples; the language-model loop (``addition_pairs`` real 2-digit sums for round 0, 0: not run):
    ``addition_rounds`` rounds completing ``addition_prompts`` prompts 4 times each, ``addition_steps`` SFT steps for
    round 0 and for each later round.
    """

    labelled: int = 100
    pool: int = 1000
    rounds: int = 8
    etas: tuple[float, ...] = (0.2, 0.4)
    claim_eta: float = 0.4
    replications: int = 1
    generators: tuple[str, ...] = ("logistic",)
    bootstrap: int = 2000
    gaussian_n: int = 50
    gaussian_seeds: int = 200
    gaussian_generations: int = 50
    zipf_K: int = 100
    zipf_n: int = 500
    zipf_generations: int = 50
    linear_d: int = 10
    linear_n: int = 100
    linear_seeds: int = 200
    linear_generations: int = 10
    addition_pairs: int = 0
    addition_rounds: int = 3
    addition_prompts: int = 200
    addition_steps: tuple[int, int] = (400, 100)


SETTINGS = {"quick": InfoloopSettings()}
SETTINGS["full"] = dataclasses.replace(SETTINGS["quick"], etas=(0.0, 0.2, 0.4, 0.5), replications=3,
                                       generators=("logistic", "mlp"), addition_pairs=2000)


# ----------------------------------------------------------------------------------------------
# the digits loop: every arm of one (seed, replication, generator)
# ----------------------------------------------------------------------------------------------
def _estimator(kind: str, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.neural_network import MLPClassifier

    if kind == "logistic":
        return LogisticRegression(C=1.0, max_iter=1000)
    return MLPClassifier(hidden_layer_sizes=(64,), alpha=1e-3, max_iter=400, random_state=seed)


def _digits_arms(job) -> dict[str, Any]:
    """Every arm of one (seed, replication, generator), BLAS pinned to one thread (a logistic regression's threads
    fight on a loaded machine: minutes instead of seconds)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1):
        return _digits_arms_unpinned(job)


def _digits_arms_unpinned(job) -> dict[str, Any]:
    import numpy as np

    from icml26.eval.tasks.infoloop import digits_split, mutual_information
    from icml26.training.infoloop import (
        ExactVerifier,
        GameableVerifier,
        Labels,
        LabelSampler,
        NoisyVerifier,
        RandomVerifier,
        Replace,
        SyntheticLoop,
        Verify,
        label_correctness,
    )

    s, seed, rep, kind = job
    split = digits_split(inner_seed(seed, 1, rep, bits=31), labelled=s.labelled, pool=s.pool)
    correct = label_correctness(split.y_pool, NUM_LABELS)
    loop_seed = inner_seed(seed, 2, rep, bits=31)

    def run(policy, flag=False, sample="proba"):
        generator = LabelSampler(_estimator(kind, loop_seed), split.x_pool, NUM_LABELS, sample=sample, flag=flag)
        action = split.y_labelled.copy()
        if flag:  # round 0's flags: uniform, independent of the image
            action += NUM_LABELS * np.random.default_rng(inner_seed(seed, 3, rep, bits=31)).integers(0, 2, len(action))
        initial = Labels(split.x_labelled, action, np.full(len(action), -1))

        def evaluate(g, t):
            pred = g.predict(split.x_test)
            out = {"accuracy": float((pred == split.y_test).mean()),
                   "mi_y_yhat": mutual_information(split.y_test, pred), "correct": (pred == split.y_test).tolist()}
            if flag:
                out["flag_rate"] = float(g.action_proba(split.x_pool)[:, NUM_LABELS:].sum(1).mean())
            return out

        history = SyntheticLoop(generator, policy, s.rounds, n_samples=s.pool, seed=loop_seed,
                                evaluate=evaluate).run(initial)
        rows = history.rounds
        return {"rounds": [{k: v for k, v in r.items() if k != "correct"} for r in rows],
                "correct_0": rows[0]["correct"], "correct_final": rows[-1]["correct"],
                "bits": history.bits_injected()}

    arms = {"closed": run(Replace()), "exact": run(Verify(ExactVerifier(correct)))}
    rates = [r["acceptance"] for r in arms["exact"]["rounds"][1:]]
    for eta in s.etas:
        arms[f"eta = {eta:g}"] = run(Verify(NoisyVerifier(correct, eta)))
    arms["random"] = run(Verify(RandomVerifier(correct, rates)))
    arms["gameable"] = run(Verify(GameableVerifier(correct, NUM_LABELS)), flag=True)
    arms["argmax (closed)"] = run(Replace(), sample="argmax")
    return {"seed": seed, "rep": rep, "generator": kind, "arms": arms}


# ----------------------------------------------------------------------------------------------
# the closed-form loops (figures and reported numbers)
# ----------------------------------------------------------------------------------------------
def _gaussian_loops(s: InfoloopSettings, seed: int) -> dict[str, Any]:
    import numpy as np

    from icml26.training.infoloop import GaussianMLE, Replace, SyntheticLoop

    out = {}
    for unbiased in (False, True):
        var = np.empty((s.gaussian_seeds, s.gaussian_generations + 1))
        for k in range(s.gaussian_seeds):
            rng = np.random.default_rng(inner_seed(seed, 4, int(unbiased), k, bits=31))
            loop = SyntheticLoop(GaussianMLE(unbiased), Replace(), s.gaussian_generations - 1,
                                 seed=inner_seed(seed, 5, int(unbiased), k, bits=31),
                                 evaluate=lambda g, t: {"var": g.var})
            var[k] = [1.0] + loop.run(rng.standard_normal(s.gaussian_n)).series("var")
        out["unbiased" if unbiased else "mle"] = {"mean": var.mean(0).tolist(), "median": np.median(var, 0).tolist(),
                                                   "se": (var.std(0, ddof=1) / math.sqrt(len(var))).tolist()}
    out["closed_form"] = [((s.gaussian_n - 1) / s.gaussian_n) ** t for t in range(s.gaussian_generations + 1)]
    return out


def _zipf_loops(s: InfoloopSettings, seed: int) -> dict[str, Any]:
    import numpy as np

    from icml26.eval.tasks.infoloop import entropy, support_size, tail_mass, total_variation, zipf
    from icml26.training.infoloop import Accumulate, CategoricalMLE, ExactVerifier, Replace, SyntheticLoop, Verify

    truth = zipf(s.zipf_K)
    good = np.zeros(s.zipf_K, dtype=bool)
    good[np.argsort(-truth)[: s.zipf_K // 2]] = True  # a "correct" subset: the more frequent half
    initial = np.random.default_rng(inner_seed(seed, 6, bits=31)).choice(s.zipf_K, size=s.zipf_n, p=truth)

    def evaluate(g, t):
        return {"entropy": entropy(g.probs), "support": support_size(g.probs),
                "tail_mass": tail_mass(g.probs, truth, 1.0 / s.zipf_K), "tv": total_variation(g.probs, truth)}

    out = {}
    for name, policy in (("replace", Replace()), ("accumulate", Accumulate()),
                         ("verify (frequent half)", Verify(ExactVerifier(lambda x: good[x])))):
        history = SyntheticLoop(CategoricalMLE(s.zipf_K), policy, s.zipf_generations,
                                seed=inner_seed(seed, 7, bits=31), evaluate=evaluate).run(initial)
        out[name] = {k: history.series(k) for k in ("entropy", "support", "tail_mass", "tv")}
    out["truth"] = {"entropy": entropy(truth), "support": s.zipf_K, "tail_mass": tail_mass(truth, truth, 1 / s.zipf_K)}
    return out


def _linear_loops(s: InfoloopSettings, seed: int) -> dict[str, Any]:
    import numpy as np

    from icml26.eval.tasks.infoloop import linear_teacher
    from icml26.training.infoloop import Accumulate, LinearStudent, Replace, SyntheticLoop

    risk = {"replace": [], "accumulate": []}
    for k in range(s.linear_seeds):
        teacher = linear_teacher(s.linear_d, 1.0, seed=inner_seed(seed, 8, k, bits=31))
        initial = teacher.sample(s.linear_n, inner_seed(seed, 9, k, bits=31))
        for name, policy in (("replace", Replace()), ("accumulate", Accumulate())):
            history = SyntheticLoop(LinearStudent(s.linear_d, 1.0), policy, s.linear_generations - 1,
                                    seed=inner_seed(seed, 10, k, bits=31),
                                    evaluate=lambda g, t: {"risk": teacher.excess_risk(g.w)}).run(initial)
            risk[name].append(history.series("risk"))
    out = {name: {"median": np.median(r, 0).tolist(), "mean": np.mean(r, 0).tolist()} for name, r in risk.items()}
    out["first_generation_theory"] = s.linear_d / (s.linear_n - s.linear_d - 1)
    return out


def _addition_loops(job) -> dict[str, Any]:
    """The 2-digit addition loop on a tiny LM through SyntheticLoopTrainer: one round-0 model, then closed and exact-
    verified rounds from copies of it; greedy accuracy on held-out sums after every fit. The trainers' progress
    bars and logs are silenced for the run and restored after."""
    import datasets
    import transformers

    bars, verbosity = datasets.is_progress_bar_enabled(), transformers.logging.get_verbosity()
    datasets.disable_progress_bars()
    transformers.logging.set_verbosity_error()
    try:
        return _addition_loops_quiet(job)
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            datasets.enable_progress_bars()


def _addition_loops_quiet(job) -> dict[str, Any]:
    import tempfile

    import numpy as np
    import torch

    from icml26.eval.tasks.infoloop import addition_pairs
    from icml26.tiny import build_word_tokenizer, tiny_model_for_tokenizer
    from icml26.training.infoloop import CausalLMGenerator, SyntheticLoopConfig, SyntheticLoopTrainer, addition_correct

    s, seed = job
    pairs = addition_pairs(s.addition_pairs + 2 * s.addition_prompts, seed=inner_seed(seed, 12, bits=31))
    real, pool, test = (pairs[: s.addition_pairs], pairs[s.addition_pairs: s.addition_pairs + s.addition_prompts],
                        pairs[s.addition_pairs + s.addition_prompts:])
    tokenizer = build_word_tokenizer([p + c for p, c in pairs])

    def fresh_model():
        return tiny_model_for_tokenizer(tokenizer, hidden_size=64, num_layers=2, intermediate_size=128,
                                        seed=inner_seed(seed, 13, bits=31))

    model = fresh_model()

    def greedy_accuracy(generator, t):
        tokenizer.padding_side = "left"
        batch = tokenizer([p for p, _ in test], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.no_grad():
            out = generator.model.generate(**batch, do_sample=False, max_new_tokens=4, pad_token_id=tokenizer.pad_token_id,
                                           eos_token_id=tokenizer.eos_token_id)
        text = [c.strip() for c in tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)]
        return {"accuracy": float(addition_correct((np.array([p for p, _ in test], object),
                                                    np.array(text, object))).mean())}

    common = dict(per_device_train_batch_size=32, learning_rate=3e-3, lr_scheduler_type="constant", warmup_steps=0,
                  report_to="none", save_strategy="no", use_cpu=True, disable_tqdm=True, seed=seed,
                  gradient_checkpointing=False, logging_steps=50, loop_rounds=s.addition_rounds, samples_per_prompt=4,
                  loop_max_new_tokens=4)
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        first = SyntheticLoopConfig(output_dir=f"{tmp}/round0", max_steps=s.addition_steps[0], **common)
        base = CausalLMGenerator(model, tokenizer, first, [p for p, _ in pool], quiet=True)
        base.fit((np.array([p for p, _ in real], object), np.array([c for _, c in real], object)))
        trained = {k: v.detach().clone() for k, v in model.state_dict().items()}
        for verifier in ("none", "exact"):
            copy_of_round0 = fresh_model()   # a deepcopy of a trained model keeps forward wrappers bound to the original
            copy_of_round0.load_state_dict(trained)
            args = SyntheticLoopConfig(output_dir=f"{tmp}/{verifier}", max_steps=s.addition_steps[1],
                                       loop_verifier=verifier, **common)
            trainer = SyntheticLoopTrainer(copy_of_round0, args, tokenizer, None, [p for p, _ in pool],
                                           correct=addition_correct, evaluate=greedy_accuracy)
            trainer.generator.quiet = True
            history = trainer.train()                  # round 0 is the shared model, as given
            out["closed" if verifier == "none" else "exact verifier"] = {
                "accuracy": history.series("accuracy"), "acceptance": history.series("acceptance")[1:],
                "n_train": history.series("n_train")[1:]}
    return out


# ----------------------------------------------------------------------------------------------
# the experiment
# ----------------------------------------------------------------------------------------------
@experiment("infoloop", title="Information-open synthetic data loops: closed loops do not gain, verifiers inject what "
                              "they know, gameable signals are hacked (reconstructed)", paper="infoloop")
def run(config) -> Result:
    return run_experiment(config)


def run_experiment(config, settings: InfoloopSettings | None = None) -> Result:
    """The experiment with its sizes exposed; several seeds decide claims on the median over seeds."""
    from icml26.results import over_seeds

    s = settings or SETTINGS[config.mode]
    return over_seeds(config.seeds, lambda seed: _run_seed(config, s, seed))


def _gain(arm: dict[str, Any], s: InfoloopSettings, seed: int, rep: int):
    from icml26.eval.tasks.infoloop import paired_bootstrap

    return paired_bootstrap(arm["correct_final"], arm["correct_0"], n_boot=s.bootstrap,
                            seed=inner_seed(seed, 11, rep, bits=31))


def _run_seed(config, s: InfoloopSettings, seed: int) -> Result:
    import numpy as np
    import torch

    from icml26.eval.parallel import map_jobs

    start = time.perf_counter()
    jobs = [(s, seed, rep, kind) for kind in s.generators for rep in range(s.replications)]
    runs = map_jobs(_digits_arms, jobs, torch.device("cpu"), phase_name="digits loops")
    result = Result()
    m = result.metrics
    gains: dict[str, dict[str, list]] = {}
    for r in runs:
        table = gains.setdefault(r["generator"], {})
        for name, arm in r["arms"].items():
            iv = _gain(arm, s, seed, r["rep"])
            table.setdefault(name, []).append((iv, arm))
    main = gains[s.generators[0]]

    def med(name, key):
        return float(np.median([getattr(iv, key) for iv, _ in main[name]]))

    def final(name, key):
        return float(np.median([arm["rounds"][-1][key] for _, arm in main[name]]))

    for name in main:
        m[f"gain_{name}"] = {"estimate": med(name, "estimate"), "low": med(name, "low"), "high": med(name, "high")}
    rounds = s.rounds
    eta = f"eta = {s.claim_eta:g}"
    # 1. a verifier adds what a closed loop cannot
    result.add_claim(Claim.greater(f"an exact verifier adds information: lower end of the 95% interval of its accuracy "
                                   f"gain after {rounds} rounds", med("exact", "low"), 0.0))
    result.add_claim(Claim.less("a closed loop cannot gain: upper end of the closed arm's gain interval",
                                med("closed", "high"), 0.0))
    result.add_claim(Claim.less("the same amount of accepted data without information cannot either: upper end of the "
                                "random verifier's gain interval (the exact arm's acceptance rates)",
                                med("random", "high"), 0.0))
    # 2. gain rises with the verifier's information
    result.add_claim(Claim.greater(f"the gain rises with the verifier's information: gain(exact) > gain({eta})",
                                   med("exact", "estimate"), med(eta, "estimate")))
    result.add_claim(Claim.greater(f"... and gain({eta}) > gain(random)", med(eta, "estimate"), med("random", "estimate")))
    # 3. reward hacking
    flag0 = float(np.median([arm["rounds"][0]["flag_rate"] for _, arm in main["gameable"]]))
    result.add_claim(Claim.greater(f"a gameable proxy is satisfied: its acceptance at round {rounds} exceeds the exact "
                                   "verifier's", final("gameable", "acceptance"), final("exact", "acceptance")))
    result.add_claim(Claim.less("... while true accuracy falls: upper end of the gameable arm's gain interval",
                                med("gameable", "high"), 0.0))
    result.add_claim(Claim.greater(f"... and the spurious flag spreads: flag rate at round {rounds} over round 0's",
                                   final("gameable", "flag_rate"), flag0))
    m.update({"flag_rate_round_0": flag0, "flag_rate_final": final("gameable", "flag_rate"),
              "acceptance_final": {name: final(name, "acceptance") for name in main if name not in
                                   ("closed", "argmax (closed)")}})

    # reported: information per arm
    rows = []
    for kind, table in gains.items():
        for name, pairs in table.items():
            iv = [p[0] for p in pairs]
            bits = float(np.median([arm["bits"] for _, arm in pairs]))
            gain = float(np.median([v.estimate for v in iv]))
            first = pairs[0][1]["rounds"]
            rows.append({"generator": kind, "arm": name, "accuracy round 0": round(first[0]["accuracy"], 3),
                         f"accuracy round {rounds}": round(first[-1]["accuracy"], 3), "gain": round(gain, 3),
                         "95% interval": f"[{np.median([v.low for v in iv]):.3f}, {np.median([v.high for v in iv]):.3f}]",
                         "I(Y; Y_hat) round 0": round(first[0]["mi_y_yhat"], 3),
                         f"I(Y; Y_hat) round {rounds}": round(first[-1]["mi_y_yhat"], 3),
                         "bits injected": round(bits, 1),
                         "bits per unit gain": None if gain <= 0 else round(bits / gain, 1)})
    result.tables["digits loops: accuracy, information and bits"] = rows
    m["digits"] = {kind: {name: {"gain": [p[0].to_dict() for p in pairs], "bits": [p[1]["bits"] for p in pairs],
                                 "rounds": pairs[0][1]["rounds"]} for name, pairs in table.items()}
                   for kind, table in gains.items()}

    gaussian, zipf_loops, linear = _gaussian_loops(s, seed), _zipf_loops(s, seed), _linear_loops(s, seed)
    T = s.gaussian_generations
    m["gaussian"] = {"mean_var_final": gaussian["mle"]["mean"][T], "se": gaussian["mle"]["se"][T],
                     "closed_form": gaussian["closed_form"][T],
                     "unbiased_mean_var_final": gaussian["unbiased"]["mean"][T],
                     "unbiased_median_var_final": gaussian["unbiased"]["median"][T]}
    m["zipf"] = {name: {k: v[-1] for k, v in series.items()} for name, series in zipf_loops.items() if name != "truth"}
    m["zipf"]["truth"] = zipf_loops["truth"]
    G = s.linear_generations - 1
    m["linear"] = {name: {"risk_1": linear[name]["mean"][0], f"risk_{G + 1}": linear[name]["mean"][G],
                          "ratio": linear[name]["mean"][G] / linear[name]["mean"][0]}
                   for name in ("replace", "accumulate")}
    m["linear"]["first_generation_theory"] = linear["first_generation_theory"]
    result.tables["closed-form loops (reported; prior work's rates)"] = [
        {"loop": f"Gaussian MLE, n = {s.gaussian_n}: mean variance at t = {T} ({s.gaussian_seeds} runs)",
         "measured": f"{m['gaussian']['mean_var_final']:.4f} (SE {m['gaussian']['se']:.4f})",
         "theory": round(m["gaussian"]["closed_form"], 4)},
        {"loop": f"linear regression, generation 1: mean excess risk ({s.linear_seeds} runs)",
         "measured": round(m["linear"]["replace"]["risk_1"], 4), "theory": round(m["linear"]["first_generation_theory"], 4)},
        {"loop": f"linear regression, replace: mean excess risk, generation {G + 1} / 1",
         "measured": round(m["linear"]["replace"]["ratio"], 2), "theory": float(G + 1)},
        {"loop": f"linear regression, accumulate: generation {G + 1} / 1", "measured":
         round(m["linear"]["accumulate"]["ratio"], 2),
         "theory": round(sum(1 / k ** 2 for k in range(1, G + 2)), 3)},
        *({"loop": f"Zipf K = {s.zipf_K}, {name}: entropy (bits) / support at t = {s.zipf_generations}",
           "measured": f"{v['entropy']:.2f} / {v['support']}",
           "theory": f"truth {zipf_loops['truth']['entropy']:.2f} / {s.zipf_K}"}
          for name, v in m["zipf"].items() if name != "truth")]
    if s.addition_pairs:
        addition = _addition_loops((s, seed))
        m["addition"] = addition
        result.tables["2-digit addition on a tiny LM (reported; greedy test accuracy per round)"] = [
            {"loop": name, **{f"round {t}": round(a, 3) for t, a in enumerate(v["accuracy"])},
             "kept per round": v["n_train"]} for name, v in addition.items()]
    m["total_seconds"] = time.perf_counter() - start
    result.figures = {"gaussian_variance": _gaussian_figure(gaussian), "zipf_and_regression": _zipf_figure(zipf_loops, linear),
                      "accuracy_and_information": _digits_figure(main, rounds),
                      "gain_vs_information": _gain_figure(main), "proxy_vs_truth": _hacking_figure(main)}
    result.notes = (
        f"Mode {config.mode}, seed {seed} (the split, the loops' draws and the round-0 flags drawn from it by "
        f"SeedSequence; {s.replications} replication(s) per seed, claims on their median). digits: {s.labelled} labelled, "
        f"{s.pool} pool, the rest test; {s.generators[0]} generator; labels drawn from predict_proba; replace; "
        f"{rounds} rounds; paired bootstrap ({s.bootstrap} resamples) over the test images. The loop never reads a "
        "pool label: truth lives in the verifiers. A RECONSTRUCTION of a position paper without code: the arms, "
        "policies and measurements are the issue's.")
    return result


# ----------------------------------------------------------------------------------------------
# figures
# ----------------------------------------------------------------------------------------------
def _gaussian_figure(g):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    t = range(len(g["closed_form"]))
    ax.plot(t, g["mle"]["mean"], label="MLE refit: mean sigma_t^2")
    ax.plot(t, g["closed_form"], ls="--", label="((n - 1) / n)^t")
    ax.plot(t, g["unbiased"]["mean"], label="unbiased refit: mean")
    ax.plot(t, g["unbiased"]["median"], label="unbiased refit: median")
    ax.set_xlabel("generation t")
    ax.set_ylabel("fitted variance")
    ax.legend(fontsize=7)
    return fig


def _zipf_figure(z, linear):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.6), layout="constrained")
    for i, key in enumerate(("entropy", "support")):
        ax = fig.add_subplot(1, 3, i + 1)
        for name, series in z.items():
            if name != "truth":
                ax.plot(series[key], label=name)
        ax.axhline(z["truth"][key], color="k", ls=":", lw=0.8, label="truth")
        ax.set_xlabel("generation")
        ax.set_title(f"Zipf categorical: {key}", fontsize=9)
        ax.legend(fontsize=7)
    ax = fig.add_subplot(1, 3, 3)
    for name in ("replace", "accumulate"):
        ax.plot(range(1, len(linear[name]["mean"]) + 1), linear[name]["mean"], marker="o", label=name)
    ax.set_xlabel("generation")
    ax.set_title("linear regression: mean ||w_t - w*||^2", fontsize=9)
    ax.legend(fontsize=7)
    return fig


def _digits_figure(main, rounds):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 3.8), layout="constrained")
    for i, (key, label) in enumerate((("accuracy", "test accuracy"), ("mi_y_yhat", "I(Y; Y_hat), bits"))):
        ax = fig.add_subplot(1, 2, i + 1)
        for name, pairs in main.items():
            ax.plot(range(rounds + 1), [r[key] for r in pairs[0][1]["rounds"]], marker=".", label=name)
        ax.set_xlabel("round")
        ax.set_ylabel(label)
        ax.legend(fontsize=6)
    return fig


def _gain_figure(main):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    for name, pairs in main.items():
        if name in ("closed", "argmax (closed)", "gameable"):
            continue
        iv, arm = pairs[0]
        mi = sum(r.get("mi_accept_correct") or 0 for r in arm["rounds"][1:]) / (len(arm["rounds"]) - 1)
        ax.errorbar([mi], [iv.estimate], yerr=[[iv.estimate - iv.low], [iv.high - iv.estimate]], fmt="o", capsize=3)
        ax.annotate(name, (mi, iv.estimate), fontsize=7, xytext=(4, 4), textcoords="offset points")
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xlabel("mean I(accept; correct) per sample, bits")
    ax.set_ylabel("accuracy gain after the last round (95% interval)")
    return fig


def _hacking_figure(main):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    rounds = main["gameable"][0][1]["rounds"]
    t = range(len(rounds))
    ax.plot(t[1:], [r["acceptance"] for r in rounds[1:]], marker="o", label="gameable: proxy acceptance")
    ax.plot(t, [r["flag_rate"] for r in rounds], marker="o", label="gameable: flag rate")
    ax.plot(t, [r["accuracy"] for r in rounds], marker="o", label="gameable: true test accuracy")
    exact = main["exact"][0][1]["rounds"]
    ax.plot(t, [r["accuracy"] for r in exact], ls="--", label="exact verifier: true test accuracy")
    ax.set_xlabel("round")
    ax.set_ylim(0, 1.02)
    ax.legend(fontsize=7)
    return fig
