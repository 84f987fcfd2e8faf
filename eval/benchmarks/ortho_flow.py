"""``icml26 bench ortho_flow``: the training-step time of :class:`icml26.models.ortho_flow.OrthoFlowModel` with its
three ways to get the penalty, against the dimension ``d``.

One step is what :func:`icml26.training.ortho_flow.fit_ortho_flow` does: a batch of 256 through the flow, NLL plus
``lambda`` times the penalty, backward and an Adam update. ``forward`` carries the ``d`` tangent vectors of ``J_f``
through the couplings in the same pass; ``func`` takes ``torch.func.vmap(jacfwd(encode))`` (what any transform, e.g.
a zuko flow, gets); ``hutchinson`` estimates the normalised off-diagonal energy with one Rademacher probe through the
decoder's JVP and VJP (plus ``d`` JVPs for the diagonal). ``plain`` (``lambda = 0``) is the floor. The claim: the
forward-mode Jacobian is faster than ``torch.func``'s at every ``d`` measured.
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: The grid; the tests shrink it.
SIZES = {"d": (2, 4, 8, 16, 32), "batch": 256, "steps": 10, "warmup": 2}
PATHS = ("plain", "forward", "func", "hutchinson")


def _step(d: int, path: str, batch: int, device, seed: int):
    """One training step (a closure) of a fresh flow on a fixed batch."""
    import torch

    from icml26.models.ortho_flow import OrthoFlowConfig, OrthoFlowModel

    gen = torch.Generator().manual_seed(seed)
    fields = {"plain": {"lambda_orth": 0.0}, "forward": {"jacobian": "forward"}, "func": {"jacobian": "func"},
              "hutchinson": {"jacobian": "hutchinson", "n_probes": 1}}[path]
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = OrthoFlowModel(OrthoFlowConfig(dim=d, **fields)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    x = torch.randn(batch, d, generator=gen).to(device)
    model.train()

    def step():
        loss = model(x=x).loss
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    return step


@benchmark("ortho_flow", title="Orthogonality-regularised flow: training-step time of the forward-mode, torch.func "
                               "and Hutchinson penalties", paper="ortho_flow")
def run(config, sizes: dict | None = None) -> Result:
    from icml26.eval.measure import interleaved_median_ms

    size = dict(SIZES, **(sizes or {}))
    device = config.torch_device()
    rows = []
    for d in size["d"]:
        steps = {path: _step(d, path, size["batch"], device, config.seeds[0]) for path in PATHS}
        ms = interleaved_median_ms(steps, device, warmup=size["warmup"], repeats=size["steps"])
        rows.append({"d": d, "batch": size["batch"], **{f"{p} ms/step": round(ms[p], 2) for p in PATHS},
                     "func / forward": round(ms["func"] / ms["forward"], 2)})
    result = Result(tables={"step time": rows})
    for r in rows:
        for p in PATHS:
            result.metrics[f"{p}_ms_d{r['d']}"] = r[f"{p} ms/step"]
    slowest = max(rows, key=lambda r: r["forward ms/step"] / r["func ms/step"])
    result.add_claim(Claim.less(f"the forward-mode Jacobian is faster than torch.func's at every d (closest: d = "
                                f"{slowest['d']}, batch {slowest['batch']}, one training step)",
                                slowest["forward ms/step"], slowest["func ms/step"], unit="ms"))
    result.metrics["device"] = str(device)
    result.notes = (f"Device {device}; median of {size['steps']} interleaved rounds after {size['warmup']} warm-up "
                    "rounds (NLL plus lambda C_IMA, or the Hutchinson estimate, backward, Adam); 8 affine couplings "
                    "of 64 hidden units; torch's default threads.")
    return result
