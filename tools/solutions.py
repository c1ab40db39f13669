"""The student edition's notebook transform, shared by :mod:`tools.student` (which
writes and verifies the edition) and :mod:`tools.editions` (which renders it): one
module below both, so that neither imports the other in a circle."""

from __future__ import annotations

# One home for the tag and the test on it: the library's exercise reader (the grader
# and the instructor page read the same structure).
from attnlab.course.exercises import SOLUTION_TAG, cell_source, is_solution

__all__ = [
    "SOLUTION_MARKERS",
    "SOLUTION_TAG",
    "cell_source",
    "is_solution",
    "student_notebook",
]

# Text that only belongs inside a solution (the gated sphinx-exercise directives).
SOLUTION_MARKERS = ("{solution-start}", "{solution-end}", "{solution}")


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
