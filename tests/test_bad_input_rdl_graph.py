"""Bad input for rdl_graph: the synthetic shop, the task builders, graphs and snapshots, the RelBench
directory reader/writer, templates, the model's config and forward, and training.

Each probe makes one call with exactly one wrong value; see ``tests/probes.py`` for the verdicts.
The shop, graph and model the probes use are tiny and built once.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd
import pytest
import torch
from probes import Probe, check, ids

from icml26.eval.tasks.rdl_graph import (
    Database,
    column_stats,
    load_relbench_directory,
    load_relbench_task,
    make_pkey_fkey_graph,
    monthly_seed_times,
    premium_purchase_task,
    snapshot,
    snapshots,
    split_seed_times,
    synthetic_ecommerce,
    write_relbench_directory,
)
from icml26.models.rdl_graph import (
    HardConcreteGate,
    RDLGraphConfig,
    RDLGraphModel,
    add_templates,
    candidate_templates,
    count_messages,
    parse_template,
    template_edges,
)
from icml26.training.rdl_graph import (
    RDLTrainConfig,
    anneal_temperature,
    auroc,
    auroc_standard_error,
    evaluate,
    select_penalty,
    train,
)

SEED_TIME = "2025-03-01"


@functools.cache
def _db():
    return synthetic_ecommerce(0, n_users=30, n_products=12, page_views_per_user=1, orders_per_user=4.0)


@functools.cache
def _graph():
    return snapshot(_db(), premium_purchase_task(), SEED_TIME)


@functools.cache
def _model():
    return RDLGraphModel(RDLGraphConfig.from_graph(_graph(), "user", channels=8))


def shop(**change):
    return lambda: synthetic_ecommerce(change.pop("seed", 0), **{"n_users": 20, "page_views_per_user": 1, **change})


def config(**change):
    return lambda: RDLGraphConfig.from_graph(_graph(), change.pop("target_table", "user"), **change)


def _graph_without_user():
    g = _graph()
    from torch_geometric.data import HeteroData

    out = HeteroData()
    out["order"].x = g["order"].x
    return out


def _graph_with_x(x):
    from icml26.models.rdl_graph.templates import _shallow_copy

    g = _shallow_copy(_graph())
    g["user"].x = x
    return g


PROBES = [
    # synthetic_ecommerce
    Probe("synthetic_ecommerce-months-zero", shop(months=0), "months"),
    Probe("synthetic_ecommerce-n_users-zero", shop(n_users=0), "n_users"),
    Probe("synthetic_ecommerce-n_premium-above-categories", shop(n_premium=20), "n_premium"),
    Probe("synthetic_ecommerce-n_products-below-premium", shop(n_products=2), "n_products"),
    Probe("synthetic_ecommerce-orders_per_user-negative", shop(orders_per_user=-1.0), "orders_per_user"),
    Probe("synthetic_ecommerce-page_views_per_user-negative", shop(page_views_per_user=-3), "page_views_per_user"),
    Probe("synthetic_ecommerce-premium_affinity-above-one", shop(premium_affinity=1.5), "premium_affinity"),
    Probe("synthetic_ecommerce-base_premium-nan", shop(base_premium=float("nan")), "base_premium"),
    Probe("synthetic_ecommerce-seed-negative", shop(seed=-1), "seed"),
    Probe("synthetic_ecommerce-months-float", shop(months=12.5), "months"),
    # tasks
    Probe("premium_purchase_task-horizon-negative", lambda: premium_purchase_task(-30), "horizon_days"),
    Probe("premium_purchase_task-horizon-zero", lambda: premium_purchase_task(0), "horizon_days"),
    Probe("premium_purchase_task-horizon-str", lambda: premium_purchase_task("90"), "horizon_days"),
    Probe("load_relbench_task-missing-task", lambda: load_relbench_task("/nonexistent-icml26", "churn"), "task"),
    # Database and the graph
    Probe("Database-table-not-Table", lambda: Database({"user": pd.DataFrame({"id": [1]})}), "tables"),
    Probe("Database-val-after-test",
          lambda: Database(_db().tables, val_timestamp="2025-06-01", test_timestamp="2025-01-01"), "val_timestamp"),
    Probe("Database-val-not-a-time", lambda: Database(_db().tables, val_timestamp="soon"), "val_timestamp"),
    Probe("Database-upto-not-a-time", lambda: _db().upto("later"), "timestamp"),
    Probe("make_pkey_fkey_graph-db-DataFrame", lambda: make_pkey_fkey_graph(pd.DataFrame()), "db"),
    Probe("make_pkey_fkey_graph-unknown-table", lambda: make_pkey_fkey_graph(_db(), tables=["users"]), "tables"),
    Probe("make_pkey_fkey_graph-upto-not-a-time", lambda: make_pkey_fkey_graph(_db(), upto="tomorrow-ish"), "upto"),
    Probe("snapshot-seed_time-before-data",
          lambda: snapshot(_db(), premium_purchase_task(), "2020-01-01"), "seed_time"),
    Probe("snapshot-task-str", lambda: snapshot(_db(), "user-premium-purchase", SEED_TIME), "task"),
    Probe("snapshots-seed_times-one-time",
          lambda: snapshots(_db(), premium_purchase_task(), pd.Timestamp(SEED_TIME)), "seed_times"),
    Probe("monthly_seed_times-end-before-start", lambda: monthly_seed_times("2025-01-01", "2024-01-01"), "end"),
    Probe("split_seed_times-horizon-int", lambda: split_seed_times(_db(), 90), "horizon"),
    Probe("split_seed_times-warmup-negative",
          lambda: split_seed_times(_db(), pd.Timedelta(days=30), warmup_months=-1), "warmup_months"),
    Probe("write_relbench_directory-path-unwritable", lambda: write_relbench_directory(_db(), "/proc/icml26-probe"),
          "path"),
    Probe("write_relbench_directory-db-dict", lambda: write_relbench_directory(_db().tables, "/tmp/icml26-probe-x"),
          "db"),
    Probe("column_stats-db-dict", lambda: column_stats(_db().tables), "db"),
    Probe("load_relbench_directory-missing", lambda: load_relbench_directory("/nonexistent-icml26"), "path"),
    # templates
    Probe("parse_template-unknown-path", lambda: parse_template("2hop::user->product->category", _graph()), "name"),
    Probe("candidate_templates-knn_tables-unknown",
          lambda: candidate_templates(_graph(), knn_tables=["users"]), "knn_tables"),
    Probe("template_edges-k-zero", lambda: template_edges(_graph(), "knn::product", k=0), "k"),
    Probe("template_edges-max_edges-zero",
          lambda: template_edges(_graph(), "2hop::category->product->order", max_edges=0), "max_edges"),
    Probe("count_messages-data-dict", lambda: count_messages({"user": torch.zeros(3, 2)}), "data"),
    Probe("add_templates-names-str", lambda: add_templates(_graph(), "knn::product"), "names"),
    # the model
    Probe("HardConcreteGate-n-negative", lambda: HardConcreteGate(-1), "n"),
    Probe("HardConcreteGate-beta-zero", lambda: HardConcreteGate(3, beta=0.0), "beta"),
    Probe("RDLGraphConfig-channels-zero", config(channels=0), "channels"),
    Probe("RDLGraphConfig-neighbor_aggr-unknown", config(neighbor_aggr="median"), "neighbor_aggr"),
    Probe("RDLGraphConfig-target_table-unknown", config(target_table="customer"), "target_table"),
    Probe("RDLGraphConfig-templates-not-a-path", config(templates=["2hop::user->user->user"]), "name"),
    Probe("RDLGraphConfig-gate_gamma-positive", config(gate_gamma=0.5), "gate_gamma"),
    Probe("RDLGraphConfig-gate_beta-negative", config(gate_beta=-1.0), "gate_beta"),
    Probe("RDLGraphConfig-lambda_table-negative", config(lambda_table=-1e-4), "lambda_table"),
    Probe("RDLGraphConfig-column_gating-unknown", config(column_gating="rows"), "column_gating"),
    Probe("RDLGraphModel-config-dict", lambda: RDLGraphModel({"channels": 8}), "config"),
    Probe("RDLGraphModel.forward-no-target-table", lambda: _model()(_graph_without_user()), "data"),
    Probe("RDLGraphModel.forward-data-tensor", lambda: _model()(torch.zeros(3, 4)), "data"),
    Probe("RDLGraphModel.forward-x-wrong-columns", lambda: _model()(_graph_with_x(torch.zeros(30, 2))), "x"),
    Probe("RDLGraphModel.forward-labels-wrong-length", lambda: _model()(_graph(), labels=torch.zeros(3)), "labels"),
    Probe("RDLGraphPlan.apply-data-Database", lambda: _model().optimized_plan().apply(_db()), "data"),
    # training
    Probe("RDLTrainConfig-epochs-zero", lambda: RDLTrainConfig(epochs=0), "epochs"),
    Probe("RDLTrainConfig-lr-nan", lambda: RDLTrainConfig(lr=float("nan")), "lr"),
    Probe("RDLTrainConfig-snapshots_per_epoch-zero", lambda: RDLTrainConfig(snapshots_per_epoch=0), "snapshots_per_epoch"),
    Probe("RDLTrainConfig-seed-negative", lambda: RDLTrainConfig(seed=-1), "seed"),
    Probe("RDLTrainConfig-epochs-float", lambda: RDLTrainConfig(epochs=3.0), "epochs"),
    Probe("anneal_temperature-epoch-negative", lambda: anneal_temperature(-1, RDLTrainConfig()), "epoch"),
    Probe("train-graphs-without-val",
          lambda: train(_model(), {"train": [_graph()]}, premium_purchase_task(), RDLTrainConfig(epochs=1)), "graphs"),
    Probe("train-graphs-list",
          lambda: train(_model(), [_graph()], premium_purchase_task(), RDLTrainConfig(epochs=1)), "graphs"),
    Probe("train-config-dict",
          lambda: train(_model(), {"train": [_graph()], "val": [_graph()]}, premium_purchase_task(), {"epochs": 1}),
          "config"),
    Probe("evaluate-graphs-empty", lambda: evaluate(_model(), [], premium_purchase_task()), "graphs"),
    Probe("auroc-length-mismatch", lambda: auroc(np.array([0.0, 1.0, 1.0]), np.array([0.2, 0.8])), "score"),
    # choosing the template penalty on validation
    Probe("auroc_standard_error-value-above-one", lambda: auroc_standard_error(1.2, 30, 70), "value"),
    Probe("auroc_standard_error-n_pos-zero", lambda: auroc_standard_error(0.8, 0, 70), "n_pos"),
    Probe("auroc_standard_error-n_neg-float", lambda: auroc_standard_error(0.8, 30, 70.5), "n_neg"),
    Probe("select_penalty-penalties-negative",
          lambda: select_penalty([-0.01, 0.1], [0.78, 0.77], 30, 70), "penalties"),
    Probe("select_penalty-penalties-repeated",
          lambda: select_penalty([0.1, 0.1], [0.78, 0.77], 30, 70), "penalties"),
    Probe("select_penalty-penalties-empty", lambda: select_penalty([], [], 30, 70), "penalties"),
    Probe("select_penalty-val_aurocs-nan",
          lambda: select_penalty([0.01, 0.1], [0.78, float("nan")], 30, 70), "val_aurocs"),
    Probe("select_penalty-val_aurocs-one-short",
          lambda: select_penalty([0.01, 0.1, 0.3], [0.78, 0.77], 30, 70), "val_aurocs"),
    Probe("select_penalty-n_neg-zero", lambda: select_penalty([0.01, 0.1], [0.78, 0.77], 30, 0), "n_neg"),
]


@pytest.mark.parametrize("probe", PROBES, ids=ids(PROBES))
def test_bad_input(probe):
    check(probe)
