"""Chapter 1 on real sentence pairs: the encoder-decoder with and without attention,
three seeds, scored on held-out Tatoeba pairs.

    .venv/bin/python tools/experiments/ch01_real.py            # ~4 CPU min, one core
    .venv/bin/python tools/experiments/ch01_real.py --weights  # ~30 CPU s

Writes ``src/attnlab/results/ch01_real.json``, which chapter 1 loads. ``--weights``
trains the attention arm of the ``page`` recipe from seed 0 once more and stores it as
``src/attnlab/models/eng_fra.safetensors`` (float16, :func:`attnlab.models.
save_translator`): the model whose translations and alignment chapter 1 shows (the page
trains nothing on these pairs). One thing changes at a time:

* data: :class:`attnlab.data.EngFraTask` (English of 1-5 tokens, French of at most 8,
  words seen at least 3 times in training; training pairs with a rarer word dropped),
  batches of 64 training pairs; held-out: every distinct English sentence of the
  ``"test"`` split, scored against all of its French translations there;
* model: :class:`attnlab.Seq2Seq` with ``d_emb = d_hidden = 48``, Luong placement,
  ``attention`` dot or None (the only difference between the two arms);
* recipe (``page``; ``--weights`` trains its attention arm from seed 0 again for the
  shipped model): 300 steps of Adam, learning rate
  1e-2 with cosine decay, clipping at 1;
* seeds 0, 1, 2: the seed sets the initial weights (``seed_everything``) and the batch
  stream, shared by both arms, so every comparison is paired;
* measured: greedy decoding (at most 12 tokens), corpus BLEU and chrF
  (:mod:`attnlab.data.metrics`), and the share of sentences that match one of their
  references exactly.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

import attnlab
from attnlab import train
from attnlab.data import collate
from attnlab.data.metrics import corpus_bleu, corpus_chrf
from attnlab.data.tatoeba import EngFraTask, detokenize
from attnlab.devices import run_meta
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch01_real.json"
TASK = dict(max_words=5, max_fr=8, min_count=3)  # EngFraTask's arguments
MODEL = dict(d_emb=48, d_hidden=48, style="luong")
RECIPES = {"page": 300}  # steps
BATCH, LR, SEEDS, MAX_LEN = 64, 1e-2, (0, 1, 2), 12
ARMS = {"no attention": None, "attention": "dot"}


def make_model(task, attention, seed):
    """The model of one arm, its weights drawn after ``seed_everything(seed)``."""
    attnlab.seed_everything(seed)
    cfg = Seq2SeqConfig(
        len(task.src_vocab), len(task.tgt_vocab), attention=attention, **MODEL
    )
    return Seq2Seq(cfg)


def score(model, test, batch_size=256):
    """Greedy translations of every distinct test source; BLEU, chrF, exact match."""
    groups = test.groups()
    hyps = []
    for i in range(0, len(groups), batch_size):
        chunk = groups[i : i + batch_size]
        b = collate([(s, r[0]) for s, r in chunk], test.src_vocab, test.tgt_vocab)
        ids, _ = model.greedy(b.src, b.src_lengths, max_len=MAX_LEN)
        hyps += [test.tgt_vocab.decode(row) for row in ids]
    refs = [r for _, r in groups]
    text = [detokenize(h) for h in hyps]
    text_refs = [[detokenize(x) for x in r] for r in refs]
    return dict(
        bleu=corpus_bleu(hyps, refs),
        chrf=corpus_chrf(text, text_refs),
        exact=sum(h in r for h, r in zip(hyps, refs)) / len(hyps),
        n=len(groups),
    )


def one_run(task, test, arm, seed, steps):
    model = make_model(task, ARMS[arm], seed)
    h = train.fit(
        model,
        task.stream(BATCH, seed=seed),
        steps=steps,
        lr=LR,
        schedule="cosine",
        seed=seed,
        quiet=True,
    )
    with torch.no_grad():
        res = score(model, test)
    return dict(arm=arm, seed=seed, steps=steps, loss=sum(h.losses[-20:]) / 20, **res)


def save_weights():
    """The page's model: the attention arm, ``page`` recipe, seed 0, stored."""
    from attnlab.models import save_translator

    torch.set_num_threads(1)
    task = EngFraTask(**TASK)
    test = task.with_split("test")
    steps = RECIPES["page"]
    model = make_model(task, ARMS["attention"], 0)
    train.fit(
        model,
        task.stream(BATCH, seed=0),
        steps=steps,
        lr=LR,
        schedule="cosine",
        seed=0,
        quiet=True,
    )
    model.eval()
    with torch.no_grad():
        res = score(model, test)
    meta = dict(
        recipe="page", arm="attention", seed=0, steps=steps, **run_meta(), **res
    )
    path = save_translator(model, TASK, meta)
    print(f"float32 before storing: BLEU {res['bleu']:.2f} chrF {res['chrf']:.2f}")
    from attnlab.models import load_translator

    stored, _ = load_translator(path)
    with torch.no_grad():
        again = score(stored, test)
    print(f"float16 stored: BLEU {again['bleu']:.2f} chrF {again['chrf']:.2f}")
    print("wrote", path, f"({path.stat().st_size / 1e6:.2f} MB)")


def main():
    import sys

    if "--weights" in sys.argv[1:]:
        return save_weights()
    torch.set_num_threads(1)
    task = EngFraTask(**TASK)
    test = task.with_split("test")
    unk = sum(any(w not in task.src_vocab for w in s) for s, _ in test.groups()) / len(
        test.groups()
    )
    runs, t0 = [], time.process_time()
    for recipe, steps in RECIPES.items():
        for seed in SEEDS:
            for arm in ARMS:
                run = dict(recipe=recipe, **one_run(task, test, arm, seed, steps))
                runs.append(run)
                print(
                    f"{recipe} seed {seed} {arm:>12}: BLEU {run['bleu']:.1f} chrF "
                    f"{run['chrf']:.1f} exact {run['exact']:.1%} loss {run['loss']:.2f}"
                    f"  ({time.process_time() - t0:.0f} CPU s)",
                    flush=True,
                )
    meta = dict(
        task=TASK,
        model=MODEL,
        recipes=RECIPES,
        batch=BATCH,
        lr=LR,
        schedule="cosine",
        clip=1.0,
        seeds=SEEDS,
        max_len=MAX_LEN,
        train_pairs=len(task.examples),
        test_sources=len(test.groups()),
        test_pairs=len(test.examples),
        test_unknown_word_share=unk,
        src_vocab=len(task.src_vocab),
        tgt_vocab=len(task.tgt_vocab),
        **run_meta(),  # machine, torch, python, date
        cpu_seconds=round(time.process_time() - t0),
    )
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
