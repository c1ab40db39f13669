"""Chapter 14's eviction exercise check passes good answers, fails wrong ones, reports
stubs and forbidden calls."""

from __future__ import annotations

import pytest
import torch
from checkhelp import fails_with

from attnlab import kvcompress
from attnlab.course.ch14_serving.check_cache import keep_low_norm

pytestmark = pytest.mark.usefixtures("strict_checks")


def good(keys, budget, recent):
    S = keys.shape[-2]
    if budget >= S:
        return torch.arange(S).expand(*keys.shape[:-2], S)
    norms = keys.norm(dim=-1)[..., : S - recent]  # (..., S - recent)
    low = (-norms).topk(budget - recent, dim=-1).indices.sort(-1).values
    new = torch.arange(S - recent, S).expand(*keys.shape[:-2], recent)
    return torch.cat((low, new), -1)


def test_keep_low_norm():
    assert keep_low_norm(good)
    fails_with(  # the largest norms (the intuition "big keys matter")
        keep_low_norm,
        _largest,
        r"SMALLEST",
    )
    fails_with(  # forgot the recent window
        keep_low_norm,
        lambda k, b, r: good(k, b, 0) if b < k.shape[-2] else good(k, b, r),
        r"budget 6, recent 2|recent",
    )
    fails_with(  # by norm order, not position order
        keep_low_norm,
        lambda k, b, r: _unsorted(k, b, r),
        r"sorted by position|recent",
    )
    fails_with(keep_low_norm, lambda k, b, r: good(k, b, r).float(), r"budget 6")
    fails_with(keep_low_norm, _stub, r"not implemented")


def _largest(keys, budget, recent):
    S = keys.shape[-2]
    if budget >= S:
        return torch.arange(S).expand(*keys.shape[:-2], S)
    norms = keys.norm(dim=-1)[..., : S - recent]
    high = norms.topk(budget - recent, dim=-1).indices.sort(-1).values
    new = torch.arange(S - recent, S).expand(*keys.shape[:-2], recent)
    return torch.cat((high, new), -1)


def _unsorted(keys, budget, recent):
    S = keys.shape[-2]
    if budget >= S:
        return torch.arange(S).expand(*keys.shape[:-2], S)
    norms = keys.norm(dim=-1)[..., : S - recent]
    low = (-norms).topk(budget - recent, dim=-1).indices  # norm order
    new = torch.arange(S - recent, S).expand(*keys.shape[:-2], recent)
    return torch.cat((low, new), -1)


def _stub(keys, budget, recent):
    raise NotImplementedError


def test_forbidden_library_shortcut():
    fails_with(  # H2O's selection with minus the norm as the score: right, forbidden
        keep_low_norm,
        lambda k, b, r: kvcompress.keep_h2o(-k.norm(dim=-1), b, recent=r),
        r"keep_h2o",
    )
