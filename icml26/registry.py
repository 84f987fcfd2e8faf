"""Registries of experiments (``icml26 reproduce``) and benchmarks (``icml26 bench``).

An experiment module in ``eval/experiments/<key>.py`` registers itself::

    from icml26.registry import experiment
    from icml26.results import Claim, Result

    @experiment("r2g", title="R2G groks faster than cross-entropy", paper="r2g")
    def run(config):
        import torch  # heavy imports inside run: `icml26 list` must not import torch
        ...
        return Result(metrics=..., claims=[Claim.less("steps to 95% test acc", r2g_steps, ce_steps)])

Discovery imports every module of ``icml26.eval.experiments`` and ``icml26.eval.benchmarks``,
then the modules named by the ``icml26.plugins`` entry-point group and by the ``ICML26_PLUGINS``
environment variable (comma-separated import paths), so another package, or a test, can add its
own experiments without touching this one.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

from .errors import InputError, described, input_error

KINDS = ("experiment", "benchmark")
PLUGIN_ENV = "ICML26_PLUGINS"
PLUGIN_GROUP = "icml26.plugins"


@dataclass(frozen=True)
class Entry:
    """A registered experiment or benchmark."""

    kind: str
    key: str
    title: str
    run: Callable
    paper: str | None = None
    module: str = ""


_REGISTRY: dict[str, dict[str, Entry]] = {kind: {} for kind in KINDS}
_discovered = False


def _register(kind: str, key: str, title: str, paper: str | None) -> Callable[[Callable], Callable]:
    if not isinstance(key, str) or not key.replace("_", "").replace("-", "").isalnum():
        raise input_error(kind, "key", "a word of letters, digits, '_' or '-'", key)

    def decorator(fn: Callable) -> Callable:
        if not callable(fn):
            raise TypeError(f"@{kind}({key!r}) must decorate a callable run(config) -> Result")
        existing = _REGISTRY[kind].get(key)
        module = getattr(fn, "__module__", "")
        if existing is not None and existing.module != module:
            raise InputError(kind, "key", f"a key no other module registers ({key!r} is in {existing.module})",
                             described(module))
        _REGISTRY[kind][key] = Entry(kind, key, title, fn, paper, module)
        return fn

    return decorator


def experiment(key: str, *, title: str, paper: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``run(config) -> Result`` as the reproduction experiment ``key``.

    ``paper`` is the key of the paper in :mod:`icml26.papers` whose claim the experiment checks
    (defaults to ``key``).
    """
    return _register("experiment", key, title, paper if paper is not None else key)


def benchmark(key: str, *, title: str, paper: str | None = None) -> Callable[[Callable], Callable]:
    """Register ``run(config) -> Result`` as the benchmark ``key`` (``icml26 bench key``)."""
    return _register("benchmark", key, title, paper)


def _plugin_modules() -> list[str]:
    names = [m.strip() for m in os.environ.get(PLUGIN_ENV, "").split(",") if m.strip()]
    from importlib.metadata import entry_points

    names += [ep.value for ep in entry_points(group=PLUGIN_GROUP)]
    return names


def discover() -> None:
    """Import every experiment, benchmark and plugin module once (idempotent)."""
    global _discovered
    if _discovered:
        return
    for package in ("icml26.eval.experiments", "icml26.eval.benchmarks"):
        pkg = importlib.import_module(package)
        for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
            if not info.name.startswith("_"):
                importlib.import_module(f"{package}.{info.name}")
    for name in _plugin_modules():
        try:
            importlib.import_module(name)
        except ImportError as exc:
            raise ImportError(f"cannot import icml26 plugin module {name!r} (from ${PLUGIN_ENV} or the "
                              f"{PLUGIN_GROUP!r} entry points): {exc}") from exc
    _discovered = True


def entries(kind: str) -> dict[str, Entry]:
    """All registered entries of ``kind`` ("experiment" or "benchmark"), sorted by key."""
    if kind not in KINDS:
        raise input_error("entries", "kind", f"one of {KINDS}", kind)
    discover()
    return dict(sorted(_REGISTRY[kind].items()))


def get(kind: str, key: str) -> Entry:
    found = entries(kind)
    if key not in found:
        known = ", ".join(found) or "none registered"
        raise KeyError(f"unknown {kind} {key!r} (known: {known})")
    return found[key]
