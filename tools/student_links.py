"""Publish the student edition with the site: a Sphinx extension (``_config.yml``).

Every chapter page gets two more header buttons, beside the theme's own:

* in the download menu, **.ipynb (student)**: the chapter's student notebook (every
  ``solution`` cell removed, outputs cleared), written into the site at
  ``student/NN_topic.ipynb`` by this extension from the same source the page is built
  from;
* in the launch menu, **Colab (student)**: Colab opens ``student/NN_topic.ipynb`` from
  the repository and branch in ``_config.yml``. Colab can only open a file that exists
  on GitHub, so the student notebooks are committed in ``student/``: ``make book``
  regenerates them (``tools/student.py chapters student``) and
  ``tests/test_student.py`` fails when a committed one differs from what
  ``tools/student.py`` makes of its chapter, so they are never hand-edited or stale.

The browser check (``tools/browser_check.py``) verifies both links on every chapter.
"""

from __future__ import annotations

import json
from pathlib import Path

from tools import student

FOLDER = "student"  # in the repository and in the site


def _chapters(app) -> list[str]:
    """Page names of the chapter notebooks (``chapters/02_attention_recipe``)."""
    src = Path(app.srcdir)
    return sorted(
        str(p.relative_to(src).with_suffix(""))
        for p in (src / "chapters").glob("*.ipynb")
        if str(p.relative_to(src).with_suffix("")) in app.env.found_docs
    )


def write_student_notebooks(app, exception) -> None:
    """After the build: the student edition of every chapter, into the site."""
    if exception is not None or app.builder.format != "html":
        return
    out = Path(app.outdir) / FOLDER
    out.mkdir(parents=True, exist_ok=True)
    for page in _chapters(app):
        nb = json.loads((Path(app.srcdir) / f"{page}.ipynb").read_text())
        target = out / f"{Path(page).name}.ipynb"
        # The same bytes as tools/student.py writes into student/.
        target.write_text(
            json.dumps(student.student_notebook(nb), indent=1, ensure_ascii=False)
        )


def colab_url(app, name: str) -> str | None:
    """Colab's URL for ``student/NAME.ipynb`` in the configured GitHub repository."""
    opts = app.config.html_theme_options
    repo = opts.get("repository_url", "").rstrip("/")
    colab = opts.get("launch_buttons", {}).get("colab_url", "").rstrip("/")
    if "github.com/" not in repo or not colab:
        return None
    org_repo = repo.split("github.com/")[1]
    branch = opts.get("repository_branch", "main")
    return f"{colab}/github/{org_repo}/blob/{branch}/{FOLDER}/{name}.ipynb"


def add_buttons(app, pagename, templatename, context, doctree) -> None:
    """Student buttons in the theme's download and launch menus of a chapter page."""
    if not pagename.startswith("chapters/") or pagename not in _chapters(app):
        return
    name = Path(pagename).name
    groups = {b.get("label"): b for b in context.get("header_buttons", [])}
    if "download-buttons" in groups:
        groups["download-buttons"]["buttons"].insert(
            1,
            {
                "type": "link",
                "url": context["pathto"](f"{FOLDER}/{name}.ipynb", 1),
                "text": ".ipynb (student)",
                "tooltip": "Download the student notebook: exercises without solutions",
                "icon": "fas fa-graduation-cap",
                "label": "download-student-notebook-button",
            },
        )
    url = colab_url(app, name)
    if url and "launch-buttons" in groups:
        groups["launch-buttons"]["buttons"].append(
            {
                "type": "link",
                "text": "Colab (student)",
                "tooltip": "Open the student edition (no solutions) in Colab",
                "icon": "_static/images/logo_colab.png",
                "url": url,
                "label": "launch-colab-student-button",
            }
        )


def setup(app) -> dict:
    # After sphinx-book-theme has built its header buttons (priority 501).
    app.connect("html-page-context", add_buttons, priority=600)
    app.connect("build-finished", write_student_notebooks)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
