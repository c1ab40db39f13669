"""Checks for chapter 5 (self-attention).

* :func:`softmax_jacobian_norm` — ``fn(d_k, scaled, n, generator) -> float``: the mean
  Frobenius norm of the softmax Jacobian, with and without the ``1/√d_k`` scaling.
* :func:`strict_causal_padding_weights` — attention weights where a query sees only
  strictly earlier, real keys.
* :func:`tied_log_normalisers` — the log-normalisers of tied-projection self-attention.
"""

from __future__ import annotations

import math

import torch

from ._core import Case, run_check

__all__ = [
    "softmax_jacobian_norm",
    "strict_causal_padding_weights",
    "tied_log_normalisers",
]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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
