"""Hints that name the bug: a check that recognises the wrong answers students write.

:func:`run_diagnosed` is :func:`attnlab.course.check_core.run_check` plus a ``diagnose``
function. When a case fails, ``diagnose(case, got)`` looks at the wrong answer (is it
the expected one transposed? the sum over the wrong dimension? a constant?) and returns
a hint naming that bug, or None to keep the case's own hint. The chapters' check
modules list, per exercise, the bugs students really write; their tests feed each one
and assert that the hint names it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from .check_core import Case, CheckResult, close, run_check

__all__ = ["diagnosing", "run_diagnosed", "same", "is_constant"]


class _Tracked:
    """Calls ``fn`` and remembers the arguments of the last call.

    It carries ``fn``'s ``__globals__``, so the forbidden-call tripwires of
    :func:`run_check` still patch the student's own namespace.
    """

    def __init__(self, fn: Callable):
        self.fn = fn
        self.last: tuple | None = None
        self.__globals__ = getattr(fn, "__globals__", {})

    def __call__(self, *args, **kwargs):
        self.last = args
        return self.fn(*args, **kwargs)


def diagnosing(
    fn: Callable,
    cases: Sequence[Case],
    diagnose: Callable[[Case, Any], str | None],
    compare: Callable[[Any, Any], bool] = close,
) -> tuple[Callable, Callable[[Any, Any], bool]]:
    """``(fn, compare)`` to hand to :func:`run_check`: when a case fails,
    ``diagnose(case, got)`` may replace its hint with one that names the bug."""
    if not callable(fn):
        return fn, compare
    tracked = _Tracked(fn)

    def compare_and_diagnose(got, expected):
        ok = compare(got, expected)
        if not ok and tracked.last is not None:
            case = next(
                (
                    c
                    for c in cases
                    if len(c.args) == len(tracked.last)
                    and all(a is b for a, b in zip(c.args, tracked.last))
                ),
                None,
            )
            if case is not None:
                try:
                    hint = diagnose(case, got)
                except Exception:  # a diagnosis must never break the check
                    hint = None
                if hint:
                    case.hint = hint
        return ok

    return tracked, compare_and_diagnose


def run_diagnosed(
    name: str,
    fn: Callable,
    cases: Sequence[Case],
    diagnose: Callable[[Case, Any], str | None],
    compare: Callable[[Any, Any], bool] = close,
    forbid: Sequence[str] = (),
) -> CheckResult:
    """:func:`run_check`, with ``diagnose(case, got)`` choosing the hint of a failure."""
    fn, compare = diagnosing(fn, cases, diagnose, compare)
    return run_check(name, fn, cases, compare=compare, forbid=forbid)


def same(got: Any, candidate: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Does ``got`` equal ``candidate`` (a known wrong answer)? Never raises."""
    try:
        return close(got, candidate, atol=atol, rtol=rtol)
    except Exception:
        return False


def is_constant(got: Any, expected: Any) -> bool:
    """A tensor answer that does not depend on its input: every entry equal, while the
    expected answer varies."""
    if not (isinstance(got, torch.Tensor) and isinstance(expected, torch.Tensor)):
        return False
    if got.numel() < 2 or expected.numel() < 2:
        return False
    g, e = got.detach().double().flatten(), expected.detach().double().flatten()
    return bool((g == g[0]).all()) and not bool((e == e[0]).all())
