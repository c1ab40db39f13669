"""Sphinx extension: the site build is the master notebooks' execution test.

Loaded by ``_config.yml`` (``sphinx.local_extensions``). After the build it prints, for
each notebook myst-nb executed, its kernel's CPU time and the wall time, and fails the
build (an error, so the build exits non-zero) if any kernel used more than
``ATTNLAB_NB_BUDGET`` CPU seconds (default 90) in the reference machine's seconds, as
``tools/nbbudget.py`` does for the nbval runs: its CPU seconds divided by the load factor
that a yardstick measured beside it gives (``tools/kernel_cpu.py``: why CPU time, and
why a yardstick, so that a busy machine cannot fail the build). Notebooks taken from the
cache (not executed in this build) are listed as such.

A notebook is executed while Sphinx parses it, between the ``source-read`` and
``doctree-read`` events of that document, and its kernel is shut down and reaped before
parsing ends; the change in the children's CPU time between the two events is that
kernel's CPU time.
"""

from __future__ import annotations

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError

from tools.kernel_cpu import LoadMeter, budget, children_cpu, verdict

_cpu_start: dict[str, tuple[float, LoadMeter]] = {}
_cpu: dict[str, tuple[float, float]] = {}  # doc -> (kernel CPU s, load factor)


def _is_notebook(app: Sphinx, docname: str) -> bool:
    return app.env.doc2path(docname, False).endswith(".ipynb")


def _source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    meter = LoadMeter() if _is_notebook(app, docname) else None
    if meter is not None:
        meter.start()
    _cpu_start[docname] = (children_cpu(), meter)  # type: ignore[assignment]


def _doctree_read(app: Sphinx, doctree) -> None:
    doc = app.env.docname
    if doc in _cpu_start:
        cpu0, meter = _cpu_start.pop(doc)
        cpu = children_cpu() - cpu0
        _cpu[doc] = (cpu, meter.stop() if meter is not None else 1.0)


def report(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None:
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    rows = []
    for doc in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, doc)
        if data:
            wall = float(data.get("runtime") or 0.0)
            cpu, load = _cpu.get(doc, (0.0, 1.0))
            rows.append((doc, data.get("method"), cpu, load, wall))
    if not rows:
        return
    limit = budget()
    print(
        f"\nnotebook kernel CPU time and wall time in the site build (budget "
        f"{limit:g} CPU s each, after dividing by the load factor: tools/kernel_cpu.py)"
    )
    over = []
    for doc, method, cpu, load, wall in rows:
        scaled, ok = verdict(cpu, load)
        flag = "ok" if ok else "OVER BUDGET"
        if not ok:
            over.append(doc)
        print(
            f"{cpu:7.1f} CPU s {wall:7.1f} s wall  load x{load:4.2f} -> {scaled:5.1f} "
            f"{flag:11s} {doc}  ({method})"
        )
    print(f"{sum(r[2] for r in rows):7.1f} CPU s total")
    if over:
        raise ExtensionError(
            f"notebooks over the {limit:g} CPU-second budget (load-corrected): "
            f"{', '.join(over)}"
        )


def setup(app: Sphinx) -> dict:
    app.connect("source-read", _source_read)
    app.connect("doctree-read", _doctree_read)
    app.connect("build-finished", report)
    return {"parallel_read_safe": False, "parallel_write_safe": True}
