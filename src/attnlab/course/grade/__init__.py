"""Grade students' notebooks: ``python -m attnlab.grade FILES-FOLDERS-GLOBS [-j N]``.

For each submission the grader

1. finds its master (same file name, else the chapter number in its title) in the
   integrity data shipped with the package (:mod:`attnlab.grade.masters`), or in
   ``--master`` (a notebook or a folder of them), and checks every exercise's
   published check cells: an exercise whose check cell was edited or removed is
   **refused** (that exercise only; the report names the cell);
2. executes the notebook top to bottom in a fresh kernel, in a scratch folder, with
   time limits per cell (short for the exercises' cells, longer for the chapter's own)
   and for the whole notebook; a cell that raises, loops or kills the kernel costs its
   exercise and grading goes on (after a dead kernel a new one re-runs the cells that
   had succeeded);
3. takes the verdict out of the notebook's reach. Before any cell runs, a sentry is
   installed in the kernel (:mod:`attnlab.grade.sentry`: an audit hook no cell can
   remove and a profile it watches over). While a check runs it records the student's
   answer on each case as plain data; the grader then **replays** the check in its
   own process on those answers (:mod:`attnlab.grade.replay`), so patching ``print``,
   ``torch``, ``numpy`` or :mod:`attnlab.check` in the kernel changes nothing. The
   sentry also reports, and the grade fails, every exercise touched by: a call to a
   function the exercise forbids (``FORBIDDEN`` in the check modules) or to a check's
   reference answer, a patched ``builtins``/``torch``/``numpy``/``attnlab`` name, a
   write into the installed package or the grader's folders (fake reports), frame or
   ``gc`` introspection, ``ctypes``, a subprocess or thread, or a broken monitor. The
   installed package is hashed before and after each submission;
4. reports per exercise: **passed**, **failed** (the check's message), **not
   attempted** (the stub still raises ``NotImplementedError``), **errored** (a cell
   of the exercise raised, exited or killed the kernel), **timed out**, **flagged**
   (the sentry saw one of the above), **refused** (its check cell was edited) or
   **written** (no check: a derivation or prediction for the instructor to read); the
   student's written answers (markdown cells they filled in) are in the report.

Grading runs students' code with your permissions: grade in a container or a
throwaway account without network (see the instructors' page).

Why nbclient and not nbgrader or otter-grader: our exercises already carry their own
structure (sphinx-exercise boxes, ``solution`` tags, ``attnlab.check`` cells), and both
would need a second, parallel markup kept in sync with it. nbclient is the execution
engine underneath both (and Jupyter Book); this package adds the mapping from cells to
exercises, the integrity checks, the sentry and the report.
"""

from __future__ import annotations

import argparse
import csv
import glob
import hashlib
import json
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

from ..exercises import (
    Exercise,
    cell_source,
    chapter_number,
    check_calls,
    find_exercises,
    normalise,
)
from . import masters as _masters
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
    "package_digest",
    "submissions",
]

OWN_OUTPUTS = (".graded.ipynb", ".grade.json", ".grade.txt")


class GradeError(Exception):
    """A submission that cannot be graded at all (unreadable, no master found)."""


class PackageChanged(GradeError):
    """The installed attnlab package changed while a notebook was graded."""


# ------------------------------------------------------------------ integrity


def integrity_problems(sub, master) -> tuple[list[str], dict[str, list[int]]]:
    """Compare the submission's check cells with the master's (the published ones).

    Returns the problems found (one per edited or removed check cell, or missing
    box, each naming the exercise's label) and, per intact exercise label, the
    submission's cells that hold its published checks (matched by their normalised
    source; when a student repeated a check cell, the last copy counts). Exercises
    with a problem are left out of the mapping: only they are refused.
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
        found, candidates, bad = [], list(mine.check_cells), False
        for src in published:
            hits = [
                i for i in candidates if normalise(cell_source(sub["cells"][i])) == src
            ]
            if hits:
                found.append(hits[-1])
                candidates = [i for i in candidates if i > hits[-1]]
            else:
                bad = True
                near = [
                    f"cell {i}: {normalise(cell_source(sub['cells'][i]))!r}"
                    for i in mine.check_cells
                ]
                seen = f"; found {'; '.join(near)}" if near else ""
                problems.append(
                    f"{name}: the check cell {src!r} was edited or removed (or the "
                    f"notebook is from another version of the course){seen}"
                )
        if not bad:
            mapping[ex.label] = found
    return problems, mapping


# ------------------------------------------------------------------ masters


def default_masters() -> Path | None:
    """The repository's chapters/ when attnlab is an editable install, else None
    (the packaged integrity data is used)."""
    repo = Path(__file__).resolve().parents[3] / "chapters"
    return repo if repo.is_dir() else None


def _read(path: Path):
    import nbformat

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return nbformat.read(str(path), as_version=4)
    except Exception as err:
        raise GradeError(f"{path}: not a readable notebook ({err})") from err


def find_master(sub, sub_path: Path, master: Path | None = None) -> Path | str:
    """The master of a submission: ``master`` itself if it is a notebook; else, in the
    folder ``master`` (or the packaged data when there is none), the notebook of the
    same name, else the one with the chapter number of the title. Returns a path, or
    the packaged entry's name (``"packaged:NN_topic.ipynb"``)."""
    if master is not None and not master.exists():
        raise GradeError(f"--master {master} does not exist")
    if master is not None and master.is_file():
        return master
    n = chapter_number(sub)
    if master is not None:
        same = master / sub_path.name
        if same.is_file():
            return same
        hits = sorted(master.glob(f"{n:02d}_*.ipynb")) if n is not None else []
        if len(hits) == 1:
            return hits[0]
        where = str(master)
    else:
        data = _masters.load()
        if sub_path.name in data:
            return f"packaged:{sub_path.name}"
        hits = [k for k, v in data.items() if n is not None and v["chapter"] == n]
        if len(hits) == 1:
            return f"packaged:{hits[0]}"
        where = "the course's chapters (packaged with attnlab)"
    raise GradeError(
        f"{sub_path}: cannot tell which chapter this is (no {sub_path.name} in "
        f"{where}, title number {n}); pass --master"
    )


def _master_entry(found: Path | str) -> dict:
    if isinstance(found, str) and found.startswith("packaged:"):
        return _masters.load()[found.split(":", 1)[1]]
    return _masters.skeleton(_read(Path(found)))


def package_digest() -> str:
    """SHA-256 over the installed attnlab package's files (names and contents)."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
            h.update(str(p.relative_to(root)).encode() + b"\0")
            h.update(p.read_bytes())
    return h.hexdigest()


# ------------------------------------------------------------------ verdicts


def _where(nb, i: int) -> str:
    """A cell as an instructor finds it: its index and its first line of code."""
    first = next((ln for ln in cell_source(nb.cells[i]).splitlines() if ln.strip()), "")
    first = first if len(first) <= 40 else first[:39] + "…"
    return f"cell {i} ({first.strip()})"


def _describe(event: dict) -> str:
    what, name = event.get("what"), event.get("name", "")
    if what == "forbidden":
        return (
            f"called {name}, which the exercise asks you to write yourself "
            f"(check {event.get('check')})"
        )
    if what == "reference":
        return f"called the check's own reference code ({name})"
    if what == "patch":
        return f"changed the library in the kernel ({name})"
    if what == "write":
        return f"wrote into the installed package or the grader's folders ({name})"
    if what == "frames":
        return f"inspected the check's frames while it ran ({name})"
    if what == "monitor":
        return name
    return f"tampered with the grading ({name})"


def _check_cell_outcome(sub, i: int, run: CellRun) -> list[tuple[str, str]]:
    from .replay import replay

    if run.status == "timeout":
        return [("timed out", f"the check {run.detail}")]
    if run.status == "not run":
        return [("timed out", f"not run: {run.detail}")]
    if run.status == "dead":
        return [("errored", f"{_where(sub, i)}: the kernel died while the check ran")]
    if run.status == "error":
        return [("errored", f"{_where(sub, i)}: the check raised {run.detail}")]
    return replay(check_calls(sub.cells[i]), run.answers)


def _exercise_result(
    nb, ex: Exercise, checks: list[int], runs: dict, flags: list[str]
) -> ExerciseResult:
    own = sorted(set(ex.work_cells + ex.solution_cells + ex.check_cells) - set(checks))
    seconds = sum(runs[i].seconds for i in own + checks if i in runs)
    result = ExerciseResult(ex.number, ex.label, ex.title, ex.checks, "", "", seconds)
    if flags:
        result.status, result.message = "flagged", "; ".join(dict.fromkeys(flags))
        return result
    exits = [
        (i, runs[i])
        for i in own + checks
        if i in runs
        and (runs[i].status == "dead" or runs[i].detail.startswith("SystemExit"))
    ]
    if exits:
        i, r = exits[0]
        detail = "killed the kernel" if r.status == "dead" else f"raised {r.detail}"
        result.status, result.message = "errored", f"{_where(nb, i)} {detail}"
        return result
    outcomes = [o for i in checks for o in _check_cell_outcome(nb, i, runs[i])]
    if outcomes and all(s == "passed" for s, _ in outcomes):
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
    if outcomes and all(s == "not attempted" for s, _ in outcomes):
        result.status, result.message = "not attempted", outcomes[0][1]
    else:  # some checks passed, others not attempted
        result.status = "failed"
        result.message = next(
            (m for s, m in outcomes if s == "not attempted"), "no check ran"
        )
    return result


def _written(sub, ex: Exercise, known: set[str]) -> list[dict]:
    """The markdown cells of an exercise that the student wrote or changed."""
    out = []
    for i in ex.answer_cells:
        src = cell_source(sub.cells[i])
        if normalise(src) and _masters.digest(src) not in known:
            out.append({"cell": i, "text": src.strip()})
    return out


def grade(
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
) -> Report:
    """Grade one submission; see the module docstring. Raises :class:`GradeError` only
    when it cannot be graded at all (unreadable, or no master found), and
    :class:`PackageChanged` (after writing nothing) when the installed package changed
    while it ran."""
    path = Path(path)
    sub = _read(path)
    if master is None:
        master = default_masters()
    found = find_master(sub, path, Path(master) if master else None)
    entry = _master_entry(found)
    master_nb = _masters.as_notebook(entry)
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
    published = {e.label for e in find_exercises(master_nb) if e.check_cells}
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
    with tempfile.TemporaryDirectory(prefix="attnlab-grade-") as work:
        runner = Runner(
            sub,
            Path(work) / path.name,
            kernel,
            cell_timeout,
            time_limit,
            guard,
            forbid,
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
                            f"{_where(sub, i)}, outside the exercises: {run.detail}"
                        )
            except RuntimeError as err:  # the sentry could not start at all
                raise GradeError(f"{path}: {err}") from err
            finally:
                runner.stop()
    report.notes += runner.notes
    report.seconds = time.monotonic() - start
    flags = _flags(sub, exercises, mapping, owner, runs)
    if package_digest() != digest:
        raise PackageChanged(
            f"{path}: the installed attnlab package changed while this notebook ran "
            f"({'; '.join(dict.fromkeys(flags.get('*', []))) or 'no write seen'}); "
            "reinstall attnlab before grading anything else"
        )
    refused = {p.split("(", 1)[1].split(")", 1)[0]: p for p in problems if "(" in p}
    md_known = set(entry["markdown"])
    for ex in exercises:
        if ex.label in refused:
            cells = ", ".join(_where(sub, i) for i in ex.check_cells) or "no check cell"
            result = ExerciseResult(
                ex.number,
                ex.label,
                ex.title,
                ex.checks,
                "refused",
                f"its check cell was edited or removed ({cells}): leave check cells "
                "as they are",
                0.0,
            )
        elif ex.label in mapping:
            result = _exercise_result(
                sub, ex, mapping[ex.label], runs, flags.get(ex.label, [])
            )
        elif ex.label not in published:
            result = ExerciseResult(
                ex.number,
                ex.label,
                ex.title,
                ex.checks,
                "written",
                "no check: the instructor grades the written answer",
                0.0,
            )
        else:
            continue
        result.answers = _written(sub, ex, md_known)
        report.exercises.append(result)
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
            text = f"{_where(sub, i)} {_describe(ev)}"
            flags.setdefault("*", []).append(text)
            ex = owner.get(i)
            local = ev.get("what") in ("forbidden", "reference", "frames")
            for e in exercises:
                if e is ex or (not (local and ex) and last_check[e.label] >= i):
                    flags.setdefault(e.label, []).append(text)
    return flags


# ------------------------------------------------------------------ command line


def submissions(args: list[str | Path], out: Path | None = None) -> list[Path]:
    """The notebooks named by files, folders (searched recursively) and globs, in a
    stable order, without the grader's own outputs and Jupyter's checkpoints."""
    found: list[Path] = []
    for arg in map(str, args):
        p = Path(arg)
        if p.is_dir():
            found += sorted(p.rglob("*.ipynb"))
        elif not p.exists() and glob.has_magic(arg):
            found += sorted(Path(x) for x in glob.glob(arg, recursive=True))
        else:
            found.append(p)
    keep, seen = [], set()
    out_dir = out.resolve() if out else None
    for p in found:
        r = p.resolve()
        if r in seen or p.name.endswith(OWN_OUTPUTS) or ".ipynb_checkpoints" in p.parts:
            continue
        if out_dir is not None and p.is_file() and out_dir in r.parents:
            continue
        seen.add(r)
        keep.append(p)
    return keep


def _report_paths(sub: Path, out: Path | None, names: dict[Path, str]) -> Path:
    return (out or sub.parent) / names[sub]


def _grade_one(job: dict) -> tuple[str, Report | None, str]:
    try:
        return job["sub"], grade(**job["kwargs"]), ""
    except PackageChanged as err:
        return job["sub"], None, f"PACKAGE {err}"
    except GradeError as err:
        return job["sub"], None, str(err)


def _stems(subs: list[Path]) -> dict[Path, str]:
    """A report name per submission, unique even when files share a name."""
    count: dict[str, int] = {}
    for s in subs:
        count[s.stem] = count.get(s.stem, 0) + 1
    names = {}
    for s in subs:
        stem = s.stem
        if count[stem] > 1:
            stem = "_".join([*s.parent.parts[-2:], s.stem]).replace(os.sep, "_")
        names[s] = stem
    return names


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m attnlab.grade",
        description="Execute students' notebooks and grade their exercises. Grading "
        "RUNS THE STUDENTS' CODE with your permissions: do it in a container or a "
        "throwaway account without network.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument(
        "submissions",
        nargs="+",
        help="notebooks: files, folders (searched recursively) or globs; the grader's "
        "own outputs (*.graded.ipynb) are skipped",
    )
    p.add_argument(
        "--master",
        type=Path,
        help="the master notebook, or a folder of them (default: the chapters "
        "packaged with attnlab)",
    )
    p.add_argument("-j", "--jobs", type=int, default=1, help="notebooks graded at once")
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
    p.add_argument(
        "--csv",
        type=Path,
        help="gradebook: one row per notebook, one column per exercise",
    )
    p.add_argument(
        "--save-executed",
        action="store_true",
        help="also write the executed notebook, NAME.graded.ipynb (never graded)",
    )
    p.add_argument(
        "--forbid",
        action="append",
        default=[],
        metavar="CHECK=MODULE.NAME",
        help="also fail answers to CHECK that call MODULE.NAME (repeatable), on top of "
        "the lists the check modules publish (FORBIDDEN)",
    )
    args = p.parse_args(argv)
    forbid: dict[str, list[str]] = {}
    for item in args.forbid:
        check, _, dotted = item.partition("=")
        if not check or "." not in dotted:
            p.error(f"--forbid {item}: expected CHECK=module.name")
        forbid.setdefault(check, []).append(dotted)
    if args.master is not None and not args.master.exists():
        p.error(f"--master {args.master} does not exist")
    subs = submissions(args.submissions, args.out)
    if not subs:
        p.error("no notebooks found in " + " ".join(args.submissions))
    names = _stems(subs)
    protected = [str(x.resolve().parent) for x in subs]
    if args.out:
        protected.append(str(args.out.resolve()))
    if args.csv:
        protected.append(str(args.csv.resolve().parent))
    digest = package_digest()
    jobs = []
    for sub in subs:
        out = _report_paths(sub, args.out, names)
        kwargs = dict(
            path=str(sub),
            master=str(args.master) if args.master else None,
            cell_timeout=args.cell_timeout,
            exercise_timeout=args.exercise_timeout,
            time_limit=args.time_limit,
            kernel=args.kernel,
            executed=str(out) + ".graded.ipynb" if args.save_executed else None,
            protected=protected,
            digest=digest,
            forbid=forbid,
        )
        jobs.append({"sub": str(sub), "kwargs": kwargs})
    results: dict[str, tuple[Report | None, str]] = {}
    stop = ""
    if args.jobs > 1 and len(jobs) > 1:
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(_grade_one, j) for j in jobs]
            for f in as_completed(futures):
                sub, report, err = f.result()
                results[sub] = (report, err)
                if err.startswith("PACKAGE") and not stop:
                    stop = err
                    for other in futures:
                        other.cancel()
    else:
        for j in jobs:
            if stop:
                break
            sub, report, err = _grade_one(j)
            results[sub] = (report, err)
            if err.startswith("PACKAGE"):
                stop = err
    # Reports are written only now, after every kernel has stopped: nothing a
    # notebook wrote while it ran can stand in for them.
    rows, failed = [], 0
    for sub in subs:
        report, err = results.get(str(sub), (None, stop or "not graded"))
        if report is None:
            failed += 1
            print(f"error: {err}", file=sys.stderr)
            rows.append({"student": names[sub], "submission": str(sub), "status": err})
            continue
        base = _report_paths(sub, args.out, names)
        base.parent.mkdir(parents=True, exist_ok=True)
        j, t = Path(f"{base}.grade.json"), Path(f"{base}.grade.txt")
        j.write_text(json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n")
        t.write_text(report.to_text())
        print(report.to_text(), end="")
        print(f"report: {j} and {t}\n")
        total = report.total
        row = {
            "student": names[sub],
            "submission": str(sub),
            "status": report.status,
            "passed": report.passed,
            "total": total,
            "percent": round(100 * report.passed / total, 1) if total else "",
        }
        row.update({e.number: e.status for e in report.exercises})
        rows.append(row)
    if args.csv:
        keys = list(dict.fromkeys(k for r in rows for k in r))
        args.csv.parent.mkdir(parents=True, exist_ok=True)
        with args.csv.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=keys)
            w.writeheader()
            w.writerows(rows)
        print(f"gradebook: {args.csv} ({len(rows)} notebooks)")
    if stop:
        print(f"STOPPED: {stop.removeprefix('PACKAGE ')}", file=sys.stderr)
        return 2
    return 1 if failed else 0
