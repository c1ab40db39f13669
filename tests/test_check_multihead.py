"""Chapter 6 checks pass the library and fail wrong answers."""

from __future__ import annotations

import pytest
import torch

import attnlab


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


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
def test_new_checks_pass_good_and_fail_bad(check, good, bads, check_separates):
    check_separates(check, good, bads)
