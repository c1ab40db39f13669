"""Positional encodings: the sinusoidal table, relative shifts, learned, rotary."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab
from attnlab.positional import get_positional


def test_sinusoidal_matches_formula():
    pe = attnlab.sinusoidal_encoding(50, 16, dtype=torch.float64)
    for pos in (0, 1, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-12)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(
                math.cos(angle), abs=1e-12
            )


def test_sinusoidal_odd_width_and_length_one():
    pe = attnlab.sinusoidal_encoding(1, 5)
    assert pe.shape == (1, 5)
    torch.testing.assert_close(pe, torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.0]]))
    assert attnlab.sinusoidal_encoding(20, 7).shape == (20, 7)


@pytest.mark.parametrize(
    "bad, name",
    [((0, 4), "n_positions"), ((4, 0), "d_model"), ((-1, 8), "n_positions")],
)
def test_sinusoidal_rejects_bad_sizes(bad, name):
    with pytest.raises(ValueError, match=f"{name} must be >= 1"):
        attnlab.sinusoidal_encoding(*bad)
    with pytest.raises(TypeError):
        attnlab.sinusoidal_encoding(4.0, 8)


@pytest.mark.parametrize("k", [1, 3, -2, 17])
def test_relative_shift_is_one_linear_map(k):
    pe = attnlab.sinusoidal_encoding(80, 12, dtype=torch.float64)
    M = attnlab.relative_shift_matrix(k, 12, dtype=torch.float64)
    lo, hi = max(0, -k), 80 - max(0, k)
    torch.testing.assert_close(pe[lo:hi] @ M.T, pe[lo + k : hi + k])
    # a rotation: orthogonal, so it keeps norms
    torch.testing.assert_close(M @ M.T, torch.eye(12, dtype=torch.float64))


def test_relative_shift_needs_even_width():
    with pytest.raises(ValueError, match="even"):
        attnlab.relative_shift_matrix(1, 7)


def test_sinusoidal_module_adds_table_with_offset_and_grows(device):
    enc = attnlab.SinusoidalPositionalEncoding(8, max_len=4).to(device)
    x = torch.zeros(2, 6, 8, device=device)  # longer than max_len: table grows
    out = enc(x)
    torch.testing.assert_close(out[0].cpu(), attnlab.sinusoidal_encoding(6, 8))
    out = enc(torch.zeros(1, 2, 8, device=device), offset=3)
    torch.testing.assert_close(out[0].cpu(), attnlab.sinusoidal_encoding(5, 8)[3:])
    assert sum(p.numel() for p in enc.parameters()) == 0  # nothing to train
    with pytest.raises(ValueError, match=r"\(B, T, D=8\)"):
        enc(torch.zeros(2, 3, 5, device=device))


def test_learned_positions(device):
    enc = attnlab.LearnedPositionalEncoding(4, max_len=5).to(device)
    x = torch.randn(3, 5, 4, device=device)
    torch.testing.assert_close(enc(x) - x, enc.embedding.weight[None].expand(3, -1, -1))
    torch.testing.assert_close(
        enc(x[:1, :2], offset=3) - x[:1, :2], enc.embedding.weight[None, 3:]
    )
    with pytest.raises(ValueError, match="5 positions"):
        enc(torch.zeros(1, 6, 4, device=device))
    loss = enc(x).sum()
    loss.backward()
    assert enc.embedding.weight.grad.abs().sum() > 0  # it is trained


def test_rotary_scores_depend_on_offset_only(device):
    g = torch.Generator().manual_seed(1)
    q = (
        torch.randn(1, 8, generator=g).expand(10, 8).to(device)
    )  # same vector everywhere
    k = torch.randn(1, 8, generator=g).expand(10, 8).to(device)
    rq, rk = attnlab.apply_rotary(q), attnlab.apply_rotary(k)
    scores = rq @ rk.T  # (T, T)
    for d in (-3, 0, 2):
        diag = torch.diagonal(scores, offset=d)
        torch.testing.assert_close(diag, diag[:1].expand_as(diag), atol=1e-5, rtol=1e-5)
    # rotations keep norms, and position 0 is untouched
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))
    torch.testing.assert_close(rq[0], q[0])
    with pytest.raises(ValueError, match="even D"):
        attnlab.apply_rotary(torch.zeros(3, 5))


def test_get_positional():
    x = torch.randn(2, 3, 8)
    assert torch.equal(get_positional("none", 8)(x), x)
    assert isinstance(get_positional("learned", 8), attnlab.LearnedPositionalEncoding)
    with pytest.raises(ValueError, match="sinusoidal"):
        get_positional("rope?", 8)
