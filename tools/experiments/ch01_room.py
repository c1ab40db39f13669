"""Chapter 1's "no room, or not learned yet?" test, at the lengths where the model fails.

    .venv/bin/python tools/experiments/ch01_room.py   # ~5 CPU min on one busy core

Writes ``src/attnlab/results/ch01_room.json``, which chapter 1 loads and plots. The
reversal model *without* attention (chapter 1's, Luong placement, d_emb 16) is trained
on distinct-letter strings of 3 to 16 letters and scored on 9 to 16, where the page's
headline curve collapses. Each run changes one thing from the base:

* ``base``: d_hidden 32, ``BASE`` steps;
* ``4x steps``: the same run continued to 4 * ``BASE`` steps (a constant learning rate
  of 0.02 and clipping at 1, so the base run is exactly its first quarter);
* ``4x wider``: d_hidden 128, ``BASE`` steps (the first quarter of the next run);
* ``4x wider, 4x steps``: d_hidden 128, 4 * ``BASE`` steps.

Seeds 0, 1, 2 set the initial weights and the batch stream (shared by all settings).
Measured after ``BASE`` and 4 * ``BASE`` steps, on 30 new strings of each length 3..16
(the same strings for every run): exact match, and per-token accuracy (greedy output
against the reversal, position by position; a missing or extra token counts wrong).
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
from attnlab.train import fit

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch01_room.json"
TRAIN, LENGTHS = (3, 16), list(range(3, 17))
BASE, BATCH, LR, SEEDS, N_EVAL = 200, 64, 2e-2, (0, 1, 2), 30
WIDTHS = {"narrow": 32, "wide": 128}


@torch.no_grad()
def measure(model, task):
    """``{length: (exact match, per-token accuracy)}`` on N_EVAL strings each."""
    out = {}
    for n in LENGTHS:
        b = task.batch(N_EVAL, lengths=n, seed=10_000 + n)
        ids, _ = model.greedy(b.src, b.src_lengths, max_len=n + 2)
        gold = b.tgt_out  # (B, n + 1): the reversal, then <eos>
        T = gold.shape[1]
        pred = torch.full_like(gold, -1)  # (B, T): the output, padded or cut
        k = min(T, ids.shape[1])
        pred[:, :k] = ids[:, :k]
        right = pred == gold  # (B, T)
        out[n] = (right.all(1).float().mean().item(), right.float().mean().item())
    return out


def run(task, seed, d_hidden):
    """One width, one seed: measurements after BASE and 4 * BASE steps."""
    attnlab.seed_everything(seed)
    V = len(task.src_vocab)
    cfg = Seq2SeqConfig(V, V, d_emb=16, d_hidden=d_hidden, attention=None)
    model, curve = Seq2Seq(cfg), []

    def record(m):
        curve.append(measure(m, task))
        return 0.0

    fit(
        model,
        task.stream(BATCH, lengths=TRAIN, seed=seed, bucket=True),
        steps=4 * BASE,
        lr=LR,
        eval_fn=record,
        eval_every=BASE,
        seed=seed,
        quiet=True,
    )
    return curve[0], curve[-1]


def main():
    torch.set_num_threads(1)
    task = ReversalTask(lengths=TRAIN, distinct=True)
    runs, t0 = [], time.process_time()
    for seed in SEEDS:
        for width, d in WIDTHS.items():
            first, last = run(task, seed, d)
            names = (
                ("base", "4x steps")
                if width == "narrow"
                else ("4x wider", "4x wider, 4x steps")
            )
            for name, m in zip(names, (first, last)):
                runs.append(
                    dict(
                        setting=name,
                        seed=seed,
                        exact={str(n): v[0] for n, v in m.items()},
                        token={str(n): v[1] for n, v in m.items()},
                    )
                )
                long = [m[n][1] for n in LENGTHS if n >= 9]
                print(
                    f"seed {seed} {name:>20}: per-token accuracy at 9-16 "
                    f"{sum(long) / len(long):.2f}  ({time.process_time() - t0:.0f} CPU s)",
                    flush=True,
                )
    meta = dict(
        train_lengths=TRAIN,
        lengths=LENGTHS,
        base_steps=BASE,
        batch=BATCH,
        lr=LR,
        schedule="constant",
        clip=1.0,
        widths=WIDTHS,
        d_emb=16,
        seeds=SEEDS,
        n_eval=N_EVAL,
        **run_meta(),  # machine, torch, python, date
        cpu_seconds=round(time.process_time() - t0),
    )
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
