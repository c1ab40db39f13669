"""Random-feature attention: unbiased kernel estimates, convergence to SDPA, bad input."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.random_features import (
    positive_random_features,
    random_feature_attention,
    random_projection,
)


@pytest.mark.parametrize("orthogonal", [False, True])
def test_kernel_estimate_is_unbiased(orthogonal):
    """The mean of phi(q) . phi(k) over independent draws approaches exp(q . k)."""
    g = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 8, generator=g, dtype=torch.float64) * 0.5  # (2, d)
    exact = torch.exp(q @ k)
    draws = []
    for _ in range(400):
        w = random_projection(16, 8, orthogonal=orthogonal, generator=g).double()
        draws.append(positive_random_features(q, w) @ positive_random_features(k, w))
    est = torch.stack(draws)
    sem = est.std() / len(draws) ** 0.5
    assert abs(est.mean() - exact) < 4 * sem  # within 4 standard errors
    assert (est > 0).all()  # positive features: positive estimates


@pytest.mark.parametrize("orthogonal", [False, True])
def test_projection_rows_point_every_way_equally(orthogonal):
    """Every coordinate of W's rows has mean 0 and variance 1 (a Gaussian direction).
    A QR without fixing R's diagonal signs leaves a mean near -0.05 per coordinate
    (about 6 standard errors here), which biases the kernel estimate."""
    g = torch.Generator().manual_seed(3)
    w = random_projection(16384, 16, orthogonal=orthogonal, generator=g).double()
    se = w.std(0) / w.shape[0] ** 0.5  # (16,)
    assert (w.mean(0).abs() < 4 * se).all(), w.mean(0)
    assert ((w.var(0) - 1).abs() < 0.1).all()
    if orthogonal:  # each block of 16 rows is orthogonal
        b = w[:16] / w[:16].norm(dim=-1, keepdim=True)
        eye = torch.eye(16, dtype=b.dtype)
        torch.testing.assert_close(b @ b.T, eye, atol=1e-5, rtol=0)  # float32 W


@pytest.mark.parametrize("orthogonal", [False, True])
def test_attention_converges_to_sdpa(orthogonal):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, 3, n, 16, generator=g) * 0.5 for n in (10, 12, 12))
    v = torch.randn(2, 3, 12, 4, generator=g)
    exact = F.scaled_dot_product_attention(q, k, v)
    errs = []
    for m in (16, 4096):  # the mean relative error over 3 draws of W
        e = 0.0
        for _ in range(3):
            w = random_projection(m, 16, orthogonal=orthogonal, generator=g)
            out = random_feature_attention(q, k, v, w)
            e += ((out - exact).norm() / exact.norm()).item() / 3
        errs.append(e)
    assert errs[1] < 0.1 and errs[1] < errs[0] / 4  # error ~ 1 / sqrt(m)


def test_orthogonal_rows_are_orthogonal_within_a_block():
    w = random_projection(20, 8, generator=torch.Generator().manual_seed(0))
    unit = w / w.norm(dim=-1, keepdim=True)
    gram = unit[:8] @ unit[:8].T
    torch.testing.assert_close(gram, torch.eye(8), atol=1e-5, rtol=0)


def test_large_inputs_do_not_overflow():
    g = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 20, 16, generator=g) * 30 for _ in range(3))
    w = random_projection(64, 16, generator=g)
    out = random_feature_attention(q, k, v, w)
    assert torch.isfinite(out).all()


def test_bad_input():
    w = random_projection(8, 4)
    with pytest.raises(ValueError, match="the d of x"):
        positive_random_features(torch.randn(3, 5), w)
    with pytest.raises(ValueError, match="shapes"):
        random_feature_attention(
            torch.randn(3, 4), torch.randn(5, 4), torch.randn(4, 2), w
        )
    nan_q = torch.full((3, 4), float("nan"))
    out = random_feature_attention(nan_q, torch.randn(5, 4), torch.randn(5, 2), w)
    assert out.isnan().all()  # NaN in -> NaN out, as PyTorch; under debug it raises
    with attnlab.debug(), pytest.raises(ValueError, match="q contains NaN"):
        random_feature_attention(nan_q, torch.randn(5, 4), torch.randn(5, 2), w)
    with pytest.raises(ValueError, match="m must be"):
        random_projection(0, 4)
