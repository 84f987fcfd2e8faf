"""Sphinx configuration of the icml26 docs (MyST markdown pages, API from docstrings).

Build strictly, as CI does (every warning is an error)::

    sphinx-build -W --keep-going -b html docs docs/_build/html

Autodoc imports the installed package (``pip install -e ".[dev]"``), so the ``package-dir``
mapping of ``kernels/`` to ``icml26.kernels`` and friends needs no path tricks here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import icml26

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))  # the local extension `icml26_docs` (the `icml26-help` directive)

project = "icml26"
author = "icml26 contributors"
copyright = "icml26 contributors"
release = version = icml26.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
    "icml26_docs",
]
# No intersphinx: builds run offline, and a strict build must not depend on the network.

source_suffix = {".md": "markdown"}
root_doc = "index"
# results/*.md are generated from run folders and included into method pages with {include};
# they are fragments, not pages of their own.
exclude_patterns = ["_build", "results", "Thumbs.db", ".DS_Store"]

# MyST: `[text](#some-heading)` links to headings down to ###; ```{eval-rst} blocks hold autodoc.
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "deflist"]

# Autodoc + napoleon: our docstrings are Google style (`Args:` / `Returns:` / `Raises:` sections).
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

html_theme = "furo"
html_title = f"icml26 {release}"
html_static_path: list[str] = []
html_show_sourcelink = False
