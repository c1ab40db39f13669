"""Chapter 14's cache-compression sweep on the shipped LM: eviction at fixed budgets
and quantised keys and values.

    OMP_NUM_THREADS=1 nice .venv/bin/python tools/experiments/ch14_evict.py   # ~2 CPU min

Writes ``src/attnlab/results/ch14_evict.json``, which chapter 14 loads. One thing
changes at a time:

* model: ``attnlab.models.load_lm("target")`` (the shipped LM: RoPE, GQA), weights
  fixed; text: ``attnlab.data.stories.heldout_prompts(N_SEQ, LENGTH, seed)`` (held-out
  stories, disjoint from the training stories by construction), seeds 0, 1, 2;
* eviction (:func:`attnlab.kvcompress.evict_decode`): the first ``PROMPT`` tokens are
  prefilled and compressed to the budget, the other ``LENGTH - PROMPT`` decoded one at
  a time with at most ``budget`` cached tokens per layer (and head); the loss of each
  continuation token beside the full cache's (the same forward with no eviction);
  settings: 4 sinks (window), half the budget recent (H2O), an observation window of 8
  and a pooling kernel of 5 (SnapKV);
* quantisation (:class:`attnlab.kvcompress.QuantCache`): keys or values (one at a time,
  then both) at 8/4/2 bits, per token or per channel (groups of ``GROUP`` tokens);
  the mean loss over all positions and each layer's attention-output error on the
  same inputs (relative Frobenius error against float keys and values);
* outlier channels (:func:`attnlab.kvcompress.channel_outliers`): the largest
  channel's mean |k| over the median channel's, per layer and key head, in the LM's
  cached (rotated) keys and in MiniLM's keys (``attnlab.pretrained``, if installed).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from attnlab.devices import run_meta
from attnlab.kvcompress import (
    QuantCache,
    channel_outliers,
    evict_decode,
    lm_forward,
)
from attnlab.modern.attention import Cache

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch14_evict.json"
SEEDS, N_SEQ, LENGTH, PROMPT = (0, 1, 2), 8, 192, 128
BUDGETS = (8, 16, 32, 64, 128)
POLICIES = ("window", "h2o", "snapkv", "tova")
SETTINGS = dict(sinks=4, window=8, pool=5)  # H2O's recent: budget // 2
BITS, GROUP = (8, 4, 2), 32
SCHEMES = {  # name: (key_bits?, value_bits?, key_per, value_per)
    "K per token": (True, False, "token", "token"),
    "K per channel": (True, False, "channel", "token"),
    "V per token": (False, True, "channel", "token"),
    "V per channel": (False, True, "channel", "channel"),
    "K, V per token": (True, True, "token", "token"),
    "KIVI (K per channel, V per token)": (True, True, "channel", "token"),
}
MINILM_TEXTS = [
    "the cat sat on the mat",
    "time flies like an arrow",
    "she gave him the book yesterday",
    "a small boat drifted toward the shore",
    "the results surprised everyone in the room",
    "we ate dinner after the long walk",
    "the river runs through the quiet town",
    "my brother fixed the broken chair",
]


def load():
    from attnlab.data import stories
    from attnlab.models import load_lm

    return load_lm("target"), lambda seed: stories.heldout_prompts(N_SEQ, LENGTH, seed)


@torch.no_grad()
def full_loss(lm, ids):
    logits = lm(ids)  # (B, T, V)
    return F.cross_entropy(logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none")


@torch.no_grad()
def evict_sweep(lm, ids):
    full = full_loss(lm, ids)[:, PROMPT:].mean().item()
    rows = []
    for pol in POLICIES:
        for b in BUDGETS:
            loss = evict_decode(lm, ids, pol, b, prompt=PROMPT, **SETTINGS)
            rows.append(dict(policy=pol, budget=b, loss=loss.mean().item(), full=full))
    return rows


@torch.no_grad()
def quant_sweep(lm, ids):
    ref = full_loss(lm, ids).mean().item()
    inputs = []  # each layer's attention input in the float run
    hooks = [
        b.n1.register_forward_hook(lambda m, a, out: inputs.append(out))
        for b in lm.blocks
    ]
    lm(ids)
    for h in hooks:
        h.remove()
    float_out = [b.attn(x) for b, x in zip(lm.blocks, inputs)]
    rows = []
    for name, (kq, vq, kp, vp) in SCHEMES.items():
        for bits in BITS:

            def cache(kq=kq, vq=vq, kp=kp, vp=vp, bits=bits):
                return QuantCache(
                    bits if kq else None,
                    bits if vq else None,
                    key_per=kp,
                    value_per=vp,
                    group=GROUP,
                )

            logits = lm_forward(lm, ids, [cache() for _ in lm.blocks])
            loss = F.cross_entropy(
                logits[:, :-1].transpose(1, 2), ids[:, 1:], reduction="none"
            )
            errs = [
                ((b.attn(x, cache=cache()) - ref_out).norm() / ref_out.norm()).item()
                for b, x, ref_out in zip(lm.blocks, inputs, float_out)
            ]
            rows.append(
                dict(
                    scheme=name,
                    bits=bits,
                    loss=loss.mean().item(),
                    full=ref,
                    attn_err=errs,
                )  # fmt: skip
            )
    return rows


@torch.no_grad()
def lm_outliers(lm, ids):
    caches = [Cache() for _ in lm.blocks]
    lm_forward(lm, ids, caches)
    return [channel_outliers(c.first.transpose(0, 1).flatten(1, 2)).tolist()
            for c in caches]  # fmt: skip  # per layer: (G,) over all tokens


@torch.no_grad()
def minilm_outliers():
    try:
        from attnlab.pretrained import MiniLM

        mini = MiniLM.load()
    except Exception as e:  # not installed: say so in the file
        return {"error": f"{type(e).__name__}: {e}"}
    ids, mask = mini.encode(MINILM_TEXTS)
    keys = []
    hooks = [
        layer.self_attn.w_k.register_forward_hook(lambda m, a, out: keys.append(out))
        for layer in mini.layers
    ]
    mini(ids, mask)
    for h in hooks:
        h.remove()
    H = mini.config.n_heads
    out = []
    for k in keys:  # (B, T, D) -> real tokens (N, H, Dh)
        real = k[mask].reshape(-1, H, k.shape[-1] // H).transpose(0, 1)  # (H, N, Dh)
        out.append(channel_outliers(real).tolist())
    return {"ratio": out, "n_tokens": int(mask.sum())}


def main():
    t0 = time.process_time()
    lm, prompts = load()
    evict, quant, outl = [], [], []
    for seed in SEEDS:
        ids = prompts(seed)
        evict += [dict(seed=seed, **r) for r in evict_sweep(lm, ids)]
        quant += [dict(seed=seed, **r) for r in quant_sweep(lm, ids)]
        outl.append(lm_outliers(lm, ids))
        print(f"seed {seed} done, {time.process_time() - t0:.0f} CPU s", flush=True)
    meta = dict(
        model="attnlab.models.load_lm('target')",
        text="attnlab.data.stories.heldout_prompts(n, length, seed)",
        seeds=SEEDS,
        n_seq=N_SEQ,
        length=LENGTH,
        prompt=PROMPT,
        budgets=BUDGETS,
        policies=POLICIES,
        settings={**SETTINGS, "recent": "budget // 2"},
        bits=BITS,
        group=GROUP,
        schemes=list(SCHEMES),
        **run_meta(),
        threads=torch.get_num_threads(),
    )
    result = dict(
        meta=meta,
        evict=evict,
        quant=quant,
        outliers=dict(lm=outl, minilm=minilm_outliers()),
    )
    result["meta"]["seconds"] = round(time.process_time() - t0)
    OUT.write_text(json.dumps(result, indent=0) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
