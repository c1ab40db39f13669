"""Every published check rejects the two cheapest non-answers: an all-True boolean
tensor (``close()`` once compared any bool answer as a mask) and a constant.

Each check runs its own cases; the stand-in answer is built per case from the
expected value's shape (a tensor of that shape, or a tuple of them), so only the
comparison decides. A positive control hands back the expected values themselves and
must pass, so the harness is known to reach every case.
"""

from __future__ import annotations

import importlib
import inspect

import pytest
import torch

import attnlab.check as checks
from attnlab.course import check_core


def _names() -> list[str]:
    out = set()
    for module in checks.MODULES.values():
        out |= set(getattr(importlib.import_module(module), "FORBIDDEN", {}))
    return sorted(out)


def _fake(expected, kind: str):
    if isinstance(expected, torch.Tensor):
        if kind == "bool":
            return torch.ones(expected.shape, dtype=torch.bool)
        if kind == "const":
            return torch.full(expected.shape, 0.5, dtype=torch.float64)
        return expected.clone()
    if isinstance(expected, (tuple, list)):
        return type(expected)(_fake(e, kind) for e in expected)
    if kind == "bool":
        return True
    if kind == "const":
        return 0.5 if not isinstance(expected, float) or expected != 0.5 else 0.25
    return expected


def _run(name: str, kind: str, monkeypatch) -> tuple[bool, int]:
    fn = getattr(checks, name)
    space = inspect.unwrap(fn).__globals__  # the check's module, as it runs
    real = space["run_check"]
    calls = [0]

    def run_check(check, answer, cases, *args, **kwargs):
        by_arg = {}
        for case in cases:
            by_arg.setdefault(id(case.args[0]) if case.args else None, case)

        def stand_in(*a, **k):
            calls[0] += 1
            case = by_arg.get(id(a[0]) if a else None, cases[0])
            return _fake(case.expected, kind)

        return real(check, stand_in, cases, *args, **kwargs)

    with monkeypatch.context() as mp:  # undone before the next kind
        mp.setitem(space, "run_check", run_check)
        mp.setenv("ATTNLAB_STRICT", "0")
        return bool(fn(lambda *a, **k: None)), calls[0]


@pytest.mark.parametrize("name", _names())
def test_every_check_rejects_an_all_true_bool_tensor_and_a_constant(name, monkeypatch):
    for kind in ("bool", "const"):
        ok, calls = _run(name, kind, monkeypatch)
        assert calls >= 1, f"{name}: the stand-in answer was never called"
        assert not ok, f"{name} accepted a {kind} answer"


def test_the_harness_reaches_the_cases_and_passes_the_expected_values(monkeypatch):
    # A check whose cases carry the expected answer of each case as it is compared.
    for name in ("additive_score", "grouped_query_attention", "prefix_lm_mask"):
        ok, calls = _run(name, "expected", monkeypatch)
        assert ok and calls >= 2, name


def test_close_compares_booleans_only_with_booleans():
    mask = torch.tensor([True, False])
    assert check_core.close(mask, mask)
    assert not check_core.close(torch.ones(2, dtype=torch.bool), torch.ones(2))
    assert not check_core.close(torch.ones(2), torch.ones(2, dtype=torch.bool))
    assert not check_core.close(torch.tensor([1, 0]), mask)  # an int tensor is no mask
    assert check_core.close(torch.ones(2, dtype=torch.int64), torch.ones(2))
