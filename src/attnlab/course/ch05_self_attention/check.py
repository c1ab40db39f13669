"""Checks for chapter 5 (self-attention).

* :func:`softmax_jacobian_norm` — ``fn(d_k, sigma, n, generator) -> float``: the mean
  Frobenius norm of the softmax Jacobian of scaled scores whose q and k entries have
  standard deviation ``sigma``.
* :func:`strict_causal_padding_weights` — attention weights where a query sees only
  strictly earlier, real keys.
* :func:`tied_log_normalisers` — the log-normalisers of tied-projection self-attention.
* :func:`tied_log_ratio` — ``log(p_ij / p_ji)`` for every pair of a tied-projection
  head, also where the weights themselves underflow (exercise 5.3).
* :func:`receptive_field` — ``fn(T, r, layers, causal) -> (T, T) bool``: which inputs
  an output can depend on after stacked self-attention restricted to ``r`` neighbours.
"""

from __future__ import annotations

import functools
import math

import torch

from ..check_core import Case, CheckResult, run_check, seeded
from ..check_diagnose import diagnosing

__all__ = [
    "softmax_jacobian_norm",
    "strict_causal_padding_weights",
    "tied_log_normalisers",
    "tied_log_ratio",
    "receptive_field",
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
    "receptive_field": (),  # building the band with attnlab.band_mask is fine
}


@functools.cache  # deterministic, and the d_k = 256 draws are large
def _reference_jacobian_norm(d_k, sigma, n, seed):
    generator = seeded(seed)
    q = sigma * torch.randn(n, 1, d_k, generator=generator, dtype=torch.float64)
    k = sigma * torch.randn(n, 16, d_k, generator=generator, dtype=torch.float64)
    s = (q @ k.transpose(-2, -1)).squeeze(1) / math.sqrt(d_k)  # (n, 16)
    p = torch.softmax(s, dim=-1)  # (n, 16)
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]  # (n, 16, 16)
    return J.flatten(1).norm(dim=-1).mean().item()


def softmax_jacobian_norm(fn) -> CheckResult:
    """Check ``fn(d_k, sigma, n, generator) -> float``: mean ‖∂softmax/∂s‖_F.

    Over ``n`` random rows of 16 scores ``s_j = q·k_j / √d_k``, the entries of q and k
    independent N(0, σ²). Random draws differ from the reference's, so answers within a
    tolerance pass, each several times the spread of 20 reference runs with n = 4000
    (0.4 %, 0.3 %, 0.05 %, 1.5 % and 2.6 % from the mean, case by case). The cases come
    in an order that lets the first failing one name the bug: d_k = 1, σ = 1 changes
    nothing but the Jacobian itself (the diagonal-only slip p(1 − p) is 6 % low there);
    d_k = 16, σ = 1 then needs the √d_k (9 % off without it); σ = 0.5 then needs σ on
    both q and k (2 % off with σ², 6 % with σ on one side only, 22 % without it).
    """
    jac = "J = diag(p) − p pᵀ is a 16 × 16 matrix per row (the off-diagonal −p_i p_j "
    jac += "included), p = softmax over the row's 16 keys (dim=-1); take each J's "
    jac += "Frobenius norm, then the mean over the n rows"
    specs = [  # (d_k, sigma, tolerance, hint)
        (1, 1.0, 0.03, f"d_k = 1 and σ = 1, so neither changes the scores: {jac}"),
        (
            16,
            1.0,
            0.03,
            "d_k = 16, σ = 1: divide the scores q·k by √d_k = 4 before the softmax",
        ),
        (
            16,
            0.5,
            0.015,
            "σ = 0.5: the entries of q and of k have standard deviation σ (variance "
            "σ²): multiply both standard-normal draws by σ",
        ),
        (64, 2.0, 0.06, "σ = 2, d_k = 64: scores q·k/√d_k with variance σ⁴ = 16"),
        (256, 3.0, 0.10, "σ = 3, d_k = 256: scores q·k/√d_k with variance σ⁴ = 81"),
    ]
    cases, tols = [], {}
    for d_k, sigma, tol, hint in specs:
        ref = _reference_jacobian_norm(d_k, sigma, 4000, 500 + d_k + int(10 * sigma))
        tols[ref] = tol
        cases.append(
            Case(
                f"d_k={d_k}, sigma={sigma}",
                (d_k, sigma, 4000, seeded(900 + d_k + int(10 * sigma))),
                ref,
                hint,
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


def _band(T: int, r: int, causal: bool) -> torch.Tensor:
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    near = (i - j).abs() <= r  # (T, T)
    return near & (j <= i) if causal else near


def _reach(T: int, r: int, layers: int, causal: bool) -> torch.Tensor:
    """After ``layers`` layers output i depends on input j iff a chain of ``layers``
    allowed (query, key) steps leads from i to j: a band ``r * layers`` wide."""
    reach = torch.eye(T, dtype=torch.bool)
    band = _band(T, r, causal).double()
    for _ in range(layers):
        reach = (band @ reach.double()) > 0  # (T, T) @ (T, T)
    return reach


def receptive_field(fn) -> CheckResult:
    """Check ``fn(T, r, layers, causal) -> (T, T)`` booleans: ``[i, j]`` is True when
    the output of token i after ``layers`` layers of self-attention restricted to
    ``|i - j| <= r`` (and ``j <= i`` when ``causal``) can depend on the input of token
    j. ``layers = 0`` is the identity."""
    specs = [
        ((8, 2, 1, False), "one layer: query i sees the keys j with |i − j| <= r"),
        ((8, 2, 1, True), "causal: also j <= i (the key at or before the query)"),
        ((12, 2, 3, False), ""),
        ((12, 2, 3, True), ""),
        ((6, 1, 0, True), "0 layers: each output is its own input, the identity"),
        ((1, 3, 2, False), "one token: it depends on itself only"),
        (
            (7, 0, 4, False),
            "r = 0: a token attends to itself only, however many layers",
        ),
        ((9, 20, 2, True), "r >= T: every earlier token is in reach"),
    ]
    cases = [
        Case(
            f"T={T}, r={r}, layers={L}, causal={c}", (T, r, L, c), _reach(T, r, L, c), h
        )
        for (T, r, L, c), h in specs
    ]

    def compare(got, expected):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return False
        return bool(torch.equal(got.detach().cpu() != 0, expected))

    fn, compare = diagnosing(fn, cases, _diagnose_reach, compare)
    return run_check(
        "receptive_field", fn, cases, compare, forbid=FORBIDDEN["receptive_field"]
    )


def _diagnose_reach(case: Case, got) -> str | None:
    T, r, layers, causal = case.args
    exp = case.expected
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return a ({T}, {T}) tensor of booleans, [i, j] = output i, input j"
    got = got.detach().cpu() != 0
    if layers != 1 and torch.equal(got, _band(T, r, causal)):
        return (
            f"that is one layer's mask; with {layers} layers, token i hears whatever "
            "its keys heard in the layer before"
        )
    if causal and torch.equal(got, _reach(T, r, layers, causal).T):
        return "transposed: in a causal layer query i attends keys j <= i, not j >= i"
    if causal and torch.equal(got, _reach(T, r, layers, False)):
        return "causal: a token must not depend on later tokens (j <= i)"
    if r > 0 and torch.equal(got, _reach(T, r - 1, layers, causal)):
        return "off by one: |i − j| <= r, so the r-th neighbour is included"
    if layers > 0 and torch.equal(got, _reach(T, r, layers - 1, causal)):
        return (
            f"one layer short: the reach grows by r with each of the {layers} layer(s)"
        )
    if layers > 0:
        others = (_band(T, r, causal) & ~torch.eye(T, dtype=torch.bool)).double()
        reach = torch.eye(T, dtype=torch.bool)
        for _ in range(layers):
            reach = (others @ reach.double()) > 0
        if torch.equal(got, reach):
            return "each query also attends to itself (the diagonal is allowed)"
    return None
