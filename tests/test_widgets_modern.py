"""Chapter 13's widget function and twin reference agree with attnlab.modern."""

from __future__ import annotations

import torch

from attnlab.course.ch13_modern.twins import rope_twin
from attnlab.course.ch13_modern.widgets import rope_scores
from attnlab.course.twin import CHECKS
from attnlab.modern import RoPE


def test_rope_scores_depend_on_offset_only():
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(16, generator=g), torch.randn(16, generator=g)
    s = rope_scores(q, k, 64, show=False)
    rope = RoPE(layout="interleaved")
    far = (
        rope(q.double().view(1, 1, 1, -1), torch.tensor([1040]))
        * rope(k.double().view(1, 1, 1, -1), torch.tensor([1000]))
    ).sum()
    torch.testing.assert_close(s[40], far)
    assert abs(float(s[0]) - float(q.double() @ k.double())) < 1e-12
    s4 = rope_scores(q, k, 64, scale=4, show=False)
    torch.testing.assert_close(s4[40], s[10])  # PI: offset 40 at scale 4 = offset 10


def test_twin_reference_is_consistent():
    t = rope_twin()
    r = CHECKS["rope"].reference({"offset": 16, "scale": "2"}, t.data)
    assert abs(r["score"] - r["same_offset_far"]) < 1e-9
    assert r["score"] != r["score_zero"]
    r8 = CHECKS["rope"].reference({"offset": 8, "scale": "1"}, t.data)
    assert abs(r8["score"] - r["score"]) < 1e-9  # offset 16 at scale 2 = offset 8
    assert 'data-twin="rope"' in t.html()
