"""Write or verify the student edition of the chapters.

    python tools/student.py SRC_DIR OUT_DIR     write: drop every cell tagged `solution`,
                                                clear all outputs
    python tools/student.py --verify OUT_DIR    fail if any solution is left

Instructors keep the master notebooks (chapters/) as the key; students get OUT_DIR.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

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


def problems(nb: dict, name: str) -> list[str]:
    """Everything in a student notebook that gives a solution away."""
    out = []
    for i, cell in enumerate(nb["cells"]):
        if is_solution(cell):
            out.append(f"{name}: cell {i} is tagged 'solution'")
        text = _source(cell)
        for marker in SOLUTION_MARKERS:
            if marker in text:
                out.append(f"{name}: cell {i} contains {marker}")
        if cell["cell_type"] == "code" and (cell.get("outputs") or []):
            out.append(f"{name}: cell {i} has outputs")
    return out


def write(src: Path, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in sorted(src.glob("*.ipynb")):
        nb = json.loads(path.read_text())
        n_solutions = sum(is_solution(c) for c in nb["cells"])
        target = out / path.name
        text = json.dumps(student_notebook(nb), indent=1, ensure_ascii=False)
        # Only a changed file is rewritten, and atomically: `make book` regenerates the
        # committed student/ while the unit tests may be reading it (make -j2).
        if not target.exists() or target.read_text() != text:
            tmp = target.with_name(f".{target.name}.tmp")
            tmp.write_text(text)
            os.replace(tmp, target)
        written.append(target)
        print(f"{target}: removed {n_solutions} solution cells")
    return written


def verify(out: Path) -> list[str]:
    found = []
    paths = sorted(out.glob("*.ipynb"))
    if not paths:
        found.append(f"{out}: no notebooks (run `make student` first)")
    for path in paths:
        found += problems(json.loads(path.read_text()), path.name)
    return found


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "--verify":
        bad = verify(Path(argv[1]))
        for line in bad:
            print(line)
        if not bad:
            print(f"student edition in {argv[1]}: no solution left")
        return 1 if bad else 0
    if len(argv) == 2:
        write(Path(argv[0]), Path(argv[1]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
