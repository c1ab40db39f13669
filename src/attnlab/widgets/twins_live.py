"""Twins that run a trained model of the course in the page (chapters 1 and 7).

The other twins recompute formulas; these two run the very model the chapter just
trained, on whatever the reader types, with no kernel:

=====================  =======  ======================================================
twin (``data-twin``)   chapter  what the browser runs
=====================  =======  ======================================================
``seq2seq_live``       1        the GRU encoder–decoders with and without attention
``date_translator``    7        the 2 + 2-layer Transformer that writes dates in ISO
=====================  =======  ======================================================

**Export.** :func:`export_model` packs a model's ``state_dict`` into the twin's JSON
payload: every tensor in float32, one after the other, base64 (``blob``) with an index
(``tensors``: name, shape, offset), the hyper-parameters (``hp``) and the vocabularies.
The page decodes it once when the twin starts (``twin_js/lib/nn.js``) and runs the
model's equations in float32 on every keystroke.

**Reference.** The browser check does not trust the page: :func:`rebuild_model` builds
an attnlab model *from the payload read back from the page*, and the references below
run it through attnlab (``task.encode``, ``greedy``, ``translate``,
``attention_maps``) for each input the check types (:func:`date_cases`,
:func:`reversal_cases`: held-out inputs in every format the task generates, the
shortest and longest, and inputs outside the training formats). Output strings must be
identical, attention weights within 1e-4, and an input attnlab refuses must show
attnlab's ValueError message.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib

import numpy as np
import torch

from ..data import DateTask, ReversalTask, make_task
from ..seq2seq import Seq2Seq, Seq2SeqConfig
from ..transformer import Seq2SeqTransformer, TransformerConfig
from .twin import HEAD, Readout, Select, Text, Twin, TwinCheck, register_check

__all__ = [
    "export_model",
    "rebuild_model",
    "date_translator_twin",
    "seq2seq_live_twin",
    "date_cases",
    "reversal_cases",
    "page_weight",
    "MAX_PAGE_BYTES",
]

MAX_PAGE_BYTES = 1_000_000  # the page-weight budget of one model's twin
DATE_MAX_LEN = 12  # greedy steps of the date Transformer (10 characters + <eos> + 1)


# ------------------------------------------------------------------------ export
def export_model(model: torch.nn.Module) -> dict:
    """``{"kind", "hp", "blob", "tensors"}`` of a :class:`Seq2SeqTransformer` or a
    :class:`Seq2Seq` (the configurations the page runtime runs; others raise)."""
    if isinstance(model, Seq2SeqTransformer):
        cfg = model.cfg
        layer = model.encoder.layers[0]
        if cfg.activation != "relu" or cfg.positional not in ("sinusoidal", "none"):
            raise ValueError(
                "export_model: the page runs Transformers with relu and sinusoidal (or "
                f"no) positions, got activation={cfg.activation!r}, "
                f"positional={cfg.positional!r}"
            )
        hp = dataclasses.asdict(cfg) | {"layer_norm_eps": layer.norm1.eps}
        kind = "transformer"
    elif isinstance(model, Seq2Seq):
        cfg = model.config
        if cfg.style != "luong" or cfg.attention not in (None, "dot"):
            raise ValueError(
                "export_model: the page runs Luong-style GRU models with dot attention "
                f"or none, got style={cfg.style!r}, attention={cfg.attention!r}"
            )
        if cfg.mapping != "softmax":
            raise ValueError(f"export_model: softmax only, got mapping={cfg.mapping!r}")
        hp = dataclasses.asdict(cfg) | {"bos_id": model.bos_id, "eos_id": model.eos_id}
        kind = "seq2seq"
    else:
        raise TypeError(
            "export_model takes an attnlab Seq2SeqTransformer or Seq2Seq, got "
            f"{type(model).__name__}"
        )
    arrays, tensors, offset = [], [], 0
    for name, t in model.state_dict().items():
        a = t.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4")
        tensors.append([name, list(a.shape), offset])
        arrays.append(a.ravel())
        offset += a.size
    blob = base64.b64encode(np.concatenate(arrays).tobytes()).decode("ascii")
    return {"kind": kind, "hp": hp, "blob": blob, "tensors": tensors}


_REBUILT: dict[str, torch.nn.Module] = {}


def rebuild_model(exported: dict) -> torch.nn.Module:
    """The attnlab model an :func:`export_model` payload holds (eval mode, cached)."""
    key = hashlib.sha1((exported["kind"] + exported["blob"]).encode()).hexdigest()
    if key in _REBUILT:
        return _REBUILT[key]
    flat = np.frombuffer(base64.b64decode(exported["blob"]), dtype="<f4")
    state = {}
    for name, shape, offset in exported["tensors"]:
        size = int(np.prod(shape)) if shape else 1
        state[name] = torch.from_numpy(flat[offset : offset + size].copy()).view(shape)
    hp = dict(exported["hp"])
    if exported["kind"] == "transformer":
        eps = hp.pop("layer_norm_eps")
        model = Seq2SeqTransformer(TransformerConfig(**hp))
        for m in model.modules():
            if isinstance(m, torch.nn.LayerNorm):
                m.eps = eps
    elif exported["kind"] == "seq2seq":
        hp.pop("bos_id"), hp.pop("eos_id")
        model = Seq2Seq(Seq2SeqConfig(**hp))
    else:
        raise ValueError(f"rebuild_model: unknown kind {exported['kind']!r}")
    model.load_state_dict(state)
    _REBUILT[key] = model.eval()
    return model


def page_weight(twin: Twin) -> int:
    """Bytes the twin adds to a page (its HTML, script and payload, UTF-8)."""
    return len(twin.html().encode())


def _vocab(task) -> dict:
    return {"src_itos": task.src_vocab.itos, "tgt_itos": task.tgt_vocab.itos}


def _check_task(data: dict, task) -> None:
    if (
        data["src_itos"] != task.src_vocab.itos
        or data["tgt_itos"] != task.tgt_vocab.itos
    ):
        raise ValueError("the twin's vocabularies are not the task's")


def _unknown(task, tokens) -> str:
    return " ".join(t for t in tokens if t not in task.src_vocab)


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
    data = {"task": "date", "max_len": DATE_MAX_LEN, **_vocab(task),
            **export_model(model.eval())}  # fmt: skip
    layers = [(str(i), f"layer {i}") for i in range(cfg.n_decoder_layers)]
    heads = [(str(h), f"head {h}") for h in range(cfg.n_heads)]
    return Twin(
        "date_translator",
        title,
        controls=[
            Text("source", "date", examples[0], maxlength=100),
            Select(
                "example",
                "or pick a held-out date",
                (("", "…"), *((e, e) for e in examples)),
                "",
            ),  # fmt: skip
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
    cases += [{"source": "Jun 4, 1994", "layer": str(la), "head": str(h)}
              for la in (0, 1) for h in (0, 3)]  # fmt: skip
    return cases


register_check(
    "date_translator",
    TwinCheck(cases=date_cases, reference=_date_reference, tol={"w": 1e-4}),
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
        raise ValueError("seq2seq_live_twin takes the attention model first, then the "
                         "model without attention")  # fmt: skip
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
            Text("source", "letters", examples[0], maxlength=100),
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
        return {"output": "", "output_no_attention": "", "message": str(err),
                "unknown": ""}  # fmt: skip
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
