"""Chapter 6 widgets: the numbers they draw."""

from __future__ import annotations

import pytest
import torch

from attnlab.course.ch06_multihead import widgets as w


def test_handset_heads_patterns():
    r = w.head_view("all", w.SENTENCES[0], token=1, show=False)
    T = len(r["tokens"])
    att = r["attended"]  # (H, T)
    assert att.shape == (4, T)
    idx = torch.arange(T)
    assert torch.equal(att[0, 1:], idx[:-1])  # previous token
    assert att[0, 0] == 0  # no previous: itself
    assert torch.equal(att[1, :-1], idx[1:])  # next token
    assert att[1, -1] == T - 1
    assert torch.equal(att[2], idx)  # itself
    # same word elsewhere: flies(1) <-> flies(7), like(2) <-> like(8); others itself
    assert att[3, 1] == 7 and att[3, 7] == 1 and att[3, 2] == 8 and att[3, 0] == 0
    torch.testing.assert_close(r["weights"].sum(-1), torch.ones(4, T))
    assert r["weights"].max(-1).values.min() > 0.8  # every head is decisive


def test_flies_gets_different_context():
    a = w.head_view("previous token", w.SENTENCES[0], token=1, show=True)
    b = w.head_view("previous token", w.SENTENCES[0], token=7, show=False)
    assert a["tokens"][1] == b["tokens"][7] == "flies"
    assert a["brought"]["previous token"] == "time"
    assert b["brought"]["previous token"] == "fruit"
    assert a["brought"]["same word elsewhere"] == "flies"
    assert a["brought"]["next token"] == "like"


def test_head_view_errors_and_widget():
    with pytest.raises(ValueError, match="head must be"):
        w.head_view("no such head", show=False)
    with pytest.raises(ValueError, match="token must be"):
        w.head_view("all", token=99, show=False)
    with pytest.raises(ValueError, match="non-empty"):
        w.handset_heads("   ")
    assert w.head_view_widget().children
    assert w.slides_bug_view_widget().children


@pytest.mark.parametrize("T,H", [(6, 3), (8, 2), (5, 2), (4, 1), (3, 6)])
def test_slides_bug_view(T, H):
    r = w.slides_bug_view(T, H, show=(T, H) == (6, 3))
    assert r["correct"] == [list(range(T))] * H
    if T % H:
        assert r["slides"] is None and not r["slides_runs"]
    else:
        assert r["slides_out_len"] == T // H
        assert sorted(p for ps in r["slides"] for p in ps) == list(range(T))
        assert all(len(ps) == T // H for ps in r["slides"])
    with pytest.raises(ValueError, match="T >= 1"):
        w.slides_bug_view(0, 2, show=False)


def test_figures_fit_a_phone_and_carry_alt_text(monkeypatch):
    import matplotlib.pyplot as plt

    shown = []
    monkeypatch.setattr(w, "_show", lambda fig, alt: shown.append((fig, alt)))
    r = w.head_view("all", w.SENTENCES[0], token=7, show=True)
    w.slides_bug_view(6, 3, show=True)
    w.slides_bug_view(5, 2, show=True)
    assert len(shown) == 3
    assert "'fruit'" in shown[0][1] and r["alt"] == shown[0][1]
    assert "head 0 sees positions [0, 3]" in shown[1][1]
    assert "RuntimeError" in shown[2][1]
    for fig, _ in shown:
        assert fig.get_size_inches()[0] <= 6.5
        sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text()]
        assert min(sizes) >= 10, min(sizes)
