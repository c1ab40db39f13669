"""The grader's verdict from recorded answers (attnlab.grade.replay): no kernel needed."""

from __future__ import annotations

import base64
import math

import numpy as np
import pytest
import torch

from attnlab.check import recipe
from attnlab.course import check_core
from attnlab.grade import replay


def _winner(angle, keys):
    rad = math.radians(angle)
    direction = torch.tensor([math.cos(rad), math.sin(rad)], dtype=keys.dtype)
    return int((keys @ direction).argmax())


def _recorded(fn, check=recipe.winning_key) -> list[dict]:
    """What the sentry would record for ``fn``: (name, index, outcome) per case."""
    seen = []
    real = check_core._call_answer

    def spy(name, index, f, args, kwargs):
        outcome = real(name, index, f, args, kwargs)
        value = outcome[1] if outcome[0] == "ok" else None
        data = (
            ["ok", {"v": value}]
            if outcome[0] == "ok" and isinstance(value, int)
            else [str(x) for x in outcome]
        )
        seen.append({"name": name, "index": index, "outcome": data})
        return outcome

    check_core._call_answer = spy
    try:
        check(fn)
    finally:
        check_core._call_answer = real
    return seen


def test_right_answers_pass_and_a_changed_one_fails_with_the_checks_hint(capsys):
    answers = _recorded(_winner)
    capsys.readouterr()
    assert len(answers) >= 5
    assert replay.replay(["winning_key"], answers)[0][0] == "passed"
    wrong = [dict(a) for a in answers]
    k = wrong[2]["outcome"][1]["v"]
    wrong[2] = {**wrong[2], "outcome": ["ok", {"v": (k + 1) % 4}]}
    status, message = replay.replay(["winning_key"], wrong)[0]
    assert status == "failed" and message.startswith("winning_key: case ")
    assert "hint:" in message
    assert capsys.readouterr().out == ""  # the replay prints nothing


@pytest.mark.parametrize(
    "outcome, status, words",
    [
        (["pending"], "not attempted", "not implemented yet"),
        (["raised", "ValueError: bad"], "failed", "ValueError: bad"),
        (["notcallable", "int"], "failed", "expected a function, got int"),
        (["ok", {"reject": "a __main__.Agreeable object"}], "failed", "Agreeable"),
        (["ok", {"garbage": 1}], "failed", "cannot read"),
    ],
)
def test_every_recorded_outcome_has_a_verdict(outcome, status, words):
    answers = [{"name": "winning_key", "index": 0, "outcome": outcome}]
    got, message = replay.replay(["winning_key"], answers)[0]
    assert got == status and words in message


def test_no_record_is_a_failure_not_a_pass():
    status, message = replay.replay(["winning_key"], [])[0]
    assert status == "failed" and "no answer was recorded" in message


def test_decode_gives_plain_objects():
    t = torch.arange(6.0).reshape(2, 3)
    arr = t.numpy()
    data = {
        "tensor": "torch.float32",
        "np": arr.dtype.str,
        "shape": [2, 3],
        "data": base64.b64encode(arr.tobytes()).decode(),
    }
    got = replay.decode({"seq": "tuple", "items": [data, {"v": 3}, {"float": "nan"}]})
    assert type(got) is tuple and type(got[0]) is torch.Tensor
    assert torch.equal(got[0], t) and got[1] == 3 and math.isnan(got[2])
    bf = replay.decode({**data, "tensor": "torch.bfloat16"})
    assert bf.dtype == torch.bfloat16
    scalar = np.asarray(np.int64(7))
    enc = {"npscalar": scalar.dtype.str, "data": base64.b64encode(scalar.tobytes())}
    assert replay.decode({**enc, "data": enc["data"].decode()}) == 7
    with pytest.raises(replay.Rejected):
        replay.decode({"reject": "x"})


def test_runs_restart_at_case_zero():
    a = [{"name": "c", "index": i, "outcome": ["pending"]} for i in (0, 1, 0)]
    assert [sorted(r) for r in replay.runs(a)["c"]] == [[0, 1], [0]]
