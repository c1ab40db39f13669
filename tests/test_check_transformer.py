"""Chapter 7 checks pass the library, fail wrong answers, and report stubs."""

from __future__ import annotations

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


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


def stub(*args):
    raise NotImplementedError


CHECKS = [
    (
        attnlab.check.decoder_self_mask,
        good_mask,
        [mask_pads_queries, mask_upper, mask_as_float],
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
def test_new_checks_pass_good_and_fail_bad(check, good, bads, check_separates):
    check_separates(check, good, bads)


def test_check_leaves_global_rng_alone():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    attnlab.check.pre_ln_decoder_layer(good_pre_ln_decoder)
    assert torch.equal(torch.rand(3), a)
