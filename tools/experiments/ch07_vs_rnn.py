"""Chapter 7's comparison: the page's Transformer vs chapter 1's RNN with attention.

    .venv/bin/python tools/experiments/ch07_vs_rnn.py                 # all seeds
    .venv/bin/python tools/experiments/ch07_vs_rnn.py --seeds 1 --out /tmp/s1.json
    .venv/bin/python tools/experiments/ch07_vs_rnn.py --merge /tmp/s0.json /tmp/s1.json ...

Writes ``src/attnlab/results/ch07_vs_rnn.json``, which the chapter loads and shows as a
table (training twelve models does not fit the page's time budget; one seed of all four
takes about 20 min of one CPU core). Both models get the same loop, batches (128),
learning rate (3e-3), schedule (30 warm-up steps, cosine decay), gradient clipping (norm
1, ``fit``'s default) and stopping rule (99 % exact match on 200 validation examples,
checked every 25 steps). Seeds 0, 1, 2: the seed sets the initial weights, the batch
stream and ``fit``'s own seed, and is shared by the two models, so the comparison is
paired. Dates: training, validation and test dates are disjoint
(``attnlab.data.date_split``). Reversal strings are drawn fresh; the script counts how
many test strings also occurred in training. The wall-clock timings (one training step,
greedy decoding of 1000 dates) are measured once, on the seed-0 models.

``--seeds``/``--out`` run a subset of the seeds into a file of their own (to spread the
work over several processes); ``--merge`` joins such files into the results file.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

import attnlab
from attnlab import data, train
from attnlab.devices import run_meta

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch07_vs_rnn.json"
SEEDS = (0, 1, 2)
LENGTHS = [4, 8, 12, 14, 16]  # reversal: trained on 4-12


def models(task):
    V1, V2 = len(task.src_vocab), len(task.tgt_vocab)
    return {
        "Transformer": lambda: attnlab.Seq2SeqTransformer(
            attnlab.TransformerConfig(
                src_vocab=V1, tgt_vocab=V2, d_model=64, n_heads=4, d_ff=128,
                n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, norm_first=True,
            )
        ),
        "RNN + attention": lambda: attnlab.seq2seq.Seq2Seq(
            attnlab.seq2seq.Seq2SeqConfig(src_vocab=V1, tgt_vocab=V2)
        ),
    }  # fmt: skip


def recording(stream, seen):
    for b in stream:
        seen.update(" ".join(s) for s in b.src_tokens)
        yield b


def one_run(task, val, test, steps, seed, name, make, lengths=None):
    torch.manual_seed(seed)
    m = make()
    seen = set()
    h = train.fit(
        m,
        recording(task.stream(128, seed=seed), seen),
        steps=steps,
        lr=3e-3,
        warmup=30,
        schedule="cosine",
        eval_every=25,
        target=0.99,
        quiet=True,
        seed=seed,
        eval_fn=lambda m: train.evaluate(m, val, n=200)["accuracy"],
    )
    acc = train.evaluate(m, test, n=1000, seed=99)["accuracy"]
    test_src = {  # the sources evaluate() draws: 5 batches of 200, seeds 99..103
        " ".join(s) for i in range(5) for s in test.batch(200, seed=99 + i).src_tokens
    }
    rec = dict(
        task=task.name,
        model=name,
        seed=seed,
        params=sum(p.numel() for p in m.parameters()),
        steps=h.steps,
        reached_target=h.stopped_early,
        seconds=h.seconds,
        test_exact=acc,
        test_seen_in_training=len(test_src & seen) / len(test_src),
    )
    if lengths:
        by = train.accuracy_by_length(m, test, lengths, n=200)
        rec["by_length"] = {str(k): v for k, v in by.items()}
    if seed == 0:
        with train.num_threads(1):  # one training step, and greedy decoding of 1000
            b = next(iter(task.stream(128, seed=1)))
            m.train()
            t0 = time.perf_counter()
            for _ in range(10):
                m.zero_grad()
                train.token_loss(m.logits(b), b.tgt_out).backward()
            rec["ms_per_step"] = 100 * (time.perf_counter() - t0)  # forward+backward
            t0 = time.perf_counter()
            train.evaluate(m, test, n=1000, seed=5)
            rec["seconds_greedy_1000"] = time.perf_counter() - t0
    print(rec, flush=True)
    return rec


def run_seeds(seeds):
    torch.set_num_threads(1)
    dates = data.make_task("date")
    rev = data.make_task("reversal", lengths=(4, 12))
    jobs = [
        (dates, dates.with_split("val"), dates.with_split("test"), 400, None),
        (rev, rev, rev, 800, LENGTHS),
    ]
    runs = []
    for seed in seeds:
        for task, val, test, steps, lengths in jobs:
            for name, make in models(task).items():
                runs.append(one_run(task, val, test, steps, seed, name, make, lengths))
    return runs


def write(runs, out):
    meta = dict(
        seeds=sorted({r["seed"] for r in runs}),
        lr=3e-3,
        batch=128,
        warmup=30,
        schedule="cosine",
        clip=1.0,
        eval_every=25,
        target=0.99,
        max_steps={"date": 400, "reversal": 800},
        lengths=LENGTHS,
        **run_meta(),  # machine, torch, python, date
    )
    runs = sorted(runs, key=lambda r: (r["task"], r["model"], r["seed"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    print("wrote", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--merge", type=Path, nargs="+", help="files written with --out")
    args = ap.parse_args()
    if args.merge:
        runs = [r for p in args.merge for r in json.loads(p.read_text())["runs"]]
        keys = [(r["task"], r["model"], r["seed"]) for r in runs]
        if len(set(keys)) != len(keys):
            raise SystemExit("the merged files share a run")
        write(runs, args.out)
    else:
        write(run_seeds(args.seeds), args.out)


if __name__ == "__main__":
    main()
