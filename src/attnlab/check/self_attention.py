"""Checks for chapter 5 (self-attention).

* :func:`self_attention` — ``fn(X, W_q, W_k, W_v) -> (Z, P)``: scaled dot-product
  self-attention of a sequence ``X (..., T, D)``.
* :func:`padded_attention_weights` — ``fn(scores, lengths) -> weights``: softmax over
  keys with key ``j >= lengths[b]`` masked out; a row with no key left is all zeros.
* :func:`tied_attention_weights` — ``fn(X, W) -> weights``: self-attention weights with
  tied projections ``W_q = W_k = W`` (symmetric scores, row-normalised weights).

The expected answers come from :mod:`attnlab` itself.
"""

from __future__ import annotations

import math

import torch

from ..mappings import softmax
from ..masking import apply_mask, padding_mask
from ._core import Case, run_check

__all__ = ["self_attention", "padded_attention_weights", "tied_attention_weights"]


def _sdpa(q, k, v, attn_mask=None):
    """The library's scaled dot-product attention (imported late: no import cycle)."""
    from ..attention import scaled_dot_product_attention

    return scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)


def _reference_self_attention(X, W_q, W_k, W_v):
    return _sdpa(X @ W_q, X @ W_k, X @ W_v)  # (Z (..., T, Dv), P (..., T, T))


def _reference_padded(scores, lengths):
    keep = padding_mask(lengths, scores.shape[-1])[:, None, :]  # (B, 1, S)
    return softmax(apply_mask(scores, keep), dim=-1)  # (B, T, S)


def _reference_tied(X, W):
    return _sdpa(X @ W, X @ W, X)[1]  # (..., T, T)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def self_attention(fn) -> bool:
    """Check ``fn(X, W_q, W_k, W_v) -> (Z, P)`` with ``P = softmax(QKᵀ/√d_k)``, ``Z = PV``."""
    cases = []
    specs = [
        ("one sentence T=4, D=5, d_k=3, d_v=2", (4, 5, 3, 2), (), 1.0),
        ("length 1 (T=1)", (1, 4, 4, 4), (), 1.0),
        ("a batch (B=2, T=3)", (3, 6, 4, 5), (2,), 1.0),
        ("large scores: X × 30", (5, 4, 8, 3), (), 30.0),
        ("d_k = 16: the √d_k matters", (4, 4, 16, 4), (), 1.0),
    ]
    for i, (label, (T, D, dk, dv), batch, mult) in enumerate(specs):
        g = _gen(100 + i)
        X = torch.randn(*batch, T, D, generator=g, dtype=torch.float64) * mult
        W_q = torch.randn(D, dk, generator=g, dtype=torch.float64)
        W_k = torch.randn(D, dk, generator=g, dtype=torch.float64)
        W_v = torch.randn(D, dv, generator=g, dtype=torch.float64)
        hint = {
            0: "Q = X @ W_q, K = X @ W_k, V = X @ W_v; P = softmax(Q Kᵀ / √d_k) "
            "over the last dim; Z = P @ V; return (Z, P)",
            1: "a single token attends only to itself: P = [[1]]",
            2: "use K.transpose(-2, -1), not K.T, so a batch dimension works",
            3: "subtract the row max before exp (or use attnlab's softmax): "
            "large scores overflow",
            4: "divide by √d_k where d_k = W_k.shape[1] (not D, not d_v)",
        }[i]
        expected = _reference_self_attention(X, W_q, W_k, W_v)
        cases.append(Case(label, (X, W_q, W_k, W_v), expected, hint))
    return run_check("self_attention", fn, cases)


def padded_attention_weights(fn) -> bool:
    """Check ``fn(scores (B, T, S), lengths (B,)) -> weights (B, T, S)``."""
    g = _gen(7)
    s1 = torch.randn(2, 3, 5, generator=g, dtype=torch.float64)
    s2 = torch.randn(3, 2, 4, generator=g, dtype=torch.float64) * 1000
    s3 = torch.randn(2, 2, 4, generator=g, dtype=torch.float64)
    s3[:, :, 2:] += 20000.0  # garbage on the padding keys, far above the real scores
    s4 = torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
    s5 = torch.randn(1, 2, 1, generator=g, dtype=torch.float64)
    lengths = [
        torch.tensor([5, 2]),
        torch.tensor([1, 4, 3]),
        torch.tensor([2, 2]),
        torch.tensor([3, 0]),
        torch.tensor([1]),
    ]
    specs = [
        ("two rows, lengths [5, 2]", s1, "key j of row b is real when j < lengths[b]"),
        (
            "scores × 1000",
            s2,
            "subtract the row max (or use attnlab's softmax) — exp overflows",
        ),
        (
            "padding keys score 20000 higher",
            s3,
            "a finite mask value such as -10000 is not enough here: use -inf "
            "(masked_fill) so padding gets exactly 0",
        ),
        (
            "a row of length 0 (fully masked)",
            s4,
            "a row with no real key must give all-zero weights, not NaN or uniform",
        ),
        ("S = 1, length 1", s5, "one real key gets weight 1"),
    ]
    cases = [
        Case(label, (s, n), _reference_padded(s, n), hint)
        for (label, s, hint), n in zip(specs, lengths)
    ]
    return run_check("padded_attention_weights", fn, cases)


def tied_attention_weights(fn) -> bool:
    """Check ``fn(X (..., T, D), W (D, d_k)) -> softmax((XW)(XW)ᵀ/√d_k)`` (T, T)."""
    cases = []
    specs = [
        ("T=4, D=3, d_k=3", (4, 3, 3), ()),
        ("T=5, D=4, d_k=2", (5, 4, 2), ()),
        ("a batch (B=2, T=3)", (3, 4, 4), (2,)),
        ("length 1", (1, 3, 3), ()),
    ]
    for i, (label, (T, D, dk), batch) in enumerate(specs):
        g = _gen(300 + i)
        X = torch.randn(*batch, T, D, generator=g, dtype=torch.float64)
        W = torch.randn(D, dk, generator=g, dtype=torch.float64) * math.sqrt(2)
        cases.append(
            Case(
                label,
                (X, W),
                _reference_tied(X, W),
                "scores (XW)(XW)ᵀ/√d_k are symmetric, but softmax normalises each "
                "ROW on its own: do not symmetrise the weights or normalise columns",
            )
        )
    return run_check("tied_attention_weights", fn, cases)
