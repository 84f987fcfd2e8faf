"""Task seeds for SERA (arXiv 2601.20789): the functions of a repository and its approximate Python call graph.

Reconstruction: SERA lists a repository's functions with code2flow; here the standard library's ``ast`` does the
same job (module-level functions and class methods in tracked ``.py`` files up to a folder depth)
and links calls by name the way code2flow does (a bare name resolves to functions of that name,
preferring the same file; ``obj.name`` resolves to methods of that name). It avoids a dependency
whose only use would be this listing.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import shutil
import subprocess
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from icml26.errors import InputError, InputTypeError, described
from icml26.validation import check_int

SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "build", "dist", "node_modules", "__pycache__"}


class RepoError(InputError):
    """The repository argument is unusable (missing, not a git repository, no Python functions): an
    :class:`~icml26.errors.InputError` (so a ``ValueError``) naming the function and its argument."""


@dataclass
class SeedFunction:
    """One function of the repository that can start a task."""

    name: str                 # bare name, e.g. "parse"
    qualname: str             # "Parser.parse" for a method
    file: str                 # path relative to the repository root, POSIX separators
    lineno: int
    end_lineno: int
    callers: list[str] = field(default_factory=list)   # "file::qualname" of functions calling it
    callees: list[str] = field(default_factory=list)   # "file::qualname" of functions it calls

    @property
    def key(self) -> str:
        return f"{self.file}::{self.qualname}"


def _git(repo: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=check)


def check_git_repo(repo: str | os.PathLike, *, function: str = "check_git_repo") -> Path:
    """Resolve ``repo`` and make sure it is the top of a git work tree with at least one commit."""
    if not isinstance(repo, (str, os.PathLike)):
        raise InputTypeError(function, "repo", "a path to a git repository", described(type(repo).__name__))
    path = Path(repo).expanduser()
    expected = "the root of a git repository of Python code, with at least one commit"
    if not path.is_dir():
        raise RepoError(function, "repo", expected, described(f"{str(path)!r}, which is not a folder"))
    path = path.resolve()
    top = _git(path, "rev-parse", "--show-toplevel", check=False)
    if top.returncode != 0:
        raise RepoError(function, "repo", expected + " (run `git init && git add -A && git commit -m init` there, or "
                        "build one from an installed package with make_git_repo_from_package)",
                        described(f"{str(path)!r}, which is not under git"))
    if Path(top.stdout.strip()).resolve() != path:
        raise RepoError(function, "repo", expected, described(f"{str(path)!r}, inside the git repository "
                                                              f"{top.stdout.strip()!r} but not its root"))
    if _git(path, "rev-parse", "--verify", "HEAD", check=False).returncode != 0:
        raise RepoError(function, "repo", expected, described(f"{str(path)!r}, a git repository without commits"))
    return path


def head_commit(repo: str | os.PathLike) -> str:
    return _git(Path(repo), "rev-parse", "HEAD").stdout.strip()


def tracked_python_files(repo: Path, max_folder_depth: int = 3) -> list[str]:
    out = _git(repo, "ls-files", "-z", "--", "*.py").stdout.split("\0")
    files = []
    for rel in sorted(f for f in out if f):
        parts = rel.split("/")
        name = parts[-1]
        if len(parts) - 1 > max_folder_depth:
            continue
        if any(p in SKIP_DIRS or p.startswith(".") for p in parts[:-1]):
            continue
        if name.startswith("test_") or name.endswith("_test.py") or name in ("conftest.py", "setup.py"):
            continue
        files.append(rel)
    return files


def _has_real_body(node: ast.AST) -> bool:
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return any(not isinstance(s, ast.Pass) and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))
               for s in body)


def _called_names(node: ast.AST) -> set[tuple[str, bool]]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            if isinstance(sub.func, ast.Name):
                names.add((sub.func.id, False))
            elif isinstance(sub.func, ast.Attribute):
                names.add((sub.func.attr, True))
    return names


def find_seed_functions(repo: str | os.PathLike, *, max_folder_depth: int = 3, max_functions: int = 5000,
                        min_lines: int = 2) -> list[SeedFunction]:
    """Functions of a git repository's tracked Python files, with callers and callees.

    Test files and folders (``tests/``, ``test_*.py``, ``conftest.py``), docs and build folders,
    files deeper than ``max_folder_depth`` folders and functions shorter than ``min_lines`` lines or
    without a real body are skipped. The list is sorted by file and line; at most ``max_functions``.
    """
    root = check_git_repo(repo, function="find_seed_functions")
    max_folder_depth = check_int("find_seed_functions", "max_folder_depth", max_folder_depth, low=0)
    max_functions = check_int("find_seed_functions", "max_functions", max_functions, low=1)
    min_lines = check_int("find_seed_functions", "min_lines", min_lines, low=1)
    found: list[tuple[SeedFunction, set]] = []
    for rel in tracked_python_files(root, max_folder_depth):
        try:
            tree = ast.parse((root / rel).read_text(encoding="utf-8"), filename=rel)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue  # files that do not parse (templates, Python 2) cannot be edited reliably either
        scopes = [(n, "") for n in tree.body]
        while scopes:
            node, prefix = scopes.pop(0)
            if isinstance(node, ast.ClassDef):
                scopes.extend((n, f"{prefix}{node.name}.") for n in node.body)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if node.end_lineno - node.lineno + 1 < min_lines or not _has_real_body(node):
                    continue
                fn = SeedFunction(node.name, prefix + node.name, rel, node.lineno, node.end_lineno)
                found.append((fn, _called_names(node)))
    found.sort(key=lambda item: (item[0].file, item[0].lineno))
    by_name: dict[str, list[SeedFunction]] = defaultdict(list)
    for fn, _ in found:
        by_name[fn.name].append(fn)
    for fn, calls in found:
        for name, is_attr in sorted(calls):
            targets = [t for t in by_name.get(name, ()) if ("." in t.qualname) == is_attr or not is_attr]
            same_file = [t for t in targets if t.file == fn.file]
            for target in (same_file or targets):
                if target is fn:
                    continue
                fn.callees.append(target.key)
                target.callers.append(fn.key)
    return [fn for fn, _ in found][:max_functions]


def make_git_repo_from_package(name: str, dest: str | os.PathLike, *, allow_binary: bool = False) -> Path:
    """Copy an installed pure-Python package (or single module) into a new git repository, one commit.

    ``dest`` must not exist or be empty. The commit has a fixed author and date, so the same package
    version gives the same commit id (and so the same SERA instance ids). Compiled extension files
    make it raise unless ``allow_binary`` (they are then left out).
    """
    function = "make_git_repo_from_package"
    if not isinstance(name, str):
        raise InputTypeError(function, "name", "the import name of an installed package", described(type(name).__name__))
    try:
        spec = importlib.util.find_spec(name) if name and not name.startswith(".") else None
    except (ImportError, ValueError):  # a parent package that does not exist ("nope.sub")
        spec = None
    if spec is None or spec.origin is None and not spec.submodule_search_locations:
        raise RepoError(function, "name", "the import name of an installed pure-Python package or module",
                        described(f"{name!r}, which is not installed (pip install it first)"))
    if not isinstance(dest, (str, os.PathLike)):
        raise InputTypeError(function, "dest", "a folder path", described(type(dest).__name__))
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise RepoError(function, "dest", "a folder that does not exist or is empty",
                        described(f"{str(dest)!r}, which is " + ("a file" if not dest.is_dir() else "not empty")))
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RepoError(function, "dest", "a folder that can be created",
                        described(f"{str(dest)!r} ({exc.strerror or exc})")) from None
    binary = (".so", ".pyd", ".dll", ".dylib")
    if spec.submodule_search_locations:
        src = Path(list(spec.submodule_search_locations)[0])
        compiled = [p for p in src.rglob("*") if p.suffix in binary]
        if compiled and not allow_binary:
            raise RepoError(function, "name", "a pure-Python package (or allow_binary=True to copy only its Python "
                            "files)", described(f"{name!r}, which ships {compiled[0].name}"))
        shutil.copytree(src, dest / src.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", *("*" + b for b in binary)))
    else:
        src = Path(spec.origin)
        if src.suffix != ".py":
            raise RepoError(function, "name", "a pure-Python package or module",
                            described(f"{name!r}, a compiled module ({src.name})"))
        shutil.copy2(src, dest / src.name)
    env = dict(os.environ, GIT_AUTHOR_NAME="icml26", GIT_AUTHOR_EMAIL="icml26@localhost",
               GIT_COMMITTER_NAME="icml26", GIT_COMMITTER_EMAIL="icml26@localhost",
               GIT_AUTHOR_DATE="2000-01-01T00:00:00Z", GIT_COMMITTER_DATE="2000-01-01T00:00:00Z")
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "--no-gpg-sign", "-m", f"{name}: initial import"]):
        subprocess.run(["git", "-C", str(dest), "-c", "init.defaultBranch=main", *args], env=env, check=True,
                       capture_output=True, text=True)
    return dest.resolve()
