"""attnlab.scaled_dot_product_attention against torch's F.scaled_dot_product_attention."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab import scaled_dot_product_attention as sdpa

TOL = {
    torch.float32: dict(atol=1e-5, rtol=1e-4),
    torch.float64: dict(atol=1e-10, rtol=1e-8),
    torch.bfloat16: dict(atol=3e-2, rtol=3e-2),
}


def qkv(B=2, H=3, T=5, S=7, Dh=4, Dv=6, dtype=torch.float32, device="cpu"):
    g = dict(dtype=dtype, device=device)
    return (
        torch.randn(B, H, T, Dh, **g),
        torch.randn(B, H, S, Dh, **g),
        torch.randn(B, H, S, Dv, **g),
    )


def masks(T, S, device):
    """(name, our mask, kwargs for torch) with at least one allowed key per row."""
    bool_mask = torch.rand(2, 1, T, S, device=device) > 0.4
    bool_mask[..., 0] = True
    float_mask = torch.randn(T, S, device=device)
    float_inf = torch.zeros(T, S, device=device).masked_fill(
        ~bool_mask[0, 0], -math.inf
    )
    return [
        ("none", dict()),
        ("causal", dict(is_causal=True)),
        ("bool", dict(attn_mask=bool_mask)),
        ("float", dict(attn_mask=float_mask)),
        ("float -inf", dict(attn_mask=float_inf)),
        ("scale", dict(scale=0.3)),
    ]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("T,S", [(5, 5), (5, 7), (7, 3), (1, 1)])
def test_forward_matches_torch(device, dtype, T, S):
    q, k, v = qkv(T=T, S=S, dtype=dtype, device=device)
    for name, kw in masks(T, S, device):
        if "attn_mask" in kw and kw["attn_mask"].is_floating_point():
            kw = dict(attn_mask=kw["attn_mask"].to(dtype))
        out, w = sdpa(q, k, v, **kw)
        ref = F.scaled_dot_product_attention(q, k, v, **kw)
        assert out.shape == ref.shape == (2, 3, T, 6), name
        assert w.shape[-2:] == (T, S), name
        torch.testing.assert_close(out, ref, **TOL[dtype], msg=name)
        torch.testing.assert_close(out, w @ v, **TOL[dtype], msg=name)


@pytest.mark.parametrize("kw", [{}, {"is_causal": True}, {"mask": True}])
def test_gradients_match_torch(device, kw):
    q, k, v = qkv(T=4, S=6, dtype=torch.float64, device=device)
    if kw.get("mask"):
        m = torch.rand(4, 6, device=device) > 0.5
        m[:, 2] = True
        kw = dict(attn_mask=m)
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    refs = [t.clone().requires_grad_() for t in (q, k, v)]
    g = torch.randn(2, 3, 4, 6, dtype=torch.float64, device=device)
    (sdpa(*leaves, **kw)[0] * g).sum().backward()
    (F.scaled_dot_product_attention(*refs, **kw) * g).sum().backward()
    for a, b in zip(leaves, refs):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-10, rtol=1e-8)


def test_gradcheck_float64():
    q, k, v = (t.requires_grad_() for t in qkv(1, 2, 3, 4, 3, 2, dtype=torch.float64))
    m = torch.tensor([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]], dtype=torch.bool)

    def fn(q, k, v):
        return sdpa(q, k, v, attn_mask=m)

    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_causal_no_leak(device):
    q, k, v = qkv(T=6, S=6, device=device)
    out, w = sdpa(q, k, v, is_causal=True)
    k2, v2 = k.clone(), v.clone()
    k2[..., 4:, :] += 10.0  # change the future (keys 4, 5)
    v2[..., 4:, :] -= 10.0
    out2, _ = sdpa(q, k2, v2, is_causal=True)
    torch.testing.assert_close(out[..., :4, :], out2[..., :4, :])
    assert not torch.allclose(out[..., 4:, :], out2[..., 4:, :])
    assert torch.all(w.triu(1) == 0)


@pytest.mark.parametrize("kind", ["bool", "float -inf"])
def test_fully_masked_rows_are_zero_forward_and_backward(device, kind):
    q, k, v = (t.requires_grad_() for t in qkv(T=3, S=4, device=device))
    m = torch.ones(3, 4, dtype=torch.bool, device=device)
    m[1] = False  # query 1 may attend nothing
    mask = m if kind == "bool" else attnlab.to_additive(m)
    out, w = sdpa(q, k, v, attn_mask=mask)
    assert torch.all(w[..., 1, :] == 0) and torch.all(out[..., 1, :] == 0)
    assert torch.isfinite(out).all()
    torch.testing.assert_close(
        w[..., [0, 2], :].sum(-1), torch.ones(2, 3, 2, device=device)
    )
    out.square().sum().backward()
    for t in (q, k, v):
        assert torch.isfinite(t.grad).all()
    assert torch.all(q.grad[..., 1, :] == 0)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out[..., [0, 2], :], ref[..., [0, 2], :])


def test_finite_mask_value_is_not_a_full_mask():
    # -10000 instead of -inf: a fully "masked" row is shifted by a constant, so softmax
    # ignores the mask there and attends as if nothing were masked (as torch does)
    q, k, v = qkv(1, 1, 2, 3, 4, 4)
    m = torch.tensor([[True, True, True], [False, False, False]])
    add = attnlab.to_additive(m, -10000.0)
    out, w = sdpa(q, k, v, attn_mask=add)
    _, w_free = sdpa(q, k, v)
    # (only up to float32 rounding: near -10000 the spacing of floats is ~1e-3)
    torch.testing.assert_close(w[0, 0, 1], w_free[0, 0, 1], atol=1e-3, rtol=1e-2)
    assert (w[0, 0, 1] > 0).all()
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, add))


def test_huge_logits_no_nan():
    q, k, v = qkv(1, 1, 4, 5, 8, 3)
    out, w = sdpa(q * 1000, k * 1000, v)
    assert torch.isfinite(out).all() and torch.isfinite(w).all()
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q * 1000, k * 1000, v)
    )


def test_broadcasting_and_3d_inputs():
    q = torch.randn(2, 5, 4)
    k = torch.randn(2, 7, 4)
    v = torch.randn(2, 7, 3)
    out, w = sdpa(q, k, v, attn_mask=torch.rand(5, 7) > 0.2)
    assert out.shape == (2, 5, 3) and w.shape == (2, 5, 7)
    # a mask with a batch dimension broadcasts the head dimension
    q, k, v = qkv(B=2, H=3, T=4, S=5)
    m = torch.rand(2, 1, 4, 5) > 0.3
    m[..., 0] = True
    out, w = sdpa(q, k, v, attn_mask=m)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    )


def test_mapping_swap():
    q, k, v = qkv(1, 1, 3, 4, 2, 2)
    torch.testing.assert_close(sdpa(q, k, v, mapping=None)[1], sdpa(q, k, v)[1])
    out, w = sdpa(q, k, v, mapping=lambda s: attnlab.softmax(s, temperature=1e-4))
    assert torch.allclose(w.amax(-1), torch.ones(1, 1, 3))  # near one-hot
    m = torch.ones(3, 4, dtype=torch.bool)
    m[0] = False
    out, w = sdpa(q, k, v, attn_mask=m, mapping=lambda s: torch.softmax(s, -1))
    assert torch.all(w[0, 0, 0] == 0) and torch.isfinite(out).all()  # NaN row zeroed


def test_dropout():
    q, k, v = qkv(1, 1, 50, 60, 4, 4)
    torch.manual_seed(1)
    out, w = sdpa(q, k, v, dropout_p=0.5)
    _, w0 = sdpa(q, k, v)
    kept = w != 0
    assert 0.4 < kept.float().mean() < 0.6
    torch.testing.assert_close(w[kept], 2 * w0[kept])
    torch.testing.assert_close(out, w @ v)
    out1, w1 = sdpa(q, k, v, dropout_p=1.0)
    assert torch.all(w1 == 0) and torch.all(out1 == 0)


def test_errors():
    q, k, v = qkv()
    with pytest.raises(ValueError, match="Dh"):
        sdpa(q, k[..., :3], v)
    with pytest.raises(ValueError, match="number of keys"):
        sdpa(q, k, v[..., :3, :])
    with pytest.raises(ValueError, match="not both"):  # as PyTorch's function
        sdpa(q, k, v, attn_mask=torch.ones(5, 7, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match="does not broadcast"):
        sdpa(q, k, v, attn_mask=torch.ones(5, 6, dtype=torch.bool))
    with pytest.raises(TypeError, match="bool"):
        sdpa(q, k, v, attn_mask=torch.ones(5, 7, dtype=torch.long))
    with pytest.raises(TypeError, match="dtypes"):
        sdpa(q, k.double(), v)
    with pytest.raises(ValueError, match="dropout_p"):
        sdpa(q, k, v, dropout_p=1.5)
    with pytest.raises(ValueError, match=r"q needs at least 2 dimension"):
        sdpa(q[0, 0, 0], k, v)


@pytest.mark.parametrize("name", ["sparsemax", "entmax15"])
def test_sparse_mappings_with_masks(name):
    mapping = getattr(attnlab, name)
    q, k, v = (t.requires_grad_() for t in qkv(2, 3, 5, 6, 4, 4, dtype=torch.float64))
    m = torch.ones(5, 6, dtype=torch.bool).tril()
    m[2] = False  # a fully masked row

    def fn(q, k, v):
        return sdpa(q, k, v, attn_mask=m, mapping=mapping)[0]

    out, w = sdpa(q, k, v, attn_mask=m, mapping=mapping)
    assert torch.all(w[..., 2, :] == 0) and torch.all(w[..., ~m] == 0)
    assert (w[..., 4, :5] == 0).any()  # sparse: some allowed keys get exactly 0
    torch.testing.assert_close(
        w[..., [0, 1, 3, 4], :].sum(-1), torch.ones(2, 3, 4).double()
    )
    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_is_causal_with_attn_mask_is_refused_as_by_pytorch():
    """Under PyTorch's name, PyTorch's rule: attn_mask and is_causal=True together are
    refused (PyTorch raises too); the merged mask gives PyTorch's result."""
    torch.manual_seed(0)
    q, k, v = qkv(T=5, S=7, dtype=torch.float64)
    keep = torch.rand(2, 1, 5, 7) > 0.3  # (B, 1, T, S)
    keep[..., 0] = True
    causal = attnlab.causal_mask(5, 7)  # (T, S), top-left
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, v, attn_mask=keep, is_causal=True)
    with pytest.raises(ValueError, match="is_causal"):
        sdpa(q, k, v, attn_mask=keep, is_causal=True)
    merged = attnlab.combine_masks(keep, causal)  # (B, 1, T, S)
    out, w = sdpa(q, k, v, attn_mask=merged)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=merged)
    torch.testing.assert_close(out, ref, **TOL[torch.float64])
    blocked = ~(keep & causal).expand_as(w)  # (B, H, T, S)
    assert torch.all(w[blocked] == 0) and blocked.any()
