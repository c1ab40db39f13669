"""Widgets for chapter 4, "Soft, hard and structured attention".

:func:`alignment_lab` takes one set of scores — a target word of "I am going to the
store → Vou à loja" looking back at the source words — and maps them with one of
:data:`LAB_MAPPINGS` after dividing by a temperature. It draws the weights (gray where
exactly zero), the support, and one *sampled alignment*: a key drawn from the weights
for the mappings onto the simplex, a whole labelling ``z`` drawn from the CRF for the
marginals, the Gumbel-max sample itself for the hard mapping. It returns the numbers
it drew. :func:`alignment_lab_widget` wires controls to it.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import torch

from ... import mappings as M
from ...plotting import show
from ...structured import enumerate_linear_chain, segmentation_marginals

__all__ = [
    "SOURCE",
    "TARGET",
    "SPAN_SCORES",
    "GOLD_SPANS",
    "LAB_MAPPINGS",
    "agreement_transition",
    "map_scores",
    "alignment_lab",
    "alignment_lab_widget",
]

SOURCE = ["I", "am", "going", "to", "the", "store"]
TARGET = ["Vou", "à", "loja"]
# Scores of each target word against the source words, as a trained model might give
# them: high on the words it translates, with the noise real scores have.
SPAN_SCORES = {
    "Vou": [1.2, 0.2, 1.0, -1.2, -1.6, -1.8],
    "à": [-1.6, -1.2, -0.7, 1.6, 0.9, -1.3],
    "loja": [-1.8, -1.6, -1.3, -0.9, -0.4, 2.2],
}
GOLD_SPANS = {"Vou": (0, 3), "à": (3, 5), "loja": (5, 6)}  # [start, stop)
LAB_MAPPINGS = [
    "softmax",
    "sparsemax",
    "entmax15",
    "fusedmax",
    "CRF marginals",
    "hard sample",
]


def agreement_transition(strength: float, dtype=torch.float64) -> torch.Tensor:
    """(2, 2) transition ``strength/2 * [[1, -1], [-1, 1]]``: neighbours like to agree."""
    return torch.tensor([[1.0, -1.0], [-1.0, 1.0]], dtype=dtype) * (strength / 2)


def map_scores(
    scores: torch.Tensor,
    mapping: str,
    temperature: float = 1.0,
    strength: float = 1.0,
    lam: float = 0.5,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Weights for 1-D ``scores / temperature`` under one of :data:`LAB_MAPPINGS`.

    ``strength``: the CRF's agreement between neighbours; ``lam``: fusedmax's penalty;
    ``generator``: the randomness of the hard sample (Gumbel-max).
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0, got {temperature}")
    x = scores.double() / temperature
    if mapping == "softmax":
        return M.softmax(x)
    if mapping == "sparsemax":
        return M.sparsemax(x)
    if mapping == "entmax15":
        return M.entmax15(x)
    if mapping == "fusedmax":
        return M.fusedmax(x, lam=lam)
    if mapping == "CRF marginals":
        return segmentation_marginals(x, agreement_transition(strength))
    if mapping == "hard sample":  # Gumbel-max: argmax(x + Gumbel noise) ~ softmax(x)
        u = torch.rand(x.shape, generator=generator, dtype=x.dtype)
        g = -torch.log(-torch.log(u.clamp(1e-12, 1 - 1e-12)))
        return M.argmax(x + g)
    raise ValueError(f"mapping must be one of {LAB_MAPPINGS}, got {mapping!r}")


def _sample_alignment(x, mapping, weights, strength, generator) -> list[int]:
    """Positions of one sampled alignment (see the module docstring)."""
    if mapping == "hard sample":
        return [int(weights.argmax())]
    if mapping == "CRF marginals":
        unary = torch.stack([torch.zeros_like(x), x], dim=-1)[None]  # (1, n, 2)
        configs, logp = enumerate_linear_chain(unary, agreement_transition(strength))
        k = int(torch.multinomial(logp[0].exp(), 1, generator=generator))
        return [i for i, z in enumerate(configs[k].tolist()) if z == 1]
    return [int(torch.multinomial(weights, 1, generator=generator))]


def alignment_lab(
    target: str = "à",
    mapping: str = "softmax",
    temperature: float = 1.0,
    strength: float = 1.0,
    lam: float = 0.5,
    seed: int = 0,
    scores: torch.Tensor | None = None,
    draw: bool = True,
) -> dict:
    """Map one target word's scores over the source and draw weights and a sample.

    Returns ``weights`` (list), ``support`` (number of nonzero weights), ``total`` (sum
    of the weights: 1 on the simplex, not for CRF marginals), ``sample`` (positions of
    one sampled alignment) and ``words`` (the source words).
    """
    if scores is None:
        if target not in SPAN_SCORES:
            raise ValueError(f"target must be one of {TARGET}, got {target!r}")
        scores = torch.tensor(SPAN_SCORES[target], dtype=torch.float64)
        words = SOURCE
    else:
        scores = torch.as_tensor(scores, dtype=torch.float64)
        if scores.dim() != 1 or not 1 <= len(scores) <= 12:
            raise ValueError(
                f"scores must be 1-D with 1..12 entries, got {tuple(scores.shape)}"
            )
        words = [f"k{j}" for j in range(len(scores))]
    gen = torch.Generator().manual_seed(seed)
    w = map_scores(scores, mapping, temperature, strength, lam, generator=gen)
    sample = _sample_alignment(scores / temperature, mapping, w, strength, gen)
    out = {
        "weights": w.tolist(),
        "support": int((w > 0).sum()),
        "total": float(w.sum()),
        "sample": sample,
        "words": list(words),
    }
    if draw:
        n = len(words)
        fig, ax = plt.subplots(figsize=(6.5, 3.2))
        colors = ["C1" if v > 0 else "lightgray" for v in out["weights"]]
        ax.bar(range(n), w.numpy(), color=colors)
        if mapping == "hard sample":  # the distribution the sample came from
            p = M.softmax(scores / temperature).numpy()
            ax.bar(range(n), p, fill=False, edgecolor="k", ls="--", label="softmax")
            ax.legend(loc="upper left", fontsize=10)
        for j in sample:
            ax.annotate("▼", (j, 1.02), ha="center", color="C3", fontsize=12)
        ax.set_xticks(range(n), words)
        ax.set_ylim(0, 1.12)
        ax.set_ylabel("weight")
        picked = " ".join(words[j] for j in sample) or "(nothing)"
        ax.set_title(
            f"'{target}' · {mapping}: support {out['support']}/{n}, "
            f"sum {out['total']:.2f}\n▼ sampled: {picked}",
            fontsize=10,
        )
        fig.tight_layout()
        show(
            fig,
            alt=f"{mapping} weights of the words of '{' '.join(words)}' for the target "
            f"'{target}': "
            + ", ".join(f"{wd} {v:.2f}" for wd, v in zip(words, out["weights"]))
            + f"; sampled alignment: {picked}.",
        )
    return out


def alignment_lab_widget():
    """Target word, mapping, temperature (log slider), CRF strength, fusedmax λ, seed."""
    import ipywidgets as widgets

    def show(target, mapping, temperature, strength, lam, seed):
        alignment_lab(target, mapping, temperature, strength, lam, seed)

    slider = dict(continuous_update=False)
    return widgets.interactive(
        show,
        target=widgets.Dropdown(options=TARGET, value="à", description="target"),
        mapping=widgets.Dropdown(
            options=LAB_MAPPINGS, value="softmax", description="mapping"
        ),
        temperature=widgets.FloatLogSlider(
            value=1.0, base=10, min=-1.5, max=1, step=0.1, description="temp.", **slider
        ),
        strength=widgets.FloatSlider(
            value=1.0, min=0.0, max=6.0, step=0.25, description="CRF agree", **slider
        ),
        lam=widgets.FloatSlider(
            value=0.5, min=0.0, max=2.0, step=0.05, description="λ (fused)", **slider
        ),
        seed=widgets.IntSlider(value=0, min=0, max=50, description="seed", **slider),
    )
