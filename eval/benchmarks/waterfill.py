"""``icml26 bench waterfill``: the training-step time of :class:`icml26.models.waterfill.SpectralCNNModel` on both
feature paths, against the image size ``N`` and the number of filters ``K``.

One step is what :func:`icml26.training.waterfill.fit_contrastive` does: two views of a batch of 128 images
embedded, the spectral contrastive loss, backward and an AdamW update. ``conv`` computes ``K`` circular
convolutions by FFT (``[B, K, N, N]``); ``parseval`` (squared activations only) is one ``[B, N^2] x [N^2, K]``
product of power spectra. The claim: Parseval's path is faster at the largest ``N`` and ``K``.
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: The grid; the tests shrink it.
SIZES = {"n": (8, 10, 16, 32), "k": (8, 16, 32), "batch": 128, "steps": 20, "warmup": 3}


def _step(n: int, k: int, path: str, batch: int, device, seed: int):
    """One training step (a closure) of a fresh model on a fixed batch."""
    import torch

    from icml26.models.waterfill import SpectralCNNConfig, SpectralCNNModel
    from icml26.training.waterfill import spectral_contrastive_loss

    gen = torch.Generator().manual_seed(seed)
    model = SpectralCNNModel(SpectralCNNConfig(image_size=n, num_filters=k, embed_dim=6, path=path)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(batch, n, n, generator=gen).to(device)
    x2 = x + 0.1 * torch.randn(batch, n, n, generator=gen).to(device)

    def step():
        loss = spectral_contrastive_loss(model(pixel_values=x).embeddings, model(pixel_values=x2).embeddings)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


@benchmark("waterfill", title="Spectral CNN: training-step time of the Parseval and FFT-convolution paths", paper="waterfill")
def run(config, sizes: dict | None = None) -> Result:
    from icml26.eval.measure import interleaved_median_ms

    size = dict(SIZES, **(sizes or {}))
    device = config.torch_device()
    rows = []
    for n in size["n"]:
        for k in size["k"]:
            steps = {path: _step(n, k, path, size["batch"], device, config.seeds[0]) for path in ("parseval", "conv")}
            ms = interleaved_median_ms(steps, device, warmup=size["warmup"], repeats=size["steps"])
            rows.append({"N": n, "K": k, "batch": size["batch"], "parseval ms/step": round(ms["parseval"], 3),
                         "conv ms/step": round(ms["conv"], 3), "speed-up": round(ms["conv"] / ms["parseval"], 2)})
    result = Result(tables={"step time": rows})
    for r in rows:
        result.metrics[f"parseval_ms_N{r['N']}_K{r['K']}"] = r["parseval ms/step"]
        result.metrics[f"conv_ms_N{r['N']}_K{r['K']}"] = r["conv ms/step"]
    big = rows[-1]
    result.add_claim(Claim.less(f"Parseval's path is faster than the FFT convolution at N = {big['N']}, K = {big['K']} "
                                f"(batch {big['batch']}, one training step)", big["parseval ms/step"],
                                big["conv ms/step"], unit="ms"))
    result.metrics["device"] = str(device)
    result.notes = (f"Device {device}; median of {size['steps']} interleaved rounds after {size['warmup']} warm-up rounds "
                    "(two views embedded, spectral contrastive loss, backward, AdamW); torch's default threads.")
    return result
