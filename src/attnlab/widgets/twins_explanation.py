"""Chapter 11's static twin: the importance panel that works on the website.

:func:`importance_twin` shows a few test examples under several importance measures
(attention, gradient × input, leave-one-out), computed by the trained model when the
page was built; the reader picks an example and k, and the twin marks and counts each
measure's k top-ranked tokens against the true rationale. The browser check compares
its readouts with :func:`_importance_reference` (torch's stable sort, ties broken by
position as in :func:`attnlab.explain.rationale_recall`).
"""

from __future__ import annotations

import torch

from .twin import Range, Readout, Select, Twin, TwinCheck, register_check

__all__ = ["importance_twin"]


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
        exs.append({
            "label": f"example {i}, label {int(data.labels[i])}",
            "tokens": data.tokens(i),
            "rationale": [int(r) for r in data.rationale[i, :n].tolist()],
            "scores": {m: [round(float(v), 6) for v in s[i, :n].tolist()] for m, s in scores.items()},
        })  # fmt: skip
    measures = list(scores)
    readouts = [Readout("label", "example")]
    for m in measures:
        readouts += [
            Readout(f"top_{m}", f"{m}: top token"),
            Readout(f"hits_{m}", "rationale in top k"),
        ]
    return Twin(
        "importance",
        title,
        controls=[
            Select("example", "example", tuple((str(j), e["label"]) for j, e in enumerate(exs)), "0"),
            Range("k", "top k", 1, 4, 1, 2),
        ],
        readouts=readouts,
        data={"measures": measures, "examples": exs},
        note="The trained model cannot run in your browser: these scores were computed by "
        "it when this page was built. Rationale tokens are boxed; dots mark each "
        "measure's k top-ranked tokens.",
    )  # fmt: skip


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
