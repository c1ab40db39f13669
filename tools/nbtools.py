"""Authoring helpers for chapter notebooks.

    python tools/nbtools.py setup-cell               print the canonical setup cell
    python tools/nbtools.py build SRC.md.py OUT.ipynb  write a notebook from a cell file
    python tools/nbtools.py check                    every notebook starts with the setup cell

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


def repository_url() -> str:
    """The repository URL, read from ``_config.yml`` (its one home)."""
    text = (ROOT / "_config.yml").read_text()
    m = re.search(r"^repository:\s*\n(?:\s+#.*\n)*\s+url:\s*(\S+)", text, re.M)
    if not m:
        raise SystemExit("_config.yml has no repository.url")
    return m.group(1)


def setup_cell_source() -> str:
    url = repository_url()
    return (
        "# Setup (hidden on the website). In Colab, install the course package first.\n"
        "import subprocess\n"
        "import sys\n"
        "\n"
        f'REPO = "git+{url}"\n'
        'if "google.colab" in sys.modules:\n'
        '    pip = [sys.executable, "-m", "pip", "install", "-q", REPO]\n'
        "    subprocess.run(pip, check=True)\n"
        "\n"
        "import attnlab\n"
        "\n"
        "device = attnlab.setup_notebook(seed=0)"
    )


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


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "setup-cell":
        print(setup_cell_source())
    elif cmd == "build" and len(sys.argv) == 4:
        build(Path(sys.argv[2]), Path(sys.argv[3]))
    elif cmd == "check":
        sys.exit(1 if check() else 0)
    else:
        sys.exit(__doc__)
