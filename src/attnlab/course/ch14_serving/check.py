"""Checks for chapter 14 (serving and long context).

* :func:`best_draft_length` — ``fn(alpha, c, k_max=16) -> int``: the number of draft
  tokens per round, ``0 .. k_max``, that maximises the expected speed-up of speculative
  decoding over plain decoding when each draft token is kept with probability
  ``alpha``, independently, and a draft step costs ``c`` target steps (``0``: do not
  draft).
* :func:`lookup_draft` — ``fn(ids, k, n=2) -> list[int]``: prompt-lookup drafting: the
  (up to) ``k`` tokens that followed the most recent earlier occurrence of the last
  ``n`` tokens of ``ids``.
* :func:`keep_low_norm` — eviction by key norm (``check_cache.py``, re-exported here).
"""

from __future__ import annotations

import numbers

from ..check_core import Case, run_check
from .check_cache import FORBIDDEN as _CACHE_FORBIDDEN
from .check_cache import keep_low_norm

__all__ = ["best_draft_length", "lookup_draft", "keep_low_norm"]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "best_draft_length": ("attnlab.speculative.speculative_generate",),
    "lookup_draft": (),
    **_CACHE_FORBIDDEN,
}


def _speedup(alpha: float, c: float, k: int) -> float:
    tokens = float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)
    return tokens / (1 + c * k)


def _best_k(alpha: float, c: float, k_max: int = 16) -> int:
    return max(range(k_max + 1), key=lambda k: (_speedup(alpha, c, k), -k))


def best_draft_length(fn):
    """Check ``fn(alpha, c, k_max=16)`` against a search over ``k = 0 .. k_max`` of
    ``(1 - alpha^(k+1)) / ((1 - alpha)(1 + c k))``."""
    specs: list[tuple[str, tuple, dict, str]] = [
        ("alpha 0.8, c 0.05", (0.8, 0.05), {}, "speed-up(k) = tokens per pass / (1 + c k), tokens per pass = 1 + alpha + ... + alpha^k (k + 1 terms)"),
        ("alpha 0.8, c 0.3", (0.8, 0.3), {}, "a dearer draft step: weigh each extra draft token against its cost c"),
        ("alpha 0.5, c 0.1", (0.5, 0.1), {}, "search every k from 0 to k_max and keep the best"),
        ("alpha 0.6, c 1", (0.6, 1.0), {}, "when no k beats plain decoding (speed-up 1 at k = 0), the answer is 0"),
        ("alpha 0, c 0.01", (0.0, 0.01), {}, "nothing is ever kept: drafting only costs, k = 0"),
        ("alpha 1, c 0.1, k_max 10", (1.0, 0.1), {"k_max": 10}, "alpha = 1: every draft kept, k + 1 tokens per pass; the closed form is 0/0 there"),
        ("alpha 0.9, c 0.02, k_max 12", (0.9, 0.02), {"k_max": 12}, "search k = 0 .. k_max only: the best may lie at k_max"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _best_k(*args, **kw), hint, kwargs=kw)
        for label, args, kw, hint in specs
    ]
    return run_check(
        "best_draft_length",
        fn,
        cases,
        compare=lambda g, e: (
            isinstance(g, numbers.Integral) and not isinstance(g, bool) and g == e
        ),
        forbid=FORBIDDEN["best_draft_length"],
    )


def _lookup(ids: list[int], k: int, n: int = 2) -> list[int]:
    ids = list(ids)
    T = len(ids)
    if T < n + 1:
        return []
    tail = ids[T - n :]
    for start in range(T - n - 1, -1, -1):  # most recent earlier match first
        if ids[start : start + n] == tail:
            return ids[start + n : start + n + k]
    return []


def lookup_draft(fn):
    """Check ``fn(ids, k, n=2)`` on short id lists (names copied in a story)."""
    from ...data.stories import encode

    text = "ana and bo . ana gave bo a cup . bo saw an"
    story = encode(text)
    specs: list[tuple[str, tuple, dict, str]] = [
        ("a story, last 2 ids 'an'", (story, 4), {}, "find the latest earlier 'an' and copy what followed"),
        ("n = 3", ([1, 2, 3, 9, 5, 2, 3, 8, 1, 2, 3], 2), {"n": 3}, "match the last n ids, not 2"),
        ("most recent match wins", ([1, 2, 7, 1, 2, 8, 9, 1, 2], 2), {}, "several earlier matches: take the most recent"),
        ("no earlier match", ([1, 2, 3, 4], 3), {}, "no earlier occurrence: an empty draft"),
        ("match near the end", ([5, 6, 9, 5, 6], 4), {}, "fewer than k tokens follow: return what there is"),
        ("overlapping repeat", ([3, 3, 3, 3], 2), {}, "the suffix itself is no match: start before position T - n"),
        ("too short", ([4, 4], 3), {}, "T <= n: nothing to look up"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _lookup(*args, **kw), hint, kwargs=kw)
        for label, args, kw, hint in specs
    ]
    return run_check(
        "lookup_draft",
        fn,
        cases,
        compare=lambda g, e: isinstance(g, (list, tuple)) and [int(x) for x in g] == e,
        forbid=FORBIDDEN["lookup_draft"],
    )
