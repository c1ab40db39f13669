"""The notebook editions: the chapters as plain Jupyter notebooks, for every reader who
opens a notebook instead of the website (Colab, JupyterLab, VS Code, GitHub's viewer).

    python tools/editions.py write [--snapshot-from DIR]   student/ and full/ (and, with
                        DIR, glue-snapshot.json first, from the executed notebooks in DIR)
    python tools/editions.py check      exit 1 if student/, full/ or the snapshot is stale
    python tools/editions.py publish SITE_DIR   copy student/ and full/ into the built site

``make editions`` runs ``write --snapshot-from _build/jupyter_execute`` (the book's last
run), and ``make book`` does it after executing the chapters.

Two editions, both generated, both committed (Colab opens files from the repository):

* ``student/NN_topic.ipynb``: no solution cells, no outputs (:mod:`tools.solutions`);
* ``full/NN_topic.ipynb``: the whole chapter, solutions included, no outputs; what the
  chapter page's download button and full-chapter Colab button open.

In both, every markdown cell is plain Jupyter markdown (:mod:`tools.myst_plain`: glued
numbers, citations, exercise boxes, included code, admonitions, cross-references), and
the first cell is an install cell generated from ``_config.yml``'s repository URL
(:func:`tools.nbtools.edition_setup_cell`). Code cells are the master's, unchanged (the
grader matches check cells by their source).

The glued numbers come from ``glue-snapshot.json``, a committed record of the values the
book's run glued, so the editions change only when a master or a value changes, not on
every build. A value that varies from run to run (a timing) is never frozen into the
text: its name is in :data:`VOLATILE_GLUE`, the snapshot leaves it out, and the editions
point at the output of the measuring cell instead. When a refresh finds a value that changed although it
is not listed there, it says so: either the run changed, or the name belongs in the list.
"""

from __future__ import annotations

import copy
import json
import os
import re
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tools` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools import exercise_numbers, myst_plain, nbtools, solutions  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = ROOT / "glue-snapshot.json"
FULL = "full"
STUDENT = "student"
EDITIONS = (STUDENT, FULL)

# Glued values that vary from run to run (wall or CPU time, and ratios of times): the
# editions point at the cell's output instead of quoting one run. Add a name here when
# you glue a timing (and `make editions` reports a changed value that is not listed).
VOLATILE_GLUE = frozenset(
    {
        # 01: time per training step of Bahdanau's attention over Luong's
        "luong_speedup",
        # 03: forward+backward time of softmax, and the mappings' time ratios
        "t_soft",
        "r_sort",
        "r_default",
        "r_bisect",
        # 07: training wall time
        "train_seconds",
        # 08: live timings (the benchmark's own numbers come from a committed JSON)
        "ch8_naive_ratio_1024",
        "ch8_exp_over_exp2",
        "ch8_live_flash_ratio",
        # 09: live timings
        "ch9_window_time_frac",
        "ch9_kv_speedup",
        # 10: CPU seconds of the two max-flow solvers
        "ch10_t_nx",
        "ch10_t_lib",
    }
)


# Under each edition's title (CONTRIBUTING.md, "Results that travel").
RUN_NOTE = (
    "> **Numbers in the text** come from the book's own run of this notebook. Where "
    "they come from training, your run will differ in the last digits: another CPU or "
    "PyTorch version rounds differently, and after a few hundred steps that is another "
    "model. The checks on the page allow for it; comparisons over several seeds are "
    "loaded from the book's committed results, so they read the same everywhere."
)


def _page(path: Path) -> str:
    return f"chapters/{path.stem}"


# ---------------------------------------------------------------- the snapshot
def load_snapshot(path: Path = SNAPSHOT) -> dict[str, dict[str, str]]:
    """Chapter stem -> glue name -> ``text/plain`` of the value (empty if no file)."""
    if not path.exists():
        return {}
    return json.loads(path.read_text())["chapters"]


def _glue_of_outputs(nb: dict) -> dict[str, str]:
    """Glue name -> text/plain, from an executed notebook's outputs (myst-nb's glue)."""
    found = {}
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []) or []:
            meta = out.get("metadata", {}).get("scrapbook")
            if not meta:
                continue
            prefix = meta.get("mime_prefix", "")
            data = {k[len(prefix) :]: v for k, v in out.get("data", {}).items()}
            if "text/plain" in data:
                text = data["text/plain"]
                found[meta["name"]] = "".join(text) if isinstance(text, list) else text
    return found


def read_run(folder: Path) -> dict[str, dict[str, str]]:
    """The glued values of an executed book: ``folder/chapters/NN.glue.json`` (myst-nb)
    or the outputs of ``folder/chapters/NN.ipynb`` (or ``folder/NN.ipynb``)."""
    run = {}
    for master in sorted((ROOT / "chapters").glob("*.ipynb")):
        for base in (folder / "chapters", folder):
            glue_json = base / f"{master.stem}.glue.json"
            executed = base / master.name
            ran = [p for p in (glue_json, executed) if p.exists()]
            if ran and max(p.stat().st_mtime for p in ran) < master.stat().st_mtime:
                print(
                    f"glue snapshot: {master.stem} was edited after {base} ran it: kept"
                )
                break
            if glue_json.exists():
                data = json.loads(glue_json.read_text())
                values = {}
                for name, out in data.items():
                    text = out.get("data", {}).get("text/plain")
                    if text is not None:
                        values[name] = "".join(text) if isinstance(text, list) else text
                run[master.stem] = values
                break
            if executed.exists():
                run[master.stem] = _glue_of_outputs(json.loads(executed.read_text()))
                break
    return run


def _formats_used(masters: dict[str, dict]) -> dict[str, dict[str, set[str]]]:
    """Chapter -> glue name -> the format specs its text uses."""
    used: dict[str, dict[str, set[str]]] = {}
    role = re.compile(r"\{glue(?::text)?\}`([^`:]+)(?::([^`]*))?`")
    for stem, nb in masters.items():
        per = used.setdefault(stem, {})
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                for name, fmt in role.findall(solutions.cell_source(cell)):
                    per.setdefault(name.strip(), set()).add(fmt or "")
    return used


def refresh_snapshot(
    run: dict[str, dict[str, str]], masters: dict[str, dict]
) -> list[str]:
    """Write the snapshot from a run; returns notes (changed values, missing names).

    A value whose text as the page shows it did not change keeps its old raw text, so a
    re-run that differs only in the last digits leaves the file as it was.
    """
    old = load_snapshot()
    used = _formats_used(masters)
    notes, chapters = [], {}
    for stem in masters:
        values = run.get(stem)
        if values is None:
            notes.append(f"{stem}: not in the run; its snapshot is kept as it was")
            chapters[stem] = old.get(stem, {})
            continue
        kept = {}
        for name in sorted(values):
            if name in VOLATILE_GLUE:
                continue
            new, before = values[name], old.get(stem, {}).get(name)
            fmts = used.get(stem, {}).get(name, {""})
            if before is not None and before != new:
                shown = [
                    (_safe_format(before, f), _safe_format(new, f))
                    for f in sorted(fmts)
                ]
                if all(a == b for a, b in shown):
                    new = (
                        before  # the page shows the same text: keep the file as it was
                    )
                else:
                    a, b = shown[0]
                    notes.append(
                        f"{stem}: {name} changed from {a} to {b} (a timing? then add "
                        "it to VOLATILE_GLUE in tools/editions.py)"
                    )
            kept[name] = new
        for name in sorted(used.get(stem, {})):
            if name not in values and name not in VOLATILE_GLUE:
                notes.append(
                    f"{stem}: the text quotes {name!r}, which the run never glued"
                )
        chapters[stem] = kept
    data = {
        "about": (
            "The values the book's run glued (text/plain), per chapter: the notebook "
            "editions quote them. Written by `make editions` / `make book` "
            "(tools/editions.py); timings are left out (VOLATILE_GLUE)."
        ),
        "chapters": chapters,
    }
    write_if_changed(SNAPSHOT, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return notes


def _safe_format(text: str, fmt: str) -> str:
    try:
        return myst_plain.format_plain_text(text, fmt)
    except (TypeError, ValueError):
        return text


# ---------------------------------------------------------------- rendering
def _targets(masters: dict[str, dict]) -> tuple[dict, dict]:
    """Every label of the book (exercises, ``(label)=`` targets) and the exercises'
    number and kinds, numbered as the site numbers them (tools/exercise_numbers.py)."""
    from attnlab.course import exercises as ex_mod

    targets: dict[str, myst_plain.Target] = {}
    numbers: dict[str, dict[str, tuple[str, str]]] = {}
    for stem, nb in masters.items():
        page = f"chapters/{stem}"
        chapter = exercise_numbers.chapter_number(page)
        per = numbers.setdefault(stem, {})
        for k, ex in enumerate(ex_mod.find_exercises(nb), start=1):
            number = f"{chapter}.{k}" if chapter is not None else str(k)
            kinds = ", ".join(ex_mod.KINDS[kind] for kind in ex_mod.kinds(ex)[0])
            per[ex.label] = (number, kinds)
            targets[ex.label] = myst_plain.Target(f"Exercise {number}", page)
        for cell in nb["cells"]:
            if cell["cell_type"] != "markdown":
                continue
            lines = solutions.cell_source(cell).split("\n")
            for i, line in enumerate(lines):
                m = re.match(r"^\(([\w:.-]+)\)=\s*$", line)
                if m:
                    heading = next(
                        (ln.lstrip("#").strip() for ln in lines[i + 1 :] if ln.strip()),
                        m.group(1),
                    )
                    targets[m.group(1)] = myst_plain.Target(heading, page)
    return targets, numbers


class Renderer:
    """Renders the editions of every chapter (one bibliography and label index)."""

    def __init__(
        self, chapters: Path = ROOT / "chapters", snapshot=None, missing_glue="error"
    ):
        self.chapters = chapters
        self.masters = {
            p.stem: json.loads(p.read_text()) for p in sorted(chapters.glob("*.ipynb"))
        }
        self.snapshot = load_snapshot() if snapshot is None else snapshot
        self.refs = myst_plain.read_bib(ROOT / "references.bib")
        self.targets, self.numbers = _targets(self.masters)
        self.site = nbtools.site_url()
        self.missing_glue = missing_glue
        self.missing: list[str] = []

    def context(self, stem: str) -> myst_plain.Context:
        return myst_plain.Context(
            page=f"chapters/{stem}",
            source_dir=self.chapters,
            site_url=self.site,
            glue=self.snapshot.get(stem, {}),
            volatile=set(VOLATILE_GLUE),
            refs=self.refs,
            targets=self.targets,
            exercises=self.numbers.get(stem, {}),
            missing_glue=self.missing_glue,
        )

    def render(self, stem: str, edition: str) -> dict:
        """The ``edition`` (``student`` or ``full``) of chapter ``stem``."""
        nb = self.masters[stem]
        nb = solutions.student_notebook(nb) if edition == STUDENT else _cleared(nb)
        nb = copy.deepcopy(nb)
        ctx = self.context(stem)
        cells = []
        noted = False
        for i, cell in enumerate(nb["cells"]):
            if i == 0 and cell["cell_type"] == "code":
                cells.append(_setup_cell(cell, nbtools.edition_setup_cell(nb)))
                continue
            if cell["cell_type"] == "markdown":
                try:
                    text = myst_plain.render_markdown(solutions.cell_source(cell), ctx)
                except myst_plain.RenderError as err:
                    raise myst_plain.RenderError(
                        f"chapters/{stem}, cell {i}: {err}"
                    ) from None
                if not text.strip():
                    continue  # a solution-end marker, say: nothing left to show
                if not noted:  # under the chapter's title
                    text = text.rstrip("\n") + "\n\n" + RUN_NOTE
                    noted = True
                cell["source"] = text
                if ctx.boxes:  # the exercise boxes of this cell, for programs (grader)
                    meta = cell.setdefault("metadata", {}).setdefault("attnlab", {})
                    meta["exercise_box"] = list(ctx.boxes)
                    ctx.boxes.clear()
            cells.append(cell)
        self.missing += [f"{stem}: {name}" for name in ctx.missing]
        nb["cells"] = cells
        meta = nb.setdefault("metadata", {})
        meta["colab"] = {"provenance": [], "toc_visible": True}
        return nb


def _cleared(nb: dict) -> dict:
    """The notebook with every output cleared (the full edition)."""
    cells = []
    for cell in nb["cells"]:
        cell = dict(cell)
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
    return {**nb, "cells": cells}


def _setup_cell(cell: dict, source: str) -> dict:
    cell = dict(cell)
    cell["source"] = source
    meta = {k: v for k, v in cell.get("metadata", {}).items() if k != "tags"}
    meta["cellView"] = "form"  # Colab shows the cell's title, the code folded
    cell["metadata"] = meta
    return cell


def dumps(nb: dict) -> str:
    return json.dumps(nb, indent=1, ensure_ascii=False) + "\n"


def write_if_changed(target: Path, text: str) -> bool:
    """Write only a changed file, atomically (the tests may be reading it: make -j2)."""
    if target.exists() and target.read_text() == text:
        return False
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, target)
    return True


def expected(renderer: Renderer | None = None) -> dict[Path, str]:
    """Every edition file as it should be: path (relative to the root) -> text."""
    r = renderer or Renderer()
    return {
        Path(edition) / f"{stem}.ipynb": dumps(r.render(stem, edition))
        for edition in EDITIONS
        for stem in r.masters
    }


def write(root: Path = ROOT, renderer: Renderer | None = None) -> list[str]:
    """Write both editions under ``root``; returns the paths that changed."""
    changed = []
    files = expected(renderer)
    for rel, text in files.items():
        if write_if_changed(root / rel, text):
            changed.append(str(rel))
    for edition in EDITIONS:  # a chapter that was removed or renamed
        for path in (root / edition).glob("*.ipynb"):
            if Path(edition) / path.name not in files:
                path.unlink()
                changed.append(f"{edition}/{path.name} (removed)")
    return changed


def stale(root: Path = ROOT) -> list[str]:
    """What is out of date: editions that differ from masters + snapshot."""
    out = []
    try:
        files = expected()
    except myst_plain.RenderError as err:
        return [str(err)]
    for rel, text in files.items():
        path = root / rel
        if not path.exists():
            out.append(f"{rel} is missing")
        elif path.read_text() != text:
            out.append(f"{rel} is stale")
    for edition in EDITIONS:
        for path in (root / edition).glob("*.ipynb"):
            if Path(edition) / path.name not in files:
                out.append(f"{edition}/{path.name} has no chapter")
    return out


def publish(site: Path) -> None:
    """Copy the committed editions into the built site (``SITE/student``, ``SITE/full``)."""
    for edition in EDITIONS:
        for path in sorted((ROOT / edition).glob("*.ipynb")):
            write_if_changed(site / edition / path.name, path.read_text())


HOW = "run `make editions` (after `make book`, which also runs it) and commit"


def main(argv: list[str]) -> int:
    if argv[:1] == ["write"]:
        if len(argv) == 3 and argv[1] == "--snapshot-from":
            folder = Path(argv[2])
            run = read_run(folder)
            if not run:
                print(f"{folder}: no executed chapters found (run `make book` first)")
                return 1
            masters = {
                p.stem: json.loads(p.read_text())
                for p in sorted((ROOT / "chapters").glob("*.ipynb"))
            }
            for note in refresh_snapshot(run, masters):
                print(f"glue snapshot: {note}")
        elif len(argv) != 1:
            print(__doc__)
            return 2
        try:
            changed = write()
        except myst_plain.RenderError as err:
            print(f"error: {err}")
            return 1
        print(
            f"notebook editions: {len(changed)} file(s) updated"
            + "".join(f"\n  {c}" for c in changed)
        )
        return 0
    if argv == ["check"]:
        bad = stale()
        for line in bad:
            print(line)
        if bad:
            print(HOW)
        return 1 if bad else 0
    if len(argv) == 2 and argv[0] == "publish":
        publish(Path(argv[1]))
        return 0
    print(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
