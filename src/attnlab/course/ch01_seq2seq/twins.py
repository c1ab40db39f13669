"""Chapter 1's static twins: ``seq2seq_live`` (the two trained reversal models, with and
without attention, running in the page: :mod:`attnlab.course.twin.live`) and the older
``attention_maps`` (maps computed when the page is built; the browser only shows them).
The mechanism: :mod:`attnlab.course.twin`.
"""

from __future__ import annotations

import torch

from ...data import ReversalTask
from ...seq2seq import Seq2Seq
from ..twin import (
    HEAD,
    Range,
    Readout,
    Select,
    Text,
    Twin,
    TwinCheck,
    register_check,
)
from ..twin.live import _check_task, _unknown, _vocab, export_model, rebuild_model

__all__ = [
    "attention_maps_twin",
    "translation_maps",
    "seq2seq_live_twin",
    "reversal_cases",
]


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
        out[text] = {
            "src": r["src"],
            "out": rows,
            "weights": r["weights"],
            "text": r["text"],
        }
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


# -------------------------------------------------------- 1. reversal, both models
def seq2seq_live_twin(
    model: Seq2Seq,
    model_no_attention: Seq2Seq,
    task: ReversalTask,
    examples=("quickbrownfx", "hello", "zyxwvutsrqponmlkjihgfedc", "abc"),
    title: str = "The two reversal models, running in your browser",
) -> Twin:
    """Chapter 1: type letters; the trained models with and without attention reverse
    them in the page, and the attention model's alignment is drawn."""
    if not isinstance(task, ReversalTask):
        raise TypeError(
            f"seq2seq_live_twin needs a ReversalTask, got {type(task).__name__}"
        )
    if (
        model.config.attention is None
        or model_no_attention.config.attention is not None
    ):
        raise ValueError(
            "seq2seq_live_twin takes the attention model first, then the "
            "model without attention"
        )
    examples = [str(e) for e in examples]
    if not examples:
        raise ValueError("seq2seq_live_twin needs at least one example")
    data = {
        "task": "reversal",
        "extra_len": 10,  # Seq2Seq.translate decodes up to len(target) + 2 + 10 tokens
        **_vocab(task),
        "models": {
            "attention": export_model(model.eval()),
            "no_attention": export_model(model_no_attention.eval()),
        },
    }
    return Twin(
        "seq2seq_live",
        title,
        controls=[
            # Twice the longest training string (24): room to see it fail, and a
            # decode that stays cheap per keystroke (issue 41).
            Text("source", "letters", examples[0], maxlength=48),
            Select(
                "example", "or pick one", (("", "…"), *((e, e) for e in examples)), ""
            ),
        ],
        readouts=[
            Readout("output", "with attention"),
            Readout("correct", "right?"),
            Readout("output_no_attention", "without attention"),
            Readout("correct_no_attention", "right?"),
            Readout("message", "refused"),
            Readout("unknown", "read as <unk>"),
            Readout("time", "decoded in"),
        ],
        data=data,
        head=HEAD,
        libs=("nn",),
        note="Both models decode greedily in float32 on every keystroke. Red letters "
        "differ from the true reversal. The heatmap is the attention model's: one row "
        "per output step, one column per source letter.",
    )


def _reversal_task(data):
    task = ReversalTask(distinct=False)
    _check_task(data, task)
    return task


def _seq2seq_reference(settings: dict, data: dict) -> dict:
    task = _reversal_task(data)
    text = settings["source"]
    try:
        task.encode(text)
    except ValueError as err:
        return {
            "output": "",
            "output_no_attention": "",
            "message": str(err),
            "unknown": "",
        }
    out = {"message": ""}
    for key, suffix in (("attention", ""), ("no_attention", "_no_attention")):
        r = rebuild_model(data["models"][key]).translate(task, text)
        out["output" + suffix] = r["text"]
        out["correct" + suffix] = bool(r["correct"])
        if r["weights"] is not None:
            for i, row in enumerate(r["weights"].tolist()):
                for j, v in enumerate(row):
                    out[f"w:{i}:{j}"] = v
    out["unknown"] = _unknown(task, task.tokenize(text))
    return out


def reversal_cases(data: dict | None = None, n: int = 44) -> list[dict]:
    """Inputs the check types into the reversal twin: ``n`` strings of distinct letters
    as in training (lengths 3 to 24), the shortest and longest, and inputs outside
    the training distribution (repeats, capitals, spaces, unknown characters)."""
    train_like = ReversalTask(lengths=(3, 24), distinct=True)
    texts = ["".join(s) for s, _ in train_like.pairs(n, seed=2024)]
    texts += [
        "abc",  # the shortest training length
        "zyxwvutsrqponmlkjihgfedc",  # the longest (24)
        "abcdefghijklmnopqrstuvwxyz",  # 26: longer than any training string
        "a",
        "ab",
        "hello",  # repeated letters
        "attention",
        "Quick Brown",  # capitals and a space: lower-cased, the space dropped
        "abc1d",  # a digit: unknown, read as <unk>
        "héllo!",
        "",  # empty: refused
        "  \t ",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",  # 40 letters
    ]
    return [{"source": t} for t in texts]


register_check(
    "seq2seq_live",
    TwinCheck(cases=reversal_cases, reference=_seq2seq_reference, tol={"w": 1e-4}),
)
