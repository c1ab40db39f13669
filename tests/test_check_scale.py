"""Chapter 8 and 9 checks pass good answers, fail wrong ones, and report stubs."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.check import CheckFailed
from attnlab.efficient import tile_plan
from attnlab.widgets.subquadratic import receptive_field


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


def good_merge(o1, l1, o2, l2):
    lse = torch.logaddexp(l1, l2)
    w1 = torch.exp(l1 - lse).nan_to_num(0.0)[..., None]
    w2 = torch.exp(l2 - lse).nan_to_num(0.0)[..., None]
    return w1 * o1 + w2 * o2, lse


def naive_merge(o1, l1, o2, l2):  # overflows at large scores
    e1, e2 = torch.exp(l1), torch.exp(l2)
    return (e1[..., None] * o1 + e2[..., None] * o2) / (e1 + e2)[..., None], torch.log(
        e1 + e2
    )


def averaging_merge(o1, l1, o2, l2):
    return (o1 + o2) / 2, torch.maximum(l1, l2)


def test_merge_partial_attention():
    assert attnlab.check.merge_partial_attention(good_merge)
    for bad in (naive_merge, averaging_merge):
        with pytest.raises(CheckFailed):
            attnlab.check.merge_partial_attention(bad)


def good_block(budget, n, d_head, n_heads):
    b, best = 1, 0
    while b <= n:
        if n_heads * (4 * n * d_head + 3 * n + b * b + b * d_head) * 4 <= budget:
            best = b
        b *= 2
    return best


def test_block_size_for_budget():
    assert attnlab.check.block_size_for_budget(good_block)
    with pytest.raises(CheckFailed):  # forgets q, k, v, out
        attnlab.check.block_size_for_budget(
            lambda budget, n, d, h: max(
                [0]
                + [
                    2**e
                    for e in range(14)
                    if 2**e <= n and h * (2**e) ** 2 * 4 <= budget
                ]
            )
        )


def test_causal_tiles():
    def good(n, block):
        flat = [c for row in tile_plan(n, n, block, block, causal=True) for c in row]
        q, k, v = (torch.randn(1, 2, n, 16) for _ in range(3))
        t0 = time.perf_counter()
        attnlab.flash_attention(q, k, v, is_causal=True, block_size=block)
        t1 = time.perf_counter()
        attnlab.flash_attention(q, k, v, block_size=block)
        t2 = time.perf_counter()
        return sum(c != "skip" for c in flat), len(flat), (t1 - t0) / (t2 - t1)

    assert attnlab.check.causal_tiles(good)
    with pytest.raises(CheckFailed):  # counts half the tiles, forgets the diagonal
        attnlab.check.causal_tiles(
            lambda n, b: ((-(-n // b)) ** 2 // 2, (-(-n // b)) ** 2, 0.5)
        )


def prefix_sum_linear(q, k, v):
    fq, fk = F.elu(q) + 1, F.elu(k) + 1
    kv = torch.cumsum(
        fk[..., :, :, None] * v[..., :, None, :], dim=-3
    )  # (..., T, Dh, Dv)
    z = torch.cumsum(fk, dim=-2)  # (..., T, Dh)
    num = (fq[..., :, :, None] * kv).sum(-2)
    return num / (fq * z).sum(-1, keepdim=True)


def test_causal_linear_attention():
    assert attnlab.check.causal_linear_attention(prefix_sum_linear)
    with pytest.raises(CheckFailed):  # not causal
        attnlab.check.causal_linear_attention(
            lambda q, k, v: attnlab.linear_attention(q, k, v)
        )


def test_receptive_field_after():
    assert attnlab.check.receptive_field_after(receptive_field)
    with pytest.raises(CheckFailed):  # forgets the residual self-edge
        attnlab.check.receptive_field_after(
            lambda m, L: (torch.linalg.matrix_power(m.float(), L) > 0).sum(-1)
        )


def test_kv_cache_bytes():
    assert attnlab.check.kv_cache_bytes(
        lambda L, H, Dh, T, B, bytes_per=2: 2 * L * H * Dh * T * B * bytes_per
    )
    with pytest.raises(CheckFailed):  # keys only
        attnlab.check.kv_cache_bytes(
            lambda L, H, Dh, T, B, bytes_per=2: L * H * Dh * T * B * bytes_per
        )


def test_stubs_report_pending(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*a, **k):
        raise NotImplementedError

    for name in ("merge_partial_attention", "block_size_for_budget", "causal_tiles",
                 "causal_linear_attention", "receptive_field_after", "kv_cache_bytes"):  # fmt: skip
        assert not getattr(attnlab.check, name)(stub)
    assert "not implemented yet" in capsys.readouterr().out
