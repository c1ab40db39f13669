"""The grading report: one result per exercise, as JSON and as a readable table."""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass, field

STATUSES = (
    "passed",
    "failed",
    "not attempted",
    "errored",
    "timed out",
    "flagged",  # the grader's sentry saw the notebook cheat or tamper
    "refused",  # its check cell was edited
    "written",  # no check: the instructor grades the written answer
)


@dataclass
class ExerciseResult:
    number: str  # "2.1"
    label: str  # "ex-recipe-additive"
    title: str
    checks: list[str]
    status: str  # one of STATUSES
    message: str  # the check's line, or what went wrong
    seconds: float  # time spent in the exercise's cells
    # the markdown cells the student filled in: [{"cell": i, "text": ...}]
    answers: list = field(default_factory=list)


@dataclass
class Report:
    submission: str
    master: str
    status: str  # "graded"
    integrity: list[str]  # edited or removed check cells (their exercises: refused)
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
        """The auto-checked exercises (a written one is graded by the instructor,
        apart from the percentage)."""
        return sum(e.status != "written" for e in self.exercises)

    @property
    def written(self) -> int:
        return sum(e.status == "written" for e in self.exercises)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["seconds"] = round(self.seconds, 2)
        for e in d["exercises"]:
            e["seconds"] = round(e["seconds"], 2)
        d["score"] = {
            "passed": self.passed,
            "total": self.total,
            "written": self.written,
        }
        d["counts"] = {s: sum(e.status == s for e in self.exercises) for s in STATUSES}
        return d

    def to_text(self) -> str:
        head = f"{self.submission}  (master: {self.master})"
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
        for e in self.exercises:
            for a in e.answers:
                text = textwrap.indent(a["text"], "    ")
                lines.append(f"answer to {e.number}, cell {a['cell']}:\n{text}")
        lines += [f"integrity: {p}" for p in self.integrity]
        lines += [f"note: {n}" for n in self.notes]
        written = f", {self.written} written for you to grade" if self.written else ""
        lines.append(
            f"score: {self.passed}/{self.total} auto-checked passed{written}  "
            f"({self.seconds:.1f} s; limits "
            f"{self.exercise_timeout:g} s per exercise cell, {self.cell_timeout:g} s "
            f"per other cell, {self.time_limit:g} s in all)"
        )
        return "\n".join(lines) + "\n"
