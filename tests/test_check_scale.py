"""Chapter 8 and 9 checks pass good answers, fail wrong ones, and report stubs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import attnlab
from attnlab.check import CheckFailed
from attnlab.course.ch09_subquadratic.widgets import receptive_field
from attnlab.efficient import tile_plan
from attnlab.serving import streaming_mask

pytestmark = pytest.mark.usefixtures("strict_checks")


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


def unguarded_merge(o1, l1, o2, l2):  # nan when both parts are fully masked
    lse = torch.logaddexp(l1, l2)
    w1, w2 = torch.exp(l1 - lse)[..., None], torch.exp(l2 - lse)[..., None]
    return w1 * o1 + w2 * o2, lse


def fails_with(check, fn, *words):
    """The check rejects fn, and its message names the bug with each of ``words``."""
    with pytest.raises(CheckFailed) as err:
        check(fn)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_merge_partial_attention():
    assert attnlab.check.merge_partial_attention(good_merge)
    check = attnlab.check.merge_partial_attention
    fails_with(check, naive_merge, "overflows")
    fails_with(check, averaging_merge, "exp(lse_i - lse)")
    fails_with(check, unguarded_merge, "both parts fully masked", "nan")
    fails_with(
        check,
        lambda *a: attnlab.flash_attention(
            a[0][..., None, :], a[0][..., None, :], a[0][..., None, :]
        ),
        "flash_attention",
    )


def good_block(budget, n, d_head, n_heads):
    b, best = 1, 0
    while b <= n:
        if n_heads * (4 * n * d_head + 3 * n + b * b + b * d_head) * 4 <= budget:
            best = b
        b *= 2
    return best


def test_block_size_for_budget():
    assert attnlab.check.block_size_for_budget(good_block)
    check = attnlab.check.block_size_for_budget

    def tiles_only(budget, n, d, h):  # forgets q, k, v, out
        return max(
            [0]
            + [2**e for e in range(14) if 2**e <= n and h * (2**e) ** 2 * 4 <= budget]
        )

    def strict_lt(budget, n, d, h):  # < instead of <=
        return good_block(budget - 1, n, d, h)

    fails_with(check, tiles_only, "count every term")
    fails_with(check, strict_lt, "inclusive")


def good_causal_tiles(T, S, bq, bk):
    nq, nk = -(-T // bq), -(-S // bk)
    computed = sum(min(nk, (min(i0 + bq, T) - 1) // bk + 1) for i0 in range(0, T, bq))
    return computed, nq * nk


def test_causal_tiles():
    assert attnlab.check.causal_tiles(good_causal_tiles)
    check = attnlab.check.causal_tiles

    def square_formula(T, S, bq, bk):  # nb (nb + 1) / 2 copied from the square case
        nb = -(-T // bq)
        return nb * (nb + 1) // 2, nb * nb

    def half(T, S, bq, bk):  # forgets the diagonal
        n = -(-T // bq) * -(-S // bk)
        return n // 2, n

    def floor_blocks(T, S, bq, bk):  # rounds the number of blocks down
        return good_causal_tiles(T // bq * bq, S // bk * bk, bq, bk)

    def from_plan(T, S, bq, bk):  # the library's plan: forbidden
        flat = [c for row in tile_plan(T, S, bq, bk, causal=True) for c in row]
        return sum(c != "skip" for c in flat), len(flat)

    def strict(T, S, bq, bk):  # j0 < last row: misses a tile with one allowed pair
        nq, nk = -(-T // bq), -(-S // bk)
        computed = sum(
            sum(1 for j0 in range(0, S, bk) if j0 < min(i0 + bq, T) - 1)
            for i0 in range(0, T, bq)
        )
        return computed, nq * nk

    fails_with(check, strict, "one allowed pair", "not <")
    fails_with(check, square_formula, "T != S")
    fails_with(check, half, "a row block of tiles is computed")
    fails_with(check, floor_blocks, "round the number of blocks up")
    fails_with(check, from_plan, "tile_plan")
    fails_with(check, lambda T, S, bq, bk: (1, 1), "square")  # a constant


def good_split_kv(q, k, v, n_splits):
    S = k.shape[-2]
    size = -(-S // n_splits)
    outs, lses = [], []
    for j0 in range(0, S, size):
        s = q @ k[..., j0 : j0 + size, :].transpose(-2, -1) / q.shape[-1] ** 0.5
        lse = torch.logsumexp(s, -1)  # (B, H, 1)
        outs.append(torch.exp(s - lse[..., None]) @ v[..., j0 : j0 + size, :])
        lses.append(lse)
    lse = torch.logsumexp(torch.stack(lses), 0)
    return sum(torch.exp(l - lse)[..., None] * o for o, l in zip(outs, lses))


def test_split_kv_decoding():
    assert attnlab.check.split_kv_decoding(good_split_kv)
    check = attnlab.check.split_kv_decoding

    def mean_of_splits(q, k, v, n):  # averages the partial outputs
        S = k.shape[-2]
        size = -(-S // n)
        return sum(
            F.scaled_dot_product_attention(
                q, k[..., j : j + size, :], v[..., j : j + size, :]
            )
            for j in range(0, S, size)
        ) / len(range(0, S, size))

    def exp_weights(q, k, v, n):  # exp(lse_i) unshifted: overflows at large scores
        S = k.shape[-2]
        size = -(-S // n)
        num, den = 0, 0
        for j0 in range(0, S, size):
            s = q @ k[..., j0 : j0 + size, :].transpose(-2, -1) / q.shape[-1] ** 0.5
            e = torch.exp(torch.logsumexp(s, -1))[..., None]
            num = num + e * (torch.softmax(s, -1) @ v[..., j0 : j0 + size, :])
            den = den + e
        return num / den

    fails_with(check, mean_of_splits, "exp(lse_i - lse)")
    fails_with(check, exp_weights, "overflows")
    fails_with(
        check, lambda q, k, v, n: attnlab.flash_attention(q, k, v), "flash_attention"
    )


def good_grouped_backward(q, k, v, out, lse, dout, scale):
    g = q.shape[0] // k.shape[0]
    kr, vr = k.repeat_interleave(g, 0), v.repeat_interleave(g, 0)  # (Hq, S, .)
    p = torch.exp(q @ kr.transpose(-2, -1) * scale - lse[..., None])  # (Hq, T, S)
    dvr = p.transpose(-2, -1) @ dout
    ds = p * (dout @ vr.transpose(-2, -1) - (dout * out).sum(-1, keepdim=True))
    dkr = ds.transpose(-2, -1) @ q * scale
    dq = ds @ kr * scale
    fold = (k.shape[0], g) + tuple(dkr.shape[1:])  # (Hkv, g, S, .)
    return dq, dkr.reshape(fold).sum(1), dvr.reshape(fold[:3] + dvr.shape[2:]).sum(1)


def test_grouped_tile_backward():
    assert attnlab.check.grouped_tile_backward(good_grouped_backward)
    check = attnlab.check.grouped_tile_backward

    def per_head(q, k, v, out, lse, dout, scale):  # a one-head backward per query head
        g = q.shape[0] // k.shape[0]
        grads = []
        for h in range(q.shape[0]):
            p = torch.exp(q[h] @ k[h // g].T * scale - lse[h, :, None])
            ds = p * (dout[h] @ v[h // g].T - (dout[h] * out[h]).sum(-1, keepdim=True))
            grads.append((ds @ k[h // g] * scale, ds.T @ q[h] * scale, p.T @ dout[h]))
        return [torch.stack(t) for t in zip(*grads)]

    def first_of_group(q, k, v, out, lse, dout, scale):  # keeps one head, no sum
        dq, dk, dv = per_head(q, k, v, out, lse, dout, scale)
        g = q.shape[0] // k.shape[0]
        return dq, dk[::g], dv[::g]

    def mean_of_group(q, k, v, out, lse, dout, scale):  # averages instead of summing
        dq, dk, dv = per_head(q, k, v, out, lse, dout, scale)
        hk = k.shape[0]
        return dq, dk.unflatten(0, (hk, -1)).mean(1), dv.unflatten(0, (hk, -1)).mean(1)

    def interleaved(q, k, v, out, lse, dout, scale):  # head h reads h % Hkv
        hk = k.shape[0]
        kr, vr = k.repeat(q.shape[0] // hk, 1, 1), v.repeat(q.shape[0] // hk, 1, 1)
        p = torch.exp(q @ kr.transpose(-2, -1) * scale - lse[..., None])
        ds = p * (dout @ vr.transpose(-2, -1) - (dout * out).sum(-1, keepdim=True))
        dk = (ds.transpose(-2, -1) @ q * scale).unflatten(0, (-1, hk)).sum(0)
        dv = (p.transpose(-2, -1) @ dout).unflatten(0, (-1, hk)).sum(0)
        return ds @ kr * scale, dk, dv

    def no_delta(q, k, v, out, lse, dout, scale):  # dS = P * dP: forgets D
        dq, dk, dv = good_grouped_backward(q, k, v, 0 * out, lse, dout, scale)
        return dq, dk, dv

    def no_scale(q, k, v, out, lse, dout, scale):  # forgets the scale in dQ and dK
        dq, dk, dv = good_grouped_backward(q, k, v, out, lse, dout, scale)
        return dq / scale, dk / scale, dv

    def autograd(q, k, v, out, lse, dout, scale):
        q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
        g = q.shape[0] // k.shape[0]
        o = torch.softmax(
            q @ k.repeat_interleave(g, 0).transpose(-2, -1) * scale, -1
        ) @ v.repeat_interleave(g, 0)
        return torch.autograd.grad(o, (q, k, v), dout)

    fails_with(check, first_of_group, "sum of the gradients")
    fails_with(check, mean_of_group, "sum of the gradients")
    fails_with(check, interleaved, "consecutive")
    fails_with(check, no_delta, "D_i")
    fails_with(check, no_scale, "the scale multiplies both")
    fails_with(check, autograd, "used autograd")


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
    check = attnlab.check.causal_linear_attention

    def not_causal(q, k, v):  # sums over every key
        fq, fk = F.elu(q) + 1, F.elu(k) + 1
        return (fq @ (fk.transpose(-2, -1) @ v)) / (fq * fk.sum(-2, keepdim=True)).sum(
            -1, keepdim=True
        )

    def no_normaliser(q, k, v):
        fq, fk = F.elu(q) + 1, F.elu(k) + 1
        kv = torch.cumsum(fk[..., :, :, None] * v[..., :, None, :], dim=-3)
        return (fq[..., :, :, None] * kv).sum(-2)

    fails_with(check, not_causal, "S_t = sum_{j<=t}")
    fails_with(check, no_normaliser, "S_t = sum_{j<=t}")
    fails_with(
        check,
        lambda q, k, v: attnlab.linear_attention(q, k, v, is_causal=True),
        "linear_attention",
    )


def good_reach_stack(masks):
    n = masks[0].shape[-1]
    eye = torch.eye(n, dtype=torch.bool)
    r = eye.float()
    for m in masks:
        r = (((m | eye).float() @ r) > 0).float()
    return r.sum(-1)


def test_receptive_field_of_stack():
    assert attnlab.check.receptive_field_of_stack(good_reach_stack)
    check = attnlab.check.receptive_field_of_stack

    def no_self_edge(masks):
        r = torch.eye(masks[0].shape[-1])
        for m in masks:
            r = ((m.float() @ r) > 0).float()
        return r.sum(-1)

    def reversed_order(masks):  # M_1 ... M_L: the first layer read first
        return good_reach_stack(masks[::-1])

    fails_with(check, no_self_edge, "residual")
    fails_with(check, lambda ms: ms[0].sum(-1), "one step along the mask per layer")
    fails_with(  # the first mask for every layer
        check, lambda ms: good_reach_stack([ms[0]] * len(ms)), "its own mask"
    )
    fails_with(check, reversed_order, "LAST layer")
    fails_with(  # the widget's helper, one mask repeated: forbidden
        check, lambda ms: receptive_field(ms[0], len(ms)), "receptive_field"
    )


def good_kv_bytes(layers, seq_len, batch=1, bytes_per=2):
    total = 0
    for la in layers:
        if la["kind"] == "mla":
            total += (la["d_latent"] + la["d_rope"]) * seq_len
        else:
            held = min(seq_len, la["window"]) if la["kind"] == "window" else seq_len
            total += 2 * la["n_kv_heads"] * la["d_head"] * held
    return total * batch * bytes_per


def kv_bytes_with(per_layer):
    """A kv_bytes that sizes each layer with ``per_layer(layer, seq_len)``."""

    def kv_bytes(layers, seq_len, batch=1, bytes_per=2):
        return sum(per_layer(la, seq_len) for la in layers) * batch * bytes_per

    return kv_bytes


def test_kv_cache_bytes():
    check = attnlab.check.kv_cache_bytes
    assert check(good_kv_bytes)
    right = good_kv_bytes

    def one(layer, n):  # numbers one layer caches for one sequence
        return right([layer], n, 1, 1)

    def no_factor_2(la, n):  # K only
        return one(la, n) // 2 if la["kind"] != "mla" else one(la, n)

    def query_heads(la, n):  # n_heads where the cache has n_kv_heads
        if la["kind"] == "mla":
            return one(la, n)
        return one(la, n) // la["n_kv_heads"] * la["n_heads"]

    def window_grows(la, n):  # the window layer keeps every position
        return one({**la, "kind": "full"}, n) if la["kind"] == "window" else one(la, n)

    def window_reserved(la, n):  # a window layer counted full from the first token
        return one(la, la["window"]) if la["kind"] == "window" else one(la, n)

    def mla_as_kv(la, n):  # the latent counted as a K and a V, per head
        if la["kind"] != "mla":
            return one(la, n)
        return 2 * la["n_heads"] * (la["d_latent"] + la["d_rope"]) * n

    fails_with(check, kv_bytes_with(no_factor_2), "keys AND values")
    fails_with(check, kv_bytes_with(query_heads), "n_kv_heads, not n_heads")
    fails_with(check, kv_bytes_with(window_grows), "stops growing at the window")
    fails_with(check, kv_bytes_with(window_reserved), "only seq_len positions")
    fails_with(check, kv_bytes_with(mla_as_kv), "no factor 2, no heads")
    fails_with(  # batch forgotten
        check,
        lambda layers, n, batch=1, bytes_per=2: right(layers, n, 1, bytes_per),
        "every sequence of the batch",
    )


def good_crossover(layers, weight_bytes, batch=1, bytes_per=2):
    def cache(n):
        return good_kv_bytes(layers, n, batch, bytes_per)

    hi = 1
    while cache(hi) <= weight_bytes:
        if cache(2 * hi) == cache(hi):  # levelled off (every window full): never
            return None
        hi *= 2
    lo = hi // 2  # cache(lo) <= weights < cache(hi), lo = 0 when hi = 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if cache(mid) > weight_bytes else (mid, hi)
    return hi


def test_kv_cache_crossover():
    check = attnlab.check.kv_cache_crossover
    assert check(good_crossover)

    def linear(layers, w, batch=1, bytes_per=2):  # weights / the first token's bytes
        return int(w // good_kv_bytes(layers, 1, batch, bytes_per)) + 1

    def at_least(layers, w, batch=1, bytes_per=2):  # >= where the cache must be >
        n = good_crossover(layers, w, batch, bytes_per)
        return n - 1 if n and good_kv_bytes(layers, n - 1, batch, bytes_per) == w else n

    def capped(layers, w, batch=1, bytes_per=2):  # a search that gives up at 2**20
        n = good_crossover(layers, w, batch, bytes_per)
        return 2**20 if n is None else n

    fails_with(check, at_least, "equal is not more")
    fails_with(check, linear, "levels off")
    fails_with(check, capped, "return None")
    fails_with(  # the batch forgotten
        check,
        lambda layers, w, batch=1, bytes_per=2: good_crossover(layers, w, 1, bytes_per),
        "multiplies the cache",
    )


def good_chunk_sink(T, S, w, s):
    i, j = torch.arange(T)[:, None] + S - T, torch.arange(S)[None, :]
    return (j <= i) & ((i - j < w) | (j < s))


def test_chunk_sink_mask():
    assert attnlab.check.chunk_sink_mask(good_chunk_sink)
    check = attnlab.check.chunk_sink_mask

    def top_left(T, S, w, s):  # query i taken as position i
        i, j = torch.arange(T)[:, None], torch.arange(S)[None, :]
        return (j <= i) & ((i - j < w) | (j < s))

    def off_by_one(T, S, w, s):  # a window of w + 1 tokens
        return good_chunk_sink(T, S, w + 1, s)

    def sinks_see_the_future(T, S, w, s):  # forgets causality for the sinks
        i, j = torch.arange(T)[:, None] + S - T, torch.arange(S)[None, :]
        return ((j <= i) & (i - j < w)) | (j < s)

    fails_with(check, top_left, "bottom-right")
    fails_with(check, off_by_one, "itself included")
    fails_with(check, sinks_see_the_future, "causal even for the sinks")
    fails_with(  # the last T rows of the page's square mask: forbidden
        check, lambda T, S, w, s: streaming_mask(S, w, s)[S - T :], "streaming_mask"
    )


def test_stubs_report_pending(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*a, **k):
        raise NotImplementedError

    for name in (
        "merge_partial_attention",
        "block_size_for_budget",
        "causal_tiles",
        "split_kv_decoding",
        "grouped_tile_backward",
        "causal_linear_attention",
        "receptive_field_of_stack",
        "kv_cache_bytes",
        "kv_cache_crossover",
        "chunk_sink_mask",
    ):
        assert not getattr(attnlab.check, name)(stub)
    assert "not implemented yet" in capsys.readouterr().out
