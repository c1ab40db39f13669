"""attnlab.masking: one convention, boolean True = may attend."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import masking


def test_causal_mask_square_and_rectangular(device):
    m = masking.causal_mask(3, device=device)
    assert m.device.type == device.type
    assert m.cpu().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    # top-left aligned as is_causal in torch: query i sees keys 0..i for any S
    assert masking.causal_mask(2, 4).tolist() == [[1, 0, 0, 0], [1, 1, 0, 0]]
    assert masking.causal_mask(3, 2).tolist() == [[1, 0], [1, 1], [1, 1]]
    # T = 0 or S = 0: an empty mask, as torch.ones(0, S).tril() (PyTorch's is_causal)
    assert masking.causal_mask(0).shape == (0, 0)
    assert masking.causal_mask(2, 0).shape == (2, 0)
    with pytest.raises(ValueError, match="T must be >= 0"):
        masking.causal_mask(-1)


def test_padding_mask(device):
    m = masking.padding_mask([2, 0, 3], 4, device=device)
    assert m.cpu().tolist() == [[1, 1, 0, 0], [0, 0, 0, 0], [1, 1, 1, 0]]
    assert masking.padding_mask(torch.tensor([1, 2])).shape == (2, 2)
    with pytest.raises(ValueError, match="exceeds"):
        masking.padding_mask([5], 3)
    with pytest.raises(ValueError, match=">= 0"):
        masking.padding_mask([-1], 3)
    with pytest.raises(ValueError, match="1-D"):
        masking.padding_mask([[1]], 3)


@pytest.mark.parametrize("value", [-math.inf, -10000.0])
def test_to_additive(value):
    m = torch.tensor([[True, False], [False, True]])
    add = masking.to_additive(m, value)
    assert add.dtype == torch.get_default_dtype()
    assert add.tolist() == [[0.0, value], [value, 0.0]]
    assert masking.to_additive(m, dtype=torch.float16).dtype == torch.float16
    with pytest.raises(TypeError, match="boolean"):
        masking.to_additive(add)


def test_apply_mask_bool_and_float():
    scores = torch.zeros(2, 3)
    m = torch.tensor([True, False, True])
    out = masking.apply_mask(scores, m)
    assert torch.isneginf(out[:, 1]).all() and (out[:, [0, 2]] == 0).all()
    add = torch.tensor([0.5, -1.0, 0.0])
    torch.testing.assert_close(masking.apply_mask(scores, add), add.expand(2, 3))
    assert masking.apply_mask(scores, None) is scores


def test_check_mask_errors():
    scores = torch.zeros(2, 3, 4)
    masking.check_mask(torch.ones(3, 4, dtype=torch.bool), scores)  # broadcasts
    with pytest.raises(ValueError, match=r"\(3, 5\)"):
        masking.check_mask(torch.ones(3, 5, dtype=torch.bool), scores)
    with pytest.raises(ValueError, match="does not broadcast"):  # would grow the scores
        masking.check_mask(torch.ones(7, 2, 3, 4, dtype=torch.bool), scores)
    with pytest.raises(TypeError, match="int64"):
        masking.check_mask(torch.ones(3, 4, dtype=torch.long), scores)
    with pytest.raises(TypeError, match="list"):
        masking.check_mask([[True]], scores)


def test_combine_masks():
    causal = masking.causal_mask(3, 4)  # (T, S)
    pad = masking.padding_mask([4, 2], 4)[:, None, None, :]  # (B, 1, 1, S)
    both = masking.combine_masks(causal, None, pad)
    assert both.shape == (2, 1, 3, 4) and both.dtype == torch.bool
    assert torch.equal(
        both[1, 0], causal & torch.tensor([1, 1, 0, 0], dtype=torch.bool)
    )
    f = torch.full((3, 4), 0.5)
    mixed = masking.combine_masks(causal, f)
    assert mixed.dtype == torch.float32
    assert torch.isneginf(mixed[0, 1]) and mixed[0, 0] == 0.5
    assert masking.combine_masks(causal, f.double()).dtype == torch.float64
    assert masking.combine_masks(None, None) is None
    with pytest.raises(ValueError, match="do not broadcast"):
        masking.combine_masks(causal, torch.ones(2, 5, dtype=torch.bool))
    with pytest.raises(TypeError, match="dtype"):
        masking.combine_masks(causal, torch.ones(3, 4, dtype=torch.long))


def test_fully_masked_rows():
    s = torch.tensor([[0.0, -math.inf], [-math.inf, -math.inf], [-1e4, -1e4]])
    assert masking.fully_masked_rows(s).squeeze(-1).tolist() == [False, True, False]


def test_to_additive_names_a_mask_value_that_does_not_fit_the_dtype():
    mask = torch.tensor([True, False])
    with pytest.raises(ValueError, match="does not fit in torch.float16"):
        masking.to_additive(mask, -1e9, dtype=torch.float16)
    out = masking.to_additive(mask, float("-inf"), dtype=torch.float16)
    assert out.dtype == torch.float16 and torch.isinf(out[1]) and out[0] == 0
    out = masking.to_additive(mask, -65504.0, dtype=torch.float16)
    assert out[1] == -65504.0


def test_mask_convention_warning_points_at_the_callers_line():
    """Review finding 13: a fixed stacklevel landed in torch's module.py; the warning
    now names the reader's own line, however deep the call (MHA, a layer in
    nn.Module.__call__, the helper itself)."""
    import warnings

    import attnlab
    from attnlab.masking import MaskConventionWarning, warn_if_nothing_attended

    torch.manual_seed(0)
    mha = attnlab.MultiHeadAttention(8, 2)
    layer = attnlab.TransformerEncoderLayer(8, 2, 16)
    x = torch.randn(2, 3, 8)
    kpm = torch.tensor([[False, False, True], [False, False, False]])  # PyTorch's sense
    calls = [
        lambda: mha(x, x, x, key_padding_mask=kpm),
        lambda: layer(x, src_key_padding_mask=kpm),
        lambda: warn_if_nothing_attended(kpm),
    ]
    for call in calls:
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            call()
        hits = [w for w in got if issubclass(w.category, MaskConventionWarning)]
        assert len(hits) == 1
        assert hits[0].filename == __file__, hits[0].filename
        assert hits[0].lineno == call.__code__.co_firstlineno
