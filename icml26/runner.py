"""Run registered experiments or benchmarks into one run folder, writing results as they come.

After every experiment, ``results.json`` and ``report.md`` are rewritten atomically, so a run that
is interrupted (Ctrl-C) or killed midway still leaves a valid report of what finished.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import time
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from .errors import InputError, input_error
from .progress import listening
from .registry import Entry, entries
from .report import render_markdown, summary_text
from .results import Result
from .utils import atomic_write_json, atomic_write_text, set_seed

logger = logging.getLogger(__name__)

MODES = ("quick", "full")
#: While an experiment reports progress, ``results.json`` is rewritten at least this often (its heartbeat).
HEARTBEAT_SECONDS = 30.0


@dataclass
class RunConfig:
    """What an experiment's ``run(config)`` receives.

    - ``mode``: ``"quick"`` (about a minute on 2 CPU cores) or ``"full"`` (closer to the paper);
    - ``seeds``: the seeds to run; the runner has already called ``set_seed(seeds[0])``;
    - ``out_dir``: this experiment's own folder inside the run folder (checkpoints, extra files);
    - ``device``: ``"auto"``, ``"cpu"``, ``"cuda"``, ``"cuda:1"``...; :meth:`torch_device` resolves it;
    - ``data``: a data file or folder for the experiments that read one (``--data``; each says which,
      and None means its environment variable or the repository's shared data folder).
    """

    mode: str = "quick"
    seeds: tuple[int, ...] = (0,)
    out_dir: Path = field(default_factory=lambda: Path("."))
    device: str = "auto"
    data: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise input_error("RunConfig", "mode", f"one of {MODES}", self.mode)
        self.seeds = tuple(self.seeds)
        if not self.seeds or any(isinstance(s, bool) or not isinstance(s, int) or s < 0 for s in self.seeds):
            raise input_error("RunConfig", "seeds", "a non-empty sequence of non-negative ints", self.seeds)
        self.out_dir = Path(self.out_dir)

    @property
    def quick(self) -> bool:
        return self.mode == "quick"

    def torch_device(self):
        """The ``torch.device`` to use: CUDA when ``device="auto"`` and a GPU is visible."""
        import torch

        if self.device == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        return torch.device(self.device)


def check_device(device: str, function: str = "reproduce") -> None:
    """Refuse a device this machine does not have now, rather than failing inside the first experiment."""
    base, _, index = device.partition(":")
    if base in ("auto", "cpu"):
        return
    import torch

    available = {"cuda": torch.cuda.is_available, "xpu": lambda: hasattr(torch, "xpu") and torch.xpu.is_available(),
                 "mps": lambda: torch.backends.mps.is_available()}.get(base)
    if available is None or not available():
        raise input_error(function, "--device", f"a device torch can see here (auto or cpu; {base} is not available)",
                          device)
    if base == "cuda" and index and int(index) >= torch.cuda.device_count():
        raise input_error(function, "--device", f"cuda:0 .. cuda:{torch.cuda.device_count() - 1}", device)


#: A run whose ``results.json`` says ``running`` but whose heartbeat is older than this is reported as stale
#: even when its pid cannot be checked (another host).
STALE_SECONDS = 15 * 60


def run_folder_status(run_dir: str | os.PathLike) -> dict[str, Any]:
    """What ``results.json`` in ``run_dir`` says, and whether a ``running`` run is still alive.

    Returns the record's ``state`` plus ``alive`` (``True``/``False``/``None`` when it cannot be told),
    ``reason`` (why a run counts as dead) and ``heartbeat_age_s``. A run killed with SIGKILL cannot close its
    report, so its file says ``running`` for ever: its pid is gone (same host) or its heartbeat is old.
    """
    import json

    path = Path(run_dir) / "results.json"
    if not path.is_file():
        raise input_error("status", "DIR", "a run folder holding results.json", str(run_dir))
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise input_error("status", "DIR", "a readable results.json", f"{path}: {exc}") from None
    out: dict[str, Any] = {"state": record.get("state"), "record": record, "alive": None, "reason": None,
                           "heartbeat_age_s": None}
    beat = record.get("heartbeat")
    if beat:
        try:
            out["heartbeat_age_s"] = (datetime.now(timezone.utc) - datetime.fromisoformat(beat)).total_seconds()
        except ValueError:
            pass
    if out["state"] != "running":
        out["alive"] = False
        return out
    pid, host = record.get("pid"), record.get("host")
    if isinstance(pid, int) and host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            out.update(alive=False, reason=f"process {pid} that wrote it is gone (killed before it could close "
                                           "the report)")
            return out
        except PermissionError:
            pass
        out["alive"] = True
        return out
    age = out["heartbeat_age_s"]
    if age is not None and age > STALE_SECONDS:
        out.update(alive=False, reason=f"no heartbeat for {age / 60:.0f} min (pid {pid} on {host})")
    return out


def default_seeds(mode: str) -> tuple[int, ...]:
    return (0,) if mode == "quick" else (0, 1, 2)


#: Libraries a run may use without the package requiring them (GPU serving, kernels): always listed.
_ALSO_LISTED = ("vllm", "bitsandbytes", "liger-kernel")


def canonical_name(name: str) -> str:
    """A distribution's name as PEP 503 normalises it (``PyStemmer`` -> ``pystemmer``, ``torch_geometric`` ->
    ``torch-geometric``): the key of every version table."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements() -> list[str]:
    """icml26's requirement strings, extras' included: from the checkout's ``pyproject.toml`` when the package
    runs from one (an editable install's metadata lags behind edits to it), else the installed metadata."""
    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        import tomllib

        project = tomllib.loads(pyproject.read_text(encoding="utf-8")).get("project", {})
        if project.get("name") == "icml26":
            extras = project.get("optional-dependencies", {})
            return [*project.get("dependencies", []), *(r for group in extras.values() for r in group)]
    except (ImportError, OSError, ValueError):  # Python 3.10 (no tomllib), an installed wheel, a broken file
        pass
    from importlib.metadata import PackageNotFoundError, requires

    try:
        return requires("icml26") or []
    except PackageNotFoundError:
        return []


def declared_distributions() -> list[str]:
    """Every distribution icml26 requires, its extras' included (without markers or versions, itself left
    out), in the order ``pyproject.toml`` lists them."""
    names = []
    for requirement in _requirements():
        found = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
        if found and canonical_name(found.group(0)) != "icml26":
            names.append(canonical_name(found.group(0)))
    return list(dict.fromkeys(names))


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def package_versions() -> dict[str, str]:
    """Versions of Python, icml26 and every distribution it requires (extras included) or may use, read from
    package metadata (imports nothing): what ``icml26 env`` lists and a run records before it starts."""
    out = {"python": sys.version.split()[0], "icml26": __version__}
    for name in dict.fromkeys([*declared_distributions(), *_ALSO_LISTED]):
        out[name] = _version(name)
    return out


@functools.cache
def _module_owners() -> dict[str, tuple[str, ...]]:
    """Top-level module -> the distributions that install it (read once per process: scanning every
    installed distribution takes a moment, and nothing is installed in the middle of a run)."""
    from importlib.metadata import packages_distributions

    return {module: tuple(owners) for module, owners in packages_distributions().items()}


def imported_versions(modules: Iterable[str] | None = None) -> dict[str, str]:
    """Versions of the distributions that installed the top-level modules imported so far (``sys.modules``):
    what an experiment really used, including what its dependencies pulled in. Sorted by name."""
    tops = {name.partition(".")[0] for name in (sys.modules if modules is None else modules)}
    out = {}
    for top in tops:
        for owner in _module_owners().get(top, ()):
            out[canonical_name(owner)] = _version(owner)
    out.pop("icml26", None)  # an editable install's metadata may lag behind __version__
    return dict(sorted(out.items()))


def source_revision(path: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The git commit of the checkout that holds ``path`` (default: the imported ``icml26`` package).

    Returns ``{"commit": <full hash>, "dirty": <bool>}``, where ``dirty`` says that ``git status --porcelain``
    lists anything (modified, staged or untracked files), so the run may not be exactly that commit. Returns
    None when the package is not a tracked file of a git checkout (an installed wheel), when git is missing,
    or when git fails or hangs: provenance never fails a run.
    """
    folder = Path(path) if path is not None else Path(__file__).resolve().parent

    def git(*args: str) -> str:
        # --no-optional-locks: `git status` must not take the index lock a concurrent `git commit` needs.
        proc = subprocess.run(["git", "--no-optional-locks", "-C", str(folder), *args], capture_output=True, text=True,
                              timeout=10, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise subprocess.SubprocessError(proc.stderr.strip())
        return proc.stdout

    try:
        # A package installed into site-packages inside some other repository is not that repository's code.
        git("ls-files", "--error-unmatch", "--", "__init__.py" if path is None else ".")
        commit = git("rev-parse", "--verify", "HEAD").strip()
        dirty = bool(git("status", "--porcelain").strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return {"commit": commit, "dirty": dirty}


def machine_info() -> dict[str, Any]:
    """Where the run ran: OS and architecture, CPU count and, once a run has imported torch, its device.

    torch is only read when already imported (the core never imports it), so the record is refreshed at
    the end of a run.
    """
    info: dict[str, Any] = {"platform": f"{platform.system()} {platform.machine()}", "cpu_count": os.cpu_count(),
                            "torch_threads": None, "cuda": None}
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            info["torch_threads"] = torch.get_num_threads()
            if torch.cuda.is_available():
                info["cuda"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        except Exception:  # a half-initialised torch must not fail the run's bookkeeping
            pass
    return info


def new_run_dir(base: str | os.PathLike | None, kind: str, *, command: str = "reproduce") -> Path:
    """Create (and check writable) the run folder: ``base`` or ``runs/<timestamp>/``; an unwritable one is an
    :class:`~icml26.errors.InputError` naming ``--out`` of ``command``."""
    from .validation import check_output_dir

    if base is None:
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        prefix = "" if kind == "experiment" else "bench-"
        base = Path("runs") / f"{prefix}{stamp}"
        suffix = 1
        while base.exists():
            base = base.with_name(f"{prefix}{stamp}-{suffix}")
            suffix += 1
    return check_output_dir(command, "--out", base)


def select(kind: str, keys: Sequence[str], *, command: str | None = None) -> list[Entry]:
    """The registered entries named by ``keys`` (all when empty), in the order given; an unknown key is an
    :class:`~icml26.errors.InputError` naming ``KEY`` (experiments) or ``NAME`` (benchmarks) of ``command``."""
    from .papers import PAPERS_BY_KEY

    command = command or ("reproduce" if kind == "experiment" else "bench")
    argument = "KEY" if kind == "experiment" else "NAME"
    found = entries(kind)
    if not keys:
        return list(found.values())
    chosen = []
    for key in dict.fromkeys(keys):  # drop repeats, keep order
        if key in found:
            chosen.append(found[key])
        elif kind == "experiment" and key in PAPERS_BY_KEY:
            raise InputError(command, argument, f"a registered experiment, one of {sorted(found)} (experiment "
                             f"{key!r} is not implemented yet; paper status: {PAPERS_BY_KEY[key].status})", key)
        else:
            raise InputError(command, argument, f"a registered {kind}, one of {sorted(found)} (unknown {kind} "
                             f"{key!r})", key)
    return chosen


def _save_figures(result: Result, exp_dir: Path, run_dir: Path) -> dict[str, str]:
    """Save Figure objects as PNGs (and copy PNG paths) into the experiment folder."""
    saved = {}
    for name, fig in result.figures.items():
        target = exp_dir / f"{name}.png"
        if hasattr(fig, "savefig"):
            exp_dir.mkdir(parents=True, exist_ok=True)
            fig.savefig(target, dpi=120, bbox_inches="tight")
            if "matplotlib.pyplot" in sys.modules:
                sys.modules["matplotlib.pyplot"].close(fig)
        else:
            source = Path(fig)
            if not source.is_file():
                raise FileNotFoundError(f"figure {name!r}: no file at {source}")
            if source.resolve() != target.resolve():
                exp_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, target)
        saved[name] = target.relative_to(run_dir).as_posix()
    return saved


def _error_summary(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0] if text else type(exc).__name__


@dataclass
class RunOutcome:
    run_dir: Path
    record: dict[str, Any]

    @property
    def errors(self) -> int:
        return sum(e["status"] == "error" for e in self.record["experiments"])

    @property
    def failed_claims(self) -> int:
        return sum(
            not c["holds"] for e in self.record["experiments"] if e.get("result") for c in e["result"]["claims"]
        )

    @property
    def interrupted(self) -> bool:
        return self.record["state"] == "interrupted"


#: The file in each run folder that holds what the ``icml26`` loggers said during the run.
RUN_LOG = "run.log"


@contextlib.contextmanager
def run_log(run_dir: Path):
    """While the run lasts, the ``icml26`` logger (every library module's ``logging.getLogger(__name__)``) writes
    INFO and above to ``<run_dir>/run.log``: a backend's retries, an instance that failed, each experiment's start
    and end. Only the process of rank 0 writes it (``RANK`` unset or 0: one file per run under ``accelerate
    launch`` / ``torchrun`` too). The handler is removed and the logger's level restored afterwards; library
    modules never configure handlers themselves."""
    if os.environ.get("RANK", "0") not in ("", "0"):
        yield None
        return
    package_logger = logging.getLogger("icml26")
    handler = logging.FileHandler(Path(run_dir) / RUN_LOG, encoding="utf-8", delay=False)
    handler.setLevel(logging.INFO)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = package_logger.level
    if package_logger.getEffectiveLevel() > logging.INFO:  # the default (WARNING, from the root) would drop INFO
        package_logger.setLevel(logging.INFO)
    package_logger.addHandler(handler)
    try:
        yield handler
    finally:
        package_logger.removeHandler(handler)
        package_logger.setLevel(level)
        handler.close()


def run_all(
    kind: str,
    selected: Sequence[Entry],
    *,
    mode: str = "quick",
    seeds: Sequence[int] | None = None,
    run_dir: Path,
    device: str = "auto",
    data: str | None = None,
    command: str = "",
    progress: bool = True,
    echo=print,
) -> RunOutcome:
    """Run ``selected`` one after another, writing ``results.json`` and ``report.md`` after each."""
    seeds = tuple(seeds) if seeds else default_seeds(mode)
    os.environ.setdefault("MPLBACKEND", "Agg")  # figures are files; never open a window
    now = lambda: datetime.now(timezone.utc).isoformat(timespec="seconds")  # noqa: E731
    revision = source_revision()
    record: dict[str, Any] = {
        "kind": kind,
        "state": "running",
        # Who writes this file and when it last did: `icml26 status DIR` tells a killed run (pid gone, or
        # no heartbeat for long) from one still going.
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "heartbeat": now(),
        "mode": mode,
        "seeds": list(seeds),
        "device": device,
        "command": command,
        "started": now(),
        "finished": None,
        # every distribution the package requires, then (after each experiment) every one it imported
        "versions": package_versions(),
        # Provenance: which source tree (None outside a git checkout) and which machine made these numbers.
        "git_commit": (revision or {}).get("commit"),
        "git_dirty": (revision or {}).get("dirty"),
        "machine": machine_info(),
        "experiments": [
            {"key": e.key, "title": e.title, "paper": e.paper, "status": "pending", "seconds": None,
             "result": None, "error": None, "error_summary": None}
            for e in selected
        ],
    }

    last_write = [0.0]

    def write() -> None:
        record["heartbeat"] = now()
        atomic_write_json(run_dir / "results.json", record)
        atomic_write_text(run_dir / "report.md", render_markdown(record))
        last_write[0] = time.monotonic()

    write()
    bar = None
    if progress and selected:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(selected), desc=kind + "s", unit=kind[:3], file=sys.stderr, dynamic_ncols=True)
    current: dict[str, Any] = {}
    phase_bars: dict[int, Any] = {}

    def on_phase(tracker, event: str) -> None:
        """Show an experiment's phases as a second bar and keep the heartbeat fresh (main thread only)."""
        slot = current.get("slot")
        if slot is None:
            return
        # The open phases, outermost first ("seeds 1/3 > sft 120/300"): what results.json shows as in flight.
        opened = current.setdefault("open", {})
        if event == "close":
            opened.pop(id(tracker), None)
        else:
            opened[id(tracker)] = tracker
        slot["phase"] = " > ".join(t.describe() for t in opened.values()) or None
        if progress:
            from tqdm.auto import tqdm

            key = id(tracker)
            if event == "open" and key not in phase_bars:
                phase_bars[key] = tqdm(total=tracker.total, initial=tracker.n, desc=f"{current['key']}: {tracker.name}",
                                       position=1 + len(phase_bars), leave=False, file=sys.stderr,
                                       dynamic_ncols=True, mininterval=1.0 if sys.stderr.isatty() else 30.0)
            elif key in phase_bars:
                phase_bar = phase_bars[key]
                if tracker.total != phase_bar.total:
                    phase_bar.total = tracker.total
                phase_bar.update(tracker.n - phase_bar.n)
                if event == "close":
                    phase_bars.pop(key).close()
        if event != "update" or time.monotonic() - last_write[0] > HEARTBEAT_SECONDS:
            write()

    log = contextlib.ExitStack()
    log.enter_context(run_log(run_dir))
    logger.info("%s run of %s (%s mode, seeds %s, device %s) into %s", kind, [e.key for e in selected] or "nothing",
                mode, list(seeds), device, run_dir)
    try:
        for entry, slot in zip(selected, record["experiments"]):
            current.update(slot=slot, key=entry.key)
            if bar is not None:
                bar.set_postfix_str(entry.key)
            exp_dir = run_dir / entry.key
            config = RunConfig(mode=mode, seeds=seeds, out_dir=exp_dir, device=device, data=data)
            slot["status"] = "running"
            write()  # a killed run then shows which experiment was in flight
            start = time.perf_counter()
            logger.info("%s %s: started", kind, entry.key)
            try:
                exp_dir.mkdir(parents=True, exist_ok=True)
                set_seed(seeds[0])
                with listening(on_phase):
                    result = entry.run(config)
                if not isinstance(result, Result):
                    raise TypeError(f"{kind} {entry.key!r} returned {type(result).__name__}, expected icml26.Result")
                result.figures = _save_figures(result, exp_dir, run_dir)
                slot["result"] = result.to_dict()
                slot["status"] = "ok"
                logger.info("%s %s: done in %.1f s, %d of %d claims hold", kind, entry.key,
                            time.perf_counter() - start, sum(c["holds"] for c in slot["result"]["claims"]),
                            len(slot["result"]["claims"]))
            except KeyboardInterrupt:
                logger.warning("%s %s: interrupted", kind, entry.key)
                slot["status"] = "interrupted"
                raise
            except Exception as exc:  # an experiment that raises is reported, the run goes on
                slot["status"] = "error"
                slot["error"] = traceback.format_exc()
                slot["error_summary"] = _error_summary(exc)
                logger.error("%s %s raised:\n%s", kind, entry.key, slot["error"].rstrip())
            finally:
                slot["seconds"] = time.perf_counter() - start
                # what the experiment really imported (its libraries' own dependencies included)
                record["versions"].update(imported_versions())
                slot.pop("phase", None)
                for phase_bar in phase_bars.values():
                    phase_bar.close()
                phase_bars.clear()
                current.clear()
                write()
            if bar is not None:
                bar.update(1)
        record["state"] = "complete"
    except KeyboardInterrupt:
        record["state"] = "interrupted"
        for slot in record["experiments"]:
            if slot["status"] == "pending":
                slot["status"] = "not run"
    finally:
        if bar is not None:
            bar.close()
        record["finished"] = now()
        record["machine"] = machine_info()
        write()
        logger.info("%s run %s: %s", kind, record["state"], run_dir)
        log.close()
    echo(summary_text(record))
    return RunOutcome(run_dir, record)
