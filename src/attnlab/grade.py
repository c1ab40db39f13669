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
import contextlib
import copy
import csv
import json
import subprocess
import sys
import textwrap
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .exercises import (
    Exercise,
    cell_source,
    chapter_number,
    find_exercises,
    normalise,
)

__all__ = ["GradeError", "Report", "grade", "integrity_problems", "main"]

STATUSES = ("passed", "failed", "not attempted", "errored", "timed out")
MARKS = {"✅": "passed", "❌": "failed", "⏳": "not attempted"}

# Run in the kernel before each published check: strict mode on, and attnlab.check
# imported afresh from disk (a student's cell may have replaced or patched it).
PRELUDE = """\
def _attnlab_grader_prelude():
    global attnlab
    import importlib, os, sys
    os.environ["ATTNLAB_STRICT"] = "1"
    for name in [m for m in sys.modules if m.split(".")[:2] == ["attnlab", "check"]]:
        del sys.modules[name]
    attnlab = importlib.import_module("attnlab")
    importlib.import_module("attnlab.check")
_attnlab_grader_prelude()
del _attnlab_grader_prelude"""
# ... and after it: the student's own cells run as they ran for the student.
POSTLUDE = 'import os as _os\n_os.environ["ATTNLAB_STRICT"] = "0"\ndel _os'
PROBE_TIMEOUT = 20  # seconds an interrupted kernel gets to answer before a restart


class GradeError(Exception):
    """A submission that cannot be graded at all (unreadable, no master found)."""


@dataclass
class ExerciseResult:
    number: str  # "2.1"
    label: str  # "ex-recipe-additive"
    title: str
    checks: list[str]
    status: str  # one of STATUSES
    message: str  # the check's line, or what went wrong
    seconds: float  # time spent in the exercise's cells


@dataclass
class Report:
    submission: str
    master: str
    status: str  # "graded" or "refused"
    integrity: list[str]  # why a notebook was refused (empty when graded)
    exercises: list[ExerciseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # cells outside exercises
    seconds: float = 0.0
    cell_timeout: float = 0.0
    exercise_timeout: float = 0.0
    time_limit: float = 0.0

    @property
    def passed(self) -> int:
        return sum(e.status == "passed" for e in self.exercises)

    @property
    def total(self) -> int:
        return len(self.exercises)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 2)
        for e in d["exercises"]:
            e["seconds"] = round(e["seconds"], 2)
        d["score"] = {"passed": self.passed, "total": self.total}
        d["counts"] = {s: sum(e.status == s for e in self.exercises) for s in STATUSES}
        return d

    def to_text(self) -> str:
        head = f"{self.submission}  (master: {self.master})"
        if self.status == "refused":
            lines = [head, "REFUSED: the published check cells were changed"]
            lines += [f"  - {p}" for p in self.integrity]
            return "\n".join(lines) + "\n"
        w = max([len(e.title) for e in self.exercises] + [8])
        w = min(w, 40)
        lines = [
            head,
            f"{'#':5s} {'exercise':{w}s} {'status':13s} {'time':>6s}  details",
        ]
        for e in self.exercises:
            title = e.title if len(e.title) <= w else e.title[: w - 1] + "…"
            row = f"{e.number:5s} {title:{w}s} {e.status:13s} {e.seconds:5.1f}s  "
            # The whole message (the check's case, got, expected, hint), wrapped.
            msg = textwrap.wrap(e.message, max(40, 110 - len(row))) or [""]
            lines.append(row + msg[0])
            lines += [" " * len(row) + m for m in msg[1:]]
        lines += [f"note: {n}" for n in self.notes]
        lines.append(
            f"score: {self.passed}/{self.total} passed  ({self.seconds:.1f} s; limits "
            f"{self.exercise_timeout:g} s per exercise cell, {self.cell_timeout:g} s "
            f"per other cell, {self.time_limit:g} s in all)"
        )
        return "\n".join(lines) + "\n"


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


# ------------------------------------------------------------------ execution


@dataclass
class CellRun:
    status: str  # "ok", "error", "timeout", "dead", "not run"
    detail: str = ""  # "ZeroDivisionError: division by zero", ...
    seconds: float = 0.0
    text: str = ""  # what the cell printed


def _printed(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "".join(parts) if all(isinstance(p, str) for p in parts) else ""


@contextlib.contextmanager
def _sliced_zmq_polls(slice_s: float = 0.2):
    """Poll the kernel's sockets in short slices while grading.

    The same workaround as the book build's ``tools/zmq_poll.py``: a missed pyzmq
    asyncio wake-up would otherwise make a fast cell wait for its whole time limit.
    """
    from queue import Empty

    from jupyter_client.channels import AsyncZMQSocketChannel

    original = AsyncZMQSocketChannel.get_msg

    async def get_msg(self, timeout=None):
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = (
                slice_s if deadline is None else max(0.0, deadline - time.monotonic())
            )
            if await self.socket.poll(int(min(slice_s, left) * 1000)):
                return await self._recv()
            if deadline is not None and time.monotonic() >= deadline:
                raise Empty

    AsyncZMQSocketChannel.get_msg = get_msg
    try:
        yield
    finally:
        AsyncZMQSocketChannel.get_msg = original


class _Runner:
    """Executes cells one by one in a kernel, restarting it when it dies or hangs."""

    def __init__(self, nb, path: Path, kernel: str, cell_timeout: float, limit: float):
        import nbclient

        self.nb = nb
        self.cell_timeout = cell_timeout
        self.deadline = time.monotonic() + limit
        self.client = nbclient.NotebookClient(
            nb,
            timeout=int(cell_timeout),
            kernel_name=kernel,
            allow_errors=False,
            interrupt_on_timeout=True,  # then _exec's error_on_timeout is the reply
            resources={"metadata": {"path": str(path.parent)}},
        )
        self.env = {**__import__("os").environ, "ATTNLAB_STRICT": "0"}
        self.replay: list[int] = []  # cells that succeeded: re-run after a restart
        self.notes: list[str] = []
        self.alive = False

    def start(self) -> None:
        self.client.km = self.client.create_kernel_manager()
        # The kernel process's own log (start-up chatter) is not the student's
        # output, which comes back through the cells; keep it off the report.
        self.client.start_new_kernel(env=self.env, stderr=subprocess.DEVNULL)
        self.client.start_new_kernel_client()
        self.alive = True
        for i in self.replay:
            run = self._scratch(copy.deepcopy(self.nb.cells[i]), self.cell_timeout)
            if run.status != "ok":
                self.notes.append(
                    f"after a kernel restart, re-running cell {i} gave {run.status}: "
                    f"{run.detail}"
                )

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client._cleanup_kernel()
        self.client.km = self.client.kc = None
        self.alive = False

    def _exec(self, cell, index: int, timeout: float | None = None) -> CellRun:
        from nbclient.exceptions import CellExecutionError, DeadKernelError

        left = self.deadline - time.monotonic()
        if left <= 0:
            return CellRun("not run", "the notebook's time limit ran out")
        self.client.timeout = limit = max(
            1, int(min(timeout or self.cell_timeout, left))
        )
        self.client.error_on_timeout = {
            "ename": "CellTimeoutError",
            "evalue": f"ran past its {limit} s limit and was interrupted",
            "traceback": [],
        }
        start = time.monotonic()
        try:
            self.client.execute_cell(cell, index)
        except CellExecutionError as err:
            took = time.monotonic() - start
            if err.ename == "CellTimeoutError":
                return CellRun("timeout", err.evalue, took, _printed(cell))
            return CellRun("error", f"{err.ename}: {err.evalue}", took, _printed(cell))
        except DeadKernelError:
            self.alive = False
            return CellRun("dead", "killed the kernel", time.monotonic() - start)
        return CellRun("ok", "", time.monotonic() - start, _printed(cell))

    def run(self, index: int, strict: bool = False, timeout=None) -> CellRun:
        """Run notebook cell ``index`` (a published check when ``strict``)."""
        if not self.alive:
            self.start()
        cell = self.nb.cells[index]
        if strict:
            self._hidden(PRELUDE)
        run = self._exec(cell, index, timeout)
        if run.status == "timeout":
            # The kernel was interrupted; make sure it answers again, else restart.
            if self._hidden("pass", PROBE_TIMEOUT).status != "ok":
                self.notes.append(f"cell {index}: the kernel hung; restarted it")
                self.stop()
        elif run.status == "dead":
            self.notes.append(f"cell {index}: the kernel died; restarted it")
            self.stop()
        if strict and self.alive:
            self._hidden(POSTLUDE)
        if run.status == "ok" and not strict:
            self.replay.append(index)
        return run

    def _hidden(self, code: str, timeout: float | None = None) -> CellRun:
        import nbformat

        run = self._scratch(nbformat.v4.new_code_cell(code), timeout)
        if run.status == "dead":
            self.stop()
        return run

    def _scratch(self, cell, timeout: float | None) -> CellRun:
        """Run a cell that is not the notebook's (nbclient stores a cell it ran at its
        index in ``client.nb``, so it gets a one-cell notebook of its own)."""
        import nbformat

        nb, self.client.nb = self.client.nb, nbformat.v4.new_notebook(cells=[cell])
        try:
            return self._exec(cell, 0, timeout or self.cell_timeout)
        finally:
            self.client.nb = nb


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
    if not checks:
        result.status, result.message = "errored", "no published check for it"
    elif all(s == "passed" for s, _ in outcomes):
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
    runner = _Runner(sub, path, kernel, cell_timeout, time_limit)
    runs: dict[int, CellRun] = {}
    with _sliced_zmq_polls():
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


if __name__ == "__main__":
    sys.exit(main())
