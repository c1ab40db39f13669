"""Widgets for chapter 8 (fast exact attention).

* :func:`tile_map` — for a sequence length and a block size, which tiles of the (T, S)
  score matrix the tiled kernel computes, which it skips (causal), and how much memory
  is live: the materialised scores against one tile plus the O(T) statistics.

Returns the numbers it drew, so the tests can check them.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from ...efficient import tile_plan

__all__ = ["live_memory", "tile_map", "tile_map_widget"]

_CODE = {"skip": 0, "masked": 1, "full": 2}


def live_memory(
    n: int, block: int, n_heads: int = 8, d_head: int = 64, bytes_per: int = 4
) -> dict:
    """Bytes live during one forward, B = 1: materialising vs tiled.

    Materialising: q, k, v, out (4·n·Dh per head) plus scores and weights (2·n² per
    head). Tiled: q, k, v, out, the running max, sum and log-sum-exp (3·n per head), and
    one tile of scores (block²) with its running output (block·Dh) per head."""
    io = 4 * n * d_head
    naive = n_heads * (io + 2 * n * n) * bytes_per
    tiled = n_heads * (io + 3 * n + block * block + block * d_head) * bytes_per
    return {"naive_bytes": naive, "tiled_bytes": tiled, "ratio": naive / tiled}


def tile_map(
    n: int = 512,
    block: int = 64,
    causal: bool = True,
    n_heads: int = 8,
    d_head: int = 64,
    show: bool = True,
) -> dict:
    """Draw the tiles of an (n, n) score matrix: computed in full, computed with a
    mask (the diagonal), or skipped; and the live memory of both algorithms."""
    plan = tile_plan(n, n, block, block, causal=causal)
    flat = [c for row in plan for c in row]
    counts = {kind: flat.count(kind) for kind in ("full", "masked", "skip")}
    mem = live_memory(n, block, n_heads, d_head)
    out = {**counts, "tiles": len(flat), "computed": counts["full"] + counts["masked"]}
    out["computed_fraction"] = out["computed"] / out["tiles"]
    out.update(mem)
    if show:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(6.5, 3.4), width_ratios=[1, 1.2])
        grid = np.array([[_CODE[c] for c in row] for row in plan])
        cmap = plt.matplotlib.colors.ListedColormap(["#eeeeee", "#f4a259", "#5b8e7d"])
        ax.imshow(grid, cmap=cmap, vmin=0, vmax=2)
        nb = grid.shape[0]
        ax.set_xticks(np.arange(-0.5, nb, 1), minor=True)
        ax.set_yticks(np.arange(-0.5, nb, 1), minor=True)
        ax.grid(which="minor", color="white", linewidth=1 if nb < 40 else 0)
        ax.tick_params(which="both", length=0, labelbottom=False, labelleft=False)
        ax.set_xlabel(f"key blocks ({block} keys each)")
        ax.set_ylabel(f"query blocks ({block} queries each)")
        ax.set_title(
            f"{out['full']} full, {out['masked']} masked, {out['skip']} skipped "
            f"of {out['tiles']}",
            fontsize=10,
        )
        mib = [mem["naive_bytes"] / 2**20, mem["tiled_bytes"] / 2**20]
        ax2.bar(
            ["materialising", f"tiled (block {block})"],
            mib,
            color=["#c44e52", "#5b8e7d"],
        )
        ax2.set_ylabel("live MiB (H=8, Dh=64, fp32)")
        ax2.tick_params(labelsize=10)
        ax2.set_title(f"n = {n}: {mem['ratio']:.0f}x less memory", fontsize=10)
        for i, m in enumerate(mib):
            ax2.text(i, m, f"{m:.1f}", ha="center", va="bottom")
        fig.tight_layout()
        from ...plotting import show as show_fig

        show_fig(
            fig,
            alt=f"Tiles of a {'causal' if causal else 'full'} pass at n = {n} "
            f"with blocks of {block}: {out['full']} full, {out['masked']} masked, "
            f"{out['skip']} skipped of {out['tiles']}; live memory "
            f"{mib[0]:.1f} MiB materialising against {mib[1]:.1f} MiB tiled, "
            f"{mem['ratio']:.0f} times less.",
        )
    return out


def tile_map_widget():
    """Sliders for :func:`tile_map`."""
    import ipywidgets as w

    return w.interactive(
        tile_map,
        n=w.IntSlider(value=512, min=64, max=8192, step=64, continuous_update=False),
        block=w.Dropdown(options=[16, 32, 64, 128, 256, 512], value=64),
        causal=w.Checkbox(value=True, description="causal"),
        n_heads=w.fixed(8),
        d_head=w.fixed(64),
        show=w.fixed(True),
    )
