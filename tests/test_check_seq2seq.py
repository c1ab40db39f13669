"""Chapter 1 checks: pass the library's answer, fail wrong ones, wait for stubs."""

from __future__ import annotations

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed

pytestmark = pytest.mark.usefixtures("strict_checks")


def _stub(*args):
    # YOUR CODE HERE
    raise NotImplementedError


# ---------------------------------------------------------------- greedy_decode
def good_greedy(model, src, src_lengths, max_len):
    from attnlab.data import Vocab

    ann, summary, mask = model.encode(src, src_lengths)
    s = model.decoder.start(summary)
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
    return torch.stack(out, dim=1)


def never_stops(model, src, src_lengths, max_len):  # always max_len columns
    ids = good_greedy(model, src, src_lengths, max_len)
    pad = torch.zeros(ids.shape[0], max_len - ids.shape[1], dtype=ids.dtype)
    return torch.cat([ids, pad], dim=1)


def no_pad_after_eos(model, src, src_lengths, max_len):  # keeps writing after <eos>
    from attnlab.data import Vocab

    ann, summary, mask = model.encode(src, src_lengths)
    s = model.decoder.start(summary)
    y = torch.full((src.shape[0],), Vocab.bos_id)
    out, done = [], torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        logits, s, _ = model.decoder.step(y, s, ann, mask, summary)
        y = logits.argmax(-1)
        out.append(y)
        done = done | (y == Vocab.eos_id)
        if done.all():
            break
    return torch.stack(out, dim=1)


def returns_bos_too(model, src, src_lengths, max_len):  # keeps <bos> in the output
    from attnlab.data import Vocab

    ids = good_greedy(model, src, src_lengths, max_len)
    bos = torch.full((ids.shape[0], 1), Vocab.bos_id, dtype=ids.dtype)
    return torch.cat([bos, ids], dim=1)


def time_major(model, src, src_lengths, max_len):  # (T, B): stacked along dim 0
    return good_greedy(model, src, src_lengths, max_len).T


def _loop(model, src, src_lengths, max_len, slip):
    """The decoding loop with one slip a student makes (``slip`` names it)."""
    from attnlab.data import Vocab

    ann, summary, mask = model.encode(src, src_lengths)
    s = model.decoder.start(summary)
    if slip == "zero-start":  # s_0 = 0 instead of decoder.start(summary)
        s = torch.zeros_like(s)
    y = torch.full((src.shape[0],), Vocab.bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, s, _ = model.decoder.step(y, s, ann, mask, summary)
        y = logits.argmax(-1)
        if slip == "done-first":  # marks the row done before masking: <eos> -> <pad>
            done = done | (y == Vocab.eos_id)
            y = y.masked_fill(done, Vocab.pad_id)
        else:
            y = y.masked_fill(done, Vocab.pad_id)
            done = done | (y == Vocab.eos_id)
        out.append(y)
        if done.all():
            break
        if slip == "bos-fed":  # never feeds the prediction back
            y = torch.full_like(y, Vocab.bos_id)
    return torch.stack(out, dim=1)


@pytest.mark.parametrize(
    "slip, hint",
    [
        ("done-first", "a row's own <eos> is written"),
        ("bos-fed", "feed each step's prediction back"),
        ("zero-start", "start from s_0 = model.decoder.start\\(summary\\)"),
    ],
)
def test_greedy_names_the_three_loop_slips(slip, hint):
    """Each slip fails with a hint naming it, and the line shows no model repr."""
    with pytest.raises(CheckFailed, match=hint) as info:
        attnlab.check.greedy_decode(lambda m, s, n, T: _loop(m, s, n, T, slip))
    assert "Seq2Seq(" not in str(info.value) and "a Seq2Seq model" in str(info.value)


def test_greedy_passes_solution(capsys):
    assert attnlab.check.greedy_decode(good_greedy)
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (
            lambda m, s, n, T: m.greedy(s, n, T)[0],
            "called attnlab.decoding.greedy_decode",
        ),
        (
            lambda m, s, n, T: m.translate and m.greedy(s, n, T)[0][:, :T],
            "called attnlab.decoding.greedy_decode",
        ),
        (never_stops, "stop as soon as every row has written <eos>"),
        (no_pad_after_eos, "write <pad> in that row"),
        (returns_bos_too, "<bos> is the first input, not an output"),
        (time_major, "the ids are \\(T, B\\)"),
        (lambda m, s, n, T: torch.zeros(s.shape[0], T, dtype=torch.long), None),
    ],
    ids=[
        "model.greedy",
        "greedy-sliced",
        "never-stops",
        "no-pad",
        "bos",
        "T-B",
        "zeros",
    ],
)
def test_greedy_names_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint or "❌ greedy_decode"):
        attnlab.check.greedy_decode(wrong)


def test_greedy_cases_end_rows_at_different_steps():
    from attnlab.course.ch01_seq2seq.check import _greedy_case  # no public name

    ids = _greedy_case("x", "dot", "luong", 4, 0.5, [3, 4, 2, 4, 1, 3], 8).expected
    ended = (ids == 2).any(1)  # eos id 2
    assert ended.all() and (ids == 0).any(), ids  # some rows padded after <eos>


# ---------------------------------------------------------------- per_position_accuracy
def good_positions(pred, gold, pad_id):
    T = gold.shape[1]
    p = torch.full_like(gold, pad_id)
    n = min(T, pred.shape[1])
    p[:, :n] = pred[:, :n]
    return (p == gold).float().mean(0)


def whole_row(pred, gold, pad_id):  # exact match per row, not per position
    return (
        (pred[:, : gold.shape[1]] == gold).all(1).float().mean().expand(gold.shape[1])
    )


def counts(pred, gold, pad_id):  # how many rows, not which fraction
    return good_positions(pred, gold, pad_id) * gold.shape[0]


def per_row(pred, gold, pad_id):  # the mean over the wrong dimension
    T = gold.shape[1]
    p = torch.full_like(gold, pad_id)
    n = min(T, pred.shape[1])
    p[:, :n] = pred[:, :n]
    return (p == gold).float().mean(1)


def no_padding(pred, gold, pad_id):  # a short prediction breaks the comparison
    return (pred[:, : gold.shape[1]] == gold).float().mean(0)


def fills_minus_one(pred, gold, pad_id):  # ignores pad_id: a short row never matches
    T = gold.shape[1]
    p = torch.full_like(gold, -1)
    n = min(T, pred.shape[1])
    p[:, :n] = pred[:, :n]
    return (p == gold).float().mean(0)


def pad_zero(pred, gold, pad_id):  # pad_id hard-coded as 0
    return good_positions(pred, gold, 0)


def truncates(pred, gold, pad_id):  # scores only the prediction's own length (T',)
    n = min(gold.shape[1], pred.shape[1])
    return (pred[:, :n] == gold[:, :n]).float().mean(0)


def test_positions_pass(capsys):
    assert attnlab.check.per_position_accuracy(good_positions)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (whole_row, "score each position on its own"),
        (counts, "a fraction of the rows, not a count"),
        (per_row, "average over the rows \\(dim 0\\)"),
        (no_padding, "positions past the end of a prediction count as pad_id"),
        (lambda p, g, pad: torch.ones(g.shape[1]), "must depend on where"),
        (fills_minus_one, "count pad_id \\(the argument\\)"),
        (pad_zero, "use the pad_id argument, not a fixed 0"),
        (truncates, "score all T = 3 gold positions, not the prediction's 2"),
    ],
    ids=[
        "whole-row",
        "counts",
        "per-row",
        "no-padding",
        "constant",
        "fills-minus-one",
        "pad-zero",
        "truncates",
    ],
)
def test_positions_name_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.per_position_accuracy(wrong)


# ---------------------------------------------------------------- sorting_alignment
def good_sorting(src, lengths):
    B, S = src.shape
    real = torch.arange(S)[None] < lengths[:, None]
    order = src.float().masked_fill(~real, float("inf")).argsort(-1)
    out = torch.zeros(B, S, S)
    out[torch.arange(B)[:, None], torch.arange(S)[None].expand(B, S), order] = 1.0
    return out * real[:, :, None]


def sorts_padding_too(src, lengths):  # padding id 0 sorts first
    B, S = src.shape
    order = src.argsort(-1)
    out = torch.zeros(B, S, S)
    out[torch.arange(B)[:, None], torch.arange(S)[None].expand(B, S), order] = 1.0
    return out


def test_sorting_passes(capsys):
    assert attnlab.check.sorting_alignment(good_sorting)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (sorts_padding_too, "padding \\(id 0\\) is not a token"),
        (
            lambda src, n: attnlab.data.ReversalTask.alignment(n, src.shape[1]),
            "that is reversal's anti-diagonal",
        ),
        (
            lambda src, n: good_sorting(src, n).transpose(1, 2),
            "you returned the transpose",
        ),
        (lambda src, n: good_sorting(-src * (src > 0), n), "increasing order"),
    ],
    ids=["padding", "reversal", "transposed", "descending"],
)
def test_sorting_names_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.sorting_alignment(wrong)


@pytest.mark.parametrize(
    "name", ["greedy_decode", "per_position_accuracy", "sorting_alignment"]
)
def test_new_stubs_are_pending(name, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not getattr(attnlab.check, name)(_stub)
    assert "⏳" in capsys.readouterr().out
