"""attnlab.attend: the score -> map -> combine recipe."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab import attend
from attnlab.mappings import sigmoid
from attnlab.scoring import AdditiveScore, dot_score, scaled_dot_score


def _qkv(*lead, T=3, S=5, D=4, Dv=6, device="cpu", dtype=torch.float32):
    def make(*shape):
        return torch.randn(*lead, *shape, device=device, dtype=dtype)

    return make(T, D), make(S, D), make(S, Dv)


@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_shapes_and_simplex(lead, device):
    q, k, v = _qkv(*lead, device=device)
    out, w = attend(q, k, v)
    assert out.shape == (*lead, 3, 6) and w.shape == (*lead, 3, 5)
    assert out.device.type == w.device.type == device.type
    assert (w >= 0).all()
    torch.testing.assert_close(w.sum(-1), torch.ones(*lead, 3, device=device))
    torch.testing.assert_close(out, w @ v)


def test_matches_the_formula(device):
    q, k, v = _qkv(2, device=device)
    out, w = attend(q, k, v)
    want_w = torch.softmax(q @ k.transpose(-2, -1), dim=-1)
    torch.testing.assert_close(w, want_w)
    torch.testing.assert_close(out, want_w @ v)


def test_single_query_is_z_equals_v_transpose_p():
    q, k, v = _qkv(T=1)
    out, w = attend(q, k, v)
    p = torch.softmax(k @ q[0], dim=0)  # θ = K q, p = softmax(θ)
    torch.testing.assert_close(out[0], v.T @ p)  # z = Vᵀ p
    torch.testing.assert_close(w[0], p)


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_matches_torch_sdpa(causal, device):
    q, k, v = _qkv(2, 2, T=4, S=4, device=device)
    mask = torch.ones(4, 4, dtype=torch.bool, device=device)
    if causal:
        mask = mask.tril()
    out, _ = attend(q, k, v, score=scaled_dot_score, mask=mask)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, want)


def test_boolean_mask_blocks_keys(device):
    q, k, v = _qkv(2, device=device)
    mask = torch.tensor([True, False, True, False, True], device=device)
    out, w = attend(q, k, v, mask=mask)
    assert (w[..., ~mask] == 0).all()
    sub_out, sub_w = attend(q, k[:, mask], v[:, mask])
    torch.testing.assert_close(out, sub_out)
    torch.testing.assert_close(w[..., mask], sub_w)


def test_float_mask_is_added(device):
    q, k, v = _qkv(2, device=device)
    blocked = torch.tensor([False, True, False, False, True], device=device)
    inf_mask = torch.zeros(5, device=device).masked_fill(blocked, float("-inf"))
    out_b, w_b = attend(q, k, v, mask=~blocked)
    out_f, w_f = attend(q, k, v, mask=inf_mask)
    torch.testing.assert_close(w_f, w_b)
    torch.testing.assert_close(out_f, out_b)
    bias = torch.randn(3, 5, device=device)  # a general additive bias
    _, w = attend(q, k, v, mask=bias)
    torch.testing.assert_close(w, torch.softmax(q @ k.transpose(-2, -1) + bias, -1))
    _, w_old = attend(q, k, v, mask=attnlab.to_additive(~blocked, -10000.0))
    torch.testing.assert_close(w_old, w_b)  # -10000 is enough for these small scores


def test_fully_masked_row_gives_zeros_not_nan(device):
    q, k, v = _qkv(2, device=device)
    mask = torch.ones(2, 3, 5, dtype=torch.bool, device=device)
    mask[1, 2] = False  # query 2 of batch 1 may attend nothing
    out, w = attend(q, k, v, mask=mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert (w[1, 2] == 0).all() and (out[1, 2] == 0).all()
    torch.testing.assert_close(w[0].sum(-1), torch.ones(3, device=device))
    float_mask = torch.full((3, 5), float("-inf"), device=device)
    out, w = attend(q, k, v, mask=float_mask)
    assert (w == 0).all() and (out == 0).all()


def test_huge_scores_and_length_one(device):
    q, k, v = _qkv(device=device)
    out, w = attend(q * 1e4, k, v)
    assert torch.isfinite(w).all()
    top = (q @ k.T).argmax(-1)
    torch.testing.assert_close(out, v[top])  # one-hot: the best key's value
    q1, k1, v1 = _qkv(T=1, S=1, device=device)
    out1, w1 = attend(q1, k1, v1)
    torch.testing.assert_close(w1, torch.ones(1, 1, device=device))
    torch.testing.assert_close(out1, v1)


def test_custom_scorer_and_mapping(device):
    q, k, v = _qkv(2, D=4, device=device)
    k3 = torch.randn(2, 5, 3, device=device)  # keys of another size: Dq=4, Dk=3
    scorer = AdditiveScore(4, 3, 8).to(device)
    out, w = attend(q, k3, v, score=scorer)
    torch.testing.assert_close(w, torch.softmax(scorer(q, k3), -1))
    out, w = attend(q, k, v, mapping=sigmoid)
    torch.testing.assert_close(w, torch.sigmoid(dot_score(q, k)))
    assert not torch.allclose(w.sum(-1), torch.ones_like(w[..., 0]))
    mask = torch.tensor([True, True, False, True, False], device=device)
    _, w = attend(q, k, v, mapping=sigmoid, mask=mask)
    assert (w[..., ~mask] == 0).all()

    def uniform(scores):  # any callable scores -> weights works
        return torch.full_like(scores, 1.0 / scores.shape[-1])

    out, _ = attend(q, k, v, mapping=uniform)
    torch.testing.assert_close(out, v.mean(-2, keepdim=True).expand(-1, 3, -1))


def test_errors():
    q, k, v = _qkv()
    with pytest.raises(ValueError, match="keys and values"):
        attend(q, k, v[:4])
    with pytest.raises(ValueError, match="Dq=4"):
        attend(q, torch.randn(5, 3), v)
    with pytest.raises(ValueError, match="does not broadcast"):
        attend(q, k, v, mask=torch.ones(3, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        attend(q, k, v, mask=torch.ones(3, 5, dtype=torch.int64))
    with pytest.raises(TypeError, match="Tensor"):
        attend(q, k, v, mask=[[True] * 5] * 3)


@pytest.mark.parametrize("mask_kind", ["none", "bool", "float", "dead_row"])
def test_gradients_finite_with_masks(mask_kind, device):
    q, k, v = (t.requires_grad_() for t in _qkv(2, device=device))
    mask = {
        "none": None,
        "bool": torch.rand(2, 3, 5, device=device) > 0.3,
        "float": torch.zeros(3, 5, device=device).masked_fill(
            torch.rand(3, 5, device=device) > 0.6, float("-inf")
        ),
        "dead_row": torch.zeros(2, 3, 5, dtype=torch.bool, device=device),
    }[mask_kind]
    if mask is not None and mask.dtype == torch.bool and mask_kind == "bool":
        mask[..., 0] = True  # keep one key per row
    out, w = attend(q, k, v, mask=mask)
    (out.square().sum() + w.square().sum()).backward()
    for t in (q, k, v):
        assert t.grad is not None and torch.isfinite(t.grad).all()
    if mask_kind == "dead_row":
        assert (q.grad == 0).all() and (k.grad == 0).all()


def test_gradcheck_float64():
    q, k, v = (
        t.requires_grad_() for t in _qkv(T=2, S=3, D=2, Dv=2, dtype=torch.float64)
    )
    mask = torch.tensor([[True, False, True], [False, False, False]])

    def fn(a, b, c):
        return attend(a, b, c, mask=mask)[0]

    assert torch.autograd.gradcheck(fn, (q, k, v))
    assert math.isfinite(float(fn(q, k, v).detach().sum()))


def test_attend_dead_row_is_zero_whatever_the_mapping():
    q, k, v = torch.randn(1, 2, 3), torch.randn(1, 4, 3), torch.randn(1, 4, 5)
    mask = torch.ones(1, 2, 4, dtype=torch.bool)
    mask[0, 1] = False  # the second query may attend nothing
    out, w = attnlab.attend(q, k, v, mapping=lambda s: torch.softmax(s, -1), mask=mask)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    assert torch.equal(w[0, 1], torch.zeros(4)) and torch.equal(
        out[0, 1], torch.zeros(5)
    )


def test_attend_names_mismatched_dtypes():
    q, k = torch.randn(1, 2, 3), torch.randn(1, 4, 3)
    with pytest.raises(TypeError, match="share a dtype"):
        attnlab.attend(q, k, torch.randn(1, 4, 5, dtype=torch.float64))
