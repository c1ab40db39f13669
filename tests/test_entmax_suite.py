"""The ``entmax`` package's own tests, run against attnlab through a name-mapping shim.

The entmax wheel ships ``entmax/test_root_finding.py`` and ``entmax/test_mask.py``. We
copy them into a temporary folder next to a small package also called ``entmax`` whose
names point at attnlab (``entmax.activations.sparsemax`` -> ``attnlab.sparsemax`` …)
and run pytest on them in a subprocess: there ``import entmax`` finds the shim, while
the real package stays installed here as the reference for the other tests.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import attnlab

SHIM = {
    "__init__.py": """
        from attnlab.mappings import (
            sparsemax, entmax15, Sparsemax, Entmax15, entmax_bisect, normmax_bisect,
        )
        from .root_finding import sparsemax_bisect
    """,
    "activations.py": """
        from attnlab.mappings import sparsemax, entmax15, Sparsemax, Entmax15
    """,
    "root_finding.py": """
        import attnlab.mappings as _m


        def entmax_bisect(X, alpha=1.5, dim=-1, n_iter=50, ensure_sum_one=True):
            return _m.entmax_bisect(X, alpha, dim)  # attnlab: iterations for the dtype


        def sparsemax_bisect(X, dim=-1, n_iter=50, ensure_sum_one=True):
            return _m.entmax_bisect(X, 2.0, dim)


        def normmax_bisect(X, alpha=2, dim=-1, n_iter=50):
            return _m.normmax_bisect(X, alpha, dim)


        def budget_bisect(*args, **kwargs):
            raise NotImplementedError("attnlab has no budget (k-subset) sparsemax")
    """,
}

# Left out, with the reason: attnlab has no budget-constrained sparsemax
# (budget_bisect), which is outside the course. test_budget_grad_multiple_k is
# one of them by name: it draws a "budget" k in (0, 6) and passes it to normmax_bisect
# as alpha, where normmax is defined for alpha > 1 only (entmax's docstring says so).
DESELECT = [
    "test_root_finding.py::test_budget",
    "test_root_finding.py::test_budget_grad",
    "test_root_finding.py::test_budget_grad_multiple_k",
]


def _entmax_tests() -> Path:
    spec = importlib.util.find_spec("entmax")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the entmax package (the reference) is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / "test_root_finding.py").exists():
        pytest.skip("this entmax wheel ships no tests")
    return folder


@pytest.mark.slow  # a second interpreter imports attnlab and runs ~50 gradchecks
def test_entmax_own_tests_pass_against_attnlab(tmp_path):
    folder = _entmax_tests()
    pkg = tmp_path / "entmax"
    pkg.mkdir()
    for name, body in SHIM.items():
        (pkg / name).write_text(textwrap.dedent(body))
    for name in ("test_root_finding.py", "test_mask.py"):
        shutil.copy(folder / name, tmp_path / name)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    here = str(Path(attnlab.__file__).resolve().parents[1])  # the attnlab under test
    path = os.pathsep.join([str(tmp_path), here])
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    cmd += ["test_root_finding.py", "test_mask.py"]
    cmd += [arg for test in DESELECT for arg in ("--deselect", test)]
    run = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True)
    tail = run.stdout[-3000:] + run.stderr[-2000:]
    assert run.returncode == 0, tail
    assert " passed" in tail and "failed" not in tail and "error" not in tail.lower()
    # the shim really was what the tests imported, not the installed package
    probe = subprocess.run(
        [sys.executable, "-c", "import entmax; print(entmax.entmax_bisect.__module__)"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    module = probe.stdout.strip()  # attnlab.mappings is a package: any of its modules
    assert module.split(".")[:2] == ["attnlab", "mappings"], probe.stdout + probe.stderr
