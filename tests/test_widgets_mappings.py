"""The chapter 3 widgets: the plain functions return what they draw."""

from __future__ import annotations

import math

import pytest

from attnlab.course.ch03_mappings import widgets as W


@pytest.mark.parametrize("mapping", W.MAPPINGS)
def test_mapping_lab_weights(mapping):
    out = W.mapping_lab(mapping=mapping)
    assert len(out["weights"]) == 6 and len(out["z"]) == 2
    if mapping == "sigmoid":
        assert out["total"] > 1.5  # independent gates, not on the simplex
    else:
        assert math.isclose(out["total"], 1.0, abs_tol=1e-9)
        assert math.hypot(*out["z"]) <= 1.0 + 1e-9  # inside the values' hull
    if mapping in ("sparsemax", "argmax", "fusedmax"):
        assert out["support"] < 6


def test_mapping_lab_known_numbers():
    out = W.mapping_lab("1.2, 0.9, 0.1, -0.4, 0.7, -1.0", mapping="sparsemax")
    assert [round(w, 6) for w in out["weights"]] == [0.6, 0.3, 0.0, 0.0, 0.1, 0.0]
    assert out["support"] == 3
    assert W.mapping_lab(mapping="argmax")["entropy"] == 0.0


def test_scale_by_100_makes_softmax_nearly_one_hot():
    low = W.mapping_lab(scale=1.0, mapping="softmax", draw=False)
    high = W.mapping_lab(scale=100.0, mapping="softmax", draw=False)
    assert high["entropy"] < 0.01 < 1.0 < low["entropy"]
    assert max(high["weights"]) > 0.999


def test_entmax_alpha_moves_between_softmax_and_sparsemax():
    near_soft = W.mapping_lab(mapping="entmax", alpha=1.05, draw=False)
    at_two = W.mapping_lab(mapping="entmax", alpha=2.0, draw=False)
    sparse = W.mapping_lab(mapping="sparsemax", draw=False)
    assert near_soft["support"] == 6
    assert at_two["support"] == sparse["support"] == 3


def test_mapping_lab_rejects_bad_input():
    with pytest.raises(ValueError, match="numbers"):
        W.mapping_lab("1, two, 3", draw=False)
    with pytest.raises(ValueError, match="mapping"):
        W.mapping_lab(mapping="hardmax", draw=False)
    with pytest.raises(ValueError, match="scale"):
        W.mapping_lab(scale=0.0, draw=False)


def test_fusedmax_span_is_contiguous():
    out = W.fusedmax_span(lam=0.3)
    assert out["fusedmax_runs"] == 1 < out["sparsemax_runs"]
    zero = W.fusedmax_span(lam=0.0, draw=False)
    assert zero["fusedmax"] == zero["sparsemax"]


def test_widgets_build():
    for make in (W.mapping_lab_widget, W.fusedmax_span_widget):
        w = make()
        assert len(w.children) >= 3
