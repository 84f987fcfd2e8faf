"""``icml26 bench llp``: forward+backward speed and peak memory of the LLP losses at large bags.

One training step's loss of :class:`icml26.training.llp.risk.LLPLoss` (arXiv 2509.15145; LowVar is the
reconstructed estimator, EasyLLP and DLLP prior work): a linear model on ``d = 64`` features gives
``[16, 512, 10]`` logits (16 bags of k = 512 instances, c = 10 classes), then the loss and its
backward pass. Timed in interleaved rounds so that a slow spell of a shared machine lands on every
method; peak memory is what one step allocates above what was allocated before it. The target
(LowVar within 1.2x of EasyLLP's time) is the issue's: the control variate costs one leave-one-bag-out
mean per step.
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: Problem sizes; the tests shrink them.
SIZES = {"bags": 16, "k": 512, "c": 10, "d": 64}
METHODS = ("lowvar", "easyllp", "dllp")
TARGET_RATIO = 1.2
CPU_THREADS = 1  # stable times and ratios on a shared machine (two threads fight other jobs for the cores)


def _step(method, sizes, device, seed):
    import torch

    from icml26.training.llp import LLPLoss

    gen = torch.Generator().manual_seed(seed)
    B, k, c, d = sizes["bags"], sizes["k"], sizes["c"], sizes["d"]
    x = torch.randn(B, k, d, generator=gen).to(device)
    alpha = torch.distributions.Dirichlet(torch.ones(c)).sample((B,)).to(device)
    net = torch.nn.Linear(d, c).to(device)
    loss = LLPLoss(method, prior=torch.full((c,), 1.0 / c))

    def step():
        net.zero_grad(set_to_none=True)
        value = loss(net(x), alpha)
        value.backward()
        return value

    return step


@benchmark("llp", title="LLP losses: forward+backward bags/s and peak memory at k = 512, c = 10", paper="llp")
def run(config, sizes: dict | None = None) -> Result:
    import torch

    from icml26.eval.measure import interleaved_median_ms, peak_alloc_mb

    size = dict(sizes or SIZES)
    device = config.torch_device()
    repeats = 20 if config.quick else 100
    threads = torch.get_num_threads()
    if device.type == "cpu":
        torch.set_num_threads(CPU_THREADS)
    try:
        steps = {m: _step(m, size, device, config.seeds[0]) for m in METHODS}
        ms = interleaved_median_ms(steps, device, warmup=3, repeats=repeats)
        rows = []
        for method in METHODS:
            rows.append({"method": method, "bags": size["bags"], "k": size["k"], "c": size["c"],
                         "fwd_bwd_ms": round(ms[method], 3), "bags_per_s": round(size["bags"] / (ms[method] / 1e3), 1),
                         "peak_mb": round(peak_alloc_mb(steps[method], device), 2)})
    finally:
        torch.set_num_threads(threads)
    result = Result(tables={"forward+backward": rows},
                    metrics={f"{r['method']}_{key}": r[key] for r in rows for key in ("fwd_bwd_ms", "bags_per_s", "peak_mb")})
    result.metrics["device"] = str(device)
    result.add_claim(Claim.at_most(f"LowVar forward+backward time within {TARGET_RATIO}x of EasyLLP's "
                                   f"({size['bags']} bags of k = {size['k']}, c = {size['c']}; ms)",
                                   ms["lowvar"], ms["easyllp"], factor=TARGET_RATIO, unit="ms"))
    result.notes = (f"Device {device}{f' ({CPU_THREADS} thread)' if device.type == 'cpu' else ''}; median of {repeats} interleaved rounds after 3 warm-up rounds. A step: a linear "
                    f"layer on d = {size['d']} features, the loss (clipped log-loss per class for LowVar and EasyLLP; "
                    "DLLP's cross-entropy to the bag-mean prediction) and the backward pass.")
    return result
