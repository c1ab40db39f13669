"""Chapter 9's static twin: the attention-pattern explorer that works on the website.

:func:`attention_pattern_twin` mirrors
:func:`attnlab.widgets.subquadratic.attention_pattern_widget`: a pattern (full, causal,
window, dilated, global + local), a length and the pattern's parameters give a boolean
mask (True = may attend), its cost in scored pairs, and how far the last query reaches
after 1, 2, … layers. The browser builds the mask and the reach itself
(``attention_pattern.js``); the browser check compares them with
:func:`attnlab.widgets.subquadratic.attention_pattern` (``pattern_mask`` and
``receptive_field``).
"""

from __future__ import annotations

from ..twin import Checkbox, Range, Readout, Select, Twin, TwinCheck, register_check
from .widgets import PATTERNS, attention_pattern

__all__ = ["attention_pattern_twin"]


def attention_pattern_twin() -> Twin:
    """Chapter 9: pattern, length, window, dilation, global tokens, layers, causal."""
    return Twin(
        "attention_pattern",
        "Attention patterns",
        controls=[
            Select("pattern", "pattern", tuple(PATTERNS), "window"),
            Range("n", "length n", 16, 256, 16, 64),
            Range("window", "window", 0, 32, 1, 4),
            Range("dilation", "dilation", 1, 8, 1, 2),
            Range("n_global", "global tokens", 0, 8, 1, 2),
            Range("layers", "layers", 1, 8, 1, 3),
            Checkbox("causal", "causal", True),
        ],
        readouts=[
            Readout("pairs", "pairs scored"),
            Readout("fraction", "of n²"),
            Readout("rf_last", "last query reaches"),
            Readout("reach", "reach after each layer"),
        ],
        data={"patterns": list(PATTERNS)},
        note="Left: the mask, query i down, key j across (dark: may attend). Right: the "
        "positions the last query depends on after each layer (a token always keeps "
        "itself, through the residual connection).",
    )


def _reference(settings: dict, data: dict) -> dict:
    out = attention_pattern(
        settings["pattern"],
        int(settings["n"]),
        int(settings["window"]),
        int(settings["dilation"]),
        int(settings["n_global"]),
        int(settings["layers"]),
        bool(settings["causal"]),
        show=False,
    )
    return {
        "pairs": out["pairs"],
        "fraction": out["fraction"],
        "rf_last": out["receptive_field_last"],
        "reach": ", ".join(str(r) for r in out["reach_by_layer"]),
    }


register_check(
    "attention_pattern",
    TwinCheck(
        cases=[
            {"pattern": "window", "n": 64, "window": 4, "layers": 3, "causal": True},
            {"pattern": "full", "n": 32, "causal": False},
            {"pattern": "causal", "n": 48, "causal": False},
            {"pattern": "dilated", "n": 128, "window": 3, "dilation": 4, "layers": 4},
            {
                "pattern": "global+local",
                "n": 96,
                "window": 2,
                "n_global": 3,
                "layers": 2,
                "causal": False,
            },
            {"pattern": "window", "n": 256, "window": 0, "layers": 8, "causal": True},
        ],
        reference=_reference,
    ),
)
