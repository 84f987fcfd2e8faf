"""Local Sphinx extension of the icml26 docs.

``icml26-help``: renders ``icml26 WORDS --help`` as the installed command line prints it, so the CLI
pages can never drift from the parser::

    ```{icml26-help} reproduce
    ```

A build warns (an error under ``-W``) when a documented command does not exist, and when a command
of the parser, at any depth (``icml26 sera generate``), has no ``icml26-help`` block anywhere.

``toctree-glob``: a ``{toctree}`` whose entries are glob patterns (``:glob:`` implied) that is empty,
without a warning, while its patterns match no page yet (``methods/index.md``: method pages arrive one
at a time). Sphinx 9.0 gives its "glob pattern didn't match any documents" warning no type, so
``suppress_warnings`` cannot silence it; once one page matches, it is an ordinary glob toctree.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.directives.other import TocTree
from sphinx.util import docname_join, logging
from sphinx.util.docutils import SphinxDirective
from sphinx.util.matching import patfilter

logger = logging.getLogger(__name__)

#: Terminal width the help is formatted for (argparse reads $COLUMNS).
HELP_COLUMNS = "100"


@contextlib.contextmanager
def _columns(width: str):
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = width
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def help_text(words: tuple[str, ...]) -> str:
    """What ``icml26 WORDS --help`` prints; ValueError with argparse's message for an unknown command."""
    from icml26.cli import main

    out, err = io.StringIO(), io.StringIO()
    code: object = 0
    with _columns(HELP_COLUMNS), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([*words, "--help"])
        except SystemExit as exc:
            code = exc.code
    if code not in (0, None):
        raise ValueError(err.getvalue().strip() or f"exit status {code}")
    return out.getvalue()


def cli_commands() -> set[tuple[str, ...]]:
    """Every command path of the ``icml26`` parser: ``("list",)``, ``("sera", "generate")``, ..."""
    from icml26.cli import build_parser

    found: set[tuple[str, ...]] = set()

    def walk(parser: argparse.ArgumentParser, prefix: tuple[str, ...]) -> None:
        for action in parser._actions:  # argparse keeps sub-commands in this private list only
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    found.add(prefix + (name,))
                    walk(sub, prefix + (name,))

    walk(build_parser(), ())
    return found


class Icml26Help(SphinxDirective):
    """``icml26-help [WORD ...]``: the help of ``icml26 WORD ...`` as a literal block."""

    optional_arguments = 8
    has_content = False

    def run(self) -> list[nodes.Node]:
        words = tuple(self.arguments)
        try:
            text = help_text(words)
        except ValueError as exc:
            logger.warning("icml26-help: `icml26 %s --help` fails: %s", " ".join(words), exc,
                           location=self.get_location())
            return []
        documented = self.env.__dict__.setdefault("icml26_cli_documented", {})
        documented.setdefault(self.env.docname, set()).add(words)
        block = nodes.literal_block(text, text, language="text")
        self.set_source_info(block)
        return [block]


class GlobToctree(TocTree):
    """``toctree-glob``: ``{toctree}`` with ``:glob:``, empty and silent while no page matches."""

    def run(self) -> list[nodes.Node]:
        self.options["glob"] = None
        current = self.env.docname
        others = sorted(self.env.found_docs - {current})
        entries = [line.strip() for line in self.content if line.strip()]
        if not any(patfilter(others, docname_join(current, entry)) for entry in entries):
            self.content = StringList()  # still a glob toctree: Sphinx rereads this page when pages are added
        return super().run()


def _purge(app, env, docname: str) -> None:
    getattr(env, "icml26_cli_documented", {}).pop(docname, None)


def _merge(app, env, docnames, other) -> None:
    mine = env.__dict__.setdefault("icml26_cli_documented", {})
    for docname in docnames:
        if docname in getattr(other, "icml26_cli_documented", {}):
            mine[docname] = other.icml26_cli_documented[docname]


def _check(app, env) -> None:
    documented = set().union(*getattr(env, "icml26_cli_documented", {}).values())
    for words in sorted(cli_commands() - documented):
        logger.warning("`icml26 %s` has no `icml26-help` block in the docs (add one to concepts/cli.md or to "
                       "its method's page)", " ".join(words))


def _skip_metadata_requests(app, what, name, obj, skip, options):
    """scikit-learn generates ``set_fit_request`` / ``set_score_request`` / ... on every estimator with
    metadata-routed arguments; they are scikit-learn's API, documented there, and their generated
    docstrings are not valid reST. Skip them on every page rather than listing them per class."""
    if re.fullmatch(r"set_\w+_request", name):
        return True
    return None


def setup(app):
    app.connect("autodoc-skip-member", _skip_metadata_requests)
    app.add_directive("icml26-help", Icml26Help)
    app.add_directive("toctree-glob", GlobToctree)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("env-check-consistency", _check)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
