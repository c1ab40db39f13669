"""Checks for chapter 8 (fast exact attention).

* :func:`merge_partial_attention` — ``fn(o1, lse1, o2, lse2) -> (o, lse)``: two
  *normalised* partial attention results over disjoint sets of keys, each with its
  log-sum-exp ``(..., T)``, merged into attention over all the keys (the split-KV
  merge of decoding kernels).
* :func:`block_size_for_budget` — ``fn(budget_bytes, n, d_head, n_heads) -> block``:
  the largest power of two ``block <= n`` whose tiled-forward live memory
  ``n_heads * (4 n d_head + 3 n + block² + block d_head) * 4`` bytes fits the budget
  (0 if none does).
* :func:`causal_tiles` — ``fn(n, block) -> (computed, total, time_ratio)``: the number
  of tiles a causal tiled forward computes, the number of tiles in all, and the
  measured time of causal over full :func:`attnlab.flash_attention`.
"""

from __future__ import annotations

import math

import torch

from ._core import Case, run_check

__all__ = ["merge_partial_attention", "block_size_for_budget", "causal_tiles"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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
    ]  # fmt: skip
    for i, (label, shape, s1, s2, mult, dead, hint) in enumerate(specs):
        g = _gen(800 + i)
        B, T, D = shape
        q = torch.randn(B, T, D, generator=g, dtype=torch.float64) * mult
        k = torch.randn(B, s1 + s2, D, generator=g, dtype=torch.float64)
        v = torch.randn(B, s1 + s2, D, generator=g, dtype=torch.float64)
        o1, l1 = _partial(q, k[:, :s1], v[:, :s1])
        m2 = None
        if dead == "second":
            m2 = torch.zeros(T, s2, dtype=torch.bool)
        o2, l2 = _partial(q, k[:, s1:], v[:, s1:], m2)
        if dead == "second":
            o, lse = o1, l1
        else:
            o, lse = _partial(q, k, v)
        cases.append(Case(label, (o1, l1, o2, l2), (o, lse), hint))
    return run_check("merge_partial_attention", fn, cases)


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
    return run_check("block_size_for_budget", fn, cases)


def causal_tiles(fn):
    """Check ``fn(n, block) -> (computed, total, time_ratio)`` on a few shapes."""
    from ..efficient import tile_plan

    def compare(got, expected):
        computed, total, ratio = (
            got  # the time ratio is noisy: only its type is checked
        )
        return (
            int(computed) == expected[0]
            and int(total) == expected[1]
            and math.isfinite(float(ratio))
            and float(ratio) > 0
        )

    cases = []
    for n, block in ((256, 64), (300, 64), (128, 128)):
        plan = tile_plan(n, n, block, block, causal=True)
        flat = [c for row in plan for c in row]
        exp = (sum(c != "skip" for c in flat), len(flat))
        cases.append(Case(f"n={n}, block={block}", (n, block), exp,
                          "tiles with some key j <= some query i are computed; "
                          "time_ratio = causal time / full time, a float"))  # fmt: skip
    return run_check("causal_tiles", fn, cases, compare=compare)
