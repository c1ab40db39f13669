"""Scoring functions: values against explicit formulas, shapes, errors, devices."""

from __future__ import annotations

import math

import pytest
import torch

from attnlab import scoring
from attnlab.scoring import (
    AdditiveScore,
    BilinearScore,
    DotScore,
    MLPScore,
    ScaledDotScore,
    dot_score,
    get_scorer,
    scaled_dot_score,
)


def _qk(*lead, T=3, S=5, dq=4, dk=4, device="cpu", dtype=torch.float32):
    q = torch.randn(*lead, T, dq, device=device, dtype=dtype)
    k = torch.randn(*lead, S, dk, device=device, dtype=dtype)
    return q, k


def test_dot_matches_loop(device):
    q, k = _qk(2, device=device)
    got = dot_score(q, k)
    assert got.shape == (2, 3, 5) and got.device.type == device.type
    for b in range(2):
        for t in range(3):
            for j in range(5):
                torch.testing.assert_close(got[b, t, j], k[b, j] @ q[b, t])


def test_scaled_dot_is_dot_over_sqrt_d(device):
    q, k = _qk(2, 2, dq=16, dk=16, device=device)
    torch.testing.assert_close(scaled_dot_score(q, k), dot_score(q, k) / 4.0)
    torch.testing.assert_close(scaled_dot_score(q, k, scale=0.5), dot_score(q, k) * 0.5)
    torch.testing.assert_close(ScaledDotScore()(q, k), dot_score(q, k) / 4.0)
    torch.testing.assert_close(ScaledDotScore(scale=2.0)(q, k), dot_score(q, k) * 2)
    torch.testing.assert_close(DotScore()(q, k), dot_score(q, k))


def test_scaled_dot_keeps_variance_near_one():
    # unit-variance q, k: dot products have variance D, scaled ones variance ~1
    q, k = _qk(T=64, S=64, dq=256, dk=256)
    assert 200 < dot_score(q, k).var() < 312
    assert 0.8 < scaled_dot_score(q, k).var() < 1.2


def test_bilinear_formula_and_identity(device):
    q, k = _qk(2, dq=3, dk=6, device=device)
    s = BilinearScore(3, 6).to(device)
    assert s.W.shape == (6, 3)
    want = torch.einsum("bsk,kq,btq->bts", k, s.W, q)  # k_jᵀ W q_t
    torch.testing.assert_close(s(q, k), want)
    eye = BilinearScore(4, 4).to(device)
    with torch.no_grad():
        eye.W.copy_(torch.eye(4))
    q, k = _qk(device=device)
    torch.testing.assert_close(eye(q, k), dot_score(q, k))


def test_additive_matches_formula(device):
    q, k = _qk(2, dq=3, dk=5, device=device)
    s = AdditiveScore(3, 5, d_hidden=7).to(device)
    W1, W2, v = s.W1.weight, s.W2.weight, s.v.weight[0]
    got = s(q, k)
    assert got.shape == (2, 3, 5)
    for b in range(2):
        for t in range(3):
            for j in range(5):
                want = v @ torch.tanh(W1 @ k[b, j] + W2 @ q[b, t])
                torch.testing.assert_close(got[b, t, j], want)


def test_additive_is_bounded_for_huge_inputs():
    q, k = _qk(dq=3, dk=3)
    s = AdditiveScore(3, 3, 6)
    got = s(q * 1e6, k * 1e6)
    assert torch.isfinite(got).all()
    assert got.abs().max() <= s.v.weight.abs().sum() + 1e-5


def test_mlp_matches_concatenation(device):
    q, k = _qk(2, dq=3, dk=5, device=device)
    s = MLPScore(3, 5, d_hidden=6).to(device)
    T, S = q.shape[-2], k.shape[-2]
    pairs = torch.cat(
        [q[:, :, None].expand(-1, T, S, -1), k[:, None].expand(-1, T, S, -1)], dim=-1
    )  # (B, T, S, Dq + Dk)
    want = s.out(torch.relu(s.hidden(pairs))).squeeze(-1)
    torch.testing.assert_close(s(q, k), want)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "bilinear", "additive", "mlp"])
@pytest.mark.parametrize("lead", [(), (2,), (2, 3)])
def test_shapes_and_broadcast(name, lead, device):
    s = get_scorer(name, 4, 4, 5).to(device)
    q, k = _qk(*lead, device=device)
    assert s(q, k).shape == (*lead, 3, 5)
    # keys shared across the batch broadcast against batched queries
    q1 = torch.randn(*lead, 1, 4, device=device)
    k1 = torch.randn(2, 4, device=device)
    assert s(q1, k1).shape == (*lead, 1, 2)


@pytest.mark.parametrize("name", ["dot", "scaled_dot", "bilinear", "additive", "mlp"])
def test_gradients_float64(name):
    s = get_scorer(name, 3, 3, 4).double()
    q = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    k = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: s(a, b), (q, k))


@pytest.mark.parametrize("fn", [dot_score, scaled_dot_score])
def test_mismatched_sizes_raise(fn):
    q, k = _qk(dq=3, dk=4)
    with pytest.raises(ValueError, match=r"Dq=3.*Dk=4"):
        fn(q, k)


def test_errors_name_what_was_wrong():
    q, k = _qk(dq=3, dk=4)
    with pytest.raises(ValueError, match="single query"):
        dot_score(torch.randn(4), torch.randn(5, 4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        dot_score([[1.0, 2.0]], torch.randn(5, 2))
    with pytest.raises(TypeError, match="dtype"):
        dot_score(torch.randn(2, 3), torch.randn(4, 3, dtype=torch.float64))
    with pytest.raises(ValueError, match="batch dimensions"):
        dot_score(torch.randn(2, 3, 4), torch.randn(3, 5, 4))
    with pytest.raises(ValueError, match="scale"):
        scaled_dot_score(q, q, scale=-1.0)
    with pytest.raises(ValueError, match="d_q=4"):
        BilinearScore(4, 4)(q, k)  # q has 3 features, built for 4
    with pytest.raises(ValueError, match="d_k=3"):
        AdditiveScore(3, 3, 5)(q, k)
    with pytest.raises(ValueError, match="d_k=3"):
        MLPScore(3, 3, 5)(q, k)
    for bad in (0, -2, 2.5, True):
        with pytest.raises(ValueError, match="positive int"):
            AdditiveScore(3, bad, 4)


def test_get_scorer():
    assert isinstance(get_scorer("dot"), DotScore)
    assert isinstance(get_scorer("scaled_dot", 4, 4), ScaledDotScore)
    assert isinstance(get_scorer("bilinear", 2, 3), BilinearScore)
    add = get_scorer("additive", 2, 3)
    assert isinstance(add, AdditiveScore) and add.W1.out_features == 3
    assert get_scorer("mlp", 2, 3, d_hidden=7).hidden.out_features == 7
    with pytest.raises(ValueError, match="unknown scorer 'cosine'"):
        get_scorer("cosine", 2, 2)
    with pytest.raises(ValueError, match="needs d_q and d_k"):
        get_scorer("additive")
    with pytest.raises(ValueError, match="d_q == d_k"):
        get_scorer("dot", 2, 3)


def test_public_names():
    assert set(scoring.__all__) >= {"dot_score", "get_scorer", "AdditiveScore"}
    assert math.isclose(
        float(scaled_dot_score(torch.ones(1, 4), torch.ones(1, 4))), 2.0
    )


def test_single_key_and_query():
    q, k = _qk(T=1, S=1, dq=2, dk=2)
    for name in ["dot", "scaled_dot", "bilinear", "additive", "mlp"]:
        assert get_scorer(name, 2, 2)(q, k).shape == (1, 1)
