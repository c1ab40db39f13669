"""Chapter 11's static twins: the importance panel and the adversary on the website.

:func:`importance_twin` shows a few test examples under several importance measures
(attention, gradient × input, leave-one-out), computed by the trained model when the
page was built; the reader picks an example and k, and the twin marks and counts each
measure's k top-ranked tokens against the true rationale. The browser check compares
its readouts with :func:`_importance_reference` (torch's stable sort, ties broken by
position as in :func:`attnlab.explain.rationale_recall`).

:func:`adversary_twin` mirrors :func:`attnlab.widgets.explanation.adversary_widget`: the
adversary (:func:`attnlab.explain.adversarial_attention`) runs once per ε stop of the
widget's slider when the page is built, and the reader slides ε over the results; the
browser computes the Jensen–Shannon divergence of the two distributions itself, which
the browser check compares with :func:`attnlab.explain.jsd`.
"""

from __future__ import annotations

import torch

from ...explain import jsd
from ..twin import Range, Readout, Select, Twin, TwinCheck, register_check
from .widgets import EPS_STEPS, adversary_view

__all__ = ["importance_twin", "adversary_twin"]


def importance_twin(
    data, scores: dict, indices, title: str = "Which tokens matter?"
) -> Twin:
    """``data``: a :class:`attnlab.data.RationaleData`; ``scores``: ``{measure: (N, T)
    tensor}``; ``indices``: the examples to include (a handful: the payload is inline)."""
    if not scores:
        raise ValueError("importance_twin needs at least one measure")
    indices = [int(i) for i in indices]
    if not indices or min(indices) < 0 or max(indices) >= len(data):
        raise ValueError(
            f"indices must be examples of data (0..{len(data) - 1}), got {indices}"
        )
    for name, s in scores.items():
        if tuple(s.shape) != tuple(data.ids.shape):
            raise ValueError(
                f"scores[{name!r}] must be {tuple(data.ids.shape)}, got {tuple(s.shape)}"
            )
    exs = []
    for i in indices:
        n = int(data.mask[i].sum())
        exs.append(
            {
                "label": f"example {i}, label {int(data.labels[i])}",
                "tokens": data.tokens(i),
                "rationale": [int(r) for r in data.rationale[i, :n].tolist()],
                "scores": {
                    m: [round(float(v), 6) for v in s[i, :n].tolist()]
                    for m, s in scores.items()
                },
            }
        )
    measures = list(scores)
    readouts = [Readout("label", "showing")]
    for m in measures:
        readouts += [
            Readout(f"top_{m}", f"{m}: top token"),
            Readout(f"hits_{m}", "rationale in top k"),
        ]
    return Twin(
        "importance",
        title,
        controls=[
            Select(
                "example",
                "example",
                tuple((str(j), e["label"]) for j, e in enumerate(exs)),
                "0",
            ),
            Range("k", "top k", 1, 4, 1, 2),
        ],
        readouts=readouts,
        data={"measures": measures, "examples": exs},
        note="The trained model cannot run in your browser: these scores were computed by "
        "it when this page was built. Rationale tokens are boxed; dots mark each "
        "measure's k top-ranked tokens.",
    )


def _importance_reference(settings: dict, data: dict) -> dict:
    e = data["examples"][int(settings["example"])]
    k = int(settings["k"])
    rationale = torch.tensor(e["rationale"], dtype=torch.bool)
    out = {"label": e["label"], "k": k}
    for m in data["measures"]:
        s = torch.tensor(e["scores"][m], dtype=torch.float64)
        order = torch.sort(s, descending=True, stable=True).indices[:k]
        out[f"top_{m}"] = e["tokens"][int(order[0])]
        out[f"hits_{m}"] = int(rationale[order].sum())
    return out


def _importance_cases(data: dict) -> list:
    n = len(data["examples"])
    return [{"example": str(i), "k": k} for i in range(min(n, 3)) for k in (1, 2, 4)]


register_check(
    "importance", TwinCheck(cases=_importance_cases, reference=_importance_reference)
)


# ------------------------------------------------------------------ the adversary
def adversary_twin(
    decode,
    h: torch.Tensor,
    weights: torch.Tensor,
    tokens,
    eps_steps=EPS_STEPS,
    steps: int = 200,
    title: str = "The adversary, ε by ε",
) -> Twin:
    """``decode``, ``h``, ``weights``, ``tokens`` as for
    :func:`attnlab.widgets.explanation.adversary_view`; the adversary runs once per
    value of ``eps_steps`` (about a second each), here, in the notebook."""
    eps_steps = [float(e) for e in eps_steps]
    if not eps_steps or min(eps_steps) < 0:
        raise ValueError(f"eps_steps must be non-negative values, got {eps_steps}")
    tokens = list(tokens)
    views = []
    for eps in eps_steps:
        out = adversary_view(
            decode, h, weights, tokens, eps=eps, steps=steps, show=False
        )
        views.append(
            {
                "eps": eps,
                "adversarial": [
                    round(float(v), 6) for v in out["adversarial"].tolist()
                ],
                "dy": round(out["dy"], 6),
            }
        )
    p = float(out["p"])
    default = min(range(len(eps_steps)), key=lambda i: abs(eps_steps[i] - 0.01))
    return Twin(
        "adversary",
        title,
        controls=[Range("step", "ε step", 0, len(eps_steps) - 1, 1, default)],
        readouts=[
            Readout("jsd", "JSD (max ln 2 = 0.693)"),
            Readout("dy", "|Δp|"),
            Readout("top_model", "model's top token"),
            Readout("top_adv", "adversary's top token"),
        ],
        data={
            "tokens": tokens,
            "weights": [round(float(v), 6) for v in weights.detach().tolist()],
            "p": round(p, 6),
            "views": views,
        },
        note=f"The adversary looked, for each ε, for the attention farthest from the "
        f"model's (largest JSD) that moves its output p = {p:.3f} by at most ε; it "
        f"ran when this page was built, the JSD is computed here. Blue: the model's "
        f"attention; orange: the adversary's.",
    )


def _adversary_reference(settings: dict, data: dict) -> dict:
    v = data["views"][int(settings["step"])]
    w = torch.tensor(data["weights"], dtype=torch.float64)
    a = torch.tensor(v["adversarial"], dtype=torch.float64)
    toks = data["tokens"]
    return {
        "step": v["eps"],
        "jsd": float(jsd(w, a)),
        "dy": v["dy"],
        "top_model": toks[int(torch.argmax(w))],
        "top_adv": toks[int(torch.argmax(a))],
    }


def _adversary_cases(data: dict) -> list:
    return [{"step": i} for i in range(len(data["views"]))]


register_check(
    "adversary",
    TwinCheck(cases=_adversary_cases, reference=_adversary_reference, default_tol=1e-9),
)
