"""Red team: submissions that cheat, and the exact grades the grader must give them.

A class of seven notebooks made from chapter 2's student edition, cut down to the
setup cell, the title and the exercises (as tests/test_grade.py does, to save CPU),
with one added cell importing math and torch. Each notebook is a student:

* honest: full, half-solved (one wrong, one blank, a written prediction) and blank;
* local cheats (each costs its own exercise): a tensor subclass that says it equals
  anything, the check's own reference answer as the solution, a forbidden call made
  through a closure after the in-kernel tripwire was switched off, an edited check;
* patches in the kernel: ``print`` (the ✅ rewrite), ``torch.allclose``,
  ``numpy.allclose``, ``attnlab.check`` — in a cell outside the exercises, which
  no clean run executes (the notebook's own run reports them as integrity lines);
* exits and files: ``sys.exit`` inside a solution, ``os._exit`` in a cell, a fake
  report written into the submissions folder;
* attacks on the sentry: ``gc`` introspection, ``sys.setprofile(None)`` inside a
  solution, ``sys.audit`` replaced.

The class is graded in one call of the command line (a folder, ``-j 2``, a CSV), and
every grade is asserted. With the second class (below), the chapter-6 variants and
the sandbox test, the file took 284 s of CPU here (slow).
"""

from __future__ import annotations

import copy
import csv
import json
from pathlib import Path

import pytest

from attnlab import grade
from attnlab.check import recipe
from attnlab.course import exercises
from tools import student

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "chapters" / "02_attention_recipe.ipynb"
NAME = CHAPTER.name

HONEST = {
    "additive_score": """\
def additive_score(q, k, W1, W2, v):
    keys = (k @ W1.T).unsqueeze(-3)  # (..., 1, S, h)
    queries = (q @ W2.T).unsqueeze(-2)  # (..., T, 1, h)
    return torch.tanh(queries + keys) @ v""",
    "smallest_booster": """\
EMB = {"A": (1.0, 0.0), "B": (0.0, 1.0), "C": (0.8, 0.2)}


def b_weight(seq, c):
    X = torch.tensor([EMB[t] for t in seq], dtype=torch.float64)  # (S, 2)
    W_q = torch.tensor([[0.0, 1.0], [0.0, 1.0]], dtype=torch.float64)
    _, w = attnlab.attend((X @ W_q)[:1], c * X, X)
    return float(w[0, [t == "B" for t in seq]].sum())


def smallest_booster(seq, target):
    if "B" not in seq:
        return math.inf
    if b_weight(seq, 0.0) >= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while b_weight(seq, hi) < target:
        lo, hi = hi, 2 * hi
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if b_weight(seq, mid) < target else (lo, mid)
    return hi""",
    "winning_key": """\
def winning_key(angle, keys):
    rad = math.radians(angle)
    direction = torch.tensor([math.cos(rad), math.sin(rad)], dtype=keys.dtype)
    return int((keys @ direction).argmax())""",
    "factor_bilinear": """\
def factor_bilinear(W):
    U, sigma, Vh = torch.linalg.svd(W, full_matrices=False)
    r = int((sigma > sigma.max() * 1e-10).sum())
    root = sigma[:r].sqrt()
    return root[:, None] * Vh[:r], root[:, None] * U[:, :r].T""",
}
ORDER = ["additive_score", "smallest_booster", "winning_key", "factor_bilinear"]
REFERENCE = next(
    n for n in dir(recipe) if n.startswith("_") and "booster" in n and "ref" in n
)


def _code(source: str) -> dict:
    return {
        "cell_type": "code",
        "metadata": {},
        "source": source,
        "outputs": [],
        "execution_count": None,
    }


def _base() -> dict:
    """Chapter 2's student edition: setup, title, a student's import cell, exercises."""
    nb = student.student_notebook(json.loads(CHAPTER.read_text()))
    keep = {0, 1}
    for ex in exercises.find_exercises(nb):
        keep |= {ex.box_cell, *ex.work_cells, *ex.check_cells, *ex.answer_cells}
    cells = [c for i, c in enumerate(nb["cells"]) if i in keep]
    cells.insert(2, _code("import math\n\nimport torch"))
    return {**nb, "cells": cells}


def _notebook(answers: dict[str, str], extra: str = "", edit: str = "") -> dict:
    """The base notebook with stubs replaced by ``answers`` (check name -> code), an
    extra cell before the exercises, and the check cell of ``edit`` changed."""
    nb = copy.deepcopy(_base())
    for ex in exercises.find_exercises(nb):
        name = ex.checks[0]
        if name in answers:
            nb["cells"][ex.work_cells[-1]]["source"] = answers[name]
        if name == edit:
            cell = nb["cells"][ex.check_cells[0]]
            cell["source"] = exercises.cell_source(cell) + "  # mine now"
    if extra:
        nb["cells"].insert(3, _code(extra))
    return nb


def _class(folder: Path, out: Path) -> dict[str, dict]:
    honest = dict(HONEST)
    local = {
        "additive_score": """\
class Agreeable(torch.Tensor):  # says it equals whatever it is compared with
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal, torch.Tensor.__eq__):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def additive_score(q, k, W1, W2, v):
    return torch.zeros(q.shape[:-1] + k.shape[-2:-1]).as_subclass(Agreeable)""",
        "smallest_booster": f"from attnlab.check.recipe import {REFERENCE} as "
        "smallest_booster",
        "winning_key": """\
import contextlib

attnlab.check._core._tripwires = lambda forbid, fn: contextlib.nullcontext([])


def _make():
    attend = attnlab.attention.attend  # held in a closure: no tripwire reaches it

    def winning_key(angle, keys):
        rad = math.radians(angle)
        q = 1e4 * torch.tensor([[math.cos(rad), math.sin(rad)]], dtype=torch.float64)
        _, w = attend(q, keys.double(), keys.double())
        return int(w[0].argmax())

    return winning_key


winning_key = _make()""",
        "factor_bilinear": HONEST["factor_bilinear"],
    }
    patches = """\
import builtins

import numpy

_print = builtins.print


def _cheerful(*a, **k):
    a = [str(x).replace("❌", "✅").replace("⏳", "✅") for x in a]
    _print(*a, **k)


builtins.print = _cheerful
torch.allclose = lambda *a, **k: True
numpy.allclose = lambda *a, **k: True
attnlab.check.winning_key = lambda fn: print("✅ winning_key: all 8 cases passed")"""
    fake = {
        "status": "graded",
        "score": {"passed": 4, "total": 4},
        "exercises": [{"number": f"2.{k}", "status": "passed"} for k in range(1, 5)],
    }
    files = {
        "additive_score": HONEST["additive_score"],
        "smallest_booster": HONEST["smallest_booster"].replace(
            "def smallest_booster(seq, target):\n",
            "def smallest_booster(seq, target):\n    import sys\n\n    sys.exit(0)\n",
        ),
        "winning_key": HONEST["winning_key"] + "\n\n\nimport os\n\nos._exit(1)",
        "factor_bilinear": HONEST["factor_bilinear"]
        + f"\n\n\nimport json\n\nwith open({str(out / 'frank_files.grade.json')!r},"
        f" 'w') as f:\n    json.dump({fake!r}, f)",
    }
    sentry = {
        "additive_score": HONEST["additive_score"],
        "smallest_booster": HONEST["smallest_booster"]
        + "\n\n\nimport gc\n\nsnooped = len(gc.get_objects())",
        "winning_key": HONEST["winning_key"].replace(
            "    rad = ", "    import sys\n\n    sys.setprofile(None)\n    rad = "
        ),
        "factor_bilinear": HONEST["factor_bilinear"]
        + "\n\n\nimport sys\n\nsys.audit = lambda *a: None",
    }
    half = {
        "additive_score": HONEST["additive_score"],
        "smallest_booster": "def smallest_booster(seq, target):\n    return 6.0",
        "winning_key": HONEST["winning_key"],
    }
    class_ = {
        "alice_full": _notebook(honest),
        "bob_half": _notebook(half),
        "carol_blank": _notebook({}),
        "dave_local": _notebook(local, edit="factor_bilinear"),
        "erin_patches": _notebook({}, extra=patches),
        "frank_files": _notebook(files),
        "grace_sentry": _notebook(sentry),
    }
    # bob writes his prediction for 2.2
    nb = class_["bob_half"]
    ex = exercises.find_exercises(nb)[1]
    nb["cells"][ex.answer_cells[0]]["source"] = "*My prediction:* c is about 5."
    folder.mkdir(parents=True, exist_ok=True)
    for who, nb in class_.items():
        (folder / f"{who}.ipynb").write_text(json.dumps(nb, indent=1))
    return class_


EXPECTED = {
    "alice_full": ["passed", "passed", "passed", "passed"],
    "bob_half": ["passed", "failed", "passed", "not attempted"],
    "carol_blank": ["not attempted"] * 4,
    "dave_local": ["failed", "flagged", "flagged", "refused"],
    # Patches in a cell outside the exercises cannot reach a clean run: the stubs
    # are not attempted, and the notebook's own run reports the patches (integrity).
    "erin_patches": ["not attempted"] * 4,
    "frank_files": ["passed", "errored", "errored", "flagged"],
    "grace_sentry": ["passed", "flagged", "flagged", "flagged"],
}


@pytest.mark.slow
def test_red_team_class_gets_exactly_the_grades_it_earned(tmp_path):
    from attnlab.grade import sandbox as _sandbox

    if not _sandbox.can_drop_privileges():
        pytest.skip(
            "the red team's classmates attack each other's files: it needs the uid "
            "sandbox (root, setpriv, and a course other users may read)"
        )
    folder = tmp_path / "submissions"
    out = tmp_path / "reports"
    out.mkdir()
    _class(folder, out)
    book = tmp_path / "grades.csv"
    rc = grade.main(
        [
            str(folder),
            "--no-check-masters",  # the masters' check has its own tests
            "-j",
            "2",
            "--out",
            str(out),
            "--csv",
            str(book),
            "--exercise-timeout",
            "60",
            "--forbid",
            "winning_key=attnlab.attention.attend",
        ]
    )
    assert rc == 0
    rows = {r["student"]: r for r in csv.DictReader(book.open())}
    reports = {
        who: json.loads((out / f"{who}.grade.json").read_text()) for who in EXPECTED
    }
    got = {who: [e["status"] for e in r["exercises"]] for who, r in reports.items()}
    assert got == EXPECTED, json.dumps(
        {
            w: [(e["status"], e["message"][:200]) for e in r["exercises"]]
            for w, r in reports.items()
        },
        indent=1,
        ensure_ascii=False,
    )
    for who, statuses in EXPECTED.items():
        row = rows[who]
        assert [row[f"2.{k}"] for k in range(1, 5)] == statuses
        assert int(row["passed"]) == statuses.count("passed")
    msg = {who: [e["message"] for e in r["exercises"]] for who, r in reports.items()}
    # The replayed check's own message, hint included, from the grader's process.
    assert msg["bob_half"][1].startswith("smallest_booster: case ")
    assert "got 6.0" in msg["bob_half"][1]
    assert reports["bob_half"]["exercises"][1]["answers"] == [
        {
            "cell": exercises.find_exercises(_base())[1].answer_cells[0],
            "text": "*My prediction:* c is about 5.",
        }
    ]
    assert "Agreeable" in msg["dave_local"][0] and "tensor" in msg["dave_local"][0]
    assert REFERENCE in msg["dave_local"][1]
    assert "attnlab.attention.attend" in msg["dave_local"][2]
    assert "edited" in msg["dave_local"][3] and "cell " in msg["dave_local"][3]
    erin = reports["erin_patches"]["integrity"]
    for name in ("builtins.print", "torch.allclose", "numpy.allclose", "winning_key"):
        assert any(name in m and "second opinion" in m for m in erin), (name, erin)
    assert rows["erin_patches"]["integrity"] != "ok"
    assert "SystemExit" in msg["frank_files"][1]
    assert "killed the kernel" in msg["frank_files"][2]
    assert "frank_files.grade.json" in msg["frank_files"][3]
    # The fake report was overwritten by the real one, written after every kernel.
    assert reports["frank_files"]["score"] == {"passed": 1, "total": 4, "written": 0}
    assert "gc.get_objects" in msg["grace_sentry"][1]
    assert "sys.setprofile" in msg["grace_sentry"][2]
    assert "monitor" in msg["grace_sentry"][3]


# ---------------------------------------------------------------- a second class
# Attack classes of our own (issue 39), each on the exercise it needs only (the
# other exercises stay stubs, which cost no clean run), and the honest variants the
# first grader marked wrong.

HONEST_VARIANTS = {
    # torch.manual_seed reads frames inside torch; assert_close's message machinery
    # too: neither is the student's introspection.
    "additive_score": HONEST["additive_score"].replace(
        "    keys = ", "    torch.manual_seed(0)\n    keys = "
    )
    + "\n\n\ntorch.testing.assert_close(additive_score(*[torch.ones(1, 2)] * 2, "
    "torch.ones(3, 2), torch.ones(3, 2), torch.ones(3)).shape[-1], 1)"
    # networkx swaps its own wrappers' __code__ on first call, and libraries read
    # /proc/self/mountinfo to count CPUs: chapter 10's honest cells do both
    "\n\nimport networkx as nx\n\n_g = nx.DiGraph()\n_g.add_edge(0, 1)\n"
    "assert nx.shortest_path_length(_g, 0) == {0: 0, 1: 1}\n"
    'assert open("/proc/self/mountinfo").read()\n'
    'assert open("/proc/sys/kernel/random/boot_id").read()\n'
    # a pipe opened for writing by its descriptor (multiprocessing's spawn does it;
    # chapter 14's ring attention spawns two processes)
    "import os\n\n_r, _w = os.pipe()\nwith open(_w, 'w') as _f:\n    _f.write('x')\n"
    "assert os.read(_r, 1) == b'x'\nos.close(_r)",
    "winning_key": HONEST["winning_key"].replace(
        "    return int(",
        "    torch.testing.assert_close(direction.norm(), "
        "torch.tensor(1.0, dtype=keys.dtype))\n    return int(",
    ),
    # a namedtuple: the notebook's check shows ✅, so the grader must agree
    "factor_bilinear": "import collections\n\nFactors = collections.namedtuple("
    '"Factors", "A B")\n\n\n'
    + HONEST["factor_bilinear"].replace(
        "    return root[:, None] * Vh[:r], root[:, None] * U[:, :r].T",
        "    return Factors(root[:, None] * Vh[:r], root[:, None] * U[:, :r].T)",
    ),
}

STARTUP = """\
import os
import pathlib
import site

home = pathlib.Path(os.path.expanduser("~"))
payload = "open({marker!r} + '/' + str(os.getpid()), 'w').write('ran')\\n"
for p in [
    home / ".ipython/profile_default/startup/00-own.py",
    pathlib.Path(site.getusersitepackages()) / "usercustomize.py",
    home / ".jupyter/jupyter_config.py",
    pathlib.Path(os.environ["TMPDIR"]) / "sitecustomize.py",
]:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(payload)
"""

CROSS = """\
import os

wrote = []
for target in [
    "/" + {victim!r},  # a leading // got past the old guard
    os.path.join(os.path.dirname({victim!r}), ".", os.path.basename({victim!r})),
    {package!r},
]:
    try:
        with open(target, "a") as f:
            f.write("")
        wrote.append(target)
    except OSError:
        pass
try:
    os.symlink({victim!r}, "mine.ipynb")
    open("mine.ipynb", "w").write("{{}}")
    wrote.append("symlink")
except OSError:
    pass
"""

THREAD = """\
import threading
import time


def _meddle():  # alive when the check begins: it could patch anything meanwhile
    time.sleep(30)


threading.Thread(target=_meddle, daemon=True).start()
"""

NEW_CLASS = """\
from attnlab.scoring import AdditiveScore as _Built


def additive_score(q, k, W1, W2, v):
    m = _Built.__new__(_Built)  # no constructor: an old tripwire watched __init__
    torch.nn.Module.__init__(m)
    m.W1, m.W2, m.v = (torch.nn.Parameter(t) for t in (W1, W2, v))
    return m.forward(q, k)
"""

COMPILED = """\
import attnlab.check.recipe as _r

_src = "def winning_key(angle, keys):\\n    return int(keys[:, 0].argmax())\\n"
_ns = {{}}
exec(compile(_src, _r.__file__, "exec"), _ns)  # code under a library file name
winning_key = _ns["winning_key"]
"""

CODE_SWAP = """\
import attnlab.check as _c


def additive_score(q, k, W1, W2, v):
    return torch.zeros(*q.shape[:-1], k.shape[-2])  # wrong


def _always(*args, **kwargs):
    return True


try:  # a library may swap its own code (networkx does); a student may not swap ours
    _c.additive_score.__code__ = _always.__code__
except (PermissionError, AttributeError, ValueError):
    pass
"""

MALFORMED = """\
k = get_ipython().kernel
for kind, content in [
    ("stream", {"name": 3, "text": 5}),
    ("stream", {"data": 7, "metadata": []}),
    ("display_data", {"data": {"text/plain": 9}, "transient": 4}),
    ("status", {}),
]:
    k.session.send(k.iopub_socket, kind, content=content, parent=k.get_parent())
k.session.send(k.iopub_socket, "stream", content={"name": "stdout", "text": "x"},
               parent=[])  # a parent header that is no dict
print("x" * 3_000_000)  # over the output cap
"""


def _second_class(folder: Path, marker: str) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}

    def put(who: str, nb: dict, name: str | None = None) -> None:
        p = folder / (name or f"{who}.ipynb")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(nb, indent=1))
        paths[who] = p

    put("olga_variants", _notebook(HONEST_VARIANTS))
    victim = str(folder / "olga_variants.ipynb")
    import attnlab

    package = str(Path(attnlab.__file__).resolve().parent / "check" / "__init__.py")
    put(
        "hank_home",
        _notebook(
            {"additive_score": HONEST["additive_score"]},
            extra=STARTUP.format(marker=marker),
        ),
    )
    put(
        "mallory_cross",
        _notebook(
            {
                "additive_score": HONEST["additive_score"]
                + "\n\n\n"
                + CROSS.format(victim=victim, package=package)
            }
        ),
    )
    put(
        "trudy_thread",
        _notebook({"additive_score": THREAD + "\n\n" + HONEST["additive_score"]}),
    )
    put("victor_new", _notebook({"additive_score": NEW_CLASS}))
    put("wendy_compiled", _notebook({"winning_key": COMPILED.format()}))
    put("uma_code", _notebook({"additive_score": CODE_SWAP}))
    # Exercise 2.1's box, answer and check four times, and no other box.
    nb = _notebook({"additive_score": HONEST["additive_score"]})
    found = exercises.find_exercises(nb)
    first = found[0]
    block = [
        nb["cells"][i]
        for i in sorted({first.box_cell, *first.work_cells, *first.check_cells})
    ]
    head = nb["cells"][: first.box_cell]
    put("xavier_dupes", {**nb, "cells": head + copy.deepcopy(block * 4)})
    # Chapter 3's notebook under chapter 2's file name.
    other = student.student_notebook(
        json.loads((ROOT / "chapters" / "03_smoothed_max.ipynb").read_text())
    )
    put("yusuf_other", other, name=f"yusuf/{NAME}")
    put(
        "zoe_malformed",
        _notebook({"additive_score": HONEST["additive_score"]}, extra=MALFORMED),
    )
    bad = _notebook({})
    bad["cells"][3]["source"] = 42
    put("quinn_source", bad)
    put("formula", _notebook({}), name="=HYPERLINK(1).ipynb")
    return paths


SECOND_EXPECTED = {
    "olga_variants": ["passed", "not attempted", "passed", "passed"],
    "hank_home": ["passed"] + ["not attempted"] * 3,
    "mallory_cross": ["flagged"] + ["not attempted"] * 3,
    "trudy_thread": ["flagged"] + ["not attempted"] * 3,
    "victor_new": ["flagged"] + ["not attempted"] * 3,
    "wendy_compiled": ["not attempted", "not attempted", "flagged", "not attempted"],
    "uma_code": ["flagged"] + ["not attempted"] * 3,
    "xavier_dupes": ["passed", "refused", "refused", "refused"],
    "zoe_malformed": ["passed"] + ["not attempted"] * 3,
    "formula": ["not attempted"] * 4,
}


@pytest.mark.slow
def test_red_team_second_class_isolation_and_new_attacks(tmp_path):
    from attnlab.grade import sandbox as _sandbox

    if not _sandbox.can_drop_privileges():
        pytest.skip(
            "the red team's classmates attack each other's files: it needs the uid "
            "sandbox (root, setpriv, and a course other users may read)"
        )
    import os
    import tempfile

    from attnlab.grade import sandbox

    folder = tmp_path / "class2"
    out = tmp_path / "reports2"
    marker = tempfile.mkdtemp(prefix="attnlab-redteam-")
    os.chmod(marker, 0o777)  # any kernel could write here: none may run the payload
    try:
        paths = _second_class(folder, marker)
        before = {w: p.read_bytes() for w, p in paths.items()}
        import attnlab

        pkg = Path(attnlab.__file__).resolve().parent
        pkg_before = grade.package_digest()
        book = tmp_path / "grades2.csv"
        rc = grade.main(
            [str(folder), "--no-check-masters", "-j", "2"]
            + ["--out", str(out), "--csv", str(book)]
        )
        ran = os.listdir(marker)
    finally:
        import shutil

        shutil.rmtree(marker, ignore_errors=True)
    # Two notebooks could not be graded (another chapter; a source that is a
    # number): the run goes on, and says so in its exit code and rows.
    assert rc == 1
    assert not ran, f"a startup file planted by a submission ran in a kernel: {ran}"
    assert grade.package_digest() == pkg_before and pkg.is_dir()
    assert {w: p.read_bytes() for w, p in paths.items()} == before
    rows = {r["submission"]: r for r in csv.DictReader(book.open())}
    reports = {}
    for who in SECOND_EXPECTED:
        stem = "=HYPERLINK(1)" if who == "formula" else who
        reports[who] = json.loads((out / f"{stem}.grade.json").read_text())
    got = {w: [e["status"] for e in r["exercises"]] for w, r in reports.items()}
    assert got == SECOND_EXPECTED, json.dumps(
        {
            w: [(e["status"], e["message"][:300]) for e in r["exercises"]]
            + r["integrity"]
            + r["notes"]
            for w, r in reports.items()
        },
        indent=1,
        ensure_ascii=False,
    )
    msg = {w: [e["message"] for e in r["exercises"]] for w, r in reports.items()}
    assert (
        "wrote into" in msg["mallory_cross"][0] or "opened" in msg["mallory_cross"][0]
    )
    assert "thread" in msg["trudy_thread"][0]
    assert "AdditiveScore" in msg["victor_new"][0]
    assert "compile" in msg["wendy_compiled"][2]
    dupes = reports["xavier_dupes"]
    assert sum("appears again" in p for p in dupes["integrity"]) == 3
    assert "missing" in msg["xavier_dupes"][1]
    assert any("malformed" in n for n in reports["zoe_malformed"]["notes"])
    assert any("capped" in n for n in reports["zoe_malformed"]["notes"])
    yusuf = rows[str(paths["yusuf_other"])]
    assert "chapter 3" in yusuf["status"] and "refused" in yusuf["status"]
    quinn = rows[str(paths["quinn_source"])]
    assert "source is a int" in quinn["status"]
    formula = rows[str(paths["formula"])]
    assert formula["student"].startswith("'=")
    # Written apart from the percentage; an integrity column.
    olga = rows[str(paths["olga_variants"])]
    assert (olga["passed"], olga["total"], olga["percent"]) == ("3", "4", "75.0")
    assert olga["written"] == "0" and olga["integrity"] == "ok"
    if sandbox.can_drop_privileges():  # CI and this machine run as root
        assert not any("own user id" in n for n in reports["olga_variants"]["notes"])


def test_a_sandboxed_write_fails_even_for_root(tmp_path):
    """As root, a kernel's uid cannot write the package or another's files."""
    import os
    import subprocess
    import sys

    from attnlab.grade import sandbox

    if not sandbox.can_drop_privileges():
        pytest.skip("needs root and setpriv (CI runs as root)")
    victim = tmp_path / "victim.ipynb"
    victim.write_text("{}")
    os.chmod(tmp_path, 0o755)
    box = sandbox.Sandbox()
    other = sandbox.Sandbox()
    try:
        code = (
            "import os, sys\n"
            "ok = []\n"
            "for p in sys.argv[1:]:\n"
            "    try:\n"
            "        open(p, 'a').close(); ok.append(p)\n"
            "    except OSError:\n"
            "        pass\n"
            "open(os.path.join(os.environ['HOME'], 'mine'), 'w').write('x')\n"
            "print(os.getuid(), ok)\n"
        )
        import attnlab

        targets = [
            str(victim),
            "/" + str(victim),
            str(Path(attnlab.__file__).resolve()),
            os.path.join(other.home, "planted.py"),
        ]
        out = subprocess.run(
            [*box.prefix(), sys.executable, "-c", code, *targets],
            env=box.env(),
            cwd=box.work,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr
        uid, wrote = out.stdout.split(" ", 1)
        assert int(uid) == box.uid != 0
        assert wrote.strip() == "[]", wrote
        assert victim.read_text() == "{}"
        assert (Path(box.home) / "mine").read_text() == "x"  # its own HOME works
    finally:
        box.close()
        other.close()
    assert not Path(box.root).exists() and box.pids() == []


@pytest.mark.slow
def test_honest_variants_of_chapter_6_pass(tmp_path):
    """The book's own 6.1 (attnlab's SDPA, whose fast path calls torch's) and 6.2
    (``torch.manual_seed`` reads frames inside torch), and 6.3 with
    ``need_weights=False`` (PyTorch's SDPA path, forbidden to 6.1 only): every one
    passes its clean run."""
    sub = json.loads((ROOT / "chapters" / "06_multi_head.ipynb").read_text())
    changed = 0
    for cell in sub["cells"]:
        src = exercises.cell_source(cell)
        if "def torch_with_our_masks" in src and exercises.is_solution(cell):
            cell["source"] = src.replace(
                "key_padding_mask=flip(key_padding_mask))[0]",
                "key_padding_mask=flip(key_padding_mask), need_weights=False)[0]",
            )
            changed += cell["source"] != src
    assert changed == 1
    path = tmp_path / "06_multi_head.ipynb"
    path.write_text(json.dumps(sub))
    report = grade.grade(path, exercise_timeout=120)
    assert [e.status for e in report.exercises] == ["passed"] * 3, report.to_text()
    assert report.integrity == [], report.integrity
