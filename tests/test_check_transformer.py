"""The chapter 7 checks pass the chapter's answers, and fail the wrong answers students
write with a hint that names the bug."""

from __future__ import annotations

import math

import pytest
import torch
from checkhelp import fails_with

import attnlab

pytestmark = pytest.mark.usefixtures("strict_checks")


# -------------------------------------------------------------------- prefix_lm_mask
def good_prefix(prefix, lengths, T):  # the chapter's solution
    i = torch.arange(T)[:, None]  # (T, 1)
    j = torch.arange(T)[None, :]  # (1, T)
    seen = (j <= i)[None] | (j[None] < prefix[:, None, None])  # (B, T, T)
    return seen & (j[None] < lengths[:, None, None])


def prefix_ignored(prefix, lengths, T):  # the plain decoder mask of chapter 5
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    return causal[None] & (torch.arange(T)[None, :] < lengths[:, None])[:, None, :]


def prefix_sees_targets(prefix, lengths, T):  # prefix rows see every real token
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    seen = (j <= i)[None] | (i[None] < prefix[:, None, None])
    return seen & (j[None] < lengths[:, None, None])


def prefix_pads_queries(prefix, lengths, T):  # padded rows masked, not columns
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    seen = (j <= i)[None] | (j[None] < prefix[:, None, None])
    return seen & (i[None] < lengths[:, None, None])


def prefix_blanks_padding_rows(prefix, lengths, T):  # columns right, rows blanked too
    real = torch.arange(T)[None, :] < lengths[:, None]  # (B, T)
    return good_prefix(prefix, lengths, T) & real[:, :, None]


def prefix_strict(prefix, lengths, T):  # off by one: a target may not see itself
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    seen = (j < i)[None] | (j[None] < prefix[:, None, None])
    return seen & (j[None] < lengths[:, None, None])


def prefix_library(prefix, lengths, T):
    keys = attnlab.padding_mask(lengths, T)
    pre = torch.arange(T)[None, :] < prefix[:, None]
    return (attnlab.causal_mask(T)[None] | pre[:, None, :]) & keys[:, None, :]


def test_prefix_lm_mask_check():
    check = attnlab.check.prefix_lm_mask
    assert check(good_prefix)
    fails_with(check, prefix_ignored, r"all prefix.*both directions")
    fails_with(check, prefix_sees_targets, r"prefix and target.*no later token")
    fails_with(check, prefix_pads_queries, r"'padding'.*mask the columns")
    fails_with(check, prefix_blanks_padding_rows, r"'padding'.*do not blank them")
    fails_with(check, prefix_strict, r"no prefix.*itself included")
    fails_with(check, lambda p, n, T: good_prefix(p, n, T).float(), r"bool tensor")
    fails_with(check, prefix_library, r"called attnlab\.masking\.padding_mask")


# ----------------------------------------------------------- label_smoothing_optimum
def good_optimum(eps, V):  # the chapter's solution
    p_gold, p_other = 1 - eps + eps / V, eps / V
    loss = -p_gold * math.log(p_gold)
    if p_other > 0:
        loss -= (V - 1) * p_other * math.log(p_other)
    return p_gold, loss


def optimum_one_hot(eps, V):  # "the best model is sure of the gold token"
    return 1.0, 0.0


def optimum_forgets_gold_share(eps, V):  # 1 - eps on gold: the eps/V share missed
    p_gold, p_other = 1 - eps, eps / (V - 1)
    loss = -(1 - eps + eps / V) * math.log(p_gold)
    if p_other > 0:
        loss -= (V - 1) * (eps / V) * math.log(p_other)
    return p_gold, loss


def test_label_smoothing_check():
    check = attnlab.check.label_smoothing_optimum
    assert check(good_optimum)
    fails_with(check, optimum_one_hot, r"eps=0\.1, V=15.*not 0")
    fails_with(check, optimum_forgets_gold_share, r"eps=0\.1, V=15.*gold one included")
    fails_with(check, lambda eps, V: 0.9, r"eps=0\.1, V=15.*entropy of q")


# -------------------------------------------------------------- pre_ln_decoder_layer
def _causal(T):
    return torch.ones(T, T, dtype=torch.bool).tril()


def good_pre_ln_decoder(layer, y, memory, memory_mask):  # the chapter's solution
    causal = _causal(y.shape[1])
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=causal)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, key_padding_mask=memory_mask)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))


def pre_ln_decoder_post_order(layer, y, memory, memory_mask):  # the post-LN order
    y = layer.norm1(y + layer.self_attn(y, y, y, attn_mask=_causal(y.shape[1]))[0])
    y = layer.norm2(
        y + layer.cross_attn(y, memory, memory, key_padding_mask=memory_mask)[0]
    )
    return layer.norm3(y + layer.linear2(layer.activation(layer.linear1(y))))


def pre_ln_decoder_no_causal(layer, y, memory, memory_mask):
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, key_padding_mask=memory_mask)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))


def pre_ln_decoder_no_memory_mask(layer, y, memory, memory_mask):
    causal = _causal(y.shape[1])
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=causal)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))


def pre_ln_decoder_flipped_mask(layer, y, memory, memory_mask):  # PyTorch's True
    causal = _causal(y.shape[1])
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=causal)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, key_padding_mask=~memory_mask)[0]
    h = layer.norm3(y)
    return y + layer.linear2(layer.activation(layer.linear1(h)))


def pre_ln_decoder_relu(layer, y, memory, memory_mask):  # F.relu, not layer.activation
    causal = _causal(y.shape[1])
    h = layer.norm1(y)
    y = y + layer.self_attn(h, h, h, attn_mask=causal)[0]
    h = layer.norm2(y)
    y = y + layer.cross_attn(h, memory, memory, key_padding_mask=memory_mask)[0]
    h = layer.norm3(y)
    return y + layer.linear2(torch.relu(layer.linear1(h)))


def pre_ln_decoder_calls_layer(layer, y, memory, memory_mask):
    return layer(
        y, memory, tgt_mask=_causal(y.shape[1]), memory_key_padding_mask=memory_mask
    )


def test_pre_ln_decoder_check():
    check = attnlab.check.pre_ln_decoder_layer
    assert check(good_pre_ln_decoder)
    fails_with(check, pre_ln_decoder_post_order, r"T=1.*no LayerNorm after")
    fails_with(check, pre_ln_decoder_no_causal, r"T=4, no padding.*causal")
    fails_with(check, pre_ln_decoder_no_memory_mask, r"padding.*key_padding_mask")
    fails_with(check, pre_ln_decoder_relu, r"GELU.*layer\.activation")
    fails_with(check, pre_ln_decoder_flipped_mask, r"T=1, no padding.*pass it as it is")
    fails_with(check, pre_ln_decoder_calls_layer, r"you called layer\(\.\.\.\) itself")
    assert check(good_pre_ln_decoder)  # the layers' own forward is back afterwards


def test_check_leaves_global_rng_alone():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    attnlab.check.pre_ln_decoder_layer(good_pre_ln_decoder)
    assert torch.equal(torch.rand(3), a)


@pytest.mark.parametrize(
    "check",
    [
        attnlab.check.prefix_lm_mask,
        attnlab.check.label_smoothing_optimum,
        attnlab.check.pre_ln_decoder_layer,
        attnlab.check.noam_schedule,
    ],
)
def test_stub_is_pending(check, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*args):
        raise NotImplementedError

    assert not check(stub)
    assert "not implemented yet" in capsys.readouterr().out


# --------------------------------------------------------------------- noam_schedule
def good_noam(step, d_model, warmup):  # the chapter's solution
    return d_model**-0.5 * min(step**-0.5, step * warmup**-1.5)


def noam_max(step, d_model, warmup):  # the larger term: no warm-up at all
    return d_model**-0.5 * max(step**-0.5, step * warmup**-1.5)


def noam_no_width(step, d_model, warmup):  # forgets d_model^-0.5
    return min(step**-0.5, step * warmup**-1.5)


def noam_from_zero(step, d_model, warmup):  # steps counted from 0
    return d_model**-0.5 * min(step**-0.5, (step - 1) * warmup**-1.5)


def noam_library(step, d_model, warmup):
    return attnlab.train.noam_lr(step, d_model, warmup)


def test_noam_schedule_check():
    check = attnlab.check.noam_schedule
    assert check(good_noam)
    fails_with(check, noam_max, r"step 1.*grows linearly")
    fails_with(check, noam_no_width, r"D = 64.*d_model\^-0\.5")
    fails_with(check, noam_from_zero, r"step 1.*counted from 1")
    fails_with(check, noam_library, r"noam_lr")
