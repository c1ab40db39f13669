"""Widgets for chapter 9 (beyond quadratic attention).

* :func:`pattern_mask` — the boolean (n, n) mask of an attention pattern: full, causal,
  window, dilated window, global + local (Longformer, Beltagy et al. 2020), or strided
  (Sparse Transformer, Child et al. 2019: a local window of ``window`` plus every
  ``window``-th position, full reach in two layers). ``True`` = may attend.
* :func:`receptive_field` — how many positions each query can reach after L layers
  (the boolean L-th power of the mask).
* :func:`attention_pattern` — draws a pattern, its cost (pairs scored) and the receptive
  field of the last query after L layers.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import torch

from ...masking import PATTERNS
from ...masking import sparse_pattern_mask as pattern_mask

__all__ = [
    "PATTERNS",
    "pattern_mask",
    "receptive_field",
    "attention_pattern",
    "attention_pattern_widget",
]


def receptive_field(mask: torch.Tensor, layers: int) -> torch.Tensor:
    """(n,) number of positions each query depends on after ``layers`` layers with
    this mask (each layer mixes along the allowed edges; a token keeps itself through
    the residual connection)."""
    if layers < 1:
        raise ValueError(f"layers must be >= 1, got {layers}")
    n = mask.shape[-1]
    step = (mask | torch.eye(n, dtype=torch.bool)).float()  # (n, n)
    reach = torch.eye(n)
    for _ in range(layers):
        reach = ((reach @ step) > 0).float()  # (n, n): who reaches whom
    return reach.sum(-1).long()  # (n,)


def attention_pattern(
    pattern: str = "window",
    n: int = 64,
    window: int = 4,
    dilation: int = 2,
    n_global: int = 2,
    layers: int = 3,
    causal: bool = True,
    show: bool = True,
) -> dict:
    """Draw ``pattern``'s mask and the last query's receptive field after ``layers``."""
    mask = pattern_mask(pattern, n, window, dilation, n_global, causal)
    rf = receptive_field(mask, layers)
    cost = int(mask.sum())
    out = {
        "mask": mask,
        "pairs": cost,
        "fraction": cost / n**2,
        "receptive_field_last": int(rf[-1]),
        "receptive_field": rf,
    }
    n_steps = (mask | torch.eye(n, dtype=torch.bool)).float()
    reach = torch.zeros(n)
    reach[-1] = 1
    rows = []
    for _ in range(layers):
        reach = ((reach @ n_steps) > 0).float()  # who the last query depends on
        rows.append(reach.numpy())
    out["reach_by_layer"] = [int(r.sum()) for r in rows]
    if show:
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(6.5, 3.2))
        ax.imshow(mask.numpy(), cmap="Greys", interpolation="nearest")
        ax.set_xlabel("key j")
        ax.set_ylabel("query i")
        ax.set_title(
            f"{pattern}: {cost} pairs ({out['fraction']:.0%} of n²)", fontsize=10
        )
        ax2.imshow(np.array(rows), cmap="Blues", aspect="auto", interpolation="nearest")
        ax2.set_yticks(range(layers), [f"layer {l + 1}" for l in range(layers)])
        ax2.set_xlabel("position")
        ax2.set_title(
            f"last query sees {out['receptive_field_last']} of {n} after {layers} layers",
            fontsize=10,
        )
        fig.tight_layout()
        from ...plotting import show as show_fig

        show_fig(
            fig,
            alt=f"The {pattern} pattern on {n} positions scores {cost} pairs "
            f"({out['fraction']:.0%} of n²); after {layers} layers the last query "
            f"depends on {out['receptive_field_last']} of {n} positions.",
        )
    return out


def attention_pattern_widget():
    """Controls for :func:`attention_pattern`."""
    import ipywidgets as w

    return w.interactive(
        attention_pattern,
        pattern=w.Dropdown(options=PATTERNS, value="window"),
        n=w.IntSlider(value=64, min=16, max=256, step=16, continuous_update=False),
        window=w.IntSlider(value=4, min=0, max=32, continuous_update=False),
        dilation=w.IntSlider(value=2, min=1, max=8, continuous_update=False),
        n_global=w.IntSlider(value=2, min=0, max=8, continuous_update=False),
        layers=w.IntSlider(value=3, min=1, max=8, continuous_update=False),
        causal=w.Checkbox(value=True, description="causal"),
        show=w.fixed(True),
    )
