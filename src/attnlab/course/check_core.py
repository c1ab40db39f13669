"""The machinery behind every exercise check.

A check runs the student's function on a list of :class:`Case` s and prints one line:

* ``✅ name: all N cases passed``
* ``❌ name: case 'label' — input ..., got ..., expected ... — hint: ...``
* ``⏳ name: not implemented yet`` (the stub still raises ``NotImplementedError``)

It raises :class:`CheckFailed` only in strict mode (``ATTNLAB_STRICT=1``, which
``make book`` and ``make test`` set), so the book's own solutions are verified while
students in a notebook just read the line and try again.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "Case",
    "CheckFailed",
    "CheckResult",
    "run_check",
    "strict_mode",
    "close",
    "TORCH_SOFTMAX",
]

# PyTorch's softmax in each of its spellings, for an exercise that must do without it
TORCH_SOFTMAX = (
    "torch.softmax",
    "torch.nn.functional.softmax",
    "torch.special.softmax",
    "torch.Tensor.softmax",
    "torch.nn.Softmax",
)


class CheckFailed(AssertionError):
    """Raised by a failing check in strict mode."""


@dataclass
class Case:
    """One input for the student's function and the answer it should give."""

    label: str  # a short name shown to the student, e.g. "logits x 1000"
    args: tuple  # positional arguments for the student's function
    expected: Any  # the reference answer (tensor, number, tuple of tensors, ...)
    hint: str = ""  # what usually goes wrong when this case fails
    kwargs: dict = field(default_factory=dict)


class CheckResult:
    """What a check returns: truthy when every case passed.

    It displays nothing in a notebook (the printed line is the message), so a check as
    the last line of a cell does not add a stray ``True`` under it.
    """

    def __init__(self, passed: bool, line: str):
        self.passed = passed
        self.line = line

    def __bool__(self) -> bool:
        return self.passed

    def __repr__(self) -> str:
        return f"CheckResult(passed={self.passed})"

    def _ipython_display_(self) -> None:
        pass


def strict_mode() -> bool:
    """True when checks should raise (``ATTNLAB_STRICT`` set to 1/true/yes)."""
    return os.environ.get("ATTNLAB_STRICT", "0").lower() in ("1", "true", "yes")


def _short_unsafe(x: Any, width: int = 90) -> str:
    if isinstance(x, torch.nn.Module):  # a model: its repr runs to many lines
        return f"a {type(x).__name__} model"
    if isinstance(x, torch.Tensor):
        t = x.detach().cpu()
        with torch.no_grad():
            body = str(t.tolist() if t.numel() <= 12 else t.flatten()[:8].tolist())
        if t.numel() > 12:
            body = body[:-1] + ", ...]"
        text = f"tensor{tuple(t.shape)} {body}" if t.dim() else body
        if t.is_floating_point() and t.numel() <= 12:
            vals = ", ".join(f"{v:.4g}" for v in t.flatten().tolist())
            text = f"tensor{tuple(t.shape)} [{vals}]"
    elif isinstance(x, (tuple, list)):
        text = "(" + ", ".join(_short(e, width) for e in x) + ")"
    else:
        text = repr(x)
    return text if len(text) <= width else text[: width - 3] + "..."


def _short(x: Any, width: int = 90) -> str:
    try:
        return _short_unsafe(x, width)
    except Exception:  # an answer whose repr fails must not crash the check
        return f"<{type(x).__name__} object that cannot be printed>"


def _first_difference(got: Any, expected: Any) -> str:
    """Where a tensor answer of the right shape first differs from the expected one
    (``""`` when it does not apply): the printed values of both may start alike."""
    try:
        if not (
            isinstance(got, torch.Tensor)
            and isinstance(expected, torch.Tensor)
            and got.shape == expected.shape
            and got.numel() > 1
        ):
            return ""
        g = got.detach().cpu().double().flatten()
        e = expected.detach().cpu().double().flatten()
        off = ~torch.isclose(g, e, atol=1e-5, rtol=1e-4)
        if not bool(off.any()):
            return ""
        i = int(off.nonzero()[0])
        index = tuple(int(k) for k in torch.unravel_index(torch.tensor(i), got.shape))
        where = index[0] if len(index) == 1 else list(index)
        a, b = g[i].item(), e[i].item()
        digits = 4 if f"{a:.4g}" != f"{b:.4g}" else 10
        return (
            f"; first difference at index {where}: got {a:.{digits}g}, "
            f"expected {b:.{digits}g}"
        )
    except Exception:  # an answer the comparison cannot read: nothing to add
        return ""


def close(got: Any, expected: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """Do ``got`` and ``expected`` agree (tensors, numbers, or tuples of them)?"""
    if isinstance(expected, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != expected.shape:
            return False
        if got.is_complex() and not expected.is_complex():
            return False
        # Booleans are compared as booleans only when the expected answer is one
        # (a mask); an all-True bool tensor is no answer to a float question, and a
        # float tensor is no mask.
        if expected.dtype == torch.bool or got.dtype == torch.bool:
            return got.dtype == expected.dtype and bool(torch.equal(got, expected))
        g = got.detach().double().cpu()
        e = expected.detach().double().cpu()
        if torch.isnan(g).any():
            return False
        return bool(torch.allclose(g, e, atol=atol, rtol=rtol, equal_nan=False))
    if isinstance(expected, (tuple, list)):
        return (
            isinstance(got, (tuple, list))
            and len(got) == len(expected)
            and all(close(g, e, atol, rtol) for g, e in zip(got, expected))
        )
    if isinstance(expected, float):
        if isinstance(got, (str, bytes)):
            return False
        try:
            return abs(float(got) - expected) <= atol + rtol * abs(expected)
        except (TypeError, ValueError):
            return False
    if isinstance(got, torch.Tensor):  # a tensor against a plain value
        return got.numel() == 1 and got.item() == expected
    try:
        return bool(got == expected)
    except Exception:
        return False


def _resolve(dotted: str) -> tuple[Any, str, Any]:
    """``"attnlab.attention.attend"`` -> (module object, "attend", the function).

    A method names its class as the owner: ``"torch.Tensor.softmax"`` ->
    (``torch.Tensor``, "softmax", the method).
    """
    mod_name, _, attr = dotted.rpartition(".")
    try:
        owner = importlib.import_module(mod_name)
    except ImportError:  # a class's attribute: import its module, then walk to it
        parent, _, cls = mod_name.rpartition(".")
        if not parent:
            raise
        owner = getattr(importlib.import_module(parent), cls)
        if not isinstance(owner, type):
            raise
    return owner, attr, getattr(owner, attr)


_INHERITED = object()  # a patched method that its class inherited (restored by delattr)


@contextlib.contextmanager
def _tripwires(forbid: Sequence[str], fn: Callable) -> Iterator[list[str]]:
    """While active, record every call to a function named in ``forbid``.

    Each forbidden object is swapped, wherever it is bound (its own module, every
    loaded ``attnlab`` module, ``torch.nn.functional``, and the student's function's
    globals), for a wrapper that notes the call and then runs the original, so the
    student's answer still computes and the check can name the call it saw.
    """
    called: list[str] = []
    if not forbid:
        yield called
        return
    targets = []
    for dotted in forbid:
        try:
            targets.append((dotted, *_resolve(dotted)))
        except (ImportError, AttributeError) as err:
            raise ValueError(f"forbid names {dotted!r}, which does not exist") from err
    namespaces = [
        m.__dict__
        for n, m in list(sys.modules.items())
        if m is not None and (n == "attnlab" or n.startswith("attnlab."))
    ]
    namespaces.append(sys.modules["torch.nn.functional"].__dict__)
    namespaces.append(getattr(fn, "__globals__", {}))
    patched = []  # (namespace, name, original)
    for dotted, _module, _attr, original in targets:
        if isinstance(_module, type):  # a method (torch.Tensor.softmax): on its class
            own_attr = _attr in vars(_module)

            @functools.wraps(original)
            def spy_method(*a, _d=dotted, _f=original, **k):
                called.append(_d)
                return _f(*a, **k)

            setattr(_module, _attr, spy_method)
            patched.append((_module, _attr, original if own_attr else _INHERITED))
            continue
        if isinstance(original, type):
            # a class is spied on through its __init__ (patched on the class itself)
            init = original.__init__  # type: ignore[misc]

            @functools.wraps(init)
            def spy_init(self, *a, _d=dotted, _init=init, **k):
                called.append(_d)
                return _init(self, *a, **k)

            original.__init__ = spy_init  # type: ignore[misc]
            patched.append((original, "__init__", init))
            continue

        @functools.wraps(original)
        def spy(*a, _d=dotted, _f=original, **k):
            called.append(_d)
            return _f(*a, **k)

        own = vars(_module)  # the module the name was resolved in (torch.autograd, ...)
        for ns in [own, *(n for n in namespaces if n is not own)]:
            for key, value in list(ns.items()):
                if value is original:
                    ns[key] = spy
                    patched.append((ns, key, original))
    try:
        yield called
    finally:
        for owner, key, original in reversed(patched):
            if isinstance(owner, dict):
                owner[key] = original
            elif original is _INHERITED:  # the class had no own copy: drop the spy
                delattr(owner, key)
            else:
                setattr(owner, key, original)


# Set by the grader's sentry (attnlab.grade.sentry) in the kernel it grades: every case
# is run and recorded (none is compared here; the grader compares in its own process).
_GRADING = False


def _call_answer(name: str, index: int, fn: Callable, args: tuple, kwargs: dict):
    """Call the student's function on one case; the outcome as plain data.

    ``("ok", value)``, ``("raised", "TypeName: message")``, ``("pending",)`` (the stub
    still raises ``NotImplementedError``) or ``("notcallable", "TypeName")``. When a
    notebook is graded, the grader's sentry records what this function returns, so
    ``name`` and ``index`` (the case's position) are its locals on purpose.
    """
    if not callable(fn):
        return ("notcallable", type(fn).__name__)
    try:
        return ("ok", fn(*args, **kwargs))
    except NotImplementedError:
        return ("pending",)
    except Exception as err:  # the student's code raised: shown as the answer
        try:
            text = f"{type(err).__name__}: {err}"
        except Exception:
            text = f"{type(err).__name__}: <message that cannot be printed>"
        return ("raised", text)


def run_check(
    name: str,
    fn: Callable,
    cases: Sequence[Case],
    compare: Callable[[Any, Any], bool] = close,
    forbid: Sequence[str] = (),
) -> CheckResult:
    """Run ``fn`` on every case, print one line; the result is truthy if all passed.

    ``forbid`` lists the dotted names of library functions (or classes) that the
    exercise asks the student to write themselves, e.g. ``("attnlab.attention.attend",)``:
    an answer that calls one of them fails, with a message naming the call. The same
    lists are published per check module as ``FORBIDDEN`` (check name -> names) for
    the grader.
    """
    if _GRADING:
        return _record_all(name, fn, cases)
    for index, case in enumerate(cases):
        with _tripwires(forbid, fn) as called:
            outcome = _call_answer(name, index, fn, case.args, case.kwargs)
        if outcome[0] == "notcallable":
            return _report(name, False, f"expected a function, got {outcome[1]}")
        if outcome[0] == "pending":
            return _report(name, False, "not implemented yet", pending=True)
        if outcome[0] == "missing":  # only when the grader replays a notebook
            return _report(name, False, f"case '{case.label}' — {outcome[1]}")
        if outcome[0] == "raised":
            got, ok = outcome[1], False
        else:
            got = outcome[1]
            try:
                ok = bool(compare(got, case.expected))
            except Exception:  # an answer the comparison cannot handle is wrong
                ok = False
        if called:
            return _report(
                name,
                False,
                f"case '{case.label}' — your function called {called[0]}, the "
                "library's own answer to this exercise — hint: write it yourself "
                "from torch operations",
            )
        if not ok:
            msg = (
                f"case '{case.label}' — input {_short(case.args)}, got {_short(got)}, "
                f"expected {_short(case.expected)}"
                f"{_first_difference(got, case.expected)}"
            )
            if case.hint:
                msg += f" — hint: {case.hint}"
            return _report(name, False, msg)
    return _report(name, True, f"all {len(cases)} cases passed")


def _record_all(name: str, fn: Callable, cases: Sequence[Case]) -> CheckResult:
    """Grading: run the answer on every case for the grader to record, compare nothing.

    The expected answers are dropped before the student's function runs, so that no
    answer can be read back from the check's own objects; forbidden calls are seen by
    the sentry, which a student's code cannot switch off.
    """
    for case in cases:
        case.expected = None
    for index, case in enumerate(cases):
        outcome = _call_answer(name, index, fn, case.args, case.kwargs)
        if outcome[0] in ("notcallable", "pending"):
            break
    line = f"⏺ {name}: answers recorded; the grader compares them"
    print(line)
    return CheckResult(False, line)


def _report(name: str, ok: bool, msg: str, pending: bool = False) -> CheckResult:
    mark = "✅" if ok else ("⏳" if pending else "❌")
    line = f"{mark} {name}: {msg}"
    print(line)
    if not ok and strict_mode():
        raise CheckFailed(line)
    return CheckResult(ok, line)


def seeded(seed: int) -> torch.Generator:
    """A CPU generator seeded with ``seed``: a check draws the same cases on every run."""
    return torch.Generator().manual_seed(seed)
