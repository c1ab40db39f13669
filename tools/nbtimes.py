"""Sphinx extension: the site build is the master notebooks' execution test.

Loaded by ``_config.yml`` (``sphinx.local_extensions``). After the build it prints how
long myst-nb took to execute each notebook and fails the build (an error, so the build
exits non-zero) if any took longer than ``ATTNLAB_NB_BUDGET`` seconds (default 90), as
``tools/nbbudget.py`` does for the nbval runs. Notebooks taken from the cache (not
executed in this build) are listed as such.
"""

from __future__ import annotations

import os

from sphinx.application import Sphinx
from sphinx.errors import ExtensionError


def _budget() -> float:
    return float(os.environ.get("ATTNLAB_NB_BUDGET", "90"))


def report(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None:
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    rows = []
    for doc in sorted(app.env.found_docs):
        data = NbMetadataCollector.get_exec_data(app.env, doc)
        if data:
            rows.append((doc, data.get("method"), float(data.get("runtime") or 0.0)))
    if not rows:
        return
    budget = _budget()
    print(f"\nnotebook execution times in the site build (budget {budget:g} s each)")
    over = []
    for doc, method, secs in rows:
        flag = "OVER BUDGET" if secs > budget else "ok"
        if secs > budget:
            over.append(doc)
        print(f"{secs:7.1f} s  {flag:11s} {doc}  ({method})")
    print(f"{sum(s for *_, s in rows):7.1f} s  total")
    if over:
        raise ExtensionError(
            f"notebooks over the {budget:g} s budget: {', '.join(over)}"
        )


def setup(app: Sphinx) -> dict:
    app.connect("build-finished", report)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
