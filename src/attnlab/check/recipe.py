"""Checks for chapter 2, "The attention recipe".

* :func:`additive_score` — ``fn(q, k, W1, W2, v) -> scores`` (Bahdanau's score)
* :func:`attend_with_mask` — ``fn(q, k, v, mask) -> (out, weights)`` (dot + softmax)
* :func:`winning_key` — ``fn(angle, keys) -> int``: the key a very long query picks

Every expected value comes from the library (:mod:`attnlab.scoring`,
:func:`attnlab.attend`), never from a second hand-written copy.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import torch

from ..attention import attend
from ..scoring import AdditiveScore
from ..toys import RECIPE_KEYS
from ._core import Case, CheckResult, run_check

__all__ = ["additive_score", "attend_with_mask", "winning_key"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _additive_reference(q, k, W1, W2, v):
    """The library's AdditiveScore with the given weights copied in."""
    d_hidden, d_k = W1.shape
    scorer = AdditiveScore(W2.shape[1], d_k, d_hidden).to(q.dtype)
    with torch.no_grad():
        scorer.W1.weight.copy_(W1)
        scorer.W2.weight.copy_(W2)
        scorer.v.weight.copy_(v[None])
        return scorer(q, k)


def _additive_case(label, q_shape, k_shape, d_hidden, seed, scale=1.0, hint=""):
    g = _gen(seed)
    q = torch.randn(q_shape, generator=g) * scale
    k = torch.randn(k_shape, generator=g) * scale
    W1 = torch.randn(d_hidden, k_shape[-1], generator=g) / math.sqrt(k_shape[-1])
    W2 = torch.randn(d_hidden, q_shape[-1], generator=g) / math.sqrt(q_shape[-1])
    v = torch.randn(d_hidden, generator=g)
    args = (q, k, W1, W2, v)
    return Case(label, args, _additive_reference(*args), hint)


def additive_score(fn: Callable) -> CheckResult:
    """Check ``fn(q, k, W1, W2, v)`` computes ``vᵀ tanh(W1 k_j + W2 q_t)``.

    Shapes: ``q (..., T, Dq)``, ``k (..., S, Dk)``, ``W1 (Dh, Dk)``, ``W2 (Dh, Dq)``,
    ``v (Dh,)`` -> scores ``(..., T, S)``.
    """
    pair = "score[t, j] pairs query t with key j: broadcast (T, 1, Dh) + (1, S, Dh)"
    cases = [
        _additive_case("one query, 4 keys", (1, 3), (4, 3), 5, 0, hint=pair),
        _additive_case(
            "Dq != Dk",
            (2, 3),
            (4, 6),
            5,
            1,
            hint="W1 acts on the keys (Dh, Dk), W2 on the queries (Dh, Dq)",
        ),
        _additive_case("3 queries, 5 keys", (3, 4), (5, 4), 6, 2, hint=pair),
        _additive_case(
            "batched (B=2)",
            (2, 3, 4),
            (2, 5, 4),
            3,
            3,
            hint="keep the leading batch dimensions: use k.unsqueeze(-3), "
            "q.unsqueeze(-2), not fixed dims",
        ),
        _additive_case("length 1 (T = S = 1)", (1, 2), (1, 2), 3, 4),
        _additive_case(
            "inputs x 1000",
            (2, 3),
            (3, 3),
            4,
            5,
            scale=1000.0,
            hint="tanh saturates at ±1: scores stay within ±‖v‖₁",
        ),
    ]
    return run_check("additive_score", fn, cases)


def _attend_case(label, B, T, S, D, mask, seed, scale=1.0, hint=""):
    g = _gen(seed)
    q = torch.randn(B, T, D, generator=g) * scale
    k = torch.randn(B, S, D, generator=g)
    v = torch.randn(B, S, D + 1, generator=g)
    return Case(label, (q, k, v, mask), attend(q, k, v, mask=mask), hint)


def attend_with_mask(fn: Callable) -> CheckResult:
    """Check ``fn(q, k, v, mask)`` returns ``(out, weights)`` of dot-product attention.

    ``q (B, T, D)``, ``k (B, S, D)``, ``v (B, S, Dv)``, boolean ``mask`` broadcastable
    to ``(B, T, S)`` (``True`` = may attend) -> ``out (B, T, Dv)``, ``weights (B, T, S)``.
    A query with every key masked gets zero weights and a zero output.
    """
    causal = torch.ones(4, 4, dtype=torch.bool).tril()
    full = torch.ones(3, 5, dtype=torch.bool)
    padding = torch.tensor([[True] * 5, [True, True, False, False, False]])[:, None]
    dead_row = torch.ones(2, 3, 4, dtype=torch.bool)
    dead_row[0, 1] = False
    nan_hint = (
        "a fully masked row must give zero weights, not NaN: softmax of all -inf is "
        "0/0; replace the NaN (or divide by max(sum, tiny))"
    )
    cases = [
        _attend_case(
            "nothing masked",
            2,
            3,
            5,
            4,
            full,
            0,
            hint="weights = softmax(q kᵀ) over the keys (last dim), out = weights @ v",
        ),
        _attend_case(
            "causal mask",
            1,
            4,
            4,
            3,
            causal,
            1,
            hint="True means 'may attend': blocked scores become -inf before softmax",
        ),
        _attend_case(
            "padding mask (B, 1, S)",
            2,
            3,
            5,
            4,
            padding,
            2,
            hint="the mask broadcasts over the queries",
        ),
        _attend_case("one query fully masked", 2, 3, 4, 2, dead_row, 3, hint=nan_hint),
        _attend_case(
            "scores x 1000",
            1,
            2,
            4,
            3,
            torch.ones(2, 4, dtype=torch.bool),
            4,
            scale=1000.0,
            hint="subtract the row max before exp (or use torch.softmax)",
        ),
        _attend_case("length 1 (T = S = 1)", 1, 1, 1, 2, torch.ones(1, 1).bool(), 5),
    ]
    return run_check("attend_with_mask", fn, cases)


# The keys of the chapter's widget (one copy, in attnlab.toys).
WIDGET_KEYS = RECIPE_KEYS


def _winner_reference(angle: float, keys: torch.Tensor, length: float = 1e4) -> int:
    """Index of the key with the largest dot-product weight for a very long query."""
    rad = math.radians(angle)
    q = length * torch.tensor([[math.cos(rad), math.sin(rad)]], dtype=torch.float64)
    k = keys.to(torch.float64)
    _, weights = attend(q, k, k)  # (1, S)
    return int(weights[0].argmax())


def _same_index(got, expected) -> bool:
    """An index: a Python/NumPy integer or a one-element integer tensor (not bool)."""
    if isinstance(got, torch.Tensor):
        if got.numel() != 1 or got.is_floating_point() or got.dtype == torch.bool:
            return False
        got = got.item()
    if isinstance(got, bool) or not isinstance(got, numbers.Integral):
        return False
    return int(got) == expected


def winning_key(fn: Callable) -> CheckResult:
    """Check ``fn(angle, keys) -> int``: which key wins as the query grows long.

    The query is ``length · (cos angle, sin angle)`` (angle in degrees), ``keys (S, 2)``;
    the answer is the index of the key that takes (almost) all the softmax weight of
    dot-product scoring when ``length`` is very large.
    """
    hint = (
        "a long query picks the key with the largest projection k_j·q/‖q‖, "
        "not the key closest in angle"
    )
    near_east = torch.tensor([[1.0, 0.0], [3.0, 3.0]])
    cases = [
        Case(
            f"widget keys, angle {a}°",
            (a, WIDGET_KEYS),
            _winner_reference(a, WIDGET_KEYS),
            hint,
        )
        for a in (10.0, 90.0, 180.0, -80.0, 100.0)
    ]
    cases += [
        Case(
            "a long key 40° away",
            (5.0, near_east),
            _winner_reference(5.0, near_east),
            hint,
        ),
        Case("one key (S = 1)", (123.0, torch.tensor([[0.0, -1.0]])), 0),
        Case(
            "keys as float64",
            (200.0, WIDGET_KEYS.double()),
            _winner_reference(200.0, WIDGET_KEYS),
            hint,
        ),
    ]
    return run_check("winning_key", fn, cases, compare=_same_index)
