"""Chapter 4's static twin: the alignment lab that works on the website.

:func:`alignment_lab_twin` mirrors :func:`attnlab.widgets.structured.alignment_lab_widget`:
a target word of "I am going to the store → Vou à loja" looks back at the source words;
its scores, divided by a temperature, are mapped by softmax, sparsemax, 1.5-entmax,
fusedmax, the CRF's marginals or a Gumbel-max hard sample, and one alignment is
sampled from the result. The browser computes every mapping itself
(``alignment_lab.js``); the browser check compares its weights with
:func:`attnlab.widgets.structured.map_scores`.

Randomness: the browser cannot replay torch's generator, so the twin draws its
uniforms with the twins' own seeded generator (:func:`attnlab.widgets.twins.uniforms`);
the reference draws the same numbers, so the Gumbel-max sample and the sampled
alignment are checked too (they differ from the notebook's draw for the same seed).
"""

from __future__ import annotations

import torch

from ... import mappings as M
from ...structured import enumerate_linear_chain
from ..twin import Range, Readout, Select, Twin, TwinCheck, register_check
from ..twin.rng import uniforms
from .widgets import (
    LAB_MAPPINGS,
    SOURCE,
    SPAN_SCORES,
    TARGET,
    agreement_transition,
    map_scores,
)

__all__ = ["alignment_lab_twin"]


def alignment_lab_twin() -> Twin:
    """Chapter 4: target word, mapping, temperature (log), CRF agreement, λ, seed."""
    n = len(SOURCE)
    return Twin(
        "alignment_lab",
        "Alignment lab",
        controls=[
            Select("target", "target", tuple(TARGET), "à"),
            Select("mapping", "mapping", tuple(LAB_MAPPINGS), "softmax"),
            Range("logtemp", "temperature (log)", -1.5, 1, 0.1, 0),
            Range("strength", "CRF agreement", 0, 6, 0.25, 1),
            Range("lam", "λ (fusedmax)", 0, 2, 0.05, 0.5),
            Range("seed", "seed", 0, 50, 1, 0),
        ],
        readouts=[
            Readout("support", "support"),
            Readout("total", "sum of weights"),
            Readout("sample", "sampled alignment"),
        ],
        data={
            "source": SOURCE,
            "scores": {t: [float(v) for v in SPAN_SCORES[t]] for t in TARGET},
            "n": n,
        },
        note="Bars: the weights of the source words (grey: exactly zero); ▼ marks one "
        "alignment sampled from them. The CRF's marginals need not sum to 1. The "
        "random draws are the browser's own: the notebook's widget draws other ones "
        "for the same seed.",
    )


def _reference(settings: dict, data: dict) -> dict:
    scores = torch.tensor(data["scores"][settings["target"]], dtype=torch.float64)
    n = len(scores)
    temp = 10.0 ** float(settings["logtemp"])
    strength, lam = float(settings["strength"]), float(settings["lam"])
    mapping = settings["mapping"]
    u = torch.from_numpy(uniforms(int(settings["seed"]), n + 1))
    x = scores / temp
    if mapping == "hard sample":  # Gumbel-max on the twin's uniforms
        g = -torch.log(-torch.log(u[:n].clamp(1e-12, 1 - 1e-12)))
        w = M.argmax(x + g)
    else:
        w = map_scores(scores, mapping, temp, strength, lam)
    if mapping == "hard sample":
        sample = [int(w.argmax())]
    elif mapping == "CRF marginals":
        unary = torch.stack([torch.zeros_like(x), x], dim=-1)[None]  # (1, n, 2)
        configs, logp = enumerate_linear_chain(unary, agreement_transition(strength))
        cdf = torch.cumsum(logp[0].exp(), 0)
        k = min(int((cdf <= u[n]).sum()), len(cdf) - 1)
        sample = [i for i, z in enumerate(configs[k].tolist()) if z == 1]
    else:
        cdf = torch.cumsum(w, 0)
        sample = [min(int((cdf <= u[n] * cdf[-1]).sum()), n - 1)]
    out = {f"p:{j}": float(v) for j, v in enumerate(w)}
    out.update(
        support=int((w > 0).sum()),
        total=float(w.sum()),
        sample=" ".join(data["source"][j] for j in sample) or "(nothing)",
        logtemp=temp,
    )
    return out


def _tolerance(settings: dict) -> float:
    return 1e-6 if settings["mapping"] == "fusedmax" else 1e-9


register_check(
    "alignment_lab",
    TwinCheck(
        cases=[
            {"target": "à", "mapping": "softmax", "logtemp": 0, "seed": 0},
            {"target": "Vou", "mapping": "sparsemax", "logtemp": -0.5, "seed": 3},
            {"target": "loja", "mapping": "entmax15", "logtemp": 0.3, "seed": 7},
            {"target": "à", "mapping": "fusedmax", "logtemp": 0, "lam": 0.5},
            {"target": "Vou", "mapping": "fusedmax", "logtemp": -0.2, "lam": 1.5},
            {"target": "à", "mapping": "CRF marginals", "logtemp": 0, "strength": 1},
            {"target": "Vou", "mapping": "CRF marginals", "strength": 4, "seed": 9},
            {"target": "à", "mapping": "hard sample", "logtemp": 0.5, "seed": 5},
            {"target": "loja", "mapping": "hard sample", "logtemp": 1, "seed": 11},
        ],
        reference=_reference,
        tol={"p": _tolerance, "total": _tolerance},
    ),
)
