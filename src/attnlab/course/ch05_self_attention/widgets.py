"""Widgets for chapter 5 (self-attention), and the toy "bears" sentences they use.

The toy model: every word has a hand-made embedding over five readable features
(``FEATURES``); ``toy_projections()`` gives hand-set ``W_q``, ``W_k``, ``W_v`` that make a
token *look for* a grammatical role (query) and *announce* its own role (key).

* :func:`attention_heatmap` — scores and weights of one sentence, with ``W_q`` and ``W_k``
  scaled (or tied) by the reader.
* :func:`mask_lab` — one padded batch row, masked four ways (boolean, ``-inf``,
  ``-10000``, ``-1e9``), in float32 or float16, with the scores scaled up.

Each returns the numbers it drew, so the tests can check them.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from ...mappings import softmax
from ...masking import padding_mask, to_additive
from ...plotting import heatmap
from ...plotting import show as _show

__all__ = [
    "FEATURES",
    "TOY_EMBEDDINGS",
    "SENTENCES",
    "toy_embed",
    "toy_projections",
    "attention_heatmap",
    "attention_heatmap_widget",
    "MASK_KINDS",
    "mask_lab",
    "mask_lab_widget",
]

# The five features of the toy embedding space, one per column of X.
FEATURES = ["thing", "action", "describer", "person", "link"]

# Context-free embeddings: "bears"/"bear" are ambiguous between a thing and an action
# (and "bear" can also describe, as in "bear country").
TOY_EMBEDDINGS = {
    "i": [0.0, 0.0, 0.0, 1.0, 0.0],
    "she": [0.0, 0.0, 0.0, 1.0, 0.0],
    "us": [0.0, 0.0, 0.0, 1.0, 0.0],
    "love": [0.0, 1.0, 0.0, 0.0, 0.0],
    "won": [0.0, 1.0, 0.0, 0.0, 0.0],
    "led": [0.0, 1.0, 0.0, 0.0, 0.0],
    "bears": [0.7, 0.7, 0.0, 0.0, 0.0],
    "bear": [0.6, 0.3, 0.6, 0.0, 0.0],
    "the": [0.0, 0.0, 0.5, 0.0, 0.5],
    "pain": [1.0, 0.0, 0.0, 0.0, 0.0],
    "game": [1.0, 0.0, 0.0, 0.0, 0.0],
    "trail": [1.0, 0.0, 0.0, 0.0, 0.0],
    "country": [1.0, 0.0, 0.0, 0.0, 0.0],
    "hiking": [0.0, 0.3, 1.0, 0.0, 0.0],
    "through": [0.0, 0.0, 0.0, 0.0, 1.0],
}

SENTENCES = [
    "i love bears",
    "she bears the pain",
    "bears won the game",
    "the hiking trail led us through bear country",
]


def toy_embed(sentence: str, dtype=torch.float32):
    """Tokens and embeddings ``X (T, D)`` of a sentence made of the toy vocabulary."""
    tokens = sentence.lower().split()
    unknown = [t for t in tokens if t not in TOY_EMBEDDINGS]
    if not tokens or unknown:
        raise ValueError(
            f"toy_embed: every word must be one of {sorted(TOY_EMBEDDINGS)}, "
            f"got {sentence!r} (unknown: {unknown})"
        )
    X = torch.tensor([TOY_EMBEDDINGS[t] for t in tokens], dtype=dtype)  # (T, D)
    return tokens, X


def toy_projections(dtype=torch.float32):
    """Hand-set ``W_q, W_k, W_v`` of shape (D, D) for the toy features.

    Rows are input features, columns the role space (the same five axes). ``W_k``
    lets a token announce what it is; ``W_q`` says what it looks for; ``W_v = I`` hands
    on the features themselves.
    """
    W_q = torch.tensor(
        [
            [0.0, 1.0, 2.0, 0.0, 0.0],  # a thing looks for actions and describers
            [1.5, 0.0, 0.0, 1.5, 0.0],  # an action looks for things and persons
            [2.0, 0.0, 0.0, 0.0, 0.0],  # a describer looks for a thing
            [0.0, 2.0, 0.0, 0.0, 0.0],  # a person looks for an action
            [1.0, 0.0, 0.0, 0.0, 0.0],  # a link word looks for a thing
        ],
        dtype=dtype,
    )
    W_k = 2.0 * torch.eye(5, dtype=dtype)  # announce your own features
    W_v = torch.eye(5, dtype=dtype)  # hand on your own features
    return W_q, W_k, W_v


def attention_heatmap(
    sentence: str = "she bears the pain",
    q_scale: float = 1.0,
    k_scale: float = 1.0,
    tied: bool = False,
    scaled: bool = True,
    show: bool = True,
) -> dict:
    """Scores and self-attention weights of a toy sentence, side by side.

    ``q_scale``/``k_scale`` multiply ``W_q``/``W_k`` (so the scores scale by their
    product: a temperature); ``tied`` uses ``W_k = W_q`` (symmetric scores; ``k_scale``
    is then ignored, and the title says so);
    ``scaled`` divides by ``sqrt(d_k)``.
    """
    tokens, X = toy_embed(sentence)
    W_q, W_k, _ = toy_projections()
    W_q = q_scale * W_q
    W_k = W_q if tied else k_scale * W_k
    q, k = X @ W_q, X @ W_k  # (T, D) @ (D, Dk) -> (T, Dk)
    scores = q @ k.T  # (T, Dk) @ (Dk, T) -> (T, T)
    if scaled:
        scores = scores / math.sqrt(k.shape[-1])
    weights = softmax(scores, dim=-1)  # (T, T)
    k_text = "W_k = W_q (k_scale ignored)" if tied else f"k_scale={k_scale:g}"
    alt = (
        f"Scores and softmax weights of '{sentence}' with q_scale={q_scale:g}, "
        f"{k_text}: the largest weight is {float(weights.max()):.2f}; the weights "
        f"differ from their transpose by up to "
        f"{float((weights - weights.T).abs().max()):.2f}, the scores by "
        f"{float((scores - scores.T).abs().max()):.2f}."
    )
    if show:
        fig, axes = plt.subplots(1, 2, figsize=(6.5, 3.4))
        low = min(0.0, float(scores.min()))
        heatmap(scores, tokens, tokens, ax=axes[0], vmin=low, annotate=False)
        axes[0].set_title("scores (symmetric?)" if tied else "scores")
        heatmap(weights, tokens, tokens, ax=axes[1], vmax=1.0, annotate=False)
        axes[1].set_title("weights")
        axes[1].set_ylabel("")
        fig.suptitle(f"q ×{q_scale:g}, {k_text}", fontsize=10)
        fig.tight_layout()
        _show(fig, alt=alt)
    return {
        "alt": alt,
        "tokens": tokens,
        "scores": scores,
        "weights": weights,
        "score_asymmetry": float((scores - scores.T).abs().max()),
        "weight_asymmetry": float((weights - weights.T).abs().max()),
        "max_weight": float(weights.max()),
    }


def attention_heatmap_widget():
    """Sliders for :func:`attention_heatmap`."""
    import ipywidgets as w

    slider = dict(min=0.0, max=4.0, step=0.25, value=1.0, continuous_update=False)
    return w.interactive(
        attention_heatmap,
        sentence=w.Dropdown(options=SENTENCES, value="she bears the pain"),
        q_scale=w.FloatSlider(description="W_q ×", **slider),
        k_scale=w.FloatSlider(description="W_k ×", **slider),
        tied=w.Checkbox(value=False, description="tie W_k = W_q"),
        scaled=w.Checkbox(value=True, description="divide by √d_k"),
        show=w.fixed(True),
    )


MASK_KINDS = ["boolean (attnlab)", "-inf", "-10000", "-1e9"]

# Fixed scores (T=4 real queries, S=6 keys: 4 real + 2 padding) for mask_lab. The
# padding keys score a little *higher* than the real ones, as a stray [PAD] vector may.
_LAB_SCORES = torch.tensor(
    [
        [0.2, 1.0, -0.5, 0.3, 1.5, 1.2],
        [0.9, -0.2, 0.4, -1.0, 1.1, 1.6],
        [-0.3, 0.6, 0.1, 0.8, 1.4, 1.3],
        [0.5, 0.1, -0.7, 0.2, 1.2, 1.8],
    ]
)


def mask_lab(
    mask: str = "-10000",
    score_scale: float = 1.0,
    dtype: str = "float32",
    mask_last_query: bool = False,
    show: bool = True,
) -> dict:
    """Mask two padding keys four ways and see where the weight goes.

    ``mask``: ``"boolean (attnlab)"`` uses :func:`attnlab.mappings.softmax` on a boolean
    mask (``-inf``, fully masked rows -> zeros); the others add the value to the scores
    and use the textbook softmax ``exp(s - max) / sum``. ``score_scale`` multiplies the
    scores (think low temperature or large activations); ``mask_last_query`` masks
    every key of the last query, as for a query that is itself padding in some codes.
    """
    if mask not in MASK_KINDS:
        raise ValueError(f"mask_lab: mask must be one of {MASK_KINDS}, got {mask!r}")
    if dtype not in ("float32", "float16"):
        raise ValueError(f"mask_lab: dtype must be float32 or float16, got {dtype!r}")
    dt = getattr(torch, dtype)
    T, S = _LAB_SCORES.shape
    keep = padding_mask([S - 2], S).expand(T, S).clone()  # (T, S), True = may attend
    if mask_last_query:
        keep[-1] = False
    scores = (_LAB_SCORES.double() * score_scale).to(dt)  # (T, S); may overflow in fp16
    if mask == "boolean (attnlab)":
        weights = softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)
    else:
        # Built in float32 and cast, as most code does: -1e9 becomes -inf in float16.
        additive = to_additive(keep, float(mask), dtype=torch.float32).to(dt)
        masked = scores + additive  # (T, S)
        e = torch.exp(masked - masked.amax(dim=-1, keepdim=True))
        weights = e / e.sum(dim=-1, keepdim=True)
    weights = weights.float()
    real = torch.nan_to_num(weights, nan=0.0)[: T - 1 if mask_last_query else T]
    leaked = float(real[:, S - 2 :].sum(dim=-1).max())
    nan = bool(torch.isnan(weights).any())
    alt = (
        f"Weights of {T} queries over {S - 2} real keys and 2 padding keys, mask "
        f"{mask}, scores ×{score_scale:g}, {dtype}: the worst query puts {leaked:.2f} "
        f"of its weight on the padding; NaN: {'yes' if nan else 'no'}."
    )
    if show:
        fig, ax = plt.subplots(figsize=(6, 3.2))
        labels = [f"k{j}" for j in range(S - 2)] + ["pad", "pad"]
        heatmap(
            weights,
            labels,
            [f"q{i}" for i in range(T)],
            ax=ax,
            vmax=1.0,
            annotate=False,
        )
        for i in range(T):
            for j in range(S):
                v = float(weights[i, j])
                ax.text(
                    j,
                    i,
                    f"{v:.2f}",
                    ha="center",
                    va="center",
                    fontsize=10,
                    color="black" if v > 0.6 else "white",
                )
        dead = f" (q{T - 1}: no key left)" if mask_last_query else ""
        ax.set_title(
            f"mask {mask}, scores ×{score_scale:g}, {dtype}: "
            f"leak {leaked:.2f}, NaN: {nan}{dead}",
            fontsize=10,
        )
        fig.tight_layout()
        _show(fig, alt=alt)
    return {
        "alt": alt,
        "weights": weights,
        "leaked": leaked,
        "has_nan": bool(torch.isnan(weights).any()),
        "mask_value_in_dtype": None
        if mask.startswith("boolean")
        else float(torch.tensor(float(mask)).to(dt)),
    }


def mask_lab_widget():
    """Controls for :func:`mask_lab`."""
    import ipywidgets as w

    return w.interactive(
        mask_lab,
        mask=w.Dropdown(options=MASK_KINDS, value="-10000"),
        score_scale=w.FloatLogSlider(
            value=1.0, base=10, min=0, max=4.5, step=0.25, continuous_update=False
        ),
        dtype=w.ToggleButtons(options=["float32", "float16"], value="float32"),
        mask_last_query=w.Checkbox(value=False, description="mask a whole row"),
        show=w.fixed(True),
    )
