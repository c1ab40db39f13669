"""The published student edition: ``student/`` holds exactly what tools/student.py
makes of ``chapters/`` (Colab opens it from the repository, so it is committed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tools import student  # noqa: E402

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
