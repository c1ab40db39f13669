"""Widgets for chapter 2, "The attention recipe".

:func:`query_vs_keys` draws one 2-D query (given by its angle and length) against a few
fixed 2-D keys and shows, for every scorer of :mod:`attnlab.scoring`, the scores, the
softmax weights, and how the largest weight changes as the query grows long. It returns
the numbers it drew. :func:`query_vs_keys_widget` wires two sliders to it.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import torch

from ...attention import attend
from ...plotting import show
from ...scoring import (
    AdditiveScore,
    BilinearScore,
    MLPScore,
    dot_score,
    scaled_dot_score,
)
from ...toys import RECIPE_KEYS

__all__ = ["KEYS", "recipe_scorers", "query_vs_keys", "query_vs_keys_widget"]

# Four fixed keys in the plane: east (short), north, west-ish, and a long diagonal one.
# One copy, in attnlab.toys, shared with the exercise check.
KEYS = RECIPE_KEYS


def recipe_scorers(seed: int = 0) -> dict:
    """The five scorers of the chapter for 2-D queries and keys, with fixed weights.

    The bilinear ``W`` is a hand-set rotation-and-stretch; the additive and MLP
    scorers get weights from a private generator seeded with ``seed``, so the global
    random state is left alone and every call draws the same scorers.
    """
    g = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng(devices=[]):  # nn.Linear's own init draws globally
        bilinear = BilinearScore(2, 2)
        additive = AdditiveScore(2, 2, d_hidden=4)
        mlp = MLPScore(2, 2, d_hidden=8)
    with torch.no_grad():
        bilinear.W.copy_(torch.tensor([[1.0, -0.5], [0.5, 1.0]]))
        for p in list(additive.parameters()) + list(mlp.parameters()):
            p.copy_(torch.randn(p.shape, generator=g))
    return {
        "dot": dot_score,
        "scaled dot": scaled_dot_score,
        "bilinear": bilinear,
        "additive": additive,
        "mlp": mlp,
    }


def _query(angle: float, length: float) -> torch.Tensor:
    rad = math.radians(angle)
    return length * torch.tensor([[math.cos(rad), math.sin(rad)]])  # (1, 2)


def query_vs_keys(
    angle: float = 30.0,
    length: float = 1.0,
    keys: torch.Tensor | None = None,
    max_length: float = 20.0,
    draw: bool = True,
) -> dict:
    """Score one 2-D query against fixed 2-D keys with every scorer; draw and return.

    Parameters
    ----------
    angle : direction of the query in degrees (0 = east, 90 = north)
    length : ‖q‖, must be >= 0
    keys : (S, 2) keys; default :data:`KEYS`
    max_length : the right end of the "query grows long" curve
    draw : draw the 2x2 figure (False: only compute)

    Returns
    -------
    dict with ``query`` (2,), ``keys`` (S, 2), and per scorer name: ``scores[name]``
    (S,), ``weights[name]`` (S,), ``winner[name]`` (index of the largest weight),
    and ``lengths`` with ``max_weight[name]`` (the largest weight at each length).
    """
    if not (isinstance(length, (int, float)) and math.isfinite(length) and length >= 0):
        raise ValueError(
            f"query_vs_keys: length must be a finite number >= 0, got {length!r}"
        )
    keys = KEYS if keys is None else torch.as_tensor(keys, dtype=torch.float32)
    if keys.dim() != 2 or keys.shape[1] != 2 or keys.shape[0] < 1:
        raise ValueError(
            f"query_vs_keys: keys must have shape (S, 2), got {tuple(keys.shape)}"
        )
    scorers = recipe_scorers()
    q = _query(angle, length)  # (1, 2)
    lengths = np.geomspace(0.1, max_length, 48)
    qs = torch.cat([_query(angle, float(n)) for n in lengths])  # (L, 2)
    out = {"query": q[0].tolist(), "keys": keys.tolist(), "lengths": lengths.tolist()}
    out.update(scores={}, weights={}, winner={}, max_weight={})
    with torch.no_grad():
        for name, score in scorers.items():
            _, w = attend(q, keys, keys, score=score)  # (1, S)
            _, ws = attend(qs, keys, keys, score=score)  # (L, S)
            out["scores"][name] = score(q, keys)[0].tolist()
            out["weights"][name] = w[0].tolist()
            out["winner"][name] = int(w[0].argmax())
            out["max_weight"][name] = ws.amax(dim=-1).tolist()
    if draw:
        _draw(out, angle, length)
    return out


def _draw(out: dict, angle: float, length: float) -> None:
    keys, q = np.array(out["keys"]), np.array(out["query"])
    names = list(out["scores"])
    S, width = len(keys), 0.8 / len(names)
    fig, axes = plt.subplots(2, 2, figsize=(6.5, 6.5))
    ax = axes[0, 0]
    for j, k in enumerate(keys):
        ax.annotate("", k, (0, 0), arrowprops=dict(arrowstyle="->", color="gray"))
        ax.text(*(k * 1.08), f"k{j}", color="gray", ha="center", va="center")
    ax.annotate("", q, (0, 0), arrowprops=dict(arrowstyle="->", color="C3", lw=2))
    ax.text(*(q * 1.08), "q", color="C3", ha="center", va="center", weight="bold")
    lim = max(2.0, float(np.abs(np.vstack([keys, q[None]])).max()) * 1.2)
    ax.set(xlim=(-lim, lim), ylim=(-lim, lim), aspect="equal", xlabel="dim 1")
    ax.set(ylabel="dim 2")
    ax.set_title(f"query: angle {angle:.0f}°, length {length:.2f}", fontsize=10)
    ax.axhline(0, color="lightgray", lw=0.5)
    ax.axvline(0, color="lightgray", lw=0.5)
    for key, ax, title in (
        ("scores", axes[0, 1], "scores θ = score(q, K)"),
        ("weights", axes[1, 0], "weights p = softmax(θ)"),
    ):
        for i, name in enumerate(names):
            xs = np.arange(S) + (i - (len(names) - 1) / 2) * width
            ax.bar(xs, out[key][name], width, label=name, color=f"C{i}")
        ax.set_xticks(range(S), [f"k{j}" for j in range(S)])
        ax.set(xlabel="key", ylabel=key[:-1])
        ax.set_title(title, fontsize=10)
    axes[1, 0].set_ylim(0, 1)
    axes[0, 1].axhline(0, color="gray", lw=0.5)
    axes[0, 1].legend(fontsize=10, ncol=2)
    ax = axes[1, 1]
    for i, name in enumerate(names):
        ax.plot(out["lengths"], out["max_weight"][name], color=f"C{i}", label=name)
    ax.axvline(length, color="C3", ls="--", lw=1)
    ax.set(xscale="log", ylim=(0, 1.05), xlabel="query length ‖q‖")
    ax.set_ylabel("largest weight")
    ax.set_title("as the query grows (same angle)", fontsize=10)
    fig.tight_layout()
    w = out["weights"]
    show(
        fig,
        alt=f"One query at {angle:.0f} degrees, length {length:.2f}, against four keys: "
        + "; ".join(
            f"{n} puts {max(w[n]):.2f} on key k{out['winner'][n]}" for n in names
        )
        + ". Bottom right: the largest weight of each scorer as the query grows.",
    )


def query_vs_keys_widget():
    """Sliders for the query's angle and length wired to :func:`query_vs_keys`."""
    import ipywidgets as widgets

    def show(angle, length):
        query_vs_keys(angle, length)  # draw only; the dict is not echoed

    return widgets.interactive(
        show,
        angle=widgets.FloatSlider(
            value=30.0,
            min=-180.0,
            max=180.0,
            step=5.0,
            continuous_update=False,
            description="angle (°)",
        ),
        length=widgets.FloatSlider(
            value=1.0,
            min=0.1,
            max=10.0,
            step=0.1,
            continuous_update=False,
            description="length ‖q‖",
        ),
    )
