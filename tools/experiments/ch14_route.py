"""Chapter 14's routing sweep: block routing applied at inference to a model trained
with full attention on chapter 9's recall task.

    OMP_NUM_THREADS=1 nice .venv/bin/python tools/experiments/ch14_route.py   # ~1 CPU min

Writes ``src/attnlab/results/ch14_route.json``. One thing changes at a time:

* task: :func:`attnlab.data.recall_batch` with ``PAIRS`` pairs (one token each), then
  the query key; 64 keys, 16 values (chance 1/16); held-out lists (odd value sums) are
  disjoint from training lists (even sums) by construction;
* model: :class:`attnlab.efficient.routing.RecallProbe` (one attention head), trained
  with full causal attention (Adam, lr 3e-3, batches of 64) until the mean training
  accuracy of the last 50 steps reaches 0.99 (or ``MAX_STEPS``);
* at inference only, the attention is replaced by block routing
  (:func:`attnlab.efficient.block_routed_attention`, blocks of ``BLOCK`` tokens,
  ``top_k`` blocks) or by a fixed window of as many blocks (the query's own and the
  ``top_k - 1`` before it); the weights are the same;
* measured on ``N_TEST`` held-out lists: accuracy, the share of the key blocks the
  query visits, and how often the blocks visited hold the queried pair;
* seeds 0, 1, 2 (weights and batch stream).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab import data
from attnlab.devices import run_meta
from attnlab.efficient import block_routed_attention
from attnlab.efficient.routing import RecallProbe, block_window_attention, route_blocks

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch14_route.json"
N_KEYS, N_VALS, D_MODEL, BATCH, LR = 64, 16, 32, 64, 3e-3
PAIRS, BLOCK, TOP_K, SEEDS = 48, 4, (1, 2, 3, 4, 6, 8, 13), (0, 1, 2)
MAX_STEPS, WINDOW, TARGET, N_TEST = 2000, 50, 0.99, 1000


def batch(size, gen, split):
    return data.recall_batch(size, PAIRS, gen, split, N_KEYS, N_VALS)


def train(seed):
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    model = RecallProbe(N_KEYS, N_VALS, D_MODEL)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    hits = []
    for _ in range(MAX_STEPS):
        keys, vals, query, answer = batch(BATCH, gen, "train")
        logits = model(keys, vals, query)
        loss = F.cross_entropy(logits, answer)
        opt.zero_grad()
        loss.backward()
        opt.step()
        hits.append((logits.argmax(-1) == answer).float().mean().item())
        if len(hits) >= WINDOW and sum(hits[-WINDOW:]) / WINDOW >= TARGET:
            break
    model.eval()
    return model, len(hits)


@torch.no_grad()
def evaluate(model, seed, top_k):
    gen = torch.Generator().manual_seed(10_000 + seed)
    keys, vals, query, answer = batch(N_TEST, gen, "test")
    where = (keys == query[:, None]).float().argmax(-1)  # (N,) the queried pair
    seen = {}

    def routed(q, k, v):
        seen["sel"] = route_blocks(q, k, block_size=BLOCK, top_k=top_k)[:, 0, -1]
        return block_routed_attention(q, k, v, block_size=BLOCK, top_k=top_k)

    def window(q, k, v):
        return block_window_attention(q, k, v, block_size=BLOCK, n_blocks=top_k)

    acc_full = (model(keys, vals, query).argmax(-1) == answer).float().mean().item()
    acc_r = (model(keys, vals, query, routed).argmax(-1) == answer).float().mean()
    acc_w = (model(keys, vals, query, window).argmax(-1) == answer).float().mean()
    sel = seen["sel"]  # (N, n_blocks) blocks the query visited
    n_blocks = sel.shape[-1]
    q_block = PAIRS // BLOCK
    hold_r = sel[torch.arange(N_TEST), where // BLOCK].float().mean().item()
    hold_w = ((where // BLOCK) > q_block - top_k).float().mean().item()
    return dict(
        top_k=top_k,
        visited=sel.float().sum(-1).mean().item() / n_blocks,
        acc_full=acc_full,
        acc_routed=acc_r.item(),
        acc_window=acc_w.item(),
        holds_routed=hold_r,
        holds_window=hold_w,
    )


def main():
    t0 = time.process_time()
    runs = []
    for seed in SEEDS:
        model, steps = train(seed)
        for k in TOP_K:
            runs.append(dict(seed=seed, steps=steps, **evaluate(model, seed, k)))
            print(runs[-1], flush=True)
    meta = dict(
        n_keys=N_KEYS,
        n_vals=N_VALS,
        d_model=D_MODEL,
        pairs=PAIRS,
        block=BLOCK,
        n_blocks=-(-(PAIRS + 1) // BLOCK),
        top_k=TOP_K,
        seeds=SEEDS,
        batch=BATCH,
        lr=LR,
        max_steps=MAX_STEPS,
        stop=f"mean training accuracy of the last {WINDOW} steps >= {TARGET}",
        n_test=N_TEST,
        chance=1 / N_VALS,
        split="train lists have an even sum of values, held-out lists an odd one",
        **run_meta(),
        threads=torch.get_num_threads(),
        seconds=round(time.process_time() - t0),
    )
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}, indent=0) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
