"""Chapter 6's static twin (see :mod:`attnlab.course.twin`): the slides' head-split bug.

:func:`slides_bug_twin` mirrors :func:`attnlab.course.ch06_multihead.widgets.slides_bug_view`:
for T positions and H heads it shows which input positions each head sees when the
projections are split correctly (every head sees all T) and with the slides' code
(head h sees h, h + H, h + 2H, ... as a sequence of length T / H, and the view raises
when H does not divide T). The browser computes both (``slides_bug.js``); the browser
check compares them with ``slides_bug_view``.
"""

from __future__ import annotations

from ..twin import HEAD, Range, Readout, Twin, TwinCheck, register_check
from .widgets import slides_bug_view

__all__ = ["slides_bug_twin"]


def slides_bug_twin() -> Twin:
    """Chapter 6: sliders for T and H, the positions each head sees."""
    return Twin(
        "slides_bug",
        "Which positions does each head see?",
        controls=[
            Range("T", "positions T", 1, 12, 1, 6),
            Range("H", "heads H", 1, 6, 1, 3),
        ],
        readouts=[
            Readout("raises", "the slides' view raises"),
            Readout("rows", "rows per head (slides)"),
            Readout("seen", "positions seen (slides)"),
        ],
        note="Left: the correct split, every head sees every position. Right: the "
        "slides' code, where head h gets positions h, h + H, h + 2H, … as its own short "
        "sequence (the labels say which row of that sequence each position becomes).",
        head=HEAD,  # it follows a static figure, not a widget
    )


def _reference(settings: dict, data: dict) -> dict:
    out = slides_bug_view(int(settings["T"]), int(settings["H"]), show=False)
    slides = out["slides"]
    return {
        "raises": slides is None,
        "rows": 0 if slides is None else len(slides[0]),
        "seen": "raises"
        if slides is None
        else " | ".join(",".join(str(i) for i in ps) for ps in slides),
    }


register_check(
    "slides_bug",
    TwinCheck(
        cases=[
            {"T": 6, "H": 3},
            {"T": 7, "H": 3},
            {"T": 12, "H": 4},
            {"T": 1, "H": 1},
            {"T": 5, "H": 6},
            {"T": 12, "H": 6},
        ],
        reference=_reference,
    ),
)
