"""Relational databases for relational deep learning (RDL): tables with keys and time columns, the
primary-key/foreign-key graph, time-respecting snapshots, a synthetic shop with planted structure,
and a reader/writer for RelBench's local directory layout.

The graph follows RelBench's ``make_pkey_fkey_graph`` (``snap-stanford/relbench``,
``relbench/modeling/graph.py``; Robinson et al., "RelBench", NeurIPS 2024): one node type per table,
features are the table's columns without its primary and foreign keys (a featureless table gets the
constant column ``__const__``), ``time`` is the unix time in seconds of the table's time column, and every
foreign-key column ``c`` of table ``T`` pointing at ``P`` gives the edge types ``(T, "f2p_c", P)`` (child row
to parent row) and its transpose ``(P, "rev_f2p_c", T)``; null and dangling keys give no edge.

Reconstruction: RelBench encodes columns with ``torch_frame``; here every column is one scalar of
``x`` (numeric columns standardised with statistics of the rows the graph may see, categorical columns as
integer codes, 0 for unseen or missing) and the model embeds each column itself
(:mod:`icml26.models.rdl_graph.modeling`). RelBench samples neighbourhoods with a temporal ``NeighborLoader``;
here a snapshot is the whole database up to the seed time (``upto``), so no row newer than the seed time
exists in the graph at all (full batch per snapshot, as the CPU plan of the method's notes).
"""

from __future__ import annotations

import datetime
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from icml26.errors import described, input_error
from icml26.validation import check_finite, check_int

__all__ = ["Table", "Database", "EntityTask", "ColumnStats", "column_stats", "make_pkey_fkey_graph",
           "snapshot", "snapshots", "monthly_seed_times", "split_seed_times", "synthetic_ecommerce",
           "premium_purchase_task", "write_relbench_directory", "load_relbench_directory", "load_relbench_task",
           "CONST_COLUMN"]

CONST_COLUMN = "__const__"


_A_TIME, _A_DELTA = "a time (a pandas Timestamp, datetime or ISO date string)", "a positive pandas Timedelta"


def _timestamp(function: str, argument: str, value) -> pd.Timestamp:
    """``pd.Timestamp(value)``, or :class:`InputError` naming ``argument`` when it is not a point in time."""
    try:
        t = None if isinstance(value, bool) or value is None else pd.Timestamp(value)
    except (TypeError, ValueError) as exc:
        raise input_error(function, argument, _A_TIME, described(f"{value!r} ({exc})")) from None
    if t is None or pd.isna(t):
        raise input_error(function, argument, _A_TIME, value)
    return t


def _timedelta(function: str, argument: str, value) -> pd.Timedelta:
    """A positive ``pd.Timedelta`` (from a Timedelta, ``datetime.timedelta`` or ``numpy.timedelta64``)."""
    if not isinstance(value, (pd.Timedelta, datetime.timedelta, np.timedelta64)):
        raise TypeError(str(input_error(function, argument, _A_DELTA, described(f"{type(value).__name__} {value!r}"))))
    delta = pd.Timedelta(value)
    if pd.isna(delta) or delta <= pd.Timedelta(0):
        raise input_error(function, argument, _A_DELTA, value)
    return delta


def _check_db(function: str, db) -> None:
    if not isinstance(db, Database):
        raise TypeError(str(input_error(function, "db", "a Database", described(type(db).__name__))))


def _is_datetime(series: pd.Series) -> bool:
    return pd.api.types.is_datetime64_any_dtype(series)


def _is_categorical(series: pd.Series) -> bool:
    return not (pd.api.types.is_numeric_dtype(series) or pd.api.types.is_bool_dtype(series)
                or _is_datetime(series))


@dataclass
class Table:
    """One table: a DataFrame, its primary key (or None), foreign keys ``{column: parent table}`` and time column."""

    df: pd.DataFrame
    pkey: str | None = None
    fkeys: dict[str, str] = field(default_factory=dict)
    time_col: str | None = None

    def feature_columns(self) -> list[str]:
        """Columns that become node features: everything but the keys and the time column."""
        drop = {self.pkey, self.time_col, *self.fkeys}
        return [c for c in self.df.columns if c not in drop]


class Database:
    """Tables with keys and time columns, validated once (RelBench's ``Database``).

    ``val_timestamp`` / ``test_timestamp`` split seed times the RelBench way (train before val, val before
    test). Raises :class:`InputError` for a foreign key to a missing table or column, a duplicated primary key
    and a time column that is not ``datetime64``.
    """

    def __init__(self, tables: dict[str, Table], val_timestamp=None, test_timestamp=None):
        fn = "Database"
        if not isinstance(tables, dict) or not tables:
            raise input_error(fn, "tables", "a non-empty dict of name -> Table", described(type(tables).__name__))
        for name, table in tables.items():
            if not isinstance(table, Table):
                raise TypeError(f"{fn}: tables[{name!r}]: expected a Table, got {type(table).__name__}")
            cols = set(table.df.columns)
            for what, col in (("pkey", table.pkey), ("time_col", table.time_col)):
                if col is not None and col not in cols:
                    raise input_error(fn, f"tables[{name!r}].{what}", f"a column of {sorted(cols)}", col)
            if table.pkey is not None and not table.df[table.pkey].is_unique:
                raise input_error(fn, f"tables[{name!r}].pkey", "a column of unique values",
                                  described(f"{table.pkey!r} with duplicates"))
            if table.time_col is not None and not _is_datetime(table.df[table.time_col]):
                raise input_error(fn, f"tables[{name!r}].time_col", "a datetime64 column",
                                  described(f"{table.time_col!r} of dtype {table.df[table.time_col].dtype}"))
            for col, parent in table.fkeys.items():
                if col not in cols:
                    raise input_error(fn, f"tables[{name!r}].fkeys", f"columns of the table {sorted(cols)}", col)
                if parent not in tables:
                    raise input_error(fn, f"tables[{name!r}].fkeys[{col!r}]", f"a table of {sorted(tables)}", parent)
                if tables[parent].pkey is None:
                    raise input_error(fn, f"tables[{name!r}].fkeys[{col!r}]", "a parent table with a primary key",
                                      described(f"table {parent!r} without one"))
        val = None if val_timestamp is None else _timestamp(fn, "val_timestamp", val_timestamp)
        test = None if test_timestamp is None else _timestamp(fn, "test_timestamp", test_timestamp)
        if val is not None and test is not None and not val < test:
            # RelBench's order: train before val, val before test; the reverse leaks the test window into training
            raise input_error(fn, "val_timestamp", f"a time before test_timestamp {test}", val)
        self.tables, self.val_timestamp, self.test_timestamp = tables, val, test

    def __repr__(self) -> str:
        sizes = ", ".join(f"{n}: {len(t.df)}" for n, t in self.tables.items())
        return f"Database({sizes})"

    @property
    def min_timestamp(self) -> pd.Timestamp | None:
        times = [t.df[t.time_col].min() for t in self.tables.values() if t.time_col is not None and len(t.df)]
        return min(times) if times else None

    @property
    def max_timestamp(self) -> pd.Timestamp | None:
        times = [t.df[t.time_col].max() for t in self.tables.values() if t.time_col is not None and len(t.df)]
        return max(times) if times else None

    def upto(self, timestamp) -> Database:
        """The database as it was at ``timestamp``: rows with a time after it removed (timeless tables kept)."""
        t = _timestamp("Database.upto", "timestamp", timestamp)
        tables = {}
        for name, table in self.tables.items():
            df = table.df if table.time_col is None else table.df[table.df[table.time_col] <= t]
            tables[name] = Table(df, table.pkey, dict(table.fkeys), table.time_col)
        out = Database.__new__(Database)
        out.tables, out.val_timestamp, out.test_timestamp = tables, self.val_timestamp, self.test_timestamp
        return out


# ----------------------------------------------------------------------------------------------
# features and the pk-fk graph
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ColumnStats:
    """Per table and feature column: ``("num", mean, std)`` or ``("cat", categories)``."""

    columns: dict[str, dict[str, tuple]]

    def cardinalities(self, table: str) -> tuple[int, ...]:
        """0 for a numeric column, number of categories + 1 (code 0 = unseen/missing) for a categorical one."""
        return tuple(0 if s[0] == "num" else len(s[1]) + 1 for s in self.columns[table].values())


def column_stats(db: Database) -> ColumnStats:
    """Statistics of every feature column from the rows of ``db`` (pass ``db.upto(t)`` to avoid the future)."""
    _check_db("column_stats", db)
    out: dict[str, dict[str, tuple]] = {}
    for name, table in db.tables.items():
        cols: dict[str, tuple] = {}
        for col in table.feature_columns():
            s = table.df[col]
            if _is_categorical(s):
                cols[col] = ("cat", tuple(sorted(map(str, s.dropna().unique()))))
            else:
                values = (s.astype("int64") // 10**9 if _is_datetime(s) else s).astype(float)
                mean, std = float(values.mean()) if len(values) else 0.0, float(values.std()) if len(values) > 1 else 1.0
                cols[col] = ("num", 0.0 if math.isnan(mean) else mean, std if std > 0 and not math.isnan(std) else 1.0)
        out[name] = cols or {CONST_COLUMN: ("num", 0.0, 1.0)}
    return ColumnStats(out)


def _encode(table: Table, stats: dict[str, tuple]) -> np.ndarray:
    n = len(table.df)
    if CONST_COLUMN in stats:
        return np.ones((n, 1), np.float32)
    x = np.zeros((n, len(stats)), np.float32)
    for j, (col, s) in enumerate(stats.items()):
        values = table.df[col]
        if s[0] == "cat":
            codes = {c: i + 1 for i, c in enumerate(s[1])}
            x[:, j] = [codes.get(str(v), 0) if not pd.isna(v) else 0 for v in values]
        else:
            v = (values.astype("int64") // 10**9 if _is_datetime(values) else values).astype(float).to_numpy()
            x[:, j] = np.nan_to_num((v - s[1]) / s[2], nan=0.0)
    return x


def make_pkey_fkey_graph(db: Database, upto=None, *, stats: ColumnStats | None = None,
                         tables: Iterable[str] | None = None):
    """The RelBench pk-fk graph of ``db`` as a PyG ``HeteroData`` (see the module docstring).

    ``upto`` drops every row newer than it first; ``stats`` (default: from the rows kept) standardise the
    features; ``tables`` builds only those tables and the edges between them (a pruned plan never builds
    the others). Each node type carries ``x`` ``[N, C]``, ``columns``, ``cardinalities``, ``row`` (position
    in the table's DataFrame), ``key`` (primary-key values, when any) and ``time`` (seconds, timed tables).
    """
    fn = "make_pkey_fkey_graph"
    _check_db(fn, db)
    if isinstance(tables, str):
        raise input_error(fn, "tables", f"a list of names of {sorted(db.tables)}", tables)
    names = list(db.tables) if tables is None else list(tables)
    for name in names:
        if name not in db.tables:
            raise input_error(fn, "tables", f"names of {sorted(db.tables)}", name)
    if upto is not None:
        upto = _timestamp(fn, "upto", upto)
    if stats is not None and not isinstance(stats, ColumnStats):
        raise TypeError(str(input_error(fn, "stats", "a ColumnStats (column_stats(db)) or None",
                                        described(type(stats).__name__))))
    import torch
    from torch_geometric.data import HeteroData

    view = db if upto is None else db.upto(upto)
    stats = stats or column_stats(view)
    data = HeteroData()
    index: dict[str, pd.Series] = {}
    for name in names:
        table = view.tables[name]
        df = table.df
        node = data[name]
        node.num_nodes = len(df)
        node.x = torch.from_numpy(_encode(table, stats.columns[name]))
        node.columns = tuple(stats.columns[name])
        node.cardinalities = stats.cardinalities(name)
        node.row = torch.from_numpy(np.flatnonzero(db.tables[name].df.index.isin(df.index)).astype(np.int64)) \
            if upto is not None else torch.arange(len(df))
        if table.time_col is not None:
            node.time = torch.from_numpy((df[table.time_col].astype("int64") // 10**9).to_numpy().astype(np.float64))
        if table.pkey is not None:
            index[name] = pd.Series(np.arange(len(df)), index=df[table.pkey].to_numpy())
    for name in names:
        table = view.tables[name]
        for col, parent in table.fkeys.items():
            if parent not in index:
                continue
            fk = table.df[col].to_numpy()
            present = ~pd.isna(fk)
            dst = index[parent].reindex(fk[present]).to_numpy()
            ok = ~np.isnan(dst.astype(float))
            src = np.flatnonzero(present)[ok]
            ei = torch.from_numpy(np.stack([src, dst[ok].astype(np.int64)]).astype(np.int64))
            data[name, f"f2p_{col}", parent].edge_index = ei
            data[parent, f"rev_f2p_{col}", name].edge_index = ei.flip(0)
    if upto is not None:
        data.seed_time = float(pd.Timestamp(upto).value // 10**9)
    return data


# ----------------------------------------------------------------------------------------------
# tasks and snapshots
# ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EntityTask:
    """An entity-level binary task: ``labels(db, seed_time)`` gives ``(entity keys, 0/1 labels)``.

    ``db`` is the full database: the label looks ``horizon`` into the future of the seed time, the graph
    never does (it is built from ``db.upto(seed_time)``).
    """

    name: str
    entity_table: str
    horizon: pd.Timedelta
    labels: Callable[[Database, pd.Timestamp], tuple[np.ndarray, np.ndarray]]
    metric: str = "auroc"


def snapshot(db: Database, task: EntityTask, seed_time, *, stats: ColumnStats | None = None,
             tables: Iterable[str] | None = None):
    """The graph of ``db`` up to ``seed_time`` with the task's labels on the entity table (``tables``: only those).

    ``data[entity].y`` (float) and ``data[entity].label_mask`` (entities with a label); ``data.seed_time``.
    Raises :class:`InputError` for a seed time before the first timestamp of the database.
    """
    import torch

    _check_db("snapshot", db)
    if not isinstance(task, EntityTask):
        raise TypeError(str(input_error("snapshot", "task", "an EntityTask (premium_purchase_task(), "
                                        "load_relbench_task(...))", described(type(task).__name__))))
    t = _timestamp("snapshot", "seed_time", seed_time)
    first = db.min_timestamp
    if first is not None and t < first:
        raise input_error("snapshot", "seed_time", f"a time at or after the database's first timestamp {first}", t)
    if task.entity_table not in db.tables:
        raise input_error("snapshot", "task.entity_table", f"a table of {sorted(db.tables)}", task.entity_table)
    data = make_pkey_fkey_graph(db, upto=t, stats=stats, tables=tables)
    keys, y = task.labels(db, t)
    node = data[task.entity_table]
    pkey = db.tables[task.entity_table].pkey
    present = db.tables[task.entity_table].df.iloc[node.row.numpy()][pkey].to_numpy()
    pos = pd.Series(np.arange(len(present)), index=present).reindex(np.asarray(keys)).to_numpy()
    ok = ~np.isnan(pos.astype(float))
    label = torch.zeros(node.num_nodes)
    mask = torch.zeros(node.num_nodes, dtype=torch.bool)
    idx = torch.from_numpy(pos[ok].astype(np.int64))
    label[idx] = torch.as_tensor(np.asarray(y)[ok], dtype=torch.float32)
    mask[idx] = True
    node.y, node.label_mask = label, mask
    return data


def snapshots(db: Database, task: EntityTask, seed_times, *, stats: ColumnStats | None = None) -> list:
    """:func:`snapshot` at each seed time, with one set of column statistics (default: from the first)."""
    if isinstance(seed_times, (str, pd.Timestamp, datetime.date, np.datetime64)) or not isinstance(seed_times, Iterable):
        raise input_error("snapshots", "seed_times", "a list of times", seed_times)
    seed_times = [_timestamp("snapshots", "seed_times", t) for t in seed_times]
    if stats is None and seed_times:
        stats = column_stats(db.upto(min(seed_times)))
    return [snapshot(db, task, t, stats=stats) for t in seed_times]


def monthly_seed_times(start, end) -> list[pd.Timestamp]:
    """Month starts in ``[start, end]``."""
    start, end = _timestamp("monthly_seed_times", "start", start), _timestamp("monthly_seed_times", "end", end)
    if end < start:
        raise input_error("monthly_seed_times", "end", f"a time at or after start {start}", end)
    return list(pd.date_range(start.ceil("D"), end, freq="MS"))


def split_seed_times(db: Database, horizon: pd.Timedelta, *, warmup_months: int = 2) -> dict[str, list]:
    """Monthly seed times split the RelBench way: a label window never crosses into the next split.

    train: ``t + horizon <= val_timestamp``; val: ``val_timestamp <= t``, ``t + horizon <= test_timestamp``;
    test: ``t >= test_timestamp``, ``t + horizon <= max_timestamp``. The first ``warmup_months`` give history.
    """
    _check_db("split_seed_times", db)
    horizon = _timedelta("split_seed_times", "horizon", horizon)
    warmup_months = check_int("split_seed_times", "warmup_months", warmup_months, low=0)
    if db.val_timestamp is None or db.test_timestamp is None:
        raise input_error("split_seed_times", "db", "a Database with val_timestamp and test_timestamp",
                          described("one without"))
    first = db.min_timestamp + pd.DateOffset(months=warmup_months)
    times = monthly_seed_times(first, db.max_timestamp)
    v, te, last = db.val_timestamp, db.test_timestamp, db.max_timestamp
    return {"train": [t for t in times if t + horizon <= v],
            "val": [t for t in times if t >= v and t + horizon <= te],
            "test": [t for t in times if t >= te and t + horizon <= last]}


# ----------------------------------------------------------------------------------------------
# the synthetic shop
# ----------------------------------------------------------------------------------------------
def synthetic_ecommerce(seed: int = 0, *, n_users: int = 1500, n_products: int = 300, n_categories: int = 12,
                        n_premium: int = 4, orders_per_user: float = 10.0, page_views_per_user: int = 30,
                        months: int = 24, premium_affinity: float = 0.8, base_premium: float = 0.15,
                        affinity_rate: float = 0.4) -> Database:
    """A shop with planted structure (the method's CPU reproduction plan).

    ``user`` (age, region, three noise columns; a latent premium affinity drawn with ``affinity_rate``),
    ``category`` (``premium`` flag on ``n_premium`` of them, two noise columns), ``product`` (FK category,
    a price weakly raised by premium, two noise columns), ``order`` (FK user and product, a time uniform over
    ``months`` months, quantity; a user with affinity buys a premium-category product with probability
    ``premium_affinity``, otherwise ``base_premium``; activity per user ~ Gamma(2, orders_per_user / 2)) and
    the distractor ``page_view`` (FK user, a time, five pure-noise columns, ``page_views_per_user`` each).

    The signal sits three hops from a user (user <- order -> product -> category), out of reach of a
    two-layer GNN on the raw schema; ``page_view`` only adds fan-out noise.

    The validation and test windows are the last 9 and 5 months (so ``months >= 10``); some category is premium
    and some is not; ``n_products > n_premium`` (a product per premium category, and one more).
    """
    fn = "synthetic_ecommerce"
    for name, value, low in (("seed", seed, 0), ("n_users", n_users, 1), ("n_categories", n_categories, 2),
                             ("page_views_per_user", page_views_per_user, 0), ("months", months, 10)):
        check_int(fn, name, value, low=low)
    check_int(fn, "n_premium", n_premium, low=1, high=n_categories - 1)
    check_int(fn, "n_products", n_products, low=n_premium + 1)
    check_finite(fn, "orders_per_user", orders_per_user, positive=True)
    for name, value in (("premium_affinity", premium_affinity), ("base_premium", base_premium),
                        ("affinity_rate", affinity_rate)):
        check_finite(fn, name, value, low=0, high=1)
    rng = np.random.default_rng(seed)
    start = pd.Timestamp("2024-01-01")
    end = start + pd.DateOffset(months=months)
    span = (end - start).total_seconds()

    premium = np.zeros(n_categories, dtype=np.int64)
    premium[rng.choice(n_categories, n_premium, replace=False)] = 1
    category = pd.DataFrame({"category_id": np.arange(n_categories), "premium": premium,
                             **{f"noise_{j}": rng.standard_normal(n_categories) for j in range(2)}})
    cat_of = rng.integers(0, n_categories, n_products)
    cat_of[:n_premium] = np.flatnonzero(premium)  # every premium category has a product
    if not (premium[cat_of] == 0).any():  # and some product is not premium (only tiny shops draw none)
        cat_of[n_premium] = np.flatnonzero(premium == 0)[0]
    product = pd.DataFrame({"product_id": np.arange(n_products), "category_id": cat_of,
                            "price": rng.lognormal(3.0, 0.5, n_products) * (1 + 0.25 * premium[cat_of]),
                            **{f"noise_{j}": rng.standard_normal(n_products) for j in range(2)}})
    affinity = rng.random(n_users) < affinity_rate
    user = pd.DataFrame({"user_id": np.arange(n_users), "age": rng.integers(18, 75, n_users),
                         "region": rng.choice(np.array(["north", "south", "east", "west", "centre"]), n_users),
                         **{f"noise_{j}": rng.standard_normal(n_users) for j in range(3)}})
    activity = rng.gamma(2.0, orders_per_user / 2.0, n_users)
    n_orders = rng.poisson(activity)
    order_user = np.repeat(np.arange(n_users), n_orders)
    p_premium = np.where(affinity[order_user], premium_affinity, base_premium)
    wants = rng.random(order_user.size) < p_premium
    premium_products = np.flatnonzero(premium[cat_of] == 1)
    other_products = np.flatnonzero(premium[cat_of] == 0)
    order_product = np.where(wants, rng.choice(premium_products, order_user.size),
                             rng.choice(other_products, order_user.size))
    order_time = start + pd.to_timedelta(rng.random(order_user.size) * span, unit="s")
    order = pd.DataFrame({"order_id": np.arange(order_user.size), "user_id": order_user, "product_id": order_product,
                          "timestamp": order_time.floor("s"), "quantity": rng.integers(1, 6, order_user.size)})
    order = order.sort_values("timestamp", kind="stable").reset_index(drop=True)
    order["order_id"] = np.arange(len(order))
    pv_user = np.repeat(np.arange(n_users), page_views_per_user)
    pv_time = start + pd.to_timedelta(rng.random(pv_user.size) * span, unit="s")
    page_view = pd.DataFrame({"view_id": np.arange(pv_user.size), "user_id": pv_user, "timestamp": pv_time.floor("s"),
                              **{f"noise_{j}": rng.standard_normal(pv_user.size) for j in range(5)}})
    tables = {
        "user": Table(user, pkey="user_id"),
        "category": Table(category, pkey="category_id"),
        "product": Table(product, pkey="product_id", fkeys={"category_id": "category"}),
        "order": Table(order, pkey="order_id", fkeys={"user_id": "user", "product_id": "product"},
                       time_col="timestamp"),
        "page_view": Table(page_view, pkey="view_id", fkeys={"user_id": "user"}, time_col="timestamp"),
    }
    return Database(tables, val_timestamp=start + pd.DateOffset(months=months - 9),
                    test_timestamp=start + pd.DateOffset(months=months - 5))


@dataclass(frozen=True)
class _PremiumLabels:
    horizon: pd.Timedelta

    def __call__(self, db: Database, t: pd.Timestamp):
        order, product, category = (db.tables[n].df for n in ("order", "product", "category"))
        window = order[(order["timestamp"] > t) & (order["timestamp"] <= t + self.horizon)]
        prem = product["category_id"].map(category.set_index("category_id")["premium"])
        prem.index = product["product_id"]
        bought = set(window.loc[window["product_id"].map(prem).to_numpy() == 1, "user_id"])
        users = db.tables["user"].df["user_id"].to_numpy()
        return users, np.isin(users, list(bought)).astype(np.float32)


def premium_purchase_task(horizon_days: int = 90) -> EntityTask:
    """Label of the synthetic shop: does the user buy a premium-category product in ``(t, t + horizon]``?

    ``horizon_days`` is positive: a window at or before the seed time would label the past the graph already
    holds (label leakage).
    """
    horizon = pd.Timedelta(days=check_finite("premium_purchase_task", "horizon_days", horizon_days, positive=True))
    return EntityTask("user-premium-purchase", "user", horizon, _PremiumLabels(horizon))


# ----------------------------------------------------------------------------------------------
# RelBench's local directory layout
# ----------------------------------------------------------------------------------------------
def write_relbench_directory(db: Database, path, *, name: str = "synthetic") -> Path:
    """Write ``db`` as ``manifest.yaml`` (name, val/test timestamps, per table pkey, time_col, fkeys) plus
    ``db/<table>.parquet``, the layout :func:`load_relbench_directory` (and RelBench 3's local loading) reads.

    Reconstruction: the manifest keys follow the description of RelBench 3's layout; the parquet files also
    carry RelBench 1's schema metadata (``pkey_col``, ``time_col``, ``fkey_col_to_pkey_table``).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq
    import yaml

    fn = "write_relbench_directory"
    _check_db(fn, db)
    if not isinstance(name, str) or not name:
        raise input_error(fn, "name", "a non-empty str", name)
    root = Path(path)
    try:
        (root / "db").mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise input_error(fn, "path", "a directory that can be created and written",
                          described(f"{str(path)!r} ({exc.strerror or exc})")) from None
    manifest: dict[str, Any] = {"name": name, "val_timestamp": None if db.val_timestamp is None else str(db.val_timestamp),
                                "test_timestamp": None if db.test_timestamp is None else str(db.test_timestamp),
                                "tables": {}}
    for tname, table in db.tables.items():
        manifest["tables"][tname] = {"pkey": table.pkey, "time_col": table.time_col, "fkeys": dict(table.fkeys)}
        arrow = pa.Table.from_pandas(table.df, preserve_index=False)
        meta = {**(arrow.schema.metadata or {}), b"pkey_col": json.dumps(table.pkey).encode(),
                b"time_col": json.dumps(table.time_col).encode(),
                b"fkey_col_to_pkey_table": json.dumps(dict(table.fkeys)).encode()}
        pq.write_table(arrow.replace_schema_metadata(meta), root / "db" / f"{tname}.parquet")
    (root / "manifest.yaml").write_text(yaml.safe_dump(manifest, sort_keys=False))
    return root


def load_relbench_directory(path) -> Database:
    """Read a RelBench database from a local directory, never from a hub.

    Either ``manifest.yaml`` + ``db/<table>.parquet`` (RelBench 3's local layout, as
    :func:`write_relbench_directory` writes it) or a folder of ``<table>.parquet`` files (or ``db/`` holding
    them) whose schema metadata holds ``pkey_col``, ``time_col`` and ``fkey_col_to_pkey_table`` as RelBench 1's
    ``Table.save`` writes them.
    """
    import pyarrow.parquet as pq

    fn = "load_relbench_directory"
    root = Path(path)
    if not root.is_dir():
        raise input_error(fn, "path", "an existing directory", str(path))
    manifest_path = root / "manifest.yaml"
    tables: dict[str, Table] = {}
    val = test = None
    if manifest_path.exists():
        import yaml

        manifest = yaml.safe_load(manifest_path.read_text()) or {}
        if not isinstance(manifest.get("tables"), dict):
            raise input_error(fn, "manifest.yaml", "a 'tables' mapping", described(str(sorted(manifest))))
        for tname, spec in manifest["tables"].items():
            file = root / "db" / f"{tname}.parquet"
            if not file.exists():
                raise input_error(fn, "path", f"a file db/{tname}.parquet named by manifest.yaml", described("none"))
            spec = spec or {}
            tables[tname] = Table(pd.read_parquet(file), spec.get("pkey"), dict(spec.get("fkeys") or {}),
                                  spec.get("time_col"))
        val, test = manifest.get("val_timestamp"), manifest.get("test_timestamp")
    else:
        folder = root / "db" if (root / "db").is_dir() else root
        files = sorted(folder.glob("*.parquet"))
        if not files:
            raise input_error(fn, "path", "manifest.yaml or <table>.parquet files", described("neither"))
        for file in files:
            meta = pq.read_schema(file).metadata or {}
            get = lambda key, default=None: json.loads(meta[key]) if key in meta else default  # noqa: E731
            tables[file.stem] = Table(pd.read_parquet(file), get(b"pkey_col"), dict(get(b"fkey_col_to_pkey_table", {})),
                                      get(b"time_col"))
    for table in tables.values():  # parquet keeps datetimes, but a CSV-born column may be text
        if table.time_col is not None and table.df[table.time_col].dtype == object:
            raise input_error(fn, "time_col", "a datetime64 column", described(f"{table.time_col!r} of dtype object"))
    return Database(tables, val_timestamp=val, test_timestamp=test)


def load_relbench_task(path, task: str, *, entity_col: str | None = None, entity_table: str | None = None,
                       time_col: str = "timestamp", target_col: str | None = None) -> EntityTask:
    """A binary entity task from ``tasks/<task>/{train,val,test}.parquet`` (RelBench's cached task tables).

    ``tasks/<task>/manifest.yaml`` may name ``entity_col``, ``entity_table``, ``time_col``, ``target_col`` and
    ``horizon_days``; arguments override it. Labels at a seed time are the rows with that timestamp.
    """
    fn = "load_relbench_task"
    folder = Path(path) / "tasks" / task
    if not folder.is_dir():
        raise input_error(fn, "task", f"a folder tasks/{task} under {path}", described("none"))
    spec: dict[str, Any] = {}
    if (folder / "manifest.yaml").exists():
        import yaml

        spec = yaml.safe_load((folder / "manifest.yaml").read_text()) or {}
    entity_col = entity_col or spec.get("entity_col")
    entity_table = entity_table or spec.get("entity_table")
    target_col = target_col or spec.get("target_col")
    time_col = spec.get("time_col", time_col)
    for arg, value in (("entity_col", entity_col), ("entity_table", entity_table), ("target_col", target_col)):
        if not value:
            raise input_error(fn, arg, "a name (argument or tasks/<task>/manifest.yaml)", value)
    frames = [pd.read_parquet(f) for f in sorted(folder.glob("*.parquet"))]
    if not frames:
        raise input_error(fn, "task", f"parquet label tables in tasks/{task}", described("none"))
    rows = pd.concat(frames, ignore_index=True)
    for col in (entity_col, time_col, target_col):
        if col not in rows.columns:
            raise input_error(fn, "task", f"label tables with a column {col!r}", described(str(list(rows.columns))))
    rows[time_col] = pd.to_datetime(rows[time_col])
    horizon = pd.Timedelta(days=float(spec.get("horizon_days", 0)))
    return EntityTask(task, entity_table, horizon, _TableLabels(rows, entity_col, time_col, target_col))


@dataclass(frozen=True)
class _TableLabels:
    rows: pd.DataFrame
    entity_col: str
    time_col: str
    target_col: str

    def __call__(self, db: Database, t: pd.Timestamp):
        at = self.rows[self.rows[self.time_col] == t]
        return at[self.entity_col].to_numpy(), at[self.target_col].to_numpy().astype(np.float32)
