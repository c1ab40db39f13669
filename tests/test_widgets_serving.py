"""Chapter 14's widget function and twin reference agree with attnlab.speculative."""

from __future__ import annotations

import torch

from attnlab.course.ch14_serving.twins import K_MAX, speculative_twin
from attnlab.course.ch14_serving.widgets import speculative_demo, speculative_widget
from attnlab.course.twin import CHECKS, rng


def test_demo_prints_rounds_and_stats(capsys):
    stats = speculative_demo(k=3, temperature=0.0, new_tokens=20)
    out = capsys.readouterr().out
    assert out.count("[") == stats["target_passes"]
    assert "tokens per pass" in out and 1 <= stats["tokens_per_pass"] <= 4
    assert speculative_widget() is not None


def test_twin_reference():
    t = speculative_twin()
    data = t.data
    assert 'data-twin="speculative"' in t.html()
    for key, r in data["rounds"].items():
        assert len(r["x"]) == K_MAX and len(r["p"]) == K_MAX + 1
        if key.endswith("/0"):  # greedy: one-hot rows, x the draft's argmax
            assert all(max(row) == 10_000 for row in r["q"])
    seen = set()
    for seed in range(30):
        ref = CHECKS["speculative"].reference(
            {"prompt": "1", "temperature": "1", "k": 6, "seed": seed}, data
        )
        assert ref["emitted"] == ref["accepted"] + 1 == len(ref["text"])
        assert 1 <= ref["expected"] <= 7 and 1 <= ref["formula"] <= 7
        seen.add(ref["accepted"])
    assert len(seen) > 1  # the seed changes the outcome
    # greedy: kept exactly while the draft's argmax equals the target's
    r = data["rounds"]["0/0"]
    agree = [int(torch.tensor(r["p"][i]).argmax()) == r["x"][i] for i in range(K_MAX)]
    n = agree.index(False) if False in agree else K_MAX
    ref = CHECKS["speculative"].reference(
        {"prompt": "0", "temperature": "0", "k": K_MAX, "seed": 5}, data
    )
    assert ref["accepted"] == n
    assert len(rng.uniforms(0, 3)) == 3
