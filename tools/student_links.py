"""Publish the notebook editions with the site: a Sphinx extension (``_config.yml``).

A chapter page's notebook buttons open the **notebook editions** (tools/editions.py),
never the MyST master, which Colab and Jupyter would show with raw markup:

* the theme's download button **.ipynb** serves ``full/NN_topic.ipynb`` (the whole
  chapter, solutions included, as plain Jupyter markdown, no outputs) and its
  **Colab** button opens the same file in the repository;
* two more buttons: in the download menu **.ipynb (student)**, ``student/NN_topic.ipynb``
  (every ``solution`` cell removed), and in the launch menu **Colab (student)**.

Both editions are copied into the site (``SITE/full/``, ``SITE/student/``) from the
committed files. Colab opens them from the repository and branch in ``_config.yml``, so
they are committed: ``make book`` (and ``make editions``) regenerate them, and
``tests/test_editions.py`` fails when a committed one differs from what
``tools/editions.py`` makes of its chapter, so they are never hand-edited or stale.

The browser check (``tools/browser_check.py``) verifies the student links on every
chapter.
"""

from __future__ import annotations

from pathlib import Path

from tools import editions

FOLDER = "student"  # in the repository and in the site
FULL = "full"  # the full chapter's edition


def _chapters(app) -> list[str]:
    """Page names of the chapter notebooks (``chapters/02_attention_recipe``)."""
    src = Path(app.srcdir)
    return sorted(
        str(p.relative_to(src).with_suffix(""))
        for p in (src / "chapters").glob("*.ipynb")
        if str(p.relative_to(src).with_suffix("")) in app.env.found_docs
    )


def write_student_notebooks(app, exception) -> None:
    """After the build: both notebook editions of every chapter, into the site."""
    if exception is not None or app.builder.format != "html":
        return
    editions.publish(Path(app.outdir))


def colab_url(app, name: str, folder: str = FOLDER) -> str | None:
    """Colab's URL for ``FOLDER/NAME.ipynb`` in the configured GitHub repository."""
    opts = app.config.html_theme_options
    repo = opts.get("repository_url", "").rstrip("/")
    colab = opts.get("launch_buttons", {}).get("colab_url", "").rstrip("/")
    if "github.com/" not in repo or not colab:
        return None
    org_repo = repo.split("github.com/")[1]
    branch = opts.get("repository_branch", "main")
    return f"{colab}/github/{org_repo}/blob/{branch}/{folder}/{name}.ipynb"


def add_buttons(app, pagename, templatename, context, doctree) -> None:
    """Student buttons in the theme's download and launch menus of a chapter page."""
    if not pagename.startswith("chapters/") or pagename not in _chapters(app):
        return
    name = Path(pagename).name
    groups = {b.get("label"): b for b in context.get("header_buttons", [])}
    if "download-buttons" in groups:
        for button in groups["download-buttons"]["buttons"]:
            if button.get("label") in (
                "download-source-button",
                "download-notebook-button",
            ):
                button["url"] = context["pathto"](f"{FULL}/{name}.ipynb", 1)
                button["text"] = ".ipynb"
                button["tooltip"] = (
                    "Download the notebook (plain Jupyter, solutions included)"
                )
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
        for button in groups["launch-buttons"]["buttons"]:
            if button.get("text") == "Colab":  # the theme's: the full chapter
                button["url"] = colab_url(app, name, FULL)
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
