"""The master's code a clean run may execute (a leaf: it imports nothing of the
grader's), packaged in ``masters.json`` by :mod:`attnlab_grade.masters` and run by
:mod:`attnlab_grade.clean`."""

from __future__ import annotations

from attnlab.course.exercises import cell_source, find_exercises, is_solution


def program(master_nb) -> dict:
    """The master's code that a clean run may execute: every code cell that is no
    solution, with the exercise it belongs to (``kind``: chapter, work or check), and
    the index of each exercise's box. Packaged in ``masters.json`` (no solutions)."""
    cells = master_nb["cells"]
    owner: dict[int, tuple[str, str]] = {}
    boxes = {}
    for ex in find_exercises(master_nb):
        boxes.setdefault(ex.label, ex.box_cell)
        for i in ex.work_cells:
            owner[i] = (ex.label, "work")
        for i in ex.check_cells:
            owner[i] = (ex.label, "check")
    out = []
    for i, cell in enumerate(cells):
        src = cell_source(cell)
        if cell.get("cell_type") != "code" or is_solution(cell) or not src.strip():
            continue
        label, kind = owner.get(i, (None, "chapter"))
        out.append({"index": i, "source": src, "exercise": label, "kind": kind})
    return {"cells": out, "boxes": boxes}
