"""The grader's container (grader/container/): the recipe's scripts are sound, and, where
a root built by ``build.sh`` is named by ``ATTNLAB_GRADE_ROOT`` (the grader-container
workflow; a root shell), an honest and a cheating notebook are graded inside it."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "grader" / "container"


def test_the_recipe_scripts_parse_and_name_only_package_registries():
    for script in ("build.sh", "grade.sh"):
        run = subprocess.run(["bash", "-n", str(RECIPE / script)], capture_output=True)
        assert run.returncode == 0, run.stderr
    build = (RECIPE / "build.sh").read_text()
    assert "debootstrap" in build
    # no image pulled from anywhere: no docker or podman command in the recipe
    assert not re.search(r"^\s*(sudo\s+)?(docker|podman)\s", build, re.M)
    grade = (RECIPE / "grade.sh").read_text()
    assert "unshare --net" in grade  # no network inside
    assert "--master /opt/attnlab/chapters" in grade  # the masters are checked first


def test_the_cheating_notebook_differs_from_the_honest_one_only_in_2_2(tmp_path):
    sys.path.insert(0, str(RECIPE))
    try:
        import check
    finally:
        sys.path.remove(str(RECIPE))
    honest, cheat = check.notebooks(tmp_path)
    a = honest.read_text()
    b = cheat.read_text()
    assert a != b and "import _booster" not in a and "_booster" in b


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("ATTNLAB_GRADE_ROOT") or os.geteuid() != 0,
    reason="needs a root built by grader/container/build.sh (ATTNLAB_GRADE_ROOT), "
    "and root",
)
def test_an_honest_and_a_cheating_notebook_graded_in_the_container(tmp_path):
    run = subprocess.run(
        [sys.executable, str(RECIPE / "check.py"), os.environ["ATTNLAB_GRADE_ROOT"]]
        + [str(tmp_path / "graded")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
