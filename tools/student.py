"""Write or verify the student edition of the chapters.

    python tools/student.py SRC_DIR OUT_DIR     write: drop every cell tagged `solution`,
                                                clear all outputs, render the markdown
                                                as plain Jupyter markdown
    python tools/student.py --verify OUT_DIR    fail if any solution or MyST is left

Instructors keep the master notebooks (chapters/) as the key; students get OUT_DIR. The
published copy is ``student/`` (with ``full/``, written by ``tools/editions.py``);
:func:`student_notebook` is the edition before its markdown is rendered (MyST).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.solutions import (  # noqa: E402  (the transform lives below editions)
    SOLUTION_MARKERS,
    SOLUTION_TAG,
    cell_source,
    is_solution,
    student_notebook,
)

__all__ = ["SOLUTION_MARKERS", "SOLUTION_TAG", "is_solution", "student_notebook"]


def problems(nb: dict, name: str) -> list[str]:
    """Everything in a student notebook that gives a solution away, and any MyST-only
    markup left in its markdown (Colab and Jupyter would show it raw)."""
    from tools.myst_plain import myst_leftovers

    out = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            out += [
                f"{name}: cell {i} holds {x}" for x in myst_leftovers(cell_source(cell))
            ]
        if is_solution(cell):
            out.append(f"{name}: cell {i} is tagged 'solution'")
        text = cell_source(cell)
        for marker in SOLUTION_MARKERS:
            if marker in text:
                out.append(f"{name}: cell {i} contains {marker}")
        if cell["cell_type"] == "code" and (cell.get("outputs") or []):
            out.append(f"{name}: cell {i} has outputs")
    return out


def write(src: Path, out: Path) -> list[Path]:
    """The student edition of every notebook in ``src``, rendered, into ``out``.

    Glued values come from the committed snapshot (tools/editions.py); a name missing
    from it is shown as a pointer to the measuring cell here (tests/test_editions.py fails on it
    for the published copy)."""
    from tools import editions  # editions imports tools.solutions, never this module

    out.mkdir(parents=True, exist_ok=True)
    renderer = editions.Renderer(src, missing_glue="mark")
    written = []
    for path in sorted(src.glob("*.ipynb")):
        nb = renderer.masters[path.stem]
        n_solutions = sum(is_solution(c) for c in nb["cells"])
        target = out / path.name
        editions.write_if_changed(
            target, editions.dumps(renderer.render(path.stem, "student"))
        )
        written.append(target)
        print(f"{target}: removed {n_solutions} solution cells")
    for name in renderer.missing:
        print(
            f"warning: no glued value for {name} in glue-snapshot.json (make editions)"
        )
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
