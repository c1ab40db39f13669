"""The check machinery (attnlab.course.check_core): one line, strict, hostile input."""

from __future__ import annotations

import importlib

import pytest
import torch

import attnlab
from attnlab.course.check_core import (  # _resolve: no public name
    Case,
    CheckFailed,
    _resolve,
    close,
    run_check,
    strict_mode,
)


@pytest.fixture
def lenient(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")


@pytest.fixture
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


def _cases():
    x = torch.tensor([1.0, 2.0, 3.0])
    return [
        Case("small", (x,), x * 2, hint="multiply by two"),
        Case("negative", (-x,), -x * 2),
    ]


def _stub(x):
    # YOUR CODE HERE
    raise NotImplementedError


@pytest.mark.parametrize(
    "value, expected", [("1", True), ("true", True), ("YES", True), ("0", False)]
)
def test_strict_mode_reads_the_environment(monkeypatch, value, expected):
    monkeypatch.setenv("ATTNLAB_STRICT", value)
    assert strict_mode() is expected


def test_strict_mode_off_by_default(monkeypatch):
    monkeypatch.delenv("ATTNLAB_STRICT", raising=False)
    assert strict_mode() is False


def test_pass_prints_one_green_line(capsys, strict):
    result = run_check("double", lambda x: x * 2, _cases())
    assert bool(result) is True and result.passed
    out = capsys.readouterr().out
    assert out == "✅ double: all 2 cases passed\n"
    assert result.line == out.strip()
    assert repr(result) == "CheckResult(passed=True)"


def test_fail_shows_case_input_got_expected_hint(capsys, lenient):
    assert bool(run_check("double", lambda x: x + 2, _cases())) is False
    out = capsys.readouterr().out.strip()
    assert out.startswith("❌ double: case 'small'")
    assert "got tensor(3,) [3, 4, 5]" in out and "expected tensor(3,) [2, 4, 6]" in out
    assert out.endswith("hint: multiply by two")
    assert out.count("\n") == 0


def test_fail_raises_in_strict_mode(strict):
    with pytest.raises(CheckFailed, match="case 'negative'"):
        run_check("double", lambda x: x.abs() * 2, _cases())


def test_stub_prints_hourglass_and_does_not_raise_leniently(capsys, lenient):
    assert bool(run_check("double", _stub, _cases())) is False
    assert capsys.readouterr().out == "⏳ double: not implemented yet\n"


def test_stub_raises_in_strict_mode(strict):
    with pytest.raises(CheckFailed, match="not implemented yet"):
        run_check("double", _stub, _cases())


def test_student_exception_is_shown_as_the_answer(capsys, lenient):
    def broken(x):
        return x @ torch.ones(7)

    assert bool(run_check("double", broken, _cases())) is False
    out = capsys.readouterr().out
    assert out.startswith("❌") and "RuntimeError" in out


@pytest.mark.parametrize(
    "answer",
    [
        None,
        "text",
        [2.0, 4.0, 6.0],  # a list, not a tensor
        torch.tensor([2.0, 4.0]),  # wrong shape
        torch.tensor([float("nan"), 4.0, 6.0]),
        torch.tensor([[2.0, 4.0, 6.0]]),  # extra dimension
    ],
    ids=["none", "str", "list", "shape", "nan", "extra-dim"],
)
def test_hostile_answers_fail_cleanly(answer, capsys, lenient):
    assert bool(run_check("double", lambda x: answer, _cases())) is False
    assert capsys.readouterr().out.startswith("❌ double: case 'small'")


def test_not_a_function(capsys, lenient):
    assert bool(run_check("double", 42, _cases())) is False
    assert "expected a function, got int" in capsys.readouterr().out


def test_close_on_tensors_numbers_and_tuples():
    a = torch.tensor([1.0, 2.0])
    assert close(a + 1e-7, a) and not close(a + 1e-2, a)
    assert close(a.double(), a)  # dtypes may differ
    assert not close(a[None], a)  # shapes may not
    assert close((a, 3.0), (a, 3.0)) and not close((a,), (a, a))
    assert close(torch.tensor(0.5), 0.5) and not close(None, 0.5)
    assert close(torch.tensor([True, False]), torch.tensor([True, False]))
    assert not close(torch.tensor([True, True]), torch.tensor([True, False]))
    inf = torch.tensor([float("-inf"), 1.0])
    assert close(inf.clone(), inf)
    assert close(3, 3) and not close(4, 3)


def test_long_inputs_are_shortened(capsys, lenient):
    big = torch.arange(100.0)
    run_check("big", lambda x: x, [Case("big", (big,), big + 1)])
    out = capsys.readouterr().out
    assert "..." in out and len(out) < 400


# Hostile answers: the check must fail them cleanly, never crash or pass.
def test_tensor_answer_against_a_number_fails_cleanly(capsys, lenient):
    assert (
        bool(run_check("idx", lambda: torch.tensor([1, 2]), [Case("c", (), 3)]))
        is False
    )


def test_answer_with_broken_repr_fails_cleanly(capsys, lenient):
    class Odd:
        def __repr__(self):
            raise RuntimeError("no repr")

    assert bool(run_check("odd", lambda: Odd(), [Case("c", (), 3)])) is False


@pytest.mark.filterwarnings("ignore:Casting complex values")
def test_complex_answer_is_not_accepted(lenient):
    got = torch.tensor([1.0 + 5j, 2.0])
    assert not close(got, torch.tensor([1.0, 2.0]))


def test_string_answer_for_a_number_is_not_accepted():
    assert not close("0.5", 0.5)


def test_forbid_catches_a_call_through_the_defining_module(monkeypatch):
    """A forbidden name is swapped in the module it lives in, not only in attnlab's."""
    import torch

    monkeypatch.setenv("ATTNLAB_STRICT", "0")  # a failing check returns, not raises

    from attnlab.course.check_core import Case, run_check

    def uses_grad(x):
        x = x.clone().requires_grad_()
        (g,) = torch.autograd.grad((x * x).sum(), x)  # reached as torch.autograd.grad
        return g

    cases = [Case("a", (torch.ones(2),), torch.ones(2) * 2)]
    assert not run_check("t", uses_grad, cases, forbid=("torch.autograd.grad",))
    assert run_check("t", lambda x: 2 * x, cases, forbid=("torch.autograd.grad",))
    assert not hasattr(torch.autograd.grad, "__wrapped__")  # restored afterwards


CHAPTER_CHECKS = sorted(set(attnlab.check.MODULES) - {"_core", "_diagnose"})


@pytest.mark.parametrize("name", CHAPTER_CHECKS)
def test_forbidden_lists_name_every_check_and_resolve(name):
    """Each chapter's FORBIDDEN has one entry per public check, each name resolves."""
    module = importlib.import_module(f"attnlab.check.{name}")
    checks = {n for n in module.__all__ if n != "FORBIDDEN"}
    assert checks and set(module.FORBIDDEN) == checks
    for names in module.FORBIDDEN.values():
        for dotted in names:
            _resolve(dotted)


def test_every_chapter_has_checks():
    from pathlib import Path

    chapters = (Path(__file__).parents[1] / "chapters").glob("[0-9][0-9]*_*.ipynb")
    written = {p.name[:2] for p in chapters}  # 07a and 07b are one chapter: 7
    assert len(CHAPTER_CHECKS) == len(written)  # one check module per written chapter


def test_fail_line_shows_the_first_difference(capsys, lenient):
    """A long answer whose printed first values equal the expected ones: the line
    names the first index where they differ, and both values there."""
    x = torch.arange(20.0)
    wrong = x.clone()
    wrong[13] = -1.0
    assert not run_check("demo", lambda t: wrong, [Case("long", (x,), x)])
    line = capsys.readouterr().out
    assert "first difference at index 13: got -1, expected 13" in line, line


def test_fail_line_first_difference_shows_enough_digits(capsys, lenient):
    """Values equal to 4 significant digits are printed with more."""
    x = torch.tensor([[1.0, 2.0], [3.0, 12341.0]], dtype=torch.float64)
    wrong = x.clone()
    wrong[1, 1] = 12344.0  # 1.234e+04 both, with 4 digits
    assert not run_check("demo", lambda t: wrong, [Case("2x2", (x,), x)])
    line = capsys.readouterr().out
    assert "first difference at index [1, 1]: got 12344, expected 12341" in line, line


def test_a_model_input_prints_its_class_not_its_repr(capsys, lenient):
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    x = torch.ones(2)
    assert not run_check("demo", lambda m, t: t, [Case("model", (model, x), 2 * x)])
    line = capsys.readouterr().out
    assert "a Sequential model" in line and "Linear(" not in line, line


def test_forbid_catches_a_method_and_restores_it(monkeypatch):
    """``torch.Tensor.softmax`` (a method the class inherits) is spied on while the
    answer runs and removed afterwards."""
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    owner, attr, _ = _resolve("torch.Tensor.softmax")
    assert owner is torch.Tensor and attr == "softmax"
    x = torch.tensor([1.0, 2.0])
    result = run_check(
        "demo",
        lambda t: t.softmax(-1),
        [Case("x", (x,), x.softmax(-1))],
        forbid=("torch.Tensor.softmax",),
    )
    assert not result and "called torch.Tensor.softmax" in result.line
    assert "softmax" not in vars(torch.Tensor)
