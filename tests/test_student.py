"""The published notebook editions: ``student/`` and ``full/`` hold exactly what
tools/editions.py makes of ``chapters/`` (Colab opens them from the repository, so they
are committed), and every chapter page links them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import student

ROOT = Path(__file__).resolve().parents[1]

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
STALE = "run `make editions` (or `make book`) and commit"


@pytest.mark.parametrize("folder", ["student", "full"])
def test_every_chapter_has_an_edition_and_nothing_else(folder):
    published = sorted(p.name for p in (ROOT / folder).glob("*.ipynb"))
    assert published == [p.name for p in CHAPTERS], STALE


def test_published_student_edition_holds_no_solution():
    assert student.verify(ROOT / "student") == []


def test_student_edition_keeps_every_code_cell_but_the_solutions():
    """The grader matches check cells by their source: editions copy code cells as they
    are (the first cell, the install cell, aside)."""
    for chapter in CHAPTERS:
        master = json.loads(chapter.read_text())
        edition = json.loads((ROOT / "student" / chapter.name).read_text())
        want = [
            c["source"]
            for c in master["cells"][1:]
            if c["cell_type"] == "code" and not student.is_solution(c)
        ]
        got = [c["source"] for c in edition["cells"][1:] if c["cell_type"] == "code"]
        assert got == want, chapter.name


def _fake_app():
    from types import SimpleNamespace

    options = {
        "repository_url": "https://github.com/org/course",
        "repository_branch": "main",
        "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    }
    return SimpleNamespace(
        config=SimpleNamespace(html_theme_options=options),
        srcdir=str(ROOT),
        env=SimpleNamespace(found_docs={f"chapters/{p.stem}" for p in CHAPTERS}),
    )


def _header():
    return {
        "pathto": lambda path, flag: "../" + path,
        "header_buttons": [
            {
                "label": "download-buttons",
                "buttons": [
                    {"label": "download-source-button", "url": "../_sources/x.ipynb"},
                    {"label": "download-pdf-button"},
                ],
            },
            {
                "label": "launch-buttons",
                "buttons": [{"text": "Colab", "url": "https://colab/chapters/x.ipynb"}],
            },
        ],
    }


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_page_links_its_notebook_editions(chapter):
    from tools import student_links

    context = _header()
    student_links.add_buttons(
        _fake_app(), f"chapters/{chapter.stem}", "page.html", context, None
    )
    download, launch = (g["buttons"] for g in context["header_buttons"])
    # the theme's .ipynb download and Colab buttons: the full edition, never the master
    assert download[0]["url"] == f"../full/{chapter.name}"
    assert download[1]["url"] == f"../student/{chapter.name}"
    colab = "https://colab.research.google.com/github/org/course/blob/main/"
    assert launch[0]["url"] == f"{colab}full/{chapter.name}"
    assert launch[-1]["url"] == f"{colab}student/{chapter.name}"
    for folder in ("full", "student"):  # what Colab will open
        assert (ROOT / folder / chapter.name).is_file()


def test_other_pages_get_no_student_links():
    from tools import student_links

    context = _header()
    student_links.add_buttons(_fake_app(), "bibliography", "page.html", context, None)
    assert context == {**_header(), "pathto": context["pathto"]}


def test_site_gets_both_editions(tmp_path):
    from tools import editions

    editions.publish(tmp_path)
    for folder in ("full", "student"):
        assert sorted(p.name for p in (tmp_path / folder).glob("*.ipynb")) == [
            p.name for p in CHAPTERS
        ]
