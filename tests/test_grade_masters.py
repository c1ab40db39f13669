"""The grader's masters checked on the grading machine (attnlab_grade.selfcheck) and the
class run around it: resumed runs, the progress line, the per-machine cache.

A master that does not run on the grading machine would fail every student: the
broken master here is chapter 2 with one chapter cell that raises (as a live-run
assert does on a CPU where its margin is gone), so the test does not depend on any
chapter staying broken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attnlab.grade import ExerciseResult, Report, classrun, cli, selfcheck

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "02_attention_recipe.ipynb"
LIMITS = {"exercise_timeout": 60.0, "cell_timeout": 300.0, "time_limit": 600.0}
RAISES = 'assert 1 + 1 == 3, "a live run whose margin is gone on this CPU"'


def _broken_master(folder: Path) -> tuple[Path, int]:
    """Chapter 2 with a chapter cell that raises, right after its title: every
    exercise's clean run needs the chapter's code before its box, so every one fails."""
    nb = json.loads(CHAPTER.read_text())
    at = 2
    cell = {
        "cell_type": "code",
        "metadata": {},
        "source": RAISES,
        "outputs": [],
        "execution_count": None,
    }
    nb["cells"].insert(at, cell)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / CHAPTER.name
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False))
    return path, at


def _report(n_passed: int, n: int) -> Report:
    r = Report("s.ipynb", "m.ipynb", "graded", [])
    for i in range(n):
        status = "passed" if i < n_passed else "errored"
        msg = "" if status == "passed" else "the master's cell 3 raised AssertionError"
        r.exercises.append(
            ExerciseResult(f"2.{i + 1}", f"ex-{i}", "t", ["c"], status, msg, 1.0)
        )
    return r


# ------------------------------------------------------------------ fast


def test_problems_name_the_exercise_and_why():
    assert selfcheck.problems_of(_report(2, 2)) == []
    got = selfcheck.problems_of(_report(1, 2))
    assert got == [
        "exercise 2.2 (ex-1) errored: the master's cell 3 raised AssertionError"
    ]
    written = _report(1, 1)
    written.exercises.append(ExerciseResult("2.9", "w", "t", [], "written", "", 0))
    assert selfcheck.problems_of(written) == []
    assert selfcheck.problems_of(Report("s", "m", "graded", [])) != []


def test_the_cache_key_follows_the_master_the_limits_and_the_package(tmp_path):
    a = tmp_path / "a.ipynb"
    a.write_text("{}")
    key = selfcheck.cache_key(a, LIMITS, "digest")
    assert key == selfcheck.cache_key(a, LIMITS, "digest")
    assert key != selfcheck.cache_key(a, LIMITS, "other grader or course")
    assert key != selfcheck.cache_key(a, {**LIMITS, "cell_timeout": 1.0}, "digest")
    a.write_text('{"cells": []}')
    assert key != selfcheck.cache_key(a, LIMITS, "digest")


def test_a_report_of_the_same_grading_is_kept_and_another_is_redone(tmp_path):
    sub = tmp_path / "s.ipynb"
    sub.write_text("{}")
    stamp = classrun.fingerprint(sub, "digest", LIMITS)
    report = _report(1, 2)
    report.fingerprint = stamp
    base = tmp_path / "s"
    classrun.write_report(report, base)
    again = classrun.graded_before(base, stamp)
    assert again is not None and again.to_dict() == report.to_dict()
    assert (
        classrun.graded_before(base, classrun.fingerprint(sub, "new grader", LIMITS))
        is None
    )
    sub.write_text('{"changed": 1}')
    assert (
        classrun.graded_before(base, classrun.fingerprint(sub, "digest", LIMITS))
        is None
    )


def test_the_progress_line_counts_and_estimates(capsys):
    p = classrun.Progress(4, "notebooks graded", 2)
    p.start -= 60  # one minute in
    p.step("a.ipynb", "3/4 passed")
    line = capsys.readouterr().err
    assert line.startswith(
        "[1/4 notebooks graded, 1:00 elapsed, about 3:00 left, -j 2]"
    )
    assert "a.ipynb: 3/4 passed" in line


def test_a_class_in_parallel_calls_back_as_each_ends():
    seen = []
    classrun.in_parallel(abs, [-1, -2, -3], 2, lambda job, got: seen.append((job, got)))
    assert sorted(seen) == [(-3, 3), (-2, 2), (-1, 1)]
    seen.clear()
    classrun.in_parallel(
        abs, [-1, -2, -3], 1, lambda j, g: seen.append(g), lambda: seen
    )
    assert seen == [1]  # stopped after the first


# ------------------------------------------------------------------ slow


@pytest.mark.slow
def test_a_master_that_fails_here_stops_the_run_before_any_student(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(selfcheck.CACHE_ENV, str(tmp_path / "cache"))
    masters = tmp_path / "masters"
    master, at = _broken_master(masters)
    limits = [f"--{k.replace('_', '-')}={v:g}" for k, v in LIMITS.items()]
    rc = cli.main(["--check-masters", "--master", str(masters), *limits])
    out = capsys.readouterr()
    assert rc == cli.MASTERS_FAILED, out
    assert "master of chapter 2 (02_attention_recipe.ipynb) does not get full" in (
        out.err
    )
    # Each auto-checked exercise named, with the cell, the exception and the machine.
    for n in ("2.1", "2.2", "2.3", "2.4"):
        assert f"exercise {n} (" in out.err, out.err
    assert f"the master's cell {at} raised AssertionError" in out.err
    assert "on this machine" in out.err
    assert not list((tmp_path / "cache").glob("master-*"))  # a failure is not kept
    # A grading run checks first and grades no one.
    sub = tmp_path / "class" / "alice.ipynb"
    sub.parent.mkdir()
    sub.write_text(CHAPTER.read_text())
    reports = tmp_path / "reports"
    book = tmp_path / "grades.csv"
    rc = cli.main(
        [str(sub), "--master", str(masters), "--out", str(reports), "--csv", str(book)]
        + limits
    )
    err = capsys.readouterr().err
    assert rc == cli.MASTERS_FAILED
    assert "STOPPED before grading any student" in err
    assert not reports.exists() and not book.exists()


@pytest.mark.slow
def test_a_master_that_passes_is_checked_once_per_machine(
    tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv(selfcheck.CACHE_ENV, str(tmp_path / "cache"))
    limits = [f"--{k.replace('_', '-')}={v:g}" for k, v in LIMITS.items()]
    assert cli.main(["--check-masters", "--master", str(CHAPTER), *limits]) == 0
    first = capsys.readouterr().out
    assert "full marks on this machine (checked" in first, first
    assert len(list((tmp_path / "cache").glob("master-*.json"))) == 1
    assert cli.main(["--check-masters", "--master", str(CHAPTER), *limits]) == 0
    assert "remembered from an earlier check" in capsys.readouterr().out
