"""One exercise's verdict from its cells' runs: the order in which what went wrong
counts (a flag, an exit, the checks' replayed outcomes, a timeout, an error), shared
by the notebook's own run (:mod:`attnlab_grade.verdicts`) and the clean runs
(:mod:`attnlab_grade.clean`)."""

from __future__ import annotations

from attnlab.course.exercises import Exercise, check_calls

from .replay import replay
from .report import ExerciseResult, where
from .runner import CellRun


def check_cell_outcome(sub, i: int, run: CellRun) -> list[tuple[str, str]]:
    if run.status == "timeout":
        return [("timed out", f"the check {run.detail}")]
    if run.status == "not run":
        return [("timed out", f"not run: {run.detail}")]
    if run.status == "dead":
        return [("errored", f"{where(sub, i)}: the kernel died while the check ran")]
    if run.status == "error":
        return [("errored", f"{where(sub, i)}: the check raised {run.detail}")]
    return replay(check_calls(sub.cells[i]), run.answers)


def exercise_result(
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
        result.status, result.message = "errored", f"{where(nb, i)} {detail}"
        return result
    outcomes = [o for i in checks for o in check_cell_outcome(nb, i, runs[i])]
    if outcomes and all(s == "passed" for s, _ in outcomes):
        result.status = "passed"
        result.message = "; ".join(m for _, m in outcomes)
        return result
    bad = [(i, runs[i]) for i in own if i in runs and runs[i].status != "ok"]
    for kind, status in (("timeout", "timed out"), ("dead", "errored")):
        hit = [(i, r) for i, r in bad if r.status == kind]
        if hit:
            i, r = hit[0]
            result.status, result.message = status, f"{where(nb, i)} {r.detail}"
            return result
    errors = [(i, r) for i, r in bad if r.status == "error"]
    if errors:
        i, r = errors[0]
        result.status = "errored"
        result.message = f"{where(nb, i)} raised {r.detail}"
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
