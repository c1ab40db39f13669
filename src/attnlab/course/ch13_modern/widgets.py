"""Chapter 13's widget: RoPE's score of a fixed query and key against their offset.

:func:`rope_scores` is the plain function (the tests call it); :func:`rope_widget`
wraps it with sliders. The twin under it (``twins.py``) redraws the same curve in the
browser.
"""

from __future__ import annotations

import torch

from ...modern import RoPE

__all__ = ["rope_scores", "rope_widget"]


def rope_scores(
    q: torch.Tensor,
    k: torch.Tensor,
    max_offset: int = 128,
    scale: float = 1.0,
    base: float = 10000.0,
    show: bool = True,
) -> torch.Tensor:
    """``<RoPE(q, m), RoPE(k, 0)>`` for m = 0..max_offset, positions divided by ``scale``."""
    sc = None if scale == 1 else {"type": "linear", "factor": float(scale)}
    rope = RoPE(base, "interleaved", sc)
    m = torch.arange(max_offset + 1)
    qr = rope(q.double().expand(1, 1, len(m), -1), m)  # (1, 1, M, d)
    kr = rope(k.double().view(1, 1, 1, -1), torch.tensor([0]))  # (1, 1, 1, d)
    scores = (qr * kr).sum(-1)[0, 0]  # (M,)
    if show:
        import matplotlib.pyplot as plt

        from ...plotting import show as show_fig

        fig, ax = plt.subplots(figsize=(6.5, 2.4))
        ax.plot(m, scores)
        ax.set_xlabel(f"offset m - n (positions divided by {scale:g})")
        ax.set_ylabel("score")
        fig.tight_layout()
        show_fig(
            fig,
            alt=f"RoPE score of one query and key against offsets 0 to "
            f"{max_offset} at position scale {scale:g}: it starts at "
            f"{float(scores[0]):.1f} and oscillates down to {float(scores.min()):.1f}.",
        )
    return scores


def rope_widget(q: torch.Tensor, k: torch.Tensor):
    """Sliders for the largest offset, the position scale and the base."""
    from ipywidgets import FloatLogSlider, IntSlider, interactive

    return interactive(
        lambda max_offset, scale, base: rope_scores(q, k, max_offset, scale, base),
        max_offset=IntSlider(value=128, min=16, max=1024, step=16),
        scale=FloatLogSlider(value=1, base=2, min=0, max=3, step=1),
        base=FloatLogSlider(value=10000, base=10, min=2, max=6, step=1),
    )
