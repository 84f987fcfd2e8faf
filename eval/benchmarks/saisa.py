"""``icml26 bench saisa``: prefill latency and peak memory of SAISA, LLaVA and NAEViT-LLaVA.

SAISA (arXiv 2502.02458) claims about a third of LLaVA-1.5's prefill FLOPs; this measures what
that buys in time and memory at CLIP-L/336's 576 visual tokens.

The three architectures share one random backbone (same weights) and get the same 576 visual
features (CLIP-L/336-sized, d_v = 1024) after a short text prefix, then ``n_text`` text tokens.
CPU (always): a small Llama backbone (hidden 256, 4 layers), fp32. GPU (when present): a
0.5B-shaped Qwen2-style backbone in bf16, batch 8. The analytic FLOP ratio of the same shapes
(:func:`icml26.models.saisa.modeling.flops`) is reported beside the measured times.

On CPU the ratio depends on glibc's allocator: when it returns LLaVA's large temporaries to the
system, every prefill pays page faults on fresh pages, LLaVA far more than SAISA, and the ratio
looks better than the architectures are. The rows count the minor page faults per prefill; run with
``MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=4294967296`` for the fault-free regime.
"""

from __future__ import annotations

from typing import Any

from icml26.registry import benchmark
from icml26.results import Claim, Result

ARCHS = ("llava", "naevit_llava", "saisa")
CPU_THREADS = 1
PREFIX = 8  # text tokens before the image

#: Backbone and problem sizes; the tests shrink them.
SIZES: dict[str, Any] = {
    "cpu": {"text": dict(model_type="llama", hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, vocab_size=1024),
            "vision_dim": 1024, "n_visual": 576, "n_text": [16, 64, 256], "batch": 1, "dtype": "float32"},
    "gpu": {"text": dict(model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, vocab_size=151936),
            "vision_dim": 1024, "n_visual": 576, "n_text": [16, 64, 256], "batch": 8, "dtype": "bfloat16"},
}


def _models(size: dict, device, dtype, seed: int):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from icml26.models.saisa import SaisaForConditionalGeneration, SaisaPatchEncoder, SaisaPatchEncoderConfig

    text = dict(size["text"])
    text_config = AutoConfig.for_model(text.pop("model_type"), **text)
    with torch.random.fork_rng():  # seeded initialisation that leaves the caller's global RNG alone
        torch.manual_seed(seed)
        llm = AutoModelForCausalLM.from_config(text_config).to(device=device, dtype=dtype).eval()
        vision = SaisaPatchEncoder(SaisaPatchEncoderConfig(hidden_size=size["vision_dim"], image_size=24,
                                                           patch_size=1))
        models = {}
        for arch in ARCHS:  # the same backbone object: identical weights, only the wiring differs
            torch.manual_seed(seed + 1)
            models[arch] = SaisaForConditionalGeneration.from_text_model(llm, vision, architecture=arch).eval()
    return models


def _inputs(size: dict, n_text: int, image_token_id: int, device, dtype, seed: int):
    import torch

    gen = torch.Generator().manual_seed(seed)
    b, n_v = size["batch"], size["n_visual"]
    vocab = size["text"]["vocab_size"]
    text = torch.randint(0, vocab, (b, PREFIX + n_text), generator=gen)
    ids = torch.cat([text[:, :PREFIX], torch.full((b, n_v), image_token_id), text[:, PREFIX:]], dim=1)
    features = torch.randn(b, n_v, size["vision_dim"], generator=gen)
    return ids.to(device), features.to(device=device, dtype=dtype)


def _suite(size: dict, device, repeats: int, seed: int) -> list[dict[str, Any]]:
    import torch

    from icml26.eval.measure import interleaved_median_ms, minor_faults_per_call, peak_alloc_mb
    from icml26.models.saisa import flops

    dtype = getattr(torch, size["dtype"])
    models = _models(size, device, dtype, seed)
    image_token = models["saisa"].config.image_token_id
    rows = []
    for n_text in size["n_text"]:
        ids, features = _inputs(size, n_text, image_token, device, dtype, seed)
        analytic = flops(dict(size["text"], vision_dim=size["vision_dim"]), size["n_visual"], PREFIX + n_text)
        prefills = {}
        for arch in ARCHS:
            model = models[arch]

            @torch.no_grad()
            def prefill(model=model):
                return model(input_ids=ids, image_features=features, use_cache=True, logits_to_keep=1)

            prefills[arch] = prefill
        times = interleaved_median_ms(prefills, device, warmup=1, repeats=repeats)
        for arch in ARCHS:
            logits = prefills[arch]().logits.float()
            rows.append({
                "arch": arch, "n_text": n_text, "n_visual": size["n_visual"], "batch": size["batch"],
                "prefill_ms": times[arch],
                "peak_mb": peak_alloc_mb(prefills[arch], device),
                "minor_faults": minor_faults_per_call(prefills[arch], device),
                "analytic_gflops": analytic[arch] * size["batch"] / 1e9,
                "finite": bool(torch.isfinite(logits).all()),
            })
    return rows


def _figure(rows, title):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, 4), layout="constrained")
    ax_t, ax_m = fig.subplots(1, 2)
    for arch in ARCHS:
        pts = sorted((r["n_text"], r["prefill_ms"], r["peak_mb"]) for r in rows if r["arch"] == arch)
        ax_t.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=arch)
        ax_m.plot([p[0] for p in pts], [p[2] for p in pts], marker="o", label=arch)
    for ax, label in ((ax_t, "prefill latency (ms)"), (ax_m, "peak allocated (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("text tokens after the image")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax_t.legend()
    fig.suptitle(title)
    return fig


def _claims(result: Result, rows, where: str) -> None:
    at = {(r["arch"], r["n_text"]): r for r in rows}
    n_text = 64 if ("saisa", 64) in at else max(r["n_text"] for r in rows)
    saisa, llava = at[("saisa", n_text)], at[("llava", n_text)]
    result.add_claim(Claim.at_most(f"{where}: SAISA prefill latency <= 0.45 x LLaVA's (n_visual="
                                   f"{saisa['n_visual']}, n_text={n_text})", saisa["prefill_ms"],
                                   llava["prefill_ms"], factor=0.45, unit="ms"))
    result.add_claim(Claim.less(f"{where}: SAISA prefill peak memory below LLaVA's (n_text={n_text})",
                                saisa["peak_mb"], llava["peak_mb"], unit="MiB"))
    result.metrics[f"{where}_latency_ratio_saisa_llava_nt{n_text}"] = saisa["prefill_ms"] / llava["prefill_ms"]
    for row in (saisa, llava):
        if row.get("minor_faults") is not None:
            result.metrics[f"{where}_minor_faults_per_prefill_{row['arch']}_nt{n_text}"] = row["minor_faults"]
    result.metrics[f"{where}_analytic_flop_ratio_saisa_llava_nt{n_text}"] = (
        saisa["analytic_gflops"] / llava["analytic_gflops"])


@benchmark("saisa", title="SAISA vs LLaVA vs NAEViT-LLaVA: prefill latency and peak memory", paper="saisa")
def run(config):
    import torch

    device = config.torch_device()
    repeats = 11 if config.quick else 21
    threads = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)  # one thread: stable ratios on a shared machine
    try:
        cpu_rows = _suite(SIZES["cpu"], torch.device("cpu"), repeats, config.seeds[0])
    finally:
        torch.set_num_threads(threads)
    result = Result(tables={"cpu": cpu_rows}, figures={"cpu": _figure(cpu_rows, "Prefill on CPU (fp32)")})
    if not all(r["finite"] for r in cpu_rows):
        raise RuntimeError("non-finite logits in the CPU prefill benchmark")
    _claims(result, cpu_rows, "cpu")
    if device.type == "cuda":
        gpu_rows = _suite(SIZES["gpu"], device, repeats, config.seeds[0])
        name = torch.cuda.get_device_name(device)
        result.tables["gpu"] = gpu_rows
        result.figures["gpu"] = _figure(gpu_rows, f"Prefill on {name} (bf16)")
        result.metrics["gpu_name"] = name
        _claims(result, gpu_rows, "gpu")
    else:
        result.notes = "No GPU: only the CPU suite ran."
    result.notes += (f" Latency is the median of one prefill forward (KV cache built, logits of the last token "
                     f"only; the architectures timed in interleaved rounds, {repeats} of them), on {CPU_THREADS} "
                     f"CPU thread; memory is the peak allocated during it above the inputs "
                     f"and weights.")
    return result
