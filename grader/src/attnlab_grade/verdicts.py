"""Grading one notebook: run it in a fresh kernel, replay each check in the grader's
process, and give each exercise its verdict (:func:`grade`)."""

from __future__ import annotations

import time
from pathlib import Path

from attnlab.course.exercises import (
    Exercise,
    cell_source,
    check_calls,
    find_exercises,
    normalise,
)
from attnlab.course.zmq_poll import sliced_zmq_polls

from . import masters as _masters
from .clean import grade_exercise
from .integrity import (
    GradeError,
    PackageChanged,
    chapter_id,
    default_masters,
    find_master,
    integrity_problems,
    master_entry,
    package_digest,
    read_notebook,
)
from .outcome import exercise_result
from .report import ExerciseResult, Report, describe, where
from .runner import CellRun, Runner

# ------------------------------------------------------------------ verdicts


def _written(sub, ex: Exercise, known: set[str]) -> list[dict]:
    """The markdown cells of an exercise that the student wrote or changed."""
    out = []
    for i in ex.answer_cells:
        src = cell_source(sub.cells[i])
        if normalise(src) and _masters.digest(src) not in known:
            out.append({"cell": i, "text": src.strip()})
    return out


def grade(  # noqa: C901
    path: str | Path,
    master: str | Path | None = None,
    cell_timeout: float = 300.0,
    exercise_timeout: float = 60.0,
    time_limit: float = 900.0,
    kernel: str = "python3",
    executed: str | Path | None = None,
    protected: list[str | Path] = (),
    digest: str | None = None,
    forbid: dict[str, list[str]] | None = None,
    clean: bool = True,
) -> Report:
    """Grade one submission; see the module docstring. Raises :class:`GradeError` only
    when it cannot be graded at all (unreadable, no master found, another chapter),
    and :class:`PackageChanged` (after writing nothing) when the installed package
    changed while it ran.

    The report has one result per exercise of the **master**, in the master's order:
    a box the submission lacks is refused, a repeated box counts once (the first) and
    is reported. Each exercise with intact checks gets its verdict from a clean run
    (:mod:`attnlab.grade.clean`); the submission's own run is the second opinion, and
    what its sentry saw goes to the report's integrity lines (``clean=False``: the
    verdict of the submission's own run, as before).
    """
    path = Path(path)
    sub = read_notebook(path)
    if master is None:
        master = default_masters()
    found = find_master(sub, path, Path(master) if master else None)
    entry = master_entry(found)
    master_nb = _masters.as_notebook(entry)
    mine, theirs = chapter_id(sub), chapter_id(master_nb)
    if mine is None or theirs is None or mine != theirs:
        raise GradeError(
            f"{path}: this is chapter {mine}'s notebook, not chapter {theirs}'s "
            f"({found}): refused"
        )
    problems, mapping = integrity_problems(sub, master_nb)
    report = Report(
        str(path),
        str(found),
        "graded",
        problems,
        cell_timeout=cell_timeout,
        exercise_timeout=exercise_timeout,
        time_limit=time_limit,
    )
    exercises = find_exercises(sub)
    master_exercises = find_exercises(master_nb)
    master_labels = [e.label for e in master_exercises]
    first: dict[str, Exercise] = {}
    for ex in exercises:
        if ex.label in first:
            report.integrity.append(
                f"Exercise box {ex.label} appears again at {where(sub, ex.box_cell)}: "
                "only the first counts"
            )
        elif ex.label not in master_labels:
            report.integrity.append(
                f"{where(sub, ex.box_cell)} is an exercise box ({ex.label}) that "
                "this chapter does not have: ignored"
            )
        first.setdefault(ex.label, ex)
    published = {e.label for e in master_exercises if e.check_cells}
    checks_of = {i: check_calls(sub.cells[i]) for c in mapping.values() for i in c}
    owner = {}
    for ex in exercises:
        for i in ex.work_cells + ex.solution_cells + ex.check_cells:
            owner[i] = ex
    code_known = set(entry["code"])
    digest = digest or package_digest()
    start = time.monotonic()
    runs: dict[int, CellRun] = {}
    guard = [str(path.resolve().parent), *map(str, protected)]
    runner = Runner(sub, path, kernel, cell_timeout, time_limit, guard, forbid)
    if runner.sandbox.uid is None:
        report.notes.append(
            "kernels ran under the grader's own user id (not root, no setpriv, or the course "
            "unreadable to other users): "
            "file modes cannot protect the other submissions; grade in the container"
        )
    with sliced_zmq_polls():
        try:
            for i, cell in enumerate(sub.cells):
                if cell.cell_type != "code" or not cell_source(cell).strip():
                    continue
                limit = exercise_timeout if i in owner else cell_timeout
                student = _masters.digest(cell_source(cell)) not in code_known
                runs[i] = run = runner.run(
                    i, student=student, checks=checks_of.get(i), timeout=limit
                )
                if i not in owner and run.status != "ok":
                    report.notes.append(
                        f"{where(sub, i)}, outside the exercises: {run.detail}"
                    )
        except RuntimeError as err:  # the sentry could not start at all
            raise GradeError(f"{path}: {err}") from err
        finally:
            runner.close()
    report.notes += runner.notes
    flags = _flags(sub, exercises, mapping, owner, runs)
    if package_digest() != digest:
        raise PackageChanged(
            f"{path}: the installed attnlab package changed while this notebook ran "
            f"({'; '.join(dict.fromkeys(flags.get('*', []))) or 'no write seen'}); "
            "reinstall attnlab before grading anything else"
        )
    prog = entry.get("program") if clean else None
    if clean and not prog:
        report.notes.append(
            "no clean run: this answer key has no master code (rebuild masters.json "
            "with python -m attnlab.grade.build_masters); verdicts from the "
            "notebook's own run"
        )
    refused = {p.split("(", 1)[1].split(")", 1)[0]: p for p in problems if "(" in p}
    md_known = set(entry["markdown"])
    for mex in master_exercises:
        ex = first.get(mex.label)
        if ex is None:
            result = ExerciseResult(
                mex.number,
                mex.label,
                mex.title,
                mex.checks,
                "refused",
                "its exercise box is missing from the notebook",
                0.0,
            )
            report.exercises.append(result)
            continue
        number = mex.number  # the master's numbering, whatever the notebook's order
        if ex.label in refused:
            cells = ", ".join(where(sub, i) for i in ex.check_cells) or "no check cell"
            result = ExerciseResult(
                number,
                ex.label,
                ex.title,
                ex.checks,
                "refused",
                f"its check cell was edited or removed ({cells}): leave check cells "
                "as they are",
                0.0,
            )
        elif ex.label in mapping:
            second = exercise_result(
                sub, ex, mapping[ex.label], runs, flags.get(ex.label, [])
            )
            untouched = all(
                _masters.digest(cell_source(sub.cells[i])) in code_known
                for i in ex.work_cells + ex.solution_cells
                if sub.cells[i].cell_type == "code"
            )
            if untouched and second.status in ("not attempted", "flagged"):
                # The stub as published: a clean run can only find it not attempted
                # (what flagged it happened elsewhere in the notebook).
                result = second
                if second.status != "not attempted":
                    result = ExerciseResult(
                        number,
                        ex.label,
                        ex.title,
                        ex.checks,
                        "not attempted",
                        f"{', '.join(ex.checks)}: not implemented yet (the exercise's "
                        "cells are the published stub)",
                        second.seconds,
                    )
                    if second.status == "flagged":
                        report.integrity.append(
                            f"{number} second opinion (the notebook's own run): "
                            + second.message
                        )
            elif prog and ex.label in prog.get("boxes", {}):
                try:
                    result, notes = grade_exercise(
                        prog,
                        sub,
                        ex,
                        kernel,
                        cell_timeout,
                        exercise_timeout,
                        time_limit,
                        guard,
                        forbid,
                    )
                    report.notes += [f"{number} (clean run): {n}" for n in notes]
                except Exception as err:  # noqa: BLE001
                    result = ExerciseResult(
                        number, ex.label, ex.title, ex.checks, "errored", "", 0.0
                    )
                    result.message = f"the grader failed on this exercise ({err!r})"
                if second.status == "flagged":
                    report.integrity.append(
                        f"{number} second opinion (the notebook's own run): "
                        + second.message
                    )
                elif second.status != result.status and result.status == "passed":
                    report.notes.append(
                        f"{number}: passed in a clean run, {second.status} in the "
                        "notebook's own run (a cell outside the exercise changed it)"
                    )
            else:
                result = second
        elif ex.label not in published:
            result = ExerciseResult(
                number,
                ex.label,
                ex.title,
                ex.checks,
                "written",
                "no check: the instructor grades the written answer",
                0.0,
            )
        else:  # pragma: no cover (published but neither refused nor mapped)
            continue
        result.number = number
        result.answers = _written(sub, ex, md_known)
        report.exercises.append(result)
    report.seconds = time.monotonic() - start
    if executed:
        import nbformat

        nbformat.write(sub, str(executed))
    return report


def _flags(sub, exercises, mapping, owner, runs) -> dict[str, list[str]]:
    """Per exercise label, what the sentry saw that fails it (``*``: every one)."""
    flags: dict[str, list[str]] = {}
    last_check = {
        ex.label: max(mapping.get(ex.label, ex.check_cells) or [ex.box_cell])
        for ex in exercises
    }
    for i, run in sorted(runs.items()):
        for ev in run.events:
            text = f"{where(sub, i)} {describe(ev)}"
            flags.setdefault("*", []).append(text)
            ex = owner.get(i)
            local = ev.get("what") in ("forbidden", "reference", "frames", "borrowed")
            for e in exercises:
                if e is ex or (not (local and ex) and last_check[e.label] >= i):
                    flags.setdefault(e.label, []).append(text)
    return flags
