"""Checks for chapter 1, "From RNN seq2seq to attention".

* :func:`greedy_decode` — ``fn(model, src, src_lengths, max_len) -> ids``: the greedy
  decoding loop, written with the decoder's one-step function
* :func:`per_position_accuracy` — ``fn(pred, gold, pad_id) -> (T,)``: where in the
  output a model goes wrong
* :func:`sorting_alignment` — ``fn(src, lengths) -> (B, S, S)``: the ideal attention
  matrix for a task the chapter does not train, sorting

Every expected value comes from the library (:meth:`attnlab.seq2seq.Seq2Seq.greedy`)
or from a few lines of reference code here.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..data import Vocab
from ..masking import padding_mask
from ..seq2seq import Seq2Seq, Seq2SeqConfig
from ._core import Case, CheckResult, run_check

__all__ = [
    "greedy_decode",
    "per_position_accuracy",
    "sorting_alignment",
]


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


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
