"""Provenance: which source tree and which libraries made a run's numbers, in results.json and icml26 env."""

import ast
import json
import re
import sys
from pathlib import Path

import pytest

from icml26 import Result
from icml26.registry import Entry
from icml26.runner import canonical_name, declared_distributions, imported_versions, package_versions, run_all

REPO = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("icml26", "kernels", "models", "training", "agents", "eval")


def _imports_a_new_module(config):
    import csv  # noqa: F401  (standard library: owned by no distribution)

    import packaging.version  # noqa: F401  (a distribution icml26 does not require itself)

    return Result(metrics={"ok": 1})


def test_results_record_the_commit_the_dirty_flag_and_what_the_run_imported(tmp_path):
    entry = Entry("experiment", "t_prov", "test: provenance", _imports_a_new_module, None, __name__)
    run_all("experiment", [entry], run_dir=tmp_path, progress=False, echo=lambda _: None)
    record = json.loads((tmp_path / "results.json").read_text())
    assert "git" not in record
    if (REPO / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{40}", record["git_commit"]) and isinstance(record["git_dirty"], bool)
    versions = record["versions"]
    from importlib.metadata import version

    assert versions["packaging"] == version("packaging")  # imported during the run, required by nobody here
    for name in declared_distributions():  # every requirement, installed or not
        assert name in versions
    report = (tmp_path / "report.md").read_text()
    assert "- git commit: " in report and "- uncommitted changes: " in report


def test_imported_versions_name_the_distribution_not_the_module():
    import yaml  # noqa: F401  (module yaml, distribution PyYAML)

    found = imported_versions(["yaml", "yaml.loader", "os", "no_such_module"])
    assert list(found) == ["pyyaml"] and re.fullmatch(r"\d+\.\d+.*", found["pyyaml"])
    assert canonical_name("PyStemmer") == "pystemmer" and canonical_name("torch_geometric") == "torch-geometric"


def _pyproject_distributions() -> list[str]:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values()
                                                 for r in extra)]
    names = [canonical_name(re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r).group(0)) for r in requirements]
    return [n for n in dict.fromkeys(names) if n != "icml26"]


def _imported_top_level_modules() -> set[str]:
    """Every top-level module an ``import`` statement of the package names (read from the source, not run)."""
    found = set()
    for folder in PACKAGE_FOLDERS:
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.partition(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.partition(".")[0])
    return found


def test_env_lists_every_declared_distribution_the_package_imports():
    from importlib.metadata import packages_distributions

    from icml26.envinfo import collect

    owners: dict[str, set[str]] = {}
    for module, dists in packages_distributions().items():
        for dist in dists:
            owners.setdefault(canonical_name(dist), set()).add(module)
    imported = _imported_top_level_modules()
    declared = _pyproject_distributions()
    # a distribution that is not installed here: its module is its name (bm25s, vllm, opendp, ...)
    used = [d for d in declared if (owners.get(d) or {d.replace("-", "_")}) & imported]
    for name in ("scikit-learn", "torch-geometric", "gymnasium", "pandas", "statsmodels", "scipy", "highspy", "bm25s"):
        assert name in used, name  # the scan sees what the experiments import
    info = collect()
    missing = [d for d in used if d not in info]
    assert missing == [], f"icml26 env does not list {missing}"
    assert set(declared) <= set(package_versions())
    assert "git_commit" in info and "git_dirty" in info
    if (REPO / ".git").exists():
        assert re.fullmatch(r"[0-9a-f]{40}", info["git_commit"]) and isinstance(info["git_dirty"], bool)


def test_env_prints_the_commit_and_dirty_flag(capsys):
    from icml26.cli import main

    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^git_commit\s+([0-9a-f]{40}|unknown)$", out, re.M)
    assert re.search(r"^git_dirty\s+(True|False|unknown)$", out, re.M)
    assert re.search(r"^scikit-learn\s+\S+", out, re.M) and sys.version.split()[0] in out
