"""MoBA-style block routing against SDPA with the equivalent boolean mask."""

import math

import pytest
import torch
import torch.nn.functional as F

from attnlab.efficient import block_routed_attention
from attnlab.efficient.routing import route_blocks


def _naive_mask(q, k, bs, top_k):
    """Query by query, in plain Python: the keys each query may attend to."""
    T = q.shape[0]
    nb = math.ceil(T / bs)
    mask = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        cur = i // bs
        gates = []
        for j in range(cur):  # blocks wholly before the query's own
            mean = k[j * bs : (j + 1) * bs].mean(0)
            gates.append((float(q[i] @ mean), j))
        chosen = {j for _, j in sorted(gates, reverse=True)[: top_k - 1]} | {cur}
        assert len(chosen) <= min(top_k, nb)
        for j in range(i + 1):
            mask[i, j] = (j // bs) in chosen
    return mask


@pytest.mark.parametrize("T,bs,top_k", [(23, 4, 3), (16, 4, 2), (9, 3, 1), (12, 5, 9)])
def test_matches_sdpa_with_naive_mask(T, bs, top_k):
    g = torch.Generator().manual_seed(T + bs)
    q, k, v = (
        torch.randn(2, 3, T, 8, generator=g, dtype=torch.float64) for _ in range(3)
    )
    out, st = block_routed_attention(
        q, k, v, block_size=bs, top_k=top_k, return_stats=True
    )
    mask = torch.stack(
        [
            torch.stack([_naive_mask(q[b, h], k[b, h], bs, top_k) for h in range(3)])
            for b in range(2)
        ]
    )  # (B, H, T, T)
    assert torch.equal(st["mask"], mask)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(out, ref, atol=1e-10, rtol=1e-10)
    nb = math.ceil(T / bs)
    causal_pairs = sum(i // bs + 1 for i in range(T))
    assert st["visited"] == pytest.approx(
        float(st["selected"].sum()) / (6 * causal_pairs)
    )
    assert 0 < st["visited"] <= 1 and 0 < st["tiles"] <= 1
    assert st["selected"].shape == (2, 3, T, nb)


def test_all_blocks_is_causal_attention_and_one_is_local():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 20, 8, generator=g) for _ in range(3))
    out, st = block_routed_attention(q, k, v, block_size=4, top_k=5, return_stats=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert st["visited"] == 1.0 and st["tiles"] == 1.0
    out1 = block_routed_attention(q, k, v, block_size=4, top_k=1)
    i = torch.arange(20)
    local = (i[:, None] // 4 == i[None, :] // 4) & (i[None, :] <= i[:, None])
    ref1 = F.scaled_dot_product_attention(q, k, v, attn_mask=local)
    torch.testing.assert_close(out1, ref1, atol=1e-5, rtol=1e-5)


def test_router_picks_the_block_holding_a_matching_key():
    k = torch.randn(1, 16, 8, generator=torch.Generator().manual_seed(1)) * 0.1
    k[0, 5] = 10 * torch.eye(8)[2]  # a strong key in block 1 (keys 4..7)
    q = torch.zeros(1, 16, 8)
    q[0, -1, 2] = 1.0
    sel = route_blocks(q, k, block_size=4, top_k=2)  # (1, 16, 4)
    assert sel[0, -1].tolist() == [False, True, False, True]


def test_length_one_and_half_precision():
    q = torch.randn(1, 1, 1, 4)
    out = block_routed_attention(q, q, q, block_size=4, top_k=2)
    torch.testing.assert_close(out, q)  # one key: the output is its value
    h = torch.randn(1, 1, 8, 4).to(torch.bfloat16)
    assert (
        block_routed_attention(h, h, h, block_size=2, top_k=2).dtype == torch.bfloat16
    )


def test_bad_input():
    x = torch.randn(1, 1, 8, 4)
    with pytest.raises(ValueError, match="block_size"):
        block_routed_attention(x, x, x, block_size=0, top_k=1)
    with pytest.raises(TypeError, match="top_k"):
        block_routed_attention(x, x, x, block_size=2, top_k=1.5)
    with pytest.raises(ValueError, match="same length"):
        block_routed_attention(x, x[..., :4, :], x[..., :4, :], block_size=2, top_k=1)
    with pytest.raises(TypeError):
        block_routed_attention(x.tolist(), x, x, block_size=2, top_k=1)
    with pytest.raises(TypeError, match="return_stats"):
        block_routed_attention(x, x, x, block_size=2, top_k=1, return_stats=1)


def test_no_query_is_a_value_error_naming_t():
    # found writing the Raises section: T = 0 was an IndexError from inside
    x = torch.randn(1, 0, 4)
    with pytest.raises(
        ValueError, match="block_routed_attention: the sequence length T"
    ):
        block_routed_attention(x, x, x, block_size=2, top_k=1)
    with pytest.raises(ValueError, match="route_blocks: the number of keys S"):
        route_blocks(x, x, block_size=2, top_k=1)


def test_head_width_zero_is_causal_sdpa():
    # found writing the Raises section: Dh = 0 was a ZeroDivisionError (default scale)
    q, v = torch.randn(2, 5, 0), torch.randn(2, 5, 3)
    out = block_routed_attention(q, q, v, block_size=2, top_k=3)  # every block
    ref = F.scaled_dot_product_attention(q, q, v, is_causal=True)
    torch.testing.assert_close(out, ref)


def test_block_window_equals_routing_when_top_k_covers_the_past_or_is_one():
    from attnlab.efficient.routing import block_window_attention

    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 1, 12, 4, generator=g) for _ in range(3))
    for n in (1, 3):
        torch.testing.assert_close(
            block_window_attention(q, k, v, block_size=4, n_blocks=n),
            block_routed_attention(q, k, v, block_size=4, top_k=n),
            atol=1e-5,
            rtol=1e-5,
        )
