"""The grading report: one result per exercise, as JSON and as a readable table."""

from __future__ import annotations

import textwrap
from dataclasses import asdict, dataclass, field

from attnlab.course.exercises import cell_source

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
    # what was graded with what (the submission's and the grader's digests, the
    # limits): a later run skips a submission whose report has the same
    fingerprint: str = ""

    @classmethod
    def from_dict(cls, d: dict) -> Report:
        """A report read back from its JSON (:meth:`to_dict`)."""
        names = set(cls.__dataclass_fields__)
        kept = {k: v for k, v in d.items() if k in names and k != "exercises"}
        out = cls(**kept)
        fields = set(ExerciseResult.__dataclass_fields__)
        out.exercises = [
            ExerciseResult(**{k: v for k, v in e.items() if k in fields})
            for e in d.get("exercises", [])
        ]
        return out

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


# ------------------------------------------------------------------ wording


def where(nb, i: int) -> str:
    """A cell as an instructor finds it: its index and its first line of code."""
    first = next((ln for ln in cell_source(nb.cells[i]).splitlines() if ln.strip()), "")
    first = first if len(first) <= 40 else first[:39] + "…"
    return f"cell {i} ({first.strip()})"


def describe(event: dict) -> str:
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
    if what in ("monitor", "borrowed"):
        return name
    return f"tampered with the grading ({name})"
