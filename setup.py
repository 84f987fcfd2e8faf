"""Derive the package list from the folders, so a new subpackage cannot be left out of the wheel.

The repository root keeps ``kernels/ models/ training/ agents/ eval/`` beside ``icml26/`` (the core);
each is one subpackage of the single import package ``icml26``. Every folder below them that holds an
``__init__.py`` becomes ``icml26.<folder>.<sub>``; ``tests/test_packaging.py`` builds the wheel and
checks it against the same walk. Everything else about the project is in ``pyproject.toml``.
"""

from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent
#: import name -> folder (relative to the repository root).
ROOTS = {"icml26": "icml26", "icml26.kernels": "kernels", "icml26.models": "models",
         "icml26.training": "training", "icml26.agents": "agents", "icml26.eval": "eval"}


def find_packages() -> list[str]:
    found = []
    for name, folder in ROOTS.items():
        base = ROOT / folder
        for init in sorted(base.rglob("__init__.py")):
            rel = init.parent.relative_to(base)
            if "__pycache__" in rel.parts:
                continue
            found.append(".".join((name, *rel.parts)) if rel.parts else name)
    return found


setup(package_dir=dict(ROOTS), packages=find_packages())
