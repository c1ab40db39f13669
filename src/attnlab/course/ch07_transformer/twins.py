"""Chapter 7's static twins (positional; see :mod:`attnlab.course.twin`).

What the browser computes: the sinusoidal encoding table. Next to each ``*_twin()``, a ``*_reference``
computes with attnlab what the twin must display, and ``register_check`` tells the
browser check (``tools/browser_check.py``) which settings to try.
"""

from __future__ import annotations

import math

import torch

from ...positional import sinusoidal_encoding
from ..twin import (
    HEAD,
    Range,
    Readout,
    Twin,
    TwinCheck,
    register_check,
)

__all__ = ["positional_twin"]


# ------------------------------------------------------------ 5. positional enc.
def positional_twin(n_positions: int = 64, d_model: int = 32, base: float = 10000.0):
    """Chapter 7: the sinusoidal table; sliders pick a position and a feature."""
    if n_positions < 2 or d_model < 2:
        raise ValueError(
            f"positional_twin needs n_positions >= 2 and d_model >= 2, got "
            f"{n_positions}, {d_model}"
        )
    return Twin(
        "positional",
        "Sinusoidal positional encoding",
        controls=[
            Range("position", "position", 0, n_positions - 1, 1, 10),
            Range("dim", "feature", 0, d_model - 1, 1, 4),
            Range("offset", "offset k", -32, 32, 1, 4),
        ],
        readouts=[
            Readout("value", "PE[position, feature]"),
            Readout("wavelength", "wavelength"),
            Readout("dot", "PE[position] · PE[position + k]"),
        ],
        data={"n_positions": n_positions, "d_model": d_model, "base": base},
        note="Red is +1, blue −1. Low features turn fast (short wavelengths), high "
        "features slowly: together they give every position a distinct code. Bottom: "
        "the dot product of two positions' codes depends only on their offset k "
        "(it is the sum of cos(k / wavelength) over the pairs of features), the same "
        "at every position: move the position and the curve stays put.",
        head=HEAD,  # it follows a static figure, not a widget
    )


def _positional_reference(settings: dict, data: dict) -> dict:
    pos, dim = int(settings["position"]), int(settings["dim"])
    P, D, base = data["n_positions"], data["d_model"], data["base"]
    pe = sinusoidal_encoding(P, D, base=base, dtype=torch.float64)
    k = int(settings.get("offset", 4))
    # the identity the panel shows: PE[p] . PE[p + k] = sum over pairs of cos(w_i k),
    # w_i = base^(-2i/D); checked against the table itself in tests/test_widgets_twin.py
    freqs = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    return {
        "value": float(pe[pos, dim]),
        "wavelength": 2 * math.pi * base ** ((dim - dim % 2) / D),
        "dot": float(torch.cos(freqs * k).sum()),
        "position": pos,
        "dim": dim,
    }


register_check(
    "positional",
    TwinCheck(
        cases=[
            {"position": 10, "dim": 4},
            {"position": 0, "dim": 1, "offset": -32},
            {"position": 63, "dim": 0, "offset": 32},
            {"position": 37, "dim": 31, "offset": 0},
            {"position": 5, "dim": 2, "offset": -7},
        ],
        reference=_positional_reference,
        tol={"dot": 1e-9},
        default_tol=1e-12,
    ),
)
