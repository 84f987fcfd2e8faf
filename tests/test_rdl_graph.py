"""RDL structure optimiser: graph construction, templates, leakage, gates, gradients, pruning, save/load."""


import numpy as np
import pandas as pd
import pytest
import torch

from icml26.errors import InputError
from icml26.eval.tasks.rdl_graph import (
    CONST_COLUMN,
    Database,
    Table,
    make_pkey_fkey_graph,
    premium_purchase_task,
    snapshot,
    synthetic_ecommerce,
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
from icml26.training.rdl_graph import RDLTrainConfig, anneal_temperature, auroc_standard_error, select_penalty


def tiny_db():
    """Two foreign keys from ``transfer`` to ``account`` (two relations between the same tables), a featureless
    table ``bank``, null and dangling keys."""
    t0 = pd.Timestamp("2024-01-01")
    bank = pd.DataFrame({"bank_id": [0, 1]})
    account = pd.DataFrame({"account_id": [10, 11, 12, 13], "bank_id": [0, 1, 1, None], "balance": [1.0, 2, 3, 4],
                            "kind": ["a", "b", "a", "c"]})
    transfer = pd.DataFrame({"transfer_id": range(6), "src": [10, 11, 12, 10, 99, None], "dst": [11, 12, 13, 13, 10, 11],
                             "amount": [5.0, 1, 2, 3, 4, 5],
                             "time": t0 + pd.to_timedelta([1, 2, 3, 4, 5, 6], unit="D")})
    return Database({"bank": Table(bank, pkey="bank_id"),
                     "account": Table(account, pkey="account_id", fkeys={"bank_id": "bank"}),
                     "transfer": Table(transfer, pkey="transfer_id", fkeys={"src": "account", "dst": "account"},
                                       time_col="time")})


def test_pkey_fkey_graph_one_edge_per_non_null_key_reverse_is_transpose_and_const_column():
    db = tiny_db()
    data = make_pkey_fkey_graph(db)
    for child, col, parent in (("account", "bank_id", "bank"), ("transfer", "src", "account"),
                               ("transfer", "dst", "account")):
        fk = db.tables[child].df[col]
        keys = set(db.tables[parent].df[db.tables[parent].pkey])
        expected = int(sum(1 for v in fk if not pd.isna(v) and v in keys))  # null and dangling keys give no edge
        ei = data[child, f"f2p_{col}", parent].edge_index
        assert ei.shape[1] == expected
        assert torch.equal(data[parent, f"rev_f2p_{col}", child].edge_index, ei.flip(0))
        # each edge joins the child row to the parent row holding its key
        pk = db.tables[parent].df[db.tables[parent].pkey].to_numpy()
        assert all(pk[d] == fk.iloc[s] for s, d in ei.t().tolist())
    assert data["bank"].columns == (CONST_COLUMN,) and torch.equal(data["bank"].x, torch.ones(2, 1))
    assert data["account"].columns == ("balance", "kind") and data["account"].cardinalities == (0, 4)
    assert "time" in data["transfer"] and "time" not in data["account"]


def test_two_hop_edges_are_the_support_of_the_sparse_product_per_relation_and_capped():
    import scipy.sparse as sp

    db = synthetic_ecommerce(0, n_users=60, n_products=30, page_views_per_user=2)
    data = make_pkey_fkey_graph(db)
    names = candidate_templates(data, knn=False)
    assert "2hop::category->product->order" in names
    assert not any(n.startswith("2hop::user->order->user") for n in names)  # self-loops only: left out

    def adj(e):
        ei = data[e].edge_index.numpy()
        return sp.csr_matrix((np.ones(ei.shape[1]), (ei[0], ei[1])), shape=(data[e[0]].num_nodes, data[e[2]].num_nodes))

    for name in names:
        spec = parse_template(name, data)
        prod = (adj(spec.path[0]) @ adj(spec.path[1])).tocoo()
        expected = {(int(r), int(c)) for r, c in zip(prod.row, prod.col)}
        got = template_edges(data, name, max_edges=None)
        pairs = [tuple(p) for p in got.t().tolist()]
        assert len(pairs) == len(set(pairs)) and set(pairs) == expected, name
        capped = template_edges(data, name, max_edges=7, seed=3)
        assert capped.shape[1] == min(7, len(expected)) and {tuple(p) for p in capped.t().tolist()} <= expected
        assert torch.equal(capped, template_edges(data, name, max_edges=7, seed=3))
    # two relations between the same tables: one template per relation pair, named with the relations
    tiny = make_pkey_fkey_graph(tiny_db())
    both = [n for n in candidate_templates(tiny, knn=False) if n.startswith("2hop::transfer-")]
    assert "2hop::transfer-[f2p_src]->account-[rev_f2p_dst]->transfer" in both
    assert len({parse_template(n, tiny).path for n in both}) == len(both)


def test_a_row_newer_than_the_seed_time_cannot_change_the_output():
    db = synthetic_ecommerce(1, n_users=40, n_products=20, page_views_per_user=2)
    task = premium_purchase_task()
    t = pd.Timestamp("2024-09-01")
    base = snapshot(db, task, t)
    order = db.tables["order"].df
    planted = pd.DataFrame({"order_id": [len(order)], "user_id": [0], "product_id": [0],
                            "timestamp": [t + pd.Timedelta(seconds=1)], "quantity": [5]})
    db2 = Database({**db.tables, "order": Table(pd.concat([order, planted], ignore_index=True), "order_id",
                                                db.tables["order"].fkeys, "timestamp")})
    after = snapshot(db2, task, t)
    cfg = RDLGraphConfig.from_graph(base, "user", templates=["2hop::category->product->order"])
    model = RDLGraphModel(cfg).eval()
    with torch.no_grad():
        a = model(add_templates(base, cfg.templates)).logits
        b = model(add_templates(after, cfg.templates)).logits
    assert torch.equal(a, b)
    assert after["order"].num_nodes == base["order"].num_nodes
    assert float(after["order"].time.max()) <= t.value / 1e9


def test_hard_concrete_gate_closed_forms_and_monte_carlo():
    gate = HardConcreteGate(4, init_log_alpha=2.0)
    with torch.no_grad():
        gate.log_alpha.copy_(torch.tensor([2.0, 0.3, -1.0, -3.0]))
    det = torch.clamp(torch.sigmoid(gate.log_alpha) * (gate.zeta - gate.gamma) + gate.gamma, 0, 1)
    assert torch.allclose(gate.deterministic(), det) and gate.deterministic()[3] == 0
    gate.eval()
    assert torch.equal(gate(), gate.deterministic())
    draws = gate.sample(torch.Generator().manual_seed(0), shape=(100_000,)).detach().double()
    # E[gate] by quadrature over u in (0, 1) (midpoint rule on 2e5 points)
    u = (torch.arange(200_000, dtype=torch.float64) + 0.5) / 200_000
    la = gate.log_alpha.detach().double()
    s = torch.sigmoid((torch.log(u)[:, None] - torch.log1p(-u)[:, None] + la) / gate.beta)
    quad = torch.clamp(s * (gate.zeta - gate.gamma) + gate.gamma, 0, 1).mean(0)
    assert torch.allclose(draws.mean(0), quad, rtol=0.01, atol=1e-3)
    p_open = (draws > 0).double().mean(0)
    assert torch.allclose(gate.expected_l0().detach().double(), p_open, rtol=0.01, atol=2e-3)


def _small_graph(seed=0):
    db = synthetic_ecommerce(seed, n_users=60, n_products=30, page_views_per_user=3)
    data = snapshot(db, premium_purchase_task(), pd.Timestamp("2025-01-01"))
    return data


def test_every_template_gate_gets_a_task_gradient_with_penalties_at_zero():
    data = _small_graph()
    names = candidate_templates(data)
    g = add_templates(data, names, max_edges=500)
    cfg = RDLGraphConfig.from_graph(data, "user", templates=names, beta_vib=0.0, lambda_table=0.0,
                                    lambda_column=0.0, lambda_template=0.0)
    torch.manual_seed(0)
    model = RDLGraphModel(cfg).train()
    grad = torch.zeros(len(names))
    for _ in range(3):  # a sampled gate clamped at 1 has no gradient on that draw
        model.zero_grad()
        out = model(g)
        assert torch.equal(out.loss, out.task_loss + out.penalty) and out.penalty.item() == 0.0
        out.loss.backward()
        grad += model.template_gate.log_alpha.grad.abs()
    assert all(g[parse_template(n, data).edge_type].edge_index.shape[1] > 0 for n in names)
    # with two layers a template's messages reach the target when it ends at the user or one hop before it
    one_hop = {e[0] for e in g.edge_types if e[2] == "user"} | {"user"}
    reaches = torch.tensor([parse_template(n, data).edge_type[2] in one_hop for n in names])
    assert reaches.sum() >= 10 and "2hop::category->product->order" in [n for n, r in zip(names, reaches) if r]
    assert (grad[reaches] > 0).all(), [n for n, v in zip(names, grad) if v == 0]
    assert (grad[~reaches] == 0).all()


def test_closed_table_leaves_the_pruned_graph_and_pruning_changes_nothing_else():
    data = _small_graph()
    names = ["2hop::category->product->order", "knn::user"]
    g = add_templates(data, names)
    model = RDLGraphModel(RDLGraphConfig.from_graph(data, "user", templates=names)).eval()
    with torch.no_grad():
        model.table_gate.log_alpha[model.gated_tables.index("page_view")] = -3.0  # deterministic value 0
        model.template_gate.log_alpha[1] = -2.5
    plan = model.optimized_plan()
    assert plan.closed_tables == ["page_view"] and plan.templates == names[:1]
    pruned = plan.apply(g)
    assert "page_view" not in pruned.node_types
    assert not any("page_view" in (e[0], e[2]) for e in pruned.edge_types)
    assert ("user", "knn::user", "user") not in pruned.edge_types
    assert count_messages(pruned) < count_messages(g)
    with torch.no_grad():
        assert torch.allclose(model(g).logits, model(pruned).logits, atol=1e-5)


def test_plan_graph_is_built_without_the_closed_tables():
    db = synthetic_ecommerce(0, n_users=60, n_products=30, page_views_per_user=3)
    task, t = premium_purchase_task(), pd.Timestamp("2025-01-01")
    data = snapshot(db, task, t)
    names = ["2hop::category->product->order", "knn::user"]
    model = RDLGraphModel(RDLGraphConfig.from_graph(data, "user", templates=names)).eval()
    with torch.no_grad():
        for table in ("page_view", "product"):
            model.table_gate.log_alpha[model.gated_tables.index(table)] = -3.0
    plan = model.optimized_plan()
    assert plan.closed_tables == ["product", "page_view"] and plan.templates == names
    built = plan.build_graph(db, t, task=task, template_specs=model.specs, stats=None)
    applied = plan.apply(add_templates(data, names))
    assert set(built.node_types) == set(applied.node_types) == {"user", "category", "order"}
    assert set(built.edge_types) == set(applied.edge_types)
    for e in built.edge_types:
        assert torch.equal(built[e].edge_index, applied[e].edge_index), e
    with torch.no_grad():
        assert torch.allclose(model(built).logits, model(applied).logits, atol=1e-5)


def test_anneal_endpoints_and_gate_warmup():
    cfg = RDLTrainConfig(epochs=20, warmup_epochs=5)
    assert [anneal_temperature(e, cfg) for e in range(5)] == [2.0] * 5
    assert anneal_temperature(19, cfg) == pytest.approx(0.3)
    values = [anneal_temperature(e, cfg) for e in range(20)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_auroc_standard_error_null_closed_form_and_monte_carlo():
    # at A = 0.5 Hanley-McNeil's variance is the exact null variance of the Mann-Whitney statistic
    for n1, n2 in ((10, 10), (7, 40), (300, 700)):
        assert auroc_standard_error(0.5, n1, n2) == pytest.approx(((n1 + n2 + 1) / (12 * n1 * n2)) ** 0.5, rel=1e-12)
    assert auroc_standard_error(1.0, 5, 5) == 0.0
    # exponential scores (negatives Exp(1), positives Exp(rate r)): A = 1 / (1 + r) and Q1, Q2 are exact,
    # so the standard error matches the spread of AUROCs over repeated draws
    rng = np.random.default_rng(0)
    n1, n2, r, reps = 40, 60, 0.4, 4000
    pos = rng.exponential(1 / r, (reps, n1, 1))
    neg = rng.exponential(1.0, (reps, 1, n2))
    aucs = (pos > neg).mean(axis=(1, 2))
    assert aucs.mean() == pytest.approx(1 / (1 + r), abs=0.005)
    assert aucs.std() == pytest.approx(auroc_standard_error(1 / (1 + r), n1, n2), rel=0.05)


def test_select_penalty_keeps_the_sparsest_model_within_one_standard_error():
    se = auroc_standard_error(0.80, 300, 700)  # about 0.016
    lams = [0.01, 0.03, 0.1, 0.3]
    # all within one SE of the best: the largest penalty
    assert select_penalty(lams, [0.79, 0.80, 0.795, 0.80 - 0.9 * se], 300, 700) == 3
    # the largest penalty costs more than one SE: the next largest that does not
    assert select_penalty(lams, [0.79, 0.80, 0.80 - 0.5 * se, 0.80 - 1.5 * se], 300, 700) == 2
    # the order of the grid does not matter, and one model is its own choice
    assert select_penalty([0.3, 0.01, 0.1], [0.70, 0.80, 0.79], 300, 700) == 2
    assert select_penalty([0.05], [0.6], 10, 10) == 0
    # fewer validation labels, a wider SE: a sparser model becomes eligible
    assert select_penalty([0.01, 0.3], [0.80, 0.77], 300, 700) == 0
    assert select_penalty([0.01, 0.3], [0.80, 0.77], 30, 70) == 1


def test_save_and_load_round_trip(tmp_path):
    data = _small_graph()
    names = ["2hop::category->product->order"]
    g = add_templates(data, names)
    model = RDLGraphModel(RDLGraphConfig.from_graph(data, "user", templates=names, column_gating="channels")).eval()
    with torch.no_grad():
        model.table_gate.log_alpha.uniform_(-3, 3)
    model.save_pretrained(tmp_path)
    loaded = RDLGraphModel.from_pretrained(tmp_path).eval()
    assert loaded.config.templates == names and loaded.config.column_gating == "channels"
    with torch.no_grad():
        assert torch.equal(model(g).logits, loaded(g).logits)
    assert loaded.optimized_plan() == model.optimized_plan()


def test_clear_errors():
    db = tiny_db()
    with pytest.raises(InputError, match=r"fkeys\['bank_id'\]: expected a table of"):
        Database({"account": db.tables["account"]})
    bad = db.tables["transfer"].df.assign(time=db.tables["transfer"].df["time"].astype(str))
    with pytest.raises(InputError, match=r"time_col: expected a datetime64 column"):
        Database({**db.tables, "transfer": Table(bad, "transfer_id", {"src": "account"}, "time")})
    data = make_pkey_fkey_graph(db)
    with pytest.raises(InputError, match="a template that is a path of two relations"):
        parse_template("2hop::bank->transfer->account", data)
    with pytest.raises(InputError, match="name the relations"):
        parse_template("2hop::transfer->account->transfer", data)
    with pytest.raises(InputError, match="expected '2hop::A->B->C'"):
        parse_template("3hop::a->b", data)
    with pytest.raises(InputError, match="parse_template: name: expected '2hop::A->B->C'"):
        RDLGraphConfig.from_graph(data, "account", templates=["2hop::bank->account->bank->x"])
    task = premium_purchase_task()
    shop = synthetic_ecommerce(0, n_users=10, n_products=10, page_views_per_user=1)
    with pytest.raises(InputError, match="seed_time: expected a time at or after"):
        snapshot(shop, task, "2020-01-01")
