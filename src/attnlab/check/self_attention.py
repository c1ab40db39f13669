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


# ------------------------------------------------------------------ chapter 5 (2)
__all__ += [
    "softmax_jacobian_norm",
    "strict_causal_padding_weights",
    "tied_log_normalisers",
]


def _reference_jacobian_norm(d_k, scaled, n, generator):
    q = torch.randn(n, 1, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(n, 16, d_k, generator=generator, dtype=torch.float64)
    s = (q @ k.transpose(-2, -1)).squeeze(1)  # (n, 16)
    if scaled:
        s = s / math.sqrt(d_k)
    p = torch.softmax(s, dim=-1)  # (n, 16)
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (n, 16, 16)
    return J.flatten(1).norm(dim=-1).mean().item()


def softmax_jacobian_norm(fn) -> bool:
    """Check ``fn(d_k, scaled, n, generator) -> float``: mean ‖∂softmax/∂s‖_F.

    Over ``n`` random rows of 16 scores ``s_j = q·k_j`` (divided by √d_k when
    ``scaled``), entries of q and k standard normal. Random draws differ from the
    reference's, so answers within 8 % pass (n = 4000 keeps the noise near 1 %).
    """
    cases = []
    for d_k in (1, 16, 256):
        for scaled in (False, True):
            ref = _reference_jacobian_norm(d_k, scaled, 4000, _gen(500 + d_k))
            hint = (
                "J = diag(p) - p pᵀ for each row p = softmax(s); take the Frobenius "
                "norm of each J, then the mean over the n rows"
                if d_k == 1
                else "divide the scores by √d_k only when scaled=True"
            )
            cases.append(
                Case(
                    f"d_k={d_k}, scaled={scaled}",
                    (d_k, scaled, 4000, _gen(900 + d_k)),
                    ref,
                    hint,
                )
            )

    def compare(got, expected):
        got = float(got)
        return math.isfinite(got) and abs(got - expected) <= 0.08 * expected + 1e-6

    return run_check("softmax_jacobian_norm", fn, cases, compare)


def _reference_strict_causal_padding(scores, lengths):
    B, T, S = scores.shape
    t = torch.arange(T)[:, None]  # (T, 1) query position
    s = torch.arange(S)[None, :]  # (1, S) key position
    allowed = (s < t)[None] & (s[None] < lengths[:, None, None])  # (B, T, S)
    masked = scores.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(masked, dim=-1)
    return torch.nan_to_num(w, nan=0.0)  # empty rows: 0/0 -> 0


def strict_causal_padding_weights(fn) -> bool:
    """Check ``fn(scores (B, T, T), lengths (B,)) -> weights (B, T, T)``.

    Query t may attend key s iff s < t (strictly earlier) and s < lengths[b]
    (a real token). Rows with no allowed key (always row 0) are all zeros.
    """
    g = _gen(11)
    s1 = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)
    s2 = torch.randn(2, 5, 5, generator=g, dtype=torch.float64) * 1000
    s3 = torch.randn(1, 4, 4, generator=g, dtype=torch.float64)
    s3[..., 2:] += 20000.0  # padding keys score far above the real ones
    s3 += torch.triu(torch.full((4, 4), 20000.0, dtype=torch.float64))  # and the future
    s4 = torch.randn(1, 1, 1, generator=g, dtype=torch.float64)
    s5 = torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
    specs = [
        ("lengths [4, 2]", s1, [4, 2], "allowed = (s < t) & (s < lengths[b])"),
        ("scores × 1000", s2, [5, 3], "subtract the row max: exp overflows"),
        (
            "masked keys score 20000 higher",
            s3,
            [2],
            "a finite mask value leaks here: use -inf (masked_fill), then turn "
            "the empty rows' NaN into 0",
        ),
        ("T = 1 (only an empty row)", s4, [1], "row 0 has no earlier key: all zeros"),
        ("a sequence of length 0", s5, [3, 0], "length 0: every row is empty"),
    ]
    cases = [
        Case(
            label,
            (s, torch.tensor(n)),
            _reference_strict_causal_padding(s, torch.tensor(n)),
            hint,
        )
        for label, s, n, hint in specs
    ]
    return run_check("strict_causal_padding_weights", fn, cases)


def tied_log_normalisers(fn) -> bool:
    """Check ``fn(X (..., T, D), W (D, d_k)) -> log Z (..., T)`` for tied projections.

    ``log Z_i = log Σ_m exp(s_im)`` with ``s = (XW)(XW)ᵀ/√d_k``, computed without
    overflow (the last cases have scores in the thousands).
    """
    cases = []
    specs = [
        ("T=4, D=3, d_k=3", (4, 3, 3), (), 1.0),
        ("a batch (B=2, T=3)", (3, 4, 4), (2,), 1.0),
        ("length 1", (1, 3, 3), (), 1.0),
        ("X × 30: scores in the thousands", (5, 4, 2), (), 30.0),
    ]
    for i, (label, (T, D, dk), batch, mult) in enumerate(specs):
        g = _gen(700 + i)
        X = torch.randn(*batch, T, D, generator=g, dtype=torch.float64) * mult
        W = torch.randn(D, dk, generator=g, dtype=torch.float64)
        Q = X @ W
        s = Q @ Q.transpose(-2, -1) / math.sqrt(dk)
        top = s.amax(-1, keepdim=True)
        ref = (top + (s - top).exp().sum(-1, keepdim=True).log()).squeeze(-1)
        hint = (
            "exp overflows: use torch.logsumexp(scores, dim=-1)"
            if mult > 1
            else "scores = (XW)(XW)ᵀ / √d_k, then log Σ exp over each row (dim=-1)"
        )
        cases.append(Case(label, (X, W), ref, hint))
    return run_check("tied_log_normalisers", fn, cases)
