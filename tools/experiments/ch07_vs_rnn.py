"""Chapter 7's comparison: the page's Transformer vs chapter 1's RNN with attention.

    .venv/bin/python tools/experiments/ch07_vs_rnn.py    # several minutes on 2 cores

Writes ``src/attnlab/results/ch07_vs_rnn.json``, which the chapter loads and shows as a
table (training four models does not fit the page's time budget). Both models get the
same loop, batches (128), learning rate (3e-3), schedule (30 warm-up steps, cosine
decay), gradient clipping (norm 1, ``fit``'s default) and stopping rule (99 % exact
match on 200 validation examples, checked every 25 steps). Dates: training, validation
and test dates are disjoint (``attnlab.data.date_split``). Reversal strings are drawn
fresh; the script counts how many test strings also occurred in training.
"""

from __future__ import annotations

import json
import platform
import time
from pathlib import Path

import torch

import attnlab
from attnlab import data, train

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch07_vs_rnn.json"


def models(task):
    V1, V2 = len(task.src_vocab), len(task.tgt_vocab)
    return {
        "Transformer": lambda: attnlab.Seq2SeqTransformer(
            attnlab.TransformerConfig(
                src_vocab=V1,
                tgt_vocab=V2,
                d_model=64,
                n_heads=4,
                d_ff=128,
                n_encoder_layers=2,
                n_decoder_layers=2,
                dropout=0.0,
                norm_first=True,
            )
        ),  # fmt: skip
        "RNN + attention": lambda: attnlab.seq2seq.Seq2Seq(
            attnlab.seq2seq.Seq2SeqConfig(src_vocab=V1, tgt_vocab=V2)
        ),
    }


def recording(stream, seen):
    for b in stream:
        seen.update(" ".join(s) for s in b.src_tokens)
        yield b


def run(task, val, test, steps, lengths=None):
    out = {}
    for name, make in models(task).items():
        torch.manual_seed(0)
        m = make()
        seen = set()
        h = train.fit(
            m, recording(task.stream(128, seed=0), seen), steps=steps, lr=3e-3,
            warmup=30, schedule="cosine", eval_every=25, target=0.99, quiet=True,
            eval_fn=lambda m: train.evaluate(m, val, n=200)["accuracy"],
        )  # fmt: skip
        acc = train.evaluate(m, test, n=1000, seed=99)["accuracy"]
        test_src = {  # the sources evaluate() draws: 5 batches of 200, seeds 99..103
            " ".join(s)
            for i in range(5)
            for s in test.batch(200, seed=99 + i).src_tokens
        }
        rec = dict(
            params=sum(p.numel() for p in m.parameters()), steps=h.steps,
            seconds=h.seconds, test_exact=acc,
            test_seen_in_training=len(test_src & seen) / len(test_src),
        )  # fmt: skip
        if lengths:
            rec["by_length"] = train.accuracy_by_length(m, test, lengths, n=200)
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
        out[name] = rec
        print(task.name, name, rec, flush=True)
    return out


def main():
    torch.set_num_threads(1)
    dates = data.make_task("date")
    res = {"date": run(dates, dates.with_split("val"), dates.with_split("test"), 400)}
    rev = data.make_task("reversal", lengths=(4, 12))
    res["reversal"] = run(rev, rev, rev, 800, lengths=[4, 8, 12, 14, 16])
    meta = dict(torch=torch.__version__, python=platform.python_version())
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"meta": meta, "results": res}, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
