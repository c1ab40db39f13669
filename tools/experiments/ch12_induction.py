"""Chapter 12's sweep: induction heads form in a 2-layer attention-only model and not in
a 1-layer one; switching them off undoes what they learned.

    OMP_NUM_THREADS=1 nice .venv/bin/python tools/experiments/ch12_induction.py

Writes ``src/attnlab/results/ch12_induction.json``, which chapter 12 loads for every
comparison over seeds. One thing changes at a time:

* task (:func:`attnlab.circuits.repeated_tokens`): ``[BOS]``, n random tokens (n from 6
  to 12, V = 32), the same n tokens again, random filler up to 25 tokens. Training
  batches are fresh draws from generator ``seed``; held-out sequences come from
  generators ``10_000 + seed`` (history) and ``20_000 + seed`` (ablations).
* models (:class:`attnlab.circuits.AttentionOnly`): D = 64, 4 heads, pre-LN, no MLP;
  **2 layers** against the **1-layer control**, everything else equal (same seed, same
  batches, same schedule: AdamW lr 1e-3, 1200 steps of 32 sequences).
* measured every 50 steps on 128 held-out sequences: the loss on the first copy and on
  the second (its tokens 2..n), the (L, H) previous-token and induction scores
  (:func:`attnlab.circuits.head_scores`); the phase change is the first step at which
  the second copy's loss falls below half the first copy's
  (:func:`attnlab.circuits.phase_change_step`);
* after training, on 512 held-out sequences: the loss on each copy with each head
  zero-ablated in turn (:func:`attnlab.explain.ablate_heads`), and, zero- and
  mean-ablated: the top induction head (last layer), the top previous-token head
  (layer 0), every head of those layers scoring at least half the top one's score,
  and each whole layer.
"""

from __future__ import annotations

import json
import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import torch

from attnlab.circuits import (
    InductionConfig,
    copy_losses,
    phase_change_step,
    repeated_tokens,
    train_induction,
)
from attnlab.explain import ablate_heads, attention_modules, cache_heads

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch12_induction.json"
SEEDS = (0, 1, 2)
N_ABLATE = 512


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


@torch.no_grad()
def ablations(model, cfg: InductionConfig, seed: int, hist: dict) -> dict:
    g = torch.Generator().manual_seed(20_000 + seed)
    ids, n = repeated_tokens(N_ABLATE, cfg.half, cfg.vocab_size, g, split="test")
    mhas = attention_modules(model)
    with cache_heads(mhas) as cache:
        base = copy_losses(model(ids), ids, n)
    means = {layer: c.mean(0) for layer, c in cache.items()}  # (T, H, Dh)
    zero = [[None] * cfg.n_heads for _ in range(cfg.n_layers)]
    for layer in range(cfg.n_layers):
        for h in range(cfg.n_heads):
            with ablate_heads(mhas, [(layer, h)]):
                zero[layer][h] = copy_losses(model(ids), ids, n)
    ind = torch.tensor(hist["induction"][-1])  # (L, H)
    prev = torch.tensor(hist["previous"][-1])
    last = cfg.n_layers - 1
    top_ind = (last, int(ind[last].argmax()))
    top_prev = (0, int(prev[0].argmax()))
    # every head of the layer scoring at least half the best one's score
    ind_heads = [
        (last, h) for h in range(cfg.n_heads) if ind[last, h] >= ind[last].max() / 2
    ]
    prev_heads = [(0, h) for h in range(cfg.n_heads) if prev[0, h] >= prev[0].max() / 2]
    out = {
        "base": base,
        "zero": zero,
        "top_induction": top_ind,
        "top_previous": top_prev,
        "induction_heads": ind_heads,
        "previous_heads": prev_heads,
    }
    groups = {
        "induction": [top_ind],
        "previous": [top_prev],
        "induction_heads": ind_heads,
        "previous_heads": prev_heads,
        "layer0": [(0, h) for h in range(cfg.n_heads)],
        "last_layer": [(last, h) for h in range(cfg.n_heads)],
    }
    for name, heads in groups.items():
        for mode in ("zero", "mean"):
            kw = {"means": means} if mode == "mean" else {}
            with ablate_heads(mhas, heads, mode=mode, **kw):
                out[f"{mode}_{name}"] = copy_losses(model(ids), ids, n)
    return out


def main() -> None:
    t0 = time.process_time()
    runs = []
    for seed in SEEDS:
        run = {"seed": seed}
        for n_layers in (2, 1):
            cfg = InductionConfig(n_layers=n_layers)
            model, hist = train_induction(cfg, seed)
            key = f"layers{n_layers}"
            run[key] = {
                "history": hist,
                "phase_change": phase_change_step(
                    hist["step"], hist["loss_first"], hist["loss_second"]
                ),
                "ablation": ablations(model, cfg, seed, hist),
            }
            a = run[key]["ablation"]
            print(
                f"seed {seed} L={n_layers}: phase {run[key]['phase_change']}, "
                f"loss 2nd {a['base'][1]:.3f}, top induction {a['top_induction']} "
                f"score {max(hist['induction'][-1][-1]):.3f}, ablated "
                f"{a['zero'][a['top_induction'][0]][a['top_induction'][1]][1]:.3f}",
                flush=True,
            )
        runs.append(run)
    cfg = InductionConfig()
    meta = {
        "config": {k: getattr(cfg, k) for k in cfg.__dataclass_fields__},
        "seeds": list(SEEDS),
        "n_ablate": N_ABLATE,
        "machine": f"{platform.machine()}, {_cpu()}",
        "torch": torch.__version__,
        "python": platform.python_version(),
        "threads": torch.get_num_threads(),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "cpu_s": round(time.process_time() - t0, 1),
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"meta": meta, "runs": runs}) + "\n")
    print("wrote", OUT, meta["cpu_s"], "CPU s")


if __name__ == "__main__":
    main()
