"""Chapter 7a's head ablation over several training runs: how many heads can go?

    .venv/bin/python tools/experiments/ch07_heads.py              # seeds 0-4
    .venv/bin/python tools/experiments/ch07_heads.py --seeds 3 --out /tmp/s3.json

Writes ``src/attnlab/results/ch07_heads.json``, which chapter 7a reads. Each seed trains
the page's date Transformer with the page's recipe (2 + 2 layers, D = 64, 4 heads,
pre-LN; ``train.fit`` with batches of 128, lr 3e-3, 30 warm-up steps, cosine decay,
clipping at norm 1, stopping at 99 % exact match on 200 validation dates checked every
25 steps, at most 400 steps; the seed sets the initial weights, the batch stream and
``fit``'s own seed, as in ``ch07_vs_rnn.py``: seed 0 is the page's setup). Then, on 200
test dates under teacher forcing (the page's ``abl`` batch), it silences each of the 24
heads alone (``attnlab.explain.interventions.ablate_heads``: the head's output is zero,
which is the page's "zero its columns of W^O") and records the drop in exact match, and
silences them cumulatively, least important first.

One seed takes about a minute of one CPU core. Why a file: the page's live run is one
training run, and how many heads a run can spare differs from run to run (the same seed
on another CPU is another run), so the page's claims read these seeds.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

import attnlab
from attnlab import data, train
from attnlab.devices import run_meta
from attnlab.explain.interventions import ablate_heads

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch07_heads.json"
SEEDS = (0, 1, 2, 3, 4)
SMALL = 0.01  # "costs at most one point"


def train_one(dates, seed):
    val, test = dates.with_split("val"), dates.with_split("test")
    cfg = attnlab.TransformerConfig(
        src_vocab=len(dates.src_vocab), tgt_vocab=len(dates.tgt_vocab),
        d_model=64, n_heads=4, d_ff=128, n_encoder_layers=2, n_decoder_layers=2,
        dropout=0.0, norm_first=True,
    )  # fmt: skip
    torch.manual_seed(seed)
    model = attnlab.Seq2SeqTransformer(cfg)
    hist = train.fit(
        model, dates.stream(128, seed=seed), steps=400, lr=3e-3, schedule="cosine",
        warmup=30, eval_every=25, target=0.99, quiet=True, seed=seed,
        eval_fn=lambda m: train.evaluate(m, val, n=200)["accuracy"],
    )  # fmt: skip
    acc = train.evaluate(model, test, n=1000, seed=99)["accuracy"]
    return model, cfg, hist, acc


def ablation(model, cfg, batch):
    mhas = {
        "encoder self": [la.self_attn for la in model.encoder.layers],
        "decoder self": [la.self_attn for la in model.decoder.layers],
        "cross": [la.cross_attn for la in model.decoder.layers],
    }
    flat = [m for mods in mhas.values() for m in mods]  # ablate_heads' layer index
    names = {}  # (index in flat, head) -> "cross L1 H2", the page's names
    for kind, mods in mhas.items():
        for li, m in enumerate(mods):
            for h in range(cfg.n_heads):
                names[flat.index(m), h] = f"{kind} L{li} H{h}"
    model.eval()

    def exact(heads=()):
        with torch.no_grad():
            if heads:
                with ablate_heads(flat, list(heads)):
                    logits = model(batch.src, batch.tgt_in, batch.src_lengths)
            else:
                logits = model(batch.src, batch.tgt_in, batch.src_lengths)
        real = batch.tgt_out != cfg.pad_id  # (B, T)
        ok = (logits.argmax(-1) == batch.tgt_out) | ~real
        return ok.all(-1).float().mean().item()

    base = exact()
    drops = {names[k]: base - exact([k]) for k in names}
    order = sorted(names, key=lambda k: drops[names[k]])  # least important first
    curve = [base] + [exact(order[: i + 1]) for i in range(len(order))]
    return base, drops, [names[k] for k in order], curve


def run_seeds(seeds):
    torch.set_num_threads(1)
    dates = data.make_task("date")
    batch = dates.with_split("test").batch(200, seed=3)  # the page's `abl`
    runs = []
    for seed in seeds:
        model, cfg, hist, acc = train_one(dates, seed)
        base, drops, order, curve = ablation(model, cfg, batch)
        rec = dict(
            seed=seed,
            steps=hist.steps,
            reached_target=hist.stopped_early,
            test_exact=acc,
            base=base,
            drops=drops,
            order=order,
            curve=curve,
            n_small=sum(d <= SMALL for d in drops.values()),
        )
        print({k: rec[k] for k in ("seed", "steps", "test_exact", "base", "n_small")})
        runs.append(rec)
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    meta = run_meta()  # refuses under ATTNLAB_SEED before an hour is spent
    runs = run_seeds(args.seeds)
    meta.update(
        seeds=[r["seed"] for r in runs],
        small=SMALL,
        n_dates=200,
        recipe="chapter 7a's: fit, batch 128, lr 3e-3, warm-up 30, cosine, clip 1, "
        "stop at 99 % on 200 validation dates every 25 steps, <= 400 steps",
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"meta": meta, "runs": runs}, indent=1) + "\n")
    print("wrote", args.out)


if __name__ == "__main__":
    main()
