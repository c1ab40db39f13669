"""The published student edition: ``student/`` holds exactly what tools/student.py
makes of ``chapters/`` (Colab opens it from the repository, so it is committed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import student

ROOT = Path(__file__).resolve().parents[1]

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))
STALE = "run `python tools/student.py chapters student` (or `make book`) and commit"


def test_every_chapter_has_a_student_notebook_and_nothing_else():
    published = sorted(p.name for p in (ROOT / "student").glob("*.ipynb"))
    assert published == [p.name for p in CHAPTERS], STALE


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_student_notebook_is_generated_from_its_chapter(chapter):
    expected = json.dumps(
        student.student_notebook(json.loads(chapter.read_text())),
        indent=1,
        ensure_ascii=False,
    )
    path = ROOT / "student" / chapter.name
    assert path.exists(), f"{path.name} is missing: {STALE}"
    assert path.read_text() == expected, f"student/{chapter.name} is stale: {STALE}"


def test_published_student_edition_holds_no_solution():
    assert student.verify(ROOT / "student") == []


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
            {"label": "download-buttons", "buttons": [{"label": "ipynb"}]},
            {"label": "launch-buttons", "buttons": [{"label": "colab"}]},
        ],
    }


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_page_links_its_student_notebook(chapter):
    from tools import student_links

    context = _header()
    student_links.add_buttons(
        _fake_app(), f"chapters/{chapter.stem}", "page.html", context, None
    )
    download, launch = (g["buttons"] for g in context["header_buttons"])
    assert download[1]["url"] == f"../student/{chapter.name}"
    colab = launch[-1]["url"]
    assert colab == (
        "https://colab.research.google.com/github/org/course/blob/main/"
        f"student/{chapter.name}"
    )
    assert (ROOT / "student" / chapter.name).is_file()  # what Colab will open


def test_other_pages_get_no_student_links():
    from tools import student_links

    context = _header()
    student_links.add_buttons(_fake_app(), "bibliography", "page.html", context, None)
    assert context == {**_header(), "pathto": context["pathto"]}
