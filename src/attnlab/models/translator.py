"""The shipped English-French translator of chapter 1: an :class:`attnlab.Seq2Seq` with
dot attention, trained on the Tatoeba pairs of :class:`attnlab.data.EngFraTask` by
``tools/experiments/ch01_real.py --weights`` (the ``page`` recipe of
``results/ch01_real.json``, seed 0) and stored in ``eng_fra.safetensors`` beside this
module (see ``MODEL_CARD.md``).

    model, task = attnlab.models.load_translator()   # eval mode, CPU
    r = model.translate(task, "We need a car.")       # r["out"], r["weights"] (T, S)

The vocabularies are not stored: ``EngFraTask`` rebuilds them from the shipped pairs,
and the loader refuses weights whose sizes do not match them.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from ..data.tatoeba import EngFraTask
from ..seq2seq import Seq2Seq, Seq2SeqConfig

__all__ = ["TRANSLATOR_PATH", "load_translator", "save_translator"]

TRANSLATOR_PATH = Path(__file__).resolve().parent / "eng_fra.safetensors"


def save_translator(model: Seq2Seq, task_args: dict, meta: dict, path=None) -> Path:
    """Store ``model`` (float16 tensors) with its config, the ``EngFraTask`` arguments
    it was trained with and ``meta`` (recipe, machine) as safetensors metadata."""
    from dataclasses import asdict

    from safetensors.torch import save_file

    path = Path(path or TRANSLATOR_PATH)
    tensors = {
        k: v.detach().to(torch.float16).contiguous().cpu()
        for k, v in model.state_dict().items()
    }
    save_file(
        tensors,
        str(path),
        metadata={
            "config": json.dumps(asdict(model.config)),
            "task": json.dumps(task_args),
            "meta": json.dumps(meta),
        },
    )
    return path


def translator_metadata(path=None) -> dict:
    """The stored ``config``, ``task`` and ``meta`` dictionaries."""
    from safetensors import safe_open

    path = Path(path or TRANSLATOR_PATH)
    if not path.exists():
        raise FileNotFoundError(f"load_translator: {path} is missing (package data)")
    with safe_open(str(path), framework="pt") as f:
        raw = f.metadata() or {}
    return {k: json.loads(raw[k]) for k in ("config", "task", "meta")}


def load_translator(path=None) -> tuple[Seq2Seq, EngFraTask]:
    """The shipped translator (float32, eval mode, CPU) and the :class:`EngFraTask`
    whose vocabularies it reads and writes."""
    from safetensors.torch import load_file

    path = Path(path or TRANSLATOR_PATH)
    stored = translator_metadata(path)
    task = EngFraTask(**stored["task"])
    cfg = Seq2SeqConfig(**stored["config"])
    if (cfg.src_vocab, cfg.tgt_vocab) != (len(task.src_vocab), len(task.tgt_vocab)):
        raise ValueError(
            f"load_translator: the weights in {path.name} were trained with vocabularies "
            f"of {cfg.src_vocab} English and {cfg.tgt_vocab} French tokens, but "
            f"EngFraTask({stored['task']}) builds {len(task.src_vocab)} and "
            f"{len(task.tgt_vocab)} from the shipped pairs: retrain them "
            "(tools/experiments/ch01_real.py --weights)"
        )
    model = Seq2Seq(cfg)
    state = {k: v.float() for k, v in load_file(str(path)).items()}
    model.load_state_dict(state)
    return model.eval(), task
