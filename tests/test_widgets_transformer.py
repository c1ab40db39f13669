"""Chapter 7 widgets: the plain functions return what they drew."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch

import attnlab
from attnlab.course.ch07_transformer import widgets as wt


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_positional_lab_values():
    r = wt.positional_lab(position=3, dim=0, n_positions=16, d_model=8, show=False)
    assert r["value"] == pytest.approx(math.sin(3))
    assert r["wavelength"] == pytest.approx(2 * math.pi)
    r = wt.positional_lab(position=5, dim=5, n_positions=16, d_model=8, show=False)
    assert r["value"] == pytest.approx(math.cos(5 / 10000 ** (4 / 8)))
    assert r["wavelength"] == pytest.approx(2 * math.pi * 10000**0.5)
    assert len(r["row"]) == 8 and len(r["column"]) == 16
    with pytest.raises(ValueError, match="position"):
        wt.positional_lab(position=16, n_positions=16, show=False)


def _maps():
    torch.manual_seed(0)
    cfg = attnlab.TransformerConfig(
        src_vocab=9, tgt_vocab=9, d_model=8, n_heads=2, d_ff=16, n_decoder_layers=3
    )
    model = attnlab.Seq2SeqTransformer(cfg).eval()
    src, tgt = torch.tensor([[4, 5, 6, 7]]), torch.tensor([[1, 8, 5]])
    return model.attention_maps(src, tgt), list("abcd"), ["<bos>", "x", "y"]


def test_attention_view_picks_the_map():
    maps, src, tgt = _maps()
    r = wt.attention_view(maps, src, tgt, kind="cross", layer=2, head=1, show=False)
    torch.testing.assert_close(torch.tensor(r["weights"]), maps["cross"][2][0, 1])
    r = wt.attention_view(maps, src, tgt, kind="decoder", layer=0, head=0, show=False)
    w = torch.tensor(r["weights"])
    assert w.shape == (3, 3) and (w.triu(1) == 0).all()
    assert r["argmax"][0] == 0  # <bos> can only look at itself
    r = wt.attention_view(maps, src, tgt, kind="encoder", layer=1, head=0, show=False)
    assert torch.tensor(r["weights"]).shape == (4, 4)
    with pytest.raises(ValueError, match="layer"):
        wt.attention_view(maps, src, tgt, kind="encoder", layer=2)
    with pytest.raises(ValueError, match="kind"):
        wt.attention_view(maps, src, tgt, kind="self")


def test_architecture_switch():
    post, pre = wt.architecture(False, show=False), wt.architecture(True, show=False)
    assert post["encoder"][3:6] == ["self-attention", "+ residual", "LayerNorm"]
    assert pre["encoder"][3:6] == ["LayerNorm", "self-attention", "+ residual"]
    assert (
        "final LayerNorm" in pre["decoder"] and "final LayerNorm" not in post["decoder"]
    )
    assert post["decoder"].count("LayerNorm") == 3
    # residual arrows: one per sub-block, around exactly that sub-block
    assert len(post["skips"]["encoder"]) == 2 and len(pre["skips"]["decoder"]) == 3
    for r in (post, pre):
        for stack in ("encoder", "decoder"):
            for a, b in r["skips"][stack]:
                assert r[stack][b] == "+ residual" and a < b
    enc = pre["encoder"]
    assert [enc[a] for a, _ in pre["skips"]["encoder"]] == [
        "+ positional enc.",
        "+ residual",
    ]
    assert [post["encoder"][a] for a, _ in post["skips"]["encoder"]] == [
        "+ positional enc.",
        "LayerNorm",
    ]


def test_widgets_build():
    maps, src, tgt = _maps()
    for widget in (
        wt.positional_widget(),
        wt.attention_widget(maps, src, tgt),
        wt.architecture_widget(),
    ):
        assert widget.children  # sliders/dropdowns and an output area


def test_figures_fit_a_phone_and_carry_alt_text():
    r = wt.positional_lab(position=10, dim=4, show=False)
    assert "wavelength" in r["alt"] and f"{r['value']:.2f}" in r["alt"]
    maps, src, tgt = _maps()
    r = wt.attention_view(maps, src, tgt, kind="cross", layer=0, head=0, show=False)
    assert "cross-attention" in r["alt"] and "<bos> →" in r["alt"]
    assert "rows are target queries, columns source keys" in r["alt"]
    r = wt.architecture(True, show=False)
    assert "pre-LN" in r["alt"] and "final LayerNorm" in r["alt"]
    for num in plt.get_fignums():
        fig = plt.figure(num)
        assert fig.get_size_inches()[0] <= 6.5
        sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text()]
        assert min(sizes) >= 10, min(sizes)
