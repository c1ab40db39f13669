"""Ring attention on 2 CPU processes (gloo) against full attention; bytes per rank."""

import pytest
import torch
import torch.nn.functional as F

from attnlab.distributed import (  # _merge: no public name
    _merge,
    ring_attention,
    ring_bytes_per_rank,
)


def test_ring_equals_full_causal_attention_and_bytes():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 16, 8, generator=g) for _ in range(3))
    out, sent = ring_attention(q, k, v, world_size=2, causal=True, timeout=60)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # one pass of a (2, 3, 8, 8) key block and value block, float32
    assert sent == [2 * (2 * 3 * 8 * 8) * 4] * 2 == [ring_bytes_per_rank(k, v, 2)] * 2


def test_merge_of_two_halves_is_attention_over_both():
    from attnlab.efficient.flash import flash_forward_tiles

    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(3, 5, 4, generator=g, dtype=torch.float64) for _ in range(3))
    oa, la = flash_forward_tiles(q, k[:, :2], v[:, :2], 0.5, False, None, 8, 8)
    ob, lb = flash_forward_tiles(q, k[:, 2:], v[:, 2:], 0.5, False, None, 8, 8)
    out, lse = _merge(oa, la, ob, lb)
    s = q @ k.transpose(1, 2) * 0.5  # (N, T, S)
    torch.testing.assert_close(out, s.softmax(-1) @ v)
    torch.testing.assert_close(lse, s.logsumexp(-1))
    empty = torch.full_like(la, float("-inf"))  # nothing seen yet: the other half
    out2, _ = _merge(torch.zeros_like(oa), empty, oa, la)
    torch.testing.assert_close(out2, oa)


def test_bytes_formula_and_bad_input():
    k = torch.zeros(4, 12, 8)
    assert ring_bytes_per_rank(k, k, 4) == 3 * (2 * 4 * 12 * 8) // 4 * 4
    assert ring_bytes_per_rank(k, k, 1) == 0
    x = torch.randn(1, 7, 4)
    with pytest.raises(ValueError, match="multiple of world_size"):
        ring_attention(x, x, x, world_size=2)
    with pytest.raises(ValueError, match="backend"):
        ring_attention(x[:, :6], x[:, :6], x[:, :6], backend="tcp")
    with pytest.raises(ValueError, match="timeout"):
        ring_attention(x[:, :6], x[:, :6], x[:, :6], timeout=0)
    with pytest.raises(TypeError, match="causal"):
        ring_attention(x[:, :6], x[:, :6], x[:, :6], causal="yes")
    with pytest.raises(TypeError, match="q"):
        ring_attention(x.tolist(), x, x)


def test_ring_refuses_inputs_that_require_grad():
    """No backward: the gradients would be silently lost, so it refuses."""
    q, k, v = (torch.randn(1, 4, 2, requires_grad=True) for _ in range(3))
    with pytest.raises(ValueError, match="has no backward"):
        ring_attention(q, k, v, world_size=2)


def test_each_rank_is_given_only_its_shard(monkeypatch):
    """What the processes are given: one file per rank holding (N, T/w, ·) blocks,
    never the whole q, k, v; the result still equals full attention."""
    saved: list[dict] = []
    real_save = torch.save

    def spy(obj, path, *a, **kw):
        if isinstance(obj, dict) and set(obj) == {"q", "k", "v"}:
            saved.append({n: tuple(t.shape) for n, t in obj.items()})
        return real_save(obj, path, *a, **kw)

    monkeypatch.setattr(torch, "save", spy)
    g = torch.Generator().manual_seed(2)
    q, k = (torch.randn(3, 8, 4, generator=g) for _ in range(2))
    v = torch.randn(3, 8, 5, generator=g)
    out, _ = ring_attention(q, k, v, world_size=2, timeout=60)
    torch.testing.assert_close(
        out, F.scaled_dot_product_attention(q, k, v), atol=1e-5, rtol=1e-5
    )
    assert saved == [{"q": (3, 4, 4), "k": (3, 4, 4), "v": (3, 4, 5)}] * 2
