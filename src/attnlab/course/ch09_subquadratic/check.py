"""Checks for chapter 9 (beyond quadratic attention).

* :func:`causal_linear_attention` — ``fn(q, k, v) -> out``: causal linear attention
  with phi = elu + 1, in prefix-sum form (no (T, T) matrix).
* :func:`receptive_field_of_stack` — ``fn(masks) -> (n,)``: how many positions each
  query depends on after a stack of attention layers, one boolean ``(n, n)`` mask per
  layer (the first layer first), the residual connection included.
* :func:`kv_cache_bytes` — ``fn(layers, seq_len, batch=1, bytes_per=2) -> bytes``:
  the KV cache of a mixed model (full-attention layers with grouped-query heads,
  sliding-window layers whose cache stops at the window, MLA latent layers).
* :func:`kv_cache_crossover` — ``fn(layers, weight_bytes, batch=1, bytes_per=2) ->
  int | None``: the first context length at which that cache outweighs the weights.
* :func:`chunk_sink_mask` — ``fn(T, S, window, n_sink) -> (T, S) bool``: what a chunk
  of ``T`` new tokens, the last ``T`` of ``S`` positions, attends to under a rolling
  window of ``window`` recent tokens plus ``n_sink`` sink tokens (StreamingLLM's
  pattern, aligned bottom-right).
"""

from __future__ import annotations

import torch

from ...efficient import linear_attention
from ...masking import sparse_pattern_mask as pattern_mask
from ..check_core import Case, close, run_check, seeded

__all__ = [
    "causal_linear_attention",
    "receptive_field_of_stack",
    "kv_cache_bytes",
    "kv_cache_crossover",
    "chunk_sink_mask",
]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "causal_linear_attention": ("attnlab.linear_attention",
                                "attnlab.efficient.linear_attention"),
    "receptive_field_of_stack": (
        "attnlab.course.ch09_subquadratic.widgets.receptive_field",),
    # no library function computes a cache's size from a description: nothing to forbid
    "kv_cache_bytes": (),
    "kv_cache_crossover": (),
    "chunk_sink_mask": ("attnlab.masking.streaming_mask",),
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


def _reach_of_stack(masks) -> torch.Tensor:
    """(n,) positions each query depends on through the stack (first layer first)."""
    n = masks[0].shape[-1]
    eye = torch.eye(n, dtype=torch.bool)
    reach = eye.float()  # (n, n): query i (top) depends on input position j
    for mask in masks:  # a new layer on top: its mask is read first
        reach = (((mask | eye).float() @ reach) > 0).float()
    return reach.sum(-1).long()


def receptive_field_of_stack(fn):
    """Check ``fn(masks) -> (n,)`` long tensor of counts, ``masks`` a list of boolean
    ``(n, n)`` masks, one per layer, the first layer first."""
    prev = torch.ones(6, 6, dtype=torch.bool).tril(-1) & ~torch.ones(
        6, 6, dtype=torch.bool
    ).tril(-2)  # (6, 6): each query sees the previous token only, not itself
    glob = pattern_mask("global+local", 12, 1, n_global=1)
    specs = [
        ("one layer: causal window 2", [pattern_mask("window", 16, 2, causal=True)],
         "one layer reaches what its mask allows, and the token itself"),
        ("the same causal window 2, three layers",
         [pattern_mask("window", 16, 2, causal=True)] * 3,
         "compose the masks: one step along the mask per layer"),
        ("causal window 1, then a causal dilated window 2 x 3",
         [pattern_mask("window", 20, 1, causal=True),
          pattern_mask("dilated", 20, 2, 3, causal=True)],
         "each layer uses its own mask: compose every mask of the list in turn"),
        ("global+local, then a causal window 1: order matters near the start",
         [glob, pattern_mask("window", 12, 1, causal=True)],
         "the list starts at the first layer: a query reads through the LAST layer's "
         "mask first, then down the stack (reach = M_L ... M_1, not M_1 ... M_L)"),
        ("previous token only (no self edge), twice", [prev, prev],
         "a token always keeps itself (residual): add the self edge to every mask"),
        ("no edges at all (window 0), four layers",
         [pattern_mask("window", 5, 0)] * 4, "with no edges each token reaches itself"),
    ]  # fmt: skip
    cases = [
        Case(label, (masks,), _reach_of_stack(masks), hint)
        for label, masks, hint in specs
    ]
    return run_check(
        "receptive_field_of_stack",
        fn,
        cases,
        forbid=FORBIDDEN["receptive_field_of_stack"],
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


def _chunk_sink(T, S, window, n_sink):
    i = torch.arange(T)[:, None] + (S - T)  # the queries' positions in the text (T, 1)
    j = torch.arange(S)[None, :]  # the keys' positions                          (1, S)
    return (j <= i) & ((i - j < window) | (j < n_sink))  # (T, S)


def chunk_sink_mask(fn):
    """Check ``fn(T, S, window, n_sink) -> (T, S)`` bool, True = may attend."""
    specs = [
        ("one new token after 9: T = 1, S = 10, window 4, 2 sinks", (1, 10, 4, 2),
         "bottom-right: query i is position S - T + i of the text; it sees the last "
         "`window` positions, itself included, and the first n_sink"),
        ("a chunk of 4 after 8: T = 4, S = 12, window 3, one sink", (4, 12, 3, 1),
         "every query of the chunk has its own window: keys S - T + i - window + 1 "
         "... S - T + i, never a later one"),
        ("the first chunk: T = S = 6, window 2, 3 sinks", (6, 6, 2, 3),
         "causal even for the sinks: a query never sees a later position, not even "
         "a sink that is generated after it"),
        ("no sink: T = 3, S = 9, window 2", (3, 9, 2, 0),
         "n_sink = 0 is a plain rolling window"),
        ("window longer than the text: T = 3, S = 5, window 10, 2 sinks", (3, 5, 10, 2),
         "early on nothing is evicted: every earlier position is seen"),
        ("4 sinks, window 4, T = 5, S = 16", (5, 16, 4, 4),
         "the sinks are the first n_sink positions, seen by every later query"),
    ]  # fmt: skip
    cases = [Case(label, args, _chunk_sink(*args), hint) for label, args, hint in specs]
    return run_check("chunk_sink_mask", fn, cases, forbid=FORBIDDEN["chunk_sink_mask"])
