"""Every mask builder lives in attnlab.masking; the modules that once built their own
re-export the same objects, and each builder gives what its old home gave (a loop over
(i, j) written from its documented rule, independent of the vectorised code)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from attnlab import masking


def _loop(T: int, S: int, ok) -> torch.Tensor:
    return torch.tensor([[bool(ok(i, j)) for j in range(S)] for i in range(T)]).view(
        T, S
    )


def test_the_old_homes_re_export_the_same_objects():
    from attnlab import circuits, classifiers, efficient, serving
    from attnlab.course.ch09_subquadratic import widgets as ch09

    assert efficient.band_mask is masking.band_mask
    assert efficient.ALIGNS is masking.ALIGNS
    assert circuits.pattern_mask is masking.head_pattern_mask
    assert classifiers.masked_softmax is masking.masked_softmax
    assert serving.streaming_mask is masking.streaming_mask
    assert ch09.pattern_mask is masking.sparse_pattern_mask
    assert ch09.PATTERNS is masking.PATTERNS


@pytest.mark.parametrize("T,S", [(1, 1), (4, 4), (3, 7), (6, 2), (0, 3), (3, 0)])
@pytest.mark.parametrize("window", [None, 0, 1, 3])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("align", ["top_left", "bottom_right"])
def test_band_mask_is_its_rule(T, S, window, causal, align):
    o = 0 if align == "top_left" else S - T
    ref = _loop(
        T,
        S,
        lambda i, j: (
            (window is None or abs(i + o - j) <= window) and (not causal or j <= i + o)
        ),
    )
    assert torch.equal(masking.band_mask(T, S, window, causal, align=align), ref)


def test_band_mask_bottom_right_is_torchs_causal_lower_right():
    from torch.nn.attention.bias import causal_lower_right

    for T, S in [(3, 7), (5, 5), (1, 4)]:
        q, k = torch.randn(1, 1, T, 8), torch.randn(1, 1, S, 8)
        v = torch.randn(1, 1, S, 8)
        ref = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=causal_lower_right(T, S)
        )
        got = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, attn_mask=masking.band_mask(T, S, None, True, align="bottom_right")
        )
        torch.testing.assert_close(got, ref)


def test_band_mask_checks_window_and_align():
    with pytest.raises(TypeError, match="window"):
        masking.band_mask(3, 3, window=1.5)
    with pytest.raises(ValueError, match="window"):
        masking.band_mask(3, 3, window=-1)
    with pytest.raises(ValueError, match="align"):
        masking.band_mask(3, 3, align="middle")


@pytest.mark.parametrize(
    "T,window,n_sink", [(6, 2, 0), (7, 3, 2), (1, 1, 0), (5, 9, 1)]
)
def test_streaming_mask_is_its_rule(T, window, n_sink):
    ref = _loop(T, T, lambda i, j: j <= i and (i - j < window or j < n_sink))
    assert torch.equal(masking.streaming_mask(T, window, n_sink), ref)


def test_streaming_mask_takes_a_device_and_checks_its_sizes():
    assert masking.streaming_mask(4, 2, device="meta").device.type == "meta"
    assert torch.equal(
        masking.streaming_mask(np.int64(5), 2), masking.streaming_mask(5, 2)
    )
    with pytest.raises(TypeError, match="window"):
        masking.streaming_mask(5, "2")
    with pytest.raises(ValueError, match="window"):
        masking.streaming_mask(5, 0)


def test_the_kv_cache_mask_is_band_mask_bottom_right():
    """The cached decoder's mask (once written inline): new queries past .. past + t - 1
    over keys 0 .. past + t - 1, each sees its own position and before."""
    for past, t in [(0, 3), (4, 1), (2, 5)]:
        ref = _loop(t, past + t, lambda i, j, p=past: j <= p + i)
        got = masking.band_mask(t, past + t, is_causal=True, align="bottom_right")
        assert torch.equal(got, ref)


def test_position_mask_is_its_rule():
    q_pos, k_pos = torch.tensor([3, 4, 5]), torch.arange(6)
    for causal, window in itertools.product([False, True], [None, 2]):
        got = masking.position_mask(q_pos, k_pos, causal=causal, window=window)
        if not causal and window is None:
            assert got is None
            continue
        ref = _loop(
            3,
            6,
            lambda i, j, c=causal, w=window: (
                (not c or q_pos[i] >= k_pos[j])
                and (w is None or abs(int(q_pos[i] - k_pos[j])) < w)
            ),
        )
        assert torch.equal(got, ref)


def test_head_pattern_mask_is_its_rule():
    ids = torch.tensor([[5, 1, 2, 5, 1, 3, 2], [0, 0, 0, 1, 1, 0, 2]])
    B, T = ids.shape
    prev = masking.head_pattern_mask(ids, "previous")
    assert torch.equal(prev, _loop(T, T, lambda i, j: j == i - 1).expand(B, T, T))
    ind = masking.head_pattern_mask(ids, "induction")
    for b in range(B):
        x = ids[b].tolist()
        ref = _loop(T, T, lambda i, j, x=x: 1 <= j <= i and x[j - 1] == x[i])
        assert torch.equal(ind[b], ref), b
    with pytest.raises(ValueError, match="kind"):
        masking.head_pattern_mask(ids, "copy")


def test_sparse_pattern_mask_is_its_rule():
    n, w, dil, g = 9, 2, 2, 1
    rules = {
        "full": lambda i, j: True,
        "causal": lambda i, j: j <= i,
        "window": lambda i, j: abs(i - j) <= w,
        "dilated": lambda i, j: abs(i - j) <= w * dil and (i - j) % dil == 0,
        "global+local": lambda i, j: abs(i - j) <= w or i < g or j < g,
        "strided": lambda i, j: abs(i - j) < w or (i - j) % w == 0,
    }
    assert set(rules) == set(masking.PATTERNS)
    for name, rule in rules.items():
        for causal in (False, True):
            got = masking.sparse_pattern_mask(name, n, w, dil, g, causal=causal)
            ref = _loop(
                n, n, lambda i, j, r=rule, c=causal: r(i, j) and (not c or j <= i)
            )
            assert torch.equal(got, ref), (name, causal)


def test_masked_softmax_keeps_nan_in_nan_out_at_real_positions():
    """No ``nan_to_num`` hiding a NaN input: a dead row is zeros by construction, a NaN
    score at a real position gives NaN (as torch.softmax), one at padding is masked."""
    s = torch.tensor([[float("nan"), 1.0], [0.0, float("nan")], [1.0, 2.0]])
    m = torch.tensor([[True, True], [True, False], [False, False]])
    w = masking.masked_softmax(s, m)
    assert w[0].isnan().all()
    torch.testing.assert_close(w[1:], torch.tensor([[1.0, 0.0], [0.0, 0.0]]))


def test_masked_softmax_is_softmax_over_the_real_positions():
    scores = torch.randn(4, 5, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 0, 0, 0, 0], [0] * 5, [1] * 5]).bool()
    got = masking.masked_softmax(scores, mask)
    for r in range(4):
        ref = torch.zeros(5, dtype=torch.float64)
        if mask[r].any():
            e = scores[r][mask[r]].exp()
            ref[mask[r]] = e / e.sum()  # the float64 formula
        torch.testing.assert_close(got[r], ref)


def test_band_mask_names_a_bad_size_or_flag():
    with pytest.raises(ValueError, match="band_mask: T must be >= 0"):
        masking.band_mask(-1, 3)
    with pytest.raises(TypeError, match="band_mask: S must be an int"):
        masking.band_mask(3, 2.5)
    with pytest.raises(TypeError, match="band_mask: is_causal"):
        masking.band_mask(3, 3, is_causal=1)
    assert masking.band_mask(0, 3).shape == (0, 3)  # empty, as causal_mask(0, 3)
