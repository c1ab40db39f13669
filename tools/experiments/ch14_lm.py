"""Train the two LMs shipped with attnlab (chapter 14): a target and a smaller draft.

    OMP_NUM_THREADS=1 nice .venv/bin/python tools/experiments/ch14_lm.py

Writes the weights ``src/attnlab/models/{target,draft}.safetensors`` (package data,
loaded by ``attnlab.models.load_lm``) and ``src/attnlab/results/ch14_lm.json`` (the
training curves, held-out losses and ``meta``: machine, torch, python, date), which the
model card and chapter 14 quote.

* text: :mod:`attnlab.data.stories`, character level (vocabulary 29). Training windows
  of ``TRAIN_LEN`` ids, each a ``<bos>`` and whole training stories (names a..l),
  batch ``b`` drawn from generator seed ``b`` (the held-out stream starts at seed
  ``HELDOUT_SEED_OFFSET`` and its names at m..z: disjoint by construction);
* models: ``attnlab.models.CausalLM`` (``attnlab.modern`` layers, RoPE, GQA), see
  ``CONFIGS``; Adam, cosine decay to 10 %, gradient clipping at 1, seed 0;
* measured: mean cross-entropy (nats per character) on ``N_EVAL`` held-out streams of
  ``TRAIN_LEN`` ids (``heldout_prompts(N_EVAL, TRAIN_LEN, seed=0)``), every
  ``EVAL_EVERY`` steps, and at the end also per position bucket, and on training
  streams for comparison.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from torch.nn import functional as F

from attnlab.data import stories
from attnlab.devices import run_meta
from attnlab.models import CausalLM

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "src/attnlab/results/ch14_lm.json"
TRAIN_LEN, BATCH, N_EVAL, EVAL_EVERY, SEED = 192, 24, 32, 100, 0
CONFIGS = {
    "target": {
        "d_model": 96,
        "n_layers": 3,
        "n_heads": 6,
        "num_kv_heads": 2,
        "steps": 1000,
        "lr": 3e-3,
    },
    "draft": {
        "d_model": 32,
        "n_layers": 2,
        "n_heads": 2,
        "num_kv_heads": 1,
        "steps": 1000,
        "lr": 3e-3,
    },
}


def batch(step: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(step)
    return torch.stack(
        [stories.stream(gen, TRAIN_LEN + 1, "train") for _ in range(BATCH)]
    )


@torch.no_grad()
def mean_loss(model: CausalLM, ids: torch.Tensor) -> float:
    logits = model(ids[:, :-1])  # (B, T, V)
    return float(F.cross_entropy(logits.transpose(1, 2), ids[:, 1:]))


def train(name: str, cfg: dict, steps: int) -> tuple[CausalLM, dict]:
    torch.manual_seed(SEED)
    arch = {k: cfg[k] for k in ("d_model", "n_layers", "n_heads", "num_kv_heads")}
    model = CausalLM(stories.VOCAB, **arch)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"])
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * i / steps))
    )
    held = stories.heldout_prompts(N_EVAL, TRAIN_LEN + 1, seed=0)
    gen = torch.Generator().manual_seed(10**9)  # training text, never a batch seed
    train_eval = torch.stack(
        [stories.stream(gen, TRAIN_LEN + 1, "train") for _ in range(N_EVAL)]
    )
    curve, t0 = [], time.process_time()
    for step in range(steps):
        model.train()
        ids = batch(step)  # (B, T + 1)
        logits = model(ids[:, :-1])  # (B, T, V)
        loss = F.cross_entropy(logits.transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if (step + 1) % EVAL_EVERY == 0 or step == 0:
            model.eval()
            curve.append(
                {
                    "step": step + 1,
                    "train_batch": round(loss.item(), 4),
                    "heldout": round(mean_loss(model, held), 4),
                }
            )
            print(name, curve[-1], f"{time.process_time() - t0:.0f} CPU s", flush=True)
    model.eval()
    with torch.no_grad():
        logits = model(held[:, :-1])  # (B, T, V)
        per = F.cross_entropy(logits.transpose(1, 2), held[:, 1:], reduction="none")
    buckets = [(0, 16), (16, 64), (64, 128), (128, TRAIN_LEN)]
    result = {
        "config": {**arch, "vocab": stories.VOCAB},
        "training": {**{k: cfg[k] for k in ("lr",)}, "steps": steps, "batch": BATCH},
        "parameters": sum(p.numel() for p in model.parameters()),
        "curve": curve,
        "heldout_loss": round(float(per.mean()), 4),
        "train_text_loss": round(mean_loss(model, train_eval), 4),
        "heldout_loss_by_position": {
            f"{a}-{b}": round(float(per[:, a:b].mean()), 4) for a, b in buckets
        },
        "cpu_s": round(time.process_time() - t0, 1),
    }
    return model, result


def main(quick: bool = False) -> None:
    torch.set_num_threads(1)
    out = {
        "meta": {
            **run_meta(),
            "train_len": TRAIN_LEN,
            "n_eval": N_EVAL,
            "seed": SEED,
            "text": "attnlab.data.stories (train split; held-out names m..z)",
        },
        "models": {},
    }
    for name, cfg in CONFIGS.items():
        steps = 3 if quick else cfg["steps"]
        model, res = train(name, cfg, steps)
        out["models"][name] = res
        if not quick:
            state = {k: v.contiguous() for k, v in model.state_dict().items()}
            save_file(
                state,
                str(ROOT / f"src/attnlab/models/{name}.safetensors"),
                metadata={"config": json.dumps(model.config)},
            )
    if not quick:
        OUT.write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps({k: v["heldout_loss"] for k, v in out["models"].items()}))


if __name__ == "__main__":
    main(quick="--quick" in sys.argv)
