"""Remove-and-retrain's label leak on chapter 11's focus task, and a leak-free check.

    .venv/bin/python tools/experiments/ch11_roar_leak.py    # ~3 min on one core

Writes ``src/attnlab/results/ch11_roar_leak.json``. For each seed, chapter 11's BiLSTM
(``ch11_seeds.train_model``) and each ranking of ``ch11_seeds.rankings`` (attention,
gradient x input, leave-one-out, random scores, the true rationale):

* ``roar``: remove-and-retrain as in ``ch11_seeds.py`` (delete each sequence's two
  top-ranked tokens in training and test data, train a fresh model, test it), plus the
  retrained model's accuracy on the test sequences that lost *both* rationale tokens
  (``acc_both_gone``), their share (``share_both_gone``) and the share of them that are
  positive (``pos_both_gone``).
* ``leak``: the accuracy of a rule that sees only the removal pattern, not the words:
  which of the two rationale tokens ("overall", the target) the ranking deleted. The
  rule is the majority label of each of the four patterns on the training set, tested
  on the test set. Where it is well above 0.5, *what was removed* tells the label, and
  a retrained model can score without any information left in the words (Rong et al.,
  2022, on ROAR with class-dependent masks).
* ``road``: a leak-free variant in the spirit of ROAD (Rong et al., 2022): no
  retraining (the model tested never saw a removal pattern, so it cannot have learned
  one), and the two top-ranked tokens are *replaced* by neutral words drawn at random
  (label-independent, the same draws for every ranking) rather than deleted, so the
  length and the kind of input stay those of training. The base model's test accuracy
  on the imputed sequences.
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import torch

from attnlab.classifiers import accuracy_f1
from attnlab.data import rationale_task
from attnlab.devices import run_meta
from attnlab.rationales import NEUTRAL, RationaleData

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "src/attnlab/results/ch11_roar_leak.json"
SEEDS = (0, 1, 2)
K = 2

_spec = importlib.util.spec_from_file_location("ch11_seeds", HERE / "ch11_seeds.py")
ch11_seeds = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ch11_seeds)


def top_k(data: RationaleData, scores: torch.Tensor, k: int = K) -> torch.Tensor:
    """(N, T) bool: each sequence's k top-scored real tokens (as ``remove_top``)."""
    top = scores.masked_fill(~data.mask, float("-inf")).topk(k, dim=1).indices
    return torch.zeros_like(data.mask).scatter(1, top, True) & data.mask


def pattern(data: RationaleData, removed: torch.Tensor) -> torch.Tensor:
    """(N,) in 0..3: 2 * ('overall' removed) + (the target removed)."""
    over = data.ids == data.vocab.stoi["overall"]  # (N, T)
    target = data.rationale & ~over
    gone_over = (removed & over).any(1)
    gone_target = (removed & target).any(1)
    return 2 * gone_over.long() + gone_target.long()


def pattern_rule(train_pat, train_y, test_pat, test_y) -> float:
    """Accuracy of the majority label per removal pattern (fitted on training)."""
    pred = torch.zeros_like(test_y)
    for p in range(4):
        sel = train_pat == p
        pos = train_y[sel].float().mean().item() if sel.any() else 0.5
        pred[test_pat == p] = float(pos > 0.5)
    return (pred == test_y).float().mean().item()


def impute(data: RationaleData, removed: torch.Tensor, seed: int) -> RationaleData:
    """Replace the removed tokens by neutral words drawn at random (label-free)."""
    neutral = torch.tensor([data.vocab.stoi[w] for w in NEUTRAL])
    g = torch.Generator().manual_seed(seed)
    draw = neutral[torch.randint(len(neutral), data.ids.shape, generator=g)]
    ids = torch.where(removed, draw, data.ids)
    rat = data.rationale & ~removed
    return RationaleData(ids, data.mask, data.labels, rat, data.task, data.vocab)


def main():
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    train = rationale_task("focus", "train", n=2000, seed=0)
    test = rationale_task("focus", "test", n=300, seed=0)
    y_train, y_test = train.labels.float(), test.labels.float()
    out = {"roar": {}, "leak": {}, "road": {}}
    for seed in SEEDS:
        base = ch11_seeds.train_model(train, seed)
        r_train = ch11_seeds.rankings(base, train, seed)
        r_test = ch11_seeds.rankings(base, test, seed + 100)
        roar, leak, road = {}, {}, {}
        for name in r_train:
            rm_train, rm_test = top_k(train, r_train[name]), top_k(test, r_test[name])
            pat_train, pat_test = pattern(train, rm_train), pattern(test, rm_test)
            leak[name] = pattern_rule(pat_train, y_train, pat_test, y_test)
            retrained = ch11_seeds.train_model(
                ch11_seeds.remove_top(train, r_train[name]), seed
            )
            test_rm = ch11_seeds.remove_top(test, r_test[name])
            with torch.no_grad():
                pred = (retrained(test_rm.ids, test_rm.mask)[0] > 0).float()
            both = pat_test == 3
            roar[name] = {
                "acc": accuracy_f1(retrained, test_rm)[0],
                "share_both_gone": both.float().mean().item(),
                "acc_both_gone": (pred[both] == y_test[both]).float().mean().item()
                if both.any()
                else None,
                "pos_both_gone": y_test[both].mean().item() if both.any() else None,
            }
            road[name] = accuracy_f1(base, impute(test, rm_test, seed + 200))[0]
        out["roar"][str(seed)], out["leak"][str(seed)] = roar, leak
        out["road"][str(seed)] = road
        print(seed, json.dumps(roar), leak, road, flush=True)
        print(f"({time.perf_counter() - t0:.0f} s)", flush=True)
    out = {
        "meta": {
            "script": "tools/experiments/ch11_roar_leak.py",
            "seeds": SEEDS,
            "k": K,
            "n_train": 2000,
            "n_test": 300,
            **run_meta(),  # machine, torch, python, date
            "seconds": round(time.perf_counter() - t0, 1),
        },
        **out,
    }
    OUT.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
