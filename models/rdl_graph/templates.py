"""Shortcut templates of the RDL structure optimiser (:mod:`icml26.models.rdl_graph.modeling`): naming, parsing and
materialising them on a PyG ``HeteroData``.

``2hop::A->B->C``: the support of ``Adj(A -r1-> B) @ Adj(B -r2-> C)`` for one pair of relations (the release's
``two_hop_shortcuts`` kept only the last relation per pair of tables; here every pair is its own template);
``knn::T``: each row's k nearest rows of ``T`` in feature space. Reconstruction: the template family and the
cap (a seeded uniform subset beyond ``max_edges``) are ours; the method's notes name 2-hop and kNN templates.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from icml26.errors import described, input_error
from icml26.validation import check_int

__all__ = ["TemplateSpec", "candidate_templates", "parse_template", "template_edges", "add_templates",
           "count_messages"]

_TWO_HOP = re.compile(r"^2hop::(\w+)(?:-\[(\w+)\])?->(\w+)(?:-\[(\w+)\])?->(\w+)$")
_KNN = re.compile(r"^knn::(\w+)(?:\[([\w,]+)\])?$")


def _meta(metadata) -> tuple[list[str], list[tuple[str, str, str]]]:
    if hasattr(metadata, "metadata"):
        metadata = metadata.metadata()
    node_types, edge_types = metadata
    return list(node_types), [tuple(e) for e in edge_types if "::" not in e[1]]


def _two_hop_paths(edge_types):
    """Pairs (e1, e2) with e1's destination e2's source, minus the trivial child->parent->same child loop."""
    out = []
    for e1 in edge_types:
        for e2 in edge_types:
            if e1[2] != e2[0]:
                continue
            if e1[1].startswith("rev_") and e2[1] == e1[1][4:] and e1[0] == e2[2]:
                continue  # parent -> its children -> back to the same parent: only self-loops
            out.append((e1, e2))
    return out


def _two_hop_name(e1, e2, paths) -> str:
    same = [p for p in paths if (p[0][0], p[0][2], p[1][2]) == (e1[0], e1[2], e2[2])]
    if len(same) == 1:
        return f"2hop::{e1[0]}->{e1[2]}->{e2[2]}"
    return f"2hop::{e1[0]}-[{e1[1]}]->{e1[2]}-[{e2[1]}]->{e2[2]}"


def candidate_templates(metadata, *, two_hop: bool = True, knn: bool = True,
                        knn_tables: Sequence[str] | None = None) -> list[str]:
    """Candidate shortcut templates of a schema (a ``HeteroData`` or its ``metadata()``).

    ``2hop::A->B->C`` for every pair of relations ``A -> B -> C`` (named with the relations,
    ``2hop::A-[r1]->B-[r2]->C``, when two relation pairs join the same tables), leaving out
    ``P -> children -> P`` through the same key (self-loops only); ``knn::T`` for every table
    (or ``knn_tables``).
    """
    node_types, edge_types = _meta(metadata)
    out: list[str] = []
    if two_hop:
        paths = _two_hop_paths(edge_types)
        out += [_two_hop_name(e1, e2, paths) for e1, e2 in paths]
    if knn:
        for table in (node_types if knn_tables is None else knn_tables):
            if table not in node_types:
                raise input_error("candidate_templates", "knn_tables", f"tables of {node_types}", table)
            out.append(f"knn::{table}")
    return out


@dataclass(frozen=True)
class TemplateSpec:
    """A parsed template: ``kind`` ("2hop" or "knn"), its edge type ``(src, name, dst)`` and what builds it."""

    name: str
    kind: str
    edge_type: tuple[str, str, str]
    path: tuple[tuple[str, str, str], ...] = ()
    columns: tuple[str, ...] | None = None


def parse_template(name: str, metadata) -> TemplateSpec:
    """The :class:`TemplateSpec` of ``name`` on a schema; :class:`InputError` if it is not a schema path."""
    fn = "parse_template"
    if not isinstance(name, str):
        raise TypeError(f"{fn}: name: expected a str, got {type(name).__name__}")
    node_types, edge_types = _meta(metadata)
    m = _KNN.match(name)
    if m:
        table = m.group(1)
        if table not in node_types:
            raise input_error(fn, "name", f"knn::T with T one of {node_types}", name)
        cols = tuple(m.group(2).split(",")) if m.group(2) else None
        return TemplateSpec(name, "knn", (table, name, table), columns=cols)
    m = _TWO_HOP.match(name)
    if not m:
        raise input_error(fn, "name", "'2hop::A->B->C', '2hop::A-[r1]->B-[r2]->C' or 'knn::T[col,...]'", name)
    a, r1, b, r2, c = m.groups()
    paths = _two_hop_paths(edge_types)
    match = [(e1, e2) for e1, e2 in paths if (e1[0], e1[2], e2[2]) == (a, b, c)
             and (r1 is None or e1[1] == r1) and (r2 is None or e2[1] == r2)]
    if len(match) != 1:
        what = "no" if not match else f"{len(match)} (name the relations: 2hop::A-[r1]->B-[r2]->C)"
        raise input_error(fn, "name", "a template that is a path of two relations of the schema",
                          described(f"{name!r} matching {what} relation pairs"))
    e1, e2 = match[0]
    return TemplateSpec(name, "2hop", (a, name, c), path=(e1, e2))


def _adjacency(edge_index: torch.Tensor, n_src: int, n_dst: int):
    import scipy.sparse as sp

    ei = edge_index.numpy()
    return sp.csr_matrix((np.ones(ei.shape[1], np.float32), (ei[0], ei[1])), shape=(n_src, n_dst))


def _cap(edge_index: np.ndarray, max_edges: int | None, seed: int) -> np.ndarray:
    if max_edges is None or edge_index.shape[1] <= max_edges:
        return edge_index
    keep = np.sort(np.random.default_rng(seed).choice(edge_index.shape[1], max_edges, replace=False))
    return edge_index[:, keep]


def template_edges(data, name: str, *, k: int = 10, max_edges: int | None = 2000, seed: int = 0) -> torch.Tensor:
    """``edge_index [2, E]`` (source, destination) of template ``name`` on graph ``data``.

    2-hop: the support of ``Adj(e1) @ Adj(e2)`` (scipy.sparse), each pair once; kNN: each row's ``k`` nearest
    other rows of its table on the named columns (all feature columns by default), the neighbour as source.
    Beyond ``max_edges`` a seeded uniform subset (``seed`` mixed with the name) is kept, in sorted order.
    """
    _check_build_options("template_edges", k, max_edges, seed)
    spec = parse_template(name, data.metadata())
    stream = (seed, zlib.crc32(name.encode()))
    if spec.kind == "2hop":
        (a, r1, b), (_, r2, c) = spec.path
        m1 = _adjacency(data[a, r1, b].edge_index, data[a].num_nodes, data[b].num_nodes)
        m2 = _adjacency(data[b, r2, c].edge_index, data[b].num_nodes, data[c].num_nodes)
        prod = (m1 @ m2).tocoo()
        ei = np.stack([prod.row, prod.col]).astype(np.int64)
        order = np.lexsort((ei[1], ei[0]))
        ei = ei[:, order]
    else:
        from sklearn.neighbors import NearestNeighbors

        table = spec.edge_type[0]
        x = data[table].x
        if spec.columns is not None:
            cols = list(data[table].columns)
            missing = [c for c in spec.columns if c not in cols]
            if missing:
                raise input_error("template_edges", "name", f"columns of {table}: {cols}", described(str(missing)))
            x = x[:, [cols.index(c) for c in spec.columns]]
        n = x.shape[0]
        kk = min(k, n - 1)
        if kk < 1:
            ei = np.zeros((2, 0), np.int64)
        else:
            nn_ = NearestNeighbors(n_neighbors=kk + 1).fit(x.numpy())
            idx = nn_.kneighbors(x.numpy(), return_distance=False)
            rows = np.repeat(np.arange(n), kk + 1)
            nbrs = idx.reshape(-1)
            keep = nbrs != rows
            ei = np.stack([nbrs[keep], rows[keep]]).astype(np.int64)
            ei = np.unique(ei, axis=1) if ei.size else ei
    seed_int = int(np.random.SeedSequence(stream).generate_state(1)[0])
    return torch.from_numpy(np.ascontiguousarray(_cap(ei, max_edges, seed_int)))


def _check_build_options(function: str, k, max_edges, seed) -> None:
    check_int(function, "k", k, low=1)
    if max_edges is not None:
        check_int(function, "max_edges", max_edges, low=1)
    check_int(function, "seed", seed, low=0)


def add_templates(data, names: Sequence[str], *, k: int = 10, max_edges: int | None = 2000, seed: int = 0):
    """A shallow copy of ``data`` with each template's edges as the edge type ``(src, name, dst)``."""
    if isinstance(names, str):  # one template name would be read as its characters
        raise input_error("add_templates", "names", "a list of template names", names)
    _check_build_options("add_templates", k, max_edges, seed)
    out = _shallow_copy(data)
    for name in names:
        spec = parse_template(name, data.metadata())
        out[spec.edge_type].edge_index = template_edges(data, name, k=k, max_edges=max_edges, seed=seed)
    return out


def _shallow_copy(data):
    from torch_geometric.data import HeteroData

    out = HeteroData()
    for key, value in data._global_store.items():
        out[key] = value
    for node_type in data.node_types:
        for key, value in data[node_type].items():
            out[node_type][key] = value
    for edge_type in data.edge_types:
        for key, value in data[edge_type].items():
            out[edge_type][key] = value
    return out


def count_messages(data) -> int:
    """Edges a forward pass sends messages along (each edge type whose two tables are in ``data``), per layer."""
    if not hasattr(data, "node_types") or not hasattr(data, "edge_types"):
        raise TypeError(str(input_error("count_messages", "data", "a torch_geometric HeteroData",
                                        described(type(data).__name__))))
    nodes = set(data.node_types)
    return int(sum(data[e].edge_index.shape[1] for e in data.edge_types if e[0] in nodes and e[2] in nodes))


