"""Chapter 5 widgets: the numbers they draw."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch

import attnlab
from attnlab.course.ch05_self_attention import widgets as w


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_toy_embed_and_unknown_word():
    tokens, X = w.toy_embed("She bears the pain")
    assert tokens == ["she", "bears", "the", "pain"]
    assert X.shape == (4, len(w.FEATURES))
    with pytest.raises(ValueError, match="unknown"):
        w.toy_embed("she bears the honey")


@pytest.mark.parametrize("sentence", w.SENTENCES)
def test_heatmap_matches_library(sentence):
    r = w.attention_heatmap(sentence, show=True)
    _, X = w.toy_embed(sentence)
    W_q, W_k, W_v = w.toy_projections()
    _, P = attnlab.scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v)
    torch.testing.assert_close(r["weights"], P)
    torch.testing.assert_close(r["weights"].sum(-1), torch.ones(len(r["tokens"])))
    assert r["score_asymmetry"] > 0  # W_q != W_k


def test_scaling_projections_sharpens_weights():
    soft = w.attention_heatmap(q_scale=0.25, show=False)["max_weight"]
    base = w.attention_heatmap(show=False)["max_weight"]
    sharp = w.attention_heatmap(q_scale=4.0, k_scale=4.0, show=False)["max_weight"]
    assert soft < base < sharp
    assert sharp > 0.99


def test_unscaled_equals_sqrt_dk_temperature():
    a = w.attention_heatmap(scaled=False, show=False)["weights"]
    b = w.attention_heatmap(q_scale=math.sqrt(len(w.FEATURES)), show=False)["weights"]
    torch.testing.assert_close(a, b)


def test_tied_scores_symmetric_weights_not():
    r = w.attention_heatmap("she bears the pain", tied=True, show=False)
    assert r["score_asymmetry"] < 1e-6
    assert r["weight_asymmetry"] > 0.05


def test_mask_lab_cases():
    assert (
        w.mask_lab("boolean (attnlab)", 3e4, "float16", True, show=True)["leaked"]
        == 0.0
    )
    r = w.mask_lab("boolean (attnlab)", 1.0, "float32", True, show=False)
    assert not r["has_nan"] and float(r["weights"][-1].abs().sum()) == 0.0
    # -inf with a naive softmax: a fully masked row is NaN
    assert w.mask_lab("-inf", 1.0, "float32", True, show=False)["has_nan"]
    # -10000 is enough for ordinary scores, not for scores scaled x 3e4
    assert w.mask_lab("-10000", 1.0, show=False)["leaked"] < 1e-3
    assert w.mask_lab("-10000", 3e4, show=False)["leaked"] > 0.5
    # -10000 on a fully masked row: the shift cancels, weights = softmax(scores)
    r = w.mask_lab("-10000", 1.0, "float32", True, show=False)
    # (up to float32 rounding at 10000: a spacing of about 1e-3)
    expect = torch.softmax(w._LAB_SCORES[-1], -1)
    torch.testing.assert_close(r["weights"][-1], expect, atol=1e-3, rtol=0)
    # ... and in float16 the scores drown in -10000: uniform weights
    r = w.mask_lab("-10000", 1.0, "float16", True, show=False)
    torch.testing.assert_close(
        r["weights"][-1], torch.full((6,), 1 / 6), atol=1e-3, rtol=0
    )
    # -1e9 does not exist in float16: it becomes -inf, and the masked row NaN
    r = w.mask_lab("-1e9", 1.0, "float16", True, show=False)
    assert r["mask_value_in_dtype"] == float("-inf") and r["has_nan"]
    with pytest.raises(ValueError, match="mask"):
        w.mask_lab("-5", show=False)
    with pytest.raises(ValueError, match="dtype"):
        w.mask_lab(dtype="int8", show=False)


def test_widgets_build():
    import ipywidgets

    for make in (w.attention_heatmap_widget, w.mask_lab_widget):
        widget = make()
        assert isinstance(widget, ipywidgets.interactive)
        assert len(widget.children) >= 4


def test_figures_fit_a_phone_and_carry_alt_text(monkeypatch):
    import matplotlib.pyplot as plt

    from attnlab.course.ch05_self_attention import widgets as sa

    shown = []
    monkeypatch.setattr(sa, "_show", lambda fig, alt: shown.append((fig, alt)))
    r = sa.attention_heatmap("she bears the pain", tied=True, show=True)
    m = sa.mask_lab("-10000", 1e4, show=True)
    assert [alt for _, alt in shown] == [r["alt"], m["alt"]]
    assert f"{m['leaked']:.2f} of its weight" in m["alt"]
    for fig, _ in shown:
        assert fig.get_size_inches()[0] <= 6.5
        sizes = [t.get_fontsize() for t in fig.findobj(plt.Text) if t.get_text()]
        assert min(sizes) >= 10, min(sizes)
