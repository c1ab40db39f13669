"""Chapter 1's static twin ``attention_maps``: the trained model's attention maps, computed
when the page is built (the browser only shows them). The mechanism: :mod:`attnlab.course.twin`.
"""

from __future__ import annotations

import torch

from ..twin import (
    Range,
    Readout,
    Select,
    Twin,
    TwinCheck,
    register_check,
)

__all__ = ["attention_maps_twin", "translation_maps"]


# ------------------------------------------------------- 6. attention maps (model)
def attention_maps_twin(examples: dict, title: str = "Attention maps") -> Twin:
    """Precomputed attention maps of a trained model, chosen by a selector.

    ``examples``: ``{label: {"src": [source tokens], "out": [output tokens, one per
    row], "weights": (T, S) nested list or tensor, "text": the output string}}``, e.g.
    from ``Seq2Seq.translate``. The model does not run in the browser; the page says so.
    """
    if not examples:
        raise ValueError("attention_maps_twin needs at least one example")
    exs = []
    for label, e in examples.items():
        w = torch.as_tensor(e["weights"], dtype=torch.float64)
        if w.dim() != 2 or w.shape != (len(e["out"]), len(e["src"])):
            raise ValueError(
                f"example {label!r}: weights must be (len(out), len(src)) = "
                f"({len(e['out'])}, {len(e['src'])}), got {tuple(w.shape)}"
            )
        exs.append(
            {
                "label": str(label),
                "src": [str(s) for s in e["src"]],
                "out": [str(s) for s in e["out"]],
                "text": str(e.get("text", "")),
                "weights": [[round(float(x), 5) for x in row] for row in w],
            }
        )
    return Twin(
        "attention_maps",
        title,
        controls=[
            Select(
                "example",
                "input",
                tuple((str(i), e["label"]) for i, e in enumerate(exs)),
                "0",
            ),
            Range("step", "output step", 0, max(len(e["out"]) for e in exs) - 1, 1, 0),
        ],
        readouts=[
            Readout("output", "output"),
            Readout("writing", "writing"),
            Readout("focus", "looks most at"),
            Readout("focus_weight", "with weight"),
        ],
        data={"examples": exs},
        note="The trained model cannot run in your browser: these maps were computed "
        "by it when this page was built, for the inputs in the list.",
    )


def translation_maps(model, task, texts) -> dict:
    """``{text: example}`` for :func:`attention_maps_twin` from a seq2seq model's
    ``translate(task, text)`` (rows: the output tokens, then ``<eos>``)."""
    out = {}
    for text in texts:
        r = model.translate(task, text)
        if r["weights"] is None:
            raise ValueError("translation_maps needs a model with attention")
        rows = (list(r["out"]) + ["<eos>"])[: r["weights"].shape[0]]
        out[text] = {"src": r["src"], "out": rows, "weights": r["weights"],
                     "text": r["text"]}  # fmt: skip
    return out


def _attention_maps_reference(settings: dict, data: dict) -> dict:
    e = data["examples"][int(settings["example"])]
    w = torch.tensor(e["weights"], dtype=torch.float64)
    step = min(int(settings["step"]), w.shape[0] - 1)
    f = int(w[step].argmax())
    return {
        "output": e["text"],
        "writing": e["out"][step],
        "focus": e["src"][f],
        "focus_weight": float(w[step, f]),
        "step": step,
    }


def _attention_maps_cases(data: dict) -> list:
    cases = []
    for i, e in enumerate(data["examples"][:3]):
        T = len(e["out"])
        cases += [{"example": str(i), "step": s} for s in (0, T // 2, T - 1, 99)]
    return cases


register_check(
    "attention_maps",
    TwinCheck(cases=_attention_maps_cases, reference=_attention_maps_reference),
)
