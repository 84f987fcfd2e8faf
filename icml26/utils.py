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
