"""Chapter 13's static twin: RoPE's score against the offset, in the browser.

:func:`rope_twin` draws ``<RoPE(q, m), RoPE(k, n)>`` for a fixed query and key
(width 16, base 10 000, interleaved pairs) against the offset ``m - n``, with the
positions optionally divided by a position-interpolation factor. The browser computes
the rotation itself (``rope.js``); the browser check compares it with
:class:`attnlab.modern.RoPE`, rotating the query at position ``offset`` (and at
``1000 + offset``) and the key at ``0`` (and ``1000``).
"""

from __future__ import annotations

import torch

from ...modern import RoPE
from ..twin import Range, Readout, Select, Twin, TwinCheck, register_check

__all__ = ["rope_twin"]

BASE, D, MAX_OFFSET = 10000.0, 16, 128


def _vectors() -> tuple[list[float], list[float]]:
    g = torch.Generator().manual_seed(13)
    q = torch.randn(D, generator=g, dtype=torch.float64)
    k = q + 0.5 * torch.randn(D, generator=g, dtype=torch.float64)  # q and k aligned
    return [round(float(x), 4) for x in q], [round(float(x), 4) for x in k]


def rope_twin() -> Twin:
    """Chapter 13: the offset m - n and a position-interpolation factor."""
    q, k = _vectors()
    return Twin(
        "rope",
        "RoPE: the score depends on the offset only",
        controls=[
            Range("offset", "offset m - n", 0, MAX_OFFSET, 1, 8),
            Select("scale", "positions divided by (PI)", ("1", "2", "4", "8"), "1"),
        ],
        readouts=[
            Readout("score", "score at this offset"),
            Readout("score_zero", "score at offset 0"),
            Readout("same_offset_far", "same offset, 1000 positions later"),
        ],
        data={"q": q, "k": k, "base": BASE, "max_offset": MAX_OFFSET},
        note="One query and one key (16 features, base 10 000), rotated at positions m "
        "and n. The curve is their score for every offset 0-128: it depends on m - n "
        "only, so moving both 1000 positions on gives the same number. Dividing the "
        "positions by a factor (position interpolation) stretches the curve.",
    )


def _score(q, k, m: int, n: int, scale: float) -> float:
    sc = None if scale == 1 else {"type": "linear", "factor": scale}
    rope = RoPE(BASE, "interleaved", sc)
    qv = torch.tensor(q, dtype=torch.float64).view(1, 1, 1, -1)
    kv = torch.tensor(k, dtype=torch.float64).view(1, 1, 1, -1)
    return float((rope(qv, torch.tensor([m])) * rope(kv, torch.tensor([n]))).sum())


def _reference(settings: dict, data: dict) -> dict:
    off, scale = int(settings["offset"]), float(settings["scale"])
    q, k = data["q"], data["k"]
    return {
        "score": _score(q, k, off, 0, scale),
        "score_zero": _score(q, k, 0, 0, scale),
        "same_offset_far": _score(q, k, 1000 + off, 1000, scale),
    }


register_check(
    "rope",
    TwinCheck(
        cases=[
            {"offset": 8, "scale": "1"},
            {"offset": 0, "scale": "1"},
            {"offset": 127, "scale": "8"},
            {"offset": 50, "scale": "2"},
        ],
        reference=_reference,
        default_tol=1e-9,
    ),
)
