"""Small plotting helpers shared by the chapters (matplotlib only)."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
import torch

__all__ = ["heatmap", "bars", "show", "describe"]


def _np(x):
    return x.detach().cpu().float().numpy() if isinstance(x, torch.Tensor) else x


def heatmap(
    weights,
    xlabels=None,
    ylabels=None,
    ax=None,
    title=None,
    xlabel="keys",
    ylabel="queries",
    annotate=None,
    vmin=0.0,
    vmax=None,
    cmap="viridis",
):
    """Draw a (T, S) weight matrix: rows are queries, columns are keys."""
    w = _np(weights)
    if w.ndim != 2:
        raise ValueError(f"heatmap expects a 2-D (T, S) matrix, got shape {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(0.5 * w.shape[1] + 2, 0.45 * w.shape[0] + 1.2))
    im = ax.imshow(w, cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto")
    if xlabels is not None:
        ax.set_xticks(range(len(xlabels)), list(xlabels), rotation=60, ha="right")
    if ylabels is not None:
        ax.set_yticks(range(len(ylabels)), list(ylabels))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = w.size <= 64
    if annotate:
        top = w.max() if vmax is None else vmax
        for i in range(w.shape[0]):
            for j in range(w.shape[1]):
                ax.text(
                    j,
                    i,
                    f"{w[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=10,
                    color="black" if w[i, j] > 0.6 * top else "white",
                )
    return im


def bars(values, labels=None, ax=None, title=None, ylim=None, color="C0"):
    """Bar chart of a 1-D vector (e.g. one row of attention weights)."""
    v = _np(values)
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 2.5))
    ax.bar(range(len(v)), v, color=color)
    if labels is not None:
        ax.set_xticks(range(len(v)), list(labels))
    if ylim is not None:
        ax.set_ylim(*ylim)
    if title:
        ax.set_title(title)
    return ax


def show(fig=None, alt: str = "") -> None:
    """Display ``fig`` (default: the current figure) as a PNG with alt text, and close it.

    ``alt`` says what the figure shows and the point it makes, in a sentence a reader
    who cannot see it would want ("Softmax weights at scale x1 and x100: at x100 one
    key takes 0.99"); build it from the run's numbers with an f-string. The site
    puts it on the ``<img>`` (``tools/figure_alt.py``); every figure in a chapter is
    shown through this function.
    """
    if not alt or not alt.strip():
        raise ValueError("show() needs alt text that says what the figure shows")
    from IPython.display import Image, display

    fig = plt.gcf() if fig is None else fig
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    plt.close(fig)
    display(Image(buf.getvalue(), metadata={"alt": alt.strip()}))


def describe(fig=None, lead: str = "") -> str:
    """A plain-text description of ``fig`` from its own words: ``lead``, then the
    figure's title and each panel's title and axis labels.

    For figures whose titles already carry the run's numbers (the widgets' figures:
    "'à' · softmax: support 6/6, sum 1.00"), this is a usable alt text:
    ``show(fig, alt=describe(fig, "Weights of the source words"))``. A chapter's
    figure deserves a sentence written for it (the point it makes), not this.
    """
    fig = plt.gcf() if fig is None else fig
    parts = [lead.strip().rstrip(".")] if lead and lead.strip() else []
    sup = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) else ""
    if sup.strip():
        parts.append(sup.strip())
    for ax in fig.axes:
        bits = [ax.get_title().strip()]
        x, y = ax.get_xlabel().strip(), ax.get_ylabel().strip()
        axes = ", ".join(f"{k} {v}" for k, v in (("x:", x), ("y:", y)) if v)
        if axes:
            bits.append(f"({axes})")
        text = " ".join(b for b in bits if b)
        if text:
            parts.append(text)
    return ". ".join(" ".join(p.split()) for p in parts if p) or "Figure"
