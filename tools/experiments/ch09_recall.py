"""Chapter 9's recall sweep: how many key-value pairs does each attention hold?

    OMP_NUM_THREADS=1 .venv/bin/python tools/experiments/ch09_recall.py   # ~10 CPU min (581 s here)

    # or in parallel: each worker runs some points, then merge (same numbers)
    ... ch09_recall.py --points softmax:8:32 linear:8:32 --out /tmp/part1.json
    ... ch09_recall.py --merge /tmp/part*.json

    # the delta-rule rows alone (chapter 9 reads them beside the others)
    ... ch09_recall.py --points delta:8:4 ... --out /tmp/delta.json
    ... ch09_recall.py --merge /tmp/delta*.json --models delta \
        --out src/attnlab/results/ch09_recall_delta.json

Writes ``src/attnlab/results/ch09_recall.json``, which chapter 9 loads and plots (the
sweep takes minutes, too long for the page's budget). One thing changes at a time:

* task: associative recall. A list of ``pairs`` (key, value) tokens with distinct keys
  out of ``N_KEYS``, values out of ``N_VALS``, then one of the listed keys as the query;
  the answer is its value. Chance is ``1 / N_VALS``.
* model: one attention layer (embeddings of key and value summed per token, q/k/v
  projections of width ``d_state``, a linear read-out at the query's position);
* attention: causal ``softmax`` (SDPA), causal ``linear`` attention (elu + 1 features,
  a ``d_state x d_state`` state), ``gated`` linear attention (the same state with a
  learned forgetting gate per token, :mod:`attnlab.gated`) or the ``delta`` rule (the
  same state written by :func:`attnlab.gated.delta_rule`, a learned ``beta`` per token;
  the query token only reads: ``beta = 0`` there, since its key matches the stored key
  it asks for and a write would first erase that association; without this the delta
  model did not converge in 2000 steps at any point);
* the task is :func:`attnlab.data.recall_batch`;
* training: Adam (lr 3e-3), batches of 64, until the mean training accuracy of the last
  ``WINDOW`` steps reaches ``TARGET`` or ``MAX_STEPS`` steps (convergence: the JSON keeps
  the held-out accuracy at half and at all of the steps run, so a plateau can be read);
* held-out lists are disjoint from training lists by construction: a training list has
  an even sum of values, a held-out list an odd one;
* seeds 0, 1, 2 for every point; the seed sets the weights and the batch stream.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

import attnlab
from attnlab import data
from attnlab.devices import run_meta
from attnlab.gated import delta_rule, gated_linear_attention

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch09_recall.json"
N_KEYS, N_VALS, D_MODEL, BATCH, LR = 64, 16, 32, 64, 3e-3
PAIRS, STATES, SEEDS = (4, 8, 16, 32), (8, 32), (0, 1, 2)
MODELS = ("softmax", "linear", "gated", "delta")
MAX_STEPS, WINDOW, TARGET, N_TEST = 2000, 50, 0.99, 1000


def recall_batch(size, pairs, gen, split):
    """The task of :func:`attnlab.data.recall_batch` with this sweep's vocabulary."""
    return data.recall_batch(size, pairs, gen, split, N_KEYS, N_VALS)


class Recall(nn.Module):
    """One attention layer reading the value stored with the query key."""

    def __init__(self, kind, d_state):
        super().__init__()
        self.kind = kind
        self.key_emb = nn.Embedding(N_KEYS, D_MODEL)
        self.val_emb = nn.Embedding(N_VALS, D_MODEL)
        self.w_q, self.w_k, self.w_v = (nn.Linear(D_MODEL, d_state) for _ in range(3))
        self.gate = nn.Linear(D_MODEL, 1)  # gated: g_t; delta: beta_t
        nn.init.constant_(self.gate.bias, 3.0)  # g = sigmoid(3) ~ 0.95 at the start
        self.out = nn.Linear(d_state, N_VALS)

    def forward(self, keys, vals, query):  # (B, P), (B, P), (B,) -> logits (B, V)
        x = torch.cat(
            [self.key_emb(keys) + self.val_emb(vals), self.key_emb(query)[:, None]], 1
        )  # (B, P + 1, D)
        q, k, v = (
            w(x)[:, None] for w in (self.w_q, self.w_k, self.w_v)
        )  # (B,1,P+1,Ds)
        if self.kind == "softmax":
            h = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        elif self.kind == "linear":
            h = attnlab.linear_attention(q, k, v, is_causal=True)
        elif self.kind == "delta":  # writing strength beta_t = sigmoid(.) in (0, 1)
            beta = torch.sigmoid(self.gate(x))[:, None, :-1, 0]  # (B, 1, P)
            # the query token reads and does not write (beta = 0): its key matches the
            # stored key it asks for, so a write there would first erase that very
            # association (with beta ~ 0.95 at the start, 95% of it)
            beta = torch.cat([beta, beta.new_zeros(beta.shape[:-1] + (1,))], -1)
            h = delta_rule(q, k, v, beta)
        else:
            log_g = F.logsigmoid(self.gate(x))[:, None, :, 0]  # (B, 1, P + 1), <= 0
            h = gated_linear_attention(q, k, v, log_g)
        return self.out(h[:, 0, -1])  # the query's output -> (B, V)


def accuracy(model, pairs, seed):
    gen = torch.Generator().manual_seed(10_000 + seed)
    keys, vals, query, answer = recall_batch(N_TEST, pairs, gen, "test")
    with torch.no_grad():
        return (model(keys, vals, query).argmax(-1) == answer).float().mean().item()


def run_point(kind, pairs, d_state, seed, max_steps=MAX_STEPS):
    """Train one model to convergence; its held-out accuracy and how it got there."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = Recall(kind, d_state)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    hits, half, t0, step = [], None, time.process_time(), 0
    for step in range(1, max_steps + 1):
        keys, vals, query, answer = recall_batch(BATCH, pairs, gen, "train")
        logits = model(keys, vals, query)
        loss = F.cross_entropy(logits, answer)
        opt.zero_grad()
        loss.backward()
        opt.step()
        hits.append((logits.argmax(-1) == answer).float().mean().item())
        if step == max_steps // 2:
            half = accuracy(model, pairs, seed)
        if len(hits) >= WINDOW and sum(hits[-WINDOW:]) / WINDOW >= TARGET:
            break
    return dict(
        model=kind,
        pairs=pairs,
        d_state=d_state,
        seed=seed,
        steps=step,
        converged=sum(hits[-WINDOW:]) / min(WINDOW, len(hits)) >= TARGET,
        train_acc=sum(hits[-WINDOW:]) / min(WINDOW, len(hits)),
        test_acc_half=half,
        test_acc=accuracy(model, pairs, seed),
        cpu_s=round(time.process_time() - t0, 2),
    )


def _meta(seconds):
    return dict(
        n_keys=N_KEYS,
        n_vals=N_VALS,
        d_model=D_MODEL,
        batch=BATCH,
        lr=LR,
        pairs=PAIRS,
        d_states=STATES,
        seeds=SEEDS,
        models=MODELS,
        max_steps=MAX_STEPS,
        stop=f"mean training accuracy of the last {WINDOW} steps >= {TARGET}",
        n_test=N_TEST,
        chance=1 / N_VALS,
        optimizer="Adam",
        split="train lists have an even sum of values, held-out lists an odd one",
        delta_query="beta = 0 at the query token (it reads, does not write)",
        **run_meta(),  # machine, torch, python, date
        threads=1,
        seconds=seconds,
    )


def main(argv=None):
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", nargs="*", help="model:d_state:pairs (all seeds)")
    ap.add_argument("--out", default=str(OUT))
    ap.add_argument("--merge", nargs="*", help="part files to merge into the result")
    ap.add_argument(
        "--models", nargs="*", default=list(MODELS), help="the models a merge must hold"
    )
    ap.add_argument(
        "--pairs", nargs="*", type=int, default=list(PAIRS), help="... and the pairs"
    )
    a = ap.parse_args(argv)
    if a.merge:
        runs, cpu = [], 0.0
        for path in a.merge:
            part = json.loads(Path(path).read_text())
            runs += part["runs"]
        cpu = sum(r["cpu_s"] for r in runs)
        key = {(r["model"], r["d_state"], r["pairs"], r["seed"]) for r in runs}
        want = {
            (m, d, p, s)
            for m in a.models
            for d in STATES
            for p in a.pairs
            for s in SEEDS
        }
        assert key == want and len(runs) == len(want), sorted(want - key)
        runs.sort(
            key=lambda r: (
                PAIRS.index(r["pairs"]),
                STATES.index(r["d_state"]),
                a.models.index(r["model"]),
                r["seed"],
            )
        )
        meta = {**_meta(round(cpu)), "models": a.models, "pairs": a.pairs}
        Path(a.out).write_text(
            json.dumps({"meta": meta, "runs": runs}, indent=0) + "\n"
        )
        print(
            "wrote",
            a.out,
            "from",
            len(a.merge),
            "parts;",
            round(cpu),
            "CPU s of training",
        )
        return
    torch.set_num_threads(1)
    if a.points:
        points = [(m, int(d), int(p)) for m, d, p in (x.split(":") for x in a.points)]
    else:
        points = [(m, d, p) for p in PAIRS for d in STATES for m in MODELS]
    runs, t0 = [], time.perf_counter()
    for kind, d_state, pairs in points:
        for seed in SEEDS:
            r = run_point(kind, pairs, d_state, seed)
            runs.append(r)
            print(
                f"{kind:7s} pairs {pairs:2d} d_state {d_state:2d} seed {seed}: "
                f"test {r['test_acc']:.3f} (half {r['test_acc_half'] or math.nan:.3f})"
                f" train {r['train_acc']:.3f} steps {r['steps']:4d} {r['cpu_s']:.1f} s",
                flush=True,
            )
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    meta = _meta(round(time.perf_counter() - t0))
    out.write_text(json.dumps({"meta": meta, "runs": runs}, indent=0) + "\n")
    print("wrote", out)


if __name__ == "__main__":
    main(sys.argv[1:])
