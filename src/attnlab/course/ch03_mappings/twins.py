"""Chapter 3's static twin ``mapping_lab``: softmax, sparsemax and 1.5-entmax of scaled
scores, recomputed in the browser. The mechanism: :mod:`attnlab.course.twin`.
"""

from __future__ import annotations

import math

import torch

from ... import mappings as M
from ...registry import Registry
from ..twin import (
    Range,
    Readout,
    Select,
    Twin,
    TwinCheck,
    register_check,
)

__all__ = ["mapping_lab_twin"]

_MAPS = Registry(
    "mapping", {"softmax": M.softmax, "sparsemax": M.sparsemax, "entmax15": M.entmax15}
)


def _num(x: float) -> float:
    return float(x) + 0.0  # no -0.0


# ----------------------------------------------------------------- 1. mapping lab
def mapping_lab_twin(scores=(1.2, 0.9, 0.1, -0.4, 0.7, -1.0)) -> Twin:
    """Chapter 3: scale one set of scores ×0.1 … ×100 (log slider) and map them."""
    scores = [float(s) for s in scores]
    if not 1 <= len(scores) <= 12 or not all(math.isfinite(s) for s in scores):
        raise ValueError(f"mapping_lab_twin: give 1 to 12 finite scores, got {scores}")
    return Twin(
        "mapping_lab",
        "Mapping lab",
        controls=[
            Range("logscale", "scale (log)", -1, 2, 0.01, 0),
            Select(
                "mapping",
                "mapping",
                (
                    ("softmax", "softmax"),
                    ("sparsemax", "sparsemax"),
                    ("entmax15", "1.5-entmax"),
                ),
                "softmax",
            ),
        ],
        readouts=[
            Readout("support", "support"),
            Readout("entropy", "entropy"),
            Readout("max", "largest weight"),
            Readout("total", "sum"),
            Readout("jac", "‖∂p/∂s‖ (Frobenius)"),
        ],
        data={"scores": scores},
        note="The bars are the weights p of the scaled scores s (written under each "
        "key); grey keys get exactly zero. ‖∂p/∂s‖ is the size of the Jacobian "
        "diag(u) − u uᵀ / Σu, with u = p (softmax), the support's indicator "
        "(sparsemax) or √p (1.5-entmax), and the gradient that reaches the scores "
        "scales with it. For softmax and 1.5-entmax it shrinks smoothly towards 0 as "
        "the weights turn one-hot; for sparsemax it depends only on the support size k "
        "(it is √(k − 1)), so it stays constant while the support does, steps down as "
        "keys drop out, and is exactly 0 once one key is left.",
    )


def _mapping_lab_reference(settings: dict, data: dict) -> dict:
    scale = 10.0 ** float(settings["logscale"])
    z = scale * torch.tensor(data["scores"], dtype=torch.float64)
    p = _MAPS[settings["mapping"]](z)
    q = p[p > 0]
    out = {f"p:{j}": float(v) for j, v in enumerate(p)}
    jac = torch.autograd.functional.jacobian(_MAPS[settings["mapping"]], z)  # (n, n)
    out.update(
        jac=float(jac.norm()),
        support=int((p > 0).sum()),
        entropy=_num(-(q * q.log()).sum()),
        max=float(p.max()),
        total=float(p.sum()),
        logscale=scale,
    )
    return out


register_check(
    "mapping_lab",
    TwinCheck(
        cases=[
            {"logscale": 0, "mapping": "softmax"},
            {"logscale": 2, "mapping": "softmax"},
            {"logscale": 2, "mapping": "sparsemax"},
            {"logscale": 0, "mapping": "sparsemax"},
            {"logscale": -1, "mapping": "sparsemax"},
            {"logscale": 0.3, "mapping": "entmax15"},
            {"logscale": -1, "mapping": "entmax15"},
        ],
        reference=_mapping_lab_reference,
    ),
)
