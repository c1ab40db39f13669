"""Widgets for chapter 1: type an input, see the output and where the decoder looked.

:func:`alignment_explorer` is the plain function (the tests call it);
:func:`alignment_widget` wires a text box and a step slider to it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Rectangle

from ...plotting import heatmap, show

__all__ = ["alignment_explorer", "alignment_widget"]


def alignment_explorer(model, task, text: str = "abcdefghij", step: int = 0) -> dict:
    """Translate ``text`` with ``model`` and draw its alignment.

    Left: the attention matrix, one row per output token (the ``<eos>`` step
    included), one column per source token; the row of output ``step`` is framed.
    Right: that row as bars — where the decoder looked to write output ``step``.

    Returns the numbers drawn: ``{"output", "target", "correct", "step", "weights"
    (the framed row, a list), "focus" (its argmax source position), "focus_token"}``;
    ``weights`` and ``focus`` are None for a model without attention.
    """
    r = model.translate(task, text)
    out_labels = r["out"] + ["<eos>"]
    info = {
        "output": r["text"],
        "target": task.join(r["target"]),
        "correct": r["correct"],
        "step": 0,
        "weights": None,
        "focus": None,
        "focus_token": None,
    }
    if r["weights"] is None:
        fig, ax = plt.subplots(figsize=(6.5, 1.2))
        ax.axis("off")
        ax.set_title(f"{text!r} -> {r['text']!r}: this model has no attention to show")
        show(
            fig, alt=f"'{text}' -> '{r['text']}': this model has no attention weights."
        )
        return info
    W = r["weights"]  # (T, S)
    step = max(0, min(int(step), W.shape[0] - 1))
    row = W[step]
    info.update(
        step=step,
        weights=[round(float(x), 4) for x in row],
        focus=int(row.argmax()),
        focus_token=r["src"][int(row.argmax())],
    )
    S, T = W.shape[1], W.shape[0]
    fig, (ax1, ax2) = plt.subplots(
        1,
        2,
        figsize=(6.5, min(2.4 + 0.3 * T, 8)),
        gridspec_kw={"width_ratios": [3, 2]},
    )
    heatmap(
        W,
        xlabels=r["src"],
        ylabels=out_labels[:T],
        ax=ax1,
        xlabel="source token",
        ylabel="output token",
        annotate=False,
    )
    ax1.add_patch(
        Rectangle((-0.5, step - 0.5), S, 1, fill=False, edgecolor="red", linewidth=2)
    )
    verdict = "correct" if r["correct"] else f"expected {info['target']}"
    ax1.set_title(f"{r['text']}  ({verdict})", fontsize=10)
    ax2.bar(range(S), row.numpy(), color="C1")
    ax2.set_xticks(range(S), r["src"], rotation=60, ha="right")
    ax2.set_ylim(0, 1)
    ax2.set_xlabel("source token")
    ax2.set_ylabel("weight")
    ax2.set_title(f"writing {out_labels[step]!r} (step {step})", fontsize=10)
    fig.tight_layout()
    show(
        fig,
        alt=f"Attention of the model on '{text}' (output '{r['text']}', {verdict}). "
        f"Writing {out_labels[step]!r} at step {step} it puts {float(row.max()):.2f} "
        f"of its weight on source token {info['focus_token']!r}.",
    )
    return info


def alignment_widget(
    model, task, text: str = "abcdefghij", examples=(), max_steps: int = 30
):
    """Type an input or pick one of ``examples``, and move the output step slider.

    The text box is a combo box: it offers ``examples`` and accepts anything typed; the
    slider chooses the output step that :func:`alignment_explorer` frames.
    """
    import ipywidgets as w

    def show(text, step):
        try:
            alignment_explorer(model, task, text, step)
        except ValueError as err:  # empty or unreadable input: say so, do not crash
            print(f"cannot translate {text!r}: {err}")

    options = list(dict.fromkeys([text, *examples]))
    return w.interactive(
        show,
        text=w.Combobox(
            value=text,
            options=options,
            ensure_option=False,
            description="input",
            continuous_update=False,
        ),
        step=w.IntSlider(
            value=0,
            min=0,
            max=max_steps,
            description="output step",
            continuous_update=False,
        ),
    )
