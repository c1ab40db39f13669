"""Norm-weighted attention (Kobayashi et al., 2020), W&P's KL direction, and the bad
inputs of the ranking functions (NaN as scipy, a bad flow scale, jsd of non-simplex
vectors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch
from torch import nn

import attnlab
from attnlab.explain import (
    attention_flow,
    jsd,
    kendall_tau,
    spearman,
    value_norm_attention,
    wp_adversary_loss,
)


# ------------------------------------------------------------------ value-norm map
def _hand_layer():
    """D = 2, H = 2 heads of width 1, S = 2 keys, one query."""
    x = torch.tensor([[[1.0, 1.0], [2.0, -1.0]]])  # (1, S=2, D=2)
    w_v = nn.Linear(2, 2)  # head 0 reads x[0], head 1 reads x[1]
    w_o = nn.Linear(2, 2)  # head 0 writes [1, 0], head 1 writes [1, 1]
    with torch.no_grad():
        w_v.weight.copy_(torch.eye(2))
        w_v.bias.fill_(5.0)  # biases are left out of f(x): must not matter
        w_o.weight.copy_(torch.tensor([[1.0, 1.0], [0.0, 1.0]]))
        w_o.bias.fill_(-3.0)
    weights = torch.tensor([[[[0.25, 0.75]], [[0.6, 0.4]]]])  # (1, H=2, T=1, S=2)
    return x, weights, w_v, w_o


def test_value_norm_attention_matches_a_hand_computation():
    x, weights, w_v, w_o = _hand_layer()
    per_head, layer = value_norm_attention(x, weights, w_v, w_o)
    # f_0(x_0) = [1, 0], f_1(x_0) = [1, 1], f_0(x_1) = [2, 0], f_1(x_1) = [-1, -1]
    s2 = math.sqrt(2)
    torch.testing.assert_close(
        per_head, torch.tensor([[[[0.25, 1.5]], [[0.6 * s2, 0.4 * s2]]]])
    )
    # key 0: 0.25 [1, 0] + 0.6 [1, 1] = [0.85, 0.6]; key 1: 0.75 [2, 0] + 0.4 [-1, -1]
    expected = torch.tensor([[[math.hypot(0.85, 0.6), math.hypot(1.1, -0.4)]]])
    torch.testing.assert_close(layer, expected)
    # the weight tensors alone give the same answer as the nn.Linear modules
    _, again = value_norm_attention(x, weights, w_v.weight, w_o.weight)
    torch.testing.assert_close(again, layer)
    # heads can cancel: the norm of the sum is at most the sum of the norms
    assert (layer <= per_head.sum(1) + 1e-6).all()


def test_value_norm_attention_sums_to_the_layer_output():
    """With one key the weight is 1, so the layer map is the norm of the attention
    output without its biases (b_o and W_o b_v)."""
    torch.manual_seed(0)
    mha = attnlab.MultiHeadAttention(8, 2)
    x = torch.randn(3, 1, 8)  # one key
    q = torch.randn(3, 4, 8)
    out, w = mha(q, x, x, average_attn_weights=False)  # (3, 4, 8), (3, 2, 4, 1)
    _, layer = value_norm_attention(x, w, mha.w_v, mha.w_o)  # (3, 4, 1)
    no_bias = out - mha.w_o.bias - mha.w_o.weight @ mha.w_v.bias
    torch.testing.assert_close(layer[..., 0], no_bias.norm(dim=-1))


def test_value_norm_attention_on_several_keys_against_a_loop():
    torch.manual_seed(1)
    mha = attnlab.MultiHeadAttention(12, 3)
    x = torch.randn(2, 5, 12)
    _, w = mha(x, x, x, average_attn_weights=False)  # (2, 3, 5, 5)
    per_head, layer = value_norm_attention(x, w, mha.w_v, mha.w_o)
    Dh = 4
    for b in range(2):
        for i in range(5):
            for j in range(5):
                total = torch.zeros(12)
                for h in range(3):
                    sl = slice(h * Dh, (h + 1) * Dh)
                    f = mha.w_o.weight[:, sl] @ (mha.w_v.weight[sl] @ x[b, j])
                    total += w[b, h, i, j] * f
                    assert abs(per_head[b, h, i, j] - w[b, h, i, j] * f.norm()) < 1e-5
                assert abs(layer[b, i, j] - total.norm()) < 1e-5


def test_value_norm_attention_rejects_bad_shapes():
    x, weights, w_v, w_o = _hand_layer()
    with pytest.raises(ValueError, match="shapes do not fit"):
        value_norm_attention(x[:, :1], weights, w_v, w_o)
    with pytest.raises(ValueError, match=r"need x \(B, S, D\)"):
        value_norm_attention(x[0], weights, w_v, w_o)
    with pytest.raises(TypeError, match="w_v"):
        value_norm_attention(x, weights, "w_v", w_o)


# ------------------------------------------------------------- W&P's KL direction
def test_wp_adversary_loss_uses_kl_of_the_adversary_from_the_base():
    a_adv = torch.tensor([[0.5, 0.5, 0.0]])
    a_base = torch.tensor([[0.9, 0.05, 0.05]])
    y_adv, y_base = torch.tensor([0.7]), torch.tensor([0.6])
    # KL(adv || base) = 0.5 ln(0.5/0.9) + 0.5 ln(0.5/0.05) + 0 (0 log 0 = 0)
    kl = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.05)
    got = wp_adversary_loss(y_adv, y_base, a_adv, a_base, lam=0.1)
    torch.testing.assert_close(got, torch.tensor([0.1 - 0.1 * kl]))
    # the reverse direction, KL(base || adv), would be infinite here (0.05 on a zero)
    # and differs in general: swap the roles and the value changes
    other = wp_adversary_loss(y_adv, y_base, a_base, a_adv, lam=0.1)
    assert abs(other.item() - got.item()) > 0.1
    # the same as PyTorch's KLDivLoss in W&P's call: KLDivLoss(base.log(), adv)
    ref = nn.KLDivLoss(reduction="sum")(a_base.log(), a_adv)
    torch.testing.assert_close(0.1 - 0.1 * ref, got[0])


def test_wp_adversary_loss_checks_shapes():
    with pytest.raises(ValueError, match="matching shapes"):
        wp_adversary_loss(
            torch.zeros(2), torch.zeros(3), torch.zeros(2, 4), torch.zeros(2, 4), 0.1
        )


# --------------------------------------------------------------------- bad inputs
def test_rank_correlations_give_nan_on_nan_as_scipy():
    a, b = [1.0, float("nan"), 3.0, 2.0], [1.0, 2.0, 3.0, 4.0]
    assert math.isnan(scipy.stats.kendalltau(a, b).statistic)
    ta, tb = torch.tensor(a), torch.tensor(b)
    assert kendall_tau(ta, tb).isnan()
    assert spearman(torch.tensor([1.0, float("nan"), 3.0]), tb[:3]).isnan()
    assert spearman(tb, ta).isnan() and kendall_tau(tb, ta).isnan()
    assert kendall_tau(a, b).isnan()  # array-likes are taken, as scipy.stats takes them
    with pytest.raises(TypeError, match="a must be a tensor or an array"):
        kendall_tau("1 2 3", b)
    # a NaN on a position the mask leaves out does not count (nan_policy='omit' there)
    mask = torch.tensor([True, False, True, True])
    t = kendall_tau(torch.tensor(a), torch.tensor(b), mask)
    assert (
        abs(t.item() - scipy.stats.kendalltau([1, 3, 2], [1, 3, 4]).statistic) < 1e-12
    )
    r = spearman(torch.tensor(a), torch.tensor(b), mask)
    assert abs(r.item() - scipy.stats.spearmanr([1, 3, 2], [1, 3, 4]).statistic) < 1e-12
    # batched: only the row with the NaN becomes NaN
    A = torch.tensor([a, [4.0, 3.0, 2.0, 1.0]])
    B = torch.tensor([b, b])
    got = kendall_tau(A, B)
    assert got[0].isnan() and abs(got[1].item() + 1) < 1e-12
    got = spearman(A, B)
    assert got[0].isnan() and abs(got[1].item() + 1) < 1e-12


def test_attention_flow_rejects_a_bad_scale():
    w = torch.softmax(torch.randn(1, 2, 4, 4), -1)
    for bad in (0, -5, 10**12):
        with pytest.raises(ValueError, match="scale"):
            attention_flow([w, w], scale=bad)
    with pytest.raises(TypeError, match="scale"):
        attention_flow([w, w], scale=1e6)
    assert np.isfinite(attention_flow([w, w], scale=10**6).numpy()).all()


def test_jsd_rejects_vectors_off_the_simplex():
    with pytest.raises(ValueError, match="negative or NaN"):
        jsd(torch.tensor([1.5, -0.5]), torch.tensor([0.5, 0.5]))
    with pytest.raises(ValueError, match="negative or NaN"):
        jsd(torch.tensor([0.5, 0.5]), torch.tensor([float("nan"), 1.0]))
    assert (
        abs(jsd(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])) - math.log(2))
        < 1e-6
    )
