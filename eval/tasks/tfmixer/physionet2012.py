"""PhysioNet/CinC Challenge 2012 as IMTS forecasting splits, under the field's protocols.

The records are read from the challenge's ``set-a.tar.gz``, ``set-b.tar.gz``, ``set-c.tar.gz`` as
distributed (members read with :mod:`tarfile`, nothing extracted) or from extracted folders, one source or
several concatenated; each source's parsed rows are cached under the toolkit's cache folder
(:func:`icml26.utils.cache_dir`), keyed by a hash of the source. Protocols (:data:`PHYSIONET_PROTOCOLS`):

- ``"tpatchgnn"``: t-PatchGNN's pipeline (Zhang et al., ICML 2024; ``usail-hkust/t-PatchGNN``, files
  ``lib/physionet.py``, ``lib/parse_datasets.py``, ``lib/utils.py``, ``lib/evaluation.py``,
  ``tPatchGNN/run_models.py``), scored per variable (:func:`icml26.eval.tasks.tfmixer.imts.evaluate_forecaster`).
- ``"apn"``: 36 h -> the next 3 h, the APN / PyOmniTS setting (``Ladbaby/PyOmniTS``,
  ``data/data_provider/datasets/P12.py``), as far as its public code shows; the rest is a reconstruction.
- ``"zscore_24h"`` and ``"zscore_36h_3obs"``: this toolkit's earlier pipeline (own seeded split, z-score
  or min-max, pooled metric), which ``"tpatchgnn"`` and ``"apn"`` named before they became exact.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from icml26.errors import described, input_error
from icml26.eval.tasks.tfmixer.physionet_files import (
    _check_sources,
    _concat_rows,
    _parse_rows,
    _parse_source,
    _record_id,
    _source_key,
    _tpatchgnn_order,
)
from icml26.models.tfmixer.data import IMTSDataset, IMTSSplits, imts_sample
from icml26.utils import atomic_write_bytes, cache_dir
from icml26.validation import check_choice, check_finite, check_int

#: t-PatchGNN's variable list (Latent ODE's): 4 static descriptors, then the time series (Weight is both).
PHYSIONET_VARIABLES = (
    "Age", "Gender", "Height", "ICUType", "Weight", "Albumin", "ALP", "ALT", "AST", "Bilirubin", "BUN",
    "Cholesterol", "Creatinine", "DiasABP", "FiO2", "GCS", "Glucose", "HCO3", "HCT", "HR", "K", "Lactate", "Mg",
    "MAP", "MechVent", "Na", "NIDiasABP", "NIMAP", "NISysABP", "PaCO2", "PaO2", "pH", "Platelets", "RespRate",
    "SaO2", "SysABP", "Temp", "TroponinI", "TroponinT", "Urine", "WBC")
PHYSIONET_STATIC = ("RecordID", "Age", "Gender", "Height", "ICUType", "Weight")
#: Channel groups for per-group results (our grouping, after the challenge's description): the general
#: descriptors, the bedside signals charted about hourly, and the blood tests (labs, a few a day).
PHYSIONET_GROUPS = {
    "descriptors": ("Age", "Gender", "Height", "ICUType", "Weight"),
    "vitals": ("DiasABP", "FiO2", "GCS", "HR", "MAP", "MechVent", "NIDiasABP", "NIMAP", "NISysABP", "RespRate",
               "SaO2", "SysABP", "Temp", "Urine"),
    "labs": ("Albumin", "ALP", "ALT", "AST", "Bilirubin", "BUN", "Cholesterol", "Creatinine", "Glucose", "HCO3",
             "HCT", "K", "Lactate", "Mg", "Na", "PaCO2", "PaO2", "pH", "Platelets", "TroponinI", "TroponinT", "WBC"),
}
#: The 36 time series PyOmniTS forecasts on P12 (no descriptor, no Weight).
APN_VARIABLES = tuple(v for v in PHYSIONET_VARIABLES if v not in PHYSIONET_STATIC)


@dataclass(frozen=True)
class PhysioNetProtocol:
    """A protocol's window (hours) and metric; ``forecast_steps`` counts observation times, if set."""

    history_hours: float
    horizon_hours: float | None
    forecast_steps: int | None
    metric: str  # "per_variable" (t-PatchGNN's evaluation) or "pooled" (every target weighs the same)
    exact: bool  # True: split, normalisation and descriptors are fixed by the protocol


PHYSIONET_PROTOCOLS = {
    "tpatchgnn": PhysioNetProtocol(24.0, 24.0, None, "per_variable", True),
    "apn": PhysioNetProtocol(36.0, 3.0, None, "pooled", True),
    "zscore_24h": PhysioNetProtocol(24.0, 24.0, None, "pooled", False),
    "zscore_36h_3obs": PhysioNetProtocol(36.0, None, 3, "pooled", False),
}


def default_physionet_path(all_sets: bool = False) -> Path | list[Path] | None:
    """Where the set-A archive is expected: ``$ICML26_PHYSIONET``, else
    ``<repository root>/../shared/data/physionet2012/set-a.tar.gz`` (this repository's CI); None if
    neither exists (callers skip with a message; nothing is ever downloaded).

    With ``all_sets``: the list ``[set-a, set-b, set-c]`` (each ``set-X.tar.gz``, else a folder ``set-X``)
    from the first folder holding all three: the folder ``$ICML26_PHYSIONET`` names (or the one holding the
    file it names), else the CI folder; None if no folder holds all three."""
    env = Path(os.environ["ICML26_PHYSIONET"]).expanduser() if os.environ.get("ICML26_PHYSIONET") else None
    shared = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "physionet2012"
    if not all_sets:
        return next((p for p in ([env] if env else []) + [shared / "set-a.tar.gz"] if p.exists()), None)
    folders = ([env] if env and env.is_dir() else []) + ([env.parent] if env else []) + [shared]
    for folder in folders:
        found = physionet_sets_in(folder)
        if all(found):
            return found
    return None


def physionet_sets_in(folder: Path) -> list[Path | None]:
    """``set-a``, ``set-b``, ``set-c`` in ``folder`` (each ``set-X.tar.gz``, else a folder ``set-X``), None where missing."""
    return [next((p for p in (folder / f"set-{x}.tar.gz", folder / f"set-{x}") if p.exists()), None) for x in "abc"]


# ---------------------------------------------------------------------------------------------
# Reading: rows of (hours, parameter, value) per record, from archives or folders (physionet_files.py), cached
# ---------------------------------------------------------------------------------------------
def read_physionet_record(path: str | os.PathLike) -> dict[str, Any]:
    """Parse one record file: ``{"record_id", "static": {name: value}, "observations": [(hours, name, value)]}``.

    Rows are ``Time,Parameter,Value`` with ``Time`` as ``HH:MM`` since admission; the static
    descriptors are the first rows at 00:00 named in :data:`PHYSIONET_STATIC`; a descriptor of -1
    (unknown) is not an observation here (``protocol="tpatchgnn"`` keeps it, as t-PatchGNN does).
    """
    path = Path(path)
    if not path.is_file():
        raise input_error("read_physionet_record", "path", "an existing record file (e.g. set-a/132539.txt)", str(path))
    text = path.read_text()
    rows = _parse_rows(text, str(path))
    if rows is None:
        first = text.strip().splitlines()[0][:40] if text.strip() else described("an empty file")
        raise input_error("read_physionet_record", str(path),
                          "a PhysioNet 2012 record starting with 'Time,Parameter,Value'", first)
    return _record_dict(_record_id(rows, path.stem), rows)


def _record_dict(record_id: str, rows) -> dict[str, Any]:
    static, observations = {}, []
    for hours, name, value in rows:
        if hours == 0 and name in PHYSIONET_STATIC and name not in static:
            static[name] = value
            if name == "RecordID" or value == -1:  # an id, or an unknown descriptor: not an observation
                continue
        observations.append((hours, name, value))
    return {"record_id": record_id, "static": static, "observations": observations}


def physionet_rows(source: str | os.PathLike | Sequence[str | os.PathLike], *,
                   cache: bool = True) -> dict[str, np.ndarray]:
    """Every row of every record in ``source`` as flat arrays: an archive (``set-a.tar.gz``) or a folder, or a
    sequence of them (e.g. sets A, B and C) concatenated in the order given.

    Returns ``record_ids [N]``, ``offsets [N + 1]`` (record ``i`` is rows ``offsets[i]:offsets[i+1]``,
    in file order), ``hours``, ``param`` (an index into ``names``) and ``value``. With ``cache``, each
    source's arrays are kept under ``cache_dir("physionet2012")``, keyed by the archive's SHA-256 (a folder:
    its files' names, sizes and modification times) and written atomically. The same source twice, or a
    RecordID in two sources, is refused (:class:`~icml26.errors.InputError`).
    """
    paths = _check_sources(source)
    return _concat_rows([_source_rows(p, cache) for p in paths], paths)


def _source_rows(source: Path, cache: bool) -> dict[str, np.ndarray]:
    target = cache_dir("physionet2012") / f"{_source_key(source)}.npz" if cache else None
    if target is not None and target.exists():
        try:
            with np.load(target, allow_pickle=False) as stored:
                return {k: stored[k] for k in stored.files}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # a damaged cache file is rebuilt
            pass
    rows = _parse_source(source)
    if not len(rows["record_ids"]):
        raise input_error("load_physionet2012", "source", "record files ('Time,Parameter,Value' .txt)",
                          described(f"none under {str(source)!r}"))
    if target is not None:
        buffer = io.BytesIO()
        np.savez(buffer, **rows)
        atomic_write_bytes(target, buffer.getvalue())
    return rows


def _record_slices(rows) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    off = rows["offsets"]
    for i in range(len(off) - 1):
        sl = slice(off[i], off[i + 1])
        yield rows["hours"][sl], rows["param"][sl], rows["value"][sl]


def _grid(times: np.ndarray, rows_t: np.ndarray, col: np.ndarray, val: np.ndarray, c: int):
    """``[T, C]`` values (duplicates at one time averaged) and mask on the sorted unique ``times``."""
    keep = col >= 0
    ti = np.searchsorted(times, rows_t[keep])
    sums, counts = np.zeros((len(times), c)), np.zeros((len(times), c))
    np.add.at(sums, (ti, col[keep]), val[keep])
    np.add.at(counts, (ti, col[keep]), 1)
    return sums / np.maximum(counts, 1), counts > 0


def _columns(rows, variables: Sequence[str]) -> np.ndarray:
    column = {name: j for j, name in enumerate(variables)}
    return np.array([column.get(str(n), -1) for n in rows["names"]], np.int64)


# ---------------------------------------------------------------------------------------------
# Protocols
# ---------------------------------------------------------------------------------------------
def _minmax(arrays, group) -> tuple[np.ndarray, np.ndarray]:
    c = arrays[0][1].shape[1]
    lo, hi = np.full(c, np.inf), np.full(c, -np.inf)
    for i in group:
        _, vals, mask = arrays[i]
        lo = np.minimum(lo, np.where(mask, vals, np.inf).min(0, initial=np.inf))
        hi = np.maximum(hi, np.where(mask, vals, -np.inf).max(0, initial=-np.inf))
    seen = np.isfinite(lo)
    scale = np.where(seen, hi - lo, 1.0)
    return np.where(seen, lo, 0.0), scale + (scale == 0) * 1e-8  # t-PatchGNN's normalize_masked_data


def _zscore(arrays, group) -> tuple[np.ndarray, np.ndarray]:
    c = arrays[0][1].shape[1]
    center, scale = np.zeros(c), np.ones(c)
    for j in range(c):
        seen = np.concatenate([arrays[i][1][arrays[i][2][:, j], j] for i in group] or [np.zeros(0)])
        if len(seen):
            center[j], scale[j] = seen.mean(), seen.std() if seen.std() > 0 else 1.0
    return center, scale


def _observed_mean(arrays, group, center, scale) -> np.ndarray:
    """Per channel, the mean of the normalised observations of the records in ``group`` (0 if none)."""
    c = len(center)
    total, count = np.zeros(c), np.zeros(c)
    for i in group:
        _, vals, mask = arrays[i]
        total += np.where(mask, (vals - center) / scale, 0.0).sum(0)
        count += mask.sum(0)
    return np.where(count > 0, total / np.maximum(count, 1), 0.0)


def _tpatchgnn_arrays(rows, quantization: float):
    """t-PatchGNN's records: a row at t = 0 always, one row per distinct (quantised) time, duplicates
    averaged, every row of the 41 variables an observation (descriptors of -1 included; RecordID not).
    Equal to ``PhysioNet.download`` in ``lib/physionet.py`` (its files are sorted by time)."""
    col = _columns(rows, PHYSIONET_VARIABLES)
    arrays = []
    for hours, param, value in _record_slices(rows):
        if quantization:
            hours = np.round(hours / quantization) * quantization
        times = np.unique(np.concatenate([[0.0], hours]))
        arrays.append((times, *_grid(times, hours, col[param], value, len(PHYSIONET_VARIABLES))))
    return arrays


def _apn_arrays(rows):
    """Reconstruction: PyOmniTS's P12 ("sampling rate (rounded): 1 hour", 36 variables): each time is
    floored to its hour, values in one hour averaged, the 00:00 descriptor rows dropped."""
    col = _columns(rows, APN_VARIABLES)
    arrays = []
    for hours, param, value in _record_slices(rows):
        hours = np.floor(hours)
        times = np.unique(hours[col[param] >= 0]) if (col[param] >= 0).any() else np.zeros(0)
        arrays.append((times, *_grid(times, hours, col[param], value, len(APN_VARIABLES))))
    return arrays


def _legacy_arrays(rows, variables, include_static):
    """The earlier pipeline: observations as :func:`read_physionet_record` gives them, duplicates averaged."""
    names = [str(n) for n in rows["names"]]
    column = {name: j for j, name in enumerate(variables)}
    skip = set() if include_static else set(PHYSIONET_STATIC)
    arrays = []
    for hours, param, value in _record_slices(rows):
        record = _record_dict("", [(h, names[p], v) for h, p, v in zip(hours.tolist(), param.tolist(), value.tolist())])
        obs = [(h, column[n], v) for h, n, v in record["observations"] if n in column and not (n in skip and h == 0)]
        t = np.array([o[0] for o in obs], float)
        times = np.unique(t)
        arrays.append((times, *_grid(times, t, np.array([o[1] for o in obs], np.int64),
                                     np.array([o[2] for o in obs], float), len(variables))))
    return arrays


def train_test_split_indices(n: int, *, train_size: float | None = None, test_size: float | None = None,
                             shuffle: bool = True, random_state: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``sklearn.model_selection.train_test_split(np.arange(n), ...)`` for float sizes, without importing
    scikit-learn (seconds on a loaded machine): the same sizes (test ``ceil``, train ``floor``, the missing
    one ``1 - other``), and with ``shuffle`` the same ``RandomState(random_state).permutation``
    (test first), as ``ShuffleSplit`` draws it; unshuffled, the first ``n_train`` indices train."""
    fn = "train_test_split_indices"
    n = check_int(fn, "n", n, low=1)
    for name, value in (("train_size", train_size), ("test_size", test_size)):
        if value is not None:
            check_finite(fn, name, value, low=0, high=1, low_open=True, high_open=True)
    if train_size is not None and test_size is not None and train_size + test_size > 1 + 1e-12:
        raise input_error(fn, "test_size", f"at most 1 - train_size = {1 - train_size:g}", test_size)
    if random_state is not None:
        check_int(fn, "random_state", random_state, low=0, high=2**32 - 1)
    if test_size is None and train_size is None:
        test_size = 0.25
    test_size = 1.0 - train_size if test_size is None else test_size
    train_size = 1.0 - test_size if train_size is None else train_size
    n_test, n_train = int(np.ceil(test_size * n)), int(np.floor(train_size * n))
    if not shuffle:
        return np.arange(n_train), np.arange(n_train, n_train + n_test)
    permutation = np.random.RandomState(random_state).permutation(n)
    return permutation[n_test:n_test + n_train], permutation[:n_test]


#: t-PatchGNN's split seed (``lib/parse_datasets.py``: ``random_state=42``), the default of protocol "tpatchgnn".
TPATCHGNN_SPLIT_SEED = 42


def _split_groups(n: int, protocol: str, split, seed) -> list[np.ndarray]:
    if protocol == "tpatchgnn":  # lib/parse_datasets.py: 80 % seen (shuffled, seed 42), its first 75 % train
        seen, test = train_test_split_indices(n, train_size=0.8, random_state=seed, shuffle=True)
        train, val = train_test_split_indices(len(seen), train_size=0.75, shuffle=False)
        return [seen[train], seen[val], test]
    if protocol == "apn":  # P12.py: unshuffled 10 % test, then 10 % of the rest validation
        rest, test = train_test_split_indices(n, test_size=0.1, shuffle=False)
        train, val = train_test_split_indices(len(rest), test_size=0.1, shuffle=False)
        return [rest[train], rest[val], test]
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_val = int(round(split[0] * n)), int(round(split[1] * n))
    return [order[:n_train], order[n_train:n_train + n_val], order[n_train + n_val:]]


def load_physionet2012(source: str | os.PathLike | Sequence[str | os.PathLike], protocol: str = "tpatchgnn", *,
                       variables: Sequence[str] | None = None, include_static: bool | None = None,
                       normalization: str | None = None, split: tuple[float, float, float] | None = None,
                       seed: int | None = None, quantization: float = 0.0, cache: bool = True) -> IMTSSplits:
    """PhysioNet 2012 records from ``source`` as train/validation/test IMTS splits under ``protocol``.

    ``source`` is one archive as distributed (``set-a.tar.gz``) or a folder searched recursively for
    ``*.txt``, or a non-empty sequence of them (``["set-a.tar.gz", "set-b.tar.gz", "set-c.tar.gz"]``,
    as :func:`default_physionet_path` ``(all_sets=True)`` finds them): each is parsed and cached on its
    own, then their records are concatenated, in the order given except under ``"tpatchgnn"`` (below);
    ``"apn"`` and the earlier pipeline then order the records their own way. The same source twice, or
    a RecordID in two sources (a stay on both sides of the split), is refused. ``info["sources"]`` lists
    the sources' names in the order used.

    ``"tpatchgnn"`` is t-PatchGNN's pipeline, step for step:

    - sources: sets A, B and C concatenated in that order (``PhysioNet.__init__`` in ``lib/physionet.py``:
      ``data_a + data_b + data_c``, 12,000 stays), whatever order they are given in, when every source's
      name starts with ``set-a``, ``set-b`` or ``set-c``; other names keep the order given;
    - parsing (``lib/physionet.py``): the 41 variables of :data:`PHYSIONET_VARIABLES`; a row at
      t = 0 always; several values of one variable at one time averaged; the 00:00 descriptors are
      observations at t = 0, *including* the -1 that means unknown (its code keeps them);
      ``quantization`` hours rounds times first (``run_models.py`` default 0: none);
    - split (``lib/parse_datasets.py``): records in source order. Reconstruction: within a set,
      t-PatchGNN takes ``os.listdir`` of the extracted folder, an order its filesystem chose; here an
      archive's member order, a folder's files sorted by path (the two can differ; only the order
      t-PatchGNN's filesystem gave reproduces its published split). Then
      ``train_test_split(train_size=0.8, random_state=42, shuffle=True)`` into seen/test, and the seen
      records' first 75 % train, the rest validation (2,400 / 800 / 800 of set A's 4,000; 7,200 /
      2,400 / 2,400 of sets A + B + C);
    - min-max fit on the *seen* records (train + validation, ``get_data_min_max(seen_data)``),
      a zero range replaced by 1e-8, unobserved slots 0;
    - 24 h history (``--history 24``: times < 24) and every observation from 24 h on as targets
      (its collate takes all later rows; the records end at 48 h);
    - ``info["metric"] = "per_variable"``: :func:`~icml26.eval.tasks.tfmixer.imts.evaluate_forecaster`
      averages each variable's errors over the split, then the variables that have targets
      (``lib/evaluation.py``, ``evaluation``);
    - ``info["train_mean"]``: per channel, the mean of the normalised training observations, the fill
      for a channel with no history (``LOCFForecaster(fill_value=info["train_mean"])``).

    Times are hours / history hours (history in [0, 1)), this toolkit's convention; t-PatchGNN
    divides by the latest time seen (``info["time_max"]``), a rescaling that changes no baseline.
    Records with nothing to forecast are left out (they add nothing to the metric); records with no
    history stay (their t = 0 row is unobserved).

    ``"apn"``: 36 h history -> the next 3 h. From PyOmniTS's ``P12.py``: 36 variables
    (:data:`APN_VARIABLES`), times rounded to the hour, history cut at 35.5 h, unshuffled split
    (10 % test, then 10 % of the rest validation). Reconstruction: times floored to the hour (so
    the history is [0, 36) h and the targets [36, 39) h), records in RecordID order, z-score fit
    on the training records, a pooled MSE over all targets, records with no history or no target
    left out.

    ``"zscore_24h"`` / ``"zscore_36h_3obs"``: the earlier pipeline (called ``"tpatchgnn"`` /
    ``"apn"`` before): ``split`` fractions (default 0.6/0.2/0.2) drawn with ``seed`` (default 0),
    ``normalization`` ``"zscore"`` (default) or ``"minmax"`` fit on the training records,
    ``include_static`` (default True) with unknown descriptors dropped, ``variables`` (default
    :data:`PHYSIONET_VARIABLES`), pooled metric; the second forecasts the next 3 observation times
    after 36 h. These options are fixed by ``"tpatchgnn"`` and ``"apn"`` and rejected there, except
    ``seed`` under ``"tpatchgnn"``: the seed of its shuffled seen/test split (default
    :data:`TPATCHGNN_SPLIT_SEED`, 42, t-PatchGNN's own), so a re-split with another seed, the usual
    robustness check, keeps every other step of the protocol and the split sizes. ``"apn"``'s split
    is unshuffled and takes no seed.
    """
    fn = "load_physionet2012"
    check_choice(fn, "protocol", protocol, tuple(PHYSIONET_PROTOCOLS))
    spec = PHYSIONET_PROTOCOLS[protocol]
    if spec.exact:
        for name, value in (("variables", variables), ("include_static", include_static),
                            ("normalization", normalization), ("split", split), ("seed", seed)):
            if value is not None and not (name == "seed" and protocol == "tpatchgnn"):
                raise input_error(fn, name, f"None (protocol {protocol!r} fixes it)", value)
    quantization = check_finite(fn, "quantization", quantization, non_negative=True)
    if protocol != "tpatchgnn" and quantization:
        raise input_error(fn, "quantization", "0 (only protocol 'tpatchgnn' quantises)", quantization)
    if seed is not None:  # numpy's RandomState (t-PatchGNN's split) takes seeds in [0, 2**32 - 1]
        seed = check_int(fn, "seed", seed, low=0, high=2**32 - 1)
    normalization = normalization or "zscore"
    split = (0.6, 0.2, 0.2) if split is None else split
    check_choice(fn, "normalization", normalization, ("zscore", "minmax"))
    if isinstance(split, (str, bytes)) or not isinstance(split, Sequence) or len(split) != 3 \
            or not all(isinstance(f, (int, float)) and not isinstance(f, bool) and 0 <= f <= 1 for f in split) \
            or abs(sum(split) - 1) > 1e-6:
        raise input_error(fn, "split", "three fractions in [0, 1] summing to 1 (train, validation, test)", split)
    if variables is not None:
        if isinstance(variables, str) or not isinstance(variables, Sequence) or not variables:
            raise input_error(fn, "variables", "a non-empty list of names of PHYSIONET_VARIABLES", variables)
        unknown = [v for v in variables if v not in PHYSIONET_VARIABLES]
        if unknown:
            raise input_error(fn, "variables", f"names of PHYSIONET_VARIABLES {PHYSIONET_VARIABLES}",
                              described(f"unknown {unknown}"))
    if include_static is not None and not isinstance(include_static, bool):
        raise input_error(fn, "include_static", "True, False or None", include_static)
    if protocol == "tpatchgnn" and seed is None:
        seed = TPATCHGNN_SPLIT_SEED
    paths = _check_sources(source)  # before any work, as physionet_rows does again
    paths = _tpatchgnn_order(paths) if protocol == "tpatchgnn" else paths
    rows = physionet_rows(paths, cache=cache)
    ids = [str(r) for r in rows["record_ids"]]
    if protocol == "tpatchgnn":
        variables, arrays = PHYSIONET_VARIABLES, _tpatchgnn_arrays(rows, float(quantization))
    else:  # Reconstruction (apn): RecordID order; the earlier pipeline sorted the files by name
        order = sorted(range(len(ids)), key=lambda i: (int(ids[i]), "") if protocol == "apn" and ids[i].isdigit()
                       else (0, ids[i]))
        rows, ids = _reorder(rows, order), [ids[i] for i in order]
    if protocol == "apn":
        variables, arrays = APN_VARIABLES, _apn_arrays(rows)
    elif protocol != "tpatchgnn":
        variables = tuple(PHYSIONET_VARIABLES if variables is None else variables)
        arrays = _legacy_arrays(rows, variables, True if include_static is None else include_static)
    groups = _split_groups(len(ids), protocol, split, 0 if seed is None else seed)
    if protocol == "tpatchgnn":
        center, scale = _minmax(arrays, np.concatenate(groups[:2]))
    elif protocol == "apn" or normalization == "zscore":
        center, scale = _zscore(arrays, groups[0])
    else:
        lo, scale = _minmax(arrays, groups[0])
        center, scale = lo, np.where(scale > 1e-8, scale, 1.0)
    history_h, horizon_h, steps = spec.history_hours, spec.horizon_hours, spec.forecast_steps
    parts, dropped = [], {"no_history": 0, "no_forecast": 0}
    for g in groups:
        samples, kept = [], []
        for i in g:
            times, vals, mask = arrays[i]
            vals = np.where(mask, (vals - center) / scale, 0.0)
            hist = times < history_h
            fut = ~hist
            if horizon_h is not None and protocol != "tpatchgnn":
                fut &= times < history_h + horizon_h if protocol == "apn" else times <= history_h + horizon_h
            fut_idx = np.flatnonzero(fut & mask.any(1))[: steps or None]
            if protocol != "tpatchgnn" and not mask[hist].any():
                dropped["no_history"] += 1
                continue
            if not len(fut_idx):
                dropped["no_forecast"] += 1
                continue
            samples.append(imts_sample(vals[hist], times[hist] / history_h, mask[hist], times[fut_idx] / history_h,
                                   vals[fut_idx], mask[fut_idx]))
            kept.append(ids[i])
        parts.append(IMTSDataset(samples, variables, {"source": "physionet2012", "record_ids": kept,
                                                      "metric": spec.metric}))
    seen = np.concatenate(groups[:2]) if protocol == "tpatchgnn" else groups[0]
    info = {"source": "physionet2012", "protocol": protocol, "metric": spec.metric,
            "split_record_ids": {name: [ids[i] for i in g] for name, g in zip(("train", "validation", "test"), groups)},
            "history_hours": history_h, "horizon_hours": horizon_h, "forecast_steps": steps,
            "normalization": "minmax" if protocol == "tpatchgnn" else normalization, "variables": tuple(variables),
            "center": center, "scale": scale, "train_mean": _observed_mean(arrays, groups[0], center, scale),
            "time_max": float(max((arrays[i][0].max() for i in seen if len(arrays[i][0])), default=0.0)),
            "dropped": dropped, "records": len(ids), "sources": [p.name for p in paths],
            "quantization": float(quantization),
            "split_seed": None if protocol == "apn" else (0 if seed is None else seed)}
    return IMTSSplits(*parts, info=info)


def _reorder(rows, order: Sequence[int]) -> dict[str, np.ndarray]:
    off = rows["offsets"]
    index = np.concatenate([np.arange(off[i], off[i + 1]) for i in order]) if len(order) else np.zeros(0, int)
    lengths = np.array([off[i + 1] - off[i] for i in order], np.int64)
    out = {k: rows[k][index] for k in ("hours", "param", "value")}
    out.update(record_ids=rows["record_ids"][list(order)], names=rows["names"],
               offsets=np.concatenate([[0], np.cumsum(lengths)]))
    return out


__all__ = ["APN_VARIABLES", "PHYSIONET_GROUPS", "PHYSIONET_PROTOCOLS", "PHYSIONET_STATIC", "PHYSIONET_VARIABLES", "PhysioNetProtocol",
           "TPATCHGNN_SPLIT_SEED",
           "default_physionet_path",
           "load_physionet2012", "physionet_rows", "read_physionet_record",
           "train_test_split_indices"]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m icml26.eval.tasks.tfmixer.physionet2012 [--data PATH [PATH ...]] [--protocol NAME]``: the LOCF and
    history-mean baselines (empty channels filled with the training mean) on validation and test."""
    import argparse

    from icml26.eval.tasks.tfmixer.imts import evaluate_forecaster
    from icml26.models.tfmixer import HistoryMeanForecaster, LOCFForecaster

    parser = argparse.ArgumentParser(prog="python -m icml26.eval.tasks.tfmixer.physionet2012", description=main.__doc__)
    parser.add_argument("--data", nargs="+", help="set-a.tar.gz or a folder, or several (set-a.tar.gz set-b.tar.gz "
                        "set-c.tar.gz) (default: $ICML26_PHYSIONET, then the CI path)")
    parser.add_argument("--protocol", default="tpatchgnn", choices=tuple(PHYSIONET_PROTOCOLS))
    args = parser.parse_args(argv)
    path = (args.data[0] if len(args.data) == 1 else args.data) if args.data else default_physionet_path()
    if path is None:
        parser.error("no data: pass --data or set ICML26_PHYSIONET")
    try:
        splits = load_physionet2012(path, protocol=args.protocol)
    except ValueError as exc:
        parser.error(f"--data: {exc}" if getattr(exc, "argument", None) == "source" else str(exc))
    fill = splits.info["train_mean"]
    print(f"protocol {args.protocol} ({splits.info['metric']} metric), sources {', '.join(splits.info['sources'])}: "
          f"train/validation/test "
          f"{len(splits.train)}/{len(splits.validation)}/{len(splits.test)} samples")
    for name, model in (("LOCF", LOCFForecaster(fill_value=fill)), ("history mean", HistoryMeanForecaster(fill))):
        for part in ("validation", "test"):
            res = evaluate_forecaster(model, getattr(splits, part))
            print(f"{name:>12} {part:>10}: MSE {res['mse']:.4e}  MAE {res['mae']:.4e}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
