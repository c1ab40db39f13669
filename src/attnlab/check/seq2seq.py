"""Checks for chapter 1, "From RNN seq2seq to attention".

* :func:`context_vector` — ``fn(s, annotations, lengths, score) -> (c, weights)``: one
  attention step of the decoder, padding masked
* :func:`exact_match_rate` — ``fn(pred, gold, eos_id) -> float``: the metric of the
  accuracy-vs-length figure
* :func:`reversal_alignment` — ``fn(lengths, S) -> (B, S, S)``: the ideal attention
  matrix for the reversal task
* :func:`greedy_decode` — ``fn(model, src, src_lengths, max_len) -> ids``: the greedy
  decoding loop, written with the decoder's one-step function
* :func:`per_position_accuracy` — ``fn(pred, gold, pad_id) -> (T,)``: where in the
  output a model goes wrong
* :func:`sorting_alignment` — ``fn(src, lengths) -> (B, S, S)``: the ideal attention
  matrix for a task the chapter does not train, sorting

Every expected value comes from the library (:func:`attnlab.attend`,
:func:`attnlab.train.exact_match`, :meth:`attnlab.data.ReversalTask.alignment`,
:meth:`attnlab.seq2seq.Seq2Seq.greedy`) or from a few lines of reference code here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..attention import attend
from ..data import ReversalTask, Vocab
from ..masking import padding_mask
from ..scoring import AdditiveScore, BilinearScore, dot_score
from ..seq2seq import Seq2Seq, Seq2SeqConfig
from ..train import exact_match
from ._core import Case, CheckResult, run_check

__all__ = [
    "context_vector",
    "exact_match_rate",
    "reversal_alignment",
    "greedy_decode",
    "per_position_accuracy",
    "sorting_alignment",
]


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


def _small_model(attention, style, seed, eos_bias=0.0):
    """An untrained model; ``eos_bias`` makes ``<eos>`` likelier, so rows end early."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cfg = Seq2SeqConfig(9, 9, d_emb=4, d_hidden=4, attention=attention, style=style)
        model = Seq2Seq(cfg).eval()
        with torch.no_grad():
            model.decoder.out.bias[Vocab.eos_id] += eos_bias
    return model


def _greedy_case(label, attention, style, seed, eos_bias, lengths, max_len, hint=""):
    model = _small_model(attention, style, seed, eos_bias)
    g = _gen(seed)
    n = torch.tensor(lengths)
    src = torch.randint(4, 9, (len(lengths), max(lengths)), generator=g)
    src = src.masked_fill(~padding_mask(n, src.shape[1]), Vocab.pad_id)
    expected = model.greedy(src, n, max_len)[0]
    return Case(label, (model, src, n, max_len), expected, hint)


def greedy_decode(fn: Callable) -> CheckResult:
    """Check ``fn(model, src, src_lengths, max_len) -> ids (B, T)``.

    Greedy decoding with ``model.encode`` and ``model.decoder.start``/``.step``: start
    from ``<bos>``, feed back the most likely token, write ``<pad>`` in a row once it
    has written ``<eos>``, and stop when every row has (or after ``max_len`` steps).
    """
    stop = (
        "stop as soon as every row has written <eos>; after its <eos> a row gets <pad>"
    )
    cases = [
        _greedy_case("no attention", None, "luong", 0, 0.0, [3, 3], 4),
        _greedy_case("dot attention, padding", "dot", "luong", 1, 0.0, [4, 2, 1], 5),
        _greedy_case(
            "additive, Bahdanau placement",
            "additive",
            "bahdanau",
            2,
            0.0,
            [2, 4],
            3,
            hint="with attention, step(y, s, annotations, mask, summary) does it all",
        ),
        _greedy_case(
            "rows end at different steps",
            "dot",
            "luong",
            4,
            0.5,
            [3, 4, 2, 4, 1, 3],
            8,
            stop,
        ),
        _greedy_case("every row ends at once", None, "luong", 4, 50.0, [2, 3], 6, stop),
        _greedy_case("max_len 1", "dot", "luong", 5, 0.0, [3, 1], 1),
    ]
    return run_check("greedy_decode", fn, cases)


def _per_position_reference(pred, gold, pad_id):
    T = gold.shape[1]
    p = torch.full_like(gold, pad_id)
    n = min(T, pred.shape[1])
    p[:, :n] = pred[:, :n]
    return (p == gold).double().mean(0)  # (T,)


def per_position_accuracy(fn: Callable) -> CheckResult:
    """Check ``fn(pred (B, T'), gold (B, T), pad_id) -> (T,)`` floats.

    Entry ``t`` is the fraction of rows whose prediction at position ``t`` equals the
    gold token there; a prediction shorter than ``T`` counts as ``pad_id`` past its end.
    """
    cases = []
    for label, pred, gold, hint in [
        ("all right", [[5, 6, 2], [7, 8, 2]], [[5, 6, 2], [7, 8, 2]], ""),
        ("one slip", [[5, 6, 2], [7, 5, 2]], [[5, 6, 2], [7, 8, 2]], ""),
        (
            "prediction too short",
            [[5, 2], [7, 8]],
            [[5, 6, 2], [7, 8, 2]],
            "positions past the end of a prediction count as pad_id, so they are wrong",
        ),
        (
            "prediction too long",
            [[5, 6, 2, 9], [7, 8, 2, 0]],
            [[5, 6, 2], [7, 8, 2]],
            "only the T gold positions are scored",
        ),
        ("one row, one token", [[2]], [[2]], ""),
    ]:
        p, g = torch.tensor(pred), torch.tensor(gold)
        cases.append(Case(label, (p, g, 0), _per_position_reference(p, g, 0), hint))
    return run_check("per_position_accuracy", fn, cases)


def _sorting_reference(src, lengths):
    B, S = src.shape
    real = padding_mask(lengths, S)  # (B, S)
    keyed = src.double().masked_fill(~real, float("inf"))
    order = keyed.argsort(dim=-1)  # (B, S): source position of the i-th smallest
    out = torch.zeros(B, S, S)
    out.scatter_(2, order[:, :, None], 1.0)
    return out * real[:, :, None]  # rows past the length stay zero


def sorting_alignment(fn: Callable) -> CheckResult:
    """Check ``fn(src (B, S), lengths (B,)) -> (B, S, S)`` floats.

    The task: output the source tokens sorted by id. Output ``i`` must copy the source
    position that holds the ``i``-th smallest id; the ideal attention puts a 1 there.
    Ids within a row are distinct; rows and columns at or past the length stay zero.
    """
    hint = "row i is one-hot on the position of the i-th smallest id (argsort)"
    cases = []
    for label, src, n, h in [
        ("already sorted", [[4, 5, 6]], [3], hint),
        ("reversed", [[6, 5, 4]], [3], "a sorted reversal is the anti-diagonal"),
        ("shuffled", [[7, 4, 9, 5]], [4], hint),
        (
            "with padding",
            [[9, 4, 7, 5], [8, 6, 0, 0]],
            [4, 2],
            "padding (id 0) is not a token: keep it out of the sort, rows >= n zero",
        ),
        ("length 1", [[5, 0, 0], [9, 4, 6]], [1, 3], hint),
    ]:
        s, ln = torch.tensor(src), torch.tensor(n)
        cases.append(Case(label, (s, ln), _sorting_reference(s, ln), h))
    return run_check("sorting_alignment", fn, cases)
