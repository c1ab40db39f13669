"""Chapter 5's static twins: ``mask_lab`` (a masked softmax in float32 or emulated float16)
and ``sqrt_dk`` (the spread of q·k and the softmax peak, with and without 1/√d_k).
The mechanism: :mod:`attnlab.course.twin`.

Each ``*_twin()`` has a ``*_reference`` computed with attnlab and a registered
browser check (``tools/browser_check.py``).
"""

from __future__ import annotations

import torch

from ... import mappings as M
from ...scoring import dot_score, scaled_dot_score
from ..twin import (
    HEAD,
    Checkbox,
    Range,
    Readout,
    Select,
    Twin,
    TwinCheck,
    register_check,
)
from ..twin.rng import normals, uniforms  # noqa: F401

__all__ = ["mask_lab_twin", "sqrt_dk_twin", "sqrt_dk_stats"]

# ------------------------------------------------------------------ 3. mask lab
_MASK_OPTIONS = (
    ("boolean", "boolean (attnlab)"),
    ("-inf", "−inf"),
    ("-10000", "−10000"),
    ("-1e9", "−1e9"),
)


def mask_lab_twin() -> Twin:
    """Chapter 5: mask two padding keys with −inf, −10000 or −1e9, in float32 or
    (emulated) float16, with the scores scaled up and optionally a fully masked row."""
    from .widgets import _LAB_SCORES

    return Twin(
        "mask_lab",
        "Mask lab",
        controls=[
            Select("mask", "mask", _MASK_OPTIONS, "-10000"),
            Range("logscale", "scores × (log)", 0, 4.5, 0.25, 0),
            Select("dtype", "dtype", ("float32", "float16"), "float32"),
            Checkbox("whole_row", "mask every key of the last query"),
        ],
        readouts=[
            Readout("leak", "largest weight on padding (real queries)"),
            Readout("nan", "NaN anywhere"),
            Readout("mask_value", "mask value in this dtype"),
        ],
        data={"scores": _LAB_SCORES.double().tolist(), "n_pad": 2},
        note="float16 is emulated: every operation is rounded to float16 as PyTorch "
        "does (−1e9 does not fit and becomes −inf). Red cells are NaN.",
    )


def _mask_lab_reference(settings: dict, data: dict) -> dict:
    from .widgets import mask_lab

    mask = "boolean (attnlab)" if settings["mask"] == "boolean" else settings["mask"]
    scale = 10.0 ** float(settings["logscale"])
    r = mask_lab(mask, scale, settings["dtype"], bool(settings["whole_row"]), False)
    w = r["weights"]  # (T, S) float32
    out = {
        f"w:{i}:{j}": float(w[i, j])
        for i in range(w.shape[0])
        for j in range(w.shape[1])
    }
    mv = r["mask_value_in_dtype"]
    out.update(
        leak=r["leaked"],
        nan="yes" if r["has_nan"] else "no",
        mask_value="none" if mv is None else mv,
        logscale=scale,
    )
    return out


register_check(
    "mask_lab",
    TwinCheck(
        cases=[
            {"mask": "-10000", "logscale": 0, "dtype": "float32", "whole_row": False},
            {"mask": "-10000", "logscale": 4.5, "dtype": "float32", "whole_row": False},
            {"mask": "-1e9", "logscale": 4.5, "dtype": "float32", "whole_row": True},
            {"mask": "-1e9", "logscale": 1, "dtype": "float16", "whole_row": False},
            {"mask": "-inf", "logscale": 0, "dtype": "float32", "whole_row": True},
            {"mask": "-10000", "logscale": 3, "dtype": "float16", "whole_row": False},
            {"mask": "boolean", "logscale": 2, "dtype": "float16", "whole_row": True},
        ],
        reference=_mask_lab_reference,
        # float32: one ulp of exp may differ (torch's vectorised exp vs the browser's);
        # float16: one half-precision ulp (2^-11 relative) of a weight in [0, 1].
        tol={
            "w": lambda s: 1e-3 if s["dtype"] == "float16" else 1e-6,
            "leak": lambda s: 1e-3 if s["dtype"] == "float16" else 1e-6,
            "logscale": 1e-9,
        },
        default_tol=0.0,
    ),
)


# ------------------------------------------------------------------- 4. sqrt(d_k)
SQRT_DK = {"n_queries": 100, "n_keys": 16, "seed": 0}


def sqrt_dk_stats(d_k: int, n_queries: int = 100, n_keys: int = 16, seed: int = 0):
    """What the √d_k twin shows, computed with attnlab on the twin's random numbers.

    Query ``i`` and its ``n_keys`` keys are consecutive blocks of ``normals(seed + d_k,
    ...)``. Returns the sample std of the raw scores ``q·k`` and of the scaled ones
    ``q·k/√d_k``, and the mean largest softmax weight of each.
    """
    g = normals(seed + d_k, n_queries * (n_keys + 1) * d_k)
    g = torch.from_numpy(g).view(n_queries, n_keys + 1, d_k)  # (N, 1 + K, d_k)
    q, k = g[:, :1], g[:, 1:]  # (N, 1, d_k), (N, K, d_k)
    raw = dot_score(q, k)[:, 0]  # (N, 1, d_k) @ (N, d_k, K) -> (N, K)
    scaled = scaled_dot_score(q, k)[:, 0]  # (N, K)
    return {
        "sd_raw": float(raw.std()),
        "sd_scaled": float(scaled.std()),
        "peak_raw": float(M.softmax(raw).amax(-1).mean()),
        "peak_scaled": float(M.softmax(scaled).amax(-1).mean()),
    }


def sqrt_dk_twin() -> Twin:
    """Chapter 5: d_k from 1 to 1024; spread of the scores and peak of the softmax."""
    return Twin(
        "sqrt_dk",
        "Why divide by √d_k",
        controls=[Range("log2dk", "d_k (powers of 2)", 0, 10, 1, 6)],
        readouts=[
            Readout("sd_raw", "std of q·k"),
            Readout("sd_scaled", "std of q·k/√d_k"),
            Readout("peak_raw", "mean largest weight, unscaled"),
            Readout("peak_scaled", "scaled"),
        ],
        data=dict(SQRT_DK),
        note=f"{SQRT_DK['n_queries']} random queries, {SQRT_DK['n_keys']} random keys "
        "each, entries N(0, 1), drawn in your browser from a fixed seed.",
        head=HEAD,  # it follows a static figure, not a widget
    )


def _sqrt_dk_reference(settings: dict, data: dict) -> dict:
    d_k = 2 ** int(settings["log2dk"])
    out = sqrt_dk_stats(d_k, data["n_queries"], data["n_keys"], data["seed"])
    out["log2dk"] = d_k
    return out


register_check(
    "sqrt_dk",
    TwinCheck(
        cases=[{"log2dk": 0}, {"log2dk": 6}, {"log2dk": 10}],
        reference=_sqrt_dk_reference,
        default_tol=1e-9,
    ),
)
