"""The RDL structure optimiser: learned table/column gates and schema shortcut templates for a
relational-database GNN.

Of "What Makes a Desired Graph for Relational Deep Learning?" (Cheng & Luo, ICML 2026, arXiv 2606.08491;
official code ``cy623/Structural_Optimizer_RDL``: ``gates.py``, ``model.py``, ``relgnn.py``). The graph a
GNN sees is optimised end to end with stochastic L0 gates (Louizos, Welling & Kingma, ICLR 2018):

- **filtering** (information overload): a hard-concrete gate per table multiplies the table's encoded
  nodes and every message it sends (a closed table is deleted, with its edge types, at inference); a gate
  per raw column multiplies that column's embedding inside the table's encoder, before the columns are
  pooled; a per-table variational information bottleneck (VIB) ``z = mu + exp(logvar / 2) eps`` with a
  KL to N(0, I);
- **injection** (semantic fragmentation): candidate shortcut *templates* (``2hop::A->B->C``: the support
  of the product of two relations' adjacencies; ``knn::T``: k nearest rows of ``T`` in feature space), each
  an edge type with its own ``SAGEConv`` whose aggregated messages are scaled by the template's gate.

Loss: ``L_task + beta_vib KL + lambda_table L0(tables) + lambda_column L0(columns) + lambda_template
L0(templates)`` with ``E[L0] = sigmoid(log_alpha - beta log(-gamma / zeta))``.

Deviations from the release, each a fix of a quirk read in its code (the method's notes list them):
(1) a conv exists for every template edge type (the release's ``HeteroConv`` knows only the raw edge types,
so injected edges never reach the GNN); (2) template messages are multiplied by the template's gate value
(``SAGEConv`` takes no edge weight, so the aggregated template messages are scaled, not the root term), which
gives the template gates a task gradient; (3) the gate temperature is annealed (2.0 -> 0.3 after 5 warm-up
epochs, :func:`icml26.training.rdl_graph.anneal_temperature`; the release never calls its anneal);
(4) evaluation uses the deterministic gates and the VIB mean everywhere; (5) 2-hop templates are enumerated
per pair of relations, not per pair of tables. Reconstruction, each a config field: column gates act on the
raw columns (``column_gating="columns"``; the release's tiling of the gate over embedding channels is
``"channels"``), the template family (2-hop and kNN), the root term shared by all edge types of a node type
(so a gate at 0 is exactly a deleted edge type), and the VIB mean ``mu = h + W h`` with ``W`` initialised at 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoConfig, AutoModel, PretrainedConfig, PreTrainedModel
from transformers import initialization as init
from transformers.utils import ModelOutput

from icml26.errors import describe, described, input_error
from icml26.models.rdl_graph.templates import TemplateSpec, add_templates, parse_template
from icml26.validation import check_finite

__all__ = ["HardConcreteGate", "RDLGraphConfig", "RDLGraphModel", "RDLGraphOutput", "RDLGraphPlan",
    "COLUMN_GATINGS", "NEIGHBOR_AGGRS"]

COLUMN_GATINGS = ("columns", "channels")
NEIGHBOR_AGGRS = ("sum", "mean", "max")
_EPS = 1e-6


# ---------------------------------------------------------------------------------------------
# the hard-concrete gate
# ---------------------------------------------------------------------------------------------
class HardConcreteGate(nn.Module):
    """``n`` hard-concrete L0 gates (Louizos et al. 2018, eq. 10-12; the release's ``gates.py`` constants).

    ``sample()``: ``u ~ U(0, 1)``, ``s = sigmoid((log u - log(1 - u) + log_alpha) / beta)``,
    ``clamp(s (zeta - gamma) + gamma, 0, 1)``; ``deterministic()``: ``clamp(sigmoid(log_alpha)
    (zeta - gamma) + gamma, 0, 1)`` (a gate is *closed* when this is 0, i.e. ``log_alpha <=
    logit(-gamma / (zeta - gamma))``, -2.40 at the defaults); ``expected_l0()``: ``P(gate > 0) =
    sigmoid(log_alpha - beta log(-gamma / zeta))``. ``forward()`` samples in training mode and is
    deterministic in eval mode. ``beta`` is a plain attribute so a schedule can anneal it.

    ``straight_through`` (default): a sample's value is the clamped one, its gradient the unclamped
    stretched value's (the release's "straight-through hard-concrete value"). Without it a sample clamped
    at 0 or 1 passes no task gradient, and at the annealed temperature 0.3 nearly every sample is clamped,
    so only the L0 term would still move the gates.
    """

    def __init__(self, n: int, beta: float = 2.0, gamma: float = -0.1, zeta: float = 1.1,
                 init_log_alpha: float = 2.0, straight_through: bool = True):
        super().__init__()
        self.straight_through = bool(straight_through)
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise input_error("HardConcreteGate", "n", "an int >= 0", n)
        self.beta = check_finite("HardConcreteGate", "beta", beta, positive=True)
        self.gamma = check_finite("HardConcreteGate", "gamma", gamma)
        self.zeta = check_finite("HardConcreteGate", "zeta", zeta)
        if not (self.gamma < 0 and self.zeta > 1):
            raise input_error("HardConcreteGate", "gamma/zeta", "gamma < 0 < 1 < zeta",
                              described(f"gamma={gamma}, zeta={zeta}"))
        self.init_log_alpha = check_finite("HardConcreteGate", "init_log_alpha", init_log_alpha)
        self.log_alpha = nn.Parameter(torch.full((n,), self.init_log_alpha))

    def extra_repr(self) -> str:
        return f"n={self.log_alpha.numel()}, beta={self.beta:g}, gamma={self.gamma:g}, zeta={self.zeta:g}"

    def _stretch(self, s: torch.Tensor, straight_through: bool = False) -> torch.Tensor:
        stretched = s * (self.zeta - self.gamma) + self.gamma
        hard = stretched.clamp(0.0, 1.0)
        if straight_through:  # the clamped value forward, the unclamped one's gradient backward
            return hard.detach() + stretched - stretched.detach()
        return hard

    def sample(self, generator: torch.Generator | None = None, shape: Sequence[int] = ()) -> torch.Tensor:
        u = torch.rand(*shape, *self.log_alpha.shape, generator=generator, device=self.log_alpha.device)
        u = u.clamp(_EPS, 1 - _EPS)
        s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + self.log_alpha) / self.beta)
        return self._stretch(s, self.straight_through)

    def deterministic(self) -> torch.Tensor:
        return self._stretch(torch.sigmoid(self.log_alpha))

    def expected_l0(self) -> torch.Tensor:
        return torch.sigmoid(self.log_alpha - self.beta * math.log(-self.gamma / self.zeta))

    def forward(self) -> torch.Tensor:
        return self.sample() if self.training else self.deterministic()


# ---------------------------------------------------------------------------------------------
# config
# ---------------------------------------------------------------------------------------------
class RDLGraphConfig(PretrainedConfig):
    """Configuration of :class:`RDLGraphModel` (defaults: a small CPU model; penalties as the release's).

    Args:
        node_columns: per table, its feature columns as ``[name, cardinality]`` (0: numeric), in the order of
            the graph's ``x`` (``RDLGraphConfig.from_graph`` reads them off a ``HeteroData``).
        table_names: the tables in model order (default: ``node_columns``' order); the gates follow it.
        edge_types: the schema's edge types ``[src, relation, dst]``.
        timed_tables: tables with a time column (they get the relative-time encoding).
        target_table: the table whose rows are predicted; its table gate stays open.
        templates: candidate template names (:func:`candidate_templates`); a conv is built for each.
        channels: width of every node representation (the release: 128; here 32 for CPU).
        column_channels: width of each column's embedding before pooling.
        num_layers: message-passing layers (RelBench: 2).
        neighbor_aggr: ``SAGEConv`` aggregation over neighbours (``"sum"`` the method's CPU plan, ``"mean"``
            RelBench's); edge types into a table are summed (``HeteroConv(aggr="sum")``).
        time_frequencies: sinusoid pairs of the relative-time encoding (periods 1 to 1000 days, log spaced).
        table_gates / column_gates / template_gates / vib: switch each filter on (off: a gate fixed at 1).
        column_gating: ``"columns"`` (a gate per raw column's embedding, before pooling) or ``"channels"``
            (the release: the gate vector tiled over the pooled embedding's channels).
        gate_beta / gate_gamma / gate_zeta / gate_init_log_alpha: hard-concrete constants (2.0, -0.1, 1.1, 2.0).
        beta_vib / lambda_table / lambda_column / lambda_template: penalty weights (all 1e-4 in the release).
        knn_k: neighbours of a ``knn::T`` template; max_edges_per_template: cap of a template's edges per graph.
    """

    model_type = "rdl_graph"
    node_columns: dict | None = None
    table_names: list | None = None
    edge_types: list | None = None
    timed_tables: list | None = None
    target_table: str | None = None
    templates: list | None = None
    channels: int = 32
    column_channels: int = 8
    num_layers: int = 2
    neighbor_aggr: str = "sum"
    time_frequencies: int = 8
    table_gates: bool = True
    column_gates: bool = True
    template_gates: bool = True
    vib: bool = True
    column_gating: str = "columns"
    gate_beta: float = 2.0
    gate_gamma: float = -0.1
    gate_zeta: float = 1.1
    gate_init_log_alpha: float = 2.0
    beta_vib: float = 1e-4
    lambda_table: float = 1e-4
    lambda_column: float = 1e-4
    lambda_template: float = 1e-4
    knn_k: int = 10
    max_edges_per_template: int | None = 2000

    def __post_init__(self, **kwargs):
        super().__post_init__(**kwargs)
        fn = "RDLGraphConfig"
        self.node_columns = {str(t): [[str(c), int(k)] for c, k in cols] for t, cols in (self.node_columns or {}).items()}
        # the table order fixes which log_alpha belongs to which table: kept as a list (JSON sorts dict keys)
        self.table_names = list(self.table_names or self.node_columns)
        if sorted(self.table_names) != sorted(self.node_columns):
            raise input_error(fn, "table_names", f"the tables of node_columns {sorted(self.node_columns)}",
                              self.table_names)
        self.edge_types = [list(map(str, e)) for e in (self.edge_types or [])]
        self.timed_tables = list(self.timed_tables or [])
        self.templates = list(self.templates or [])
        for name in ("channels", "column_channels", "num_layers", "time_frequencies", "knn_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise input_error(fn, name, "a positive int", value)
        if self.max_edges_per_template is not None and (not isinstance(self.max_edges_per_template, int)
                                                        or self.max_edges_per_template < 1):
            raise input_error(fn, "max_edges_per_template", "None or a positive int", self.max_edges_per_template)
        if self.neighbor_aggr not in NEIGHBOR_AGGRS:
            raise input_error(fn, "neighbor_aggr", f"one of {NEIGHBOR_AGGRS}", self.neighbor_aggr)
        if self.column_gating not in COLUMN_GATINGS:
            raise input_error(fn, "column_gating", f"one of {COLUMN_GATINGS}", self.column_gating)
        for name in ("beta_vib", "lambda_table", "lambda_column", "lambda_template"):
            setattr(self, name, check_finite(fn, name, getattr(self, name), non_negative=True))
        # the gates' constants as HardConcreteGate checks them, so a bad config fails when made, not in the model
        for name, bounds in (("gate_beta", {"positive": True}), ("gate_gamma", {"high": 0, "high_open": True}),
                             ("gate_zeta", {"low": 1, "low_open": True}), ("gate_init_log_alpha", {})):
            setattr(self, name, check_finite(fn, name, getattr(self, name), **bounds))
        for e in self.edge_types:
            if len(e) != 3 or e[0] not in self.node_columns or e[2] not in self.node_columns:
                raise input_error(fn, "edge_types", "[src, relation, dst] between tables of node_columns", e)
        for t in self.timed_tables:
            if t not in self.node_columns:
                raise input_error(fn, "timed_tables", f"tables of {sorted(self.node_columns)}", t)
        if self.node_columns and self.target_table not in self.node_columns:
            raise input_error(fn, "target_table", f"a table of {sorted(self.node_columns)}", self.target_table)
        metadata = (list(self.node_columns), [tuple(e) for e in self.edge_types])
        for name in self.templates:
            parse_template(name, metadata)

    @classmethod
    def from_graph(cls, data, target_table: str, templates: Sequence[str] = (), **kwargs) -> RDLGraphConfig:
        """A config for graphs shaped like ``data`` (from :func:`icml26.eval.tasks.rdl_graph.make_pkey_fkey_graph`)."""
        node_columns = {t: [[c, int(k)] for c, k in zip(data[t].columns, data[t].cardinalities)]
                        for t in data.node_types}
        edge_types = [list(e) for e in data.edge_types if "::" not in e[1]]
        timed = [t for t in data.node_types if "time" in data[t]]
        return cls(node_columns=node_columns, edge_types=edge_types, timed_tables=timed, target_table=target_table,
                   templates=list(templates), **kwargs)

    @property
    def tables(self) -> list[str]:
        return list(self.table_names)

    def template_specs(self) -> list[TemplateSpec]:
        metadata = (self.tables, [tuple(e) for e in self.edge_types])
        return [parse_template(name, metadata) for name in self.templates]


AutoConfig.register(RDLGraphConfig.model_type, RDLGraphConfig, exist_ok=True)


# ---------------------------------------------------------------------------------------------
# model pieces
# ---------------------------------------------------------------------------------------------
@dataclass
class RDLGraphOutput(ModelOutput):
    """``loss`` (task + penalties, with labels), ``logits`` of the target rows, ``task_loss``, ``penalty``
    and ``gates``: the gate values this pass used, ``{"table": {T: g}, "template": {name: h},
    "column": {T: [w_c]}}``."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    task_loss: torch.Tensor | None = None
    penalty: torch.Tensor | None = None
    gates: dict | None = None


class ColumnEncoder(nn.Module):
    """One table's encoder: an embedding per column (numeric: ``x w_c + b_c``; categorical: a lookup),
    optionally gated per column, flattened and mapped to ``channels`` (a linear map, LayerNorm, ReLU)."""

    def __init__(self, columns: list[list], column_channels: int, channels: int):
        super().__init__()
        self.cards = [int(k) for _, k in columns]
        self.num_idx = [j for j, k in enumerate(self.cards) if k == 0]
        self.cat_idx = [j for j, k in enumerate(self.cards) if k > 0]
        self.num_weight = nn.Parameter(torch.empty(len(self.num_idx), column_channels))
        self.num_bias = nn.Parameter(torch.empty(len(self.num_idx), column_channels))
        self.embeddings = nn.ModuleList(nn.Embedding(self.cards[j], column_channels) for j in self.cat_idx)
        self.proj = nn.Linear(len(columns) * column_channels, channels)
        self.norm = nn.LayerNorm(channels)
        self.column_channels = column_channels

    def forward(self, x: torch.Tensor, column_gate: torch.Tensor | None) -> torch.Tensor:
        n, c = x.shape
        emb = x.new_zeros(n, c, self.column_channels)
        if self.num_idx:
            emb[:, self.num_idx] = x[:, self.num_idx, None] * self.num_weight + self.num_bias
        for j, table in zip(self.cat_idx, self.embeddings):
            emb[:, j] = table(x[:, j].long().clamp(0, self.cards[j] - 1))
        if column_gate is not None:
            emb = emb * column_gate[None, :, None]
        return F.relu(self.norm(self.proj(emb.reshape(n, -1))))


class RelativeTimeEncoding(nn.Module):
    """``Linear([sin(d w_k), cos(d w_k)])`` of ``d`` = seed time - row time in days (RelBench's
    ``HeteroTemporalEncoder``: a positional encoding of the age, then a linear layer)."""

    def __init__(self, frequencies: int, channels: int):
        super().__init__()
        self.frequencies = frequencies
        self.linear = nn.Linear(2 * frequencies, channels)

    def forward(self, age_days: torch.Tensor) -> torch.Tensor:
        # computed here, not a buffer: from_pretrained builds modules on the meta device
        omega = 2 * math.pi / torch.logspace(0, 3, self.frequencies, device=age_days.device)
        phase = age_days[:, None].float() * omega
        return self.linear(torch.cat([phase.sin(), phase.cos()], -1))


class GatedMessages(nn.Module):
    """``gate * SAGEConv(x, edge_index)`` without the root term (the node type's root is shared), so a gate
    of 0 is exactly a deleted edge type."""

    def __init__(self, channels: int, aggr: str):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.conv = SAGEConv((channels, channels), channels, aggr=aggr, root_weight=False)

    def forward(self, x, edge_index, gate):
        return self.conv(x, edge_index) * gate


class VIB(nn.Module):
    """Per-table variational bottleneck: ``mu = h + W_mu h`` (``W_mu`` from 0), ``logvar = W_lv h + b``
    (``W_lv`` from 0, ``b`` = -2); a sample in training, ``mu`` in eval; KL to N(0, I) per row, averaged."""

    def __init__(self, channels: int):
        super().__init__()
        self.mu = nn.Linear(channels, channels)
        self.logvar = nn.Linear(channels, channels)

    def forward(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, logvar = h + self.mu(h), self.logvar(h)
        kl = 0.5 * (mu.pow(2) + logvar.exp() - 1 - logvar).sum(-1).mean() if h.shape[0] else h.sum()
        z = mu + torch.exp(0.5 * logvar) * torch.randn_like(mu) if self.training else mu
        return z, kl


@dataclass
class RDLGraphPlan:
    """The discrete graph the gates chose: a gate is closed when its deterministic value is 0."""

    tables: list[str]
    closed_tables: list[str]
    columns: dict[str, list[str]]
    closed_columns: dict[str, list[str]]
    templates: list[str]
    closed_templates: list[str]
    gate_values: dict = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in ("tables", "closed_tables", "columns", "closed_columns", "templates",
                                              "closed_templates", "gate_values")}

    def build_graph(self, db, seed_time, *, task=None, stats=None, template_specs=(), k: int = 10,
                    max_edges: int | None = 2000, seed: int = 0):
        """The plan's graph of ``db`` at ``seed_time`` built directly: closed tables are never built.

        A kept template whose middle table is closed (``2hop::category->product->order`` with ``product``
        closed) is joined through that table's keys, which are then dropped with it. ``template_specs``: the
        model's :class:`TemplateSpec` list (``model.specs``); ``task`` adds labels as
        :func:`icml26.eval.tasks.rdl_graph.snapshot` does.
        """
        from icml26.eval.tasks.rdl_graph import make_pkey_fkey_graph, snapshot

        middles = {spec.path[0][2] for spec in template_specs if spec.name in self.templates and spec.kind == "2hop"}
        build = [t for t in db.tables if t in set(self.tables) | middles]
        if task is not None:
            data = snapshot(db, task, seed_time, stats=stats, tables=build)
        else:
            data = make_pkey_fkey_graph(db, upto=seed_time, stats=stats, tables=build)
        data = add_templates(data, self.templates, k=k, max_edges=max_edges, seed=seed)
        return self.apply(data)

    def apply(self, data):
        """``data`` without the closed tables, every edge type that touches them, and the closed templates."""
        from torch_geometric.data import HeteroData

        if not isinstance(data, HeteroData):
            raise TypeError(str(input_error("RDLGraphPlan.apply", "data", "a torch_geometric HeteroData",
                                            described(type(data).__name__))))

        keep = set(self.tables)
        out = HeteroData()
        for key, value in data._global_store.items():
            out[key] = value
        for t in data.node_types:
            if t in keep:
                for key, value in data[t].items():
                    out[t][key] = value
        for e in data.edge_types:
            if e[0] in keep and e[2] in keep and ("::" not in e[1] or e[1] in self.templates):
                out[e].edge_index = data[e].edge_index
        return out


# ---------------------------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------------------------
class RDLGraphPreTrainedModel(PreTrainedModel):
    config_class = RDLGraphConfig
    base_model_prefix = ""
    main_input_name = "data"
    supports_gradient_checkpointing = False

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            init.xavier_uniform_(module.weight)
            if module.bias is not None:
                init.zeros_(module.bias)
            if getattr(module, "_zero_init", False):
                init.zeros_(module.weight)
            if getattr(module, "_bias_init", None) is not None:
                init.constant_(module.bias, module._bias_init)
        elif isinstance(module, nn.Embedding):
            init.normal_(module.weight, std=1.0)
        elif isinstance(module, nn.LayerNorm):
            init.ones_(module.weight)
            init.zeros_(module.bias)
        elif isinstance(module, ColumnEncoder):
            init.normal_(module.num_weight, std=1.0)
            init.zeros_(module.num_bias)
        elif isinstance(module, HardConcreteGate):
            init.constant_(module.log_alpha, module.init_log_alpha)


class RDLGraphModel(RDLGraphPreTrainedModel):
    """Hetero GraphSAGE on a pk-fk graph with learned table/column gates, per-table VIB and gated templates.

    ``forward(data, labels=None)``: ``data`` is a ``HeteroData`` from
    :func:`icml26.eval.tasks.rdl_graph.make_pkey_fkey_graph` (any subset of the config's tables and edge types,
    plus template edge types from :func:`add_templates`); ``labels`` (default ``data[target].y``) are read at
    ``data[target].label_mask``. Tables and edge types absent from ``data`` are skipped, which is how a
    pruned graph (:meth:`RDLGraphPlan.apply`) saves its cost.
    """

    def __init__(self, config: RDLGraphConfig):
        if not isinstance(config, RDLGraphConfig):
            raise TypeError(str(input_error("RDLGraphModel", "config", "an RDLGraphConfig", described(type(config).__name__))))
        super().__init__(config)
        from torch_geometric.nn import HeteroConv

        ch = config.channels
        key = self._key
        # raw-schema parts first, templates and gates last: arms that differ only in templates and gates
        # start from the same weights when built under the same seed
        self.encoders = nn.ModuleDict({key(t): ColumnEncoder(config.node_columns[t], config.column_channels, ch)
                                       for t in config.tables})
        self.time_encoders = nn.ModuleDict({key(t): RelativeTimeEncoding(config.time_frequencies, ch)
                                            for t in config.timed_tables})
        self.roots = nn.ModuleList(nn.ModuleDict({key(t): nn.Linear(ch, ch) for t in config.tables})
                                   for _ in range(config.num_layers))
        self.norms = nn.ModuleList(nn.ModuleDict({key(t): nn.LayerNorm(ch) for t in config.tables})
                                   for _ in range(config.num_layers))
        raw = [tuple(e) for e in config.edge_types]
        raw_convs = [{e: GatedMessages(ch, config.neighbor_aggr) for e in raw} for _ in range(config.num_layers)]
        self.head = nn.Sequential(nn.Linear(ch, ch), nn.ReLU(), nn.Linear(ch, 1))
        self.vib = nn.ModuleDict({key(t): VIB(ch) for t in config.tables}) if config.vib else None
        if self.vib is not None:
            for v in self.vib.values():
                v.mu._zero_init = v.logvar._zero_init = True
                v.logvar._bias_init = -2.0
        self.specs = config.template_specs()
        for convs in raw_convs:
            convs.update({s.edge_type: GatedMessages(ch, config.neighbor_aggr) for s in self.specs})
        self.convs = nn.ModuleList(HeteroConv(convs, aggr="sum") for convs in raw_convs)
        gate_args = dict(beta=config.gate_beta, gamma=config.gate_gamma, zeta=config.gate_zeta,
                         init_log_alpha=config.gate_init_log_alpha)
        self.gated_tables = [t for t in config.tables if t != config.target_table]
        self.table_gate = HardConcreteGate(len(self.gated_tables), **gate_args) if config.table_gates else None
        self.column_gate = nn.ModuleDict({key(t): HardConcreteGate(len(config.node_columns[t]), **gate_args)
                                          for t in config.tables}) if config.column_gates else None
        self.template_gate = HardConcreteGate(len(self.specs), **gate_args) \
            if config.template_gates and self.specs else None
        self.post_init()

    @staticmethod
    def _key(table: str) -> str:
        return f"t_{table}"

    def gates(self) -> list[HardConcreteGate]:
        """Every hard-concrete gate of the model (for the temperature schedule and the gate learning rate)."""
        out = [g for g in (self.table_gate, self.template_gate) if g is not None]
        if self.column_gate is not None:
            out += list(self.column_gate.values())
        return out

    def set_temperature(self, beta: float) -> None:
        for gate in self.gates():
            gate.beta = float(beta)

    def gate_parameters(self) -> list[nn.Parameter]:
        return [g.log_alpha for g in self.gates()]

    # -- gate values ----------------------------------------------------------------------------
    def _gate_values(self) -> dict[str, dict[str, torch.Tensor]]:
        cfg, one = self.config, torch.ones((), device=self.head[0].weight.device)
        table = dict.fromkeys(cfg.tables, one)
        if self.table_gate is not None:
            table.update(zip(self.gated_tables, self.table_gate().unbind(0)))
        template = {s.name: one for s in self.specs}
        if self.template_gate is not None:
            template.update(zip([s.name for s in self.specs], self.template_gate().unbind(0)))
        column = {t: self.column_gate[self._key(t)]() for t in cfg.tables} if self.column_gate is not None else {}
        return {"table": table, "template": template, "column": column}

    def penalty(self) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """``lambda_table L0 + lambda_column L0 + lambda_template L0`` (expected L0 of each gate family)."""
        cfg = self.config
        zero = torch.zeros((), device=self.head[0].weight.device)
        terms = {"l0_table": self.table_gate.expected_l0().sum() if self.table_gate is not None else zero,
                 "l0_template": self.template_gate.expected_l0().sum() if self.template_gate is not None else zero,
                 "l0_column": sum((g.expected_l0().sum() for g in self.column_gate.values()), zero)
                 if self.column_gate is not None else zero}
        total = (cfg.lambda_table * terms["l0_table"] + cfg.lambda_column * terms["l0_column"]
                 + cfg.lambda_template * terms["l0_template"])
        return total, terms

    # -- forward --------------------------------------------------------------------------------
    def forward(self, data, labels: torch.Tensor | None = None, **kwargs) -> RDLGraphOutput:
        cfg = self.config
        fn = "RDLGraphModel.forward"
        target = cfg.target_table
        if not hasattr(data, "node_types") or not hasattr(data, "edge_types"):
            raise TypeError(str(input_error(fn, "data", "a torch_geometric HeteroData (make_pkey_fkey_graph, snapshot)",
                                            described(type(data).__name__))))
        if target not in data.node_types:
            raise input_error(fn, "data", f"a graph holding the target table {target!r}",
                              described(f"tables {data.node_types}"))
        tables = [t for t in data.node_types if t in cfg.node_columns]
        gates = self._gate_values()
        seed_time = getattr(data, "seed_time", None)
        h: dict[str, torch.Tensor] = {}
        kl = torch.zeros((), device=self.head[0].weight.device)
        for t in tables:
            x = data[t].x
            if x.shape[1] != len(cfg.node_columns[t]):
                raise input_error(fn, f"data[{t!r}].x", f"{len(cfg.node_columns[t])} columns", tuple(x.shape))
            col = gates["column"].get(t)
            enc = self.encoders[self._key(t)]
            if cfg.column_gating == "columns" or col is None:
                z = enc(x, col)
            else:
                reps = math.ceil(cfg.channels / col.numel())
                z = enc(x, None) * col.repeat(reps)[: cfg.channels]
            if t in cfg.timed_tables and seed_time is not None and "time" in data[t]:
                age = (float(seed_time) - data[t].time) / 86400.0
                z = z + self.time_encoders[self._key(t)](age)
            if self.vib is not None:
                z, kl_t = self.vib[self._key(t)](z)
                kl = kl + kl_t
            h[t] = z * gates["table"][t]
        edges = {e: data[e].edge_index for e in data.edge_types if e[0] in h and e[2] in h
                 and e in self.convs[0].convs}
        gate = {e: gates["table"][e[0]] * (gates["template"][e[1]] if "::" in e[1] else 1.0) for e in edges}
        for layer in range(cfg.num_layers):
            messages = self.convs[layer](h, edges, gate_dict=gate) if edges else {}
            new = {}
            for t in tables:
                out = self.roots[layer][self._key(t)](h[t])
                if t in messages:
                    out = out + messages[t]
                new[t] = F.relu(self.norms[layer][self._key(t)](out))
            h = new
        logits = self.head(h[target]).squeeze(-1)
        if labels is None and "y" in data[target]:
            labels = data[target].y
        loss = task_loss = penalty = None
        if labels is not None:
            if not isinstance(labels, torch.Tensor) or labels.shape != logits.shape:
                raise input_error(fn, "labels", f"a tensor of shape {tuple(logits.shape)}", describe(labels))
            mask = data[target].label_mask if "label_mask" in data[target] else torch.ones_like(labels, dtype=torch.bool)
            task_loss = F.binary_cross_entropy_with_logits(logits[mask], labels[mask].float())
            penalty, _ = self.penalty()
            penalty = penalty + cfg.beta_vib * kl
            loss = task_loss + penalty
        return RDLGraphOutput(loss=loss, logits=logits, task_loss=task_loss, penalty=penalty, gates=gates)

    # -- the discrete plan ------------------------------------------------------------------------
    @torch.no_grad()
    def optimized_plan(self) -> RDLGraphPlan:
        """Kept and closed tables, columns and templates by the deterministic gates (closed iff value == 0)."""
        cfg = self.config
        table = dict.fromkeys(cfg.tables, 1.0)
        if self.table_gate is not None:
            table.update(zip(self.gated_tables, self.table_gate.deterministic().tolist()))
        template = {s.name: 1.0 for s in self.specs}
        if self.template_gate is not None:
            template.update(zip([s.name for s in self.specs], self.template_gate.deterministic().tolist()))
        column = {t: [1.0] * len(cfg.node_columns[t]) for t in cfg.tables}
        if self.column_gate is not None:
            column = {t: self.column_gate[self._key(t)].deterministic().tolist() for t in cfg.tables}
        names = {t: [c for c, _ in cfg.node_columns[t]] for t in cfg.tables}
        kept = [t for t in cfg.tables if table[t] > 0]
        return RDLGraphPlan(
            tables=kept, closed_tables=[t for t in cfg.tables if table[t] == 0],
            columns={t: [c for c, g in zip(names[t], column[t]) if g > 0] for t in kept},
            closed_columns={t: [c for c, g in zip(names[t], column[t]) if g == 0] for t in cfg.tables},
            templates=[n for n, g in template.items() if g > 0 and _template_tables_kept(n, self.specs, kept)],
            closed_templates=[n for n, g in template.items()
                              if not (g > 0 and _template_tables_kept(n, self.specs, kept))],
            gate_values={"table": table, "template": template, "column": column})


def _template_tables_kept(name: str, specs, kept) -> bool:
    spec = next(s for s in specs if s.name == name)
    return spec.edge_type[0] in kept and spec.edge_type[2] in kept


AutoModel.register(RDLGraphConfig, RDLGraphModel, exist_ok=True)
