"""The wheel holds every subpackage: build it, install it into a scratch folder, import every module from there."""

import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"icml26": "icml26", "kernels": "icml26.kernels", "models": "icml26.models",
           "training": "icml26.training", "agents": "icml26.agents", "eval": "icml26.eval"}


def packages_in_checkout() -> set[str]:
    """Every folder with an ``__init__.py`` under the mapped roots, as an ``icml26.*`` name (git-tracked or not)."""
    found = set()
    for folder, name in FOLDERS.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            if "__pycache__" not in rel.parts:
                found.add(".".join((name, *rel.parts)))
    return found


def copy_of_checkout(dest: Path) -> Path:
    """The checkout without git, build outputs and caches: a stale build/ folder would slip old files into a build."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "runs", ".cache",
                                                              "__pycache__", ".venv", ".pytest_cache"))
    return dest


def isolation_flags() -> list[str]:
    """Build without isolation (no download) when this environment's setuptools is new enough for pyproject.toml."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        major = int(version("setuptools").split(".")[0])
    except (PackageNotFoundError, ValueError):
        return []
    return ["--no-build-isolation"] if major >= 77 else []


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    source = copy_of_checkout(out / "source")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *isolation_flags(), "-q", "-w", str(out),
                    str(source)], check=True, capture_output=True, text=True)
    (path,) = out.glob("icml26-*.whl")
    return path


def test_wheel_has_every_package_of_the_checkout(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    in_wheel = {name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("/__init__.py")}
    assert packages_in_checkout() - in_wheel == set(), "subpackages missing from the wheel"
    assert "icml26/py.typed" not in names  # not type-checked yet: no PEP 561 marker (see pyproject.toml)
    outside = tuple(f"{folder}/" for folder in FOLDERS if folder != "icml26") + ("tests/",)
    assert not [n for n in names if n.startswith(outside)], "folders outside icml26/"


def test_every_module_imports_from_the_installed_wheel(wheel, tmp_path):
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-compile", "-q", "--target", str(target),
                    str(wheel)], check=True, capture_output=True, text=True)
    modules = sorted(".".join(p.relative_to(target).with_suffix("").parts).removesuffix(".__init__")
                     for p in (target / "icml26").rglob("*.py") if p.name != "__main__.py")
    assert "icml26.kernels.naevit" in modules and len(modules) > 50
    script = (
        "import importlib, sys\n"
        f"sys.path.insert(0, {str(target)!r})\n"
        "import icml26\n"
        f"assert icml26.__file__.startswith({str(target)!r}), icml26.__file__\n"
        f"for name in {modules!r}:\n"
        "    module = importlib.import_module(name)\n"
        f"    assert module.__file__.startswith({str(target)!r}), (name, module.__file__)\n"
    )
    # Run from an empty folder so the checkout's own folders (a top-level `kernels/`) are not on the path.
    done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]


def test_static_tools_follow_icml26_kernels_in_a_strict_editable_install(tmp_path):
    """The IDE recipe: with ``editable_mode=strict`` a static tool finds ``icml26.kernels`` -> ``kernels/``.

    The package ships no ``py.typed`` yet (it is not type-checked), so mypy reports the module as found but untyped
    (``import-untyped``); under the default editable install it would not find it at all (``import-not-found``).
    """
    pytest.importorskip("mypy")
    source = copy_of_checkout(tmp_path / "source")
    venv = tmp_path / "venv"
    # A new venv that sees this one's packages (mypy, setuptools, pip) through a .pth path line, which does not
    # run this environment's own editable-install hook; only icml26 is installed into it, in strict mode.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    child_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                check=True, capture_output=True, text=True).stdout.strip()
    Path(child_site, "parent-env.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps", *isolation_flags(), "-q", "-e", str(source),
                    "--config-settings", "editable_mode=strict"], check=True, capture_output=True, text=True)
    probe = tmp_path / "probe.py"
    probe.write_text("from icml26.kernels.naevit import naevit_attention\n")
    done = subprocess.run([str(python), "-m", "mypy", "--no-incremental", str(probe)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert "import-untyped" in done.stdout and "import-not-found" not in done.stdout, done.stdout + done.stderr

def _changelog_versions() -> list[str]:
    """The version headings of CHANGELOG.md, top first (``Unreleased`` for the section of what is not released)."""
    import re

    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    return re.findall(r"^## \[([^\]]+)\]", text, re.M)


def test_the_version_is_the_changelog_s_latest_release():
    import re

    tomllib = pytest.importorskip("tomllib")
    import icml26

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert icml26.__version__ == version
    headings = _changelog_versions()
    released = [h for h in headings if h != "Unreleased"]
    assert released, "CHANGELOG.md names no released version"
    # the version is the topmost release; an Unreleased section (what the next version will hold) may sit above it
    assert released[0] == version, f"pyproject.toml says {version}, CHANGELOG.md's latest release is {released[0]}"
    assert headings.index(released[0]) == (1 if "Unreleased" in headings else 0)
    assert all(re.fullmatch(r"\d+\.\d+\.\d+", h) for h in released)
    assert released == sorted(released, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    # one source: the docs page includes the root file
    assert "{include} ../../CHANGELOG.md" in (ROOT / "docs" / "development" / "changelog.md").read_text()


def test_released_versions_are_tagged_where_the_checkout_has_tags():
    tags = subprocess.run(["git", "-C", str(ROOT), "tag", "--list", "v*"], capture_output=True, text=True)
    if tags.returncode != 0 or not tags.stdout.strip():
        pytest.skip("no git tags in this checkout (a shallow CI clone)")
    released = [h for h in _changelog_versions() if h != "Unreleased" and h != "0.1.0"]  # 0.1.0 was never tagged
    assert {f"v{v}" for v in released} <= set(tags.stdout.split())


def test_license_is_the_apache_2_0_text_pyproject_names():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    for part in ("Apache License\n                           Version 2.0, January 2004",
                 "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION", "9. Accepting Warranty or Additional "
                 "Liability.", "END OF TERMS AND CONDITIONS", "APPENDIX: How to apply the Apache License to your work."):
        assert part in text
    assert len(text) > 11000  # the whole text, not a summary
