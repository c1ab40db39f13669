"""Chapter 7's static twin ``positional``: the sinusoidal encoding table, recomputed in
the browser. The mechanism: :mod:`attnlab.course.twin`.
"""

from __future__ import annotations

import math

import torch

from ...positional import sinusoidal_encoding
from ..twin import (
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
        ],
        readouts=[
            Readout("value", "PE[position, feature]"),
            Readout("wavelength", "wavelength"),
        ],
        data={"n_positions": n_positions, "d_model": d_model, "base": base},
        note="Red is +1, blue −1. Low features turn fast (short wavelengths), high "
        "features slowly: together they give every position a distinct code.",
    )


def _positional_reference(settings: dict, data: dict) -> dict:
    pos, dim = int(settings["position"]), int(settings["dim"])
    P, D, base = data["n_positions"], data["d_model"], data["base"]
    pe = sinusoidal_encoding(P, D, base=base, dtype=torch.float64)
    return {
        "value": float(pe[pos, dim]),
        "wavelength": 2 * math.pi * base ** ((dim - dim % 2) / D),
        "position": pos,
        "dim": dim,
    }


register_check(
    "positional",
    TwinCheck(
        cases=[
            {"position": 10, "dim": 4},
            {"position": 0, "dim": 1},
            {"position": 63, "dim": 0},
            {"position": 37, "dim": 31},
        ],
        reference=_positional_reference,
        default_tol=1e-12,
    ),
)
