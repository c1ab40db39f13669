"""Chapter 12's static twin: the trained model's heads over a repeated sequence.

========================  =======  ===================================================
twin (``data-twin``)      chapter  what the browser computes
========================  =======  ===================================================
``induction_view``        12       each head's induction pattern and score, from maps
                                   the model computed when the page was built
========================  =======  ===================================================

The reader picks a sequence, a head (a selector over every layer and head) and a
query; the twin draws that head's (T, T) map with the induction pattern's cells
outlined, and reads out where the query looks, the weight the query puts on the
induction pattern's keys (the token after the earlier occurrence of the query's
token) and the head's induction score on the sequence (TransformerLens's definition,
:func:`attnlab.circuits.head_scores`). Weights travel as integers in thousandths; the
twin and its reference both read those.
"""

from __future__ import annotations

import torch

from ...circuits import AttentionOnly, head_scores, pattern_mask
from ..twin import Range, Readout, Select, Twin, TwinCheck, register_check

__all__ = ["induction_twin", "induction_maps"]


@torch.no_grad()
def induction_maps(model: AttentionOnly, sequences: dict) -> dict:
    """``{label: {"ids": [T], "weights": (L, H, T, T)}}`` for ``{label: ids (T,)}``."""
    out = {}
    for label, ids in sequences.items():
        ids = torch.as_tensor(ids, dtype=torch.long).reshape(1, -1)
        model(ids)
        out[label] = {"ids": ids[0].tolist(), "weights": model.attention()[:, 0]}
    return out


def induction_twin(maps: dict, title: str = "Find the induction head") -> Twin:
    """``maps`` from :func:`induction_maps` (every sequence with the same L and H)."""
    if not maps:
        raise ValueError("induction_twin needs at least one sequence")
    seqs, shape = [], None
    for label, e in maps.items():
        w = torch.as_tensor(e["weights"], dtype=torch.float64)
        T = len(e["ids"])
        if w.dim() != 4 or w.shape[2:] != (T, T):
            raise ValueError(
                f"sequence {label!r}: weights must be (L, H, {T}, {T}), got "
                f"{tuple(w.shape)}"
            )
        if shape is not None and w.shape[:2] != shape:
            raise ValueError(f"sequence {label!r}: (L, H) differs from the others")
        shape = w.shape[:2]
        seqs.append(
            {
                "label": str(label),
                "ids": [int(i) for i in e["ids"]],
                "weights": torch.round(w * 1000).long().tolist(),
            }
        )
    L, H = shape
    heads = tuple(
        (f"{layer}.{h}", f"layer {layer}, head {h}")
        for layer in range(L)
        for h in range(H)
    )
    T_max = max(len(s["ids"]) for s in seqs)
    return Twin(
        "induction_view",
        title,
        controls=[
            Select(
                "sequence",
                "sequence",
                tuple((str(i), s["label"]) for i, s in enumerate(seqs)),
                "0",
            ),
            Select("head", "head", heads, f"{L - 1}.0"),
            Range("query", "query", 0, T_max - 1, 1, T_max - 2),
        ],
        readouts=[
            Readout("focus", "looks most at"),
            Readout("focus_weight", "with weight"),
            Readout("target", "induction key"),
            Readout("target_weight", "weight on it"),
            Readout("score", "head's induction score"),
        ],
        data={"sequences": seqs},
        head="<b>Runs in your browser</b> (works on the website too): the panel "
        "reads maps stored in the page.",  # no ipywidget above it on the page
        note="The model does not run in your browser: these maps were computed by the "
        "chapter's trained 2-layer model when this page was built (weights rounded "
        "to thousandths). Red outlines: the induction pattern, the token after the "
        "earlier occurrence of each query's token.",
    )


def _induction_reference(settings: dict, data: dict) -> dict:
    s = data["sequences"][int(settings["sequence"])]
    ids = torch.tensor([s["ids"]])  # (1, T)
    T = ids.shape[1]
    layer, h = (int(v) for v in settings["head"].split("."))
    w = torch.tensor(s["weights"], dtype=torch.float64) / 1000  # (L, H, T, T)
    q = min(int(settings["query"]), T - 1)
    row = w[layer, h, q]  # (T,)
    f = int(row.argmax())
    keys = pattern_mask(ids, "induction")[0, q].nonzero()[:, 0].tolist()
    score = head_scores(w[layer, h][None, None], ids, "induction")  # (1,)
    name = f"{s['ids'][f]} @ {f}"
    return {
        "query": q,
        "focus": name,
        "focus_weight": float(row[f]),
        "target": ", ".join(f"{s['ids'][j]} @ {j}" for j in keys) or "none",
        "target_weight": float(row[keys].sum()) if keys else 0.0,
        "score": float(score),
    }


def _induction_cases(data: dict) -> list:
    cases = []
    for i, s in enumerate(data["sequences"][:2]):
        T = len(s["ids"])
        L, H = len(s["weights"]), len(s["weights"][0])
        cases += [
            {"sequence": str(i), "head": f"{L - 1}.0", "query": T - 2},
            {"sequence": str(i), "head": f"{L - 1}.{H - 1}", "query": T - 1},
            {"sequence": str(i), "head": "0.0", "query": 1},
            {"sequence": str(i), "head": f"0.{H - 1}", "query": 0},
        ]
    return cases


register_check(
    "induction_view",
    TwinCheck(
        cases=_induction_cases,
        reference=_induction_reference,
        default_tol=1e-9,
        tol={"score": 1e-6},
    ),
)
