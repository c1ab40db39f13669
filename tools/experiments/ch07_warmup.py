"""Chapter 7's warm-up experiment: post-LN vs pre-LN, with and without warm-up.

    .venv/bin/python tools/experiments/ch07_warmup.py  # 211 s on one core here (AMD EPYC, AVX2)

Writes ``src/attnlab/results/ch07_warmup.json``, which the chapter loads and plots (the
experiment takes minutes, too long for the page's budget). One thing changes at a time:

* model: chapter 7's date Transformer (2 + 2 layers, D = 64, 4 heads, FFN 128, no
  dropout), ``norm_first`` False (post-LN) or True (pre-LN);
* schedule: linear warm-up over ``warmup`` steps to the peak learning rate, then
  constant (no decay), so two runs differ only in their first ``warmup`` steps;
* Adam with PyTorch's defaults, **no gradient clipping**, batches of 64 training dates;
* seeds 0, 1, 2: the seed sets the initial weights and the batch stream, and is shared
  by all four settings, so every comparison is paired;
* measured: the training loss at every step, and the mean of the last 10 steps; greedy
  exact match on 200 validation dates (disjoint from the training dates) at the end.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

import attnlab
from attnlab import data, train
from attnlab.devices import machine, run_meta

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch07_warmup.json"
STEPS, BATCH, WARMUPS, LRS, SEEDS = 150, 64, (0, 50), (3e-3, 1e-2), (0, 1, 2)


def config(dates, norm_first):
    return attnlab.TransformerConfig(
        src_vocab=len(dates.src_vocab),
        tgt_vocab=len(dates.tgt_vocab),
        d_model=64,
        n_heads=4,
        d_ff=128,
        n_encoder_layers=2,
        n_decoder_layers=2,
        dropout=0.0,
        norm_first=norm_first,
    )


def cpu() -> str:
    """The CPU and the kernels torch picks on it: runs like these, at a high learning
    rate and without clipping, amplify rounding, so they repeat exactly only on the
    same kind of CPU (the first dozens of steps agree anywhere)."""
    return machine()


def one_run(dates, val, lr, norm_first, warmup, seed, steps=STEPS):
    """Train one setting from one seed; the record the results file keeps for it.

    ``tests/test_results.py`` re-runs one of them and compares it with the file
    (``steps`` < STEPS: only the first steps, which agree on any CPU).
    """
    torch.manual_seed(seed)
    model = attnlab.Seq2SeqTransformer(config(dates, norm_first))
    h = train.fit(
        model,
        dates.stream(BATCH, seed=seed),
        steps=steps,
        lr=lr,
        warmup=warmup,
        schedule=None,
        clip=None,
        seed=seed,
        quiet=True,
    )
    acc = train.evaluate(model, val, n=200, seed=1234)["accuracy"]
    return dict(
        ln="pre-LN" if norm_first else "post-LN",
        warmup=warmup,
        lr=lr,
        seed=seed,
        losses=[round(x, 5) for x in h.losses],
        final_loss=sum(h.losses[-10:]) / 10,
        val_exact=acc,
    )


def main():
    torch.set_num_threads(1)
    dates = data.make_task("date")  # training dates only
    val = dates.with_split("val")
    runs, t0 = [], time.perf_counter()
    for lr in LRS:
        for norm_first in (False, True):
            for warmup in WARMUPS:
                for seed in SEEDS:
                    run = one_run(dates, val, lr, norm_first, warmup, seed)
                    runs.append(run)
                    print(
                        f"lr {lr:g} {run['ln']:>7} warm-up {warmup:>2} seed {seed}: "
                        f"loss {run['final_loss']:.3f}  val exact "
                        f"{run['val_exact']:.1%}  ({time.perf_counter() - t0:.0f} s)",
                        flush=True,
                    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    meta = dict(
        steps=STEPS,
        batch=BATCH,
        warmups=WARMUPS,
        lrs=LRS,
        seeds=SEEDS,
        schedule="linear warm-up, then constant",
        clip=None,
        optimizer="Adam (defaults)",
        model="2 + 2 layers, D=64, H=4, FFN 128, dropout 0",
        **run_meta(),  # machine, torch, python, date
        seconds=round(time.perf_counter() - t0),
    )
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
