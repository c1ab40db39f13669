"""Checks for chapter 11 (is attention explanation?).

* :func:`integrated_gradients` — ``fn(f, embeddings, steps) -> (B, T)``: signed
  integrated gradients per token, from the all-zero baseline, midpoint rule.
* :func:`uniform_flip_rate` — ``fn(decode, h, weights, mask) -> float``: the fraction
  of examples whose decision changes when the attention is replaced by uniform weights
  over the real tokens.
* :func:`comprehensiveness` — ``fn(f, ids, mask, scores, k) -> (B,)``: how much the
  output drops when the k top-scored tokens are deleted.
"""

from __future__ import annotations

import torch

from ..check_core import Case, close, run_check, seeded

__all__ = [
    "integrated_gradients",
    "uniform_flip_rate",
    "comprehensiveness",
]

# check name -> the library calls an answer may not make (the grader reads this too)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    # gradient x input is the one-point version of what the exercise asks to build
    "integrated_gradients": ("attnlab.explain.gradient_importance",),
    # the answer is a few torch operations; the debate's tests would only hide them
    "uniform_flip_rate": (
        "attnlab.explain.permutation_test",
        "attnlab.explain.erasure_test",
    ),
    # deletion of tokens is what the exercise asks to write
    "comprehensiveness": (
        "attnlab.explain.leave_one_out",
        "attnlab.explain.erasure_test",
    ),
}


# ------------------------------------------------------------- integrated gradients
def _ig_reference(f, e, steps):
    """Midpoint rule, one alpha at a time (a loop, not the vectorised version)."""
    total = torch.zeros_like(e)
    for i in range(steps):
        a = (i + 0.5) / steps
        x = (a * e).detach().requires_grad_(True)
        (g,) = torch.autograd.grad(f(x).sum(), x)
        total += g
    return (e * total / steps).sum(-1)  # (B, T)


def _quadratic(u, c):
    def f(x):  # sum_t c_t <u, x_t>^2: IG_t = c_t <u, x_t>^2 exactly
        return ((x @ u) ** 2 * c).sum(-1)

    return f


def _coupled(W):
    def f(x):  # tokens interact: tanh of a pooled vector
        return torch.tanh((x @ W).sum(1)).sum(-1)

    return f


def integrated_gradients(fn):
    """Check ``fn(f, embeddings, steps) -> (B, T)`` against a loop over the path."""
    cases = []
    g = seeded(1100)
    e = torch.randn(2, 5, 3, generator=g, dtype=torch.float64)
    u = torch.randn(3, generator=g, dtype=torch.float64)
    c = torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0], dtype=torch.float64)
    quad = _quadratic(u, c)
    cases.append(
        Case(
            "quadratic model (exact answer c_t <u, x_t>^2)",
            (quad, e, 8),
            c * (e @ u) ** 2,
            "keep the sign (no abs), do not normalise, and average the "
            "gradient along the path at alpha = (i + 0.5) / steps (the midpoint "
            "rule, not alpha = i / steps, and not the gradient at x alone)",
        )
    )
    W = torch.randn(3, 4, generator=g, dtype=torch.float64)
    e2 = 2 * torch.randn(3, 6, 3, generator=g, dtype=torch.float64)
    for steps in (1, 16):
        cases.append(
            Case(
                f"tokens interact, {steps} steps",
                (_coupled(W), e2, steps),
                _ig_reference(_coupled(W), e2, steps),
                "midpoint rule: alpha = (i + 0.5) / steps",
            )
        )
    e3 = torch.randn(1, 1, 4, generator=g, dtype=torch.float64)
    one = _coupled(torch.randn(4, 2, generator=g, dtype=torch.float64))
    cases.append(
        Case(
            "one token",
            (one, e3, 4),
            _ig_reference(one, e3, 4),
            "a (1, 1, E) input gives a (1, 1) answer",
        )
    )

    def compare(got, expected):
        return close(got, expected, atol=1e-6, rtol=1e-5)

    return run_check(
        "integrated_gradients",
        fn,
        cases,
        compare=compare,
        forbid=FORBIDDEN["integrated_gradients"],
    )


# ------------------------------------------------------------------ uniform flip rate
def _linear(h, w):
    return (w * h).sum(-1)  # h (B, T): each item's vote


def _blind(h, w):
    return h.sum(-1)


def _uniform_flip_reference(decode, h, weights, mask):
    m = mask.to(weights.dtype)
    u = m / m.sum(1, keepdim=True)
    return float(((decode(h, weights) > 0) != (decode(h, u) > 0)).double().mean())


def uniform_flip_rate(fn):
    """Check ``fn(decode, h, weights, mask) -> float``."""
    mask = torch.ones(4, 3, dtype=torch.bool)
    h = torch.tensor(
        [[2.0, -1.0, -1.5], [1.0, 1.0, 1.0], [-3.0, 1.0, 1.0], [0.5, -2.0, 1.0]]
    )
    w = torch.tensor(
        [[0.9, 0.05, 0.05], [0.2, 0.3, 0.5], [0.1, 0.45, 0.45], [0.8, 0.1, 0.1]]
    )
    padded = torch.tensor([[True, True, False], [True, True, True]])
    h_pad = torch.tensor([[1.0, -0.8, -9.0], [1.0, -0.8, -9.0]])
    w_pad = torch.tensor([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])
    cases = [
        Case("votes, 4 examples", (_linear, h, w, mask),
             _uniform_flip_reference(_linear, h, w, mask),
             "return the fraction of examples whose decision changes (a float in "
             "[0, 1], not a count, not the fraction that stays) when the weights become "
             "1/n over the real tokens"),
        Case("a decoder that ignores the weights", (_blind, h, w, mask), 0.0,
             "nothing changes when the decoder does not read the weights"),
        Case("padding gets no uniform weight", (_linear, h_pad, w_pad, padded),
             _uniform_flip_reference(_linear, h_pad, w_pad, padded),
             "uniform over the real tokens only (mask True), not over all T"),
    ]  # fmt: skip
    return run_check(
        "uniform_flip_rate", fn, cases, forbid=FORBIDDEN["uniform_flip_rate"]
    )


# ------------------------------------------------------------------ comprehensiveness
def _sum_model(values):
    def f(ids, mask):
        return (values[ids] * mask).sum(1)  # each token adds its value

    return f


def _first_model(ids, mask):
    return ids[:, 0].double()  # reads position 0 only: deletion moves tokens up


def comprehensiveness(fn):
    """Check ``fn(f, ids, mask, scores, k) -> (B,)``: ``f(x) - f(x without the top k)``."""
    values = torch.tensor([0.0, 5.0, -1.0, 2.0, 0.5, 3.0], dtype=torch.float64)
    ids = torch.tensor([[1, 2, 3, 4], [4, 5, 0, 0], [3, 2, 5, 1]])
    mask = ids != 0
    scores = torch.tensor(
        [[0.1, 0.9, 0.5, 0.2], [0.3, 0.4, 0.9, 0.9], [0.7, 0.1, 0.2, 0.3]]
    )
    sm = _sum_model(values)
    cases = [
        Case("additive model, k = 1", (sm, ids, mask, scores, 1),
             torch.tensor([-1.0, 3.0, 2.0], dtype=torch.float64),
             "delete the k highest-scoring *real* tokens; padding never counts"),
        Case("additive model, k = 2", (sm, ids, mask, scores, 2),
             torch.tensor([1.0, 3.5, 7.0], dtype=torch.float64),
             "k = 2 removes two tokens, and a row with 2 real tokens keeps none"),
        Case("deletion closes up the sequence", (_first_model, ids, mask, scores, 1),
             torch.tensor([0.0, 0.0, 1.0], dtype=torch.float64),
             "delete (the rest moves left), do not replace the token"),
    ]  # fmt: skip
    return run_check(
        "comprehensiveness", fn, cases, forbid=FORBIDDEN["comprehensiveness"]
    )
