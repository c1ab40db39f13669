"""Rationale tasks (attnlab.data.rationale_task): labels follow their rules, the
rationale marks the deciding tokens, splits are disjoint and deterministic."""

from __future__ import annotations

import pytest
import torch

import attnlab
from attnlab.data import (
    FOCUS,
    NEGATIVE,
    POSITIVE,
    RationaleData,
    rationale_split,
    rationale_task,
)


@pytest.mark.parametrize("name", ["focus", "count"])
def test_deterministic_and_same_object_from_attnlab_data(name):
    a = rationale_task(name, "train", n=50, seed=3)
    b = attnlab.data.rationale_task(name, "train", n=50, seed=3)
    assert torch.equal(a.ids, b.ids) and torch.equal(a.rationale, b.rationale)
    c = rationale_task(name, "train", n=50, seed=4)
    assert not torch.equal(a.ids[:, :5], c.ids[:, :5])


@pytest.mark.parametrize("name", ["focus", "count"])
def test_splits_are_disjoint_by_construction(name):
    seen = {}
    for split in ("train", "val", "test"):
        for seed in (0, 1):
            d = rationale_task(name, split, n=300, seed=seed)
            for i in range(len(d)):
                text = d.text(i)
                assert rationale_split(d.tokens(i)) == split
                assert seen.setdefault(text, split) == split


def test_focus_labels_and_rationale_follow_the_rule():
    d = rationale_task("focus", "test", n=200)
    for i in range(len(d)):
        toks = d.tokens(i)
        p = toks.index(FOCUS)
        assert (toks[p + 1] in POSITIVE) == bool(d.labels[i])
        assert d.rationale[i].nonzero().flatten().tolist() == [p, p + 1]
        assert 12 <= len(toks) <= 30


def test_count_labels_and_rationale_follow_the_rule():
    d = rationale_task("count", "val", n=200, lengths=(6, 9))
    for i in range(len(d)):
        toks = d.tokens(i)
        pos = sum(t in POSITIVE for t in toks)
        neg = sum(t in NEGATIVE for t in toks)
        assert pos != neg and (pos > neg) == bool(d.labels[i])
        where = [j for j, t in enumerate(toks) if t in POSITIVE or t in NEGATIVE]
        assert d.rationale[i].nonzero().flatten().tolist() == where
        assert 6 <= len(toks) <= 9
    assert not (d.rationale & ~d.mask).any()


def test_indexing_keeps_rows_and_drops_all_padding_columns():
    d = rationale_task("focus", "train", n=30, lengths=(5, 20))
    short = torch.argsort(d.mask.sum(1))[:3]
    sub = d[short]
    assert isinstance(sub, RationaleData) and len(sub) == 3
    assert sub.ids.shape[1] == int(d.mask[short].sum(1).max())
    assert sub.text(0) == d.text(int(short[0]))
    assert len(d[0]) == 1


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"name": "sentiment"}, "unknown rationale task"),
        ({"name": "focus", "split": "dev"}, "split"),
        ({"name": "focus", "lengths": (3, 8)}, "lengths >= 5"),
        ({"name": "focus", "lengths": (9, 8)}, "lengths"),
        ({"name": "count", "n": 0}, "n must be"),
    ],
)
def test_bad_arguments_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rationale_task(**kwargs)
