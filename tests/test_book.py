"""The book's structure: every notebook listed, set up, stripped, and exercised."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tools import nbtools, student

ROOT = Path(__file__).resolve().parents[1]


NOTEBOOKS = sorted((ROOT / "chapters").glob("*.ipynb"))


def _cells(path):
    return json.loads(path.read_text())["cells"]


def _src(cell):
    s = cell["source"]
    return "".join(s) if isinstance(s, list) else s


def test_there_are_chapters():
    assert NOTEBOOKS, "no notebooks in chapters/"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_listed_in_toc(nb):
    toc = (ROOT / "_toc.yml").read_text()
    assert f"file: chapters/{nb.stem}" in toc, f"{nb.name} is missing from _toc.yml"


def test_toc_lists_only_existing_files():
    toc = (ROOT / "_toc.yml").read_text()
    for name in re.findall(r"file:\s*(\S+)", toc):
        found = [
            p for ext in (".md", ".ipynb") if (p := ROOT / f"{name}{ext}").exists()
        ]
        assert found, f"_toc.yml lists {name}, which does not exist"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_starts_with_canonical_setup_cell(nb):
    first = _cells(nb)[0]
    assert _src(first) == nbtools.setup_cell_source()
    assert "remove-cell" in first["metadata"].get("tags", [])


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_title_carries_the_chapter_number(nb):
    number = nb.stem.split("_")[0].lstrip("0")  # "5", or "7a" for a chapter in halves
    title = _src(_cells(nb)[1]).splitlines()[0]
    assert title.startswith(f"# {number}. "), f"{nb.name}: title is {title!r}"


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_skeleton_and_exercises(nb):
    cells = _cells(nb)
    text = "\n".join(_src(c) for c in cells if c["cell_type"] == "markdown")
    for heading in ("## Summary", "## Exercises", "## References"):
        assert heading in text, f"{nb.name} has no '{heading}' section"
    exercises = re.findall(r"```\{exercise\}", text)
    assert len(exercises) >= 3, f"{nb.name} has {len(exercises)} exercises, needs >= 3"
    starts = [c for c in cells if "{solution-start}" in _src(c)]
    assert len(starts) == len(exercises), "every exercise needs one gated solution"
    for c in cells:
        if "{solution-start}" in _src(c) or "{solution-end}" in _src(c):
            assert student.is_solution(c), "solution markers must be tagged 'solution'"
    checks = [
        c for c in cells if "attnlab.check." in _src(c) and c["cell_type"] == "code"
    ]
    from attnlab.course.exercises import find_exercises

    # A written exercise (a derivation graded by hand) has no check cell: its answer is
    # a markdown cell and its worked solution is markdown only.
    written = [ex for ex in find_exercises({"cells": cells}) if not ex.check_cells]
    for ex in written:  # no code at all: not a coding exercise that lost its check
        code = ex.solution_cells + ex.work_cells
        assert not code, f"{nb.name}: {ex.label} has code but no check cell"
        assert ex.answer_cells, f"{nb.name}: {ex.label} has no cell for the answer"
    assert len(written) <= 1, f"{nb.name}: more than one exercise without a check"
    assert len(checks) >= len(exercises) - len(written), (
        f"{nb.name}: an exercise has no check cell"
    )


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_stripped(nb):
    for c in _cells(nb):
        if c["cell_type"] == "code":
            assert not c.get("outputs") and c.get("execution_count") is None


def test_student_edition_has_no_solution(tmp_path):
    written = student.write(ROOT / "chapters", tmp_path)
    assert len(written) == len(NOTEBOOKS)
    assert student.verify(tmp_path) == []
    for path in written:
        cells = json.loads(path.read_text())["cells"]
        assert any("raise NotImplementedError" in _src(c) for c in cells)


def test_student_verify_catches_a_left_solution(tmp_path):
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "metadata": {"tags": ["solution"]},
                "source": "x=1",
                "outputs": [],
                "execution_count": None,
            }
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (tmp_path / "a.ipynb").write_text(json.dumps(nb))
    assert student.verify(tmp_path), "a solution cell went unnoticed"


def test_old_chapter_7_url_redirects_to_7a():
    """Chapter 7 was split into 7a and 7b: its old URL still leads to 7a (a static page
    copied to the site by html_extra_path)."""
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    extra = config["sphinx"]["config"]["html_extra_path"]
    assert "_redirects" in extra
    page = (ROOT / "_redirects/chapters/07_transformer.html").read_text()
    assert 'http-equiv="refresh" content="0; url=07a_transformer.html"' in page
    assert '<html lang="en">' in page and "<title>" in page
    toc = (ROOT / "_toc.yml").read_text()
    for target in re.findall(r'href="([^"]+)\.html"', page):
        assert f"chapters/{target}" in toc, (
            f"the redirect links to {target}, not in the toc"
        )
    assert not (ROOT / "chapters/07_transformer.ipynb").exists()


def _section_ids(nb: Path) -> set[str]:
    """The ids Sphinx gives the notebook's headings (docutils' make_id of the text)."""
    from docutils.nodes import make_id

    ids = set()
    for cell in json.loads(nb.read_text())["cells"]:
        if cell["cell_type"] == "markdown":
            src = "".join(cell["source"])
            ids |= {make_id(h) for h in re.findall(r"^#{1,6}\s+(.*)$", src, re.M)}
    return ids


def test_old_chapter_7_deep_links_keep_their_fragment():
    """07_transformer.html#<section> lands on that section: in 7b for the sections that
    moved there (every 7b section not also in 7a), in 7a for the rest, #fragment kept."""
    page = (ROOT / "_redirects/chapters/07_transformer.html").read_text()
    script = re.search(r"var to7b = \[(.*?)\];", page, re.S)
    assert script, "the redirect has no list of 7b's sections"
    listed = set(re.findall(r'"([^"]+)"', script.group(1)))
    ids_7a = _section_ids(ROOT / "chapters/07a_transformer.ipynb")
    ids_7b = _section_ids(ROOT / "chapters/07b_transformer_training.ipynb")
    assert listed == ids_7b - ids_7a, listed ^ (ids_7b - ids_7a)
    assert "location.replace(page + location.hash)" in page
