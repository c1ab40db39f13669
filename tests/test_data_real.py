"""attnlab.data's real text: the shipped files are the ones the data card describes,
the eng-fra splits are disjoint by construction (near-duplicates included), the task
and the character batches behave, and the files travel in the built wheel."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch

from attnlab.data import collate, tatoeba, text
from attnlab.data.tatoeba import (
    EngFraTask,
    detokenize,
    eng_fra_split,
    eng_fra_splits,
    load_eng_fra,
    normalize,
    sentence_key,
    tokenize,
)

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "src" / "attnlab" / "data" / "DATA_CARD.md"


def _sha(s: str) -> str:
    return hashlib.sha256(s.encode("utf-8")).hexdigest()


def test_shipped_files_match_their_checksums_and_the_data_card():
    card = CARD.read_text()
    pairs_text = tatoeba.read_packaged(tatoeba.ENG_FRA_FILE)
    assert _sha(pairs_text) == tatoeba.ENG_FRA_SHA256
    assert _sha(text.load_shakespeare()) == text.SHAKESPEARE_SHA256
    for digest in (tatoeba.ENG_FRA_SHA256, text.SHAKESPEARE_SHA256):
        assert digest in card  # the card states the checksum the code checks
    assert len(load_eng_fra()) == 18065 and "18,065" in card
    assert len(text.load_shakespeare()) == 1115394 and "1,115,394" in card
    for needle in ("CC BY 2.0 FR", "tatoeba.org", "manythings.org", "public domain"):
        assert needle in card
    # both files together stay small enough for the package
    data_dir = ROOT / "src" / "attnlab" / "data"
    assert sum(p.stat().st_size for p in data_dir.glob("*.gz")) < 1_000_000


def test_pairs_parse_and_tokenize():
    pairs = load_eng_fra()
    assert pairs[0] == ("Go.", "Va !")
    assert all(en.strip() and fr.strip() for en, fr in pairs)
    assert tokenize("I'm OK.", "en") == ["i", "'m", "ok", "."]
    assert tokenize("Je l’ai vu\u202f!", "fr") == ["je", "l'", "ai", "vu", "!"]
    assert tokenize("Arrête-toi !", "fr") == ["arrête", "-", "toi", "!"]
    assert detokenize(["je", "l'", "ai", "vu", "!"]) == "je l'ai vu !"
    assert detokenize(["arrête", "-", "toi", "!"]) == "arrête-toi !"
    assert detokenize(["i", "'m", "ok", "."], "en") == "i'm ok."
    assert normalize("  Ça  VA\u202f?") == "ça va ?"
    with pytest.raises(ValueError, match="lang"):
        tokenize("hello", "de")


def test_near_duplicates_share_a_key_and_a_split():
    for a, b in [
        ("I'm OK.", "i'm ok!"),
        ("Tom’s here.", "Tom's here?"),
        ("Go!", "go."),
    ]:
        assert sentence_key(a) == sentence_key(b)
        assert eng_fra_split(a) == eng_fra_split(b)
    assert sentence_key("I'm OK.") != sentence_key("I am OK.")


def test_splits_are_disjoint_on_both_sides():
    splits = eng_fra_splits()
    n = {k: len(v) for k, v in splits.items()}
    total = len(load_eng_fra())
    assert n["train"] > 0.75 * total and min(n["val"], n["test"]) > 0.07 * total
    assert sum(n.values()) <= total
    train_en = {sentence_key(en) for en, _ in splits["train"]}
    train_fr = {sentence_key(fr) for _, fr in splits["train"]}
    for held in ("val", "test"):
        en_keys = {sentence_key(en) for en, _ in splits[held]}
        fr_keys = {sentence_key(fr) for _, fr in splits[held]}
        assert not en_keys & train_en  # no English sentence (any spelling) in training
        assert not fr_keys & train_fr  # no French sentence either
        assert all(eng_fra_split(en) == held for en, _ in splits[held])
    val_en = {sentence_key(en) for en, _ in splits["val"]}
    assert not val_en & {sentence_key(en) for en, _ in splits["test"]}
    # the French rule bites: some pairs whose English is held out were dropped
    held_by_hash = sum(eng_fra_split(en) != "train" for en, _ in load_eng_fra())
    assert n["val"] + n["test"] < held_by_hash


def test_task_vocabularies_come_from_training_and_held_out_is_held_out():
    task = EngFraTask(max_words=5, max_fr=8, min_count=3)
    test = task.with_split("test")
    assert test.src_vocab is task.src_vocab and test.tgt_vocab is task.tgt_vocab
    assert all(1 <= len(s) <= 5 and len(t) <= 8 for s, t in task.examples)
    # known_only: every training pair is in the vocabularies, held-out pairs may not be
    assert all(w in task.src_vocab for s, _ in task.examples for w in s)
    assert all(w in task.tgt_vocab for _, t in task.examples for w in t)
    assert any(w not in task.src_vocab for s, _ in test.examples for w in s)
    train_src = {tuple(s) for s, _ in task.examples}
    assert not train_src & {tuple(s) for s, _ in test.examples}
    # groups: every test source once, with all its translations
    groups = test.groups()
    assert len({tuple(s) for s, _ in groups}) == len(groups)
    assert sum(len(r) for _, r in groups) == len(test.examples)
    # batches: reproducible, framed like the toy tasks
    a, b = task.batch(16, seed=3), task.batch(16, seed=3)
    assert torch.equal(a.src, b.src) and torch.equal(a.tgt, b.tgt)
    assert (a.tgt[:, 0] == task.tgt_vocab.bos_id).all()
    batch = collate(task.pairs(4, seed=0), task.src_vocab, task.tgt_vocab)
    assert batch.src.shape[0] == 4
    enc = task.encode("I'm OK.")
    assert enc.src_tokens[0] == ["i", "'m", "ok", "."]
    with pytest.raises(ValueError, match="split"):
        EngFraTask(split="dev")
    with pytest.raises(ValueError, match="no train pairs"):
        task.pairs(2, lengths=40)


def test_char_batches_are_shifted_windows_inside_their_split():
    s = text.load_shakespeare()
    vocab = text.CharVocab(s)
    assert (
        len(vocab) == 65
        and vocab.decode(vocab.encode("First Citizen")) == "First Citizen"
    )
    cut = text.char_split(s, "train")[1]
    assert text.char_split(s, "val") == (cut, len(s))
    it = text.char_batches(s, vocab, batch_size=8, length=32, split="val", seed=1)
    x, y = next(it)
    assert x.shape == y.shape == (8, 32)
    assert torch.equal(x[:, 1:], y[:, :-1])  # y is x shifted by one character
    val_text = s[cut:]
    for row_x, row_y in zip(x, y):
        window = vocab.decode(row_x) + vocab.decode(row_y[-1:])
        assert window in val_text  # inside the held-out part
    x2, _ = next(text.char_batches(s, vocab, 8, 32, "val", seed=1))
    assert torch.equal(x, x2)  # same seed, same batches
    # a window never crosses from one part into the other
    ab = "a" * 90 + "b" * 10  # train: the 90 a's, val: the 10 b's
    v = text.CharVocab(ab)
    for split, ch in (("train", "a"), ("val", "b")):
        for k in range(5):
            xb, yb = next(text.char_batches(ab, v, 64, 9, split, seed=k))
            assert set(v.decode(xb.flatten()) + v.decode(yb.flatten())) == {ch}
    with pytest.raises(ValueError, match="shorter"):
        next(text.char_batches(ab, v, 4, 10, "val"))
    with pytest.raises(ValueError, match="not in the vocabulary"):
        vocab.encode("é")
    with pytest.raises(ValueError, match="split"):
        text.char_split(s, "test")


def test_data_travels_in_the_built_wheel(tmp_path):
    """The data files are package data: build the wheel offline, unzip it and read
    both files from there in a fresh interpreter (as Colab's pip install would)."""
    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, proj / name)
    shutil.copytree(
        ROOT / "src" / "attnlab",
        proj / "src" / "attnlab",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        + ["--no-index", "-q", "-w", str(tmp_path / "dist"), str(proj)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    (wheel,) = (tmp_path / "dist").glob("attnlab-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        z.extractall(site)
    for name in ("eng_fra.tsv.gz", "tinyshakespeare.txt.gz", "DATA_CARD.md"):
        assert f"attnlab/data/{name}" in names
    code = (
        "import attnlab, attnlab.data as d; "
        f"assert attnlab.__file__.startswith({str(site)!r}), attnlab.__file__; "
        "print(len(d.load_eng_fra()), len(d.load_shakespeare()))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(site)
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["18065", "1115394"]


def test_chapter1_real_results_match_the_current_data_and_split():
    """results/ch01_real.json (tools/experiments/ch01_real.py) covers both arms for
    every seed, and was scored on the test sentences the current code selects."""
    import json
    from importlib.resources import files

    res = json.loads(files("attnlab").joinpath("results/ch01_real.json").read_text())
    meta, runs = res["meta"], res["runs"]
    assert len(meta["seeds"]) >= 3
    for recipe in meta["recipes"]:
        for arm in ("attention", "no attention"):
            seeds = sorted(
                r["seed"] for r in runs if r["recipe"] == recipe and r["arm"] == arm
            )
            assert seeds == sorted(meta["seeds"]), (recipe, arm)
    task = EngFraTask(**meta["task"])
    test = task.with_split("test")
    assert meta["train_pairs"] == len(task.examples)
    assert meta["test_sources"] == len(test.groups()) == runs[0]["n"]
    assert (meta["src_vocab"], meta["tgt_vocab"]) == (
        len(task.src_vocab),
        len(task.tgt_vocab),
    )
    for r in runs:
        assert 0 <= r["bleu"] <= 100 and 0 <= r["chrf"] <= 100 and 0 <= r["exact"] <= 1
