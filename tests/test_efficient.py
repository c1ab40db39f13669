"""attnlab.efficient: flash, sliding-window and linear attention against references."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab import efficient as E

TOL = {torch.float32: 2e-5, torch.float64: 1e-10}
SHAPES = [  # (T, S, Dh, Dv, block): ragged tiles, T != S, length 1
    (100, 100, 16, 16, (32, 24)),
    (70, 130, 16, 8, (32, 32)),
    (130, 70, 8, 16, (16, 48)),
    (1, 9, 4, 4, (4, 4)),
    (9, 1, 4, 4, (4, 4)),
    (64, 64, 16, 16, None),
]


def qkv(T, S, Dh, Dv, dtype, device="cpu", B=2, H=3):
    g = dict(dtype=dtype, device=device, requires_grad=True)
    return (
        torch.randn(B, H, T, Dh, **g),
        torch.randn(B, H, S, Dh, **g),
        torch.randn(B, H, S, Dv, **g),
    )


def max_err(fn, ref, q, k, v):
    """Largest absolute difference of outputs and of the three input gradients."""
    out, r = fn(q, k, v), ref(q, k, v)
    g = torch.randn_like(r)
    ga = torch.autograd.grad(out, (q, k, v), g)
    gb = torch.autograd.grad(r, (q, k, v), g)
    return max(
        [(out - r).abs().max().item()]
        + [(a - b).abs().max().item() for a, b in zip(ga, gb)]
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("T,S,Dh,Dv,block", SHAPES)
def test_flash_equals_sdpa(dtype, causal, T, S, Dh, Dv, block, device):
    q, k, v = qkv(T, S, Dh, Dv, dtype, device)

    def fn(q, k, v):
        return attnlab.flash_attention(q, k, v, is_causal=causal, block_size=block)

    def ref(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

    assert max_err(fn, ref, q, k, v) < TOL[dtype]


def test_flash_scale_and_fp64_tight():
    q, k, v = qkv(50, 40, 8, 8, torch.float64)
    out = attnlab.flash_attention(q, k, v, scale=0.3, block_size=16)
    ref = F.scaled_dot_product_attention(q, k, v, scale=0.3)
    assert (out - ref).abs().max() < 1e-12


@pytest.mark.parametrize("causal", [False, True])
def test_flash_gradcheck(causal):
    q, k, v = qkv(11, 7, 4, 3, torch.float64, B=1, H=2)

    def fn(q, k, v):
        return attnlab.flash_attention(q, k, v, is_causal=causal, block_size=(4, 3))  # noqa: E731

    assert torch.autograd.gradcheck(fn, (q, k, v))


def test_flash_huge_logits_no_nan():
    q, k, v = qkv(40, 40, 8, 8, torch.float32)
    q = (q * 1000).detach().requires_grad_()
    out = attnlab.flash_attention(q, k, v, block_size=16)
    ref = F.scaled_dot_product_attention(q, k, v)
    assert torch.isfinite(out).all()
    assert (out - ref).abs().max() < 1e-4


def test_flash_memory_is_tiled(monkeypatch):
    """No tensor of T x S elements is ever built: the largest bmm result is one tile."""
    largest = []
    real_bmm = torch.bmm

    def spy(a, b, *args, **kw):
        r = real_bmm(a, b, *args, **kw)
        largest.append(r.shape[-2] * r.shape[-1])
        return r

    monkeypatch.setattr(torch, "bmm", spy)
    q, k, v = qkv(200, 200, 8, 8, torch.float32, B=1, H=1)
    out = attnlab.flash_attention(q, k, v, block_size=50)
    out.sum().backward()
    assert largest and max(largest) <= 50 * 50


def test_causal_skips_tiles():
    plan = E.tile_plan(8, 8, 2, 2, causal=True)
    flat = [c for row in plan for c in row]
    assert (
        flat.count("skip") == 6
        and flat.count("masked") == 4
        and flat.count("full") == 6
    )
    plan = E.tile_plan(100, 100, 10, 10, window=5)
    flat = [c for row in plan for c in row]
    assert flat.count("skip") == 100 - 10 - 2 * 9


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("window", [0, 5, 500])
@pytest.mark.parametrize("T,S", [(60, 60), (45, 70), (70, 45)])
def test_sliding_window_equals_band_mask(dtype, causal, window, T, S):
    q, k, v = qkv(T, S, 8, 8, dtype)
    mask = E.band_mask(T, S, window, causal)  # (T, S)

    def fn(q, k, v):
        return attnlab.sliding_window_attention(
            q, k, v, window, is_causal=causal, block_size=16
        )

    def ref(q, k, v):  # attnlab's SDPA gives zeros on rows with no key, as ours
        return attnlab.scaled_dot_product_attention(q, k, v, attn_mask=mask)[0]

    assert max_err(fn, ref, q, k, v) < TOL[dtype]
    if bool(mask.any(-1).all()):  # no dead row: torch's SDPA agrees too
        out = fn(q, k, v)
        torch.testing.assert_close(
            out, F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        )


def test_fully_masked_rows_are_zero_not_nan():
    """T > S with a window: late queries have no key in their band."""
    q, k, v = qkv(30, 10, 4, 4, torch.float64, B=1, H=1)
    out = attnlab.sliding_window_attention(q, k, v, 3, block_size=8)
    dead = ~E.band_mask(30, 10, 3).any(-1)
    assert dead.sum() == 30 - 13
    assert torch.isfinite(out).all() and (out[..., dead, :] == 0).all()
    out.sum().backward()
    assert all(torch.isfinite(t.grad).all() for t in (q, k, v))
    assert (q.grad[..., dead, :] == 0).all()
    fn = lambda q, k, v: attnlab.sliding_window_attention(q, k, v, 3, block_size=8)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (q.detach().requires_grad_(), k, v))


def test_sliding_window_cost_is_linear(monkeypatch):
    """Work grows with T * window: the number of tiles visited doubles with T."""
    counts = []
    for T in (256, 512):
        plan = E.tile_plan(T, T, 32, 32, window=32)
        counts.append(sum(c != "skip" for row in plan for c in row))
    assert counts[1] <= 2 * counts[0] + 2


def linear_quadratic(q, k, v, causal):
    """The definition: weights phi(q_i).phi(k_j) normalised over the keys."""
    a = E.elu_feature_map(q) @ E.elu_feature_map(k).transpose(-2, -1)  # (..., T, S)
    if causal:
        a = a * E.band_mask(q.shape[-2], k.shape[-2], None, True).to(a.dtype)
    return (a / a.sum(-1, keepdim=True)) @ v


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize(
    "T,S,chunk", [(50, 50, 8), (33, 50, 7), (50, 33, 64), (1, 1, 4)]
)
def test_linear_equals_quadratic_definition(dtype, causal, T, S, chunk):
    q, k, v = qkv(T, S, 8, 6, dtype)

    def fn(q, k, v):
        return attnlab.linear_attention(q, k, v, is_causal=causal, chunk=chunk)

    def ref(q, k, v):
        return linear_quadratic(q, k, v, causal)

    tol = 1e-5 if dtype == torch.float32 else 1e-10
    assert max_err(fn, ref, q, k, v) < tol


def test_linear_causal_no_leak():
    q, k, v = qkv(20, 20, 4, 4, torch.float64)
    out = attnlab.linear_attention(q, k, v, is_causal=True)
    k2, v2 = k.detach().clone(), v.detach().clone()
    k2[..., 10:, :] += 5
    v2[..., 10:, :] -= 3
    out2 = attnlab.linear_attention(q, k2, v2, is_causal=True)
    torch.testing.assert_close(out[..., :10, :], out2[..., :10, :])
    assert not torch.allclose(out[..., 10:, :], out2[..., 10:, :])


@pytest.mark.parametrize(
    "fn",
    [
        lambda q, k, v: attnlab.flash_attention(q, k, v),
        lambda q, k, v: attnlab.sliding_window_attention(q, k, v, 2),
        lambda q, k, v: attnlab.linear_attention(q, k, v),
    ],
)
def test_bad_input(fn):
    q, k, v = (torch.randn(1, 2, 5, 4) for _ in range(3))
    with pytest.raises(ValueError, match="Dh"):
        fn(q, torch.randn(1, 2, 5, 3), v)
    with pytest.raises(ValueError, match="keys S"):
        fn(q, k, torch.randn(1, 2, 6, 4))
    with pytest.raises(ValueError, match="leading"):
        fn(q, torch.randn(1, 3, 5, 4), torch.randn(1, 3, 5, 4))
    with pytest.raises(TypeError, match="dtypes differ"):
        fn(q, k.double(), v)
    with pytest.raises(TypeError, match="torch.Tensor"):
        fn(q.numpy(), k, v)


def test_bad_window():
    q = torch.randn(1, 1, 4, 2)
    with pytest.raises(ValueError, match="window must be >= 0, got -1"):
        attnlab.sliding_window_attention(q, q, q, -1)
    with pytest.raises(TypeError, match="window"):
        attnlab.sliding_window_attention(q, q, q, 2.5)
