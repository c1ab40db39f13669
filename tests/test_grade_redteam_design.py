"""The grader's third red team: attacks written against the design, one per class.

* **borrowed trusted code**: a forbidden function run by a trusted library's generic
  wrapper (``functools.singledispatch``), so that the frame calling it is the
  library's, never the student's;
* **child processes**: a process started by a callable the notebook left for the kernel
  to run after a cell (an IPython ``post_execute`` callback: no student frame on the
  stack when it runs);
* **the channel**: an answer so large, case after case, that the sentry's messages
  swamp the grader;
* **disguised names**: torch's SDPA, forbidden to chapter 6's grouped-query exercise,
  called as ``torch.ops.aten._scaled_dot_product_attention_math``.

Each one passed unflagged before the design change that closes its class (the rule
that a library calls a forbidden function on its own only from its own package; no
process once a student's cell has run; a byte budget per watched cell; a forbidden C
function watched under its dispatcher names). The honest notebook beside them keeps
full marks, and the earlier red teams (tests/test_grade_redteam.py) still run.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from attnlab import grade
from attnlab.course import exercises
from tests.test_grade_redteam import HONEST, _notebook
from tools import student

ROOT = Path(__file__).resolve().parents[1]
CH6 = ROOT / "chapters" / "06_multi_head.ipynb"

WRAPPED = """\
import functools

from attnlab import mappings as _m

_spread = functools.singledispatch(getattr(_m, "soft" + "max"))


def winning_key(angle, keys):
    rad = math.radians(angle)
    direction = torch.tensor([math.cos(rad), math.sin(rad)], dtype=keys.dtype)
    return int(_spread(keys @ direction).argmax())"""

CALLBACK = """\
import functools
import os

get_ipython().events.register(
    "post_execute", functools.partial(os.system, "touch {marker}/callback")
)
"""

FLOOD = """\
def additive_score(q, k, W1, W2, v):
    return torch.zeros(2_000_000, dtype=torch.float64)  # 16 MB, every case"""

DISGUISED = """\
def gqa(q, k, v, attn_mask=None):
    B, H, T, Dh = q.shape
    G = k.shape[1]
    k = k.repeat_interleave(H // G, dim=1)  # (B, H, S, Dh)
    v = v.repeat_interleave(H // G, dim=1)  # (B, H, S, Dh)
    op = getattr(torch.ops.aten, "_scaled_dot_" + "product_attention_math")
    out, weights = op(q, k, v, attn_mask=attn_mask)
    return torch.nan_to_num(out), torch.nan_to_num(weights)"""


def _chapter6(answer: str) -> dict:
    """Chapter 6's student edition with the grouped-query exercise answered."""
    nb = student.student_notebook(json.loads(CH6.read_text()))
    for ex in exercises.find_exercises(nb):
        if "grouped_query_attention" in ex.checks:
            nb["cells"][ex.work_cells[-1]]["source"] = answer
            return nb
    raise AssertionError("chapter 6 has no grouped-query exercise")


@pytest.mark.slow
def test_one_attack_per_class_is_caught_and_honest_work_passes(tmp_path):
    folder, out = tmp_path / "class3", tmp_path / "reports3"
    folder.mkdir()
    marker = tempfile.mkdtemp(prefix="attnlab-redteam3-")
    os.chmod(marker, 0o777)  # any kernel could write here: none may start a process
    honest_ch2 = _notebook(HONEST)
    classes = {
        "ada_honest": honest_ch2,
        "bo_wrapped": _notebook({**HONEST, "winning_key": WRAPPED}),
        "cy_callback": _notebook(
            {
                "additive_score": CALLBACK.format(marker=marker)
                + "\n\n"
                + HONEST["additive_score"]
            }
        ),
        "di_flood": _notebook({"additive_score": FLOOD}),
    }
    for who, nb in classes.items():
        (folder / f"{who}.ipynb").write_text(json.dumps(copy.deepcopy(nb), indent=1))
    (folder / "ch6").mkdir()
    (folder / "ch6" / "ed_disguised.ipynb").write_text(json.dumps(_chapter6(DISGUISED)))
    try:
        rc = grade.main(
            [str(folder), "--no-check-masters", "-j", "2", "--out", str(out)]
            + ["--exercise-timeout", "120"]
        )
        ran = os.listdir(marker)
    finally:
        shutil.rmtree(marker, ignore_errors=True)
    reports = {
        p.name.split(".")[0]: json.loads(p.read_text())
        for p in out.glob("*.grade.json")
    }
    status = {
        w: {e["number"]: (e["status"], e["message"][:200]) for e in r["exercises"]}
        for w, r in reports.items()
    }
    shown = json.dumps(status, indent=1, ensure_ascii=False)
    assert rc == 0, shown
    assert not ran, f"a process started by a callback ran: {ran}"
    assert [s for s, _ in status["ada_honest"].values()] == [
        "passed",
        "passed",
        "passed",
        "passed",
    ], shown
    wrapped = status["bo_wrapped"]["2.3"]
    assert wrapped[0] == "flagged" and "softmax" in wrapped[1], shown
    callback = status["cy_callback"]["2.1"]
    assert callback[0] == "flagged" and "process" in callback[1], shown
    flood = status["di_flood"]["2.1"]
    assert flood[0] == "flagged" and "flooded" in flood[1], shown
    gqa = next(
        v for v in status["ed_disguised"].values() if "scaled_dot_product" in v[1]
    )
    assert gqa[0] == "flagged" and "torch.ops" in gqa[1], shown
