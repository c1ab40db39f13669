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

from ...data import Vocab
from ...masking import padding_mask
from ...seq2seq import Seq2Seq, Seq2SeqConfig
from ..check_core import Case, CheckResult, run_check, seeded
from ..check_diagnose import diagnosing, is_constant, same

__all__ = [
    "greedy_decode",
    "per_position_accuracy",
    "sorting_alignment",
]

# check name -> the library functions its exercise asks the student to write instead
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "greedy_decode": (
        "attnlab.decoding.greedy_decode",  # what model.greedy and translate run
        "attnlab.decoding.beam_search",
        "attnlab.decoding.generate",
        "attnlab.train.greedy_ids",
    ),
    "per_position_accuracy": (),  # the library has no per-position accuracy
    "sorting_alignment": (),  # nor a sorting task
}


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
    g = seeded(seed)
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
    fn, compare = diagnosing(fn, cases, _diagnose_greedy)
    return run_check(
        "greedy_decode", fn, cases, compare=compare, forbid=FORBIDDEN["greedy_decode"]
    )


def _diagnose_greedy(case: Case, got) -> str | None:
    """Name the usual bug of a decoding loop from its wrong ids."""
    exp = case.expected  # (B, T) ids
    max_len = case.args[3]
    if not isinstance(got, torch.Tensor) or got.dim() != 2:
        return "return the ids as one (B, T) tensor: torch.stack(out, dim=1)"
    B, T = exp.shape
    if got.shape == (T, B) and torch.equal(got.T.long(), exp):
        return "the ids are (T, B): stack the steps along dim 1 to get (B, T)"
    starts_bos = bool((exp[:, 0] == Vocab.bos_id).all())
    if got.shape[1] >= 1 and bool((got[:, 0] == Vocab.bos_id).all()) and not starts_bos:
        return "<bos> is the first input, not an output: do not return it"
    if got.shape[0] != B:
        return f"one row per source sentence: expected {B} rows, got {got.shape[0]}"
    if got.shape[1] > T and torch.equal(got[:, :T].long(), exp):
        if got.shape[1] == max_len:
            return (
                "stop as soon as every row has written <eos>: you ran all "
                f"max_len={max_len} steps"
            )
        return "stop as soon as every row has written <eos>"
    if got.shape[1] < T and torch.equal(got.long(), exp[:, : got.shape[1]]):
        return (
            f"one step short: the loop may run up to max_len={max_len} steps and must "
            "stop only once every row has written <eos>"
        )
    if got.shape == exp.shape:
        wrong = got.long() != exp
        if (
            bool(wrong.any())
            and bool((exp[wrong] == Vocab.eos_id).all())
            and bool((got[wrong] == Vocab.pad_id).all())
        ):
            return (
                "a row's own <eos> is written: mark the row done after writing this "
                "step's token, and write <pad> only from the next step on"
            )
        if bool(wrong.any()) and bool((exp[wrong] == Vocab.pad_id).all()):
            return "after a row has written <eos>, write <pad> in that row"
    model, src, lengths, _ = case.args
    if same(got, _greedy_variant(model, src, lengths, max_len, feed_bos=True)):
        return (
            "feed each step's prediction back as the next input: you gave the "
            "decoder <bos> at every step"
        )
    if same(got, _greedy_variant(model, src, lengths, max_len, zero_start=True)):
        return (
            "start from s_0 = model.decoder.start(summary), not from zeros: the "
            "first state carries the encoder's summary"
        )
    return None


@torch.no_grad()
def _greedy_variant(model, src, lengths, max_len, feed_bos=False, zero_start=False):
    """The decoding loop with one of two usual slips: <bos> fed at every step, or a
    zero first state."""
    ann, summary, mask = model.encode(src, lengths)
    s = model.decoder.start(summary)
    s = torch.zeros_like(s) if zero_start else s
    y = torch.full((src.shape[0],), Vocab.bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, s, _ = model.decoder.step(y, s, ann, mask, summary)
        y = logits.argmax(-1).masked_fill(done, Vocab.pad_id)
        out.append(y)
        done = done | (y == Vocab.eos_id)
        if done.all():
            break
        y = torch.full_like(y, Vocab.bos_id) if feed_bos else y
    return torch.stack(out, dim=1)  # (B, T)


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
        (
            "gold rows padded, prediction short",
            [[5, 6, 7], [8, 2, 0]],
            [[5, 6, 7, 2], [8, 2, 0, 0]],
            "past the end of a short prediction count pad_id: right where the gold "
            "row is padded too",
        ),
        (
            "pad_id is 1",
            [[5, 6, 2], [7, 2, 1]],
            [[5, 6, 2, 1], [7, 2, 1, 1]],
            "use the pad_id argument, not a fixed id",
        ),
    ]:
        p, g = torch.tensor(pred), torch.tensor(gold)
        pad = 1 if label == "pad_id is 1" else 0
        expected = _per_position_reference(p, g, pad)
        cases.append(Case(label, (p, g, pad), expected, hint))
    fn, compare = diagnosing(fn, cases, _diagnose_positions)
    return run_check(
        "per_position_accuracy",
        fn,
        cases,
        compare=compare,
        forbid=FORBIDDEN["per_position_accuracy"],
    )


def _diagnose_positions(case: Case, got) -> str | None:
    pred, gold, pad_id = case.args
    exp = case.expected  # (T,)
    B, T = gold.shape
    if not isinstance(got, torch.Tensor):
        return "return a (T,) float tensor, one fraction per gold position"
    short = pred.shape[1]
    if short < T and got.shape == (short,):
        if same(got.double(), (pred == gold[:, :short]).double().mean(0)):
            return (
                f"score all T = {T} gold positions, not the prediction's {short}: "
                "past the end of a short prediction count pad_id"
            )
    if got.shape == (B,) and B != T:
        filled = torch.full_like(gold, pad_id)
        filled[:, : min(T, short)] = pred[:, :T]
        if same(got.double(), (filled == gold).double().mean(1)):
            return "average over the rows (dim 0): one number per position, shape (T,)"
        return f"one number per gold position: shape (T,) = ({T},), not ({B},)"
    if pad_id != 0 and same(got.double(), _per_position_reference(pred, gold, 0)):
        return "use the pad_id argument, not a fixed 0"
    if short < T and same(got.double(), _per_position_reference(pred, gold, -1)):
        return (
            "past the end of a short prediction count pad_id (the argument): where "
            "the gold row is padded too, that position is right"
        )
    if got.shape == exp.shape and same(got.double(), exp * B):
        return "a fraction of the rows, not a count: divide by the number of rows"
    n = min(T, pred.shape[1])
    whole = (pred[:, :n] == gold[:, :n]).all(1).double().mean()
    if got.shape == exp.shape and same(got.double(), whole.expand(T)):
        return (
            "score each position on its own: a row with one wrong token is still "
            "right at the other positions"
        )
    if is_constant(got, exp):
        return "the answer must depend on where the predictions are wrong"
    return None


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
        ("shuffled", [[7, 4, 5, 9]], [4], hint),
        ("already sorted", [[4, 5, 6]], [3], hint),
        ("reversed", [[6, 5, 4]], [3], "a sorted reversal is the anti-diagonal"),
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
    fn, compare = diagnosing(fn, cases, _diagnose_sorting)
    return run_check(
        "sorting_alignment",
        fn,
        cases,
        compare=compare,
        forbid=FORBIDDEN["sorting_alignment"],
    )


def _diagnose_sorting(case: Case, got) -> str | None:
    src, lengths = case.args
    exp = case.expected  # (B, S, S)
    if not isinstance(got, torch.Tensor) or got.shape != exp.shape:
        return f"return a (B, S, S) float tensor, here {tuple(exp.shape)}"
    g = got.detach().double()
    if same(g.transpose(-2, -1), exp):
        return (
            "rows are output steps (queries), columns source positions (keys): "
            "you returned the transpose"
        )
    real = padding_mask(lengths, src.shape[1])  # (B, S)
    outside = ~(real[:, :, None] & real[:, None, :])  # (B, S, S)
    if bool((g[outside] != 0).any()):
        return (
            "padding (id 0) is not a token: keep it out of the sort, and leave rows "
            "and columns at or past the length zero"
        )
    desc = _sorting_reference(-src.masked_fill(~real, 0), lengths)
    if same(g, desc):
        return "increasing order: row 0 points at the smallest id, not the largest"
    from ...data import ReversalTask

    if same(g, ReversalTask.alignment(lengths, src.shape[1]).double()):
        return (
            "that is reversal's anti-diagonal: sorting's rows depend on the ids, "
            "row i on the position of the i-th smallest"
        )
    return None
