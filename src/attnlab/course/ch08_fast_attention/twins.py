"""Chapter 8's static twin: the tile map that works on the website.

:func:`tile_map_twin` mirrors :func:`attnlab.widgets.fast_attention.tile_map_widget`:
for a sequence length, a block size and causal or not, which tiles of the (n, n) score
matrix the tiled kernel computes in full, computes with a mask (the diagonal) or skips,
and the live memory of materialising attention against tiling it. The browser
computes the plan and the bytes itself (``tile_map.js``); the browser check
compares them with :func:`attnlab.widgets.fast_attention.tile_map` (which calls
:func:`attnlab.efficient.tile_plan`, the plan the kernels follow).
"""

from __future__ import annotations

from ..twin import Checkbox, Range, Readout, Select, Twin, TwinCheck, register_check
from .widgets import tile_map

__all__ = ["tile_map_twin"]

BLOCKS = (16, 32, 64, 128, 256, 512)


def tile_map_twin(n_heads: int = 8, d_head: int = 64) -> Twin:
    """Chapter 8: sequence length, block size, causal; tiles and live memory."""
    if n_heads < 1 or d_head < 1:
        raise ValueError(f"need n_heads >= 1 and d_head >= 1, got {n_heads}, {d_head}")
    return Twin(
        "tile_map",
        "Which tiles are computed",
        controls=[
            Range("n", "sequence length n", 64, 8192, 64, 512),
            Select("block", "block size", tuple(str(b) for b in BLOCKS), "64"),
            Checkbox("causal", "causal", True),
        ],
        readouts=[
            Readout("full", "full tiles"),
            Readout("masked", "masked tiles"),
            Readout("skip", "skipped tiles"),
            Readout("computed_fraction", "computed"),
            Readout("naive_mib", "materialising, MiB"),
            Readout("tiled_mib", "tiled, MiB"),
            Readout("ratio", "memory saved"),
        ],
        data={"n_heads": n_heads, "d_head": d_head, "bytes_per": 4},
        note=f"Green: tiles computed in full; orange: computed with a mask (the "
        f"diagonal); grey: skipped. Memory for one sequence, {n_heads} heads of "
        f"{d_head} dimensions in float32: q, k, v and the output, plus the n×n scores "
        f"and weights (materialising) or one tile and the running statistics (tiled).",
    )


def _reference(settings: dict, data: dict) -> dict:
    out = tile_map(
        int(settings["n"]),
        int(settings["block"]),
        bool(settings["causal"]),
        data["n_heads"],
        data["d_head"],
        show=False,
    )
    return {
        "full": out["full"],
        "masked": out["masked"],
        "skip": out["skip"],
        "computed_fraction": out["computed_fraction"],
        "naive_mib": out["naive_bytes"] / 2**20,
        "tiled_mib": out["tiled_bytes"] / 2**20,
        "ratio": out["ratio"],
    }


register_check(
    "tile_map",
    TwinCheck(
        cases=[
            {"n": 512, "block": "64", "causal": True},
            {"n": 512, "block": "64", "causal": False},
            {"n": 1000, "block": "128", "causal": True},
            {"n": 4096, "block": "256", "causal": True},
            {"n": 192, "block": "16", "causal": True},
            {"n": 64, "block": "512", "causal": True},
        ],
        reference=_reference,
        default_tol=1e-9,
    ),
)
