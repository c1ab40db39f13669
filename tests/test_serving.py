"""attnlab.serving: grouped-query heads, a paged cache, the streaming mask."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.serving import PagedKVCache, repeat_kv, streaming_mask


def test_repeat_kv_equals_sdpa_gqa():
    q = torch.randn(2, 8, 5, 4, dtype=torch.float64)
    k, v = (torch.randn(2, 2, 7, 4, dtype=torch.float64) for _ in range(2))
    ours = F.scaled_dot_product_attention(q, repeat_kv(k, 8), repeat_kv(v, 8))
    ref = F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
    torch.testing.assert_close(ours, ref)
    with pytest.raises(ValueError, match="multiple"):
        repeat_kv(k, 7)


def test_paged_cache_gathers_what_was_appended():
    cache = PagedKVCache(n_pages=8, page_size=4, n_kv_heads=2, d_head=3)
    ks = {s: torch.randn(2, n, 3) for s, n in ((0, 10), (1, 3))}
    vs = {s: torch.randn(2, n, 3) for s, n in ((0, 10), (1, 3))}
    cache.append(0, ks[0][:, :5], vs[0][:, :5])
    cache.append(1, ks[1], vs[1])  # interleaved: the pages of 0 and 1 alternate
    for t in range(5, 10):
        cache.append(0, ks[0][:, t : t + 1], vs[0][:, t : t + 1])
    for s in (0, 1):
        k, v = cache.gather(s)
        assert torch.equal(k, ks[s]) and torch.equal(v, vs[s])
    assert len(cache.page_table[0]) == 3 and len(cache.page_table[1]) == 1
    assert cache.bytes_used() == 4 * 2 * (2 * 4 * 3 * 4)  # 4 pages of k and v
    cache.release(0)
    assert len(cache.free) == 8 - 1
    with pytest.raises(RuntimeError, match="out of pages"):
        cache.append(2, torch.randn(2, 40, 3), torch.randn(2, 40, 3))
    with pytest.raises(ValueError, match="H_kv"):
        cache.append(3, torch.randn(3, 1, 3), torch.randn(3, 1, 3))


def test_streaming_mask():
    m = streaming_mask(6, window=2, n_sink=1)
    expected = torch.tensor(
        [
            [1, 0, 0, 0, 0, 0],
            [1, 1, 0, 0, 0, 0],
            [1, 1, 1, 0, 0, 0],
            [1, 0, 1, 1, 0, 0],
            [1, 0, 0, 1, 1, 0],
            [1, 0, 0, 0, 1, 1],
        ],
        dtype=torch.bool,
    )
    assert torch.equal(m, expected)
    assert torch.equal(
        streaming_mask(4, 10, 0), torch.ones(4, 4, dtype=torch.bool).tril()
    )
    with pytest.raises(ValueError, match="window"):
        streaming_mask(4, 0, 1)
