"""Checks for chapter 1, "From RNN seq2seq to attention".

* :func:`context_vector` — ``fn(s, annotations, lengths, score) -> (c, weights)``: one
  attention step of the decoder, padding masked
* :func:`exact_match_rate` — ``fn(pred, gold, eos_id) -> float``: the metric of the
  accuracy-vs-length figure
* :func:`reversal_alignment` — ``fn(lengths, S) -> (B, S, S)``: the ideal attention
  matrix for the reversal task

Every expected value comes from the library (:func:`attnlab.attend`,
:func:`attnlab.train.exact_match`, :meth:`attnlab.data.ReversalTask.alignment`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import attend
from ..data import ReversalTask
from ..masking import padding_mask
from ..scoring import AdditiveScore, BilinearScore, dot_score
from ..train import exact_match
from ._core import Case, CheckResult, run_check

__all__ = ["context_vector", "exact_match_rate", "reversal_alignment"]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _context_reference(s, annotations, lengths, score):
    mask = padding_mask(lengths, annotations.shape[1])[:, None, :]  # (B, 1, S)
    c, w = attend(s[:, None, :], annotations, annotations, score=score, mask=mask)
    return c[:, 0], w[:, 0]  # (B, D), (B, S)


def _context_case(label, B, S, D, lengths, score, seed, scale=1.0, hint=""):
    g = _gen(seed)
    s = torch.randn(B, D, generator=g) * scale
    ann = torch.randn(B, S, D, generator=g) * scale
    n = torch.tensor(lengths)
    ann = ann * padding_mask(n, S)[..., None]  # zeros on padding, as the encoder gives
    with torch.no_grad():
        expected = _context_reference(s, ann, n, score)
    return Case(label, (s, ann, n, score), expected, hint)


def _scorers():
    with torch.random.fork_rng(devices=[]):  # leave the caller's random stream alone
        torch.manual_seed(0)
        additive = AdditiveScore(4, 4, 6)
        bilinear = BilinearScore(4, 4)
    for p in list(additive.parameters()) + list(bilinear.parameters()):
        p.requires_grad_(False)
    return additive, bilinear


def context_vector(fn: Callable) -> CheckResult:
    """Check ``fn(s, annotations, lengths, score) -> (c, weights)``.

    ``s (B, D)`` previous decoder states, ``annotations (B, S, D)``, ``lengths (B,)``
    source lengths, ``score`` a scorer ``(q (B, T, D), k (B, S, D)) -> (B, T, S)``.
    Returns the context ``c (B, D)`` and the weights ``(B, S)``, zero on padding.
    """
    additive, bilinear = _scorers()
    pad = "padding must get exactly zero weight: set its scores to -inf before softmax"
    cases = [
        _context_case("no padding, dot", 2, 3, 4, [3, 3], dot_score, 0),
        _context_case("padding, dot", 3, 5, 4, [5, 2, 1], dot_score, 1, hint=pad),
        _context_case("padding, additive", 3, 5, 4, [4, 5, 2], additive, 2, hint=pad),
        _context_case("padding, bilinear", 2, 4, 4, [1, 3], bilinear, 3, hint=pad),
        _context_case(
            "scores x 1000",
            2,
            4,
            4,
            [4, 2],
            dot_score,
            4,
            scale=40.0,
            hint="use a stable softmax (torch.softmax), not exp(x) / sum(exp(x))",
        ),
        _context_case(
            "length 1",
            2,
            3,
            4,
            [1, 1],
            additive,
            5,
            hint="one real token gets all the weight",
        ),
        _context_case(
            "empty source (length 0)",
            2,
            3,
            4,
            [0, 2],
            dot_score,
            6,
            hint="a fully masked row must give zero weights and a zero context, "
            "not NaN: e.g. torch.nan_to_num(weights) after the softmax",
        ),
    ]
    return run_check("context_vector", fn, cases)


def _em_case(label, pred, gold, eos_id=2, hint=""):
    p, g = torch.tensor(pred), torch.tensor(gold)
    expected = float(exact_match(p, g, eos_id).float().mean())
    return Case(label, (p, g, eos_id), expected, hint)


def exact_match_rate(fn: Callable) -> CheckResult:
    """Check ``fn(pred (B, T'), gold (B, T), eos_id) -> float`` (fraction exactly right).

    Each sequence counts up to and including its first ``eos_id``; whatever follows
    (padding, or garbage after a prediction ended) does not count.
    """
    cut = "compare each row only up to its first eos_id (included)"
    cases = [
        _em_case("all right", [[5, 6, 2], [7, 2, 0]], [[5, 6, 2], [7, 2, 0]]),
        _em_case("one wrong token", [[5, 6, 2], [7, 8, 2]], [[5, 6, 2], [7, 2, 0]]),
        _em_case(
            "junk after <eos>",
            [[5, 6, 2, 9, 9], [7, 2, 4, 4, 4]],
            [[5, 6, 2], [7, 2, 0]],
            hint=cut,
        ),
        _em_case(
            "stops too early",
            [[5, 2, 0], [7, 2, 0]],
            [[5, 6, 2], [7, 2, 0]],
            hint="a prefix of the answer is not the answer",
        ),
        _em_case(
            "never stops",
            [[5, 6, 3, 3], [7, 2, 0, 0]],
            [[5, 6, 2, 0], [7, 2, 0, 0]],
            hint="a prediction without <eos> is wrong",
        ),
        _em_case("length 1", [[2]], [[2]]),
        _em_case("other eos id", [[4, 9, 1]], [[4, 9]], eos_id=9, hint=cut),
    ]
    return run_check("exact_match_rate", fn, cases)


def reversal_alignment(fn: Callable) -> CheckResult:
    """Check ``fn(lengths (B,), S) -> (B, S, S)``: 1 where output i reads source n-1-i."""
    ref = ReversalTask.alignment
    cases = [
        Case("one string of 3", (torch.tensor([3]), 3), ref([3], 3)),
        Case(
            "with padding",
            (torch.tensor([4, 2]), 4),
            ref([4, 2], 4),
            hint="output i of a string of length n reads position n - 1 - i; rows and "
            "columns at or past n stay zero",
        ),
        Case("length 1", (torch.tensor([1, 3]), 3), ref([1, 3], 3)),
        Case("S larger than every length", (torch.tensor([2, 3]), 6), ref([2, 3], 6)),
    ]
    return run_check("reversal_alignment", fn, cases)
