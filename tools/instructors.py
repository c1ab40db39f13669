"""The exercise table of the "For instructors" page, generated at build time.

A Sphinx extension (``_config.yml``) with one directive, used in ``instructors.md``::

    ```{attnlab-exercises}
    ```

For every chapter notebook in the book it lists the exercises as the notebooks define
them (:mod:`attnlab.course.exercises`: the sphinx-exercise boxes, their solution and check
cells) with their kind, a time estimate, and what the check verifies: the check
function's docstring and the labels of the cases it runs (read by calling the check
with its ``run_check`` intercepted, so nothing is executed). Nothing in the table is
typed by hand, so it stays true while chapters change.

``python tools/instructors.py`` prints the same table as Markdown.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _one_line(text: str) -> str:
    """A docstring paragraph as one Markdown line that is safe in a table cell."""
    text = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", text)  # :func:`x` -> `x`
    text = text.replace("``", "`")
    text = " ".join(text.split())
    return text.replace("|", "\\|")


def check_function(dotted: str):
    """The check function behind ``attnlab.check.<dotted>`` (None if there is none)."""
    import attnlab.check

    obj = attnlab.check
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj if callable(obj) else None


def check_cases(fn) -> list[str]:
    """Labels of the cases a check runs, read without running anything."""
    module = sys.modules.get(fn.__module__)
    if module is None or not hasattr(module, "run_check"):
        return []
    seen: list[str] = []

    def capture(name, student_fn, cases, *args, **kwargs):
        seen.extend(getattr(c, "label", "") for c in cases)
        return None

    original = module.run_check
    module.run_check = capture
    try:
        params = inspect.signature(fn).parameters
        fn(*([lambda *a, **k: None] * min(1, len(params))))
    except Exception:
        return []
    finally:
        module.run_check = original
    return [s for s in seen if s]


def forbidden(dotted: str) -> tuple[str, ...]:
    """The library names an answer to this check must not call (``FORBIDDEN``)."""
    fn = check_function(dotted)
    module = sys.modules.get(getattr(fn, "__module__", ""), None)
    return tuple(getattr(module, "FORBIDDEN", {}).get(dotted.split(".")[-1], ()))


def describe_check(dotted: str) -> str:
    fn = check_function(dotted)
    if fn is None:
        return f"`{dotted}`: no such check"
    doc = inspect.getdoc(fn) or ""
    summary = _one_line(doc.split("\n\n")[0]) if doc else "(no docstring)"
    cases = check_cases(fn)
    text = f"`{dotted}`: {summary}"
    if cases:
        text += (
            f" Cases ({len(cases)}): " + "; ".join(_one_line(c) for c in cases) + "."
        )
    banned = forbidden(dotted)
    if banned:
        text += " Must not call: " + ", ".join(f"`{b}`" for b in banned) + "."
    return text


def chapter_title(nb) -> str:
    for cell in nb["cells"][:4]:
        src = cell["source"]
        src = "".join(src) if isinstance(src, list) else src
        if cell["cell_type"] == "markdown" and src.startswith("# "):
            return src.splitlines()[0][2:].strip()
    return "?"


def table(paths: list[Path], link: bool = True, hand_out=None) -> str:
    """The exercise table of the given chapter notebooks, as MyST Markdown.

    ``hand_out(stem)`` gives the Markdown line with the links to hand out for a
    chapter (its student notebook), or nothing."""
    from attnlab.course import exercises as exs

    out = []
    for path in paths:
        nb = json.loads(path.read_text())
        found = exs.find_exercises(nb)
        title = chapter_title(nb)
        page = f"chapters/{path.stem}"
        out.append(f"### {{doc}}`{title} </{page}>`" if link else f"### {title}")
        out.append("")
        if hand_out is not None:
            out += [hand_out(path.stem), ""]
        if not found:
            out += ["No exercises yet.", ""]
            continue
        total, any_estimate = 0, False
        out.append("| # | Exercise | Kind | Time | What the check verifies |")
        out.append("|---|---|---|---|---|")
        for ex in found:
            kinds, inferred = exs.kinds(ex)
            kind = ", ".join(exs.KINDS[k] for k in kinds)
            kind = f"*{kind}*" if inferred else kind
            minutes, estimated = exs.minutes(ex, nb)
            total += minutes
            any_estimate |= estimated or inferred
            when = f"*~{minutes} min*" if estimated else f"{minutes} min"
            name = _one_line(ex.title)
            if link and not ex.label.startswith("exercise-"):
                name = f"{{ref}}`{name} <{ex.label}>`"
            checks = "<br>".join(describe_check(c) for c in ex.checks) or (
                "no check: a written answer that you grade (the grader reports it as "
                "*written*, with the student's text)"
            )
            out.append(f"| {ex.number} | {name} | {kind} | {when} | {checks} |")
        out.append("")
        line = f"{len(found)} exercises, about {total} minutes in all."
        if any_estimate:
            how = "{ref}`how-the-table-is-made`" if link else "the page's note"
            line += (
                " *Italic*: not declared by the chapter's author — the kind is read"
                " from the task's words and the time estimated from the solution's"
                f" length ({how})."
            )
        out += [line, ""]
    return "\n".join(out)


def _directive():
    from docutils import nodes
    from docutils.statemachine import StringList
    from sphinx.util.docutils import SphinxDirective

    class ExerciseTable(SphinxDirective):
        has_content = False

        def run(self):
            src = Path(self.env.srcdir)
            paths = [
                p
                for p in sorted((src / "chapters").glob("*.ipynb"))
                if f"chapters/{p.stem}" in self.env.found_docs
            ]
            for p in paths:
                self.env.note_dependency(str(p))
            from tools import student_links

            up = "../" * self.env.docname.count("/")

            def hand_out(stem: str) -> str:
                # Raw HTML: the site's copy (tools/student_links.py writes it), not a
                # Sphinx download of the source tree's file.
                line = (
                    f'Hand out: <a href="{up}{student_links.FOLDER}/{stem}.ipynb" '
                    "download>the student notebook (.ipynb)</a>"
                )
                url = student_links.colab_url(self.env.app, stem)
                return line + (f" or [open it in Colab]({url})" if url else "") + "."

            text = table(paths, hand_out=hand_out)
            node = nodes.container()
            self.state.nested_parse(StringList(text.splitlines()), 0, node)
            return node.children

    return ExerciseTable


def setup(app) -> dict:
    app.add_directive("attnlab-exercises", _directive())
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    print(table(sorted((ROOT / "chapters").glob("*.ipynb")), link=False))
