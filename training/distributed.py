"""What every trainer of the toolkit does when ``accelerate launch`` or ``torchrun`` starts several processes.

- :func:`use_cpu_when_launched_without_gpu`: on a machine without CUDA a multi-process launch
  (``WORLD_SIZE > 1``) trains with DDP over gloo only when ``TrainingArguments.use_cpu`` is True;
  otherwise transformers 5.24 / accelerate 1.15 leave every process training alone on the whole data
  (``parallel_mode`` NOT_PARALLEL). The configs of the toolkit call it in ``__post_init__``.
- :func:`is_main_process`: rank 0 alone writes models, JSON and reports.
- :func:`mean_across_processes`: values logged by one process (R2G's statistics, a final loss)
  averaged over all of them before they are logged or written.
- :func:`finish_processes`: the last call of a multi-process entry point; every process waits for the
  others, then the process group is destroyed. A process that exits while its gloo group is alive
  (rank 1 done while rank 0 still writes the model) can abort at interpreter teardown with
  ``terminate called without an active exception``; torch asks scripts to destroy the group.

Note that ``accelerate launch --cpu --num_processes 2`` starts a single process (accelerate's
``--cpu`` means one CPU process); on a CPU box launch with ``accelerate launch --multi_gpu
--num_processes 2`` (the toolkit's configs then set ``use_cpu``; ``ACCELERATE_USE_CPU=1`` does the
same for any script) or ``torchrun --nproc-per-node 2``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence

import torch

__all__ = ["finish_processes", "is_main_process", "launched_world_size", "mean_across_processes", "use_cpu_when_launched_without_gpu"]


def launched_world_size() -> int:
    """Processes the launcher started (``WORLD_SIZE``; 1 when run directly)."""
    try:
        return max(int(os.environ.get("WORLD_SIZE", "1")), 1)
    except ValueError:
        return 1


def use_cpu_when_launched_without_gpu(args) -> None:
    """Set ``args.use_cpu`` (before ``TrainingArguments.__post_init__``) for a multi-process launch without CUDA."""
    if launched_world_size() > 1 and not getattr(args, "use_cpu", False) and not torch.cuda.is_available():
        args.use_cpu = True


def _group_ready() -> bool:
    return torch.distributed.is_available() and torch.distributed.is_initialized() \
        and torch.distributed.get_world_size() > 1


def is_main_process() -> bool:
    """True on the process that writes (global rank 0), and when not distributed at all."""
    if _group_ready():
        return torch.distributed.get_rank() == 0
    return os.environ.get("RANK", "0") == "0"


def mean_across_processes(values: Mapping[str, float], keys: Sequence[str] | None = None) -> dict[str, float]:
    """The mean over processes of each value (NaN and missing entries skipped; NaN when no process has one).

    A collective: every process must call it with the same ``keys`` (default: ``values``' own keys,
    which must then agree across processes). Without a process group it returns the values unchanged.
    """
    keys = list(values) if keys is None else list(keys)
    local = [(float(values[k]), 1.0) if k in values and math.isfinite(float(values[k])) else (0.0, 0.0) for k in keys]
    if not _group_ready() or not keys:
        return {k: s if n else math.nan for k, (s, n) in zip(keys, local)}
    device = torch.device("cuda", torch.cuda.current_device()) if torch.distributed.get_backend() == "nccl" \
        else torch.device("cpu")
    totals = torch.tensor(local, dtype=torch.float64, device=device)
    torch.distributed.all_reduce(totals, op=torch.distributed.ReduceOp.SUM)
    return {k: (s / n if n else math.nan) for k, (s, n) in zip(keys, totals.tolist())}


def finish_processes() -> None:
    """Wait for every process, then destroy the default process group (nothing happens without one).

    Call it once, at the end of a script launched by ``torchrun`` / ``accelerate launch``, after the
    last collective and the last write: ``icml26 sera train`` does.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    if torch.distributed.get_world_size() > 1:
        torch.distributed.barrier()
    torch.distributed.destroy_process_group()
