"""Reading PhysioNet/CinC Challenge 2012 record files for :mod:`.physionet2012`: the rows of each record from
an archive (``set-a.tar.gz`` as distributed, members read with :mod:`tarfile`) or a folder, and the checks,
order and concatenation of several sources (t-PatchGNN's sets A, B and C: ``usail-hkust/t-PatchGNN``,
``lib/physionet.py``, ``PhysioNet.__init__``)."""

from __future__ import annotations

import hashlib
import os
import re
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from icml26.errors import InputTypeError, described, input_error

HEADER = "Time,Parameter,Value"
_CACHE_VERSION = 1  # bump when the cached layout changes


def _parse_rows(text: str, where: str) -> list[tuple[float, str, float]] | None:
    """Every ``Time,Parameter,Value`` row of one record file (RecordID included); None if not a record."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if not lines or lines[0].replace(" ", "") != HEADER:
        return None
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        parts = line.split(",")
        try:
            stamp, name, value = parts[0], parts[1].strip(), float(parts[2])
            hh, mm = stamp.split(":")
            rows.append((int(hh) + int(mm) / 60.0, name, value))
        except (ValueError, IndexError):
            raise input_error("read_physionet_record", f"{where}:{number}", "'HH:MM,Parameter,Value'", line) from None
    return rows


def _record_id(rows, fallback: str) -> str:
    ids = [v for h, n, v in rows if n == "RecordID" and h == 0]
    return str(int(ids[0])) if ids else fallback


def _source_texts(source: Path) -> Iterator[tuple[str, str]]:
    """``(name, text)`` of every ``.txt`` file: archive members in archive order, folder files sorted."""
    if source.is_dir():
        for path in sorted(source.rglob("*.txt")):
            yield str(path), path.read_text()
        return
    with tarfile.open(source, "r:*") as archive:
        for member in archive:
            if member.isfile() and member.name.endswith(".txt"):
                yield f"{source}:{member.name}", archive.extractfile(member).read().decode("utf-8")


def _source_key(source: Path) -> str:
    digest = hashlib.sha256(f"physionet2012 v{_CACHE_VERSION}".encode())
    if source.is_dir():
        for path in sorted(source.rglob("*.txt")):
            stat = path.stat()
            digest.update(f"{path.relative_to(source)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    else:
        with source.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:24]


def _parse_source(source: Path) -> dict[str, np.ndarray]:
    ids, hours, names, values, offsets = [], [], [], [], [0]
    for where, text in _source_texts(source):
        rows = _parse_rows(text, where)
        if rows is None:  # e.g. Outcomes-a.txt
            continue
        ids.append(_record_id(rows, Path(where.rsplit(":", 1)[-1]).stem))
        for h, n, v in rows:
            hours.append(h)
            names.append(n)
            values.append(v)
        offsets.append(len(hours))
    table, index = np.unique(np.array(names, dtype=str), return_inverse=True) if names else (np.zeros(0, str), [])
    return {"record_ids": np.array(ids, dtype=str), "offsets": np.array(offsets, np.int64),
            "hours": np.array(hours, np.float64), "param": np.asarray(index, np.int16).reshape(-1),
            "value": np.array(values, np.float64), "names": table}


def _check_source(source) -> Path:
    source = Path(source)
    if not source.exists():
        raise input_error("load_physionet2012", "source", "set-a.tar.gz or a folder of record files", str(source))
    if not source.is_dir() and not tarfile.is_tarfile(source):
        raise input_error("load_physionet2012", "source", "a tar archive or a folder", str(source))
    return source


def _check_sources(source) -> list[Path]:
    """One path, or a non-empty sequence of distinct paths, each an existing archive or folder."""
    fn, expected = "load_physionet2012", "a path (str or os.PathLike) or a non-empty list of paths"
    many = not isinstance(source, (str, os.PathLike))
    if many and (isinstance(source, (bytes, bytearray)) or not isinstance(source, Sequence)):
        raise InputTypeError(fn, "source", expected, described(type(source).__name__))
    if many and not source:
        raise input_error(fn, "source", expected, described(f"an empty {type(source).__name__}"))
    items = list(source) if many else [source]
    for k, item in enumerate(items):
        if not isinstance(item, (str, os.PathLike)):
            raise InputTypeError(fn, "source", expected, described(f"{type(item).__name__} at position {k}"))
    paths = [_check_source(item) for item in items]
    resolved = [p.resolve() for p in paths]
    twice = [str(p) for k, p in enumerate(paths) if resolved[k] in resolved[:k]]
    if twice:
        raise input_error(fn, "source", "each archive or folder once", described(f"{twice[0]!r} twice"))
    return paths


def _set_letter(path: Path) -> str | None:
    """``"a"``, ``"b"`` or ``"c"`` for a source named like the challenge's sets (``set-b.tar.gz``, ``set-b/``)."""
    found = re.match(r"set-([abc])(?![a-z0-9])", path.name.lower())
    return found.group(1) if found else None


def _tpatchgnn_order(paths: list[Path]) -> list[Path]:
    """Sets A, B, C in that order (``data_a + data_b + data_c`` in t-PatchGNN's ``PhysioNet``), whatever
    order they came in; sources not all named like the sets keep the order given."""
    letters = [_set_letter(p) for p in paths]
    return paths if None in letters else [p for _, p in sorted(zip(letters, paths), key=lambda lp: lp[0])]


def _concat_rows(parts: list[dict[str, np.ndarray]], paths: list[Path]) -> dict[str, np.ndarray]:
    """The sources' rows one after the other: one ``names`` table, ``param`` and ``offsets`` shifted to it.
    A RecordID in two sources is refused: that stay could land on both sides of the split."""
    if len(parts) == 1:
        return parts[0]
    labels = [p.name for p in paths]
    if len(set(labels)) < len(labels):  # equal names in different folders: name the folder too
        labels = [f"{p.parent.name}/{p.name}" for p in paths]
    where: dict[str, list[str]] = {}
    for part, label in zip(parts, labels):
        for rid in dict.fromkeys(str(r) for r in part["record_ids"]):
            where.setdefault(rid, []).append(label)
    shared = [rid for rid, found in where.items() if len(found) > 1]
    if shared:
        shown = ", ".join(shared[:3]) + (", ..." if len(shared) > 3 else "")
        raise input_error("load_physionet2012", "source", "sources with distinct RecordIDs (a stay in two sources "
                          "would leak across the split)", described(f"{len(shared)} RecordIDs in more than one "
                                                                    f"source: {shown} (in {' and '.join(where[shared[0]])})"))
    names = np.unique(np.concatenate([p["names"] for p in parts]))
    shifts = np.cumsum([0] + [len(p["hours"]) for p in parts])
    return {"record_ids": np.concatenate([p["record_ids"] for p in parts]),
            "offsets": np.concatenate([[0]] + [p["offsets"][1:] + s for p, s in zip(parts, shifts)]).astype(np.int64),
            "hours": np.concatenate([p["hours"] for p in parts]),
            "param": np.concatenate([np.searchsorted(names, p["names"]).astype(np.int16)[p["param"]] for p in parts]),
            "value": np.concatenate([p["value"] for p in parts]), "names": names}
