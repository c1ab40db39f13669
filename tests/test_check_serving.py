"""Chapter 14 checks pass good answers, fail realistic wrong ones, report stubs."""

from __future__ import annotations

import pytest
from checkhelp import fails_with

import attnlab

pytestmark = pytest.mark.usefixtures("strict_checks")


def good_tokens(alpha, k):
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def test_tokens_per_pass():
    assert attnlab.check.tokens_per_pass(good_tokens)
    assert attnlab.check.tokens_per_pass(lambda a, k: sum(a**i for i in range(k + 1)))
    fails_with(  # the bonus token forgotten: k terms
        attnlab.check.tokens_per_pass,
        lambda a, k: float(k) if a == 1 else (1 - a**k) / (1 - a),
        r"k \+ 1 terms",
    )
    fails_with(  # the closed form everywhere: 0/0 at alpha = 1
        attnlab.check.tokens_per_pass,
        lambda a, k: (1 - a ** (k + 1)) / (1 - a),
        r"alpha 1",
    )
    fails_with(  # linear: 1 + k alpha (as if acceptances did not stop at a rejection)
        attnlab.check.tokens_per_pass,
        lambda a, k: 1 + k * a,
        r"alpha 0.8",
    )


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

    assert not attnlab.check.tokens_per_pass(stub)
    assert not attnlab.check.lookup_draft(stub)
    assert "not implemented" in capsys.readouterr().out
