"""Chapter 7 checks pass the library, fail wrong answers, and report stubs."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


def good_pe(n, d):  # Vaswani et al. (2017), 3.5, written out: sin on even columns
    pe = torch.zeros(n, d)
    for pos in range(n):
        for i in range(0, d, 2):
            angle = pos / 10000 ** (i / d)
            pe[pos, i] = math.sin(angle)
            if i + 1 < d:
                pe[pos, i + 1] = math.cos(angle)
    return pe


def pe_with_i_not_2i(n, d):  # divides by 10000^(i/D): the classic slip
    pos = torch.arange(n)[:, None].float()
    i = torch.arange(d // 2).float()
    ang = pos / 10000 ** (i / d)
    out = torch.zeros(n, d)
    out[:, 0::2], out[:, 1::2] = torch.sin(ang), torch.cos(ang)
    return out


def pe_swapped(n, d):  # cos on even columns
    return good_pe(n, d)[:, [j ^ 1 for j in range(d)]]


def good_mask(lengths, T):
    keys = attnlab.padding_mask(lengths, T)
    return attnlab.causal_mask(T)[None] & keys[:, None, :]


def mask_pads_queries(lengths, T):  # masks padded rows instead of padded columns
    rows = attnlab.padding_mask(lengths, T)
    return attnlab.causal_mask(T)[None] & rows[:, :, None]


def mask_upper(lengths, T):  # future instead of past
    keys = attnlab.padding_mask(lengths, T)
    return attnlab.causal_mask(T).T[None] & keys[:, None, :]


def mask_as_float(lengths, T):
    return good_mask(lengths, T).float()


def good_pre_ln(layer, x, key_mask):
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, key_padding_mask=key_mask)[0]
    return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))


def post_ln(layer, x, key_mask):
    x = layer.norm1(x + layer.self_attn(x, x, x, key_padding_mask=key_mask)[0])
    return layer.norm2(x + layer.linear2(layer.activation(layer.linear1(x))))


def residual_of_normed(layer, x, key_mask):  # adds to norm1(x), not to x
    h = layer.norm1(x)
    x = h + layer.self_attn(h, h, h, key_padding_mask=key_mask)[0]
    return x + layer.linear2(layer.activation(layer.linear1(layer.norm2(x))))


def relu_always(layer, x, key_mask):
    h = layer.norm1(x)
    x = x + layer.self_attn(h, h, h, key_padding_mask=key_mask)[0]
    return x + layer.linear2(torch.relu(layer.linear1(layer.norm2(x))))


def stub(*args):
    raise NotImplementedError


CHECKS = [
    (attnlab.check.sinusoidal_encoding, good_pe, [pe_with_i_not_2i, pe_swapped]),
    (
        attnlab.check.decoder_self_mask,
        good_mask,
        [mask_pads_queries, mask_upper, mask_as_float],
    ),
    (
        attnlab.check.pre_ln_encoder_layer,
        good_pre_ln,
        [post_ln, residual_of_normed, relu_always],
    ),
]


@pytest.mark.parametrize("check, good, bads", CHECKS)
def test_passes_library_and_fails_wrong(check, good, bads, capsys):
    assert check(good)
    assert "✅" in capsys.readouterr().out
    for bad in bads:
        with pytest.raises(CheckFailed, match="❌"):
            check(bad)


@pytest.mark.parametrize("check, good, bads", CHECKS)
def test_stub_is_pending(check, good, bads, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not check(stub)
    assert "not implemented yet" in capsys.readouterr().out


def test_check_leaves_global_rng_alone():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    attnlab.check.pre_ln_encoder_layer(good_pre_ln)
    assert torch.equal(torch.rand(3), a)


# ------------------------------------------------------------- new chapter 7 checks
def good_optimum(eps, V):
    q = torch.full((V,), eps / V, dtype=torch.float64)
    q[0] += 1 - eps
    return q[0].item(), -(q * q.clamp_min(1e-300).log()).sum().item()


def _optimum_one_hot(eps, V):  # "the best model is sure of the gold token"
    return 1.0, 0.0


def good_pre_ln_decoder(layer, y, memory, memory_mask):
    T = y.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=causal)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, key_padding_mask=memory_mask)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))


def _pre_ln_decoder_no_causal(layer, y, memory, memory_mask):
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, key_padding_mask=memory_mask)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))


@pytest.mark.parametrize(
    "check, good, bads",
    [
        (attnlab.check.label_smoothing_optimum, good_optimum, [_optimum_one_hot]),
        (
            attnlab.check.pre_ln_decoder_layer,
            good_pre_ln_decoder,
            [_pre_ln_decoder_no_causal],
        ),
    ],
)
def test_new_checks_pass_good_and_fail_bad(check, good, bads, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert check(good)
    for bad in bads:
        with pytest.raises(CheckFailed):
            check(bad)
