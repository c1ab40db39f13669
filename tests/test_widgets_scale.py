"""Chapter 8 and 9 widgets: the numbers they draw."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from attnlab.course.ch08_fast_attention import widgets as w8  # noqa: E402
from attnlab.course.ch09_subquadratic import widgets as w9  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_tile_map_counts_and_memory():
    r = w8.tile_map(n=512, block=64, causal=True)
    assert r["tiles"] == 64 and r["skip"] == 28 and r["masked"] == 8 and r["full"] == 28
    full = w8.tile_map(n=512, block=64, causal=False, show=False)
    assert full["skip"] == 0 and full["computed"] == 64
    assert r["naive_bytes"] == 8 * (4 * 512 * 64 + 2 * 512 * 512) * 4
    big = w8.live_memory(8192, 128)
    assert big["ratio"] > 50  # quadratic against linear


def test_tile_map_ragged():
    r = w8.tile_map(n=100, block=64, causal=True, show=False)
    assert r["tiles"] == 4 and r["skip"] == 1


def test_pattern_masks():
    m = w9.pattern_mask("window", 10, 2)
    assert m[5].nonzero().flatten().tolist() == [3, 4, 5, 6, 7]
    d = w9.pattern_mask("dilated", 10, 2, dilation=2)
    assert d[5].nonzero().flatten().tolist() == [1, 3, 5, 7, 9]
    g = w9.pattern_mask("global+local", 10, 1, n_global=1)
    assert g[0].all() and g[:, 0].all() and g[5].sum() == 4
    c = w9.pattern_mask("causal", 4)
    assert torch.equal(c, torch.ones(4, 4, dtype=torch.bool).tril())
    with pytest.raises(ValueError, match="pattern"):
        w9.pattern_mask("blocky", 4)
    st = w9.pattern_mask("strided", 12, 3, causal=True)  # local 3 + every 3rd back
    assert st[11].nonzero().flatten().tolist() == [2, 5, 8, 9, 10, 11]
    assert int(w9.receptive_field(st, 2)[-1]) == 12  # full reach in two layers
    with pytest.raises(ValueError, match="stride"):
        w9.pattern_mask("strided", 4, 0)
    with pytest.raises(ValueError, match="window"):
        w9.pattern_mask("window", 4, -1)


def test_receptive_field_grows_by_window_per_layer():
    m = w9.pattern_mask("window", 64, 4, causal=True)
    for L in (1, 2, 3):
        assert int(w9.receptive_field(m, L)[-1]) == 4 * L + 1
    dil = w9.pattern_mask("dilated", 64, 4, dilation=2, causal=True)
    assert int(w9.receptive_field(dil, 1)[-1]) == 5
    drawn = w9.attention_pattern(
        "dilated", n=64, window=4, dilation=2, layers=3, show=False
    )
    assert drawn["reach_by_layer"] == [5, 9, 13]  # the picture: the last query's past
    r = w9.attention_pattern("global+local", n=32, window=2, layers=2, causal=False)
    assert r["receptive_field_last"] == 32  # via the global token
    assert r["pairs"] == int(r["mask"].sum())
