"""What the grader trusts: the check cells of a submission against its master's (the
integrity data), where the master is, and the digest of the installed package."""

from __future__ import annotations

import contextlib
import hashlib
import re
import warnings
from pathlib import Path

from attnlab.course.exercises import (
    cell_source,
    find_exercises,
    normalise,
)

from . import masters as _masters

OWN_OUTPUTS = (".graded.ipynb", ".grade.json", ".grade.txt")
_TITLE_ID = re.compile(r"^#\s+(\d+[A-Za-z]?)\.\s", re.M)


def chapter_id(nb) -> str | None:
    """The chapter's id in its title (``# 2. ...`` -> "2", ``# 7a. ...`` -> "7a"):
    the grader compares ids as text, so split chapters (7a, 7b) work too."""
    for cell in nb["cells"][:4]:
        if cell.get("cell_type") == "markdown":
            m = _TITLE_ID.search(cell_source(cell))
            if m:
                return m.group(1).lstrip("0") or "0"
    return None


class GradeError(Exception):
    """A submission that cannot be graded at all (unreadable, no master found)."""


class PackageChanged(GradeError):
    """The installed attnlab package changed while a notebook was graded."""


# ------------------------------------------------------------------ integrity


def integrity_problems(sub, master) -> tuple[list[str], dict[str, list[int]]]:
    """Compare the submission's check cells with the master's (the published ones).

    Returns the problems found (one per edited or removed check cell, or missing
    box, each naming the exercise's label) and, per intact exercise label, the
    submission's cells that hold its published checks (matched by their normalised
    source; when a student repeated a check cell, the last copy counts). Exercises
    with a problem are left out of the mapping: only they are refused.
    """
    problems: list[str] = []
    mapping: dict[str, list[int]] = {}
    sub_ex: dict = {}
    for e in find_exercises(sub):
        sub_ex.setdefault(e.label, e)  # a repeated box: the first one counts
    for ex in find_exercises(master):
        published = [normalise(cell_source(master["cells"][i])) for i in ex.check_cells]
        if not published:
            continue
        mine = sub_ex.get(ex.label)
        name = f"Exercise {ex.number} ({ex.label})"
        if mine is None:
            problems.append(f"{name}: its exercise box is missing")
            continue
        found, candidates, bad = [], list(mine.check_cells), False
        for src in published:
            hits = [
                i for i in candidates if normalise(cell_source(sub["cells"][i])) == src
            ]
            if hits:
                found.append(hits[-1])
                candidates = [i for i in candidates if i > hits[-1]]
            else:
                bad = True
                near = [
                    f"cell {i}: {normalise(cell_source(sub['cells'][i]))!r}"
                    for i in mine.check_cells
                ]
                seen = f"; found {'; '.join(near)}" if near else ""
                problems.append(
                    f"{name}: the check cell {src!r} was edited or removed (or the "
                    f"notebook is from another version of the course){seen}"
                )
        if not bad:
            mapping[ex.label] = found
    return problems, mapping


# ------------------------------------------------------------------ masters


def default_masters() -> Path | None:
    """The repository's chapters/ when attnlab is an editable install, else None
    (the packaged integrity data is used)."""
    import attnlab

    repo = Path(attnlab.__file__).resolve().parents[2] / "chapters"
    return repo if repo.is_dir() else None


def read_notebook(path: Path):
    import nbformat

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.read(str(path), as_version=4)
    except Exception as err:
        raise GradeError(f"{path}: not a readable notebook ({err})") from err
    return sanitised(nb, path)


def sanitised(nb, path) -> object:
    """A notebook whose every cell has a type the grader knows and a string source
    (a list of strings is joined); anything else is refused with a clear message,
    before any of it is used."""
    cells = nb.get("cells") if isinstance(nb, dict) else None
    if not isinstance(cells, list):
        raise GradeError(f"{path}: not a notebook (no list of cells)")
    for i, cell in enumerate(cells):
        if not isinstance(cell, dict):
            raise GradeError(f"{path}: cell {i} is not a cell")
        kind = cell.get("cell_type")
        if kind not in ("code", "markdown", "raw"):
            raise GradeError(f"{path}: cell {i} has an unknown type {kind!r}")
        src = cell.get("source", "")
        if isinstance(src, list) and all(isinstance(s, str) for s in src):
            cell["source"] = "".join(src)
        elif not isinstance(src, str):
            raise GradeError(
                f"{path}: cell {i}'s source is a {type(src).__name__}, not text"
            )
        if not isinstance(cell.get("metadata", {}), dict):
            cell["metadata"] = {}
        meta = cell.setdefault("metadata", {})
        tags = meta.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            meta["tags"] = []
        if "attnlab" in meta:
            own = meta["attnlab"]
            if not isinstance(own, dict):
                del meta["attnlab"]
            elif not isinstance(own.get("exercise", ""), str):
                del own["exercise"]
        if kind == "code":
            cell["outputs"] = []  # never trusted, never shown: the grader re-runs
            cell["execution_count"] = None
    return nb


def find_master(sub, sub_path: Path, master: Path | None = None) -> Path | str:
    """The master of a submission: ``master`` itself if it is a notebook; else, in the
    folder ``master`` (or the packaged data when there is none), the notebook of the
    same name, else the one with the chapter number of the title. Returns a path, or
    the packaged entry's name (``"packaged:NN_topic.ipynb"``)."""
    if master is not None and not master.exists():
        raise GradeError(f"--master {master} does not exist")
    if master is not None and master.is_file():
        return master
    n = chapter_id(sub)
    if master is not None:
        same = master / sub_path.name
        if same.is_file():
            return same
        hits = []
        if n is not None:
            for p in sorted(master.glob("*.ipynb")):
                with contextlib.suppress(GradeError):
                    if chapter_id(read_notebook(p)) == n:
                        hits.append(p)
        if len(hits) == 1:
            return hits[0]
        where = str(master)
    else:
        data = _masters.load()
        if sub_path.name in data:
            return f"packaged:{sub_path.name}"
        hits = [
            k
            for k, v in data.items()
            if n is not None and chapter_id(_masters.as_notebook(v)) == n
        ]
        if len(hits) == 1:
            return f"packaged:{hits[0]}"
        where = "the course's chapters (packaged with attnlab)"
    raise GradeError(
        f"{sub_path}: cannot tell which chapter this is (no {sub_path.name} in "
        f"{where}, title number {n}); pass --master"
    )


def master_entry(found: Path | str) -> dict:
    if isinstance(found, str) and found.startswith("packaged:"):
        return _masters.load()[found.split(":", 1)[1]]
    found = Path(found)
    # The student edition beside the masters (a clone's student/): its setup cell
    # and rendered markdown are the chapter's, not the student's.
    editions = [
        read_notebook(e)
        for e in [found.parent.parent / "student" / found.name]
        if e.is_file() and e.resolve() != found.resolve()
    ]
    return _masters.skeleton(read_notebook(found), editions)


def package_digest() -> str:
    """SHA-256 over the installed attnlab package's files and the grader's own
    (names and contents)."""
    import attnlab

    h = hashlib.sha256()
    for root in (Path(attnlab.__file__).resolve().parent, Path(__file__).parent):
        for p in sorted(root.rglob("*")):
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc":
                h.update(f"{root.name}/{p.relative_to(root)}".encode() + b"\0")
                h.update(p.read_bytes())
    return h.hexdigest()
