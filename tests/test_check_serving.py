"""Chapter 14 checks pass good answers, fail realistic wrong ones, report stubs."""

from __future__ import annotations

import pytest
from checkhelp import fails_with

import attnlab

pytestmark = pytest.mark.usefixtures("strict_checks")


def good_best_k(alpha, c, k_max=16):
    def speedup(k):
        tokens = sum(alpha**i for i in range(k + 1))  # 1 + alpha + ... + alpha^k
        return tokens / (1 + c * k)

    best = 0
    for k in range(1, k_max + 1):
        if speedup(k) > speedup(best):
            best = k
    return best


def test_best_draft_length():
    assert attnlab.check.best_draft_length(good_best_k)

    def from_one(alpha, c, k_max=16):  # never considers not drafting at all
        return max(range(1, k_max + 1), key=lambda k: good_speedup(alpha, c, k))

    fails_with(attnlab.check.best_draft_length, from_one, r"the answer is 0")

    def closed_form(alpha, c, k_max=16):  # 0/0 at alpha = 1
        def s(k):
            return (1 - alpha ** (k + 1)) / ((1 - alpha) * (1 + c * k))

        return max(range(k_max + 1), key=s)

    fails_with(attnlab.check.best_draft_length, closed_form, r"alpha = 1")

    def free_drafts(alpha, c, k_max=16):  # the draft's cost forgotten
        return max(range(k_max + 1), key=lambda k: good_speedup(alpha, 0.0, k))

    fails_with(attnlab.check.best_draft_length, free_drafts, r"1 \+ c k")

    def k_terms(alpha, c, k_max=16):  # the bonus token forgotten: k terms
        return max(
            range(k_max + 1),
            key=lambda k: sum(alpha**i for i in range(k)) / (1 + c * k),
        )

    fails_with(attnlab.check.best_draft_length, k_terms, r"alpha 0.8, c 0.05")


def good_speedup(alpha, c, k):
    return sum(alpha**i for i in range(k + 1)) / (1 + c * k)


def good_lookup(ids, k, n=2):
    ids = list(ids)
    tail = ids[len(ids) - n :]
    for start in range(len(ids) - n - 1, -1, -1):
        if ids[start : start + n] == tail:
            return ids[start + n : start + n + k]
    return []


def test_lookup_draft():
    assert attnlab.check.lookup_draft(good_lookup)

    def first_match(ids, k, n=2):  # the earliest occurrence, not the latest
        ids = list(ids)
        tail = ids[len(ids) - n :]
        for start in range(len(ids) - n):
            if ids[start : start + n] == tail:
                return ids[start + n : start + n + k]
        return []

    fails_with(attnlab.check.lookup_draft, first_match, r"latest earlier")

    def self_match(ids, k, n=2):  # the suffix counted as its own match
        ids = list(ids)
        tail = ids[len(ids) - n :]
        for start in range(len(ids) - n, -1, -1):
            if ids[start : start + n] == tail:
                return ids[start + n : start + n + k]
        return []

    fails_with(attnlab.check.lookup_draft, self_match, r"story|suffix")
    fails_with(  # n ignored: always the last 2
        attnlab.check.lookup_draft,
        lambda ids, k, n=2: good_lookup(ids, k, 2),
        r"n = 3",
    )


def test_stubs_are_reported_not_failed(capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*args, **kwargs):
        raise NotImplementedError

    assert not attnlab.check.best_draft_length(stub)
    assert not attnlab.check.lookup_draft(stub)
    assert "not implemented" in capsys.readouterr().out
