"""W&P's trained adversary over its weight λ: their trade-off curve, three seeds each.

    .venv/bin/python tools/experiments/ch11_wp_sweep.py    # ~3 min on one core

Writes ``src/attnlab/results/ch11_wp_sweep.json``. For each seed, chapter 11's BiLSTM on
the focus task (``ch11_seeds.train_model``, as the page and ``ch11_wp.py``), and for each
λ of ``LAMS`` W&P's trained adversary (``wp_adversary(base, train, lam=λ, epochs=5,
seed=seed + 1)``, the row of ``ch11_wp.wp_row`` with λ varied and nothing else): its
test accuracy, mean |Δŷ| against the base model, mean JSD of its attention from the
base model's, the rationale recall of its attention, and the diagnostic MLP fed its
weights; and, as W&P's yardstick, the median JSD between the attention of two base
models that differ only in their seed (every pair). λ = 0 asks only for the same predictions (any JSD there is what training
alone gives). W&P (2019, §4) report this as a curve of JSD against the prediction
change, one point per λ; one λ is one point of it.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import torch

from attnlab.data import rationale_task
from attnlab.devices import run_meta
from attnlab.explain import diagnostic_mlp, jsd

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "src/attnlab/results/ch11_wp_sweep.json"
SEEDS = (0, 1, 2)
LAMS = (0.0, 0.0001, 0.001, 0.01, 0.1)

_spec = importlib.util.spec_from_file_location("ch11_wp", HERE / "ch11_wp.py")
ch11_wp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ch11_wp)


def main():
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    train = rationale_task("focus", "train", n=2000, seed=0)
    test = rationale_task("focus", "test", n=300, seed=0)
    u_train, u_test = ch11_wp.uniform_weights(train), ch11_wp.uniform_weights(test)
    out = {"sweep": {}, "base": {}, "seed_jsd": {}}
    att = {}
    out["diag_uniform"] = diagnostic_mlp(train, test, u_train, u_test)[0]
    for seed in SEEDS:
        base = ch11_wp.ch11_seeds.train_model(train, seed)
        with torch.no_grad():
            a_tr, a_te = base(train.ids, train.mask)[1], base(test.ids, test.mask)[1]
        att[seed] = a_te
        out["base"][str(seed)] = {
            "acc": ch11_wp.accuracy_f1(base, test)[0],
            "diag": diagnostic_mlp(train, test, a_tr, a_te)[0],
        }
        for lam in LAMS:
            row = ch11_wp.wp_row(base, train, test, seed, lam=lam)
            out["sweep"][f"{lam}/{seed}"] = row
            print(lam, seed, {k: round(v, 3) for k, v in row.items()}, flush=True)
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)
    for i, a in enumerate(SEEDS):  # W&P's yardstick: two base models, another seed
        for b in SEEDS[i + 1 :]:
            out["seed_jsd"][f"{a}/{b}"] = jsd(att[a], att[b]).median().item()
    print("seed JSD medians", out["seed_jsd"])
    out = {
        "meta": {
            "script": "tools/experiments/ch11_wp_sweep.py",
            "seeds": SEEDS,
            "lams": LAMS,
            "epochs": 5,
            **run_meta(),  # machine, torch, python, date
            "seconds": round(time.perf_counter() - t0, 1),
        },
        **out,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
