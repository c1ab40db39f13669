"""The shipped English-French translator (attnlab.models.load_translator, chapter 1):
the weights are the recipe of results/ch01_real.json, they score what that file says
the script's seed-0 attention model scored, and mismatched weights are refused."""

from __future__ import annotations

import json
from importlib.resources import files

import pytest
import torch

from attnlab.models import load_translator, save_translator
from attnlab.models.translator import translator_metadata
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig

REAL = json.loads(files("attnlab").joinpath("results/ch01_real.json").read_text())


def test_shipped_weights_are_the_files_recipe():
    stored = translator_metadata()
    meta = REAL["meta"]
    assert stored["task"] == meta["task"]
    for key, value in meta["model"].items():
        assert stored["config"][key] == value, key
    assert stored["config"]["attention"] == "dot"
    assert stored["meta"]["steps"] == meta["recipes"]["page"]
    assert (stored["config"]["src_vocab"], stored["config"]["tgt_vocab"]) == (
        meta["src_vocab"],
        meta["tgt_vocab"],
    )


def test_shipped_model_scores_what_the_file_says():
    """Inference only (no training): float16 storage and another CPU's rounding move
    a greedy decode by a token here and there, not the corpus BLEU by a point."""
    from attnlab.data import collate
    from attnlab.data.metrics import corpus_bleu

    model, task = load_translator()
    assert not model.training
    test = task.with_split("test")
    groups = test.groups()
    b = collate([(s, r[0]) for s, r in groups], task.src_vocab, task.tgt_vocab)
    with torch.no_grad():
        ids, _ = model.greedy(b.src, b.src_lengths, max_len=REAL["meta"]["max_len"])
    hyps = [task.tgt_vocab.decode(row) for row in ids]
    bleu = corpus_bleu(hyps, [r for _, r in groups])
    (file_run,) = [
        r
        for r in REAL["runs"]
        if (r["recipe"], r["arm"], r["seed"]) == ("page", "attention", 0)
    ]
    assert len(groups) == file_run["n"]
    assert abs(bleu - file_run["bleu"]) < 1.0, (bleu, file_run["bleu"])


def test_weights_of_other_vocabularies_are_refused(tmp_path):
    meta = translator_metadata()
    cfg = Seq2SeqConfig(10, 12, d_emb=4, d_hidden=4, attention="dot", style="luong")
    path = save_translator(Seq2Seq(cfg), meta["task"], {"seed": 0}, tmp_path / "x.st")
    with pytest.raises(ValueError, match="vocabularies of 10 English and 12 French"):
        load_translator(path)
