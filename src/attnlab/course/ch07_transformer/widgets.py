"""Widgets for chapter 7 (the Transformer).

* :func:`positional_lab` — the sinusoidal table as a heatmap, with one position (a row)
  and one feature (a column) picked out.
* :func:`attention_view` — one attention map of a trained model: encoder self-,
  decoder self- or cross-attention, any layer and head.
* :func:`architecture` — the encoder–decoder drawn block by block, post-LN (the paper)
  or pre-LN (most code).

Each returns the numbers (or labels) it drew, so the tests can check them.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt

from ...plotting import heatmap
from ...plotting import show as _show
from ...positional import sinusoidal_encoding

__all__ = [
    "positional_lab",
    "positional_widget",
    "attention_view",
    "attention_widget",
    "architecture",
    "architecture_widget",
]


def positional_lab(
    position: int = 10,
    dim: int = 4,
    n_positions: int = 64,
    d_model: int = 32,
    show: bool = True,
):
    """Draw ``PE`` (positions × features), row ``position`` and column ``dim``.

    Returns ``{"value", "row", "column", "wavelength", "alt"}``: ``PE[position, dim]``,
    the whole row, the whole column, the column's wavelength ``2π · 10000^(2i/D)`` in
    positions (``2i`` = the even index of the pair ``dim`` belongs to), and the alt
    text of the figure, which ``show`` displays (:func:`attnlab.plotting.show`).
    """
    if not (0 <= position < n_positions and 0 <= dim < d_model):
        raise ValueError(
            f"need 0 <= position < {n_positions} and 0 <= dim < {d_model}, got "
            f"position={position}, dim={dim}"
        )
    pe = sinusoidal_encoding(n_positions, d_model)  # (P, D)
    wavelength = 2 * math.pi * 10000 ** ((dim - dim % 2) / d_model)
    fig, axes = plt.subplots(1, 2, figsize=(6.5, 3.2), width_ratios=(1.3, 1))
    im = heatmap(
        pe,
        ax=axes[0],
        xlabel="feature",
        ylabel="position",
        vmin=-1,
        vmax=1,
        cmap="RdBu_r",
        annotate=False,
    )
    axes[0].axhline(position, color="k", lw=1)
    axes[0].axvline(dim, color="k", lw=1, ls="--")
    axes[0].set_title("PE[position, feature]")
    fig.colorbar(im, ax=axes[0])
    kind = "sin" if dim % 2 == 0 else "cos"
    axes[1].plot(pe[:, dim].numpy(), label=f"feature {dim} ({kind})")
    axes[1].plot(position, pe[position, dim].item(), "ko")
    axes[1].set_xlabel("position")
    axes[1].set_ylabel("value")
    axes[1].set_ylim(-1.1, 1.1)
    axes[1].set_title(f"wavelength {wavelength:.1f}")
    axes[1].legend(loc="lower right", fontsize=10)
    fig.tight_layout()
    alt = (
        f"Heatmap of the sinusoidal encoding, {n_positions} positions by {d_model} "
        "features: the columns on the left oscillate fast, those on the right slowly. "
        f"Beside it, feature {dim} ({kind}) along the positions, a wave of wavelength "
        f"{wavelength:.1f} positions; at position {position} it is "
        f"{pe[position, dim].item():.2f}."
    )
    if show:
        _show(fig, alt=alt)
    return {
        "value": pe[position, dim].item(),
        "row": pe[position].tolist(),
        "column": pe[:, dim].tolist(),
        "wavelength": wavelength,
        "alt": alt,
    }


def positional_widget(n_positions: int = 64, d_model: int = 32):
    """Sliders over :func:`positional_lab`'s position and feature."""
    import ipywidgets as w

    return w.interactive(
        positional_lab,
        position=w.IntSlider(10, 0, n_positions - 1, continuous_update=False),
        dim=w.IntSlider(4, 0, d_model - 1, continuous_update=False),
        n_positions=w.fixed(n_positions),
        d_model=w.fixed(d_model),
        show=w.fixed(True),
    )


_KINDS = {
    "encoder": ("encoder self-attention", "source key", "source query"),
    "decoder": ("decoder self-attention (masked)", "target key", "target query"),
    "cross": ("cross-attention", "source key", "target query"),
}


def _plural(label: str) -> str:
    """ "target query" -> "target queries", "source key" -> "source keys"."""
    return label[:-1] + "ies" if label.endswith("query") else label + "s"


def attention_view(
    maps: dict,
    src_tokens,
    tgt_tokens,
    kind: str = "cross",
    layer: int = 0,
    head: int = 0,
    example: int = 0,
    show: bool = True,
):
    """Draw one attention map from :meth:`attnlab.Seq2SeqTransformer.attention_maps`.

    ``maps[kind][layer]`` is (B, H, T, S); rows are queries, columns keys. Tokens
    label the axes (``tgt_tokens`` are the decoder's inputs, starting at ``<bos>``).
    Returns ``{"weights": (T, S) list, "argmax": the key each query looks at most,
    "alt": the figure's alt text}``; ``show`` displays it with that text.
    """
    if kind not in _KINDS:
        raise ValueError(f"kind must be one of {sorted(_KINDS)}, got {kind!r}")
    n_layers, n_heads = len(maps[kind]), maps[kind][0].shape[1]
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise ValueError(
            f"layer must be in 0..{n_layers - 1} and head in 0..{n_heads - 1}, got "
            f"layer={layer}, head={head}"
        )
    rows = list(src_tokens) if kind == "encoder" else list(tgt_tokens)
    cols = list(tgt_tokens) if kind == "decoder" else list(src_tokens)
    w = maps[kind][layer][example, head, : len(rows), : len(cols)]  # (T, S)
    title, xlabel, ylabel = _KINDS[kind]
    fig, ax = plt.subplots(
        figsize=(min(6.5, 0.45 * len(cols) + 2.5), 0.35 * len(rows) + 1.8)
    )
    heatmap(
        w,
        cols,
        rows,
        ax=ax,
        xlabel=xlabel,
        ylabel=ylabel,
        vmax=1.0,
        title=f"{title}, layer {layer}, head {head}",
        annotate=False,
    )
    argmax = w.argmax(-1).tolist()
    looks = ", ".join(
        f"{r} → {cols[j]} ({w[i, j]:.2f})" for i, (r, j) in enumerate(zip(rows, argmax))
    )
    alt = (
        f"Heatmap of {title}, layer {layer}, head {head}: rows are {_plural(ylabel)}, "
        f"columns {_plural(xlabel)}, each row sums to 1. Where each row looks most: "
        f"{looks}."
    )
    if show:
        _show(fig, alt=alt)
    return {"weights": w.tolist(), "argmax": argmax, "alt": alt}


def attention_widget(maps: dict, src_tokens, tgt_tokens, example: int = 0):
    """Pick the kind of attention, the layer and the head of :func:`attention_view`."""
    import ipywidgets as w

    return w.interactive(
        attention_view,
        maps=w.fixed(maps),
        src_tokens=w.fixed(src_tokens),
        tgt_tokens=w.fixed(tgt_tokens),
        kind=w.Dropdown(options=list(_KINDS), value="cross"),
        layer=w.IntSlider(0, 0, len(maps["cross"]) - 1, continuous_update=False),
        head=w.IntSlider(0, 0, maps["cross"][0].shape[1] - 1, continuous_update=False),
        example=w.fixed(example),
        show=w.fixed(True),
    )


def _boxes(norm_first: bool, decoder: bool) -> list[str]:
    attn = (
        ["masked self-attention", "cross-attention"] if decoder else ["self-attention"]
    )
    out = []
    for sub in attn + ["feed-forward"]:
        out += (
            ["LayerNorm", sub, "+ residual"]
            if norm_first
            else [sub, "+ residual", "LayerNorm"]
        )
    return out


def architecture(norm_first: bool = False, ax=None, show: bool = True):
    """Draw the encoder (left) and decoder (right) stacks, bottom to top.

    Each residual connection is drawn as a grey arrow on the left of its stack, from a
    sub-block's input around it to its "+ residual" box. ``ax``: draw there (default: a
    new figure, which ``show`` displays with its alt text). Returns ``{"encoder":
    [...], "decoder": [...], "skips": {...}, "alt": ...}``: the block labels bottom-up,
    per stack the (from, to) box indices of each skip, and the figure's alt text.
    """
    enc = ["tokens", "embedding × √D", "+ positional enc."]
    enc += _boxes(norm_first, False) + (["final LayerNorm"] if norm_first else [])
    dec = ["target so far", "embedding × √D", "+ positional enc."]
    dec += _boxes(norm_first, True) + (["final LayerNorm"] if norm_first else [])
    dec += ["linear → softmax"]
    colours = {
        "attention": "#f4c27a",
        "feed-forward": "#9ecae1",
        "LayerNorm": "#c7e9c0",
    }
    own = ax is None
    if own:
        _, ax = plt.subplots(figsize=(6.5, 0.42 * len(dec) + 0.9))
    skips = {}
    for x0, labels, name in (
        (0.0, enc, "encoder (layers × N)"),
        (1.5, dec, "decoder (layers × N)"),
    ):
        for i, text in enumerate(labels):
            key = next((k for k in colours if k in text), None)
            ax.add_patch(
                plt.Rectangle(
                    (x0, i), 1.0, 0.8, fc=colours.get(key, "#eeeeee"), ec="k", lw=0.8
                )
            )
            ax.text(x0 + 0.5, i + 0.4, text, ha="center", va="center", fontsize=10)
            if i:
                ax.annotate(
                    "",
                    (x0 + 0.5, i),
                    (x0 + 0.5, i - 0.2),
                    arrowprops={"arrowstyle": "->", "lw": 0.8},
                )
        ax.text(x0 + 0.5, len(labels) + 0.1, name, ha="center", fontsize=10)
        pairs = _skips(labels, norm_first)
        skips[name.split()[0]] = pairs
        for a, b in pairs:  # from the sub-block's input to its "+ residual" box
            ax.annotate(
                "",
                (x0, b + 0.4),
                (x0, a + 0.9),
                arrowprops={
                    "arrowstyle": "->",
                    "color": "0.45",
                    "lw": 1.2,
                    "connectionstyle": "bar,fraction=-0.25",
                },
            )
    cross = dec.index("cross-attention")
    ax.annotate(
        "",
        (1.5, cross + 0.4),
        (1.0, len(enc) - 0.6),
        arrowprops={"arrowstyle": "->", "color": "C3"},
    )
    ax.text(
        1.25,
        cross + 1.6,
        "memory\n(keys,\nvalues)",
        ha="center",
        fontsize=10,
        color="C3",
    )
    ax.set_xlim(-0.35, 2.6)
    ax.set_ylim(-0.3, len(dec) + 0.7)
    ax.axis("off")
    ax.set_title("pre-LN (norm_first=True)" if norm_first else "post-LN (the paper)")
    where = (
        "LayerNorm at the start of every sub-block, the residual stream never "
        "normalised, and a final LayerNorm on top of each stack"
        if norm_first
        else "LayerNorm after every residual addition, as in the paper"
    )
    alt = (
        f"Block diagram of the Transformer, {'pre' if norm_first else 'post'}-LN: the "
        f"encoder stack (left, bottom to top: {', '.join(enc)}) and the decoder stack "
        f"(right: {', '.join(dec)}), with {where}. Grey arrows carry each sub-block's "
        "input around it to its '+ residual' box; a red arrow feeds the encoder's "
        "output to the decoder's cross-attention as keys and values."
    )
    if own and show:
        _show(ax.figure, alt=alt)
    return {"encoder": enc, "decoder": dec, "skips": skips, "alt": alt}


def _skips(labels: list[str], norm_first: bool) -> list[tuple[int, int]]:
    """(source box, "+ residual" box) for every residual connection in a stack.

    The skip carries the output of the box below the sub-block: in pre-LN that box is
    below the sub-block's LayerNorm (the residual stream is never normalised), in
    post-LN it is the previous LayerNorm.
    """
    out = []
    for j, text in enumerate(labels):
        if text == "+ residual":
            out.append((j - 3 if norm_first else j - 2, j))
    return out


def architecture_widget():
    """Toggle :func:`architecture` between post-LN and pre-LN."""
    import ipywidgets as w

    return w.interactive(
        architecture,
        norm_first=w.Checkbox(False, description="pre-LN"),
        ax=w.fixed(None),
        show=w.fixed(True),
    )
