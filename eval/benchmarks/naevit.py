"""``icml26 bench naevit``: NAEViT attention against the attention a LLaVA-style model pays.

NAEViT is SAISA's attention rule (arXiv 2502.02458): visual tokens issue no queries.

One sequence is ``[P text][n_visual image][n_text - P text]`` (``T = n_visual + n_text`` tokens).
NAEViT computes queries for the ``n_text`` text rows only, over all ``T`` keys; a LLaVA-style model
runs full causal attention with a query for every token (``Tq = Tk = T``). Backends:

- ``reference``: ``naevit_attention(backend="torch")``, the readable O(Tq x Tk) reference (CPU);
- ``sdpa_split``: ``naevit_attention(backend="sdpa_split")``, two stock SDPA calls;
- ``sdpa_causal_all``: SDPA ``is_causal=True`` with queries for all ``T`` tokens (the baseline cost);
- ``triton``: ``naevit_attention(backend="triton")``, the fused kernel (GPU);
- ``sdpa_mask``: SDPA with the explicit boolean mask ``k_pos <= q_pos`` (GPU);
- ``flex``: compiled FlexAttention with a block mask from ``kv_idx <= q_pos[b, q_idx]`` (GPU).

Every backend's forward output and its gradients (dq, dk, dv) are checked against the fp32
reference before it is timed. The full-causal baseline is checked on its text rows, with an
upstream gradient that is zero on the visual rows, so that its dk and dv equal NAEViT's.

Sizes live in :data:`SIZES` and repeat counts in :data:`REPEATS` (tests shrink them). On a GPU,
quick mode measures n_text in {64, 256, 1024} and full mode adds 4096 (:data:`GPU_FULL_N_TEXT`);
``--device cuda`` runs the GPU suite alone, ``auto`` both suites.
With ``ICML26_BENCH_DRY_RUN=1`` (the GPU check's ``--dry-run``) both suites run at the tiny
:data:`DRY_SIZES`, the GPU suite on CPU tensors when no GPU is present (Triton in its interpreter,
wall-clock timing): that shows the GPU code runs, its numbers mean nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from icml26.errors import input_error
from icml26.eval.measure import (
    error_text,
    geomean,
    interleaved_median_ms,
    max_abs_error,
    median_ms,
    nanmax,
    peak_alloc_mb,
)
from icml26.registry import benchmark
from icml26.results import Claim, Result, to_jsonable

SIZES: dict[str, dict[str, Any]] = {
    "cpu": dict(batch=2, n_visual=576, n_text=(64, 256), heads_q=8, heads_kv=2, head_dim=64, prefix=8,
                dtype="float32"),
    "gpu": dict(batch=8, n_visual=576, n_text=(64, 256, 1024), heads_q=32, heads_kv=8, head_dim=128,
                prefix=8, dtype="bfloat16"),
    # GPU correctness check of the Triton kernel: packed sequences (prefix, n_visual, text after the image).
    "gpu_varlen": dict(sequences=((3, 40, 17), (0, 64, 1), (8, 100, 70), (5, 0, 12), (1, 129, 64)),
                       heads_q=4, heads_kv=2, head_dim=128, dtype="bfloat16"),
}
GPU_FULL_N_TEXT = (64, 256, 1024, 4096)  # full mode on a GPU: the quick sizes and a long text
DRY_RUN_ENV = "ICML26_BENCH_DRY_RUN"
# Dry run: fp32 for the benchmark suite and fp16 for the varlen check (Triton 3.9's interpreter gets
# tl.dot on bf16 operands wrong on CPU).
DRY_SIZES: dict[str, dict[str, Any]] = {
    "cpu": dict(batch=1, n_visual=24, n_text=(8, 20), heads_q=4, heads_kv=2, head_dim=16, prefix=3, dtype="float32"),
    "gpu": dict(batch=1, n_visual=24, n_text=(20,), heads_q=4, heads_kv=2, head_dim=16, prefix=3, dtype="float32"),
    "gpu_varlen": dict(sequences=((3, 10, 5), (0, 16, 1), (2, 0, 7)), heads_q=4, heads_kv=2, head_dim=32,
                       dtype="float16"),
}
DRY_REPEATS = (1, 2)  # (warm-up calls, timed calls) of a dry run, on either suite
# Median of the timed calls. CPU: (warm-up rounds, timed rounds), the backends taking turns in each
# round. GPU: (warm-up ms, timed ms) for triton.testing.do_bench (CUDA events, L2 flushed per call).
REPEATS: dict[str, dict[str, tuple[int, int]]] = {
    "cpu": {"quick": (2, 7), "full": (5, 30)},
    "gpu": {"quick": (25, 100), "full": (100, 500)},
}
CPU_BACKENDS = ("reference", "sdpa_split", "sdpa_causal_all")
GPU_BACKENDS = ("triton", "sdpa_split", "sdpa_causal_all", "sdpa_mask", "flex")
# One thread: on a shared machine, OpenMP threads that get descheduled stall every parallel region and
# make 2-thread timings swing by 10x between runs; one thread measures the per-core cost reproducibly.
CPU_THREADS = 1
CPU_AGREEMENT_TOL = 1e-5  # fp32: sdpa_split and the reference must agree to this (max abs error)
GPU_ERROR_FACTOR = 2.0  # bf16: Triton's error vs fp32 may be at most this times stock SDPA's error


# ------------------------------------------------------------------------------------------------
# Inputs, reference, timing and memory
# ------------------------------------------------------------------------------------------------
@dataclass
class _Problem:
    """One benchmark configuration: leaf tensors (requiring grad) and the NAEViT query positions."""

    n_text: int
    n_keys: int
    q: Any  # [B, Hq, n_text, D]: the text queries (= q_all at text_index)
    q_all: Any  # [B, Hq, T, D]: a query for every token, for full causal attention
    k: Any  # [B, Hkv, T, D]
    v: Any
    q_pos: Any  # [B, n_text] long: the key index each text query sees up to
    text_index: Any  # [n_text] long: where the text rows sit among the T tokens
    grad_text: Any  # upstream gradient of the text rows
    grad_all: Any  # the same on the text rows of a full-causal output, zero on the visual rows

    def clear_grads(self) -> None:
        for t in (self.q, self.q_all, self.k, self.v):
            t.grad = None


def _make_problem(size: dict, n_text: int, device, dtype, seed: int) -> _Problem:
    import torch

    b, hq, hkv, d = size["batch"], size["heads_q"], size["heads_kv"], size["head_dim"]
    prefix = min(size["prefix"], n_text)
    n_keys = size["n_visual"] + n_text
    text_index = torch.cat([torch.arange(prefix), torch.arange(prefix + size["n_visual"], n_keys)]).to(device)
    gen = torch.Generator(device=device).manual_seed(seed)

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32).to(dtype)

    q_all, k, v = randn(b, hq, n_keys, d), randn(b, hkv, n_keys, d), randn(b, hkv, n_keys, d)
    q = q_all[:, :, text_index].clone()
    grad_text = randn(b, hq, n_text, d)
    grad_all = torch.zeros_like(q_all)
    grad_all[:, :, text_index] = grad_text
    for t in (q, q_all, k, v):
        t.requires_grad_()
    return _Problem(n_text, n_keys, q, q_all, k, v, text_index.expand(b, -1).contiguous(), text_index,
                    grad_text, grad_all)


@dataclass
class _Reference:
    out: Any
    dq: Any
    dk: Any
    dv: Any


def _reference(p: _Problem) -> _Reference:
    """fp32 reference output and gradients, a few sequences at a time (score chunks of about 1 GiB)."""
    import torch

    from icml26.kernels.naevit import naevit_attention

    b, hq = p.q.shape[:2]
    chunk = max(1, 2**30 // (4 * hq * p.n_text * p.n_keys))
    parts = []
    for start in range(0, b, chunk):
        sl = slice(start, start + chunk)
        q, k, v = (t[sl].detach().float().requires_grad_() for t in (p.q, p.k, p.v))
        out = naevit_attention(q, k, v, p.q_pos[sl], backend="torch")
        dq, dk, dv = torch.autograd.grad(out, (q, k, v), p.grad_text[sl].float())
        parts.append((out.detach(), dq, dk, dv))
    return _Reference(*(torch.cat(ts) for ts in zip(*parts)))


# ------------------------------------------------------------------------------------------------
# Backends: make(problem) -> (all_tokens, fn(q, k, v) -> out)
# ------------------------------------------------------------------------------------------------
def _naevit_backend(name: str):
    def make(p: _Problem):
        from icml26.kernels.naevit import naevit_attention

        return False, lambda q, k, v: naevit_attention(q, k, v, p.q_pos, backend=name)

    return make


def _sdpa_causal_all(p: _Problem):
    import torch.nn.functional as F

    gqa = p.q.shape[1] != p.k.shape[1]
    return True, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)


def _sdpa_mask(p: _Problem):
    import torch
    import torch.nn.functional as F

    gqa = p.q.shape[1] != p.k.shape[1]
    key_index = torch.arange(p.n_keys, device=p.q.device)
    mask = (key_index[None, None, :] <= p.q_pos[:, :, None])[:, None]  # [B, 1, n_text, T], built once
    return False, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa)


def _flex(p: _Problem):
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    torch._dynamo.reset()  # a fresh compile cache per shape: the recompile limit never falls back to eager
    q_pos = p.q_pos

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_pos[b, q_idx]

    block_mask = create_block_mask(mask_mod, p.q.shape[0], None, p.n_text, p.n_keys, device=p.q.device)
    compiled = torch.compile(flex_attention, dynamic=False)
    gqa = p.q.shape[1] != p.k.shape[1]
    return False, lambda q, k, v: compiled(q, k, v, block_mask=block_mask, enable_gqa=gqa)


BACKEND_FACTORIES = {
    "reference": _naevit_backend("torch"),
    "sdpa_split": _naevit_backend("sdpa_split"),
    "triton": _naevit_backend("triton"),
    "sdpa_causal_all": _sdpa_causal_all,
    "sdpa_mask": _sdpa_mask,
    "flex": _flex,
}


class _Candidate:
    """One backend on one problem: its table row, its timed closures and what went wrong.

    With ``tolerant`` an exception in a phase is recorded in the row's ``error`` and the phases that
    depend on it are skipped (their numbers stay NaN); otherwise it propagates.
    """

    def __init__(self, name: str, p: _Problem, device, tolerant: bool):
        nan = float("nan")
        self.name, self.p, self.device, self.tolerant = name, p, device, tolerant
        self.row: dict[str, Any] = {"n_text": p.n_text, "backend": name, "queries": None, "keys": p.n_keys,
                                    "fwd_ms": nan, "fwd_bwd_ms": nan, "fwd_peak_mb": nan,
                                    "fwd_bwd_peak_mb": nan, "fwd_err": nan, "grad_err": nan, "error": ""}
        self.errors: list[str] = []
        self.timed: dict[str, Callable[[], Any]] = {}  # "fwd" / "fwd_bwd" -> closure, once checked

    def attempt(self, phase: str, thunk: Callable[[], Any]) -> bool:
        if not self.tolerant:
            thunk()
            return True
        try:
            thunk()
            return True
        except Exception as exc:  # recorded in the table; the benchmark goes on
            self.errors.append(f"{phase}: {error_text(exc)}")
            self.row["error"] = "; ".join(self.errors)
            return False

    def check(self, ref: _Reference) -> None:
        """Build the backend, compare its output and gradients with the reference, arm the timers."""
        import torch

        p, made = self.p, {}

        def setup():
            made["all_tokens"], made["fn"] = BACKEND_FACTORIES[self.name](p)

        if not self.attempt("setup", setup):
            return
        all_tokens, fn = made["all_tokens"], made["fn"]
        q_in = p.q_all if all_tokens else p.q
        grad = p.grad_all if all_tokens else p.grad_text
        self.row["queries"] = q_in.shape[2]

        plain = [t.detach() for t in (q_in, p.k, p.v)]  # FlexAttention on CPU refuses inputs that require grad

        def fwd():
            with torch.no_grad():
                return fn(*plain)

        def fwd_bwd():
            p.clear_grads()
            fn(q_in, p.k, p.v).backward(grad)

        def check_fwd():
            out = fwd()
            self.row["fwd_err"] = max_abs_error(out[:, :, p.text_index] if all_tokens else out, ref.out)

        def check_grads():
            fwd_bwd()
            dq = q_in.grad[:, :, p.text_index] if all_tokens else q_in.grad
            self.row["grad_err"] = max(max_abs_error(dq, ref.dq), max_abs_error(p.k.grad, ref.dk),
                                       max_abs_error(p.v.grad, ref.dv))

        if self.attempt("forward", check_fwd):
            self.timed["fwd"] = fwd
            if self.attempt("backward", check_grads):
                self.timed["fwd_bwd"] = fwd_bwd
        p.clear_grads()

    def time_gpu(self, phase: str, warmup_ms: int, rep_ms: int) -> None:
        """CUDA-event timing with an L2 flush before each call (``triton.testing.do_bench``); a dry run's
        GPU suite on CPU tensors takes a wall-clock median of ``DRY_REPEATS`` calls instead."""

        def measure():
            if self.device.type != "cuda":
                warmup, repeats = DRY_REPEATS
                self.row[f"{phase}_ms"] = median_ms(self.timed[phase], self.device, warmup=warmup, repeats=repeats)
                return
            from triton.testing import do_bench

            self.row[f"{phase}_ms"] = do_bench(self.timed[phase], warmup=warmup_ms, rep=rep_ms, return_mode="median")

        if phase in self.timed:
            self.attempt(f"{phase} timing", measure)
            self.p.clear_grads()

    def measure_memory(self) -> None:
        for phase, fn in self.timed.items():
            self.p.clear_grads()

            def measure():
                self.row[f"{phase}_peak_mb"] = peak_alloc_mb(fn, self.device)

            self.attempt(f"{phase} memory", measure)
        self.p.clear_grads()


def _time_cpu_interleaved(candidates: list[_Candidate], phase: str, warmup: int, repeats: int) -> None:
    """Median wall time per backend, calling the backends in turn in every round, so that load from
    other processes on a shared machine lands on every backend alike instead of on one."""
    active = [c for c in candidates if phase in c.timed]
    times = interleaved_median_ms({c.name: c.timed[phase] for c in active}, "cpu", warmup=warmup, repeats=repeats)
    for c in active:
        c.row[f"{phase}_ms"] = times[c.name]
        c.p.clear_grads()


def _suite(kind: str, backends, device, size: dict, reps: tuple[int, int], seed: int,
           on_row: Callable[[dict], None]) -> None:
    """Check, time and measure every backend at every ``n_text`` of ``size``; rows go to ``on_row``."""
    import gc

    import torch

    dtype = getattr(torch, size["dtype"])
    for n_text in size["n_text"]:
        p = _make_problem(size, n_text, device, dtype, seed)
        ref = _reference(p)
        candidates = [_Candidate(name, p, device, tolerant=kind == "gpu") for name in backends]
        for c in candidates:
            c.check(ref)
        for phase in ("fwd", "fwd_bwd"):
            if kind == "gpu":
                for c in candidates:
                    c.time_gpu(phase, *reps)
            else:
                _time_cpu_interleaved(candidates, phase, *reps)
        for c in candidates:
            c.measure_memory()
            on_row({"device": kind, **c.row})
        del p, ref, candidates
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------------
# GPU correctness of the Triton kernel on a packed (varlen) batch in bf16
# ------------------------------------------------------------------------------------------------
def _varlen_check(device, setup: dict, seed: int) -> list[dict[str, Any]]:
    """Output and dq/dk/dv of Triton and stock SDPA (``sdpa_split``) in bf16 against the fp32 reference.

    The last row is the error of merely rounding the fp32 reference to bf16: the floor no bf16
    kernel can beat, used as a lower bound for the tolerance.
    """
    import torch

    from icml26.kernels.naevit import naevit_attention

    dtype = getattr(torch, setup["dtype"])
    cu_q, cu_k, q_pos = [0], [0], []
    for prefix, n_visual, n_after in setup["sequences"]:
        n = prefix + n_visual + n_after
        q_pos += list(range(prefix)) + list(range(prefix + n_visual, n))
        cu_q.append(cu_q[-1] + prefix + n_after)
        cu_k.append(cu_k[-1] + n)
    gen = torch.Generator(device=device).manual_seed(seed)
    hq, hkv, d = setup["heads_q"], setup["heads_kv"], setup["head_dim"]
    q, k, v = (torch.randn(n, h, d, generator=gen, device=device).to(dtype)
               for n, h in ((cu_q[-1], hq), (cu_k[-1], hkv), (cu_k[-1], hkv)))
    grad_out = torch.randn(cu_q[-1], hq, d, generator=gen, device=device).to(dtype)
    packing = dict(q_pos=torch.tensor(q_pos, device=device),
                   cu_seqlens_q=torch.tensor(cu_q, dtype=torch.int32, device=device),
                   cu_seqlens_k=torch.tensor(cu_k, dtype=torch.int32, device=device),
                   max_seqlen_q=max(b - a for a, b in zip(cu_q, cu_q[1:])),
                   max_seqlen_k=max(b - a for a, b in zip(cu_k, cu_k[1:])))

    def run(backend: str, cast):
        leaves = [t.detach().to(cast).requires_grad_() for t in (q, k, v)]
        out = naevit_attention(*leaves, backend=backend, **packing)
        grads = torch.autograd.grad(out, leaves, grad_out.to(cast))
        return [out.detach().float()] + [g.float() for g in grads]

    names = ("out_err", "dq_err", "dk_err", "dv_err")
    ref = run("torch", torch.float32)
    rows = []
    for backend in ("triton", "sdpa_split"):
        row: dict[str, Any] = {"backend": backend, **{n: float("nan") for n in names}, "error": ""}
        try:
            got = run(backend, dtype)
            row.update({n: max_abs_error(a, b) for n, a, b in zip(names, got, ref)})
        except Exception as exc:  # a crash of our kernel leaves NaN, so its claims fail
            row["error"] = error_text(exc)
        rows.append(row)
    rows.append({"backend": f"fp32 reference rounded to {setup['dtype']}",
                 **{n: max_abs_error(r.to(dtype), r) for n, r in zip(names, ref)}, "error": ""})
    return rows


# ------------------------------------------------------------------------------------------------
# Figures, claims, run
# ------------------------------------------------------------------------------------------------
def _figure(rows: list[dict], title: str):
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullLocator

    fig = Figure(figsize=(11, 7.5))
    axes = fig.subplots(2, 2, sharex=True)
    panels = [("fwd_ms", "forward time (ms)"), ("fwd_bwd_ms", "forward+backward time (ms)"),
              ("fwd_peak_mb", "forward peak alloc (MiB)"), ("fwd_bwd_peak_mb", "forward+backward peak alloc (MiB)")]
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    sizes = sorted({r["n_text"] for r in rows})
    for ax, (key, label) in zip(axes.flat, panels):
        for name in backends:
            points = [(r["n_text"], r[key]) for r in rows
                      if r["backend"] == name and not math.isnan(r[key]) and r[key] > 0]
            if points:
                ax.plot(*zip(*points), marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [str(n) for n in sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_yscale("log")
        ax.set_title(label, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[1]:
        ax.set_xlabel("n_text (text tokens; the image has a fixed n_visual)")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def _value(rows, backend: str, key: str, n_text: int | None = None) -> float:
    for r in rows:
        if r["backend"] == backend and (n_text is None or r["n_text"] == n_text):
            return r[key]
    return float("nan")


def _metrics(rows, kind: str) -> dict[str, float]:
    metrics = {}
    for r in rows:
        for key in ("fwd_ms", "fwd_bwd_ms"):
            metrics[f"{kind}.{r['backend']}.n{r['n_text']}.{key}"] = r[key]
    for name in dict.fromkeys(r["backend"] for r in rows):
        for key in ("fwd_err", "grad_err"):
            metrics[f"{kind}.{name}.max_{key}"] = nanmax(r[key] for r in rows if r["backend"] == name)
    return metrics


def _cpu_claims(rows, size: dict) -> list[Claim]:
    n0 = min(size["n_text"])
    return [
        Claim.less(f"CPU: sdpa_split forward is faster than full causal attention over all tokens "
                   f"(n_text={n0}, n_visual={size['n_visual']})",
                   _value(rows, "sdpa_split", "fwd_ms", n0), _value(rows, "sdpa_causal_all", "fwd_ms", n0), unit="ms"),
        Claim.at_most("CPU fp32: sdpa_split output agrees with the reference (max abs err over n_text)",
                      nanmax(r["fwd_err"] for r in rows if r["backend"] == "sdpa_split"), CPU_AGREEMENT_TOL),
    ]


def _gpu_claims(rows, varlen: list[dict]) -> list[Claim]:
    sizes = sorted({r["n_text"] for r in rows})

    def geo(backend, key):
        return geomean(_value(rows, backend, key, n) for n in sizes)

    def floor(backend_row, rounding_row, names):
        return max(nanmax(backend_row[n] for n in names), nanmax(rounding_row[n] for n in names))

    triton, split, rounding = varlen
    grads = ("dq_err", "dk_err", "dv_err")
    f = GPU_ERROR_FACTOR
    return [
        Claim.at_most(f"GPU bf16 varlen: Triton output max abs err vs fp32 reference <= {f:g}x stock SDPA's "
                      "(at least the bf16 rounding of the answer)",
                      triton["out_err"], floor(split, rounding, ("out_err",)), factor=f),
        Claim.at_most(f"GPU bf16 varlen: Triton dq/dk/dv max abs err vs fp32 reference <= {f:g}x stock SDPA's "
                      "(at least the bf16 rounding of the answer)",
                      nanmax(triton[n] for n in grads), floor(split, rounding, grads), factor=f),
        Claim.at_most(f"GPU bf16 benchmark sizes: Triton output and grads max abs err <= {f:g}x sdpa_split's",
                      nanmax([_value(rows, "triton", "fwd_err", n) for n in sizes]
                              + [_value(rows, "triton", "grad_err", n) for n in sizes]),
                      nanmax([_value(rows, "sdpa_split", "fwd_err", n) for n in sizes]
                              + [_value(rows, "sdpa_split", "grad_err", n) for n in sizes]), factor=f),
        Claim.at_least("GPU: Triton forward is >= 1.2x faster than FlexAttention (FlexAttention's time vs "
                       "Triton's, geometric mean over n_text)", geo("flex", "fwd_ms"), geo("triton", "fwd_ms"),
                       factor=1.2, unit="ms"),
        Claim.at_most("GPU: Triton forward is within 10% of sdpa_split (geometric mean over n_text)",
                      geo("triton", "fwd_ms"), geo("sdpa_split", "fwd_ms"), factor=1.1, unit="ms"),
        Claim.at_least("GPU: Triton forward+backward is >= 1.0x as fast as FlexAttention (FlexAttention's time "
                       "vs Triton's, geometric mean over n_text)", geo("flex", "fwd_bwd_ms"),
                       geo("triton", "fwd_bwd_ms"), unit="ms"),
    ]


NOTES = """\
Layout per sequence: {prefix} text tokens, the image ({n_visual} visual tokens), then the rest of the
n_text text tokens. NAEViT backends compute the n_text text queries over all T = n_visual + n_text
keys; `sdpa_causal_all` is what a LLaVA-style model pays: causal SDPA with a query for every token.
Forward is timed under `torch.no_grad()`; forward+backward backpropagates a fixed upstream gradient
(zero on the visual rows for `sdpa_causal_all`, so its dk/dv equal NAEViT's).
CPU times: one thread, wall-clock median of {repeats} rounds after {warmup} warm-up rounds, the
backends taking turns within each round (so load from other processes hits all alike).
GPU times: `triton.testing.do_bench` median (CUDA events, L2 flushed before each call, {gpu_warmup} ms
warm-up, {gpu_repeats} ms timed). `fwd_err` / `grad_err`: max abs error of the output / of dq, dk, dv
against the fp32 reference. `*_peak_mb`: peak bytes allocated during one call above what was
allocated before it (the inputs); on CUDA from `torch.cuda.max_memory_allocated`, on CPU from the
allocator events of `torch.profiler(profile_memory=True)`.
Setup is not timed: FlexAttention's block mask and compilation, and `sdpa_mask`'s boolean mask,
are built once per size (which favours those baselines); the NAEViT backends' input validation is timed.
"""


@benchmark("naevit", title="NAEViT attention: Triton / SDPA split vs full causal, masked SDPA and FlexAttention",
           paper="saisa")
def run(config) -> Result:
    import os

    import torch

    from icml26.utils import atomic_write_json

    seed = config.seeds[0]
    dry = os.environ.get(DRY_RUN_ENV, "0") == "1"
    if dry:
        sizes = DRY_SIZES
    elif config.mode == "full":
        sizes = dict(SIZES, gpu=dict(SIZES["gpu"], n_text=GPU_FULL_N_TEXT))
    else:
        sizes = SIZES
    if config.device == "auto":
        gpu = torch.device("cuda") if torch.cuda.is_available() else None
    elif config.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise input_error("icml26 bench naevit", "--device", "'auto' or 'cpu' on a machine without a GPU",
                              config.device)
        gpu = torch.device(config.device)
    else:
        gpu = None
    if dry and gpu is None:
        gpu = torch.device("cpu")  # the GPU suite's code on CPU tensors (Triton needs TRITON_INTERPRET=1)

    rows: dict[str, list[dict]] = {"cpu": [], "gpu": []}

    def on_row(row: dict) -> None:  # a run killed midway still leaves what was measured
        rows[row["device"]].append(row)
        atomic_write_json(config.out_dir / "rows.partial.json", to_jsonable(rows))  # NaN (not measured) as null

    cpu_warmup, cpu_repeats = DRY_REPEATS if dry else REPEATS["cpu"][config.mode]
    gpu_warmup, gpu_repeats = REPEATS["gpu"][config.mode]
    result = Result(notes=NOTES.format(**sizes["cpu"], warmup=cpu_warmup, repeats=cpu_repeats,
                                       gpu_warmup=gpu_warmup, gpu_repeats=gpu_repeats))
    if config.device.startswith("cuda"):  # asked for the GPU: its suite alone (the GPU check's time budget)
        result.notes += "\n--device cuda: the CPU suite was skipped (run with --device auto for both).\n"
    else:
        threads = torch.get_num_threads()
        torch.set_num_threads(CPU_THREADS)
        try:
            _suite("cpu", CPU_BACKENDS, torch.device("cpu"), sizes["cpu"], (cpu_warmup, cpu_repeats), seed, on_row)
        finally:
            torch.set_num_threads(threads)
        result.metrics["cpu.torch_threads"] = CPU_THREADS
        result.metrics.update(_metrics(rows["cpu"], "cpu"))
        result.tables["cpu"] = rows["cpu"]
        result.figures["naevit_cpu"] = _figure(rows["cpu"], f"NAEViT attention on CPU ({_describe(sizes['cpu'])})")
        for claim in _cpu_claims(rows["cpu"], sizes["cpu"]):
            result.add_claim(claim)

    if gpu is None:
        result.notes += "\nNo GPU was used: the Triton kernel, masked SDPA and FlexAttention were not benchmarked.\n"
        return result

    result.metrics["gpu.name"] = torch.cuda.get_device_name(gpu) if gpu.type == "cuda" else "cpu (dry run)"
    if dry:
        result.notes += "\nDry run (ICML26_BENCH_DRY_RUN=1): tiny sizes; the numbers only show that the code runs.\n"
    varlen = _varlen_check(gpu, sizes["gpu_varlen"], seed)
    result.tables["gpu_varlen_correctness"] = varlen
    atomic_write_json(config.out_dir / "varlen.partial.json", to_jsonable(varlen))
    _suite("gpu", GPU_BACKENDS, gpu, sizes["gpu"], (gpu_warmup, gpu_repeats), seed, on_row)
    result.metrics.update(_metrics(rows["gpu"], "gpu"))
    result.tables["gpu"] = rows["gpu"]
    result.figures["naevit_gpu"] = _figure(
        rows["gpu"], f"NAEViT attention on {result.metrics['gpu.name']} ({_describe(sizes['gpu'])})")
    for claim in _gpu_claims(rows["gpu"], varlen):
        result.add_claim(claim)
    return result


def _describe(size: dict) -> str:
    return (f"B={size['batch']}, n_visual={size['n_visual']}, Hq={size['heads_q']}, Hkv={size['heads_kv']}, "
            f"D={size['head_dim']}, {size['dtype']}")
