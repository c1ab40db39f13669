"""Chapter 6 checks pass the library, fail wrong answers, and report stubs."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import attnlab
from attnlab.check import CheckFailed


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


def good_split(x, n_heads):
    B, T, D = x.shape
    return x.view(B, T, n_heads, D // n_heads).transpose(1, 2)


def bad_split(x, n_heads):  # right shape, scrambled heads
    B, T, D = x.shape
    return x.reshape(B, n_heads, T, D // n_heads)


def good_mha(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    B, T, D = x.shape
    m = attnlab.MultiHeadAttention(D, n_heads, bias=False).to(x.dtype)
    with torch.no_grad():
        for lin, W in zip((m.w_q, m.w_k, m.w_v, m.w_o), (W_q, W_k, W_v, W_o)):
            lin.weight.copy_(W.T)
    return m(x, x, x, attn_mask=mask)


def unscaled_by_head(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    B, T, D = x.shape
    q, k, v = (good_split(x @ W, n_heads) for W in (W_q, W_k, W_v))
    scores = q @ k.transpose(-2, -1) / D**0.5  # wrong: sqrt(D), not sqrt(Dh)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, -1).nan_to_num()
    out = (w @ v).transpose(1, 2).reshape(B, T, D) @ W_o
    return out, w


def nan_on_dead_rows(x, W_q, W_k, W_v, W_o, n_heads, mask=None):
    B, T, D = x.shape
    q, k, v = (good_split(x @ W, n_heads) for W in (W_q, W_k, W_v))
    scores = q @ k.transpose(-2, -1) / (D // n_heads) ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    w = torch.softmax(scores, -1)  # NaN on a fully masked row
    return (w @ v).transpose(1, 2).reshape(B, T, D) @ W_o, w


class Fixed(nn.Module):
    def __init__(self, d_size, num_heads):
        super().__init__()
        self.num_heads, self.h_size = num_heads, d_size // num_heads
        self.linear_q = nn.Linear(d_size, d_size)
        self.linear_k = nn.Linear(d_size, d_size)
        self.linear_v = nn.Linear(d_size, d_size)
        self.linear_o = nn.Linear(d_size, d_size)

    def forward(self, queries, keys, values=None):
        values = keys if values is None else values
        B, T, _ = queries.shape
        q, k, v = self.linear_q(queries), self.linear_k(keys), self.linear_v(values)
        q, k, v = (
            t.view(B, -1, self.num_heads, self.h_size).transpose(1, 2)
            for t in (q, k, v)
        )
        w = torch.softmax(q @ k.transpose(-2, -1) / self.h_size**0.5, -1)
        z = (w @ v).transpose(1, 2).reshape(B, T, -1)
        return self.linear_o(z)


class Buggy(Fixed):
    def __init__(self, d_size, num_heads):
        super().__init__(d_size, num_heads)
        for name in ("linear_q", "linear_k", "linear_v"):
            setattr(self, name, nn.Linear(d_size, self.h_size))


class NoTranspose(Fixed):
    def forward(self, queries, keys, values=None):
        values = keys if values is None else values
        B, T, _ = queries.shape
        q, k, v = self.linear_q(queries), self.linear_k(keys), self.linear_v(values)
        q, k, v = (t.reshape(B, self.num_heads, -1, self.h_size) for t in (q, k, v))
        w = torch.softmax(q @ k.transpose(-2, -1) / self.h_size**0.5, -1)
        return self.linear_o((w @ v).reshape(B, T, -1))


def stub(*args, **kwargs):
    raise NotImplementedError


class Stub(nn.Module):
    def __init__(self, d_size, num_heads):
        raise NotImplementedError


@pytest.mark.parametrize(
    "check,good,bads",
    [
        ("split_heads", good_split, [bad_split]),
        ("multi_head_attention", good_mha, [unscaled_by_head, nan_on_dead_rows]),
        ("fixed_slides_mha", Fixed, [Buggy, NoTranspose]),
    ],
)
def test_check(check, good, bads, capsys):
    fn = getattr(attnlab.check, check)
    assert fn(good)
    assert "✅" in capsys.readouterr().out
    for bad in bads:
        with pytest.raises(CheckFailed):
            fn(bad)
        assert "❌" in capsys.readouterr().out


@pytest.mark.parametrize(
    "check", ["split_heads", "multi_head_attention", "fixed_slides_mha"]
)
def test_stub_is_pending(check, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    fn = getattr(attnlab.check, check)
    assert not fn(Stub if check == "fixed_slides_mha" else stub)
    assert "not implemented yet" in capsys.readouterr().out


def test_non_strict_does_not_raise(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not attnlab.check.fixed_slides_mha(Buggy)
    out = capsys.readouterr().out
    assert "❌" in out and "d_size -> d_size" in out
