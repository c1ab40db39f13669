"""Verdicts from a clean process: each exercise graded in a kernel of its own.

For each exercise of a submission whose check cells are intact, the grader starts a
fresh kernel (in a fresh :class:`~attnlab.grade.sandbox.Sandbox`, with the sentry
installed) and runs in it

1. the master's own code cells up to that exercise's box (the chapter's code and the
   stubs of earlier exercises — never a solution, never the student's cells);
2. only the student's cells of that exercise (its code cells between the box and the
   check, solutions included), watched by the sentry;
3. the master's published check cell(s); the sentry records the answers and the
   grader replays the check in its own process (:mod:`attnlab.grade.replay`).

Nothing else the submission did — a patched library in an earlier cell, a thread, a
file written in HOME, another exercise's forbidden call — can reach this verdict.
Forbidden names are enforced here twice: a **static scan** of the student's cells
(:func:`static_flags`: the names the exercise forbids, and the introspection that
graders cannot allow — frames, code objects, audit hooks, ``ctypes``, threads,
processes, ``exec``), and the sentry's runtime hooks, which count a forbidden call
only when a student's frame made it (the library's own internal calls never count).

The submission's own run (:func:`attnlab.grade.verdicts.grade`, the whole notebook in
one kernel) stays as a second opinion: what its sentry saw is reported in the
integrity column, but the verdict is this one.

Exercises must be written so that this works (CONTRIBUTING, "Exercises the grader
can grade"): the student's answer is self-contained in the exercise's cells (it may
use what the chapter defined before the box), and nothing the chapter defines after
the box is needed by the answer or the check.
"""

from __future__ import annotations

import ast
import re
import time

from attnlab.course.exercises import Exercise, cell_source, check_calls
from attnlab.course.zmq_poll import sliced_zmq_polls

from .outcome import exercise_result
from .report import ExerciseResult, describe
from .runner import Runner

# Attributes and names no answer needs and a cheat does: frames, code objects, the
# grader's hooks and internals.
SUSPECT_ATTRS = {
    "_getframe",
    "_current_frames",
    "f_back",
    "f_locals",
    "f_globals",
    "f_code",
    "gi_frame",
    "tb_frame",
    "cr_frame",
    "ag_frame",
    "__code__",
    "co_filename",
    "co_consts",
    "setprofile",
    "settrace",
    "addaudithook",
    "audit",
    "_call_answer",
    "_record_all",
    "_GRADING",
    "__closure__",
    "__globals__",
    "__subclasses__",
    "__builtins__",
}
SUSPECT_CALLS = {"exec", "eval", "compile", "__import__", "breakpoint"}
SUSPECT_MODULES = {
    "ctypes",
    "gc",
    "inspect",
    "marshal",
    "importlib",
    "threading",
    "_thread",
    "subprocess",
    "multiprocessing",
    "concurrent",
    "socket",
    "builtins",
    "signal",
    "code",
    "codeop",
    "pty",
}  # not sys: sys.float_info is an honest answer's; its dangerous parts are in
# SUSPECT_ATTRS (_getframe, setprofile, audit, ...) and "attnlab.check" strings


def _check_modules() -> set[str]:
    import attnlab.check as pkg

    return set(pkg.MODULES)


def _distinctive(name: str) -> bool:
    """A forbidden name rare enough to be matched on its own (not ``softmax``)."""
    return len(name) >= 10 and ("_" in name or any(c.isupper() for c in name[1:]))


def _chain(node) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return ".".join(reversed(parts))


def static_flags(sources: list[str], forbidden: list[str]) -> list[str]:  # noqa: C901
    """What a static scan of the student's cells finds that fails the exercise."""
    flags: list[str] = []
    trees = []
    for src in sources:
        text = "\n".join(
            ln for ln in src.splitlines() if not ln.lstrip().startswith(("%", "!"))
        )
        try:
            trees.append(ast.parse(text))
        except SyntaxError:
            continue  # the cell raises when it runs: an error, not a flag
    defined: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.add(node.id)
            elif isinstance(node, ast.arg):
                defined.add(node.arg)
    # A forbidden function may be called in an assert (the book's own solutions
    # measure their answer against the library that way): nothing there can feed
    # the answer, unless it assigns (a walrus).
    exempt: set[int] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Assert) and not any(
                isinstance(n, ast.NamedExpr) for n in ast.walk(node)
            ):
                exempt |= {id(n) for n in ast.walk(node)}
    wanted = []
    for dotted in forbidden:
        parts = dotted.split(".")
        wanted.append((dotted, parts[-1], ".".join(parts[-2:]), ".".join(parts[:-1])))
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                )
                for m in mods:
                    if m.split(".")[0] in SUSPECT_MODULES:
                        flags.append(f"imports {m}")
                for m in mods:
                    if m.startswith(("attnlab.check", "attnlab.course")):
                        flags.append(f"imports the checks' own code ({m})")
                if isinstance(node, ast.ImportFrom):
                    for a in node.names:
                        for dotted, name, _, mod in wanted:
                            if a.name == name and (node.module or "").endswith(
                                mod.split(".")[-1]
                            ):
                                flags.append(f"imports {dotted}")
            elif isinstance(node, ast.Attribute):
                if node.attr in SUSPECT_ATTRS:
                    flags.append(f"uses .{node.attr}")
                chain = _chain(node)
                parts = chain.split(".")
                if parts[:2] == ["attnlab", "course"] or (
                    parts[:2] == ["attnlab", "check"]
                    and len(parts) > 2
                    and (parts[2].startswith("_") or parts[2] in _check_modules())
                ):
                    flags.append(f"uses the checks' own code ({chain})")
                for dotted, name, tail, _ in wanted if id(node) not in exempt else ():
                    # attnlab.scaled_dot_product_attention is not torch's: a chain
                    # rooted in another known package is someone else's name.
                    root = chain.split(".")[0]
                    other = root in ("attnlab", "torch", "numpy", "np", "math") and (
                        root != dotted.split(".")[0]
                    )
                    if node.attr == name and (
                        chain.endswith(tail) or (_distinctive(name) and not other)
                    ):
                        flags.append(f"uses {dotted}")
            elif isinstance(node, ast.Name):
                if node.id in SUSPECT_ATTRS or node.id in SUSPECT_MODULES - {"code"}:
                    if node.id not in defined:
                        flags.append(f"uses {node.id}")
                if (
                    isinstance(node.ctx, ast.Load)
                    and node.id not in defined
                    and id(node) not in exempt
                ):
                    for dotted, name, _, _ in wanted:
                        if node.id == name and _distinctive(name):
                            flags.append(f"uses {dotted}")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                if node.func.id in SUSPECT_CALLS and node.func.id not in defined:
                    flags.append(f"calls {node.func.id}()")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if node.value.startswith(("attnlab.check", "attnlab.course")):
                    flags.append(f"names the checks' own code ({node.value[:60]})")
                for dotted, name, _, _ in wanted:
                    if _distinctive(name) and name in node.value:
                        flags.append(f"names {dotted} in a string")
                for attr in SUSPECT_ATTRS:
                    if attr.startswith("_") and attr in node.value:
                        flags.append(f"names {attr} in a string")
    return list(dict.fromkeys(flags))


def forbidden_of(checks: list[str], extra: dict | None = None) -> list[str]:
    """The dotted names the exercise's checks forbid (check modules' ``FORBIDDEN``)."""
    import importlib

    import attnlab.check as pkg

    out: list[str] = []
    for name in pkg.MODULES:
        mod = importlib.import_module(f"attnlab.check.{name}")
        for check, names in getattr(mod, "FORBIDDEN", {}).items():
            if check in checks:
                out += list(names)
    for check in checks:
        out += list((extra or {}).get(check, []))
    return list(dict.fromkeys(out))


def grade_exercise(
    prog: dict,
    sub,
    ex: Exercise,
    kernel: str,
    cell_timeout: float,
    exercise_timeout: float,
    time_limit: float,
    protected: list[str],
    forbid: dict | None,
):
    """The verdict on one exercise from a clean kernel (an ExerciseResult)."""
    import nbformat

    box = prog["boxes"][ex.label]
    prefix = [c for c in prog["cells"] if c["index"] < box and c["kind"] != "check"]
    checks = [
        c for c in prog["cells"] if c["exercise"] == ex.label and c["kind"] == "check"
    ]
    mine = sorted(set(ex.work_cells + ex.solution_cells))
    mine = [
        i
        for i in mine
        if sub.cells[i].cell_type == "code" and cell_source(sub.cells[i]).strip()
    ]
    cells = [nbformat.v4.new_code_cell(c["source"]) for c in prefix]
    cells += [nbformat.v4.new_code_cell(cell_source(sub.cells[i])) for i in mine]
    cells += [nbformat.v4.new_code_cell(c["source"]) for c in checks]
    nb = nbformat.v4.new_notebook(cells=cells)
    n_pre, n_mine = len(prefix), len(mine)
    own = list(range(n_pre, n_pre + n_mine))
    check_idx = list(range(n_pre + n_mine, len(cells)))
    names = [n for c in checks for n in check_calls({"cell_type": "code", **c})]
    where = {n_pre + k: i for k, i in enumerate(mine)}
    sub_checks = [
        i for i in ex.check_cells if check_calls(sub.cells[i])
    ]  # for messages only
    for k, j in enumerate(check_idx):
        if k < len(sub_checks):
            where[j] = sub_checks[k]
    result = ExerciseResult(ex.number, ex.label, ex.title, names, "", "", 0.0)
    flags = [
        f"static scan: {f}"
        for f in static_flags(
            [cell_source(sub.cells[i]) for i in mine], forbidden_of(names, forbid)
        )
    ]
    start = time.monotonic()
    runner = Runner(
        nb,
        __import__("pathlib").Path("exercise.ipynb"),
        kernel,
        cell_timeout,
        time_limit,
        protected,
        forbid,
    )
    runs = {}
    # As the notebook's own run (verdicts.grade): a missed pyzmq wake-up must not cost
    # a cell its whole timeout (it did here: 300 s on chapter 2's clean runs, about one
    # grading run in three on a busy machine, the kernel idle with its reply sent).
    polls = sliced_zmq_polls()
    polls.__enter__()
    try:
        for i in range(len(cells)):
            if i < n_pre:
                run = runner.run(i, timeout=cell_timeout)
                if run.status != "ok" and prefix[i]["kind"] == "work":
                    # An earlier exercise's stub as published (it may raise, or
                    # worse): what it defines is kept, what it did is not needed.
                    continue
                if run.status != "ok":
                    result.status = "errored"
                    verb = {"error": "raised", "timeout": "", "dead": ""}
                    result.message = (
                        f"the master's cell {prefix[i]['index']} "
                        f"{verb.get(run.status, '')} {run.detail} on this machine: the "
                        "chapter's own code before this exercise does not run here "
                        "(attnlab-grade --check-masters; tell the course's maintainers)"
                    ).replace("  ", " ")
                    return result, runner.notes
            elif i in own:
                runs[i] = runner.run(i, student=True, timeout=exercise_timeout)
            else:
                runs[i] = runner.run(
                    i, checks=check_calls(nb.cells[i]), timeout=exercise_timeout
                )
    finally:
        runner.close()
        polls.__exit__(None, None, None)
    for i, run in sorted(runs.items()):
        for ev in run.events:
            flags.append(f"cell {where.get(i, i)}: {describe(ev)}")
    clean_ex = Exercise(
        ex.label, ex.title, ex.number, -1, "", work_cells=own, check_cells=check_idx
    )
    got = exercise_result(nb, clean_ex, check_idx, runs, flags)
    got.message = re.sub(
        r"cell (\d+) \(",
        lambda m: f"cell {where.get(int(m.group(1)), m.group(1))} (",
        got.message,
    )
    got.seconds = time.monotonic() - start
    got.checks = names
    return got, runner.notes
