"""Checks for chapter 5 (self-attention).

* :func:`softmax_jacobian_norm` — ``fn(d_k, scaled, n, generator) -> float``: the mean
  Frobenius norm of the softmax Jacobian, with and without the ``1/√d_k`` scaling.
* :func:`strict_causal_padding_weights` — attention weights where a query sees only
  strictly earlier, real keys.
* :func:`tied_log_normalisers` — the log-normalisers of tied-projection self-attention.
* :func:`tied_log_ratio` — ``log(p_ij / p_ji)`` for every pair of a tied-projection
  head, also where the weights themselves underflow (exercise 5.3).
"""

from __future__ import annotations

import functools
import math

import torch

from ..check_core import Case, CheckResult, run_check, seeded

__all__ = [
    "softmax_jacobian_norm",
    "strict_causal_padding_weights",
    "tied_log_normalisers",
    "tied_log_ratio",
]

# (not in __all__: every check module has one.)
# check -> the library functions its exercise asks the student to write themselves
# (shared with the grader). Nothing in attnlab computes a softmax Jacobian or a log
# normaliser, so those two exercises forbid nothing.
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "softmax_jacobian_norm": (),
    "strict_causal_padding_weights": (
        "attnlab.mappings.softmax",
        "attnlab.attention.scaled_dot_product_attention",
        "attnlab.attention.attend",
        "attnlab.masking.apply_mask",
    ),
    "tied_log_normalisers": (),
    "tied_log_ratio": (),
}


@functools.cache  # deterministic, and the d_k = 256 draws are large
def _reference_jacobian_norm(d_k, scaled, n, seed):
    generator = seeded(seed)
    q = torch.randn(n, 1, d_k, generator=generator, dtype=torch.float64)
    k = torch.randn(n, 16, d_k, generator=generator, dtype=torch.float64)
    s = (q @ k.transpose(-2, -1)).squeeze(1)  # (n, 16)
    if scaled:
        s = s / math.sqrt(d_k)
    p = torch.softmax(s, dim=-1)  # (n, 16)
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (n, 16, 16)
    return J.flatten(1).norm(dim=-1).mean().item()


def softmax_jacobian_norm(fn) -> CheckResult:
    """Check ``fn(d_k, scaled, n, generator) -> float``: mean ‖∂softmax/∂s‖_F.

    Over ``n`` random rows of 16 scores ``s_j = q·k_j`` (divided by √d_k when
    ``scaled``), entries of q and k standard normal. Random draws differ from the
    reference's, so answers within a tolerance pass: 3 % where 20 reference runs with
    n = 4000 spread by under 0.4 %, 5 % and 10 % for the unscaled d_k = 16 and 256,
    whose estimates are noisier (up to 1.7 % and 4.7 % from the mean). The first case
    (d_k = 1) fails the diagonal-only slip p(1 − p), which is 6 % low there.
    """
    jac = "J = diag(p) − p pᵀ is a 16 × 16 matrix per row (the off-diagonal −p_i p_j "
    jac += "included), p = softmax over the row's 16 keys (dim=-1); take each J's "
    jac += "Frobenius norm, then the mean over the n rows"
    hints = {
        (1, False): f"d_k = 1, unscaled: {jac}",
        (1, True): f"d_k = 1, so √d_k = 1 and scaling changes nothing: {jac}",
        (16, False): "d_k = 16, scaled=False: use the raw scores q·k, no division",
        (16, True): "d_k = 16, scaled=True: divide the scores q·k by √d_k = 4 "
        "before the softmax",
        (256, False): "d_k = 256, scaled=False: the raw scores are large and most rows "
        "nearly one-hot, so ‖J‖ is small",
        (256, True): "d_k = 256, scaled=True: divide by √d_k = 16",
    }
    tol = {(16, False): 0.05, (256, False): 0.10}
    cases, tols = [], {}
    for d_k in (1, 16, 256):
        for scaled in (False, True):
            ref = _reference_jacobian_norm(d_k, scaled, 4000, 500 + d_k)
            tols[ref] = tol.get((d_k, scaled), 0.03)
            cases.append(
                Case(
                    f"d_k={d_k}, scaled={scaled}",
                    (d_k, scaled, 4000, seeded(900 + d_k)),
                    ref,
                    hints[d_k, scaled],
                )
            )

    def compare(got, expected):
        got = float(got)
        return math.isfinite(got) and abs(got - expected) <= tols[expected] * expected

    return run_check(
        "softmax_jacobian_norm",
        fn,
        cases,
        compare,
        forbid=FORBIDDEN["softmax_jacobian_norm"],
    )


def _reference_strict_causal_padding(scores, lengths):
    B, T, S = scores.shape
    t = torch.arange(T)[:, None]  # (T, 1) query position
    s = torch.arange(S)[None, :]  # (1, S) key position
    allowed = (s < t)[None] & (s[None] < lengths[:, None, None])  # (B, T, S)
    masked = scores.masked_fill(~allowed, float("-inf"))
    w = torch.softmax(masked, dim=-1)
    return torch.nan_to_num(w, nan=0.0)  # empty rows: 0/0 -> 0


def strict_causal_padding_weights(fn) -> CheckResult:
    """Check ``fn(scores (B, T, T), lengths (B,)) -> weights (B, T, T)``.

    Query t may attend key s iff s < t (strictly earlier) and s < lengths[b]
    (a real token). Rows with no allowed key (always row 0) are all zeros.
    """
    g = seeded(11)
    s1 = torch.randn(2, 4, 4, generator=g, dtype=torch.float64)
    s2 = torch.randn(2, 5, 5, generator=g, dtype=torch.float64) * 1000
    s3 = torch.randn(1, 4, 4, generator=g, dtype=torch.float64)
    s3[..., 2:] += 20000.0  # padding keys score far above the real ones
    s3 += torch.triu(torch.full((4, 4), 20000.0, dtype=torch.float64))  # and the future
    s4 = torch.randn(1, 1, 1, generator=g, dtype=torch.float64)
    s5 = torch.randn(2, 3, 3, generator=g, dtype=torch.float64)
    rows = (
        "query t may attend key s only if s < t (strictly earlier: the diagonal is "
        "masked too) and s < lengths[b]; normalise over the keys (dim=-1); row 0 has "
        "no allowed key and must be all zeros, not NaN"
    )
    specs = [
        ("lengths [4, 2]", s1, [4, 2], rows),
        (
            "scores × 1000",
            s2,
            [5, 3],
            "scores in the thousands: subtract each row's max before exp (exp "
            "overflows), or mask with -inf and use a stable softmax",
        ),
        (
            "masked keys score 20000 higher",
            s3,
            [2],
            "the masked keys (padding and future) score 20000 above the allowed ones: "
            "a finite mask value such as -10000 leaks here; use -inf (masked_fill), "
            "then set the empty rows to 0",
        ),
        ("T = 1 (only an empty row)", s4, [1], "row 0 has no earlier key: all zeros"),
        (
            "a sequence of length 0",
            s5,
            [3, 0],
            "length 0: every row is empty, all zeros",
        ),
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
    return run_check(
        "strict_causal_padding_weights",
        fn,
        cases,
        forbid=FORBIDDEN["strict_causal_padding_weights"],
    )


def tied_log_normalisers(fn) -> CheckResult:
    """Check ``fn(X (..., T, D), W (D, d_k)) -> log Z (..., T)`` for tied projections.

    ``log Z_i = log Σ_m exp(s_im)`` with ``s = (XW)(XW)ᵀ/√d_k``, computed without
    overflow (the last cases have scores in the thousands).
    """
    cases = []
    specs = [  # the second case has d_k != D: the scale is √d_k, not √D
        ("T=4, D=3, d_k=3", (4, 3, 3), (), 1.0),
        ("a batch (B=2, T=3), D=4, d_k=2", (3, 4, 2), (2,), 1.0),
        ("length 1", (1, 3, 3), (), 1.0),
        ("X × 30: scores in the thousands", (5, 4, 2), (), 30.0),
    ]
    hints = [
        "s = (XW)(XW)ᵀ / √d_k (d_k = W.shape[-1]), then log Σ_m exp(s_im) for each "
        "row i",
        "here d_k = W.shape[-1] = 2 but D = X.shape[-1] = 4: scale by √d_k; X has a "
        "batch dimension, so transpose the last two axes (transpose(-2, -1))",
        "T = 1: one score per row, log Z = that score",
        "scores in the thousands: exp overflows to inf; torch.logsumexp(s, dim=-1) "
        "does not",
    ]
    for i, (label, (T, D, dk), batch, mult) in enumerate(specs):
        g = seeded(700 + i)
        X = torch.randn(*batch, T, D, generator=g, dtype=torch.float64) * mult
        W = torch.randn(D, dk, generator=g, dtype=torch.float64)
        Q = X @ W
        s = Q @ Q.transpose(-2, -1) / math.sqrt(dk)
        top = s.amax(-1, keepdim=True)
        ref = (top + (s - top).exp().sum(-1, keepdim=True).log()).squeeze(-1)
        cases.append(Case(label, (X, W), ref, hints[i]))
    return run_check(
        "tied_log_normalisers", fn, cases, forbid=FORBIDDEN["tied_log_normalisers"]
    )


def tied_log_ratio(fn) -> CheckResult:
    """Check ``fn(X (..., T, D), W (D, d_k)) -> (..., T, T)``, entry ``[i, j]`` =
    ``log(p_ij / p_ji)`` for tied projections (``s = (XW)(XW)ᵀ/√d_k``, ``p`` its
    row-wise softmax). The last case has scores in the thousands, where most weights
    underflow to 0: only a ratio written without the weights survives it."""
    cases = []
    specs = [  # the second case has d_k != D: the scale is √d_k, not √D
        ("T=4, D=3, d_k=3", (4, 3, 3), (), 1.0),
        ("a batch (B=2, T=3), D=4, d_k=2", (3, 4, 2), (2,), 1.0),
        ("length 1", (1, 3, 3), (), 1.0),
        ("X × 30: scores in the thousands", (5, 4, 2), (), 30.0),
    ]
    hints = [
        "entry [i, j] is log p_ij − log p_ji (not the other way round); write p_ij and "
        "p_ji with the softmax's definition and compare what differs",
        "here d_k = W.shape[-1] = 2 but D = X.shape[-1] = 4: scale by √d_k; X has a "
        "batch dimension, so transpose the last two axes (transpose(-2, -1))",
        "T = 1: the only pair is (0, 0), and log(p_00 / p_00) = 0",
        "scores in the thousands: the weights underflow to 0 and log(p / pᵀ) becomes "
        "nan or inf; write the ratio without the weights, from quantities "
        "torch.logsumexp computes safely",
    ]
    for i, (label, (T, D, dk), batch, mult) in enumerate(specs):
        g = seeded(720 + i)
        X = torch.randn(*batch, T, D, generator=g, dtype=torch.float64) * mult
        W = torch.randn(D, dk, generator=g, dtype=torch.float64)
        Q = X @ W
        s = Q @ Q.transpose(-2, -1) / math.sqrt(dk)  # (..., T, T), symmetric
        top = s.amax(-1, keepdim=True)
        log_z = (top + (s - top).exp().sum(-1, keepdim=True).log()).squeeze(-1)
        # log p_ij - log p_ji = (s_ij - log Z_i) - (s_ji - log Z_j), and s_ij = s_ji
        ref = log_z[..., None, :] - log_z[..., :, None]  # (..., T, T)
        cases.append(Case(label, (X, W), ref, hints[i]))
    return run_check("tied_log_ratio", fn, cases, forbid=FORBIDDEN["tied_log_ratio"])
