"""Checks for chapter 9 (beyond quadratic attention).

* :func:`causal_linear_attention` — ``fn(q, k, v) -> out``: causal linear attention
  with phi = elu + 1, in prefix-sum form (no (T, T) matrix).
* :func:`receptive_field_after` — ``fn(mask, layers) -> (n,)``: how many positions each
  query depends on after ``layers`` layers of attention with the boolean ``mask``.
* :func:`kv_cache_bytes` — ``fn(n_layers, n_heads, d_head, seq_len, batch,
  bytes_per=2, n_kv_heads=None) -> bytes``: memory of a KV cache, with grouped-query
  attention when ``n_kv_heads`` < ``n_heads``.
* :func:`streaming_mask` — ``fn(T, window, n_sink) -> (T, T) bool``: what a decoder with
  a rolling cache of ``window`` recent tokens plus ``n_sink`` sink tokens attends to
  (StreamingLLM).
"""

from __future__ import annotations

import torch

from ...efficient import linear_attention
from ...masking import sparse_pattern_mask as pattern_mask
from ..check_core import Case, close, run_check, seeded

__all__ = [
    "causal_linear_attention",
    "receptive_field_after",
    "kv_cache_bytes",
    "streaming_mask",
]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "causal_linear_attention": ("attnlab.linear_attention",
                                "attnlab.efficient.linear_attention"),
    "receptive_field_after": ("attnlab.course.ch09_subquadratic.widgets.receptive_field",),
    "kv_cache_bytes": (),
    "streaming_mask": ("attnlab.masking.streaming_mask",
                       "attnlab.masking.sparse_pattern_mask"),
}  # fmt: skip


def causal_linear_attention(fn):
    """Check ``fn(q, k, v) -> out`` against :func:`attnlab.linear_attention`."""

    def compare(got, expected):
        return close(got, expected, atol=1e-6, rtol=1e-5)

    cases = []
    specs = [
        ("B=2, H=2, T=6, Dh=3, Dv=4", (2, 2, 6, 3, 4), 1.0, "S_t = sum_{j<=t} phi(k_j) v_j^T"),
        ("length 1", (1, 1, 1, 2, 2), 1.0, "one position: out = v"),
        ("large inputs", (1, 1, 8, 4, 4), 30.0, "phi(x) = elu(x) + 1 never needs a max trick"),
        ("T=17 (no chunk multiple)", (1, 2, 17, 4, 2), 1.0, "cumsum over the time axis"),
    ]  # fmt: skip
    for i, (label, (B, H, T, Dh, Dv), mult, hint) in enumerate(specs):
        g = seeded(900 + i)
        q = torch.randn(B, H, T, Dh, generator=g, dtype=torch.float64) * mult
        k = torch.randn(B, H, T, Dh, generator=g, dtype=torch.float64) * mult
        v = torch.randn(B, H, T, Dv, generator=g, dtype=torch.float64)
        cases.append(
            Case(label, (q, k, v), linear_attention(q, k, v, is_causal=True), hint)
        )
    return run_check(
        "causal_linear_attention",
        fn,
        cases,
        compare=compare,
        forbid=FORBIDDEN["causal_linear_attention"],
    )


def receptive_field_after(fn):
    """Check ``fn(mask, layers) -> (n,)`` long tensor of counts."""
    from .widgets import receptive_field  # call time: the widgets import pyplot

    cases = []
    specs = [
        ("causal window 2, 3 layers", pattern_mask("window", 16, 2, causal=True), 3),
        ("window 1, 1 layer", pattern_mask("window", 8, 1), 1),
        (
            "dilated 2x2, 2 layers, causal",
            pattern_mask("dilated", 20, 2, 2, causal=True),
            2,
        ),
        ("global+local", pattern_mask("global+local", 12, 1, n_global=1), 2),
        ("no edges at all (window 0)", pattern_mask("window", 5, 0), 4),
        (
            "previous token only (no self edge)",
            torch.ones(6, 6, dtype=torch.bool).tril(-1)
            & ~torch.ones(6, 6, dtype=torch.bool).tril(-2),
            2,
        ),
    ]
    for label, mask, layers in specs:
        cases.append(
            Case(
                label,
                (mask, layers),
                receptive_field(mask, layers),
                "a token always keeps itself (residual); compose the mask "
                "with itself once per layer",
            )
        )
    return run_check(
        "receptive_field_after", fn, cases, forbid=FORBIDDEN["receptive_field_after"]
    )


def kv_cache_bytes(fn):
    """Check ``fn(n_layers, n_heads, d_head, seq_len, batch, bytes_per=2,
    n_kv_heads=None)``; ``n_kv_heads=None`` means one key/value head per query head."""

    def ref(L, H, Dh, T, B, bytes_per=2, n_kv_heads=None):
        return 2 * L * (n_kv_heads or H) * Dh * T * B * bytes_per

    specs = [
        ("a 12-layer, 12-head, Dh=64 model, 1024 tokens", (12, 12, 64, 1024, 1), {},
         "keys AND values, every layer"),
        ("float32", (2, 4, 16, 10, 3), {"bytes_per": 4}, "bytes_per is per number"),
        ("batch 8, 32 layers", (32, 32, 128, 4096, 8), {}, "every sequence of the batch"),
        ("grouped-query: 32 query heads, 8 key/value heads", (32, 32, 128, 4096, 1),
         {"n_kv_heads": 8}, "the cache holds the key/value heads only: n_kv_heads"),
        ("multi-query: one key/value head", (24, 16, 64, 2048, 2), {"n_kv_heads": 1},
         "multi-query attention keeps a single key/value head per layer"),
    ]  # fmt: skip
    cases = [
        Case(label, args, ref(*args, **kw), hint, kw) for label, args, kw, hint in specs
    ]
    return run_check("kv_cache_bytes", fn, cases, forbid=FORBIDDEN["kv_cache_bytes"])


def _streaming(T, window, n_sink):
    i = torch.arange(T)[:, None]  # (T, 1)
    j = torch.arange(T)[None, :]  # (1, T)
    return (j <= i) & ((i - j < window) | (j < n_sink))  # (T, T)


def streaming_mask(fn):
    """Check ``fn(T, window, n_sink) -> (T, T)`` bool, True = may attend."""
    specs = [
        ("T = 8, window 3, one sink", (8, 3, 1),
         "query i keeps the window of its last `window` tokens, itself included"),
        ("no sink: a plain rolling window", (7, 2, 0), "n_sink = 0 is a causal window"),
        ("window longer than the text", (5, 10, 2),
         "early on, nothing is evicted; and the mask stays causal: no query sees a "
         "later token, not even a sink"),
        ("4 sinks, window 4, T = 12", (12, 4, 4),
         "sinks are the first n_sink positions, seen by every later query (causal)"),
    ]  # fmt: skip
    cases = [Case(label, args, _streaming(*args), hint) for label, args, hint in specs]
    return run_check("streaming_mask", fn, cases, forbid=FORBIDDEN["streaming_mask"])
