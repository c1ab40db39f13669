"""The exercises of a chapter notebook, read from its cells.

A chapter's exercise follows one layout (CONTRIBUTING.md, "Exercises"):

1. a markdown cell with a sphinx-exercise box (```` ```{exercise} Title ```` with
   ``:label: ex-...``; in a notebook edition rendered as plain markdown, the box is
   listed in the cell's metadata ``attnlab.exercise_box``);
2. cells the student works in (the stub ends in ``raise NotImplementedError``);
3. the solution: cells tagged ``solution`` (dropped from the student edition);
4. one or more **check cells**: code cells, not tagged ``solution``, that call
   ``attnlab.check.<name>(...)``.

Every cell from an exercise box up to the next box belongs to that exercise, so the
grader and the instructor page key on this structure, not on the prose. A cell may also
name its exercise explicitly with the metadata ``{"attnlab": {"exercise": "ex-..."}}``.

Optional classes on the box describe it for instructors (``:class: kind-predict
minutes-20``): ``kind-implement``, ``kind-predict`` (predict, then measure),
``kind-transfer`` (to a case the page did not show), and ``minutes-N`` (the author's
time estimate). Without them, :func:`kinds` and :func:`minutes` infer a value and say so.

Works on plain notebook dicts (``json.load``) or nbformat nodes; no Jupyter import.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

__all__ = [
    "Exercise",
    "KINDS",
    "check_calls",
    "cell_source",
    "chapter_label",
    "chapter_number",
    "find_exercises",
    "is_check_cell",
    "is_solution",
    "kinds",
    "minutes",
    "normalise",
]

SOLUTION_TAG = "solution"

# ```{exercise} Title   |   :::{exercise} Title   |   ```{exercise-start} Title
_BOX = re.compile(r"^(`{3,}|:{3,})\{exercise(?:-start)?\}[ \t]*(.*)$", re.M)
_OPTION = re.compile(r"^:(\w+):[ \t]*(.*)$")
_CHECK_CALL = re.compile(r"\battnlab\.check\.([A-Za-z_][\w.]*)\s*\(")
_TITLE = re.compile(r"^#\s+(\d+)([a-z]?)\.\s", re.M)

KINDS = {
    "implement": "implement",
    "predict": "predict, then measure",
    "transfer": "transfer",
    "written": "written (a derivation, no code)",
}


def cell_source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def normalise(source: str) -> str:
    """A cell's source with trailing spaces and surrounding blank lines removed."""
    return "\n".join(line.rstrip() for line in source.strip("\n").splitlines()).strip()


def is_solution(cell) -> bool:
    return SOLUTION_TAG in cell.get("metadata", {}).get("tags", [])


def check_calls(cell) -> list[str]:
    """The check names a code cell calls (``attnlab.check.NAME(``), in order."""
    if cell.get("cell_type") != "code":
        return []
    return _CHECK_CALL.findall(cell_source(cell))


def is_check_cell(cell) -> bool:
    """A published check cell: code that calls ``attnlab.check.*`` and is no solution."""
    return bool(check_calls(cell)) and not is_solution(cell)


def chapter_number(nb) -> int | None:
    """The number in the chapter's title cell (``# 2. The attention recipe``; both
    halves of a chapter in two, ``# 7a. ...`` and ``# 7b. ...``, give 7)."""
    label = chapter_label(nb)
    return int(label.rstrip("abcdefghijklmnopqrstuvwxyz")) if label else None


def chapter_label(nb) -> str | None:
    """The number in the chapter's title cell with its letter, if any: "2", "7a"."""
    for cell in nb["cells"][:4]:
        if cell.get("cell_type") == "markdown":
            m = _TITLE.search(cell_source(cell))
            if m:
                return m.group(1) + m.group(2)
    return None


@dataclass
class Exercise:
    """One exercise box and the cells that belong to it (indices into the notebook)."""

    label: str  # the sphinx-exercise label, e.g. "ex-recipe-additive"
    title: str  # the box's title
    number: str  # "2.1" or "7a.1": chapter number and position in the chapter
    box_cell: int  # the markdown cell holding the box
    text: str  # the box's body (the task as the student reads it)
    classes: list[str] = field(default_factory=list)  # the box's :class: option
    check_cells: list[int] = field(default_factory=list)
    solution_cells: list[int] = field(default_factory=list)
    work_cells: list[int] = field(default_factory=list)  # the student's code cells
    checks: list[str] = field(default_factory=list)  # names after ``attnlab.check.``
    # markdown cells after the box (not solutions): where written answers go
    answer_cells: list[int] = field(default_factory=list)


def _boxes(text: str) -> list[tuple[str, str, str, list[str]]]:
    """(label, title, body, classes) of each exercise box in a markdown text."""
    out = []
    for m in _BOX.finditer(text):
        fence = m.group(1)
        rest = text[m.end() :].splitlines()[1:]
        label, classes, body = "", [], []
        in_options = True
        for line in rest:
            bare = line.strip()
            if bare and set(bare) == {fence[0]} and len(bare) >= len(fence):
                break  # the box's closing fence (a nested ``` block is shorter)
            opt = _OPTION.match(line) if in_options else None
            if opt:
                if opt.group(1) == "label":
                    label = opt.group(2).strip()
                elif opt.group(1) == "class":
                    classes = opt.group(2).split()
                continue
            in_options = False
            body.append(line)
        out.append((label, m.group(2).strip(), "\n".join(body).strip(), classes))
    return out


def _rendered_boxes(cell) -> list[tuple[str, str, str, list[str]]]:
    """Boxes of a notebook edition rendered as plain markdown (tools/editions.py keeps
    them in the cell's metadata: ``attnlab.exercise_box``)."""
    meta = cell.get("metadata", {}).get("attnlab", {}).get("exercise_box") or []
    text = cell_source(cell)
    return [
        (
            str(b.get("label", "")),
            str(b.get("title", "")),
            text,
            [str(c) for c in b.get("classes", [])],
        )
        for b in meta
        if isinstance(b, dict)
    ]


def find_exercises(nb) -> list[Exercise]:
    """Every exercise of a notebook, in page order, with the cells that belong to it.

    A cell belongs to the last exercise box above it (or to the exercise its
    ``attnlab.exercise`` metadata names); cells above the first box belong to none.
    """
    chapter = chapter_label(nb)
    exercises: list[Exercise] = []
    by_label: dict[str, Exercise] = {}
    current: Exercise | None = None
    for i, cell in enumerate(nb["cells"]):
        if cell.get("cell_type") == "markdown" and not is_solution(cell):
            boxes = _boxes(cell_source(cell)) or _rendered_boxes(cell)
            if not boxes and current is not None:
                named = cell.get("metadata", {}).get("attnlab", {}).get("exercise")
                by_label.get(named, current).answer_cells.append(i)
            for label, title, body, classes in boxes:
                n = len(exercises) + 1
                ex = Exercise(
                    label=label or f"exercise-{n}",
                    title=title,
                    number=f"{chapter}.{n}" if chapter is not None else str(n),
                    box_cell=i,
                    text=body,
                    classes=classes,
                )
                exercises.append(ex)
                by_label[ex.label] = ex
                current = ex
            continue
        named = cell.get("metadata", {}).get("attnlab", {}).get("exercise")
        owner = by_label.get(named, current) if named else current
        if owner is None or cell.get("cell_type") != "code":
            continue
        if is_solution(cell):
            owner.solution_cells.append(i)
        elif is_check_cell(cell):
            owner.check_cells.append(i)
            owner.checks += check_calls(cell)
        else:
            owner.work_cells.append(i)
    return exercises


def kinds(ex: Exercise) -> tuple[list[str], bool]:
    """The exercise's kinds (keys of :data:`KINDS`) and whether they were inferred.

    Declared with ``:class: kind-...``; otherwise read from the task's words: "predict"
    makes it predict-then-measure, "transfer"/"the page did not show" a transfer, and
    an exercise that is neither is an implementation.
    """
    declared = [c[5:] for c in ex.classes if c.startswith("kind-") and c[5:] in KINDS]
    if declared:
        return declared, False
    text = f"{ex.title}\n{ex.text}".lower()
    found = []
    if re.search(r"\bpredict", text):
        found.append("predict")
    if re.search(r"\btransfer|did not show|not shown on (this|the) page", text):
        found.append("transfer")
    return found or ["implement"], True


# The rule of thumb for exercises whose author declared no time (shown on the
# instructors' page, which a test keeps in step with these numbers).
WORDS_PER_MINUTE = 200  # reading the task
KIND_MINUTES = {"implement": 10, "predict": 15, "transfer": 20, "written": 15}
RUN_MINUTES = 1  # running the solution and the check
TRAIN_MINUTES = 5  # more when the solution trains a model
_TRAINS = re.compile(r"\bfit\(|\.backward\(|\.step\(\)")


def minutes(ex: Exercise, nb) -> tuple[int, bool]:
    """A time estimate in minutes and whether it was estimated (not the author's).

    Declared with ``:class: minutes-N``. Otherwise the rule of thumb of the instructors'
    page: the task's words at :data:`WORDS_PER_MINUTE`, plus the minutes of its kind
    (:data:`KIND_MINUTES`, the largest if it has several; ``written`` when it has no
    code), plus :data:`RUN_MINUTES` to run it, or :data:`TRAIN_MINUTES` when the
    solution trains a model; rounded up to 5 minutes.
    """
    for c in ex.classes:
        if c.startswith("minutes-") and c[8:].isdigit():
            return int(c[8:]), False
    code = [
        cell_source(nb["cells"][i])
        for i in ex.solution_cells + ex.work_cells
        if nb["cells"][i].get("cell_type") == "code"
    ]
    words = len(f"{ex.title} {ex.text}".split())
    kind = (
        max(KIND_MINUTES[k] for k in kinds(ex)[0]) if code else KIND_MINUTES["written"]
    )
    run = TRAIN_MINUTES if any(_TRAINS.search(c) for c in code) else RUN_MINUTES
    if not code:
        run = 0
    estimate = words / WORDS_PER_MINUTE + kind + run
    return int(5 * math.ceil(estimate / 5)), True
