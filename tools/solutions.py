"""The student edition's notebook transform, shared by :mod:`tools.student` (which
writes and verifies the edition) and :mod:`tools.editions` (which renders it): one
module below both, so that neither imports the other in a circle."""

from __future__ import annotations

SOLUTION_TAG = "solution"
# Text that only belongs inside a solution (the gated sphinx-exercise directives).
SOLUTION_MARKERS = ("{solution-start}", "{solution-end}", "{solution}")


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_solution(cell: dict) -> bool:
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def student_notebook(nb: dict) -> dict:
    """The notebook without solution cells, outputs cleared."""
    cells = []
    for cell in nb["cells"]:
        if is_solution(cell):
            continue
        cell = dict(cell)
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
    return {**nb, "cells": cells}
