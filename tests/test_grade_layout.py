"""The grader under the house rules: its import floors (import-linter contracts in
``grader/pyproject.toml``), no private name crossing one of its modules, modules
readable in one sitting, and metadata that agrees with the library's."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from attnlab import grade  # noqa: F401 (puts the grader on the path in a clone)
from tests.test_layout import LIMIT, modules, private_imports

ROOT = Path(__file__).resolve().parents[1]
GRADER = ROOT / "grader"
PKG = GRADER / "src" / "attnlab_grade"

# The course's check core keeps two names private that only the grader reads: the
# entry point every check calls the student's function through (the sentry watches
# its code object and the replay stands in for it) and the flag that tells the checks
# a grader is watching, and the wrapper that names the student's bug. They belong to
# attnlab.course (check_core.py, check_diagnose.py), not to the grader.
COURSE_HOOKS = {"_call_answer", "_GRADING", "_Tracked", "_core", "_diagnose"}

# Modules over the limit, each with the reason it is not split (yet).
OVER_LIMIT: dict[str, str] = {
    "attnlab_grade.sentry": "the kernel's audit hook is one closure over what it "
    "captured at install: no global a notebook could swap is read at call time, and "
    "no class attribute (assigning one raises no audit event, so a Sentry class's "
    "methods could be swapped by a cell); its rules are data and closures built in "
    "attnlab_grade.policy, tested one by one",
}


def _grader_modules() -> dict[str, Path]:
    return modules(PKG)


def test_grader_import_contracts_are_kept():
    """``lint-imports`` over the grader's floors (no circle can come back)."""
    pytest.importorskip("importlinter")
    code = (
        "import sys; from importlinter.cli import lint_imports; "
        "sys.exit(lint_imports(config_filename='grader/pyproject.toml', "
        "no_cache=True, no_logo=True))"
    )
    path = os.pathsep.join([str(GRADER / "src"), str(ROOT / "src"), str(ROOT)])
    run = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": path, "PATH": os.environ.get("PATH", "")},
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "grader's floors" in run.stdout and "BROKEN" not in run.stdout
    # every module of the grader is on a floor: a new one must be placed
    text = (GRADER / "pyproject.toml").read_text()
    floors = set(re.findall(r"[a-z_]+", text.split("layers = [", 1)[1].split("]")[0]))
    names = {n.split(".")[-1] for n in _grader_modules() if n != "attnlab_grade"}
    assert names <= floors, names - floors


def test_the_grader_has_no_import_circle_in_its_graph():
    """The graph the contracts read is the real one (a call-time import included)."""
    grimp = pytest.importorskip("grimp")
    graph = grimp.build_graph("attnlab_grade", cache_dir=None)
    assert graph.direct_import_exists(
        importer="attnlab_grade.runner", imported="attnlab_grade.sandbox"
    )  # imported inside Runner.__init__
    for low, high in [
        ("attnlab_grade.clean", "attnlab_grade.verdicts"),
        ("attnlab_grade.masters", "attnlab_grade.clean"),
        ("attnlab_grade.integrity", "attnlab_grade.verdicts"),
    ]:
        assert not graph.chain_exists(importer=low, imported=high), (low, high)


def test_no_private_name_crosses_a_grader_module():
    bad = [
        hit
        for name, path in _grader_modules().items()
        for hit in private_imports(name, path)
        if not any(hit.endswith(h) or f" {h}" in hit for h in COURSE_HOOKS)
    ]
    assert not bad, "\n".join(bad)


def test_no_grader_module_over_the_limit():
    long = []
    for name, path in _grader_modules().items():
        n = len(path.read_text().splitlines())
        if n > LIMIT and name not in OVER_LIMIT:
            long.append(f"{name}: {n} lines (limit {LIMIT})")
    assert not long, long


def test_metadata_agrees_with_the_library():
    """The same Python floor as attnlab, and attnlab pinned to the release whose
    checks and exercises the grader reads (the one in this repository)."""
    import attnlab

    lib = (ROOT / "pyproject.toml").read_text()
    mine = (GRADER / "pyproject.toml").read_text()
    floor = re.search(r'^requires-python = "([^"]+)"', lib, re.M).group(1)
    assert re.search(r'^requires-python = "([^"]+)"', mine, re.M).group(1) == floor
    major_minor = ".".join(attnlab.__version__.split(".")[:2])
    assert f'"attnlab=={major_minor}.*"' in mine
    version = re.search(r'^version = "([^"]+)"', mine, re.M).group(1)
    assert version == attnlab.__version__
