"""``icml26 bench rdl_graph``: training-step and inference time, messages used and template memory of the
RDL structure optimiser (arXiv 2606.08491), raw schema against the optimised graph.

One snapshot of the synthetic shop (:func:`icml26.eval.tasks.rdl_graph.synthetic_ecommerce`). The pruned plan
closes ``page_view`` and every template but ``2hop::category->product->order``, close to the plan the
experiment's gates reach (which at quick seed 0 also closes ``product`` and keeps a second template).
Timed: a training step (forward, backward, Adam) of the raw-schema GNN, of the full optimiser on the raw
graph plus every candidate template, and of the full optimiser on its pruned graph (an epoch of the
experiment is ``EPOCH_STEPS`` such steps, one per training seed time, reported beside); inference of the
raw GNN and of the full optimiser, unpruned and pruned; all in
interleaved rounds. Template memory: peak bytes traced while materialising every candidate template
(``tracemalloc``, numpy and scipy allocations) and the bytes of the edges kept.
"""

from __future__ import annotations

from icml26.registry import benchmark
from icml26.results import Claim, Result

#: Problem sizes; the tests shrink them.
SIZES = {"users": 1500, "page_views_per_user": 30, "max_edges_per_template": 6000, "channels": 32}
CPU_THREADS = 1
KEEP = "2hop::category->product->order"
#: Training steps in one epoch of the experiment (one per training seed time); "epoch s" is this many steps.
EPOCH_STEPS = 10


@benchmark("rdl_graph", title="RDL structure optimiser: step and inference time, messages, template memory",
           paper="rdl_graph")
def run(config, sizes: dict | None = None) -> Result:
    import tracemalloc

    import pandas as pd
    import torch

    from icml26.eval.measure import interleaved_median_ms
    from icml26.eval.tasks.rdl_graph import premium_purchase_task, snapshot, synthetic_ecommerce
    from icml26.models.rdl_graph import (
        RDLGraphConfig,
        RDLGraphModel,
        add_templates,
        candidate_templates,
        count_messages,
    )

    size = dict(SIZES, **(sizes or {}))
    device = torch.device("cpu")  # the graphs are small and built with scipy: the benchmark is a CPU one
    repeats = 10 if config.quick else 30
    threads = torch.get_num_threads()
    torch.set_num_threads(CPU_THREADS)
    try:
        db = synthetic_ecommerce(config.seeds[0], n_users=size["users"], page_views_per_user=size["page_views_per_user"])
        data = snapshot(db, premium_purchase_task(), pd.Timestamp("2025-06-01"))
        names = candidate_templates(data)
        tracemalloc.start()
        full_graph = add_templates(data, names, max_edges=size["max_edges_per_template"])
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        template_bytes = sum(full_graph[e].edge_index.numel() * 8 for e in full_graph.edge_types if "::" in e[1])
        torch.manual_seed(0)
        raw = RDLGraphModel(RDLGraphConfig.from_graph(data, "user", channels=size["channels"], table_gates=False,
                                                      column_gates=False, template_gates=False, vib=False))
        full = RDLGraphModel(RDLGraphConfig.from_graph(data, "user", templates=names, channels=size["channels"]))
        with torch.no_grad():  # the plan the experiment's gates reach: page_view and every template but one closed
            full.table_gate.log_alpha[full.gated_tables.index("page_view")] = -5.0
            for i, name in enumerate(names):
                if name != KEEP:
                    full.template_gate.log_alpha[i] = -5.0
        plan = full.optimized_plan()
        pruned = plan.apply(full_graph)
        opts = {m: torch.optim.Adam(model.parameters(), 5e-3) for m, model in (("raw", raw), ("full", full))}

        def step(model, graph, opt):
            def fn():
                model.train()
                opt.zero_grad(set_to_none=True)
                model(graph).loss.backward()
                opt.step()
            return fn

        def infer(model, graph):
            @torch.no_grad()
            def fn():
                model.eval()
                return model(graph).logits
            return fn

        ms = interleaved_median_ms({"raw step": step(raw, data, opts["raw"]),
                                    "full step (all candidates)": step(full, full_graph, opts["full"]),
                                    "pruned plan step": step(full, pruned, opts["full"]),
                                    "raw inference": infer(raw, data),
                                    "full inference (unpruned)": infer(full, full_graph),
                                    "full inference (pruned plan)": infer(full, pruned)},
                                   device, warmup=2, repeats=repeats)
    finally:
        torch.set_num_threads(threads)
    messages = {"raw step": count_messages(data), "full step (all candidates)": count_messages(full_graph),
                "pruned plan step": count_messages(pruned),
                "raw inference": count_messages(data), "full inference (unpruned)": count_messages(full_graph),
                "full inference (pruned plan)": count_messages(pruned)}
    # an experiment epoch is one step per training seed time (EPOCH_STEPS of them), so its time is that many steps
    epoch_s = {k: v * EPOCH_STEPS / 1e3 for k, v in ms.items() if "step" in k}
    rows = [{"what": k, "ms": round(v, 2), "epoch s": round(epoch_s[k], 2) if k in epoch_s else None,
             "messages per layer": messages[k]} for k, v in ms.items()]
    result = Result(tables={"time and messages": rows})
    result.metrics.update({f"{k.replace(' ', '_')}_ms": v for k, v in ms.items()})
    result.metrics.update({f"{k.replace(' ', '_')}_epoch_s": v for k, v in epoch_s.items()})
    result.metrics.update(template_peak_mb=peak / 2**20, template_edges_mb=template_bytes / 2**20,
                          candidate_templates=len(names), messages_raw=messages["raw inference"],
                          messages_pruned=messages["full inference (pruned plan)"],
                          messages_all_candidates=messages["full inference (unpruned)"], device=str(device))
    result.add_claim(Claim.at_most("pruned plan's messages per layer vs raw schema's", messages["full inference (pruned plan)"],
                                   messages["raw inference"]))
    result.add_claim(Claim.less("pruned plan's inference time vs the unpruned optimiser's (ms)",
                                ms["full inference (pruned plan)"], ms["full inference (unpruned)"], unit="ms"))
    result.notes = (f"CPU, {CPU_THREADS} thread; median of {repeats} interleaved rounds after 2 warm-up rounds. Snapshot "
                    f"of {size['users']} users at 2025-06-01, {len(names)} candidate templates capped at "
                    f"{size['max_edges_per_template']} edges each; template peak memory by tracemalloc while "
                    f"materialising them: {peak / 2**20:.1f} MB.")
    return result
