"""The live models: twins that run a trained model of the course in the page.

The other twins recompute formulas; these two run the very model the chapter just
trained, on whatever the reader types, with no kernel. This module holds what both
share (export, rebuild, page weight); each twin lives in its chapter's ``twins.py``:

=====================  =======  ======================================================
twin (``data-twin``)   chapter  what the browser runs
=====================  =======  ======================================================
``seq2seq_live``       1        the GRU encoder–decoders with and without attention
``date_translator``    7        the 2 + 2-layer Transformer that writes dates in ISO
=====================  =======  ======================================================

**Export.** :func:`export_model` packs a model's ``state_dict`` into the twin's JSON
payload: every tensor in float32, one after the other, base64 (``blob``) with an index
(``tensors``: name, shape, offset), the hyper-parameters (``hp``) and the vocabularies.
The page decodes it once when the twin starts (``course/twin/nn.js``) and runs the
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

from ...seq2seq import Seq2Seq, Seq2SeqConfig
from ...transformer import Seq2SeqTransformer, TransformerConfig
from . import Twin

__all__ = [
    "export_model",
    "rebuild_model",
    "to_float16",
    "page_weight",
    "MAX_PAGE_BYTES",
    "DATE_MAX_LEN",
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


def to_float16(exported: dict) -> dict:
    """An :func:`export_model` payload with its weights in float16 (``dtype: "f16"``):
    half the bytes, for the website (tools/site_polish.py). The page and
    :func:`rebuild_model` widen each value back to float32 exactly, so the browser check
    compares the page with attnlab running the very same rounded weights."""
    if exported.get("dtype", "f4") == "f16":
        return exported
    flat = np.frombuffer(base64.b64decode(exported["blob"]), dtype="<f4")
    with np.errstate(over="ignore"):
        half = flat.astype("<f2")
    if not np.isfinite(half[np.isfinite(flat)]).all():
        raise ValueError("to_float16: a weight is beyond float16's range (65504)")
    blob = base64.b64encode(half.tobytes()).decode("ascii")
    return exported | {"blob": blob, "dtype": "f16"}


_REBUILT: dict[str, torch.nn.Module] = {}


def rebuild_model(exported: dict) -> torch.nn.Module:
    """The attnlab model an :func:`export_model` payload holds (eval mode, cached)."""
    dtype = {"f4": "<f4", "f16": "<f2"}[exported.get("dtype", "f4")]
    key = hashlib.sha1(
        (exported["kind"] + dtype + exported["blob"]).encode()
    ).hexdigest()
    if key in _REBUILT:
        return _REBUILT[key]
    raw = np.frombuffer(base64.b64decode(exported["blob"]), dtype=dtype)
    flat = raw.astype(np.float32)
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
