"""What the grader needs from the master notebooks, shipped with the package.

``masters.json`` (package data, next to this file) holds, per chapter notebook:

* ``chapter``: the number in its title;
* ``cells``: a skeleton of the notebook, enough for :func:`attnlab.course.exercises.find_exercises`
  (the title, every exercise box and every published check cell, in page order, with
  their sources) — no solution;
* ``program``: the master's code cells that are no solution (the chapter's code, the
  exercises' stubs and check cells) with the exercise each belongs to, and the index
  of each exercise's box — what a clean run (:mod:`attnlab.grade.clean`) executes
  before a student's answer. No solution is ever in it;
* ``code`` and ``markdown``: SHA-256 digests of the normalised source of every cell
  that is not a solution, so the grader can tell the chapter's own cells (unchanged)
  from a student's.

It is written by ``python -m attnlab.grade.build_masters chapters student`` (rerun it after
changing a chapter or its student edition: a test fails when it is stale), so a grader
installed from a wheel or ``pip install git+...`` grades without a clone.
"""

from __future__ import annotations

import hashlib
import json
from importlib import resources
from pathlib import Path

from attnlab.course.exercises import (
    cell_source,
    chapter_number,
    find_exercises,
    is_solution,
    normalise,
)

from .program import program

DATA = "masters.json"


def digest(source: str) -> str:
    return hashlib.sha256(normalise(source).encode()).hexdigest()[:32]


def skeleton(nb, editions: list | tuple = ()) -> dict:
    """The packaged form of one master notebook (see the module docstring); the
    digests also cover the cells of its ``editions`` (the student edition, whose setup
    cell and rendered markdown differ from the master's; never one with solutions)."""
    cells = nb["cells"]
    keep = set()
    for i, cell in enumerate(cells[:4]):
        if cell.get("cell_type") == "markdown" and cell_source(cell).startswith("# "):
            keep.add(i)
            break
    for ex in find_exercises(nb):
        keep |= {ex.box_cell, *ex.check_cells}
    out = []
    for i in sorted(keep):
        cell = cells[i]
        meta = cell.get("metadata", {})
        small = {"attnlab": meta["attnlab"]} if "attnlab" in meta else {}
        out.append(
            {
                "cell_type": cell["cell_type"],
                "metadata": small,
                "source": cell_source(cell),
            }
        )
    kinds: dict[str, list[str]] = {"code": [], "markdown": []}
    for cell in [c for n in (nb, *editions) for c in n["cells"]]:
        if not is_solution(cell) and cell.get("cell_type") in kinds:
            kinds[cell["cell_type"]].append(digest(cell_source(cell)))
    return {
        "chapter": chapter_number(nb),
        "cells": out,
        "program": program(nb),
        "code": sorted(set(kinds["code"])),
        "markdown": sorted(set(kinds["markdown"])),
    }


def build(folder: Path, editions: list[Path] = ()) -> dict:
    """Skeletons of every notebook in ``folder``, with the digests of the same
    notebook in each edition folder (``student/``)."""
    out = {}
    for p in sorted(Path(folder).glob("*.ipynb")):
        copies = [json.loads((e / p.name).read_text()) for e in editions]
        out[p.name] = skeleton(json.loads(p.read_text()), [c for c in copies if c])
    return out


def load() -> dict:
    """The packaged data ({} when the package was built without it)."""
    try:
        text = resources.files("attnlab_grade").joinpath(DATA).read_text()
    except (FileNotFoundError, OSError):
        return {}
    return json.loads(text)


def as_notebook(entry: dict) -> dict:
    """A skeleton as a notebook dict that :mod:`attnlab.course.exercises` reads."""
    return {"cells": [dict(c, metadata=dict(c["metadata"])) for c in entry["cells"]]}


def write(folder: Path, editions: list[Path] = (), out: Path | None = None) -> Path:
    out = out or Path(__file__).with_name(DATA)
    data = build(folder, editions)
    text = json.dumps(data, indent=0, ensure_ascii=False, sort_keys=True) + "\n"
    if not out.exists() or out.read_text() != text:
        out.write_text(text)
    return out


def editions_of(root: Path) -> list[Path]:
    """The edition folders without solutions that the grader may be handed."""
    return [d for d in [root / "student"] if d.is_dir()]
