"""``icml26 bench r2g``: seconds per training step and per evaluation on Grokfast's task, eager vs ``torch.compile``.

The R2G full mode trains eight runs of up to 25,000 steps on 2 CPU cores, one thread each, so the time per
step decides whether it fits one sitting. This benchmark times, on one thread, the two things
:func:`~icml26.training.r2g.train_anchor` repeats: one minibatch step (forward at ``=``, cross-entropy, R2G's
``alpha / D`` for the R2G arm, backward, Adam) on 512 pairs, and one evaluation of the 4,656 test pairs
(after every epoch of about 9.1 steps), once on the model as it is and once through
``torch.compile(model, dynamic=False)`` (CPU inductor; the same model and weights, only the kernels fused).
Compilation is timed apart (the first calls) and the medians exclude it. ``per_step`` is a training step plus
its share of the evaluation, the figure a run's length follows; ``compile_breakeven_steps`` is the run length
past which compiling pays.
"""

from __future__ import annotations

import statistics
import time

from icml26.registry import benchmark
from icml26.results import Claim, Result

SIZES = {"quick": {"steps": 20, "evals": 4, "arms": ("baseline", "R2G")},
         "full": {"steps": 100, "evals": 15, "arms": ("baseline", "R2G")}}


def _time_arm(arm: str, compiled: bool, steps: int, evals: int, seed: int) -> dict[str, float]:
    import torch
    import torch.nn.functional as F

    from icml26.eval.experiments.r2g import SELECTED_ALPHA
    from icml26.eval.tasks.r2g import anchor_dataset, anchor_decoder
    from icml26.training.r2g import R2GLoss, random_pairing

    data = anchor_dataset(97, "mul", 0.5, seed=seed)
    model = anchor_decoder(97, "mul", seed=seed)
    alpha = SELECTED_ALPHA["euclidean"] if arm == "R2G" else 0.0
    hooks = R2GLoss(model, alpha=alpha, positions=list(data.operand_positions), track_stats=False)
    forward = torch.compile(model, dynamic=False) if compiled else model
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    pairing = torch.Generator().manual_seed(seed)
    x, y = data.x_train[:512], data.y_train[:512]

    def train_step() -> None:
        logits = forward(input_ids=x, logits_to_keep=1, use_cache=False).logits[:, -1].float()
        loss = F.cross_entropy(logits, y)
        if alpha > 0:
            loss = loss + hooks(perm=random_pairing(x.shape[0], generator=pairing))
        hooks.clear()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    @torch.no_grad()
    def evaluate() -> None:
        model.eval()
        forward(input_ids=data.x_test, logits_to_keep=1, use_cache=False).logits[:, -1].argmax(-1)
        model.train()
        hooks.clear()

    def timed(fn, n: int) -> list[float]:
        out = []
        for _ in range(n):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
        return out

    try:
        warm = sum(timed(train_step, 2)) + sum(timed(evaluate, 2))  # compiles both graphs when compiled
        step = statistics.median(timed(train_step, steps))
        evaluation = statistics.median(timed(evaluate, evals))
    finally:
        hooks.remove()
    steps_per_epoch = data.x_train.shape[0] / 512
    return {"train_step_s": step, "eval_s": evaluation, "per_step_s": step + evaluation / steps_per_epoch,
            "warmup_s": warm}


@benchmark("r2g", title="R2G on Grokfast's task: s/step (train + its share of evaluation), eager vs torch.compile, "
           "one thread", paper="r2g")
def run(config, sizes: dict | None = None):
    import torch

    size = (sizes or SIZES)["full" if config.mode == "full" else "quick"]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        rows = [{"arm": arm, "compiled": compiled,
                 **_time_arm(arm, compiled, size["steps"], size["evals"], config.seeds[0])}
                for arm in size["arms"] for compiled in (False, True)]
    finally:
        torch.set_num_threads(threads)
    by = {(r["arm"], r["compiled"]): r for r in rows}
    metrics: dict = {"threads": 1, **size}
    claims = []
    for arm in size["arms"]:
        eager, fused = by[(arm, False)], by[(arm, True)]
        saved = eager["per_step_s"] - fused["per_step_s"]
        metrics[f"{arm}/eager_s_per_step"] = eager["per_step_s"]
        metrics[f"{arm}/compiled_s_per_step"] = fused["per_step_s"]
        metrics[f"{arm}/compile_s"] = fused["warmup_s"] - eager["warmup_s"]
        metrics[f"{arm}/compile_breakeven_steps"] = (
            metrics[f"{arm}/compile_s"] / saved if saved > 0 else None)
        claims.append(Claim.less(f"{arm}: seconds per step (training step + its share of the per-epoch evaluation, "
                                 "one thread), torch.compile vs eager", fused["per_step_s"], eager["per_step_s"],
                                 unit="s"))
    notes = ("One thread; medians over the timed calls after two warm-up calls of each (the compiled arm's warm-up "
             "is its compilation). The full mode compiles (its runs are up to 25,000 steps); the quick mode, whose "
             "runs are at most 1,500 steps, does not.")
    return Result(metrics=metrics, tables={"timings": rows}, claims=claims, notes=notes)
