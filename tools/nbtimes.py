"""Sphinx extension: the site build is the master notebooks' execution test.

Loaded by ``_config.yml`` (``sphinx.local_extensions``). After the build it prints, for
each notebook myst-nb executed, its kernel's CPU time and the wall time, and fails the
build (an error, so the build exits non-zero) if any kernel used more than
``ATTNLAB_NB_BUDGET`` CPU seconds (default 90), as ``tools/nbbudget.py`` does for the
nbval runs (why CPU time: ``tools/kernel_cpu.py``). Notebooks taken from the cache (not
executed in this build) are listed as such.

A notebook is executed while Sphinx parses it, between the ``source-read`` and
``doctree-read`` events of that document, and its kernel is shut down and reaped before
parsing ends; the change in the children's CPU time between the two events is that
kernel's CPU time.
"""

from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

from tools.kernel_cpu import budget, children_cpu

_cpu_start: dict[str, float] = {}
_cpu: dict[str, float] = {}


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    _cpu_start[docname] = children_cpu()


def _doctree_read(app: Sphinx, doctree) -> None:
    doc = app.env.docname
    if doc in _cpu_start:
        _cpu[doc] = children_cpu() - _cpu_start.pop(doc)


def report(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None:
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    rows = []
    for doc in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, doc)
        if data:
            wall = float(data.get("runtime") or 0.0)
            rows.append((doc, data.get("method"), _cpu.get(doc, 0.0), wall))
    if not rows:
        return
    limit = budget()
    print(
        f"\nnotebook kernel CPU time and wall time in the site build "
        f"(budget {limit:g} CPU s each)"
    )
    over = []
    for doc, method, cpu, wall in rows:
        flag = "OVER BUDGET" if cpu > limit else "ok"
        if cpu > limit:
            over.append(doc)
        print(f"{cpu:7.1f} CPU s {wall:7.1f} s wall  {flag:11s} {doc}  ({method})")
    print(f"{sum(r[2] for r in rows):7.1f} CPU s total")
    if over:
        raise ExtensionError(
            f"notebooks over the {limit:g} CPU-second budget: {', '.join(over)}"
        )


def setup(app: Sphinx) -> dict:
    app.connect("source-read", _source_read)
    app.connect("doctree-read", _doctree_read)
    app.connect("build-finished", report)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
