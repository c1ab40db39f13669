"""The chapter 4 widget: the plain function returns what it draws."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402

from attnlab.course.ch04_structured import widgets as W  # noqa: E402


@pytest.mark.parametrize("mapping", W.LAB_MAPPINGS)
def test_alignment_lab_every_mapping(mapping):
    out = W.alignment_lab("à", mapping)
    assert len(out["weights"]) == 6 and out["words"] == W.SOURCE
    assert out["sample"] and all(0 <= j < 6 for j in out["sample"])
    if mapping == "CRF marginals":
        assert not math.isclose(out["total"], 1.0, abs_tol=0.05)  # not on the simplex
    else:
        assert math.isclose(out["total"], 1.0, abs_tol=1e-9)
    if mapping in ("sparsemax", "fusedmax", "hard sample"):
        assert out["support"] < 6
    if mapping == "hard sample":
        assert out["support"] == 1 and out["weights"][out["sample"][0]] == 1.0


def test_spans_of_the_example():
    """CRF marginals above 1/2 and fusedmax's support are the gold spans; sparsemax
    splits 'I am going'."""
    for t, (a, b) in W.GOLD_SPANS.items():
        crf = W.alignment_lab(t, "CRF marginals", draw=False)["weights"]
        assert [j for j, w in enumerate(crf) if w > 0.5] == list(range(a, b))
        fused = W.alignment_lab(t, "fusedmax", draw=False)["weights"]
        assert [j for j, w in enumerate(fused) if w > 0] == list(range(a, b))
    sp = W.alignment_lab("Vou", "sparsemax", draw=False)["weights"]
    assert sp[1] == 0 and sp[0] > 0 and sp[2] > 0


def test_temperature_and_hard_samples():
    cold = W.alignment_lab("à", "softmax", temperature=0.05, draw=False)
    assert max(cold["weights"]) > 0.99
    picks = [
        W.alignment_lab("à", "hard sample", seed=s, draw=False)["sample"][0]
        for s in range(200)
    ]
    p = torch.softmax(torch.tensor(W.SPAN_SCORES["à"]), -1)
    assert abs(picks.count(3) / 200 - float(p[3])) < 0.12


def test_custom_scores_and_errors():
    out = W.alignment_lab(
        scores=[0.0, 1.0, INF := float("-inf")], mapping="CRF marginals", draw=False
    )
    assert out["weights"][2] == 0 and out["words"] == ["k0", "k1", "k2"]
    with pytest.raises(ValueError, match="target"):
        W.alignment_lab("loja!", draw=False)
    with pytest.raises(ValueError, match="temperature"):
        W.alignment_lab(temperature=0, draw=False)
    with pytest.raises(ValueError, match="mapping"):
        W.alignment_lab(mapping="max", draw=False)
    assert INF < 0


def test_widget_builds():
    pytest.importorskip("ipywidgets")
    w = W.alignment_lab_widget()
    assert len(w.children) >= 6


def test_lab_figure_has_alt_text_and_fits_a_phone(monkeypatch):
    shown = []
    monkeypatch.setattr(W, "show", lambda fig, alt: shown.append((fig, alt)))
    W.alignment_lab("Vou", "fusedmax", draw=True)
    ((fig, alt),) = shown
    assert fig.get_size_inches()[0] <= 6.5
    assert "fusedmax weights" in alt and "Vou" in alt
