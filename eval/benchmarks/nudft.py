"""``icml26 bench nudft``: time and peak memory of the NUDFT forward+backward against N and K.

The op is the non-uniform DFT of TFMixer's Global Frequency Module (arXiv 2602.00582).
CPU: the torch reference with the whole twiddle tile materialised (``chunk_size = N``) against the
chunked reference (bounded memory). GPU (when present): the Triton kernel against the materialised
reference at the size of a batch of irregular series (S = 3072 series = 96 rows x 32 channels,
N = 256 samples with K = 64 shared frequencies, and N = 1024 with K = 128; fp32). Every path is
checked against the materialised reference before it is timed; ``--device cuda`` runs the GPU
suite alone, ``auto`` both. With ``ICML26_BENCH_DRY_RUN=1``
(the GPU check's ``--dry-run``) both suites run at the tiny :data:`DRY_SIZES`, the GPU suite on CPU
tensors when no GPU is present (Triton in its interpreter): that shows the code runs, its numbers
mean nothing.
"""

from __future__ import annotations

from typing import Any

from icml26.errors import input_error
from icml26.registry import benchmark
from icml26.results import Claim, Result

#: Problem sizes; the tests shrink them. CPU: every N with every K; GPU: the (N, K) pairs of "nk".
SIZES: dict[str, Any] = {
    "cpu": {"rows": 64, "channels": 8, "n": [64, 256, 1024], "k": [16, 64], "chunk": 32},
    "gpu": {"rows": 96, "channels": 32, "nk": [(256, 64), (1024, 128)]},
}
DRY_RUN_ENV = "ICML26_BENCH_DRY_RUN"
DRY_SIZES: dict[str, Any] = {
    "cpu": {"rows": 4, "channels": 3, "n": [32, 128], "k": [8], "chunk": 16},
    "gpu": {"rows": 4, "channels": 3, "nk": [(40, 8)]},
}


def _problem(rows, channels, n, k, device, seed):
    import torch

    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, channels, n, generator=gen)
    t = torch.sort(torch.rand(rows, 1, n, generator=gen), dim=-1).values
    mask = torch.rand(rows, channels, n, generator=gen) > 0.3
    omega = 2 * torch.pi * torch.arange(1, k + 1, dtype=torch.float32)
    grads = torch.randn(2, rows, channels, k, generator=gen)
    return [v.to(device) for v in (x, t, omega, mask, grads)]


def _run(problem, **kwargs):
    import torch

    from icml26.kernels import nudft

    x, t, omega, mask, grads = problem
    leaves = [v.detach().clone().requires_grad_() for v in (x, t, omega)]
    r, i = nudft(leaves[0], leaves[1], leaves[2], mask, **kwargs)
    torch.autograd.backward((r, i), (grads[0], grads[1]))
    return r.detach(), i.detach(), *[v.grad for v in leaves]


def _max_rel(got, want) -> float:
    return max(((g - w).abs().max() / w.abs().max().clamp(min=1e-30)).item() for g, w in zip(got, want))


def _figure(rows, title):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), layout="constrained")
    ax_t, ax_m = fig.subplots(1, 2)
    for backend in dict.fromkeys(r["backend"] for r in rows):
        for k in sorted({r["K"] for r in rows}):
            pts = sorted((r["N"], r["fwd_bwd_ms"], r["peak_mb"]) for r in rows if r["backend"] == backend and r["K"] == k)
            if pts:
                ax_t.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{backend}, K={k}")
                ax_m.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=f"{backend}, K={k}")
    for ax, label in ((ax_t, "forward+backward (ms)"), (ax_m, "peak allocated (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("samples per series N")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend(fontsize=7)
    fig.suptitle(title)
    return fig


def _suite(device, size, backends, repeats, seed):
    from icml26.eval.measure import median_ms, peak_alloc_mb

    rows = []
    pairs = size.get("nk") or [(n, k) for n in size["n"] for k in size["k"]]
    for n, k in pairs:
        problem = _problem(size["rows"], size["channels"], n, k, device, seed)
        want = _run(problem, backend="torch", chunk_size=n)  # the materialised reference
        for name, kwargs in backends(n):
            got = _run(problem, **kwargs)  # also the warm-up: compiles and autotunes the Triton kernel
            rows.append({
                "backend": name, "N": n, "K": k, "S": size["rows"] * size["channels"],
                "fwd_bwd_ms": median_ms(lambda: _run(problem, **kwargs), device, warmup=1, repeats=repeats),
                "peak_mb": peak_alloc_mb(lambda: _run(problem, **kwargs), device),
                "max_rel_err": _max_rel(got, want),
            })
    return rows


@benchmark("nudft", title="NUDFT forward+backward: time and peak memory vs N and K", paper="tfmixer")
def run(config):
    import os

    import torch

    device = config.torch_device()
    if device.type == "cuda" and not torch.cuda.is_available():
        raise input_error("icml26 bench nudft", "--device", "'auto' or 'cpu' on a machine without a GPU",
                          config.device)
    dry = os.environ.get(DRY_RUN_ENV, "0") == "1"
    sizes = DRY_SIZES if dry else SIZES
    gpu_device = device if device.type == "cuda" else torch.device("cpu") if dry else None
    repeats = 1 if dry else 3 if config.quick else 10
    cpu = sizes["cpu"]
    result = Result()
    if config.device.startswith("cuda"):  # asked for the GPU: its suite alone (the GPU check's time budget)
        result.notes = "--device cuda: the CPU suite was skipped (run with --device auto for both). "
    else:
        rows = _suite(torch.device("cpu"), cpu, lambda n: [
            ("torch materialised", {"backend": "torch", "chunk_size": n}),
            (f"torch chunked ({cpu['chunk']})", {"backend": "torch", "chunk_size": cpu["chunk"]}),
        ], repeats, config.seeds[0])
        largest_n, largest_k = max(cpu["n"]), max(cpu["k"])
        pick = {r["backend"].split(" (")[0]: r for r in rows if r["N"] == largest_n and r["K"] == largest_k}
        result.tables["cpu"] = rows
        result.figures["cpu"] = _figure(rows, "NUDFT on CPU")
        result.metrics.update({"cpu_max_rel_err": max(r["max_rel_err"] for r in rows)})
        result.add_claim(Claim.less(f"chunked reference needs less peak memory than the materialised one "
                                    f"(N={largest_n}, K={largest_k})", pick["torch chunked"]["peak_mb"],
                                    pick["torch materialised"]["peak_mb"], unit="MiB"))
        result.add_claim(Claim.at_most("chunked reference agrees with the materialised one (max rel. error)",
                                       result.metrics["cpu_max_rel_err"], 1e-4))

    if gpu_device is not None:
        gpu_rows = _suite(gpu_device, sizes["gpu"], lambda n: [
            ("torch materialised", {"backend": "torch", "chunk_size": n}),
            ("triton", {"backend": "triton"}),
        ], repeats, config.seeds[0])
        name = torch.cuda.get_device_name(gpu_device) if gpu_device.type == "cuda" else "cpu (dry run)"
        result.tables["gpu"] = gpu_rows
        result.figures["gpu"] = _figure(gpu_rows, f"NUDFT on {name}")
        result.metrics["gpu_name"] = name
        if dry:
            result.notes += "Dry run (ICML26_BENCH_DRY_RUN=1): tiny sizes; the numbers only show that the code runs."
        ref = {(r["N"], r["K"]): r for r in gpu_rows if r["backend"] == "torch materialised"}
        for r in (r for r in gpu_rows if r["backend"] == "triton"):
            base = ref[(r["N"], r["K"])]
            result.add_claim(Claim.at_least(f"Triton forward+backward speed-up over the reference (S={r['S']}, "
                                            f"N={r['N']}, K={r['K']})", base["fwd_bwd_ms"] / r["fwd_bwd_ms"], 3.0))
            result.add_claim(Claim.at_most(f"Triton agrees with the reference (max rel. error, N={r['N']}, "
                                           f"K={r['K']})", r["max_rel_err"], 1e-4))
            # O(S (N + K)) extra memory: a few fp32 copies of the inputs and outputs, never S N K.
            linear_mb = r["S"] * (r["N"] + r["K"]) * 4 / 2**20
            result.add_claim(Claim.at_most(f"Triton peak memory is O(S(N+K)): at most 16 x S(N+K) fp32 "
                                           f"(N={r['N']})", r["peak_mb"], 16 * linear_mb, unit="MiB"))
    else:
        result.notes = "No GPU: the Triton path was not timed (it runs only in the CPU interpreter here)."
    return result
