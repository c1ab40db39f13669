"""The chapter 6 checks pass the chapter's answers, and fail the wrong answers students
write with a hint that names the bug."""

from __future__ import annotations

import math

import pytest
import torch
from checkhelp import fails_with

import attnlab

pytestmark = pytest.mark.usefixtures("strict_checks")


# ---------------------------------------------------------- grouped_query_attention
def good_gqa(q, k, v, attn_mask=None):  # the chapter's solution
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    return attnlab.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def _gqa_by_hand(q, k, v, attn_mask, transpose=False, dim=-1, scale=True, nan=False):
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    s = (k @ q.transpose(-2, -1)) if transpose else (q @ k.transpose(-2, -1))
    s = s / math.sqrt(q.shape[-1]) if scale else s  # (B, H, T, S)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, -math.inf)
    w = torch.softmax(s, dim=dim)
    w = w if nan else torch.nan_to_num(w, nan=0.0)
    return w @ v, w


def gqa_repeat(q, k, v, attn_mask=None):  # heads 0, G, 2G, ... share a group
    rep = q.shape[1] // k.shape[1]
    k, v = k.repeat(1, rep, 1, 1), v.repeat(1, rep, 1, 1)
    return attnlab.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def gqa_no_sqrt(q, k, v, attn_mask=None):
    return _gqa_by_hand(q, k, v, attn_mask, scale=False)


def gqa_transposed_scores(q, k, v, attn_mask=None):  # k qᵀ: keys as rows
    return _gqa_by_hand(q, k, v, attn_mask, transpose=True)


def gqa_wrong_dim(q, k, v, attn_mask=None):  # normalised over the queries
    return _gqa_by_hand(q, k, v, attn_mask, dim=-2)


def gqa_nan_rows(q, k, v, attn_mask=None):  # textbook softmax on an empty row
    return _gqa_by_hand(q, k, v, attn_mask, nan=True)


def gqa_torch(q, k, v, attn_mask=None):  # PyTorch's own grouped-query path
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=attn_mask, enable_gqa=True
    )
    return out, None


def test_gqa_check():
    check = attnlab.check.grouped_query_attention
    assert check(good_gqa)
    fails_with(check, gqa_repeat, r"H = 6, G = 2.*repeat_interleave, not repeat")
    fails_with(check, gqa_no_sqrt, r"ordinary multi-head.*√Dh")
    fails_with(check, gqa_transposed_scores, r"ordinary multi-head.*q @ kᵀ")
    fails_with(check, gqa_wrong_dim, r"ordinary multi-head.*dim=-1")
    fails_with(check, gqa_nan_rows, r"no key.*not NaN")
    fails_with(check, gqa_torch, r"called torch\.nn\.functional\.scaled_dot_product")


# ------------------------------------------------------------------ finds_head_bugs
def good_property_test(make_layer):  # the chapter's solution
    torch.manual_seed(0)
    layer = make_layer(12, 3)
    x = torch.randn(2, 7, 12)
    perm = torch.randperm(7)
    with torch.no_grad():
        a = layer(x[:, perm], x[:, perm], x[:, perm])
        b = layer(x, x, x)[:, perm]
    return bool(torch.allclose(a, b, atol=1e-5))


def shape_only_test(make_layer):  # passes every bug with the right shapes
    x = torch.randn(2, 7, 12)
    return make_layer(12, 3)(x, x, x).shape == x.shape


def exact_equality_test(make_layer):  # no tolerance: fails the correct layer too
    torch.manual_seed(0)
    layer = make_layer(12, 3)
    x = torch.randn(2, 7, 12)
    perm = torch.randperm(7)
    with torch.no_grad():
        return bool(
            torch.equal(
                layer(x[:, perm], x[:, perm], x[:, perm]), layer(x, x, x)[:, perm]
            )
        )


def reference_test(make_layer):  # copies the weights into PyTorch's layer
    torch.manual_seed(0)
    layer = make_layer(12, 3)
    ref = torch.nn.MultiheadAttention(12, 3, batch_first=True)
    layer.inner.load_torch(ref)
    x = torch.randn(2, 7, 12)
    with torch.no_grad():
        return bool(torch.allclose(layer(x, x, x), ref(x, x, x)[0], atol=1e-5))


def test_finds_head_bugs_check():
    check = attnlab.check.finds_head_bugs
    assert check(good_property_test)
    fails_with(check, shape_only_test, r"split without the transpose.*permute")
    fails_with(check, exact_equality_test, r"correct layer.*tolerance")
    fails_with(check, lambda make_layer: True, r"split without.*permute")
    fails_with(check, reference_test, r"called torch\.nn\.MultiheadAttention")


# --------------------------------------------------------- torch_mha_with_our_masks
def _flip(m):
    return None if m is None else ~m


def _additive(m, dtype):  # attnlab's mask -> a float one both libraries read alike
    if m is None or m.is_floating_point():
        return m
    return torch.zeros(m.shape, dtype=dtype).masked_fill(~m, float("-inf"))


def good_torch_masks(torch_mha, x, attn_mask=None, key_padding_mask=None):
    out = torch_mha(
        x,
        x,
        x,
        attn_mask=_additive(attn_mask, x.dtype),
        key_padding_mask=_additive(key_padding_mask, x.dtype),
    )[0]
    return torch.where(torch.isnan(out), torch_mha.out_proj.bias, out)


def good_torch_masks_flip_unless_mixed(
    torch_mha, x, attn_mask=None, key_padding_mask=None
):  # another right answer: ~ for booleans, float only beside a float attn_mask
    if attn_mask is not None and attn_mask.is_floating_point():
        kpm = _additive(key_padding_mask, x.dtype)
    else:
        attn_mask, kpm = _flip(attn_mask), _flip(key_padding_mask)
    out = torch_mha(x, x, x, attn_mask=attn_mask, key_padding_mask=kpm)[0]
    return torch.where(torch.isnan(out), torch_mha.out_proj.bias, out)


def torch_masks_float_flipped(torch_mha, x, attn_mask=None, key_padding_mask=None):
    out = torch_mha(  # ~ on every mask: a float one too
        x, x, x, attn_mask=_flip(attn_mask), key_padding_mask=_flip(key_padding_mask)
    )[0]
    return torch.where(torch.isnan(out), torch_mha.out_proj.bias, out)


def torch_masks_mixed_types(torch_mha, x, attn_mask=None, key_padding_mask=None):
    if attn_mask is not None and not attn_mask.is_floating_point():
        attn_mask = ~attn_mask  # float masks unchanged, but a float attn_mask now
    out = torch_mha(  # meets a boolean key_padding_mask: PyTorch warns
        x, x, x, attn_mask=attn_mask, key_padding_mask=_flip(key_padding_mask)
    )[0]
    return torch.where(torch.isnan(out), torch_mha.out_proj.bias, out)


def torch_masks_nan_to_zero(torch_mha, x, attn_mask=None, key_padding_mask=None):
    out = torch_mha(
        x, x, x, attn_mask=_flip(attn_mask), key_padding_mask=_flip(key_padding_mask)
    )[0]
    return torch.nan_to_num(out, nan=0.0)


def torch_masks_unflipped(torch_mha, x, attn_mask=None, key_padding_mask=None):
    return torch_mha(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)[0]


def torch_masks_padding_only(torch_mha, x, attn_mask=None, key_padding_mask=None):
    out = torch_mha(
        x, x, x, attn_mask=attn_mask, key_padding_mask=_flip(key_padding_mask)
    )[0]
    return torch.where(torch.isnan(out), torch_mha.out_proj.bias, out)


def torch_masks_via_attnlab(torch_mha, x, attn_mask=None, key_padding_mask=None):
    ours = attnlab.MultiHeadAttention(torch_mha.embed_dim, torch_mha.num_heads)
    ours = ours.to(x.dtype).load_torch(torch_mha)
    return ours(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask)[0]


def test_torch_mha_with_our_masks_check():
    check = attnlab.check.torch_mha_with_our_masks
    assert check(good_torch_masks)
    assert check(good_torch_masks_flip_unless_mixed)
    fails_with(check, torch_masks_nan_to_zero, r"attend nothing.*out_proj\.bias")
    fails_with(check, torch_masks_float_flipped, r"float attn_mask \(added.*unchanged")
    fails_with(check, torch_masks_mixed_types, r"float attn_mask \+ boolean.*one type")
    fails_with(check, torch_masks_unflipped, r"padding.*~key_padding_mask")
    fails_with(check, torch_masks_padding_only, r"causal attn_mask.*~attn_mask")
    fails_with(check, torch_masks_via_attnlab, r"called attnlab\.multihead\.MultiHead")


def test_checks_leave_global_rng_alone():
    torch.manual_seed(123)
    a = torch.rand(3)
    torch.manual_seed(123)
    attnlab.check.torch_mha_with_our_masks(good_torch_masks)
    assert torch.equal(torch.rand(3), a)


@pytest.mark.parametrize(
    "check",
    [
        attnlab.check.grouped_query_attention,
        attnlab.check.finds_head_bugs,
        attnlab.check.torch_mha_with_our_masks,
    ],
)
def test_stub_is_pending(check, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*args, **kwargs):
        raise NotImplementedError

    assert not check(stub)
    assert "not implemented yet" in capsys.readouterr().out
