"""Checks for chapter 13 (the attention layer of a 2026 LLM).

* :func:`ntk_frequencies` — ``fn(d, base, factor) -> (d/2,)``: RoPE's angular
  frequencies under NTK-aware scaling (the base times ``factor^(d/(d-2))``).
* :func:`softmax_with_sink` — ``fn(scores, sink) -> weights``: softmax over the keys
  with one extra learned logit per head whose mass is dropped (gpt-oss's sinks).
* :func:`kv_cache_numbers` — ``fn(layer_types, n_kv_heads, d_head, context,
  window=None) -> int``: the numbers one sequence of ``context`` tokens holds in the
  KV cache, summed over layers that are ``"full"`` or ``"sliding"`` (a sliding-window
  layer keeps at most ``window`` tokens).
"""

from __future__ import annotations

import math

import torch

from ..check_core import Case, close, run_check, seeded

__all__ = ["ntk_frequencies", "softmax_with_sink", "kv_cache_numbers"]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "ntk_frequencies": ("attnlab.modern.rope_frequencies", "attnlab.modern.RoPE",
                        "attnlab.modern.rope.rope_frequencies", "attnlab.modern.rope.RoPE"),
    "softmax_with_sink": ("attnlab.modern.attend", "attnlab.modern.attention.attend"),
    "kv_cache_numbers": (),
}  # fmt: skip


def ntk_frequencies(fn):
    """Check ``fn(d, base, factor)`` against the float64 formula."""

    def expected(d, base, factor):
        new_base = base * factor ** (d / (d - 2))
        return torch.tensor(
            [new_base ** (-2 * i / d) for i in range(d // 2)], dtype=torch.float64
        )

    specs = [
        ("d=16, base 1e4, factor 8", (16, 10000.0, 8.0), "the new base is base * factor^(d/(d-2))"),
        ("factor 1 (no scaling)", (8, 10000.0, 1.0), "factor 1 must give the plain frequencies"),
        ("d=64, base 5e5, factor 4", (64, 500000.0, 4.0), "omega_i = base'^(-2i/d), i = 0 .. d/2-1"),
        ("d=4, factor 2", (4, 100.0, 2.0), "the exponent d/(d-2) is 2 for d = 4"),
    ]  # fmt: skip
    cases = [Case(label, args, expected(*args), hint) for label, args, hint in specs]
    return run_check(
        "ntk_frequencies",
        fn,
        cases,
        compare=lambda g, e: close(g, e, atol=1e-12, rtol=1e-9),
        forbid=FORBIDDEN["ntk_frequencies"],
    )


def _sink_reference(scores: torch.Tensor, sink: torch.Tensor) -> torch.Tensor:
    """A loop over rows, in float64: exp(s_j) / (sum_j exp(s_j) + exp(sink))."""
    s = scores.double()
    out = torch.zeros_like(s)
    H = s.shape[-3]
    for idx in torch.cartesian_prod(*[torch.arange(n) for n in s.shape[:-1]]).tolist():
        row, z = s[tuple(idx)], float(sink[idx[-2] if H else 0])
        finite = row[torch.isfinite(row)]
        m = max([z] + finite.tolist())
        den = math.exp(z - m) + float(torch.exp(finite - m).sum())
        out[tuple(idx)] = torch.exp(row - m) / den
    return out.to(scores.dtype)


def softmax_with_sink(fn):
    """Check ``fn(scores (B, H, T, S), sink (H,)) -> weights (B, H, T, S)``."""
    cases = []
    g = seeded(1300)
    base = torch.randn(2, 3, 4, 5, generator=g, dtype=torch.float64)
    sink = torch.tensor([0.0, 2.0, -1.0], dtype=torch.float64)
    masked = base.clone()
    masked[:, :, 1] = float("-inf")  # a fully masked row: all mass on the sink
    masked[:, :, 2, 3:] = float("-inf")
    specs = [
        ("random scores", base, sink, "weights = exp(s) / (sum exp(s) + exp(sink)): they sum to < 1"),
        ("logits x 1000", base * 1000, sink, "subtract the row max (sink included) before exp"),
        ("masked keys and a fully masked row", masked, sink, "a fully masked row gives zeros, never NaN"),
        ("one key", base[..., :1], sink, "works for S = 1"),
        ("a very negative sink", base, torch.full((3,), -1e4, dtype=torch.float64),
         "with sink -> -inf it is the plain softmax"),
    ]  # fmt: skip
    for label, s, z, hint in specs:
        cases.append(Case(label, (s, z), _sink_reference(s, z), hint))
    return run_check(
        "softmax_with_sink",
        fn,
        cases,
        compare=lambda g, e: close(g, e, atol=1e-9, rtol=1e-7),
        forbid=FORBIDDEN["softmax_with_sink"],
    )


def kv_cache_numbers(fn):
    """Check ``fn(layer_types, n_kv_heads, d_head, context, window=None) -> int``."""

    def expected(types, g, dh, context, window=None):
        kept = [context if t == "full" else min(context, window) for t in types]
        return 2 * g * dh * sum(kept)

    alt = ["sliding", "full"] * 12  # 24 layers, windows and full layers alternating
    five = (["sliding"] * 5 + ["full"]) * 2  # five windowed layers per full one
    specs = [
        ("every layer full", (["full"] * 32, 8, 128, 8192), {},
         "keys and values: 2 x n_kv_heads x d_head numbers per cached token and layer"),
        ("alternating, window 128, 131072 tokens", (alt, 8, 64, 131072), {"window": 128},
         "a sliding layer caches min(context, window) tokens, a full one all of them"),
        ("five windowed per full, window 1024", (five, 4, 256, 32768), {"window": 1024},
         "sum the layers: each sliding layer stops at the window"),
        ("context shorter than the window", (["sliding", "full"] * 2, 2, 64, 100),
         {"window": 128}, "with fewer tokens than the window, a sliding layer keeps them all"),
        ("one token", (["sliding", "full"], 1, 8, 1), {"window": 4},
         "one token: one key and one value per kv head in each layer"),
        ("only sliding layers", (["sliding"] * 3, 2, 16, 50), {"window": 10},
         "every layer here is windowed: 3 x 2 x 2 x 16 x 10"),
    ]  # fmt: skip
    cases = [
        Case(label, args, expected(*args, **kw), hint, kwargs=kw)
        for label, args, kw, hint in specs
    ]
    return run_check(
        "kv_cache_numbers",
        fn,
        cases,
        compare=lambda g, e: (
            isinstance(g, (int, float)) and not isinstance(g, bool) and g == e
        ),
        forbid=FORBIDDEN["kv_cache_numbers"],
    )
