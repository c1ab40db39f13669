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


# ------------------------------------------------------------- new chapter 6 checks
def good_gqa(q, k, v, attn_mask=None):
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    return attnlab.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def _gqa_repeat_not_interleave(q, k, v, attn_mask=None):  # heads 0, G, 2G share
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    return attnlab.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def good_property_test(make_layer):
    torch.manual_seed(0)
    layer = make_layer(12, 3)
    x = torch.randn(2, 7, 12)
    perm = torch.randperm(7)
    with torch.no_grad():
        a = layer(x[:, perm], x[:, perm], x[:, perm])
        b = layer(x, x, x)[:, perm]
    return bool(torch.allclose(a, b, atol=1e-5))


def _shape_only_test(make_layer):  # passes every bug with the right shapes
    x = torch.randn(2, 7, 12)
    return make_layer(12, 3)(x, x, x).shape == x.shape


def good_torch_masks(torch_mha, x, attn_mask=None, key_padding_mask=None):
    out = torch_mha(
        x, x, x,
        attn_mask=None if attn_mask is None else ~attn_mask,
        key_padding_mask=None if key_padding_mask is None else ~key_padding_mask,
        need_weights=False,
    )[0]  # fmt: skip
    return torch.where(torch.isnan(out), torch_mha.out_proj.bias, out)


def _torch_masks_unflipped(torch_mha, x, attn_mask=None, key_padding_mask=None):
    return torch_mha(
        x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
        need_weights=False,
    )[0]  # fmt: skip


@pytest.mark.parametrize(
    "check, good, bads",
    [
        (
            attnlab.check.grouped_query_attention,
            good_gqa,
            [_gqa_repeat_not_interleave],
        ),
        (attnlab.check.finds_head_bugs, good_property_test, [_shape_only_test]),
        (
            attnlab.check.torch_mha_with_our_masks,
            good_torch_masks,
            [_torch_masks_unflipped],
        ),
    ],
)
def test_new_checks_pass_good_and_fail_bad(check, good, bads, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert check(good)
    for bad in bads:
        with pytest.raises(CheckFailed):
            check(bad)
