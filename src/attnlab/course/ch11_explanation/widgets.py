"""Widgets for chapter 11 (is attention explanation?).

* :func:`importance_panel` — one example's tokens under several importance measures
  (attention, gradient × input, leave-one-out, ...) side by side, the ground-truth
  rationale marked; returns each measure's top token and recall@k.
* :func:`adversary_view` — J&W's adversary on one example at a given eps: the original
  and the adversarial weights, their JSD and the change of the output.

The widgets (:func:`importance_widget`, :func:`adversary_widget`) wrap them with
ipywidgets sliders; the model's numbers are computed before, in the notebook.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from ...explain import adversarial_attention, rationale_recall
from ...plotting import show as show_fig

__all__ = [
    "importance_panel",
    "importance_widget",
    "adversary_view",
    "adversary_widget",
    "EPS_STEPS",
]

EPS_STEPS = [0.0, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3]  # the adversary slider's stops


def _strip(ax, tokens, rows: dict, rationale=None, cmap="Blues"):
    names = list(rows)
    M = np.stack([np.asarray(rows[n], dtype=float) for n in names])  # (measures, T)
    M = M / np.maximum(M.max(1, keepdims=True), 1e-12)  # each row scaled to its max
    ax.imshow(M, cmap=cmap, aspect="auto", vmin=0, vmax=1, interpolation="nearest")
    ax.set_yticks(range(len(names)), names)
    ax.set_xticks(range(len(tokens)), tokens, rotation=60, ha="right", fontsize=10)
    if rationale is not None:
        for j in np.flatnonzero(np.asarray(rationale)):
            ax.add_patch(
                plt.Rectangle(
                    (j - 0.5, -0.5),
                    1,
                    len(names),
                    fill=False,
                    edgecolor="crimson",
                    linewidth=2,
                )
            )
            ax.get_xticklabels()[j].set_color("crimson")


def importance_panel(
    tokens: Sequence[str],
    scores: dict,
    rationale=None,
    title: str = "",
    show: bool = True,
) -> dict:
    """Draw ``scores`` ({measure name: (T,) non-negative scores}) over ``tokens``.

    Each row is scaled to its own maximum (only the ranking matters to the
    comparisons of this chapter); the tokens of ``rationale`` ((T,) bool) are boxed in
    red. Returns ``{"top": {name: top token}, "recall": {name: recall@k}}`` (recall
    only with a rationale).
    """
    T = len(tokens)
    if not scores:
        raise ValueError("scores must name at least one measure")
    for name, s in scores.items():
        if len(s) != T:
            raise ValueError(f"scores[{name!r}] has {len(s)} values for {T} tokens")
    out = {"top": {n: tokens[int(np.argmax(np.asarray(s)))] for n, s in scores.items()}}
    if rationale is not None:
        r = torch.as_tensor(np.asarray(rationale), dtype=torch.bool)[None]
        m = torch.ones_like(r)
        out["recall"] = {
            n: float(
                rationale_recall(
                    torch.as_tensor(np.asarray(s, dtype=float))[None], r, m
                )
            )
            for n, s in scores.items()
        }
    if show:
        fig, ax = plt.subplots(figsize=(6.5, 0.5 * len(scores) + 1.6))
        _strip(ax, list(tokens), scores, rationale)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        tops = ", ".join(f"{n} ranks '{t}' first" for n, t in out["top"].items())
        show_fig(fig, alt=f"Importance of each token of {title}: {tops}.")
    return out


def importance_widget(data, scores: dict, predictions=None):
    """A slider over the examples of ``data`` (:class:`attnlab.data.RationaleData`)
    showing :func:`importance_panel`; ``scores``: {name: (N, T) tensor}."""
    import ipywidgets as w

    def view(index=0):
        n = int(data.mask[index].sum())
        title = f"example {index}: label {int(data.labels[index])}"
        if predictions is not None:
            title += f", p(1) = {float(predictions[index]):.2f}"
        rows = {k: v[index, :n].tolist() for k, v in scores.items()}
        importance_panel(
            data.tokens(index), rows, data.rationale[index, :n].tolist(), title
        )

    slider = w.IntSlider(value=0, min=0, max=len(data) - 1, continuous_update=False)
    return w.interactive(view, index=slider)


def adversary_view(
    decode: Callable,
    h: torch.Tensor,
    weights: torch.Tensor,
    tokens: Sequence[str],
    eps: float = 0.01,
    steps: int = 200,
    show: bool = True,
) -> dict:
    """J&W's adversary (:func:`attnlab.explain.adversarial_attention`) on one example.

    ``h`` (T, ...) the encoded tokens, ``weights`` (T,) the model's attention,
    ``decode(h (B, T, ...), w (B, T)) -> logit (B,)``. Draws the original and the
    adversarial weights; returns ``{"jsd", "dy", "p", "adversarial"}`` (``p``: the
    original probability; ``dy`` <= ``eps`` always).
    """
    T = len(tokens)
    if weights.shape != (T,) or h.shape[0] != T:
        raise ValueError(
            f"need weights (T,) and h (T, ...) for {T} tokens, got {tuple(weights.shape)} "
            f"and {tuple(h.shape)}"
        )
    mask = torch.ones(1, T, dtype=torch.bool)
    adv, div, dy = adversarial_attention(
        decode, h[None], weights[None], mask, eps=eps, k=4, steps=steps
    )
    with torch.no_grad():
        p = float(torch.sigmoid(decode(h[None], weights[None]))[0])
    out = {"jsd": float(div[0]), "dy": float(dy[0]), "p": p, "adversarial": adv[0]}
    if show:
        fig, ax = plt.subplots(figsize=(6.5, 3.2))
        x = np.arange(T)
        ax.bar(x - 0.2, weights.detach().numpy(), 0.4, label="model's attention")
        ax.bar(x + 0.2, adv[0].numpy(), 0.4, label="adversarial attention")
        ax.set_xticks(x, list(tokens), rotation=60, ha="right", fontsize=10)
        ax.set_ylabel("weight")
        ax.set_title(
            f"eps = {eps:g}: JSD = {out['jsd']:.3f} (max 0.693),\n"
            f"|Δp| = {out['dy']:.4f}, p = {p:.3f}",
            fontsize=10,
        )
        ax.legend(fontsize=10)
        fig.tight_layout()
        show_fig(
            fig,
            alt=f"The model's attention and an adversary's over {T} tokens: "
            f"JSD {out['jsd']:.3f} apart, output moved by {out['dy']:.4f} "
            f"(eps {eps:g}).",
        )
    return out


def adversary_widget(
    decode: Callable, h: torch.Tensor, weights: torch.Tensor, tokens: Sequence[str]
):
    """An eps slider for :func:`adversary_view` (about a second a step)."""
    import ipywidgets as w

    return w.interactive(
        adversary_view,
        decode=w.fixed(decode),
        h=w.fixed(h),
        weights=w.fixed(weights),
        tokens=w.fixed(list(tokens)),
        eps=w.SelectionSlider(options=EPS_STEPS, value=0.01, continuous_update=False),
        steps=w.fixed(200),
        show=w.fixed(True),
    )
