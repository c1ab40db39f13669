"""Widgets for chapter 10 (attention in a pretrained Transformer).

* :func:`head_view` — one head of all-MiniLM-L6-v2 on a sentence, drawn as
  token-to-token lines (queries on the left, keys on the right, line width and
  opacity = weight) or as a heatmap, in matplotlib. The idea is bertviz's head view
  (Vig, 2019); the drawing is our own.
* :func:`head_view_widget` — the same with a text box, a layer and a head slider.

Layers and heads are counted from 0, as they are indexed: ``attentions[layer][:, head]``.
The model is loaded once (:func:`minilm`) and kept.
"""

from __future__ import annotations

from functools import lru_cache

import matplotlib.pyplot as plt

from ...plotting import heatmap

__all__ = ["minilm", "head_view", "head_view_widget", "draw_lines"]


@lru_cache(maxsize=1)
def minilm():
    """The shared :class:`attnlab.pretrained.MiniLM` (loaded on first use)."""
    from ...pretrained import MiniLM

    return MiniLM.load()


def draw_lines(weights, tokens, ax=None, query=None, color="C0", title=None):
    """Token-to-token lines for a (T, T) attention map: row i (left) -> key j (right).

    ``query`` (an index) fades every other query's lines. Returns the axes.
    """
    w = weights.detach().cpu().float()
    T = len(tokens)
    if w.shape != (T, T):
        raise ValueError(
            f"weights must be ({T}, {T}) for {T} tokens, got {tuple(w.shape)}"
        )
    if ax is None:
        _, ax = plt.subplots(figsize=(3.4, 0.32 * T + 0.8))
    top = float(w.max()) or 1.0
    for i in range(T):
        dim = query is not None and i != query
        for j in range(T):
            a = float(w[i, j]) / top
            if a < 0.02:
                continue  # invisible anyway; keeps the figure light
            ax.plot(
                [0, 1],
                [-i, -j],
                color=color,
                lw=0.4 + 3.0 * a,
                alpha=(0.06 if dim else 0.9) * a,
                solid_capstyle="round",
            )
    for i, t in enumerate(tokens):
        bold = "bold" if query == i else "normal"
        ax.text(-0.04, -i, t, ha="right", va="center", fontsize=10, fontweight=bold)
        ax.text(1.04, -i, t, ha="left", va="center", fontsize=10)
    ax.set_xlim(-0.6, 1.6)
    ax.set_ylim(-T + 0.4, 0.6)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    return ax


def head_view(
    sentence: str = "time flies like an arrow",
    layer: int = 0,
    head: int = 0,
    style: str = "lines",
    query: int | None = None,
    show: bool = True,
    model=None,
) -> dict:
    """One head of MiniLM on ``sentence``: lines (``style="lines"``) or a heatmap.

    Returns ``{"tokens", "weights" (T, T), "attended" (T,)}``: ``attended[i]`` is the
    key that query ``i`` gives the most weight to.
    """
    model = minilm() if model is None else model
    L, H = model.cfg.n_layers, model.cfg.n_heads
    if not 0 <= layer < L:
        raise ValueError(f"layer must be in 0..{L - 1}, got {layer}")
    if not 0 <= head < H:
        raise ValueError(f"head must be in 0..{H - 1}, got {head}")
    if style not in ("lines", "heatmap"):
        raise ValueError(f"style must be 'lines' or 'heatmap', got {style!r}")
    tokens, maps = model.attention_maps(sentence)  # (L, H, T, T)
    if query is not None and not 0 <= query < len(tokens):
        raise ValueError(f"query must be in 0..{len(tokens) - 1}, got {query}")
    w = maps[layer, head]  # (T, T)
    if show:
        title = f"layer {layer}, head {head}"
        if style == "lines":
            draw_lines(w, tokens, query=query, title=title)
        else:
            side = min(6.5, 0.42 * len(tokens) + 2)
            _, ax = plt.subplots(figsize=(side, min(6.5, 0.38 * len(tokens) + 1)))
            heatmap(w, tokens, tokens, ax=ax, vmax=1.0, title=title, annotate=False)
        top = [tokens[int(j)] for j in w.argmax(-1)]
        from ...plotting import show as show_fig

        show_fig(
            alt=f"MiniLM {title} on '{sentence}' as {style}: the favourite key of "
            "each token is " + ", ".join(f"{a} -> {b}" for a, b in zip(tokens, top))
        )
    return {"tokens": tokens, "weights": w, "attended": w.argmax(-1)}


def head_view_widget(sentence: str = "time flies like an arrow"):
    """A text box, a layer and a head slider and a style switch for :func:`head_view`."""
    import ipywidgets as w

    def view(sentence, layer, head, style):
        if not sentence.strip():
            print("type a sentence")
            return None
        head_view(sentence, layer, head, style)
        return None

    cfg = minilm().cfg
    return w.interactive(
        view,
        sentence=w.Text(value=sentence, continuous_update=False),
        layer=w.IntSlider(
            value=0, min=0, max=cfg.n_layers - 1, continuous_update=False
        ),
        head=w.IntSlider(value=0, min=0, max=cfg.n_heads - 1, continuous_update=False),
        style=w.Dropdown(options=["lines", "heatmap"], value="lines"),
    )
