"""Chapter 11 widgets: the numbers they draw."""

from __future__ import annotations

import pytest
import torch

from attnlab.course.ch11_explanation import widgets as w11
from attnlab.data import rationale_task


def test_importance_panel_reports_top_tokens_and_recall():
    tokens = ["a", "overall", "good", "bad"]
    scores = {"attention": [0.1, 0.2, 0.6, 0.1], "gradient": [0.0, 0.1, 0.2, 0.7]}
    out = w11.importance_panel(tokens, scores, [False, True, True, False], "t")
    assert out["top"] == {"attention": "good", "gradient": "bad"}
    assert out["recall"] == {"attention": 1.0, "gradient": 0.5}
    assert "recall" not in w11.importance_panel(tokens, scores, show=False)
    with pytest.raises(ValueError, match="3 values for 4 tokens"):
        w11.importance_panel(tokens, {"x": [1, 2, 3]}, show=False)


def test_importance_widget_builds():
    d = rationale_task("focus", "test", n=4)
    s = {"a": torch.rand(d.ids.shape), "b": torch.rand(d.ids.shape)}
    assert w11.importance_widget(d, s, predictions=torch.rand(4)) is not None


def _votes(h, w):
    return (w * h).sum(-1)


@pytest.mark.parametrize("eps", [0.0, 0.01, 0.3])
def test_adversary_view_keeps_the_output_within_eps(eps):
    h = torch.tensor([1.0, 1.0, 1.0, -0.5, 0.2])
    w = torch.tensor([0.6, 0.1, 0.1, 0.1, 0.1])
    out = w11.adversary_view(_votes, h, w, list("abcde"), eps=eps, steps=100)
    assert out["dy"] <= eps + 1e-7 and 0 <= out["jsd"] <= 0.6932
    assert out["adversarial"].sum().item() == pytest.approx(1.0, abs=1e-5)
    if eps == 0.3:
        assert out["jsd"] > 0.3
    with pytest.raises(ValueError, match="tokens"):
        w11.adversary_view(_votes, h, w, list("abc"), show=False)


def test_adversary_widget_builds():
    h, w = torch.ones(3), torch.full((3,), 1 / 3)
    assert w11.adversary_widget(_votes, h, w, list("abc")) is not None
