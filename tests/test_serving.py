"""attnlab.serving: grouped-query heads, a paged cache, the streaming mask, the
rolling (ring-buffer) cache."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from attnlab.serving import PagedKVCache, RollingKVCache, repeat_kv, streaming_mask


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


@pytest.mark.parametrize("n_sink", [0, 1, 3])
def test_rolling_cache_equals_full_attention_under_the_streaming_mask(n_sink):
    B, H, H_kv, Dh, T, window = 2, 4, 2, 8, 23, 5  # 23 steps: far past the capacity
    g = torch.Generator().manual_seed(n_sink)
    q = torch.randn(B, H, T, Dh, generator=g, dtype=torch.float64)
    k = torch.randn(B, H_kv, T, Dh, generator=g, dtype=torch.float64)
    v = torch.randn(B, H_kv, T, Dh, generator=g, dtype=torch.float64)
    mask = streaming_mask(T, window, n_sink)  # (T, T), True = may attend
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
    cache = RollingKVCache(
        window, n_sink, batch=B, n_kv_heads=H_kv, d_head=Dh, dtype=torch.float64
    )
    storage = (cache.k.data_ptr(), cache.v.data_ptr(), cache.k.shape)
    assert (
        cache.capacity == n_sink + window
        and cache.nbytes() == 2 * B * H_kv * (n_sink + window) * Dh * 8
    )
    for t in range(T):
        ck, cv, pos = cache.append(k[:, :, t : t + 1], v[:, :, t : t + 1])
        assert torch.equal(pos, mask[t].nonzero().squeeze(1))  # what the mask allows
        assert len(cache) == min(t + 1, n_sink + window) == ck.shape[2]
        assert torch.equal(ck, k[:, :, pos]) and torch.equal(cv, v[:, :, pos])
        out = F.scaled_dot_product_attention(
            q[:, :, t : t + 1], ck, cv, enable_gqa=True
        )
        torch.testing.assert_close(out, ref[:, :, t : t + 1])
        # memory stays at capacity: the same storage, written in place
        assert (cache.k.data_ptr(), cache.v.data_ptr(), cache.k.shape) == storage
    assert cache.seen == T > 2 * cache.capacity  # the ring went round several times


def test_rolling_cache_prefill_keeps_the_ring_survivors():
    k = torch.arange(11.0).view(1, 1, 11, 1)  # position p holds the value p
    cache = RollingKVCache(4, 2, batch=1, n_kv_heads=1, d_head=1)
    ck, cv, pos = cache.append(k, k.clone())  # 11 positions at once, capacity 6
    assert pos.tolist() == [0, 1, 7, 8, 9, 10] == ck.flatten().tolist()
    assert torch.equal(cv, ck)
    # the same slots as eleven single appends
    one = RollingKVCache(4, 2, batch=1, n_kv_heads=1, d_head=1)
    for t in range(11):
        one.append(k[:, :, t : t + 1], k[:, :, t : t + 1])
    assert torch.equal(one.k, cache.k) and torch.equal(one.positions, cache.positions)
    # slot p for a sink, n_sink + (p - n_sink) % window for the rest
    assert cache.slot(torch.tensor([0, 1, 2, 5, 6, 10])).tolist() == [0, 1, 2, 5, 2, 2]


def test_rolling_cache_rejects_bad_input():
    with pytest.raises(ValueError, match="window"):
        RollingKVCache(0, batch=1, n_kv_heads=1, d_head=2)
    with pytest.raises(ValueError, match="n_sink"):
        RollingKVCache(3, -1, batch=1, n_kv_heads=1, d_head=2)
    with pytest.raises(TypeError, match="n_kv_heads"):
        RollingKVCache(3, batch=1, n_kv_heads=2.0, d_head=2)
    with pytest.raises(TypeError, match="dtype"):
        RollingKVCache(3, batch=1, n_kv_heads=1, d_head=2, dtype=torch.long)
    cache = RollingKVCache(3, 1, batch=2, n_kv_heads=2, d_head=4)
    with pytest.raises(ValueError, match=r"\(2, 2, t >= 1, 4\)"):
        cache.append(torch.randn(2, 3, 1, 4), torch.randn(2, 3, 1, 4))  # 3 heads
    with pytest.raises(ValueError, match="dimension"):
        cache.append(torch.randn(2, 1, 4), torch.randn(2, 1, 4))
    with pytest.raises(TypeError, match="dtype"):
        cache.append(torch.randn(2, 2, 1, 4).double(), torch.randn(2, 2, 1, 4).double())
    with pytest.raises(ValueError, match="same positions"):
        cache.append(torch.randn(2, 2, 1, 4), torch.randn(2, 2, 2, 4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        cache.append([[1.0]], torch.randn(2, 2, 1, 4))
    assert cache.seen == 0 and len(cache) == 0  # nothing written by a refused call
    ck, _, pos = cache.ordered()
    assert ck.shape == (2, 2, 0, 4) and pos.numel() == 0
