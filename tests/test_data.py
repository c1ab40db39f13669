"""attnlab.data: vocabularies, padded batches, determinism, the two toy tasks."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

import attnlab
from attnlab.data import (
    DATE_SPLITS,
    DateTask,
    ReversalTask,
    Vocab,
    collate,
    date_split,
    make_task,
)


def test_vocab_specials_and_roundtrip():
    v = Vocab(["a", "b", "<pad>", "a"])
    assert v.itos[:4] == ["<pad>", "<bos>", "<eos>", "<unk>"]
    assert len(v) == 6 and (v.pad_id, v.bos_id, v.eos_id, v.unk_id) == (0, 1, 2, 3)
    ids = v.encode(["b", "a", "zzz"], bos=True, eos=True)
    assert ids == [1, 5, 4, 3, 2]
    assert v.decode(ids + [0, 0]) == ["b", "a", "<unk>"]
    assert v.decode(torch.tensor([4, 2, 5])) == ["a"]  # stops at <eos>
    assert v.decode([1, 4, 2], strip=False) == ["<bos>", "a", "<eos>"]
    with pytest.raises(TypeError, match="list of tokens"):
        v.encode("ab")


def test_batch_padding_and_framing():
    task = ReversalTask(lengths=(2, 6), seed=0)
    b = task.batch(16, seed=3)
    B, S = b.src.shape
    assert B == 16 and S == int(b.src_lengths.max())
    for i in range(B):
        n = int(b.src_lengths[i])
        assert (b.src[i, n:] == Vocab.pad_id).all() and (b.src[i, :n] > 3).all()
        assert b.tgt[i, 0] == Vocab.bos_id
        assert b.tgt[i, n + 1] == Vocab.eos_id  # reversal: same length
        assert (b.tgt[i, n + 2 :] == Vocab.pad_id).all()
        assert task.tgt_vocab.decode(b.tgt[i]) == b.src_tokens[i][::-1]
    assert torch.equal(b.tgt_in, b.tgt[:, :-1]) and torch.equal(b.tgt_out, b.tgt[:, 1:])
    assert torch.equal(b.src_mask, b.src != Vocab.pad_id)
    assert (b.tgt_lengths == b.src_lengths + 1).all()


def test_determinism_and_streams():
    t1, t2 = ReversalTask(seed=5), ReversalTask(seed=5)
    assert torch.equal(t1.batch(8).src, t2.batch(8).src)  # same own stream
    assert torch.equal(
        t1.batch(8, seed=1).src, ReversalTask(seed=9).batch(8, seed=1).src
    )
    a = [b.src for b, _ in zip(t1.stream(4, seed=2), range(3))]
    c = [b.src for b, _ in zip(t2.stream(4, seed=2), range(3))]
    assert all(torch.equal(x, y) for x, y in zip(a, c))
    assert not torch.equal(a[0], a[1]) or a[0].shape != a[1].shape
    buckets = [
        b for b, _ in zip(t1.stream(8, lengths=(3, 9), seed=0, bucket=True), range(5))
    ]
    for b in buckets:  # one length per batch: no padding at all
        assert (b.src_lengths == b.src.shape[1]).all()


def test_fixed_length_and_errors():
    task = ReversalTask(lengths=(1, 30))
    assert (task.batch(5, lengths=1).src_lengths == 1).all()
    with pytest.raises(ValueError, match="lengths"):
        task.batch(2, lengths=(5, 2))
    with pytest.raises(ValueError, match="lengths"):
        ReversalTask(lengths=0)
    with pytest.raises(ValueError, match="n_symbols"):
        ReversalTask(lengths=(3, 30), distinct=True)  # 30 > 26 distinct letters
    with pytest.raises(ValueError, match="unknown task"):
        make_task("sorting")
    with pytest.raises(ValueError, match="at least one"):
        collate([], task.src_vocab, task.tgt_vocab)


def test_distinct_reversal_has_no_repeats():
    task = ReversalTask(lengths=(20, 26), distinct=True)
    for src, tgt in task.pairs(20, seed=0):
        assert len(set(src)) == len(src) and tgt == src[::-1]


def test_reversal_alignment():
    A = ReversalTask.alignment([3, 1], 4)
    assert A.shape == (2, 4, 4)
    assert A[0, 0, 2] == A[0, 1, 1] == A[0, 2, 0] == 1 and A[0].sum() == 3
    assert A[1, 0, 0] == 1 and A[1].sum() == 1


@pytest.mark.parametrize(
    "text, iso",
    [
        ("22 November 2026", "2026-11-22"),
        ("Nov 3, 1999", "1999-11-03"),
        ("3.04.2001", "2001-04-03"),
        ("1 jan 1900", "1900-01-01"),
    ],
)
def test_date_parsing(text, iso):
    task = DateTask()
    b = task.encode(text)
    assert task.join(b.tgt_tokens[0]) == iso
    assert task.decode(b.tgt[0]) == iso


def test_date_samples_are_valid_and_mixed():
    task = DateTask(seed=0)
    pairs = task.pairs(300, seed=1)
    kinds = {("." in s) + 2 * ("," in s) for s, _ in pairs}
    assert kinds == {0, 1, 2}  # all three formats appear
    for src, tgt in pairs:
        assert tgt == task.target(src) and len(tgt) == 10
        y, m, d = "".join(tgt).split("-")
        assert 1 <= int(m) <= 12 and 1 <= int(d) <= 31 and 1900 <= int(y) <= 2099
    assert len(task.src_vocab) == 4 + 10 + 23 + 2  # "May" is its own short form
    assert len(task.tgt_vocab) == 4 + 11


def test_batch_to_device(device):
    b = attnlab.data.make_task("date").batch(3, seed=0, device=device)
    assert b.src.device.type == device.type and b.tgt.device.type == device.type


# ------------------------------------------------------------- held-out dates
_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
_CALENDAR = [
    (y, m, d)
    for y in range(1900, 2100)
    for m in range(1, 13)
    for d in range(1, _DAYS[m - 1] + 1)
]


def _iso(tgt_tokens):
    return "".join(tgt_tokens)


def test_date_splits_partition_the_calendar():
    counts = Counter(date_split(*ymd) for ymd in _CALENDAR)
    assert set(counts) == set(DATE_SPLITS)
    n = len(_CALENDAR)
    assert 0.78 < counts["train"] / n < 0.82
    assert 0.09 < counts["val"] / n < 0.11 and 0.09 < counts["test"] / n < 0.11
    # a fixed function of the date: the same on every machine and Python version
    assert date_split(1900, 1, 9) == "val" and date_split(1900, 1, 10) == "test"
    assert date_split(2026, 11, 22) == "train" and date_split(1999, 4, 3) == "val"


@pytest.mark.parametrize("split", DATE_SPLITS)
def test_date_task_samples_only_its_split(split):
    task = DateTask(split=split)
    for src, tgt in task.pairs(400, seed=3):
        assert task.split_of(src) == split and tgt == task.target(src)
    for b, _ in zip(task.stream(32, seed=0), range(4)):
        assert {task.split_of(s) for s in b.src_tokens} == {split}
    assert {task.split_of(s) for s in task.batch(64, seed=1).src_tokens} == {split}
    # all three formats still appear inside a split
    kinds = {("." in s) + 2 * ("," in s) for s, _ in task.pairs(200, seed=4)}
    assert kinds == {0, 1, 2}


def test_date_held_out_sets_are_disjoint_from_training():
    """Replay chapter 7's use: train stream, early-stopping set, test set."""
    dates = make_task("date")
    assert dates.split == "train"  # the default task only ever shows training dates
    val, test = dates.with_split("val"), dates.with_split("test")
    assert val.src_vocab.itos == dates.src_vocab.itos
    assert test.tgt_vocab.itos == dates.tgt_vocab.itos
    seen = {
        _iso(t)
        for b, _ in zip(dates.stream(128, seed=0), range(100))
        for t in b.tgt_tokens
    }
    val_dates = {_iso(t) for t in val.batch(200, seed=1234).tgt_tokens}
    test_dates = {_iso(t) for t in test.batch(1000, seed=99).tgt_tokens}
    assert not seen & val_dates and not seen & test_dates and not val_dates & test_dates
    # the check can fail: without splits (the old sampler) the same replay overlaps
    everything = DateTask(split=None)
    old_seen = {
        _iso(t)
        for b, _ in zip(everything.stream(128, seed=0), range(100))
        for t in b.tgt_tokens
    }
    old_test = {_iso(t) for t in everything.batch(1000, seed=99).tgt_tokens}
    assert len(old_seen & old_test) > 10


def test_date_split_errors():
    with pytest.raises(ValueError, match="split"):
        DateTask(split="validation")
    with pytest.raises(ValueError, match="split"):
        make_task("date", split="dev")
    assert DateTask(split=None).with_split("test").split == "test"


def test_recall_batch_splits_are_disjoint_and_match_the_sweep():
    """attnlab.data.recall_batch: parity splits; the sweep script uses it."""
    gen = torch.Generator().manual_seed(0)
    keys, vals, query, answer = attnlab.data.recall_batch(300, 8, gen, "train")
    assert keys.shape == vals.shape == (300, 8) and query.shape == answer.shape == (
        300,
    )
    assert (vals.sum(-1) % 2 == 0).all()
    assert (keys.sort(-1).values.diff(dim=-1) > 0).all()  # distinct keys
    rows = (keys == query[:, None]).float().argmax(-1)
    assert (vals[torch.arange(300), rows] == answer).all()  # the answer is stored
    _, vals, _, _ = attnlab.data.recall_batch(300, 8, gen, "test")
    assert (vals.sum(-1) % 2 == 1).all()
    with pytest.raises(ValueError, match="split"):
        attnlab.data.recall_batch(4, 8, gen, "val")
    with pytest.raises(ValueError, match="pairs"):
        attnlab.data.recall_batch(4, 1, gen, "train")
