"""Chapter 2 widget: the numbers query_vs_keys draws, and the widget builds."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
import torch

from attnlab.course.ch02_recipe.widgets import (
    KEYS,
    query_vs_keys,
    query_vs_keys_widget,
    recipe_scorers,
)

NAMES = ["dot", "scaled dot", "bilinear", "additive", "mlp"]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_returns_scores_and_weights_for_every_scorer():
    out = query_vs_keys(angle=30.0, length=1.0)
    assert list(out["scores"]) == NAMES
    rad = math.radians(30.0)
    assert out["query"] == pytest.approx([math.cos(rad), math.sin(rad)])
    for name in NAMES:
        w = torch.tensor(out["weights"][name])
        assert w.shape == (4,) and (w > 0).all()
        assert float(w.sum()) == pytest.approx(1.0, abs=1e-6)
        s = torch.tensor(out["scores"][name])
        torch.testing.assert_close(w, torch.softmax(s, 0), atol=1e-6, rtol=1e-5)
        assert out["winner"][name] == int(w.argmax())
    q = torch.tensor(out["query"])
    assert out["scores"]["dot"] == pytest.approx((KEYS @ q).tolist(), abs=1e-6)
    assert out["scores"]["scaled dot"] == pytest.approx(
        (KEYS @ q / math.sqrt(2)).tolist(), abs=1e-6
    )


def test_long_query_dot_picks_largest_projection_not_nearest_angle():
    out = query_vs_keys(angle=10.0, length=10.0, draw=False)
    assert out["winner"]["dot"] == 3  # the long diagonal key, 35° away
    assert out["weights"]["dot"][3] > 0.999
    short = query_vs_keys(angle=10.0, length=0.1, draw=False)
    assert max(short["weights"]["dot"]) < 0.4  # a short query spreads its weight


def test_growing_query_saturates_multiplicative_scorers_only():
    out = query_vs_keys(angle=10.0, length=1.0, max_length=200.0, draw=False)
    mw = out["max_weight"]
    for name in ("dot", "scaled dot", "bilinear"):
        assert mw[name][-1] > 0.999  # one-hot in the limit
        assert all(b >= a - 1e-6 for a, b in zip(mw[name], mw[name][1:]))
    assert mw["additive"][-1] == pytest.approx(
        0.25, abs=1e-3
    )  # tanh saturates: uniform
    assert mw["mlp"][-1] < 0.99  # bounded key differences: never one-hot
    assert out["lengths"][0] == pytest.approx(0.1)
    assert out["lengths"][-1] == pytest.approx(200.0)


def test_widget_keys_are_the_exercise_keys():
    from attnlab.course.ch02_recipe.check import WIDGET_KEYS

    assert torch.equal(KEYS, WIDGET_KEYS)
    want = torch.tensor([[1.0, 0.0], [0.0, 1.2], [-1.0, -0.3], [1.6, 1.6]])
    assert torch.equal(KEYS, want)  # the values the chapter text quotes


def test_zero_length_query_and_custom_keys():
    out = query_vs_keys(angle=0.0, length=0.0, draw=False)
    assert out["weights"]["dot"] == pytest.approx([0.25] * 4)
    keys = [[1.0, 0.0], [0.0, 1.0]]
    out = query_vs_keys(angle=90.0, length=5.0, keys=keys, draw=False)
    assert out["winner"]["dot"] == 1 and len(out["weights"]["mlp"]) == 2


def test_scorers_are_fixed_and_leave_global_rng_alone():
    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    a, b = recipe_scorers(), recipe_scorers()
    assert torch.equal(torch.random.get_rng_state(), before)
    for name in ("bilinear", "additive", "mlp"):
        for pa, pb in zip(a[name].parameters(), b[name].parameters()):
            assert torch.equal(pa, pb)


def test_draws_a_figure_with_alt_text(monkeypatch):
    import attnlab.course.ch02_recipe.widgets as R

    shown = []
    monkeypatch.setattr(R, "show", lambda fig, alt: shown.append((fig, alt)))
    query_vs_keys(angle=45.0, length=2.0)
    ((fig, alt),) = shown
    assert len(fig.axes) == 4
    assert "length 2.00" in fig.axes[0].get_title()
    assert "45 degrees" in alt and "largest weight" in alt
    assert fig.get_size_inches()[0] <= 6.5


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "long"])
def test_bad_length_raises(bad):
    with pytest.raises(ValueError, match="length"):
        query_vs_keys(length=bad, draw=False)


def test_bad_keys_raise():
    with pytest.raises(ValueError, match=r"\(S, 2\)"):
        query_vs_keys(keys=torch.ones(3, 3), draw=False)


def test_widget_builds_with_two_sliders():
    w = query_vs_keys_widget()
    sliders = {c.description: c for c in w.children if hasattr(c, "min")}
    assert set(sliders) == {"angle (°)", "length ‖q‖"}
    assert all(s.continuous_update is False for s in sliders.values())
    assert sliders["length ‖q‖"].min > 0
