"""Widgets for chapter 6 (multi-head attention).

* :func:`handset_heads` — a :class:`attnlab.MultiHeadAttention` whose four heads are
  set *by hand* (no training) to look at the previous token, the next token, the token
  itself, and the same word elsewhere in the input.
* :func:`head_view` — the per-head attention heatmaps of a sentence pair (pick a head),
  in the spirit of the head view of bertviz (Vig, 2019).
* :func:`slides_bug_view` — which positions each head really sees in the slides'
  multi-head code (projections to one head's size, then a reshape), against the
  correct split.

Each returns the numbers it drew, so the tests can check them.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from ...multihead import MultiHeadAttention
from ...plotting import heatmap
from ...plotting import show as _show

__all__ = [
    "HEAD_NAMES",
    "SENTENCES",
    "handset_heads",
    "head_view",
    "head_view_widget",
    "slides_bug_view",
    "slides_bug_view_widget",
]

HEAD_NAMES = ["previous token", "next token", "same token", "same word elsewhere"]

SENTENCES = [
    "time flies like an arrow | fruit flies like a banana",
    "the dog bites the man | the man bites the dog",
    "she bears the pain | bears love the game",
]


def handset_heads(sentence: str = SENTENCES[0], strength: float = 8.0):
    """Hand-set four-head self-attention over one-hot positions and words.

    Token ``i`` with word ``w`` is ``x_i = [onehot(i) (P) | onehot(w) (V) | 0...]``;
    every head has width ``Dh = P + V`` and ``D = 4 Dh``. Head by head
    (score ``= strength`` on the target, ``strength / 2`` on the fallback)::

        previous token       q_i = e_i      k_j = e_{j+1} + e_j / 2   (fallback: itself)
        next token           q_i = e_i      k_j = e_{j-1} + e_j / 2   (fallback: itself)
        same token           q_i = e_i      k_j = e_j
        same word elsewhere  q_i = [w_i, -e_i / 2]   k_j = [w_j, e_j] (fallback: itself)

    Every value is the word one-hot of its key and ``W_o`` is the identity, so the
    slice ``h*Dh .. h*Dh + V`` of the output says which word head ``h`` brought in.

    Returns ``(mha, x (1, T, D), tokens, vocab)``.
    """
    tokens = sentence.split()
    if not tokens:
        raise ValueError("handset_heads needs a non-empty sentence")
    vocab = sorted(set(tokens), key=tokens.index)
    T, V = len(tokens), len(vocab)
    P = T  # one position per token
    Dh = P + V  # room for [position | word] in every head
    D = 4 * Dh
    x = torch.zeros(1, T, D)
    for i, tok in enumerate(tokens):
        x[0, i, i] = 1.0  # position one-hot
        x[0, i, P + vocab.index(tok)] = 1.0  # word one-hot

    mha = MultiHeadAttention(D, 4, bias=False)
    a = strength * math.sqrt(Dh)  # undo the 1/sqrt(Dh) of the scores
    eye_p = torch.eye(P)
    down = torch.diag(torch.ones(P - 1), -1)  # e_j -> e_{j+1}
    Wq, Wk, Wv = (torch.zeros(D, D) for _ in range(3))  # (out, in), as nn.Linear
    pos, word = slice(0, P), slice(P, P + V)
    for h in range(4):
        rows = slice(h * Dh, h * Dh + P)  # the first P coordinates of head h
        if h < 3:
            Wq[rows, pos] = a * eye_p  # q_i = a e_i
        shift = {0: down + eye_p / 2, 1: down.T + eye_p / 2, 2: eye_p}.get(h)
        if shift is not None:
            Wk[rows, pos] = shift  # k_j = shifted position one-hot
        # values: the word one-hot of the key, in the first V coordinates of the head
        Wv[h * Dh : h * Dh + V, word] = torch.eye(V)
    r = 3 * Dh  # head 3 compares words and pushes itself down
    Wq[r : r + V, word] = a * torch.eye(V)
    Wq[r + V : r + V + P, pos] = -a / 2 * eye_p
    Wk[r : r + V, word] = torch.eye(V)
    Wk[r + V : r + V + P, pos] = eye_p
    with torch.no_grad():
        mha.w_q.weight.copy_(Wq)
        mha.w_k.weight.copy_(Wk)
        mha.w_v.weight.copy_(Wv)
        mha.w_o.weight.copy_(torch.eye(D))
    return mha.eval(), x, tokens, vocab


def head_view(
    head: str = "previous token",
    sentence: str = SENTENCES[0],
    token: int = 1,
    show: bool = True,
) -> dict:
    """Heatmap of one hand-set head (or ``"all"``) on a sentence pair.

    ``token`` picks a query; the returned dict says which word each head brought to it.
    """
    if head != "all" and head not in HEAD_NAMES:
        raise ValueError(f"head must be 'all' or one of {HEAD_NAMES}, got {head!r}")
    mha, x, tokens, vocab = handset_heads(sentence)
    if not 0 <= token < len(tokens):
        raise ValueError(f"token must be in 0..{len(tokens) - 1}, got {token}")
    with torch.no_grad():  # per-head weights: (1, T, D), (1, H, T, T)
        out, weights = mha(x, x, x, average_attn_weights=False)
    weights = weights[0]  # (H, T, T)
    Dh, V = mha.d_head, len(vocab)
    brought = {
        name: vocab[int(out[0, token, h * Dh : h * Dh + V].argmax())]
        for h, name in enumerate(HEAD_NAMES)
    }
    labels = [f"{t}·{i}" for i, t in enumerate(tokens)]
    heads = HEAD_NAMES if head == "all" else [head]
    looks = {
        name: tokens[int(weights[HEAD_NAMES.index(name), token].argmax())]
        for name in heads
    }
    alt = (
        f"Attention weights of the hand-set head{'s' if len(heads) > 1 else ''} "
        + ", ".join(f"'{n}'" for n in heads)
        + f" on '{' '.join(tokens)}' (rows: queries, columns: keys), row {token} "
        f"('{tokens[token]}') marked. That query looks most at: "
        + ", ".join(f"{n} → '{t}'" for n, t in looks.items())
        + "; it receives the words "
        + ", ".join(f"{k} → {v}" for k, v in brought.items())
        + "."
    )
    if show:
        rows, cols = (2, 2) if len(heads) == 4 else (1, len(heads))
        fig, axes = plt.subplots(
            rows,
            cols,
            figsize=(6.5, 6.5 * rows / cols if cols > 1 else 5.5),
            squeeze=False,
        )
        for ax, name in zip(axes.flat, heads):
            heatmap(
                weights[HEAD_NAMES.index(name)],
                labels,
                labels,
                ax=ax,
                vmax=1.0,
                annotate=False,
                xlabel="",
                ylabel="",
            )
            ax.axhline(token, color="white", lw=0.8)
            ax.set_title(f"head '{name}'", fontsize=10)
        fig.suptitle(f"rows: queries; row {token} is '{tokens[token]}'", fontsize=10)
        fig.tight_layout()
        _show(fig, alt=alt)
    return {
        "tokens": tokens,
        "weights": weights,
        "attended": weights.argmax(-1),  # (H, T): the key each query looks at most
        "brought": brought,
        "alt": alt,
    }


def head_view_widget():
    """Pick a sentence, a head and a query token for :func:`head_view`."""
    import ipywidgets as w

    def view(head, sentence, token):  # the slider may outrun a shorter sentence
        return head_view(head, sentence, min(token, len(sentence.split()) - 1))

    return w.interactive(
        view,
        head=w.Dropdown(options=["all", *HEAD_NAMES], value="previous token"),
        sentence=w.Dropdown(options=SENTENCES, value=SENTENCES[0]),
        token=w.IntSlider(value=1, min=0, max=10, continuous_update=False),
    )


def slides_bug_view(T: int = 6, n_heads: int = 3, show: bool = True) -> dict:
    """Which positions each head sees: correct split vs the slides' projections.

    Correct: ``q = x W_q`` is ``(B, T, D)``; viewing it as ``(B, T, H, Dh)`` gives every
    head all T positions. Slides: ``q`` is ``(B, T, Dh)``; viewing it as
    ``(B, -1, H, Dh)`` only works when H divides T, and then head ``h`` sees the
    positions ``h, h + H, h + 2H, ...`` as a sequence of length ``T / H``.
    """
    if T < 1 or n_heads < 1:
        raise ValueError(f"need T >= 1 and n_heads >= 1, got T={T}, n_heads={n_heads}")
    H = n_heads
    correct = [list(range(T)) for _ in range(H)]
    works = T % H == 0
    slides = [list(range(h, T, H)) for h in range(H)] if works else None
    if show:
        fig, axes = plt.subplots(1, 2, figsize=(6.5, 0.4 * T + 2.0))
        grid = torch.arange(T, dtype=torch.float32)[:, None].expand(T, H)
        for ax, seen, title in (
            (axes[0], correct, "correct: all T\npositions per head"),
            (axes[1], slides, "slides' code: head h\nsees h, h+H, ..."),
        ):
            img = torch.full((T, H), float("nan"))
            if seen is not None:
                for h, positions in enumerate(seen):
                    img[positions, h] = grid[positions, h]
                    for r, i in enumerate(positions):  # head h sees position i as row r
                        color = "white" if i < T / 2 else "black"
                        ax.text(
                            h,
                            i,
                            f"row {r}",
                            ha="center",
                            va="center",
                            color=color,
                            fontsize=10,
                        )
            ax.imshow(
                img.numpy(), cmap="viridis", vmin=0, vmax=max(T - 1, 1), aspect="auto"
            )
            ax.set_xticks(range(H), [str(h) for h in range(H)])
            ax.set_xlabel("head")
            ax.set_yticks(range(T), [f"pos {i}" for i in range(T)])
            ax.set_title(title, fontsize=10)
            if seen is None:
                ax.text(
                    (H - 1) / 2,
                    (T - 1) / 2,
                    f"RuntimeError:\nT={T} is not\ndivisible by H={H}",
                    ha="center",
                    va="center",
                    fontsize=10,
                )
        axes[0].set_ylabel("input position")
        fig.tight_layout()
        if works:
            what = "; ".join(
                f"head {h} sees positions {ps}" for h, ps in enumerate(slides)
            )
            what = (
                f"with the slides' projections {what}, and the output has {T // H} rows"
            )
        else:
            what = (
                f"the slides' code raises a RuntimeError: {T} is not divisible by {H}"
            )
        _show(
            fig,
            alt=(
                f"Which of T = {T} input positions each of H = {H} heads sees. Correct "
                f"split: every head sees all {T}; {what}."
            ),
        )
    return {
        "correct": correct,
        "slides": slides,
        "slides_runs": works,
        "slides_out_len": T // H if works else None,
    }


def slides_bug_view_widget():
    """Sliders for :func:`slides_bug_view`."""
    import ipywidgets as w

    return w.interactive(
        slides_bug_view,
        T=w.IntSlider(value=6, min=1, max=12, continuous_update=False),
        n_heads=w.IntSlider(value=3, min=1, max=6, continuous_update=False),
        show=w.fixed(True),
    )
