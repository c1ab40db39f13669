"""The exercise table of the instructors' page (tools/instructors.py)."""

from __future__ import annotations

import json
from pathlib import Path

from attnlab.course import exercises
from tools import instructors

ROOT = Path(__file__).resolve().parents[1]

CHAPTERS = sorted((ROOT / "chapters").glob("*.ipynb"))


def test_table_lists_every_exercise_with_its_check_and_cases():
    text = instructors.table(CHAPTERS)
    for path in CHAPTERS:
        nb = json.loads(path.read_text())
        assert f"</chapters/{path.stem}>" in text
        for ex in exercises.find_exercises(nb):
            row = next(
                line
                for line in text.splitlines()
                if line.startswith(f"| {ex.number} |")
            )
            assert f"<{ex.label}>" in row
            if not ex.checks:  # a written exercise (a derivation): no check cell
                assert "no check: a written answer" in row
                continue
            for name in ex.checks:
                assert f"`{name}`: " in row
                assert instructors.check_function(name) is not None, name
            assert " Cases (" in row, f"no case labels read for {ex.checks}"
            assert " min" in row
    assert "no such check" not in text


def test_case_labels_are_read_without_running_the_check(capsys):
    fn = instructors.check_function("winning_key")
    labels = instructors.check_cases(fn)
    assert len(labels) >= 3 and all(isinstance(s, str) and s for s in labels)
    assert capsys.readouterr().out == ""  # nothing ran, nothing printed
    assert instructors.check_function("no_such_check") is None
    assert instructors.describe_check("no_such_check").endswith("no such check")


def test_table_cells_never_break_the_markdown_table():
    assert instructors._one_line("a | b\n  ``x`` :func:`y`") == "a \\| b `x` `y`"


def test_written_exercises_and_forbidden_calls_are_shown(monkeypatch):
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": "# 2. T"},
            {
                "cell_type": "markdown",
                "metadata": {},
                "source": "```{exercise} Derive\n:label: ex-d\n\nShow it.\n```",
            },
        ]
    }
    monkeypatch.setattr(json, "loads", lambda text: nb)
    text = instructors.table([ROOT / "chapters" / "02_attention_recipe.ipynb"])
    assert "no check: a written answer" in text
    import attnlab.course.ch02_recipe.check as recipe

    monkeypatch.setattr(recipe, "FORBIDDEN", {"winning_key": ("x.y",)}, raising=False)
    assert instructors.describe_check("winning_key").endswith("Must not call: `x.y`.")


def test_the_time_rule_on_the_page_is_the_one_the_table_uses():
    from attnlab.course import exercises as exs

    page = " ".join((ROOT / "instructors.md").read_text().split())
    assert f"at {exs.WORDS_PER_MINUTE} words per minute" in page
    k = exs.KIND_MINUTES
    assert (
        f"{k['implement']} minutes to implement, {k['predict']} to predict and then "
        f"measure, {k['transfer']} for a transfer" in page
    )
    assert f"{k['written']} for a written derivation" in page
    assert (
        f"running it: {exs.RUN_MINUTES} minute, or {exs.TRAIN_MINUTES} when the "
        "solution trains a model" in page
    )
