"""Chapter 1's "no room, or not learned yet?" test at small scale, three seeds.

    .venv/bin/python tools/experiments/ch01_small.py   # ~40 CPU s on one core

Writes ``src/attnlab/results/ch01_small.json``, which chapter 1 loads, plots and asserts
on. The reversal model *without* attention (chapter 1's, d_emb 16) is trained on distinct-letter strings of 3 to 8 letters,
batches of 64, Adam at a *constant* learning rate of 0.02 with clipping at 1. Each
setting changes one thing from the base:

* ``base``: d_hidden 32, ``BASE`` steps;
* ``4x steps``: the same run continued to 4 * ``BASE`` steps (the constant rate makes
  the base run exactly its first quarter: same seed, same batches);
* ``4x wider``: d_hidden 128, ``BASE`` steps (the first quarter of the next run);
* ``4x wider, 4x steps``: d_hidden 128, 4 * ``BASE`` steps.

Seeds 0, 1, 2 set the initial weights (``attnlab.manual_seed``) and the batch stream.
Measured: exact match on 50 strings of every length 3..8 (``accuracy_by_length``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

import attnlab
from attnlab.data import ReversalTask
from attnlab.devices import run_meta
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig
from attnlab.train import accuracy_by_length, fit

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch01_small.json"
SMALL = list(range(3, 9))  # string lengths
SEEDS, BASE, BATCH, LR, N_EVAL = (0, 1, 2), 50, 64, 2e-2, 50
WIDTHS = {"narrow": 32, "wide": 128}


def small_run(task, seed, d_hidden, steps):
    """Accuracy by length after every BASE steps of one no-attention model."""
    V = len(task.src_vocab)
    attnlab.manual_seed(seed)  # the initial weights
    cfg = Seq2SeqConfig(V, V, d_emb=16, d_hidden=d_hidden, attention=None)
    model, curve = Seq2Seq(cfg), []

    def record(m):  # called by fit every BASE steps
        curve.append(accuracy_by_length(m, task, SMALL, n=N_EVAL))
        return 0.0

    stream = task.stream(BATCH, lengths=(3, 8), seed=seed, bucket=True)
    fit(
        model,
        stream,
        steps=steps,
        lr=LR,
        eval_fn=record,
        eval_every=BASE,
        seed=seed,
        quiet=True,
    )  # constant learning rate (no schedule)
    return curve


def main():
    torch.set_num_threads(1)
    task = ReversalTask(lengths=(3, 24), distinct=True)  # chapter 1's task
    runs, t0 = [], time.process_time()
    for seed in SEEDS:
        for width, d_hidden in WIDTHS.items():
            curve = small_run(task, seed, d_hidden, 4 * BASE)
            first = "base" if width == "narrow" else "4x wider"
            last = "4x steps" if width == "narrow" else "4x wider, 4x steps"
            for setting, acc in ((first, curve[0]), (last, curve[-1])):
                runs.append(
                    dict(
                        setting=setting,
                        seed=seed,
                        accuracy={str(n): acc[n] for n in SMALL},
                    )
                )
            print(
                f"seed {seed} {width}: {time.process_time() - t0:.0f} CPU s", flush=True
            )
    meta = dict(
        lengths=SMALL,
        train_lengths=[3, 8],
        seeds=SEEDS,
        base_steps=BASE,
        batch=BATCH,
        lr=LR,
        clip=1.0,
        widths=WIDTHS,
        n_eval=N_EVAL,
        **run_meta(),  # machine, torch, python, date
        cpu_seconds=round(time.process_time() - t0),
    )
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
