"""Chapter 13's trained experiments, three seeds each, on ``attnlab.modern.lab``:

    OMP_NUM_THREADS=1 nice .venv/bin/python tools/experiments/ch13_extrapolation.py

Writes ``src/attnlab/results/ch13_extrapolation.json`` (machine, torch, date, CPU s).
Seeds 0, 1, 2 set the weights and the batch stream; evaluation batches use seeds
``EVAL_SEED_OFFSET`` and above, a stream training never draws from. Each comparison
changes one thing; everything else (task, width 32, 4 heads, Adam, steps, batch 32,
gradient clipping at 1 unless said) is fixed.

(The length-extrapolation experiment is ``ch13_passkey.py``; an earlier version of
this script had a periodic-copy version of it, whose results were dropped from the
file: it needed no token further back than 8, so it could not test extrapolation.)

2. ``kv_budget``: ``recall`` (8 pairs, 8 queries) with MHA (4 heads of width 4), GQA
   (2 KV heads of width 8), MQA (1 KV head of width 16) and MLA (latent 24 + RoPE key
   8): all cache 32 numbers per token and layer.
3. ``stability``: ``periodic_copy`` at learning rates 1e-3 ... 1e-1, no gradient
   clipping, 100 steps, plain vs QK-norm vs soft-cap 10: final loss, max |logit|,
   mean attention entropy.
4. ``noop``: ``noop`` task, 1 layer, 2 heads: plain softmax vs a sink logit vs an
   output gate: where non-trigger queries put their attention, the sink's share, the
   gate, the peak attention output.
"""

from __future__ import annotations

import json
import platform
import sys
import time
from pathlib import Path

import torch

from attnlab.modern.lab import (
    EVAL_SEED_OFFSET,
    TinyLM,
    accuracy,
    noop,
    periodic_copy,
    recall,
    train_lm,
)

OUT = (
    Path(__file__).resolve().parents[2] / "src/attnlab/results/ch13_extrapolation.json"
)
SEEDS = (0, 1, 2)
TRAIN_LEN, FACTORS, STEPS, LR, BATCH = 32, (1, 2, 4, 8), 300, 3e-3, 32
POSITIONALS = ("sinusoidal", "rope", "alibi", "none")
LRS = (1e-3, 1e-2, 3e-2, 1e-1)
KV_VARIANTS = {
    "MHA": dict(head_dim=4),
    "GQA": dict(num_kv_heads=2, head_dim=8),
    "MQA": dict(num_kv_heads=1, head_dim=16),
    "MLA": dict(kind="latent", kv_rank=24, rope_dim=8, nope_dim=8, v_dim=8),
}


def copy_batch(length: int):
    return lambda s: periodic_copy(BATCH, length, seed=s)


def kv_budget(seed: int) -> dict:
    out = {}
    for name, kw in KV_VARIANTS.items():
        torch.manual_seed(seed)
        model = TinyLM(64, 32, 2, 4, positional="rope", **kw)
        train_lm(model, lambda s: recall(BATCH, seed=s), steps=300, lr=LR, seed=seed)
        out[name] = {
            "accuracy": accuracy(model, *recall(512, seed=EVAL_SEED_OFFSET)),
            "params": sum(p.numel() for p in model.parameters()),
        }
    return out


@torch.no_grad()
def _attention_stats(model: TinyLM, ids) -> tuple[float, float]:
    """Max |logit| over layers and the mean entropy (nats) of the attention rows."""
    captured: list = []
    hooks = [
        layer.register_forward_hook(lambda m, a, o: captured.append(a[0]))
        for layer in model.attention_layers()
    ]
    model(ids)
    for h in hooks:
        h.remove()
    max_logit, ent = 0.0, []
    for layer, x in zip(model.attention_layers(), captured):
        layer.record_max_logit = True
        _, w = layer(x, return_weights=True)  # (B, H, T, S)
        layer.record_max_logit = False
        max_logit = max(max_logit, layer.max_logit)
        ent.append(float(-(w * w.clamp_min(1e-30).log()).sum(-1).mean()))
    return max_logit, sum(ent) / len(ent)


def stability(seed: int) -> dict:
    out: dict = {}
    variants = {"plain": {}, "qk_norm": {"qk_norm": True}, "softcap": {"softcap": 10.0}}
    ids, targets, mask = periodic_copy(256, TRAIN_LEN, seed=EVAL_SEED_OFFSET)
    for name, kw in variants.items():
        rows = []
        for lr in LRS:
            torch.manual_seed(seed)
            model = TinyLM(16, 32, 2, 4, positional="rope", **kw)
            losses = train_lm(
                model, copy_batch(TRAIN_LEN), steps=100, lr=lr, seed=seed, clip=None
            )
            final = sum(losses[-20:]) / 20
            max_logit, entropy = _attention_stats(model, ids)
            rows.append(
                {
                    "lr": lr,
                    "loss": final if final == final else float("inf"),
                    "max_logit": max_logit,
                    "entropy": entropy,
                    "accuracy": accuracy(model, ids, targets, mask),
                }
            )
        out[name] = rows
    return out


@torch.no_grad()
def _noop_stats(model: TinyLM, batch) -> dict:
    ids, targets, mask, trigger = batch
    layer = model.attention_layers()[0]
    captured: list = []
    h = layer.register_forward_hook(lambda m, a, o: captured.append((a[0], o)))
    pred = model(ids).argmax(-1)
    h.remove()
    x, o = captured[0]
    _, w = layer(x, return_weights=True)  # (B, H, T, S)
    quiet = mask & ~trigger  # queries that should do nothing
    quiet[:, :2] = False
    stats = {
        "acc_trigger": float((pred == targets)[trigger].float().mean()),
        "acc_quiet": float((pred == targets)[quiet].float().mean()),
        "bos_share_quiet": float(w[..., 0].permute(0, 2, 1)[quiet].mean()),
        "bos_share_trigger": float(w[..., 0].permute(0, 2, 1)[trigger].mean()),
        "attended_mass_quiet": float(w.sum(-1).permute(0, 2, 1)[quiet].mean()),
        "peak_output": float(o.abs().amax()),
        "output_norm_quiet": float(o.norm(dim=-1)[quiet].mean()),
        "output_norm_trigger": float(o.norm(dim=-1)[trigger].mean()),
    }
    if layer.gate_proj is not None:
        gate = torch.sigmoid(layer.gate_proj(x))  # (B, T, H·Dh)
        stats["gate_quiet"] = float(gate.mean(-1)[quiet].mean())
        stats["gate_trigger"] = float(gate.mean(-1)[trigger].mean())
    return stats


def noop_heads(seed: int) -> dict:
    out = {}
    batch = noop(512, seed=EVAL_SEED_OFFSET)
    for name, kw in {
        "softmax": {},
        "sink": {"sink": True},
        "gate": {"output_gate": True},
    }.items():
        torch.manual_seed(seed)
        model = TinyLM(17, 32, 1, 2, positional="rope", **kw)
        train_lm(model, lambda s: noop(BATCH, seed=s), steps=250, lr=LR, seed=seed)
        out[name] = _noop_stats(model, batch)
    return out


PARTS = {
    "kv_budget": kv_budget,
    "stability": stability,
    "noop": noop_heads,
}


def _meta(cpu: float, seeds) -> dict:
    return {
        "machine": f"{platform.machine()} {platform.processor() or ''} "
        f"{platform.system()} ({torch.backends.cpu.get_cpu_capability()})".strip(),
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "cpu_seconds": round(cpu),
        "seeds": list(seeds),
        "train_len": TRAIN_LEN,
        "factors": list(FACTORS),
        "lrs": list(LRS),
        "steps": STEPS,
    }


def main(argv: list[str]) -> None:
    """No argument: everything in turn. ``--seed S --part P``: one seed of one part
    into a part file; ``--merge``: the part files into the result (so the pieces can
    run as parallel processes)."""
    torch.set_num_threads(1)
    if argv[:1] == ["--merge"]:
        results: dict = {p: {} for p in PARTS}
        cpu = 0
        for part in PARTS:
            for s in SEEDS:
                f = OUT.with_suffix(f".seed{s}.{part}.json")
                got = json.loads(f.read_text())
                results[part][str(s)] = got["result"]
                cpu += got["cpu_seconds"]
        results["meta"] = _meta(cpu, SEEDS)
        OUT.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {OUT} ({cpu:.0f} CPU s in all)")
        return
    if argv[:1] == ["--seed"]:
        seed, part = int(argv[1]), argv[3]
        t = time.process_time()
        result = PARTS[part](seed)
        f = OUT.with_suffix(f".seed{seed}.{part}.json")
        f.write_text(
            json.dumps({"result": result, "cpu_seconds": time.process_time() - t})
        )
        print(f"wrote {f}")
        return
    start = time.process_time()
    results = {p: {} for p in PARTS}
    for seed in SEEDS:
        for part, fn in PARTS.items():
            results[part][str(seed)] = fn(seed)
    results["meta"] = _meta(time.process_time() - start, SEEDS)
    OUT.write_text(json.dumps(results, indent=1) + "\n")
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main(sys.argv[1:])
