"""Sphinx extension: a site without the solutions, for a graded term.

Loaded by ``_config.yml`` (``sphinx.local_extensions``); it does nothing unless the
build runs with ``ATTNLAB_SITE_SOLUTIONS=0`` (``make book-graded`` does, into
``_build/graded/``). Then every solution leaves the site:

* each ``{solution-start}`` ... ``{solution-end}`` block, with the code cells between
  (sphinx-exercise merges them into one solution node first; this runs after it), and
  any single ``{solution}`` directive;
* any code cell tagged ``solution`` outside such a block;
* the master notebooks (``_sources/**.ipynb``) and the links to them: the download
  menu keeps the student edition.

The notebooks still execute with their solutions (the build is their test); only the
pages leave them out. The exercises, their stubs and their check cells stay.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform

ENV = "ATTNLAB_SITE_SOLUTIONS"


def solutions_hidden() -> bool:
    return os.environ.get(ENV, "1").strip().lower() in ("0", "no", "false", "off")


class DropSolutions(SphinxTransform):
    """Remove every solution node (after sphinx-exercise's MergeGatedSolutions, 10)."""

    default_priority = 20

    def apply(self) -> None:
        from sphinx_exercise.nodes import (
            solution_end_node,
            solution_node,
            solution_start_node,
        )

        kinds = (solution_node, solution_start_node, solution_end_node)
        for node in list(self.document.findall(lambda n: isinstance(n, kinds))):
            node.parent.remove(node)
        for node in list(self.document.findall(nodes.Element)):
            if "tag_solution" in node.get("classes", ()) and node.parent is not None:
                node.parent.remove(node)


_MASTER_LINK = re.compile(
    r'<li>\s*<a href="[^"]*_sources/[^"]*\.ipynb"[^>]*>.*?</a>\s*</li>\s*', re.S
)


def drop_master_notebooks(app: Sphinx, exception: Exception | None) -> None:
    out = Path(app.outdir)
    sources = out / "_sources"
    for nb in sources.rglob("*.ipynb") if sources.is_dir() else []:
        nb.unlink()
    for page in out.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        new = _MASTER_LINK.sub("", text)
        if new != text:
            page.write_text(new, encoding="utf-8")


def setup(app: Sphinx) -> dict:
    if solutions_hidden():
        app.add_transform(DropSolutions)
        # before the polish (tools/site_polish.py, priority 100) reads the pages
        app.connect("build-finished", drop_master_notebooks, priority=50)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
