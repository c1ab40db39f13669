"""Widgets for chapter 12 (circuits: induction heads).

* :func:`ablation_losses` — the loss on each copy with each head switched off in turn
  (zero ablation through :func:`attnlab.explain.ablate_heads`), (L, H, 2).
* :func:`head_pattern` — one head's attention on one repeated sequence, the induction
  pattern's cells outlined; returns the head's previous-token and induction scores.

:func:`head_widget` wraps :func:`head_pattern` with a layer and a head slider.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from ...circuits import AttentionOnly, copy_losses, head_scores, pattern_mask
from ...explain import ablate_heads, attention_modules
from ...plotting import heatmap
from ...plotting import show as show_fig

__all__ = ["ablation_losses", "head_pattern", "head_widget"]


@torch.no_grad()
def ablation_losses(model: AttentionOnly, ids: torch.Tensor, n: torch.Tensor):
    """(L, H, 2): first- and second-copy loss with head (l, h) zero-ablated."""
    mhas = attention_modules(model)
    out = torch.zeros(len(mhas), mhas[0].n_heads, 2)
    for layer, mha in enumerate(mhas):
        for h in range(mha.n_heads):
            with ablate_heads(mhas, [(layer, h)]):
                out[layer, h] = torch.tensor(copy_losses(model(ids), ids, n))
    return out


@torch.no_grad()
def head_pattern(
    model: AttentionOnly, ids: torch.Tensor, layer: int = 1, head: int = 0, show=True
) -> dict:
    """Draw head ``(layer, head)`` on the sequence ``ids (1, T)``; returns its scores
    on that sequence (``previous``, ``induction``) and the figure."""
    if ids.dim() != 2 or ids.shape[0] != 1:
        raise ValueError(f"ids must be one sequence (1, T), got {tuple(ids.shape)}")
    L, H = len(model.blocks), model.cfg.n_heads
    if not (0 <= layer < L and 0 <= head < H):
        raise ValueError(f"(layer, head) must be in {L} x {H}, got ({layer}, {head})")
    model(ids)
    w = model.attention()[layer, 0, head]  # (T, T)
    toks = ["BOS"] + [str(int(t)) for t in ids[0, 1:]]
    fig, ax = plt.subplots(figsize=(6.5, 5.5))
    heatmap(
        w,
        toks,
        toks,
        ax=ax,
        annotate=False,
        vmax=1.0,
        title=f"layer {layer}, head {head}",
    )
    for i, j in pattern_mask(ids, "induction")[0].nonzero().tolist():
        ax.add_patch(
            plt.Rectangle(
                (j - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="crimson", linewidth=1.2
            )
        )
    full = model.attention()[:, :, head : head + 1]  # (L, 1, 1, T, T)
    scores = {
        k: float(head_scores(full, ids, k)[layer, 0]) for k in ("previous", "induction")
    }
    if show:
        show_fig(
            fig,
            alt=f"Attention of layer {layer}, head {head} on a repeated "
            f"sequence (rows: queries, columns: keys), the induction pattern's "
            f"cells outlined in red: previous-token score {scores['previous']:.2f}, "
            f"induction score {scores['induction']:.2f}.",
        )
    return scores | {"fig": fig}


def head_widget(model: AttentionOnly, ids: torch.Tensor):
    """Layer and head sliders over :func:`head_pattern` (needs a running kernel)."""
    import ipywidgets as W

    L, H = len(model.blocks), model.cfg.n_heads
    return W.interactive(
        lambda layer, head: head_pattern(model, ids, layer, head) and None,
        layer=W.IntSlider(value=L - 1, min=0, max=L - 1, description="layer"),
        head=W.IntSlider(value=0, min=0, max=H - 1, description="head"),
    )
