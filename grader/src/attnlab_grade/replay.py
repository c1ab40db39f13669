"""The verdict, in the grader's own process: replay a check on the recorded answers.

The kernel ran each published check with the student's function and the sentry
recorded, case by case, what the function returned (:mod:`attnlab.grade.sentry`).
Here the same check runs again — the same deterministic cases, the same comparison,
the same hints — with a stand-in for the student's function that returns the recorded
answers. Nothing the notebook did to ``print``, ``torch``, ``numpy`` or
:mod:`attnlab.check` in its own process can reach this one.
"""

from __future__ import annotations

import base64
import contextlib
import contextvars
import io

import numpy as np
import torch

from attnlab.course import check_core as _core

_current: contextvars.ContextVar = contextvars.ContextVar("attnlab_replay")

MARKS = {"✅": "passed", "❌": "failed", "⏳": "not attempted"}
# The student sees the first 90 characters of an answer: what it was comes first.
REJECTED = (
    "TypeError: {what} is not a plain answer (the grader takes tensors, numbers, "
    "strings and tuples, lists or dicts of them)"
)


class Rejected(Exception):
    """A recorded answer the grader does not accept (a tensor subclass, ...)."""


def decode(data):
    """A recorded answer back as Python objects (plain tensors, numbers, ...)."""
    if "v" in data:
        return data["v"]
    if "float" in data:
        return float(data["float"])
    if "seq" in data:
        items = [decode(e) for e in data["items"]]
        if data["seq"] == "Size":
            return torch.Size(items)
        return items if data["seq"] == "list" else tuple(items)
    if "dict" in data:
        return {k: decode(v) for k, v in data["dict"].items()}
    if "tensor" in data:
        arr = np.frombuffer(base64.b64decode(data["data"]), dtype=np.dtype(data["np"]))
        t = torch.from_numpy(arr.reshape(data["shape"]).copy())
        dtype = getattr(torch, data["tensor"].removeprefix("torch."), None)
        return t.to(dtype) if isinstance(dtype, torch.dtype) and dtype != t.dtype else t
    if "ndarray" in data:
        arr = np.frombuffer(
            base64.b64decode(data["data"]), dtype=np.dtype(data["ndarray"])
        )
        return arr.reshape(data["shape"]).copy()
    if "npscalar" in data:
        arr = np.frombuffer(
            base64.b64decode(data["data"]), dtype=np.dtype(data["npscalar"])
        )
        return arr[0]
    raise Rejected(data.get("reject", "an object the grader cannot read"))


def runs(answers: list[dict]) -> dict[str, list[dict[int, list]]]:
    """Recorded answers grouped per check name into runs (a run restarts at case 0)."""
    out: dict[str, list[dict[int, list]]] = {}
    for a in answers:
        name, index = str(a.get("name")), a.get("index")
        if not isinstance(index, int):
            continue
        per = out.setdefault(name, [])
        if not per or index == 0 or index in per[-1]:
            per.append({})
        per[-1][index] = a.get("outcome")
    return out


def _stand_in(*args, **kwargs):
    kind, value = _current.get()
    if kind == "pending":
        raise NotImplementedError
    if kind == "raised":
        tname, _, msg = str(value).partition(": ")
        raise type(tname or "Exception", (Exception,), {})(msg)
    return value


def _outcome(recorded) -> tuple:
    if not isinstance(recorded, list) or not recorded:
        return ("missing", "no answer was recorded for this case")
    kind = recorded[0]
    if kind == "ok":
        try:
            return ("ok", decode(recorded[1]))
        except Rejected as err:
            return ("raised", REJECTED.format(what=err))
        except Exception as err:  # malformed record: the notebook wrote it
            return (
                "raised",
                f"TypeError: an answer the grader cannot read ({err})"[:200],
            )
    if kind in ("pending",):
        return ("pending",)
    if kind == "notcallable" and len(recorded) > 1:
        return ("notcallable", str(recorded[1]))
    if kind == "raised" and len(recorded) > 1:
        return ("raised", str(recorded[1]))
    return ("missing", "no answer was recorded for this case")


@contextlib.contextmanager
def _replaying(recorded: dict[str, list[dict[int, list]]]):
    real = _core._call_answer
    seen: dict[str, int] = {}

    def call_answer(name, index, fn, args, kwargs):
        if index == 0:
            seen[name] = seen.get(name, -1) + 1
        per = recorded.get(name, [])
        run = seen.get(name, 0)
        outcome = _outcome(per[run].get(index) if run < len(per) else None)
        if outcome[0] in ("ok", "raised", "pending"):
            token = _current.set((outcome[0], outcome[-1]))
            try:
                return real(name, index, fn, args, kwargs)
            finally:
                _current.reset(token)
        return outcome

    _core._call_answer = call_answer
    try:
        yield
    finally:
        _core._call_answer = real


def replay(check_names: list[str], answers: list[dict]) -> list[tuple[str, str]]:
    """(status, message) of each check call of a check cell, from recorded answers."""
    import attnlab.check

    recorded = runs(answers)
    results = []
    for dotted in check_names:
        fn = attnlab.check
        for part in dotted.split("."):
            fn = getattr(fn, part, None)
        if not callable(fn):
            results.append(("errored", f"no check attnlab.check.{dotted}"))
            continue
        out = io.StringIO()
        with _replaying(recorded), contextlib.redirect_stdout(out):
            try:
                result = fn(_stand_in)
                line = getattr(result, "line", "")
            except _core.CheckFailed as err:
                line = str(err)
            except Exception as err:  # the check itself broke on a recorded answer
                line = f"❌ {dotted}: the check could not use the answer ({err!r})"
        line = (
            line or out.getvalue().strip().splitlines()[-1:] and out.getvalue().strip()
        )
        line = line.strip().splitlines()[-1] if line else ""
        status = MARKS.get(line[:1], "errored")
        results.append((status, line[1:].strip() if status != "errored" else line))
    return results
