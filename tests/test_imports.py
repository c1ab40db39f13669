"""Every attnlab module imports on its own, whatever was imported before it.

``import attnlab.x`` normally runs ``attnlab/__init__.py`` first, which imports nearly
everything in a fixed order, and that order can hide an import cycle (``data`` <->
``rationales`` worked only because ``data`` came first). Here one fresh interpreter
loops over the modules: for each it forgets every ``attnlab`` module, puts back a bare
package object without running ``__init__``, and imports that module alone. One
subprocess for all modules keeps it cheap (torch is imported once).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import attnlab

PKG = Path(attnlab.__file__).resolve().parent

SCRIPT = textwrap.dedent(
    """
    import importlib, sys, types, traceback
    pkg_dir, names = sys.argv[1], sys.argv[2:]
    failed = []
    for name in names:
        for mod in [m for m in sys.modules if m == "attnlab" or m.startswith("attnlab.")]:
            del sys.modules[mod]
        pkg = types.ModuleType("attnlab")
        pkg.__path__ = [pkg_dir]
        sys.modules["attnlab"] = pkg  # no __init__: nothing imported before `name`
        try:
            importlib.import_module(name)
        except Exception:
            failed.append(name + ":\\n" + traceback.format_exc(limit=3))
    print("\\n".join(failed))
    sys.exit(1 if failed else 0)
    """
)


def _modules() -> list[str]:
    names = []
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts))
    return names


def test_every_module_imports_on_its_own():
    names = _modules()
    assert {"attnlab.data", "attnlab.rationales", "attnlab.vocab"} <= set(names)
    run = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(PKG), *names],
        capture_output=True,
        text=True,
        env={"OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg", "PATH": ""},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]


def test_rationales_before_data_no_longer_fails():
    """The order that broke before: rationales first, without the package __init__."""
    code = (
        "import sys, types, importlib; p = types.ModuleType('attnlab'); "
        f"p.__path__ = [{str(PKG)!r}]; sys.modules['attnlab'] = p; "
        "r = importlib.import_module('attnlab.rationales'); "
        "d = importlib.import_module('attnlab.data'); "
        "assert d.rationale_task is r.rationale_task and d.Vocab is r.Vocab"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
