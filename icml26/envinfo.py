"""``icml26 env``: what this machine runs, for bug reports and benchmark headers.

It names the source tree (git commit and whether it has uncommitted changes), the versions of Python, icml26 and
every distribution the package requires (its extras' included: scikit-learn, torch-geometric, gymnasium, pandas,
statsmodels, scipy, highspy, bm25s, ...), the platform, the device and how Triton kernels run.
"""

from __future__ import annotations

import os
import platform
from typing import Any


def triton_mode(cuda_available: bool) -> str:
    """How Triton kernels run here: compiled on a GPU, interpreted on the CPU, or not at all."""
    from importlib.util import find_spec

    if find_spec("triton") is None:
        return "not installed (backend='torch' only)"
    if os.environ.get("TRITON_INTERPRET", "0") == "1":
        return "interpreted (TRITON_INTERPRET=1)"
    if cuda_available:
        return "compiled (CUDA)"
    return "unavailable without a GPU (set TRITON_INTERPRET=1 to run kernels in the interpreter)"


def collect() -> dict[str, Any]:
    """Source revision, versions, platform, device and Triton mode as a flat dict."""
    from .runner import package_versions, source_revision

    revision = source_revision() or {}
    info: dict[str, Any] = {"git_commit": revision.get("commit"), "git_dirty": revision.get("dirty")}
    info.update(package_versions())
    info["platform"] = f"{platform.system()} {platform.machine()}"
    info["cpu_count"] = os.cpu_count()
    try:
        import torch
    except ImportError:
        cuda = False
        info["device"] = "unknown (torch not installed)"
    else:
        cuda = torch.cuda.is_available()
        if cuda:
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
            info["device"] = f"cuda ({', '.join(names)}; CUDA {torch.version.cuda})"
        else:
            info["device"] = f"cpu ({torch.get_num_threads()} torch threads)"
    info["triton_mode"] = triton_mode(cuda)
    return info
