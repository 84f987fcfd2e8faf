"""Small shared utilities: seeding and crash-safe file writes."""

from __future__ import annotations

import json
import os
import random
import tempfile
from pathlib import Path
from typing import Any

from .errors import input_error


def set_seed(seed: int, *, deterministic: bool = False) -> None:
    """Seed Python's ``random``, NumPy and (when installed) torch, on every device.

    ``deterministic=True`` also asks torch for deterministic algorithms (slower; some ops raise).
    This is the one place the project seeds its random number generators.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise input_error("set_seed", "seed", "a non-negative int", seed)
    random.seed(seed)
    try:
        import numpy as np
    except ImportError:  # numpy is a dependency; tolerate its absence in minimal environments
        pass
    else:
        np.random.seed(seed % 2**32)
    try:
        import torch
    except ImportError:
        return
    torch.manual_seed(seed)  # seeds CPU and every CUDA device
    if deterministic:
        torch.use_deterministic_algorithms(True)


def inner_seed(seed: int, *stream: int, bits: int = 32) -> int:
    """A seed for one part of an experiment (a replication, an arm, a worker), drawn from the experiment's ``seed``.

    ``numpy.random.SeedSequence((seed, *stream))`` mixes the experiment's seed with the part's coordinates, so the
    parts of seed 0 and seed 1 share no stream (``seed + i`` would make seed 1's part 0 seed 0's part 1). The result
    is an int in ``[0, 2**bits)``: a valid seed for ``numpy``, ``torch`` and scikit-learn's ``random_state``.
    ``bits=31`` gives the draw mod ``2**31``: the seeds the ``rkme`` and ``tied`` experiments were always measured
    with, and what UHM's environments take.
    """
    if bits not in (31, 32):
        raise input_error("inner_seed", "bits", "31 or 32", bits)
    import numpy as np

    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise input_error("inner_seed", "seed", "a non-negative int", seed)
    for part in stream:
        if isinstance(part, bool) or not isinstance(part, (int, np.integer)) or part < 0:
            raise input_error("inner_seed", "stream", "non-negative ints", stream)
    return int(np.random.SeedSequence((int(seed), *map(int, stream))).generate_state(1)[0]) % 2**bits


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` so that a reader sees either the old or the new file, never half.

    The bytes go to a temporary file in the same folder, are flushed to disk, and replace the
    target with ``os.replace`` (atomic on POSIX and Windows).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """:func:`atomic_write_bytes` of ``text`` encoded as UTF-8."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def cache_dir(*parts: str) -> Path:
    """The toolkit's cache folder (``$ICML26_CACHE``, else ``~/.cache/icml26``), joined with ``parts``.

    Nothing is created here; writers create what they need.
    """
    root = os.environ.get("ICML26_CACHE")
    return (Path(root).expanduser() if root else Path.home() / ".cache" / "icml26").joinpath(*parts)


def atomic_write_json(path: str | os.PathLike, data: Any) -> Path:
    """:func:`atomic_write_text` of ``data`` as indented, strict JSON (no NaN)."""
    return atomic_write_text(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


#: The label that losses skip: ``torch.nn.CrossEntropyLoss``'s default ``ignore_index``, which HF models
#: and TRL collators use for prompt, padding and image positions. Import this rather than writing -100.
IGNORE_INDEX = -100


#: ``mallopt`` parameter number of ``M_MMAP_THRESHOLD`` in glibc's ``malloc.h``.
_M_MMAP_THRESHOLD = -3


def fix_malloc_mmap_threshold(threshold: int = 128 * 1024) -> bool:
    """Pin glibc's mmap threshold so memory freed by variable-shape CPU training goes back to the OS.

    glibc serves blocks above its mmap threshold (128 KiB at start) with ``mmap`` and returns them on
    ``free``; but the first such free raises the threshold to that block's size (up to 32 MiB), after
    which tensors of a few MiB come from the heap, where blocks of ever-changing sizes (each batch
    pads to its own longest series) fragment it and are never returned. Measured on PhysioNet 2012
    batches (TFMixer, batch 64, one thread): resident memory grew from 1.4 to 2.4 GB over 80 steps;
    with the threshold pinned it stayed at 0.69 GB. Setting the threshold explicitly turns glibc's
    adjustment off (``man mallopt``; the environment variable ``MALLOC_MMAP_THRESHOLD_=131072`` does
    the same before the process starts).

    The cost: every block above the threshold is mapped fresh, so each page of a large tensor faults
    on first touch: TFMixer's PhysioNet step took 184 ms pinned against 122 ms unpinned. TFMixer's own
    loops therefore no longer call this; they keep the step's tensor sizes repeating instead
    (:func:`icml26.models.tfmixer.modeling.bucketed_nonzero`, padded batches), which keeps memory flat at the
    unpinned speed. It stays for a user's loop whose shapes cannot be bucketed. A process-wide
    setting, so nothing calls it on import. Returns whether it took effect (False off glibc, e.g.
    macOS or musl).
    """
    import ctypes
    import ctypes.util

    if isinstance(threshold, bool) or not isinstance(threshold, int) or not 0 < threshold <= 32 * 1024 * 1024:
        raise input_error("fix_malloc_mmap_threshold", "threshold", "an int in (0, 32 MiB] (bytes)", threshold)
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, threshold))
