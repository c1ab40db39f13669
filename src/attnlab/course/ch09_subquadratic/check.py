"""Checks for chapter 9 (beyond quadratic attention).

* :func:`causal_linear_attention` — ``fn(q, k, v) -> out``: causal linear attention
  with phi = elu + 1, in prefix-sum form (no (T, T) matrix).
* :func:`receptive_field_after` — ``fn(mask, layers) -> (n,)``: how many positions each
  query depends on after ``layers`` layers of attention with the boolean ``mask``.
* :func:`kv_cache_bytes` — ``fn(layers, seq_len, batch=1, bytes_per=2) -> bytes``:
  the KV cache of a mixed model (full-attention layers with grouped-query heads,
  sliding-window layers whose cache stops at the window, MLA latent layers).
* :func:`kv_cache_crossover` — ``fn(layers, weight_bytes, batch=1, bytes_per=2) ->
  int | None``: the first context length at which that cache outweighs the weights.
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
    "kv_cache_crossover",
    "streaming_mask",
]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "causal_linear_attention": ("attnlab.linear_attention",
                                "attnlab.efficient.linear_attention"),
    "receptive_field_after": ("attnlab.course.ch09_subquadratic.widgets.receptive_field",),
    # no library function computes a cache's size from a description: nothing to forbid
    "kv_cache_bytes": (),
    "kv_cache_crossover": (),
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


def _layer_numbers(layer: dict, seq_len: int) -> int:
    """Numbers one layer caches per sequence after ``seq_len`` tokens."""
    if layer["kind"] == "mla":  # one latent + one decoupled RoPE key, shared by heads
        return (layer["d_latent"] + layer["d_rope"]) * seq_len
    held = seq_len if layer["kind"] == "full" else min(seq_len, layer["window"])
    return 2 * layer["n_kv_heads"] * layer["d_head"] * held  # K and V


def _kv_bytes(layers, seq_len, batch=1, bytes_per=2):
    return sum(_layer_numbers(la, seq_len) for la in layers) * batch * bytes_per


def _crossover(layers, weight_bytes, batch=1, bytes_per=2):
    hi = 2**62  # every window is shorter: past it only full and MLA layers grow
    if _kv_bytes(layers, hi, batch, bytes_per) <= weight_bytes:
        return None
    lo = 0  # invariant: cache(lo) <= weights < cache(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _kv_bytes(layers, mid, batch, bytes_per) > weight_bytes:
            hi = mid
        else:
            lo = mid
    return hi


def _full(n, H, H_kv, Dh):
    return [{"kind": "full", "n_heads": H, "n_kv_heads": H_kv, "d_head": Dh}] * n


def _window(n, H, H_kv, Dh, w):
    return [
        {"kind": "window", "n_heads": H, "n_kv_heads": H_kv, "d_head": Dh, "window": w}
    ] * n


def _mla(n, H, d_latent, d_rope):
    return [{"kind": "mla", "n_heads": H, "d_latent": d_latent, "d_rope": d_rope}] * n


def _hybrid(n, every, H, H_kv, Dh, w):  # layer i is full when (i + 1) % every == 0
    return [
        _full(1, H, H_kv, Dh)[0]
        if (i + 1) % every == 0
        else _window(1, H, H_kv, Dh, w)[0]
        for i in range(n)
    ]


def kv_cache_bytes(fn):
    """Check ``fn(layers, seq_len, batch=1, bytes_per=2) -> bytes``: the KV cache of a
    model given as a list of layer dicts, ``kind`` "full" (``n_heads``, ``n_kv_heads``,
    ``d_head``), "window" (the same and ``window``) or "mla" (``n_heads``,
    ``d_latent``, ``d_rope``), after ``seq_len`` tokens of each of ``batch``
    sequences."""
    specs = [
        ("one full layer, 4 heads of 16, 10 tokens", (_full(1, 4, 4, 16), 10), {},
         "keys AND values: two tensors per layer"),
        ("grouped-query: 32 query heads, 8 key/value heads", (_full(32, 32, 8, 128),
         4096), {}, "the cache holds the key/value heads only: n_kv_heads, not n_heads"),
        ("window layers, text shorter than the window", (_window(4, 8, 2, 64, 4096),
         1000), {}, "before the window fills, a window layer holds only seq_len positions"),
        ("window layers, text far past the window", (_window(32, 32, 8, 128, 4096),
         32768), {}, "a window layer holds at most `window` positions: its ring buffer "
         "overwrites the oldest, so its cache stops growing at the window"),
        ("5 window layers per full layer, 12 layers", (_hybrid(12, 6, 16, 4, 64, 512),
         3000), {}, "count each layer by its own kind: only the full layers grow past "
         "the window"),
        ("MLA: latent 512 + RoPE key 64, 128 heads", (_mla(4, 128, 512, 64), 100), {},
         "MLA caches one latent (d_latent) and one RoPE key (d_rope) per token, shared "
         "by all heads: no factor 2, no heads"),
        ("batch 8, float32", (_hybrid(6, 3, 8, 8, 32, 16), 40), {"batch": 8,
         "bytes_per": 4}, "every sequence of the batch, bytes_per bytes per number"),
        ("one token, all three kinds", (_full(1, 8, 1, 64) + _window(2, 8, 2, 64, 8)
         + _mla(1, 8, 32, 16), 1), {}, "at seq_len 1 every layer holds one position"),
        ("no tokens yet", (_hybrid(6, 2, 4, 2, 16, 4) + _mla(1, 4, 8, 4), 0), {},
         "an empty cache holds 0 bytes"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _kv_bytes(*args, **kw), hint, kw)
        for label, args, kw, hint in specs
    ]
    return run_check("kv_cache_bytes", fn, cases, forbid=FORBIDDEN["kv_cache_bytes"])


def kv_cache_crossover(fn):
    """Check ``fn(layers, weight_bytes, batch=1, bytes_per=2) -> int | None``: the
    smallest ``seq_len`` at which the KV cache of ``batch`` sequences holds more bytes
    than the weights, ``None`` if it never does."""
    gqa = _full(32, 32, 8, 128)  # 128 KiB per token in 16 bit
    specs = [
        ("32 full GQA layers, 16 GB of weights", (gqa, 16 * 10**9), {},
         "the first seq_len whose cache is MORE than the weights"),
        ("the same, batch 8", (gqa, 16 * 10**9), {"batch": 8},
         "the batch multiplies the cache, not the weights"),
        ("exactly equal at 1000 tokens: not more yet", (_full(2, 4, 4, 8), 2 * 2 * 4 * 8
         * 1000 * 2), {}, "equal is not more: the answer is 1001"),
        ("all layers window 4096: the cache stops growing", (_window(32, 32, 8, 128,
         4096), 16 * 10**9), {}, "a window model's cache levels off at the window: it "
         "may never reach the weights (return None)"),
        ("the window model, batch 64", (_window(32, 32, 8, 128, 4096), 16 * 10**9),
         {"batch": 64}, "once the windows are full only the batch can push it over"),
        ("5 window layers (w 1024) per full layer", (_hybrid(32, 6, 32, 8, 128, 1024),
         16 * 10**9), {}, "past the window only the full layers grow: the crossover is "
         "not weights / (bytes per token at the start)"),
        ("MLA, 60 layers (latent 512 + RoPE 64)", (_mla(60, 128, 512, 64), 472 * 10**9),
         {"bytes_per": 2}, "MLA: (d_latent + d_rope) numbers per token and layer"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _crossover(*args, **kw), hint, kw)
        for label, args, kw, hint in specs
    ]
    return run_check(
        "kv_cache_crossover", fn, cases, forbid=FORBIDDEN["kv_cache_crossover"]
    )


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
