"""Chapter 7's static twins: ``positional`` (the sinusoidal encoding table and the dot
product of two positions' codes, recomputed in the browser) and ``date_translator``
(the trained date Transformer running in the page, :mod:`attnlab.course.twin.live`).
The mechanism: :mod:`attnlab.course.twin`.
"""

from __future__ import annotations

import math

import torch

from ...data import DateTask, make_task
from ...positional import sinusoidal_encoding
from ...transformer import Seq2SeqTransformer
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
from ..twin.live import (
    DATE_MAX_LEN,
    _check_task,
    _unknown,
    _vocab,
    export_model,
    rebuild_model,
)

__all__ = ["positional_twin", "date_translator_twin", "date_cases", "date_text"]


# ------------------------------------------------------------ 5. positional enc.
def positional_twin(n_positions: int = 64, d_model: int = 32, base: float = 10000.0):
    """Chapter 7: the sinusoidal table; sliders pick a position and a feature."""
    if n_positions < 2 or d_model < 2:
        raise ValueError(
            f"positional_twin needs n_positions >= 2 and d_model >= 2, got "
            f"{n_positions}, {d_model}"
        )
    return Twin(
        "positional",
        "Sinusoidal positional encoding",
        controls=[
            Range("position", "position", 0, n_positions - 1, 1, 10),
            Range("dim", "feature", 0, d_model - 1, 1, 4),
            Range("offset", "offset k", -32, 32, 1, 4),
        ],
        readouts=[
            Readout("value", "PE[position, feature]"),
            Readout("wavelength", "wavelength"),
            Readout("dot", "PE[position] · PE[position + k]"),
        ],
        data={"n_positions": n_positions, "d_model": d_model, "base": base},
        note="Red is +1, blue −1. Low features turn fast (short wavelengths), high "
        "features slowly: together they give every position a distinct code. Bottom: "
        "the dot product of two positions' codes against their offset k: move the "
        "position and watch whether the curve moves.",
        head=HEAD,  # it follows a static figure, not a widget
    )


def _positional_reference(settings: dict, data: dict) -> dict:
    pos, dim = int(settings["position"]), int(settings["dim"])
    P, D, base = data["n_positions"], data["d_model"], data["base"]
    pe = sinusoidal_encoding(P, D, base=base, dtype=torch.float64)
    k = int(settings.get("offset", 4))
    # the identity the panel shows: PE[p] . PE[p + k] = sum over pairs of cos(w_i k),
    # w_i = base^(-2i/D); checked against the table itself in tests/test_widgets_twin.py
    freqs = base ** (-torch.arange(0, D, 2, dtype=torch.float64) / D)  # (D/2,)
    return {
        "value": float(pe[pos, dim]),
        "wavelength": 2 * math.pi * base ** ((dim - dim % 2) / D),
        "dot": float(torch.cos(freqs * k).sum()),
        "position": pos,
        "dim": dim,
    }


register_check(
    "positional",
    TwinCheck(
        cases=[
            {"position": 10, "dim": 4},
            {"position": 0, "dim": 1, "offset": -32},
            {"position": 63, "dim": 0, "offset": 32},
            {"position": 37, "dim": 31, "offset": 0},
            {"position": 5, "dim": 2, "offset": -7},
        ],
        reference=_positional_reference,
        tol={"dot": 1e-9},
        default_tol=1e-12,
    ),
)


# --------------------------------------------------------------- 7. date translator
def date_text(src_tokens) -> str:
    """A date's source tokens as a reader writes them: ``22 November 2026``,
    ``Nov 22, 2026`` or ``22.11.2026``."""
    toks = list(src_tokens)
    if "." in toks:
        return "".join(toks)
    if "," in toks:
        i = toks.index(",")
        return f"{toks[0]} {''.join(toks[1:i])}, {''.join(toks[i + 1 :])}"
    return f"{''.join(toks[:-5])} {toks[-5]} {''.join(toks[-4:])}"


def date_translator_twin(
    model: Seq2SeqTransformer,
    task: DateTask,
    examples=None,
    title: str = "The date Transformer, running in your browser",
) -> Twin:
    """Chapter 7: type a date (or pick one); the trained Transformer writes it in ISO
    form in the page, and a heatmap shows one cross-attention head."""
    if not isinstance(task, DateTask):
        raise TypeError(
            f"date_translator_twin needs a DateTask, got {type(task).__name__}"
        )
    cfg = model.cfg
    if examples is None:
        test = task.with_split("test")
        examples = [date_text(s) for s, _ in test.pairs(6, seed=11)]
    examples = [str(e) for e in examples]
    if not examples:
        raise ValueError("date_translator_twin needs at least one example")
    data = {
        "task": "date",
        "max_len": DATE_MAX_LEN,
        **_vocab(task),
        **export_model(model.eval()),
    }
    layers = [(str(i), f"layer {i}") for i in range(cfg.n_decoder_layers)]
    heads = [(str(h), f"head {h}") for h in range(cfg.n_heads)]
    return Twin(
        "date_translator",
        title,
        controls=[
            # Dates are under 20 characters; 40 leaves room to try odd ones, and a
            # decode that stays cheap per keystroke (issue 41).
            Text("source", "date", examples[0], maxlength=40),
            Select(
                "example",
                "or pick a held-out date",
                (("", "…"), *((e, e) for e in examples)),
                "",
            ),
            Select(
                "layer", "cross-attention of", layers, str(cfg.n_decoder_layers - 1)
            ),
            Select("head", "head", heads, "0"),
        ],
        readouts=[
            Readout("output", "output"),
            Readout("message", "refused"),
            Readout("unknown", "read as <unk>"),
            Readout("time", "decoded in"),
        ],
        data=data,
        head=HEAD,
        libs=("nn",),
        note="Each keystroke runs the encoder once and the decoder once per output "
        "character, greedily, in float32. Rows of the heatmap: the character written "
        "at that step; columns: the source tokens; the cells: the weights the chosen "
        "head put on each source token.",
    )


def _date_reference(settings: dict, data: dict) -> dict:
    task = make_task(data["task"], split=None)
    _check_task(data, task)
    model = rebuild_model(data)
    text = settings["source"]
    try:
        batch = task.encode(text)
    except ValueError as err:
        return {"output": "", "message": str(err), "unknown": ""}
    with torch.no_grad():
        ids, _ = model.greedy(batch.src, batch.src_lengths, max_len=data["max_len"])
        g = ids[0].tolist()
        g = g[: g.index(model.eos_id) + 1] if model.eos_id in g else g
        tgt_in = torch.tensor([[model.bos_id] + g[:-1]])
        maps = model.attention_maps(batch.src, tgt_in, batch.src_lengths)
    w = maps["cross"][int(settings["layer"])][0, int(settings["head"])]  # (T, S)
    out = {
        "output": task.join(task.tgt_vocab.decode(ids[0])),
        "message": "",
        "unknown": _unknown(task, batch.src_tokens[0]),
    }
    for i, row in enumerate(w.tolist()):
        for j, v in enumerate(row):
            out[f"w:{i}:{j}"] = v
    return out


_FORMATS = {"dmy": "22 November 2026", "mdy": "Nov 22, 2026", "numeric": "22.11.2026"}


def date_cases(data: dict | None = None, n: int = 48) -> list[dict]:
    """Inputs the check types into the date twin: ``n`` held-out test dates (every
    format, long and short month names), the shortest and longest sources, dates
    outside the training formats and inputs attnlab refuses."""
    test = DateTask(split="test")
    texts = [date_text(s) for s, _ in test.pairs(n, seed=2024)]
    by_len = sorted((date_text(s) for s, _ in test.pairs(400, seed=7)), key=len)
    texts += [by_len[0], by_len[-1]]  # the shortest and the longest test sources
    texts += [
        "1 May 1900",  # fewest tokens of the task (6)
        "22 November 2026",
        "31.12.2099",  # most tokens (10)
        "22 nov 2026",  # lower case: the tokenizer capitalises
        "Nov 22 2026",  # no comma
        "2026-11-22",  # ISO already: refused
        "22/11/2026",  # refused
        "22 Novembre 2026",  # refused (no month name, no dots)
        "",  # empty: refused
        "   ",
        "22..2026",  # int('') refused
        "22.xx.2026",
        "22 November 2026!",  # an unknown token, read as <unk>
        "Sept 3, 1999",  # "Sept" is no month name: refused
        "3 Mai 2011.x.y",
        "29 February 2100",  # no such date: the model writes one anyway
        "1 January 3000",  # a year outside 1900-2099
        "Jan 1, 20266",
        "12345678901234567890",  # refused
        "22 ١١ 2026",  # Arabic-Indic digits: digits to Python, unknown to the model
    ]
    cases = [{"source": t} for t in texts]
    cases += [
        {"source": "Jun 4, 1994", "layer": str(la), "head": str(h)}
        for la in (0, 1)
        for h in (0, 3)
    ]
    return cases


register_check(
    "date_translator",
    TwinCheck(cases=date_cases, reference=_date_reference, tol={"w": 1e-4}),
)
