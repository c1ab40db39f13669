"""Chapter 4 over ten seeds: sparse attention in the date model, and how one-hot the
soft lookup model's weights are.

    .venv/bin/python tools/experiments/ch04_sparse_dates.py

(one thread; 30 min of wall time on a 2-core machine shared with a dozen other jobs,
``meta["seconds"]``; 30 date models and 10 lookup models, a few CPU seconds each).

Writes ``src/attnlab/results/ch04_sparse_dates.json``. The chapter trains three seeds
live (an illustration of the recipe); its statements about the spread over seeds read
this file. One thing changes at a time:

* date models: the chapter's recipe exactly (GRU encoder-decoder, d_emb 16, d_hidden
  32, dot-product attention, Luong placement; Adam, learning rate 2e-2, cosine decay,
  gradients clipped at norm 1, 120 steps of 64 training dates); only the ``mapping``
  differs (softmax, sparsemax, 1.5-entmax); the seed sets the initial weights and the
  batch stream and is shared by the three mappings, so every comparison is paired;
* measured on 300 held-out dates (the chapter's probe, ``seed=4321``): exact match
  (``evaluate``, 300 other held-out dates), nonzero weights per output step, and the
  blind-copy rate of :func:`attnlab.course.ch04_structured.probes.blind_copies`
  (copied digits only, by field);
* lookup: the chapter's soft-attention lookup model (``train_lookup("soft")``, 300
  steps) and the mean largest weight it puts on one key of a held-out example.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from attnlab import lookup
from attnlab.course.ch04_structured.probes import FIELDS, blind_copies
from attnlab.data import DateTask
from attnlab.devices import run_meta, seed_everything
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig
from attnlab.train import evaluate, fit

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch04_sparse_dates.json"
SEEDS = tuple(range(10))
MAPPINGS = ("softmax", "sparsemax", "entmax15")
STEPS, LR, BATCH, PROBE_SEED = 120, 2e-2, 64, 4321


def date_run(dates, test_dates, probe, mapping, seed):
    """One date model, trained and measured as the chapter does."""
    seed_everything(seed)
    cfg = Seq2SeqConfig(
        len(dates.src_vocab),
        len(dates.tgt_vocab),
        d_emb=16,
        d_hidden=32,
        attention="dot",
        style="luong",
        mapping=mapping,
    )
    model = Seq2Seq(cfg)
    fit(
        model,
        dates.stream(BATCH, seed=seed),
        steps=STEPS,
        lr=LR,
        schedule="cosine",
        quiet=True,
    )
    acc = evaluate(model, test_dates, n=300)["accuracy"]
    with torch.no_grad():
        _, w = model.greedy(
            probe.src, probe.src_lengths, max_len=probe.tgt.shape[1] + 5
        )
    live = w.sum(-1) > 0  # (B, T): output steps up to <eos>
    support = float((w > 0).sum(-1).float()[live].mean())
    blind = blind_copies(model, dates, probe)
    return {
        "mapping": mapping,
        "seed": seed,
        "accuracy": acc,
        "support": support,
        "blind_rate": blind["rate"],
        "copied": blind["copied"],
        "blind": blind["blind"],
        "computed": blind["computed"],
        "by_field": {f: blind["by_field"][f] for f in FIELDS},
    }


def lookup_top_weight(seed):
    """Train the chapter's soft lookup model; its mean largest weight on the test set."""
    nets = []

    class Kept(lookup.LookupNet):  # train_lookup builds its net by this name
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            nets.append(self)

    original, lookup.LookupNet = lookup.LookupNet, Kept
    try:
        cfg = lookup.LookupConfig(steps=300, n_test=500)
        run = lookup.train_lookup("soft", cfg, seed=seed)
    finally:
        lookup.LookupNet = original
    net = nets[-1].eval()
    test = lookup.lookup_batch(
        cfg, cfg.n_test, torch.Generator().manual_seed(lookup.TEST_SEED), split="test"
    )
    with torch.no_grad():
        logits, w = net(*test[:3])  # (N, symbols), (N, pairs)
    right = (test[0] == test[2][:, None]).float()  # (N, pairs): the queried key
    return {
        "seed": seed,
        "accuracy": run.accuracy[-1],
        "top_weight": float(w.max(-1).values.mean()),
        "weight_on_answer": float((w * right).sum(-1).mean()),
        "top_is_answer": float((w.argmax(-1) == right.argmax(-1)).float().mean()),
    }


def main():
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    dates = DateTask()
    test_dates = dates.with_split("test")
    probe = test_dates.batch(300, seed=PROBE_SEED)
    runs = []
    for seed in SEEDS:
        for m in MAPPINGS:
            runs.append(date_run(dates, test_dates, probe, m, seed))
            r = runs[-1]
            print(
                f"{m:9s} seed {seed}: acc {r['accuracy']:.3f} support "
                f"{r['support']:.2f} blind {r['blind_rate']:.3f}",
                flush=True,
            )
    lookups = []
    for seed in SEEDS:
        lookups.append(lookup_top_weight(seed))
        print("lookup", lookups[-1], flush=True)
    meta = {
        **run_meta(),
        "seeds": list(SEEDS),
        "mappings": list(MAPPINGS),
        "steps": STEPS,
        "lr": LR,
        "batch": BATCH,
        "probe_seed": PROBE_SEED,
        "seconds": round(time.perf_counter() - t0, 1),
    }
    OUT.write_text(
        json.dumps({"meta": meta, "dates": runs, "lookup": lookups}, indent=1) + "\n"
    )
    print(f"wrote {OUT} in {meta['seconds']} s")


if __name__ == "__main__":
    main()
