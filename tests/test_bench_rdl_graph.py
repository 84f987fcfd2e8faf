"""``icml26 bench rdl_graph``: step/inference time, messages and template memory (shrunk sizes)."""

from icml26.runner import RunConfig


def test_bench_rdl_graph_times_raw_and_optimised_and_counts_messages(tmp_path):
    from icml26.eval.benchmarks.rdl_graph import EPOCH_STEPS, run

    result = run(RunConfig(out_dir=tmp_path, device="cpu"),
                 sizes={"users": 60, "page_views_per_user": 4, "max_edges_per_template": 300, "channels": 8})
    rows = {r["what"]: r for r in result.tables["time and messages"]}
    assert len(rows) == 6 and all(r["ms"] > 0 for r in rows.values())
    m = result.metrics
    # the pruned plan trains on the pruned graph's messages; an experiment epoch is EPOCH_STEPS steps
    assert rows["pruned plan step"]["messages per layer"] == m["messages_pruned"]
    assert rows["raw step"]["epoch s"] == round(rows["raw step"]["ms"] * EPOCH_STEPS / 1e3, 2)
    assert rows["raw inference"]["epoch s"] is None
    assert m["messages_pruned"] < m["messages_all_candidates"] and m["template_peak_mb"] > 0
    assert rows["full inference (pruned plan)"]["messages per layer"] == m["messages_pruned"]
    messages, speed = result.claims
    assert messages.relation == "at_most" and messages.measured == m["messages_pruned"]
    assert speed.reference == m["full_inference_(unpruned)_ms"]
