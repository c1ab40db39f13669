"""The tiles of tiled attention and their masks: the tile sizes, the input checks and
the plan of which tiles a mask skips (the band mask itself, and its checks, live in
:mod:`attnlab.masking`; re-exported by :mod:`attnlab.efficient`)."""

from __future__ import annotations

import math

import torch

from ..attention import check_qkv
from ..masking import check_align, diagonal_offset

# rows of queries per tile (benchmarked on the 2-core CPU: bench/attention.py)
BLOCK_Q = 256
BLOCK_K = 256  # columns of keys per tile
LOG2E = 1.0 / math.log(2.0)  # exp(x) = exp2(x * LOG2E)


# ----------------------------------------------------------------------------- checks
def check_tiled_qkv(q, k, v, fn: str, gqa: bool = False) -> None:
    """As every attention function; ``gqa``: k, v may have fewer heads (checked by the
    caller)."""
    check_qkv(q, k, v, fn)  # types, Dh, S, dtype: as every attention function
    if not gqa and not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"{fn}: q, k, v must share their leading (batch, head) dims, got "
            f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if gqa and not (
        q.dim() == k.dim() == v.dim() >= 3
        and q.shape[:-3] == k.shape[:-3] == v.shape[:-3]
        and k.shape[-3] == v.shape[-3]
    ):
        raise ValueError(
            f"{fn}: q (..., H, T, Dh) and k, v (..., H_kv, S, D) must have the same rank "
            f"and batch dims, k and v the same heads, got q {tuple(q.shape)}, "
            f"k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if not q.is_floating_point():
        raise TypeError(f"{fn}: q, k, v must be floating point, got {q.dtype}")
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"{fn}: q, k, v on different devices: {q.device}, {k.device}, {v.device}"
        )


# ------------------------------------------------------------------- tiles and masks
def tile_mask(i0, i1, j0, j1, causal: bool, window, device, offset: int = 0):
    """Which entries of the tile rows [i0, i1) x columns [j0, j1) may attend.

    ``offset`` shifts the diagonal: query ``i`` is aligned with key ``i + offset``.
    Returns ``"skip"`` if none may (the tile is never computed), ``None`` if all may
    (no mask needed), else a boolean (i1 - i0, j1 - j0) mask."""
    i0, i1 = i0 + offset, i1 + offset  # rows in key coordinates
    lo, hi = -math.inf, math.inf  # allowed j - i in [lo, hi]
    if causal:
        hi = 0
    if window is not None:
        lo, hi = max(lo, -window), min(hi, window)
    dmin, dmax = j0 - (i1 - 1), (j1 - 1) - i0  # extreme values of j - i in the tile
    if dmax < lo or dmin > hi:
        return "skip"
    if dmin >= lo and dmax <= hi:
        return None
    d = (
        torch.arange(j0, j1, device=device)[None, :]
        - torch.arange(i0, i1, device=device)[:, None]
    )
    return (d >= lo) & (d <= hi)  # (i1 - i0, j1 - j0)


def tile_plan(
    T: int,
    S: int,
    block_q: int,
    block_k: int,
    causal: bool = False,
    window: int | None = None,
    align: str = "top_left",
) -> list[list[str]]:
    """For each (row block, column block): ``"full"``, ``"masked"`` or ``"skip"``.

    The plan the kernels follow; chapter 8's widget draws it."""
    check_align(align)
    off = diagonal_offset(T, S, align)
    plan = []
    for i0 in range(0, T, block_q):
        row = []
        for j0 in range(0, S, block_k):
            m = tile_mask(
                i0,
                min(i0 + block_q, T),
                j0,
                min(j0 + block_k, S),
                causal,
                window,
                "cpu",
                off,
            )
            row.append(
                "skip" if isinstance(m, str) else "full" if m is None else "masked"
            )
        plan.append(row)
    return plan
