"""The grader (attnlab.grade) and the notebook structure it reads (attnlab.course.exercises).

The graded notebooks are chapter 2 (the fastest chapter) and variants of its student
edition built here from its exercise structure, so the tests follow the chapter when
its exercises change. Tests that start a kernel are marked slow.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from attnlab import grade
from attnlab.course import exercises
from tools import student

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "02_attention_recipe.ipynb"

# Time limits for the tests, generous for a loaded machine; the infinite loop's test
# uses a short one of its own (LOOP) so that it costs little.
LIMITS = {"exercise_timeout": 60, "cell_timeout": 300, "time_limit": 600}
LOOP = 20


def _notes(report):
    """The report's notes but the one that says the kernels ran under the grader's uid
    (expected where the sandbox cannot drop privileges: not root, no setpriv, or a
    course below a folder other users cannot enter; the isolation is tested apart)."""
    from attnlab.grade import sandbox

    if sandbox.can_drop_privileges():
        return report.notes
    return [n for n in report.notes if "own user id" not in n]


def _load(path: Path) -> dict:
    return json.loads(path.read_text())


def _code(source: str) -> dict:
    return {
        "cell_type": "code",
        "metadata": {},
        "source": source,
        "outputs": [],
        "execution_count": None,
    }


def _student_edition() -> dict:
    return student.student_notebook(_load(CHAPTER))


def _answer_name(nb: dict, ex: exercises.Exercise) -> str:
    """The name the check cell passes to the check: the student's function."""
    src = exercises.cell_source(nb["cells"][ex.check_cells[0]])
    return src[src.index("(") + 1 : src.rindex(")")].strip()


def _exercises_only(nb: dict) -> dict:
    """The setup and title cells and the exercises' own cells: the chapter's exercise
    section without the rest of the chapter (whose cells the checks do not need)."""
    keep = {0, 1}
    for ex in exercises.find_exercises(nb):
        keep |= {ex.box_cell, *ex.work_cells, *ex.check_cells}
    return {**nb, "cells": [c for i, c in enumerate(nb["cells"]) if i in keep]}


def _write(tmp_path: Path, nb: dict, name: str = CHAPTER.name) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False))
    return path


# ------------------------------------------------------------- structure (fast)


def test_clean_runs_poll_in_slices(monkeypatch):
    """Every clean run waits for its kernel's replies in short polls, as the notebook's
    own run does: a missed pyzmq wake-up cost a clean run its 300-s cell timeout."""
    import nbformat
    from jupyter_client.channels import AsyncZMQSocketChannel

    from attnlab.course.zmq_poll import sliced_get_msg
    from attnlab.grade import clean, program

    class Stop(Exception):
        pass

    seen = []

    class Probe:  # stands in for the kernel runner: records how replies are awaited
        def __init__(self, *args, **kwargs):
            self.notes = []

        def run(self, *args, **kwargs):
            seen.append(AsyncZMQSocketChannel.get_msg is sliced_get_msg)
            raise Stop

        def close(self):
            pass

    monkeypatch.setattr(clean, "Runner", Probe)
    nb = nbformat.read(CHAPTER, as_version=4)
    ex = exercises.find_exercises(nb)[0]
    with pytest.raises(Stop):
        clean.grade_exercise(program.program(nb), nb, ex, "python3", 1, 1, 1, [], None)
    assert seen == [True]
    assert AsyncZMQSocketChannel.get_msg is not sliced_get_msg  # restored after


@pytest.mark.parametrize(
    "master", sorted((ROOT / "chapters").glob("*.ipynb")), ids=lambda p: p.stem[:3]
)
def test_no_master_solution_uses_what_its_check_forbids(master):
    """The clean run's static scan finds nothing in the book's own answers: a forbidden
    name the exercise itself asks students to call (chapter 4's comparison with
    linear_chain_marginals) would flag honest work."""
    import nbformat

    from attnlab.grade import clean

    nb = nbformat.read(master, as_version=4)
    for ex in exercises.find_exercises(nb):
        mine = sorted(set(ex.work_cells + ex.solution_cells))
        sources = [
            exercises.cell_source(nb.cells[i])
            for i in mine
            if nb.cells[i].cell_type == "code"
        ]
        flags = clean.static_flags(sources, clean.forbidden_of(ex.checks))
        assert flags == [], (ex.number, flags)


def test_finds_chapter_2_exercises_and_their_cells():
    nb = _load(CHAPTER)
    found = exercises.find_exercises(nb)
    assert len(found) >= 3
    for k, ex in enumerate(found, start=1):
        assert ex.number == f"2.{k}"
        assert ex.label.startswith("ex-") and ex.title
        assert ex.check_cells and ex.checks, f"{ex.label} has no check cell"
        assert ex.solution_cells, f"{ex.label} has no solution cell"
        assert max(ex.solution_cells) < min(ex.check_cells)
        for i in ex.check_cells:
            assert not exercises.is_solution(nb["cells"][i])
    stub_cells = [i for ex in found for i in ex.work_cells]
    assert all(
        "NotImplementedError" in exercises.cell_source(nb["cells"][i])
        for i in stub_cells
    )


def test_box_options_and_metadata_override():
    box = (
        "## Exercises\n\n````{exercise} Two things\n:label: ex-two\n"
        ":class: kind-predict kind-transfer minutes-25\n\nPredict, then do it.\n"
        "```python\nx = 1\n```\n````"
    )
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# 4. Title"},
            {"cell_type": "markdown", "metadata": {}, "source": box},
            _code("def f(x):\n    raise NotImplementedError"),
            _code("attnlab.check.a(f)\nattnlab.check.b(f)"),
            {"cell_type": "markdown", "metadata": {}, "source": ":::{exercise} Next"},
            _code("attnlab.check.c(g)"),
        ]
    }
    nb["cells"][5]["metadata"] = {"attnlab": {"exercise": "ex-two"}}
    first, second = exercises.find_exercises(nb)
    assert (first.label, first.title, first.number) == ("ex-two", "Two things", "4.1")
    assert first.text == "Predict, then do it.\n```python\nx = 1\n```"
    assert first.checks == ["a", "b", "c"] and first.check_cells == [3, 5]
    assert first.work_cells == [2]
    assert exercises.kinds(first) == (["predict", "transfer"], False)
    assert exercises.minutes(first, nb) == (25, False)
    assert second.label == "exercise-2" and second.check_cells == []


def test_inferred_kind_and_minutes_say_so():
    nb = _load(CHAPTER)
    for ex in exercises.find_exercises(nb):
        kinds, inferred = exercises.kinds(ex)
        assert kinds and set(kinds) <= set(exercises.KINDS)
        if not any(c.startswith("kind-") for c in ex.classes):
            assert inferred
        m, estimated = exercises.minutes(ex, nb)
        assert m >= 5 and m % 5 == 0 or not estimated


# ------------------------------------------------------------- integrity (fast)


def test_the_student_edition_keeps_the_published_checks():
    problems, mapping = grade.integrity_problems(_student_edition(), _load(CHAPTER))
    assert problems == []
    assert len(mapping) == len(exercises.find_exercises(_load(CHAPTER)))


def test_an_edited_check_costs_only_its_exercise():
    nb = _student_edition()
    ex = exercises.find_exercises(nb)[1]
    cell = nb["cells"][ex.check_cells[0]]
    cell["source"] = "print('✅ all passed')  # " + exercises.cell_source(cell)
    problems, mapping = grade.integrity_problems(nb, _load(CHAPTER))
    assert len(problems) == 1 and ex.label in problems[0]
    assert f"cell {ex.check_cells[0]}:" in problems[0]  # the report names the cell
    assert ex.label not in mapping  # refused; every other exercise is graded
    assert len(mapping) == len(exercises.find_exercises(nb)) - 1


def test_a_removed_check_or_box_is_refused():
    nb = _student_edition()
    found = exercises.find_exercises(nb)
    drop = {found[0].check_cells[0], found[2].box_cell}
    nb["cells"] = [c for i, c in enumerate(nb["cells"]) if i not in drop]
    problems, _ = grade.integrity_problems(nb, _load(CHAPTER))
    assert len(problems) == 2
    assert found[0].label in problems[0] and "edited or removed" in problems[0]
    assert found[2].label in problems[1] and "box is missing" in problems[1]


def test_packaged_masters_are_fresh_and_used_without_a_clone(tmp_path, monkeypatch):
    from attnlab.grade import masters

    assert masters.load() == masters.build(
        ROOT / "chapters", masters.editions_of(ROOT)
    ), (
        "grader/src/attnlab_grade/masters.json is stale: python -m attnlab.grade.build_masters "
        "chapters student"
    )
    monkeypatch.chdir(tmp_path)  # no chapters/ here
    path = _write(tmp_path, _student_edition(), "jane_doe_ch2.ipynb")
    found = grade.find_master(_load(path), path, None)
    assert found == f"packaged:{CHAPTER.name}"
    skeleton = masters.as_notebook(masters.load()[CHAPTER.name])
    problems, mapping = grade.integrity_problems(_student_edition(), skeleton)
    assert problems == [] and len(mapping) == len(exercises.find_exercises(skeleton))
    with pytest.raises(grade.GradeError, match="does not exist"):
        grade.find_master(_load(path), path, tmp_path / "nope.ipynb")


def test_submissions_from_files_folders_and_globs_skip_own_outputs(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.ipynb").write_text("{}")
    (tmp_path / "a" / "x.graded.ipynb").write_text("{}")
    (tmp_path / "a" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "a" / ".ipynb_checkpoints" / "x-checkpoint.ipynb").write_text("{}")
    (tmp_path / "b.ipynb").write_text("{}")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "c.ipynb").write_text("{}")
    got = grade.submissions(
        [tmp_path / "a", str(tmp_path / "*.ipynb"), tmp_path / "b.ipynb"],
        out=tmp_path / "out",
    )
    assert got == [tmp_path / "a" / "x.ipynb", tmp_path / "b.ipynb"]
    assert grade.submissions([tmp_path], out=tmp_path / "out") == got


def test_a_written_exercise_and_its_answer_are_found():
    box = "```{exercise} Derive it\n:label: ex-derive\n\nShow that ...\n```"
    md = {"cell_type": "markdown", "metadata": {}}
    nb = {
        "cells": [
            {**md, "source": "# 2. Title"},
            {**md, "source": box},
            {**md, "source": "*My derivation:* ..."},
            {**md, "source": "The worked solution", "metadata": {"tags": ["solution"]}},
        ]
    }
    (ex,) = exercises.find_exercises(nb)
    assert ex.check_cells == [] and ex.answer_cells == [2]


def test_a_box_rendered_as_plain_markdown_is_read_from_its_metadata():
    nb = _student_edition()
    expected = [(e.label, e.check_cells) for e in exercises.find_exercises(nb)]
    for ex in exercises.find_exercises(nb):
        cell = nb["cells"][ex.box_cell]
        cell["metadata"]["attnlab"] = {
            "exercise_box": [{"label": ex.label, "title": ex.title, "classes": []}]
        }
        cell["source"] = f"**Exercise {ex.number} · {ex.title}**\n\n{ex.text}"
    assert [(e.label, e.check_cells) for e in exercises.find_exercises(nb)] == expected
    assert grade.integrity_problems(nb, _load(CHAPTER))[0] == []


def test_a_repeated_check_and_extra_cells_are_allowed():
    nb = _student_edition()
    ex = exercises.find_exercises(nb)[0]
    check = nb["cells"][ex.check_cells[0]]
    extra = [_code("# my own test\nx = 1"), copy.deepcopy(check)]
    at = ex.check_cells[0]
    nb["cells"][at:at] = extra
    problems, mapping = grade.integrity_problems(nb, _load(CHAPTER))
    assert problems == []
    assert mapping[ex.label] == [at + 2]  # the last copy is the published one


def test_master_found_by_title_when_the_file_was_renamed(tmp_path):
    path = _write(tmp_path, _student_edition(), "jane_doe_ch2.ipynb")
    assert grade.find_master(_load(path), path, ROOT / "chapters") == CHAPTER
    nb = _student_edition()
    nb["cells"] = nb["cells"][2:]  # no title
    with pytest.raises(grade.GradeError, match="--master"):
        grade.find_master(nb, tmp_path / "x.ipynb", ROOT / "chapters")


# ------------------------------------------------------------- grading (kernel)


@pytest.mark.slow
@pytest.mark.parametrize(
    "chapter", [CHAPTER, ROOT / "chapters" / "03_smoothed_max.ipynb"], ids=["2", "3"]
)
def test_master_notebook_gets_full_marks(chapter):
    """The chapter's own solutions, graded with clean runs: every auto-checked
    exercise passes; a written one is counted apart (chapter 3's derivation)."""
    report = grade.grade(chapter, **LIMITS)
    assert report.status == "graded" and report.integrity == [], report.integrity
    found = exercises.find_exercises(_load(chapter))
    assert [e.label for e in report.exercises] == [e.label for e in found]
    auto = [e for e in found if e.check_cells]
    assert report.total == len(auto) and report.written == len(found) - len(auto)
    assert [e.status for e in report.exercises] == [
        "passed" if e.check_cells else "written" for e in found
    ], report.to_text()
    assert report.passed == report.total
    assert not _notes(report), report.notes


@pytest.mark.slow
def test_untouched_student_edition_scores_zero_not_attempted(tmp_path):
    path = _write(tmp_path, _student_edition())
    out = tmp_path / "reports"
    gradebook = tmp_path / "grades.csv"
    args = [str(path), "--no-check-masters", "--out", str(out)]
    assert grade.main([*args, "--csv", str(gradebook)]) == 0
    data = json.loads((out / f"{CHAPTER.stem}.grade.json").read_text())
    assert data["status"] == "graded"
    assert data["score"] == {
        "passed": 0,
        "total": len(data["exercises"]),
        "written": 0,
    }
    assert data["score"]["total"] >= 3
    for e in data["exercises"]:
        assert e["status"] == "not attempted", e
        assert "not implemented yet" in e["message"]
    n = data["score"]["total"]
    header, row = gradebook.read_text().splitlines()
    assert header.startswith("student,submission,status,passed,total,percent,2.1,")
    assert row.endswith(
        f",graded,0,{n},0.0," + ",".join(["not attempted"] * n) + ",0,ok"
    )
    text = (out / f"{CHAPTER.stem}.grade.txt").read_text()
    assert text.count("not attempted") == data["score"]["total"]
    assert "score: 0/" in text


@pytest.mark.slow
def test_wrong_answer_crash_and_infinite_loop_each_cost_one_exercise(tmp_path):
    nb = _exercises_only(_student_edition())
    master = _write(tmp_path, nb, "master.ipynb")  # the same published check cells
    nb = copy.deepcopy(nb)
    found = exercises.find_exercises(nb)[:3]
    wrong, crash, loop = (_answer_name(nb, ex) for ex in found)
    answers = [
        f"def {wrong}(*args, **kwargs):\n    return None  # a wrong answer",
        f"def {crash}(*args, **kwargs):\n    return None\n\n\n"
        "raise RuntimeError('student bug')",
        f"def {loop}(*args, **kwargs):\n    while True:  # never returns\n        pass",
    ]
    for ex, answer in zip(found, answers):
        nb["cells"][ex.work_cells[-1]]["source"] = answer
    limits = {**LIMITS, "exercise_timeout": LOOP}
    report = grade.grade(_write(tmp_path, nb), master=master, **limits)
    got = [(e.status, e.message) for e in report.exercises[:3]]
    assert [s for s, _ in got] == ["failed", "errored", "timed out"], report.to_text()
    assert "got None" in got[0][1] and got[0][1].startswith(found[0].checks[0])
    assert "RuntimeError: student bug" in got[1][1]
    assert f"{LOOP} s limit" in got[2][1]
    assert [e.status for e in report.exercises[3:]] == ["not attempted"] * (
        len(report.exercises) - 3
    )
    assert report.passed == 0 and not _notes(report), report.notes


@pytest.mark.slow
def test_killed_kernel_costs_one_exercise_state_rebuilt_check_replacement_flagged(
    tmp_path,
):
    src = _student_edition()
    found = exercises.find_exercises(src)[:2]
    box = [src["cells"][ex.box_cell] for ex in found]
    check = [src["cells"][ex.check_cells[0]] for ex in found]
    stub = [src["cells"][ex.work_cells[-1]] for ex in found]
    title = {"cell_type": "markdown", "metadata": {}, "source": "# 2. Tiny"}
    cells = [_code("import attnlab\nSTATE = 41"), title]
    cells += [box[0], _code("import os\n\nos._exit(1)"), stub[0], check[0]]
    # The second exercise also tries to cheat: strict mode off, the check replaced.
    name = found[1].checks[0]
    cheat = (
        "assert STATE == 41\nimport os\n\n"
        'os.environ["ATTNLAB_STRICT"] = "0"\n'
        f"attnlab.check.{name} = lambda fn: print('✅ {name}: all 6 cases passed')"
    )
    cells += [box[1], _code(cheat), stub[1], check[1]]
    nb = {**src, "cells": copy.deepcopy(cells)}
    master = {**src, "cells": copy.deepcopy(cells[:-3] + cells[-2:])}  # no cheat
    report = grade.grade(
        _write(tmp_path, nb, "tiny.ipynb"),
        master=_write(tmp_path, master, "tiny_master.ipynb"),
        **LIMITS,
    )
    first, second = report.exercises
    assert (first.status, first.message) == (
        "errored",
        "cell 3 (import os) killed the kernel",
    )
    # The second exercise runs in a new kernel that re-ran the cells before it (its
    # assert passed), and replacing its check is seen by the grader's sentry.
    assert second.status == "flagged", report.to_text()
    assert f"attnlab.check.{name}" in second.message
    assert any("kernel died" in n for n in report.notes)
