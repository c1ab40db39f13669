"""Widgets for chapter 3, "From scores to probabilities".

:func:`mapping_lab` maps one vector of scores with a chosen mapping (softmax, sparsemax,
alpha-entmax, fusedmax, argmax, or sigmoid for contrast), after multiplying the scores by
``scale`` (= 1 / temperature). It draws the weights as bars and the attention output
``z = V^T p`` for fixed 2-D values ``V``, and returns the numbers it drew.
:func:`fusedmax_span` compares sparsemax and fusedmax on a noisy bump of scores.
The ``*_widget`` functions wire sliders to them.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import matplotlib.pyplot as plt
import torch

from ... import mappings as M
from ...plotting import show
from ...registry import Registry

__all__ = [
    "MAPPINGS",
    "LAB_VALUES",
    "parse_scores",
    "apply_mapping",
    "mapping_lab",
    "mapping_lab_widget",
    "noisy_bump",
    "fusedmax_span",
    "fusedmax_span_widget",
]

# The lab's mappings by name, each called as ``f(scores, alpha, lam)``.
MAPPING_FUNCTIONS: Registry[Callable] = Registry(
    "mapping",
    {
        "softmax": lambda s, alpha, lam: M.softmax(s),
        "sparsemax": lambda s, alpha, lam: M.sparsemax(s),
        "entmax": lambda s, alpha, lam: M.entmax_bisect(s, alpha),
        "fusedmax": lambda s, alpha, lam: M.fusedmax(s, lam=lam),
        "argmax": lambda s, alpha, lam: M.argmax(s),
        "sigmoid": lambda s, alpha, lam: M.sigmoid(s),
    },
)
MAPPINGS = list(MAPPING_FUNCTIONS.names())
DEFAULT_SCORES = "1.2, 0.9, 0.1, -0.4, 0.7, -1.0"
# Fixed 2-D value vectors (one per key) on a circle, so z = V^T p is easy to see.
LAB_VALUES = torch.tensor(
    [[math.cos(a), math.sin(a)] for a in [2 * math.pi * j / 6 for j in range(6)]]
)


def parse_scores(text: str) -> torch.Tensor:
    """``"1, 2, -inf"`` -> a float64 tensor; raises ValueError on anything else."""
    try:
        vals = [float(t) for t in str(text).replace(";", ",").split(",") if t.strip()]
    except ValueError:
        msg = f"scores must be numbers separated by commas, got {text!r}"
        raise ValueError(msg) from None
    if not 1 <= len(vals) <= 12:
        raise ValueError(f"give between 1 and 12 scores, got {len(vals)}")
    return torch.tensor(vals, dtype=torch.float64)


def apply_mapping(
    scores: torch.Tensor, mapping: str, alpha: float = 1.5, lam: float = 0.5
) -> torch.Tensor:
    """Map ``scores`` with one of :data:`MAPPINGS` (``entmax`` uses ``alpha``)."""
    return MAPPING_FUNCTIONS.get(mapping)(scores, alpha, lam)


def _entropy(p: torch.Tensor) -> float:
    q = p[p > 0]
    return float(-(q * q.log()).sum()) + 0.0  # no "-0.0" for a one-hot


def mapping_lab(
    scores: str | torch.Tensor = DEFAULT_SCORES,
    scale: float = 1.0,
    mapping: str = "softmax",
    alpha: float = 1.5,
    lam: float = 0.5,
    draw: bool = True,
) -> dict:
    """Map ``scale * scores`` and show the weights and the output ``z = V^T p``.

    Returns a dict with ``weights`` (list), ``support`` (number of nonzero weights),
    ``entropy`` (nats, of the weights renormalised for sigmoid), ``total`` (sum of the
    weights: 1 on the simplex) and ``z`` (the 2-D output, values :data:`LAB_VALUES`).
    """
    x = parse_scores(scores) if isinstance(scores, str) else scores.double()
    if not scale > 0:
        raise ValueError(f"scale must be > 0, got {scale}")
    p = apply_mapping(scale * x, mapping, alpha, lam)
    n = p.shape[-1]
    values = LAB_VALUES[:n].double() if n <= 6 else _circle(n)
    z = p @ values  # (n,) @ (n, 2) -> (2,)
    total = float(p.sum())
    out = {
        "weights": p.tolist(),
        "support": int((p > 0).sum()),
        "entropy": _entropy(p / total) if total > 0 else 0.0,
        "total": total,
        "z": z.tolist(),
    }
    if draw:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(6.5, 3.4))
        colors = ["C1" if w > 0 else "lightgray" for w in out["weights"]]
        ax1.bar(range(n), p.numpy(), color=colors)
        ax1.set_ylim(0, 1.05)
        ax1.set_xlabel("key j")
        ax1.set_ylabel("weight $p_j$")
        ax1.set_title(
            f"{mapping}\nsupport {out['support']}/{n}, entropy {out['entropy']:.2f}",
            fontsize=10,
        )
        v = values.numpy()
        ax2.scatter(v[:, 0], v[:, 1], s=30 + 300 * p.numpy(), c="C0", zorder=2)
        for j in range(n):
            ax2.annotate(f"v{j}", v[j], textcoords="offset points", xytext=(6, 4))
        ax2.plot(*z.numpy(), marker="*", ms=16, color="C3", label="z = Vᵀp")
        ax2.set_aspect("equal")
        ax2.set_xlim(-1.6, 1.6)
        ax2.set_ylim(-1.4, 1.4)
        ax2.legend(loc="lower right", fontsize=10)
        ax2.set_title("values and the output", fontsize=10)
        fig.tight_layout()
        show(
            fig,
            alt=f"{mapping} weights of {n} keys: "
            + ", ".join(f"{w:.2f}" for w in out["weights"])
            + f" (support {out['support']}); the output z = "
            + f"({out['z'][0]:.2f}, {out['z'][1]:.2f}) among the value vectors.",
        )
    return out


def _circle(n: int) -> torch.Tensor:
    a = torch.arange(n, dtype=torch.float64) * 2 * math.pi / n
    return torch.stack([a.cos(), a.sin()], dim=-1)


def mapping_lab_widget():
    """The mapping lab: editable scores, scale (log slider), mapping, alpha, lambda."""
    import ipywidgets as widgets

    def show(scores, scale, mapping, alpha, lam):
        try:
            mapping_lab(scores, scale, mapping, alpha, lam)
        except ValueError as err:
            print(f"⚠️ {err}")

    slider = dict(continuous_update=False)
    return widgets.interactive(
        show,
        scores=widgets.Text(value=DEFAULT_SCORES, description="scores", **slider),
        scale=widgets.FloatLogSlider(
            value=1.0, base=10, min=-1, max=3, step=0.1, description="scale", **slider
        ),
        mapping=widgets.Dropdown(options=MAPPINGS, value="softmax", description="map"),
        alpha=widgets.FloatSlider(
            value=1.5, min=1.05, max=3.0, step=0.05, description="α (entmax)", **slider
        ),
        lam=widgets.FloatSlider(
            value=0.5, min=0.0, max=2.0, step=0.05, description="λ (fused)", **slider
        ),
    )


def noisy_bump(n: int = 24, noise: float = 0.3, seed: int = 0) -> torch.Tensor:
    """Scores shaped like a bump over positions 8..15 plus Gaussian noise (float64)."""
    g = torch.Generator().manual_seed(seed)
    pos = torch.arange(n, dtype=torch.float64)
    bump = torch.exp(-0.5 * ((pos - 0.45 * n) / (0.12 * n)) ** 2)
    return 2 * bump + noise * torch.randn(n, generator=g, dtype=torch.float64)


def fusedmax_span(
    lam: float = 0.3, noise: float = 0.3, seed: int = 0, draw: bool = True
) -> dict:
    """sparsemax vs fusedmax on :func:`noisy_bump`: fusedmax picks a contiguous span.

    Returns ``sparsemax`` and ``fusedmax`` weights and, for each, ``runs``: how many
    separate contiguous runs of nonzero weights it has.
    """
    x = noisy_bump(noise=noise, seed=seed)
    out = {"scores": x.tolist()}
    for name, p in [("sparsemax", M.sparsemax(x)), ("fusedmax", M.fusedmax(x, lam))]:
        nz = (p > 0).int()
        runs = int(nz[0]) + int(((nz[1:] - nz[:-1]) == 1).sum())
        out[name] = p.tolist()
        out[name + "_runs"] = runs
    if draw:
        fig, axes = plt.subplots(1, 3, figsize=(6.5, 2.8), sharex=True)
        axes[0].bar(range(len(x)), x.numpy(), color="gray")
        axes[0].set_title("scores", fontsize=10)
        for ax, name, c in [(axes[1], "sparsemax", "C0"), (axes[2], "fusedmax", "C2")]:
            ax.bar(range(len(x)), out[name], color=c)
            ax.set_title(f"{name}: {out[name + '_runs']} run(s)", fontsize=10)
            ax.set_ylim(0, max(max(out["sparsemax"]), max(out["fusedmax"])) * 1.1)
        for ax in axes:
            ax.set_xlabel("position j")
        axes[0].set_ylabel("score / weight")
        fig.tight_layout()
        show(
            fig,
            alt=f"A noisy bump of scores; sparsemax keeps {out['sparsemax_runs']} "
            f"separate run(s) of nonzero weights, fusedmax with lambda {lam} keeps "
            f"{out['fusedmax_runs']}.",
        )
    return out


def fusedmax_span_widget():
    """Sliders for fusedmax's lambda, the noise level and the seed."""
    import ipywidgets as widgets

    def show(lam, noise, seed):
        fusedmax_span(lam, noise, seed)

    slider = dict(continuous_update=False)
    return widgets.interactive(
        show,
        lam=widgets.FloatSlider(
            value=0.3, min=0.0, max=1.5, step=0.05, description="λ", **slider
        ),
        noise=widgets.FloatSlider(
            value=0.3, min=0.0, max=1.0, step=0.05, description="noise", **slider
        ),
        seed=widgets.IntSlider(value=0, min=0, max=20, description="seed", **slider),
    )
