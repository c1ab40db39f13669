"""Checks for chapter 14 (serving and long context).

* :func:`tokens_per_pass` — ``fn(alpha, k) -> float``: the expected number of tokens
  one target pass of speculative decoding yields when each of the ``k`` draft tokens
  is accepted with probability ``alpha``, independently.
* :func:`lookup_draft` — ``fn(ids, k, n=2) -> list[int]``: prompt-lookup drafting: the
  (up to) ``k`` tokens that followed the most recent earlier occurrence of the last
  ``n`` tokens of ``ids``.
* :func:`keep_low_norm` — eviction by key norm (``check_cache.py``, re-exported here).
"""

from __future__ import annotations

from ..check_core import Case, close, run_check
from .check_cache import FORBIDDEN as _CACHE_FORBIDDEN
from .check_cache import keep_low_norm

__all__ = ["tokens_per_pass", "lookup_draft", "keep_low_norm"]

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "tokens_per_pass": ("attnlab.speculative.speculative_generate",),
    "lookup_draft": (),
    **_CACHE_FORBIDDEN,
}


def _tokens_per_pass(alpha: float, k: int) -> float:
    return float(k + 1) if alpha == 1 else (1 - alpha ** (k + 1)) / (1 - alpha)


def tokens_per_pass(fn):
    """Check ``fn(alpha, k)`` against the geometric series ``sum_{i=0}^{k} alpha^i``."""
    specs = [
        ("alpha 0.8, k 4", (0.8, 4), "1 + alpha + ... + alpha^k: k + 1 terms (the bonus token counts)"),
        ("alpha 0.5, k 1", (0.5, 1), "one draft token: 1 + alpha"),
        ("alpha 0, k 5", (0.0, 5), "nothing accepted: still one token per pass (the target's own)"),
        ("alpha 1, k 4", (1.0, 4), "alpha = 1: every draft accepted, k + 1 tokens; the closed form is 0/0 there"),
        ("alpha 0.95, k 16", (0.95, 16), "(1 - alpha^(k+1)) / (1 - alpha)"),
    ]  # fmt: skip
    cases = [
        Case(label, args, _tokens_per_pass(*args), hint) for label, args, hint in specs
    ]
    return run_check(
        "tokens_per_pass",
        fn,
        cases,
        compare=lambda g, e: (
            not isinstance(g, bool) and close(float(g), e, atol=1e-9, rtol=1e-9)
        ),
        forbid=FORBIDDEN["tokens_per_pass"],
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
