"""``icml26 bench crdproto``: episodes per second of CRDProto's support-set processing on digits, 5-way 5-shot at 40%
symmetric swap: detection alone (Outlier Pursuit per class, the relative score, the flags; the filter-only
prototypes), detection plus unguided replacement, and detection plus guided replacement (the DPS gradient through the
prior at each of the 50 reverse steps; one batched reverse pass per episode).

The claim: the guidance (a backward pass through the prior per reverse step) costs less than 3x the unguided
sampler per episode.
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: The sizes; the tests shrink them.
SIZES = {"episodes": 20, "prior_steps": 200, "repeats": 3, "warmup": 1}
GUIDANCE_OVERHEAD = 3.0


@benchmark("crdproto", title="CRDProto: episodes per second of detection, unguided and guided replacement",
           paper="crdproto")
def run(config, sizes: dict | None = None) -> Result:
    import numpy as np
    import torch
    from sklearn.datasets import load_digits

    from icml26.eval.measure import interleaved_median_ms
    from icml26.eval.tasks.crdproto import EpisodeSampler, SupportNoise
    from icml26.models.crdproto import RankGuidedPrototypes
    from icml26.training.crdproto import fit_feature_prior

    size = dict(SIZES, **(sizes or {}))
    seed = config.seeds[0]
    X, y = load_digits(return_X_y=True)
    X = X / np.linalg.norm(X, axis=1, keepdims=True)
    base = np.isin(y, [0, 1, 2, 3, 4])
    prior, _ = fit_feature_prior(X[base], y[base], steps=size["prior_steps"], seed=seed)
    sampler = EpisodeSampler(y, 5, 5, 15, seed=seed, classes=[5, 6, 7, 8, 9])
    noise = SupportNoise("sym_swap", 0.4, seed=seed)
    Z = torch.as_tensor(X, dtype=torch.float32)
    supports = []
    for _ in range(size["episodes"]):
        ep = noise(sampler.sample(), y)
        supports.append((Z[ep.support.reshape(-1)], torch.as_tensor(ep.support_labels.reshape(-1))))
    arms = {"detection (filter-only)": RankGuidedPrototypes(None, seed=seed),
            "unguided replacement": RankGuidedPrototypes(prior, guidance_scale=0.0, seed=seed),
            "guided replacement": RankGuidedPrototypes(prior, guidance_scale=100.0, seed=seed)}

    def episodes(model):
        return lambda: [model.process_support_set(S, labels) for S, labels in supports]

    ms = interleaved_median_ms({name: episodes(model) for name, model in arms.items()}, torch.device("cpu"),
                               warmup=size["warmup"], repeats=size["repeats"])
    n = size["episodes"]
    rows = [{"path": name, "ms per episode": round(ms[name] / n, 2), "episodes/s": round(n / ms[name] * 1e3, 1)}
            for name in arms]
    result = Result(tables={"support-set processing": rows})
    for name in arms:
        result.metrics[f"{name} ms/episode"] = ms[name] / n
    result.add_claim(Claim.less(f"guidance costs less than {GUIDANCE_OVERHEAD:g}x the unguided sampler per episode",
                                ms["guided replacement"] / n, ms["unguided replacement"] / n,
                                factor=GUIDANCE_OVERHEAD, unit="ms"))
    result.notes = (f"CPU; {n} episodes of digits, 5-way 5-shot, 40% symmetric swap; median of {size['repeats']} "
                    f"interleaved rounds after {size['warmup']} warm-up round(s); the prior trained "
                    f"{size['prior_steps']} steps (speed does not depend on its quality); torch's default threads.")
    return result
