"""Lazy public names for a package ``__init__``: each name is imported from its module on first use.

The one way a package face (``icml26.training.r2g``, ``icml26.models.saisa``, ``icml26.agents``, ...) exposes the
names of its modules that import transformers or TRL, so that importing the package stays cheap (PEP 562)."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package`` whose names live in the modules ``exports[name]`` (relative).

    Args:
        package: the package's ``__name__``.
        exports: public name -> the module (relative to ``package``) that defines it.

    Returns the module-level ``__getattr__`` and ``__dir__`` to assign in the package's ``__init__.py``; a name is
    imported on first access and then cached in the package's namespace.
    """

    def __getattr__(name: str) -> Any:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f".{exports[name]}", package), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(importlib.import_module(package))) | set(exports))

    return __getattr__, __dir__
