"""Grade students' notebooks: ``python -m attnlab.grade SUBMISSION.ipynb [...]``.

For each submission the grader

1. finds its master notebook (same file name, else the chapter number in its title, in
   the repository's ``chapters/`` or ``--master``) and checks its integrity: every
   exercise box is there and every published check cell is there, unedited, under its
   exercise. A notebook whose checks were edited is **refused** (reported, not run);
2. executes it top to bottom in a fresh kernel with nbclient, with time limits per
   cell (a short one for the exercises' cells: an infinite loop is interrupted and costs
   its exercise; a longer one for the chapter's own cells) and for the whole notebook;
   a cell that raises, or even kills the kernel, costs its exercise and grading goes on
   (after a dead kernel a new one re-runs the cells that had succeeded);
3. runs every published check in strict mode (``ATTNLAB_STRICT=1``, with
   ``attnlab.check`` freshly imported, so a student cannot switch strict mode off or
   replace a check); the student's own cells run as they did for the student (not
   strict);
4. writes a per-exercise report, ``NAME.grade.json`` and a readable ``NAME.grade.txt``,
   next to the submission (or in ``--out``): **passed**, **failed** (with the check's
   message), **not attempted** (the stub still raises ``NotImplementedError``),
   **errored** (a cell of the exercise raised, or the kernel died) or **timed out**.

Which exercise a cell belongs to comes from the notebook's structure
(:mod:`attnlab.exercises`): the exercise box above it, or its ``attnlab.exercise``
metadata.

Why nbclient and not nbgrader or otter-grader: our exercises already carry their own
structure (sphinx-exercise boxes, ``solution`` tags, ``attnlab.check`` cells), and both
would need a second, parallel markup (nbgrader's cell metadata and database, otter's
assignment format) kept in sync with it. nbclient is the execution engine underneath
both (and Jupyter Book); this module adds only the mapping from cells to exercises, the
integrity check and the report. Code running in the kernel can still cheat with enough
effort (it runs in the same process as the checks): read reports of surprising scores
with the executed notebook (``--save-executed``) at hand.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
import warnings
from pathlib import Path

from ..exercises import (
    Exercise,
    cell_source,
    chapter_number,
    find_exercises,
    normalise,
)
from .report import STATUSES, ExerciseResult, Report
from .runner import CellRun, Runner, sliced_zmq_polls

__all__ = [
    "STATUSES",
    "ExerciseResult",
    "GradeError",
    "Report",
    "find_master",
    "grade",
    "integrity_problems",
    "main",
]

MARKS = {"✅": "passed", "❌": "failed", "⏳": "not attempted"}


class GradeError(Exception):
    """A submission that cannot be graded at all (unreadable, no master found)."""


# ------------------------------------------------------------------ integrity


def integrity_problems(sub, master) -> tuple[list[str], dict[str, list[int]]]:
    """Compare the submission's check cells with the master's (the published ones).

    Returns the problems found and, per exercise label, the submission's cells that
    hold its published checks (matched by their normalised source; when a student
    repeated a check cell, the last copy counts and the others are their own cells).
    """
    problems: list[str] = []
    mapping: dict[str, list[int]] = {}
    sub_ex = {e.label: e for e in find_exercises(sub)}
    for ex in find_exercises(master):
        published = [normalise(cell_source(master["cells"][i])) for i in ex.check_cells]
        if not published:
            continue
        mine = sub_ex.get(ex.label)
        name = f"Exercise {ex.number} ({ex.label})"
        if mine is None:
            problems.append(f"{name}: its exercise box is missing")
            continue
        found, candidates = [], list(mine.check_cells)
        for src in published:
            hits = [
                i for i in candidates if normalise(cell_source(sub["cells"][i])) == src
            ]
            if hits:
                found.append(hits[-1])
                candidates = [i for i in candidates if i > hits[-1]]
            else:
                near = [
                    normalise(cell_source(sub["cells"][i])) for i in mine.check_cells
                ]
                seen = f"; found {near!r}" if near else ""
                problems.append(
                    f"{name}: the check cell {src!r} was edited or removed (or the "
                    f"notebook is from another version of the course){seen}"
                )
        mapping[ex.label] = found
    return problems, mapping


# ------------------------------------------------------------------ masters


def default_masters() -> Path:
    """The repository's chapters/ (editable install), else ./chapters."""
    repo = Path(__file__).resolve().parents[2] / "chapters"
    return repo if repo.is_dir() else Path.cwd() / "chapters"


def find_master(sub, sub_path: Path, master: Path | None = None) -> Path:
    """The master notebook of a submission: ``master`` itself if it is a file, else the
    notebook of the same name, else the one with the chapter number of the title."""
    if master is not None and master.is_file():
        return master
    folder = master or default_masters()
    same = folder / sub_path.name
    if same.is_file():
        return same
    n = chapter_number(sub)
    if n is not None:
        hits = sorted(folder.glob(f"{n:02d}_*.ipynb"))
        if len(hits) == 1:
            return hits[0]
    raise GradeError(
        f"{sub_path}: cannot tell which chapter this is (no {sub_path.name} in "
        f"{folder}, title number {n}); pass --master"
    )


def _check_outcome(run: CellRun) -> tuple[str, str]:
    """(status, message) of a published check cell's run."""
    if run.status == "timeout":
        return "timed out", f"the check {run.detail}"
    if run.status == "not run":
        return "timed out", f"not run: {run.detail}"
    if run.status == "dead":
        return "errored", "the kernel died while the check ran"
    marks = [
        line.strip()
        for line in run.text.splitlines()
        if line.strip()[:1] in MARKS and ": " in line
    ]
    if run.status == "error" and not run.detail.startswith("CheckFailed: "):
        return "errored", f"the check raised {run.detail}"
    if not marks:
        return "errored", "the check printed no result"
    line = marks[-1]
    return MARKS[line[0]], line[1:].strip()


def _where(nb, i: int) -> str:
    """A cell as an instructor finds it: its index and its first line of code."""
    first = next((ln for ln in cell_source(nb.cells[i]).splitlines() if ln.strip()), "")
    first = first if len(first) <= 40 else first[:39] + "…"
    return f"cell {i} ({first.strip()})"


def _exercise_result(nb, ex: Exercise, checks: list[int], runs: dict) -> ExerciseResult:
    own = sorted(set(ex.work_cells + ex.solution_cells + ex.check_cells) - set(checks))
    seconds = sum(runs[i].seconds for i in own + checks if i in runs)
    outcomes = [_check_outcome(runs[i]) for i in checks]
    result = ExerciseResult(ex.number, ex.label, ex.title, ex.checks, "", "", seconds)
    if not checks:  # (integrity_problems maps only exercises that have checks)
        result.status, result.message = "errored", "no published check for it"
        return result
    if all(s == "passed" for s, _ in outcomes):
        result.status = "passed"
        result.message = "; ".join(m for _, m in outcomes)
        return result
    bad = [(i, runs[i]) for i in own if i in runs and runs[i].status != "ok"]
    for kind, status in (("timeout", "timed out"), ("dead", "errored")):
        hit = [(i, r) for i, r in bad if r.status == kind]
        if hit:
            i, r = hit[0]
            result.status, result.message = status, f"{_where(nb, i)} {r.detail}"
            return result
    errors = [(i, r) for i, r in bad if r.status == "error"]
    if errors:
        i, r = errors[0]
        result.status = "errored"
        result.message = f"{_where(nb, i)} raised {r.detail}"
        return result
    for status in ("timed out", "errored", "failed"):
        hit = [m for s, m in outcomes if s == status]
        if hit:
            result.status, result.message = status, hit[0]
            return result
    if all(s == "not attempted" for s, _ in outcomes):
        result.status, result.message = "not attempted", outcomes[0][1]
    else:  # some checks passed, others not attempted
        result.status = "failed"
        result.message = next(m for s, m in outcomes if s == "not attempted")
    return result


def _read(path: Path):
    import nbformat

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return nbformat.read(str(path), as_version=4)
    except Exception as err:
        raise GradeError(f"{path}: not a readable notebook ({err})") from err


def grade(
    path: str | Path,
    master: str | Path | None = None,
    cell_timeout: float = 300.0,
    exercise_timeout: float = 60.0,
    time_limit: float = 900.0,
    kernel: str = "python3",
    executed: str | Path | None = None,
) -> Report:
    """Grade one submission; see the module docstring. Raises :class:`GradeError` only
    when it cannot be graded at all (unreadable, or no master found)."""
    path = Path(path)
    sub = _read(path)
    master_path = find_master(sub, path, Path(master) if master else None)
    master_nb = _read(master_path)
    problems, mapping = integrity_problems(sub, master_nb)
    report = Report(
        str(path),
        str(master_path),
        "refused" if problems else "graded",
        problems,
        cell_timeout=cell_timeout,
        exercise_timeout=exercise_timeout,
        time_limit=time_limit,
    )
    if problems:
        return report
    exercises = find_exercises(sub)
    strict = {i for cells in mapping.values() for i in cells}
    owner = {}
    for ex in exercises:
        for i in ex.work_cells + ex.solution_cells + ex.check_cells:
            owner[i] = ex
    start = time.monotonic()
    runner = Runner(sub, path, kernel, cell_timeout, time_limit)
    runs: dict[int, CellRun] = {}
    with sliced_zmq_polls():
        try:
            for i, cell in enumerate(sub.cells):
                if cell.cell_type != "code" or not cell_source(cell).strip():
                    continue
                limit = exercise_timeout if i in owner else cell_timeout
                runs[i] = run = runner.run(i, strict=i in strict, timeout=limit)
                if i not in owner and run.status != "ok":
                    report.notes.append(
                        f"{_where(sub, i)}, outside the exercises: {run.detail}"
                    )
        finally:
            runner.stop()
    report.notes += runner.notes
    report.seconds = time.monotonic() - start
    for ex in exercises:
        if ex.label in mapping:
            report.exercises.append(_exercise_result(sub, ex, mapping[ex.label], runs))
    if executed:
        import nbformat

        nbformat.write(sub, str(executed))
    return report


# ------------------------------------------------------------------ command line


def _write(report: Report, out: Path) -> tuple[Path, Path]:
    stem = Path(report.submission).stem
    out.mkdir(parents=True, exist_ok=True)
    j, t = out / f"{stem}.grade.json", out / f"{stem}.grade.txt"
    j.write_text(json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n")
    t.write_text(report.to_text())
    return j, t


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m attnlab.grade",
        description="Execute students' notebooks and grade their exercises.",
    )
    p.add_argument("submissions", nargs="+", type=Path, help="student .ipynb files")
    p.add_argument(
        "--master",
        type=Path,
        help="the master notebook, or a folder of them (default: the repository's "
        "chapters/)",
    )
    p.add_argument(
        "--exercise-timeout",
        type=float,
        default=60.0,
        help="seconds per cell of an exercise (the student's cells and its check)",
    )
    p.add_argument(
        "--cell-timeout",
        type=float,
        default=300.0,
        help="seconds per other cell (the chapter's own code)",
    )
    p.add_argument(
        "--time-limit", type=float, default=900.0, help="seconds per notebook"
    )
    p.add_argument("--kernel", default="python3", help="Jupyter kernel name")
    p.add_argument(
        "--out", type=Path, help="folder for the reports (default: beside each file)"
    )
    p.add_argument("--csv", type=Path, help="also write one gradebook row per file")
    p.add_argument(
        "--save-executed",
        action="store_true",
        help="also write the executed notebook, NAME.graded.ipynb",
    )
    args = p.parse_args(argv)
    refused, rows = 0, []
    for sub in args.submissions:
        out = args.out or sub.parent
        try:
            report = grade(
                sub,
                master=args.master,
                cell_timeout=args.cell_timeout,
                exercise_timeout=args.exercise_timeout,
                time_limit=args.time_limit,
                kernel=args.kernel,
                executed=out / f"{sub.stem}.graded.ipynb"
                if args.save_executed
                else None,
            )
        except GradeError as err:
            print(f"error: {err}", file=sys.stderr)
            refused += 1
            rows.append({"submission": str(sub), "status": f"error: {err}"})
            continue
        j, t = _write(report, out)
        print(report.to_text(), end="")
        print(f"report: {j} and {t}\n")
        refused += report.status == "refused"
        row = {
            "submission": str(sub),
            "status": report.status,
            "passed": report.passed,
            "total": report.total,
        }
        row.update({e.number: e.status for e in report.exercises})
        rows.append(row)
    if args.csv:
        keys = list(dict.fromkeys(k for r in rows for k in r))
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        print(f"gradebook: {args.csv}")
    return 1 if refused else 0
