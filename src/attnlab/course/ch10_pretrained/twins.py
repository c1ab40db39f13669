"""Chapter 10's static twin: the head view of MiniLM, maps precomputed in Python.

========================  =======  ===================================================
twin (``data-twin``)      chapter  what the browser computes
========================  =======  ===================================================
``head_view``             10       nothing: MiniLM's maps, drawn as query-key lines
========================  =======  ===================================================

Weights travel as integers in thousandths (a few sentences x 6 layers x 12 heads of
(T, T) maps); the twin and its reference both read those.
"""

from __future__ import annotations

import torch

from ..twin import Range, Readout, Select, Twin, TwinCheck, register_check

__all__ = ["head_view_twin", "minilm_head_maps"]


def minilm_head_maps(model, sentences) -> dict:
    """``{sentence: {"tokens", "weights" (L, H, T, T)}}`` from a MiniLM."""
    out = {}
    for s in sentences:
        tokens, w = model.attention_maps(s)
        out[s] = {"tokens": tokens, "weights": w}
    return out


def head_view_twin(examples: dict, title: str = "Head view of MiniLM") -> Twin:
    """Pick a sentence, a layer, a head and a query among precomputed maps.

    ``examples``: ``{label: {"tokens": [T tokens], "weights": (L, H, T, T)}}``, e.g.
    from :func:`minilm_head_maps`; every example has the same L and H. Readouts: the
    key the query looks at most, its weight, and the query's weight on the first and
    last token (``[CLS]`` and ``[SEP]``).
    """
    if not examples:
        raise ValueError("head_view_twin needs at least one example")
    sents, shape = [], None
    for label, e in examples.items():
        w = torch.as_tensor(e["weights"], dtype=torch.float64)
        T = len(e["tokens"])
        if w.dim() != 4 or w.shape[2:] != (T, T):
            raise ValueError(
                f"example {label!r}: weights must be (L, H, {T}, {T}) for {T} tokens, "
                f"got {tuple(w.shape)}"
            )
        if shape is not None and w.shape[:2] != shape:
            raise ValueError(
                f"example {label!r}: (L, H) = {tuple(w.shape[:2])}, "
                f"the others have {tuple(shape)}"
            )
        shape = w.shape[:2]
        milli = torch.round(w * 1000).long()  # thousandths keep the page small
        sents.append(
            {
                "label": str(label),
                "tokens": [str(t) for t in e["tokens"]],
                "weights": milli.tolist(),
            }
        )
    L, H = shape
    return Twin(
        "head_view",
        title,
        controls=[
            Select(
                "sentence",
                "sentence",
                tuple((str(i), s["label"]) for i, s in enumerate(sents)),
                "0",
            ),
            Range("layer", "layer", 0, L - 1, 1, 0),
            Range("head", "head", 0, H - 1, 1, 0),
            Range("query", "query", 0, max(len(s["tokens"]) for s in sents) - 1, 1, 1),
        ],
        readouts=[
            Readout("focus", "looks most at"),
            Readout("focus_weight", "with weight"),
            Readout("sink", "weight on [CLS] + [SEP]"),
        ],
        data={"sentences": sents},
        note="The model does not run in your browser: these maps were computed by "
        "MiniLM when this page was built, for the sentences in the list (weights "
        "rounded to thousandths).",
    )


def _head_view_reference(settings: dict, data: dict) -> dict:
    s = data["sentences"][int(settings["sentence"])]
    w = torch.tensor(s["weights"], dtype=torch.float64) / 1000  # (L, H, T, T)
    T = len(s["tokens"])
    q = min(int(settings["query"]), T - 1)
    row = w[int(settings["layer"]), int(settings["head"]), q]  # (T,)
    f = int(row.argmax())
    return {
        "query": q,
        "focus": s["tokens"][f],
        "focus_weight": float(row[f]),
        "sink": float(row[0] + row[T - 1]),
    }


def _head_view_cases(data: dict) -> list:
    cases = []
    for i, s in enumerate(data["sentences"][:2]):
        T = len(s["tokens"])
        L, H = len(s["weights"]), len(s["weights"][0])
        cases += [
            {"sentence": str(i), "layer": 0, "head": 0, "query": 1},
            {"sentence": str(i), "layer": L - 1, "head": H - 1, "query": T - 1},
            {"sentence": str(i), "layer": L // 2, "head": H // 2, "query": 99},
        ]
    return cases


register_check(
    "head_view",
    TwinCheck(
        cases=_head_view_cases, reference=_head_view_reference, default_tol=1e-12
    ),
)
