"""Checks for chapter 8 (fast exact attention).

* :func:`merge_partial_attention` — ``fn(o1, lse1, o2, lse2) -> (o, lse)``: two
  *normalised* partial attention results over disjoint sets of keys, each with its
  log-sum-exp ``(..., T)``, merged into attention over all the keys (the split-KV
  merge of decoding kernels).
* :func:`block_size_for_budget` — ``fn(budget_bytes, n, d_head, n_heads) -> block``:
  the largest power of two ``block <= n`` whose tiled-forward live memory
  ``n_heads * (4 n d_head + 3 n + block² + block d_head) * 4`` bytes fits the budget
  (0 if none does).
* :func:`causal_tiles` — ``fn(T, S, block_q, block_k) -> (computed, total)``: the
  number of tiles a causal (top-left) tiled forward computes, and the number of tiles
  in all, counted from the geometry (not from ``tile_plan``).
* :func:`split_kv_decoding` — ``fn(q, k, v, n_splits) -> out``: one decoding query per
  (batch, head) against a long cache split into ``n_splits`` chunks, each summarised by
  its partial output and log-sum-exp, then merged (Flash-Decoding).
* :func:`grouped_tile_backward` — ``fn(q, k, v, out, lse, dout, scale) -> (dq, dk,
  dv)``: the backward of softmax attention on one tile for all heads at once, with
  grouped-query heads (``q (Hq, T, Dh)``, ``k (Hkv, S, Dh)``, ``v (Hkv, S, Dv)``; query
  head ``h`` reads key/value head ``h // (Hq // Hkv)``), from the saved output and
  log-sum-exp.
"""

from __future__ import annotations

import builtins
import math
import types

import torch

from ..check_core import Case, run_check, seeded

__all__ = [
    "merge_partial_attention",
    "block_size_for_budget",
    "causal_tiles",
    "split_kv_decoding",
    "grouped_tile_backward",
]

_FLASH = ("attnlab.flash_attention", "attnlab.efficient.flash_attention")
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "merge_partial_attention": _FLASH,
    "block_size_for_budget": (),
    "causal_tiles": (
        "attnlab.efficient.tile_plan",
        "attnlab.efficient.tiles.tile_mask",
    ),
    "split_kv_decoding": (
        *_FLASH,
        "attnlab.scaled_dot_product_attention",
        "attnlab.attention.scaled_dot_product_attention",
    ),
    "grouped_tile_backward": (*_FLASH, "attnlab.efficient.flash._flash_backward"),
}


def _partial(q, k, v, mask=None):
    """Normalised attention over some keys and its log-sum-exp (-inf if no key)."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    if mask is not None:
        s = s.masked_fill(~mask, -math.inf)
    lse = torch.logsumexp(s, -1)  # (..., T)
    w = torch.exp(s - lse[..., None]).nan_to_num(0.0)  # (..., T, S)
    return w @ v, lse


def merge_partial_attention(fn):
    """Check ``fn(o1, lse1, o2, lse2) -> (o, lse)``."""
    cases = []
    specs = [
        ("T=3, 4 + 5 keys", (2, 3, 4), 4, 5, 1.0, None, "weight each part by exp(lse_i - lse)"),
        ("one key each", (1, 2, 3), 1, 1, 1.0, None, "lse = log(exp(lse1) + exp(lse2))"),
        ("scores x 1000", (1, 3, 4), 3, 3, 1000.0, None,
         "exp(lse1) overflows: subtract max(lse1, lse2) first (torch.logaddexp does)"),
        ("second part fully masked (lse2 = -inf)", (1, 3, 4), 3, 2, 1.0, "second",
         "a part with lse = -inf gets weight 0; guard against -inf - (-inf) = nan"),
        ("both parts fully masked: out 0, lse -inf", (1, 3, 4), 2, 2, 1.0, "both",
         "when lse1 = lse2 = -inf the merged lse is -inf and exp(-inf - (-inf)) is "
         "nan: the output must be 0 (no key), not nan"),
    ]  # fmt: skip
    for i, (label, shape, s1, s2, mult, dead, hint) in enumerate(specs):
        g = seeded(800 + i)
        B, T, D = shape
        q = torch.randn(B, T, D, generator=g, dtype=torch.float64) * mult
        k = torch.randn(B, s1 + s2, D, generator=g, dtype=torch.float64)
        v = torch.randn(B, s1 + s2, D, generator=g, dtype=torch.float64)
        m1 = torch.zeros(T, s1, dtype=torch.bool) if dead == "both" else None
        o1, l1 = _partial(q, k[:, :s1], v[:, :s1], m1)
        m2 = None
        if dead in ("second", "both"):
            m2 = torch.zeros(T, s2, dtype=torch.bool)
        o2, l2 = _partial(q, k[:, s1:], v[:, s1:], m2)
        if dead == "second":
            o, lse = o1, l1
        elif dead == "both":
            o, lse = torch.zeros_like(o1), torch.full_like(l1, -math.inf)
        else:
            o, lse = _partial(q, k, v)
        cases.append(Case(label, (o1, l1, o2, l2), (o, lse), hint))
    return run_check(
        "merge_partial_attention",
        fn,
        cases,
        forbid=FORBIDDEN["merge_partial_attention"],
    )


def _budget_block(budget, n, d_head, n_heads):
    best, b = 0, 1
    while b <= n:
        if n_heads * (4 * n * d_head + 3 * n + b * b + b * d_head) * 4 <= budget:
            best = b
        b *= 2
    return best


def block_size_for_budget(fn):
    """Check ``fn(budget_bytes, n, d_head, n_heads) -> block``."""
    specs = [
        ("64 MiB, n=4096, Dh=64, H=8", (64 * 2**20, 4096, 64, 8), "count every term"),
        ("exactly at a boundary", (8 * (4 * 1024 * 64 + 3 * 1024 + 256**2 + 256 * 64) * 4, 1024, 64, 8),
         "the budget is inclusive: <= budget fits"),
        ("tiny n: block capped at n", (2**30, 100, 16, 2), "block <= n (a power of two)"),
        ("budget too small for q, k, v alone", (1000, 4096, 64, 8), "return 0 when nothing fits"),
        ("one head", (2**20, 2048, 32, 1), "powers of two only"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _budget_block(*args), hint) for label, args, hint in specs
    ]
    return run_check(
        "block_size_for_budget", fn, cases, forbid=FORBIDDEN["block_size_for_budget"]
    )


def _causal_count(T, S, bq, bk):
    """Tiles of a top-left causal pass that hold at least one pair j <= i."""
    computed = 0
    for i0 in range(0, T, bq):
        last_row = min(i0 + bq, T) - 1  # the tile's lowest query
        computed += sum(1 for j0 in range(0, S, bk) if j0 <= last_row)
    return computed, -(-T // bq) * -(-S // bk)


def causal_tiles(fn):
    """Check ``fn(T, S, block_q, block_k) -> (computed, total)``."""
    specs = [
        ("square, blocks divide n: T = S = 256, 64 x 64", (256, 256, 64, 64),
         "a row block of tiles is computed up to the tile holding its last query"),
        ("ragged: T = S = 300, 64 x 64", (300, 300, 64, 64),
         "round the number of blocks up: the last tile is short"),
        ("T != S: T = 100, S = 300, 32 x 32", (100, 300, 32, 32),
         "top-left causal: query i sees keys j <= i, so tiles right of column T "
         "are never computed"),
        ("T > S: T = 300, S = 100, 64 x 16", (300, 100, 64, 16),
         "rows below the last key see every key: all their tiles are computed"),
        ("Bq != Bk: T = S = 128, 16 x 64", (128, 128, 16, 64),
         "count per row block: tile (i0, j0) is computed when j0 <= i0 + Bq - 1"),
        ("a tile with one allowed pair: T = 129, S = 200, 64 x 32", (129, 200, 64, 32),
         "the last row block holds only query 128, and key block 128-159 starts at "
         "key 128: that one allowed pair (128, 128) makes the tile computed "
         "(j0 <= the row block's last query, not <)"),
        ("T < S, Bq < Bk, neither divides: T = 150, S = 410, 24 x 40", (150, 410, 24, 40),
         "per row block: the key blocks starting at or before its last query"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _causal_count(*args), hint) for label, args, hint in specs
    ]
    return run_check(
        "causal_tiles", fn, cases, compare=_int_pair, forbid=FORBIDDEN["causal_tiles"]
    )


def _int_pair(got, expected):
    return (
        isinstance(got, (tuple, list))
        and len(got) == 2
        and all(not isinstance(g, bool) and int(g) == g for g in got)
        and tuple(int(g) for g in got) == expected
    )


def _sdpa64(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., T, S)
    return torch.softmax(s, -1) @ v


def split_kv_decoding(fn):
    """Check ``fn(q (B, H, 1, Dh), k (B, H, S, Dh), v (B, H, S, Dv), n_splits)``."""
    specs = [
        ("S = 64 in 4 splits", (2, 3, 64, 8, 8), 4, 1.0,
         "each split gives (o_i, lse_i); merge them with weights exp(lse_i - lse)"),
        ("S = 50 in 4 splits (ragged)", (1, 2, 50, 8, 4), 4, 1.0,
         "the last split is shorter: split with ceil(S / n_splits) keys per chunk"),
        ("scores x 1000", (1, 2, 32, 8, 8), 4, 1000.0,
         "exp(lse_i) overflows: subtract the largest lse before exponentiating"),
        ("one split", (1, 1, 9, 4, 4), 1, 1.0, "n_splits = 1 is plain attention"),
        ("n_splits = S", (1, 1, 6, 4, 4), 6, 1.0, "one key per split still merges"),
    ]  # fmt: skip
    cases = []
    for i, (label, (B, H, S, Dh, Dv), n_splits, mult, hint) in enumerate(specs):
        g = seeded(820 + i)
        q = torch.randn(B, H, 1, Dh, generator=g, dtype=torch.float64) * mult
        k = torch.randn(B, H, S, Dh, generator=g, dtype=torch.float64)
        v = torch.randn(B, H, S, Dv, generator=g, dtype=torch.float64)
        cases.append(Case(label, (q, k, v, n_splits), _sdpa64(q, k, v), hint))
    return run_check(
        "split_kv_decoding", fn, cases, forbid=FORBIDDEN["split_kv_decoding"]
    )


def _tile_grads(q, k, v, dout, scale):
    """Autograd's gradients of grouped-query attention on one tile: query head h reads
    key/value head h // (Hq // Hkv), as repeat_interleave and SDPA's enable_gqa."""
    q, k, v = (t.clone().requires_grad_() for t in (q, k, v))
    g = q.shape[0] // k.shape[0]  # query heads per key/value head
    kr, vr = k.repeat_interleave(g, 0), v.repeat_interleave(g, 0)  # (Hq, S, .)
    w = torch.softmax(q @ kr.transpose(-2, -1) * scale, -1)  # (Hq, T, S)
    out = w @ vr  # (Hq, T, Dv)
    return torch.autograd.grad(out, (q, k, v), dout)


def _without_autograd(fn):
    """``fn`` run with a saved-tensor hook that refuses autograd: an answer that builds
    a graph and differentiates it (``torch.autograd.grad``, ``.backward()``) raises.
    The wrapper keeps ``fn``'s globals, so the forbidden-call tripwires still reach
    the names the student's code looks up."""
    hooks = torch.autograd.graph.saved_tensors_hooks

    def pack(t):
        raise RuntimeError(
            "your function used autograd (it built a graph to differentiate): derive "
            "the gradients by hand"
        )

    def unpack(t):
        return t

    def answer(*a, **k):
        with hooks(pack, unpack):
            return fn(*a, **k)

    if not callable(fn):
        return fn
    glob = getattr(fn, "__globals__", None) or {"__builtins__": builtins}
    return types.FunctionType(answer.__code__, glob, "answer", None, answer.__closure__)


def grouped_tile_backward(fn):
    """Check ``fn(q, k, v, out, lse, dout, scale) -> (dq, dk, dv)`` on one tile of
    every head: ``q (Hq, T, Dh)``, ``k (Hkv, S, Dh)``, ``v (Hkv, S, Dv)``."""
    group = (
        "dK and dV of a shared key/value head are the sum of the gradients of the "
        "query heads that read it, and those are consecutive: head j serves query "
        "heads j*g ... j*g + g - 1 (g = Hq / Hkv, as repeat_interleave)"
    )
    specs = [
        ("one query head per key/value head: Hq = Hkv = 2, T = 4, S = 6",
         (2, 2, 4, 6, 3, 3), 1.0, 1.0,
         "dV = P^T dO; dP = dO V^T; dS = P * (dP - D) with D_i = sum_j dO_ij O_ij"),
        ("Hq = 4, Hkv = 2, T = 3, S = 5", (4, 2, 3, 5, 4, 4), 1.0, 1.0, group),
        ("Hq = 6, Hkv = 3", (6, 3, 2, 4, 3, 2), 1.0, 1.0, group),
        ("one key/value head for 4 query heads (MQA)", (4, 1, 3, 5, 4, 4), 1.0, 1.0,
         group),
        ("sharp scores (x 20)", (4, 2, 3, 7, 4, 4), 1.0, 20.0,
         "recompute P = exp(scale * q k^T - lse) from the saved lse: no max needed"),
        ("scale 0.5, Dv != Dh", (4, 2, 5, 3, 4, 2), 0.5, 1.0,
         "dQ = scale * dS K and dK = scale * dS^T Q: the scale multiplies both"),
    ]  # fmt: skip
    cases = []
    for i, (label, (Hq, Hkv, T, S, Dh, Dv), scale, mult, hint) in enumerate(specs):
        g = seeded(840 + i)
        q = torch.randn(Hq, T, Dh, generator=g, dtype=torch.float64) * mult
        k = torch.randn(Hkv, S, Dh, generator=g, dtype=torch.float64)
        v = torch.randn(Hkv, S, Dv, generator=g, dtype=torch.float64)
        dout = torch.randn(Hq, T, Dv, generator=g, dtype=torch.float64)
        kr = k.repeat_interleave(Hq // Hkv, 0)  # (Hq, S, Dh)
        vr = v.repeat_interleave(Hq // Hkv, 0)  # (Hq, S, Dv)
        s = q @ kr.transpose(-2, -1) * scale  # (Hq, T, S)
        lse = torch.logsumexp(s, -1)  # (Hq, T)
        out = torch.softmax(s, -1) @ vr  # (Hq, T, Dv)
        cases.append(
            Case(
                label,
                (q, k, v, out, lse, dout, scale),
                _tile_grads(q, k, v, dout, scale),
                hint,
            )
        )
    return run_check(
        "grouped_tile_backward",
        _without_autograd(fn),
        cases,
        forbid=FORBIDDEN["grouped_tile_backward"],
    )
