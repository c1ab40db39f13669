"""Sphinx extension: number exercises per chapter, "Exercise 5.2".

sphinx-exercise numbers its boxes with Sphinx's ``numfig``. Our table of contents is not
numbered (chapters carry their number in their title and file name, so numbering stays
right while some chapters are unwritten), and without section numbers Sphinx counts
every enumerable node across the whole book: chapter 5's first exercise would be
"Exercise 10". After Sphinx assigns the numbers, this extension renumbers the exercises
of every page whose file name starts with a chapter number (``chapters/05_x`` -> 5) as
``(5, 1), (5, 2), ...`` in page order. A chapter in two halves carries a letter
(``chapters/07a_x`` -> "7a"), and its exercises read "7a.1", "7a.2". The box title, the solution's title ("Solution
to Exercise 5.2") and every ``{ref}``/``{numref}`` to an exercise then read "5.2".
Pages without a number prefix (the front page) keep Sphinx's numbers.
"""

from __future__ import annotations

import re

CHAPTER = re.compile(r"(?:^|/)(\d+)([a-z]?)_[^/]*$")


def chapter_number(docname: str) -> int | str | None:
    """The chapter number in a docname such as ``chapters/05_self_attention`` (5), or
    with its letter for a chapter in two halves (``chapters/07a_transformer``: "7a")."""
    m = CHAPTER.search(docname)
    if not m:
        return None
    return f"{int(m.group(1))}{m.group(2)}" if m.group(2) else int(m.group(1))


def renumber(toc_fignumbers: dict, figtype: str = "exercise") -> None:
    """Rewrite ``env.toc_fignumbers`` in place: per-chapter numbers for ``figtype``."""
    for docname, by_type in toc_fignumbers.items():
        chapter = chapter_number(docname)
        numbers = by_type.get(figtype)
        if chapter is None or not numbers:
            continue
        in_page_order = sorted(numbers, key=lambda label: numbers[label])
        for k, label in enumerate(in_page_order, start=1):
            numbers[label] = (chapter, k)


def _on_env_get_updated(app, env) -> list[str]:
    renumber(env.toc_fignumbers)
    return []


def setup(app):
    # After the toctree collector (priority 500) has assigned Sphinx's numbers.
    app.connect("env-get-updated", _on_env_get_updated, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
