"""Chapter 11's comparisons over three seeds, too long to run on the page.

    .venv/bin/python tools/experiments/ch11_seeds.py    # ~5 min alone on one core

Writes ``src/attnlab/results/ch11_seeds.json``, which chapter 11 loads and plots. Every
model is chapter 11's BiLSTM (``AttentionClassifier("lstm")``, 3 epochs, Adam 3e-3,
batches of 64) on 2000 training sequences; the test sets (300 sequences) are disjoint
from training by construction. A seed sets the initial weights and the batch order and
is shared by every setting, so each comparison is paired and changes one thing:

* ``accuracy``: trained attention against W&P's uniform weights (``attention=
  "uniform"``), on the focus task and on the count task;
* ``permutation``: J&W's permutation test (median |Δŷ| over 100 shuffles), per example;
* ``adversary``: J&W's per-example adversary (eps 0.01, k = 4, 200 steps) on the first
  100 test examples: the max JSD of each;
* ``deception``: Pruthi et al.'s penalty at several λ (λ = 0 is the ordinary model):
  test accuracy, attention mass on the rationale, leave-one-out recall@2;
* ``roar``: remove-and-retrain (Hooker et al., 2019) on the focus task: delete each
  sequence's two top-ranked tokens (by the base model's attention, gradient × input,
  leave-one-out, random scores, or the true rationale), in training *and* test data,
  train a fresh model on what is left and test it. Retraining means the model has seen
  such inputs, which plain deletion (leave-one-out, comprehensiveness) cannot promise;
* ``transformer``: chapter 11's 3-layer Transformer on the short count task, Spearman
  of raw attention, rollout and flow (CLS row, layer 3) with blank-out, per seed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from attnlab.classifiers import (
    AttentionClassifier,
    TransformerClassifier,
    accuracy_f1,
)
from attnlab.data import Vocab, rationale_task
from attnlab.devices import run_meta
from attnlab.explain import (
    adversarial_attention,
    attention_flow,
    attention_rollout,
    deceptive_loss,
    gradient_importance,
    leave_one_out,
    mean_std,
    permutation_test,
    rationale_recall,
    spearman,
)
from attnlab.rationales import RationaleData
from attnlab.train import fit_classifier

OUT = Path(__file__).resolve().parents[2] / "src/attnlab/results/ch11_seeds.json"
SEEDS = (0, 1, 2)
N_ADV = 100
LAMS = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)


def train_model(data, seed, attention="additive", loss_fn=None):
    torch.manual_seed(seed)  # as the chapter's train_model: seed, build, fit
    model = AttentionClassifier(len(data.vocab), "lstm", attention)
    fit_classifier(model, data, epochs=3, seed=seed, loss_fn=loss_fn)
    return model.eval()


def decoder_inputs(model, data):
    with torch.no_grad():
        h = model.encode(model.embedding(data.ids), data.mask)
        return h, model.attend(h, data.mask)


def rankings(model, data, seed):
    """Attention, gradient x input, LOO, random and truth scores, each (N, T)."""
    with torch.no_grad():
        att = model(data.ids, data.mask)[1]

    def f_emb(x):
        return torch.sigmoid(model(data.ids, data.mask, embeddings=x)[0])

    grad = gradient_importance(f_emb, model.embedding(data.ids), data.mask)
    loo = leave_one_out(lambda i, m: torch.sigmoid(model(i, m)[0]), data.ids, data.mask)
    rand = torch.rand(data.ids.shape, generator=torch.Generator().manual_seed(seed))
    return {"attention": att, "gradient": grad, "LOO": loo, "random": rand,
            "truth": data.rationale.float()}  # fmt: skip


def remove_top(data: RationaleData, scores: torch.Tensor, k: int = 2) -> RationaleData:
    """Delete each sequence's k top-scored real tokens; the rest closes up."""
    top = scores.masked_fill(~data.mask, float("-inf")).topk(k, dim=1).indices
    keep = data.mask & ~torch.zeros_like(data.mask).scatter(1, top, True)
    order = torch.argsort((~keep).int(), dim=1, stable=True)  # kept tokens first
    kept = keep.gather(1, order)
    ids = torch.where(kept, data.ids.gather(1, order), Vocab.pad_id)
    rat = data.rationale.gather(1, order) & kept
    return RationaleData(ids, kept, data.labels, rat, data.task, data.vocab)


def main():
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    out = {"accuracy": {}, "permutation": {}, "adversary": {}, "deception": {},
           "roar": {}, "transformer": {}}  # fmt: skip
    sets = {
        t: (
            rationale_task(t, "train", n=2000, seed=0),
            rationale_task(t, "test", n=300, seed=0),
        )
        for t in ("focus", "count")
    }
    base = {}
    for task, (train, test) in sets.items():
        for seed in SEEDS:
            m = base[task, seed] = train_model(train, seed)
            u = train_model(train, seed, attention="uniform")
            out["accuracy"][f"{task}/{seed}"] = {
                "attention": accuracy_f1(m, test)[0], "uniform": accuracy_f1(u, test)[0]
            }  # fmt: skip
            h, w = decoder_inputs(m, test)
            perm = permutation_test(m.decode, h, w, test.mask, 100)
            out["permutation"][f"{task}/{seed}"] = [round(v, 5) for v in perm.tolist()]
            sub = test[:N_ADV]
            h, w = decoder_inputs(m, sub)
            _, div, dy = adversarial_attention(
                m.decode, h, w, sub.mask, eps=0.01, k=4, steps=200
            )
            assert (dy <= 0.01).all()
            out["adversary"][f"{task}/{seed}"] = [round(v, 5) for v in div.tolist()]
            print(
                task,
                seed,
                out["accuracy"][f"{task}/{seed}"],
                f"perm median {perm.median():.3f}",
                f"adv >0.5 {(div > 0.5).float().mean():.2f}",
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )

    train, test = sets["focus"]
    for lam in LAMS:
        for seed in SEEDS:
            if lam == 0:
                m = base["focus", seed]
            else:
                m = train_model(train, seed, loss_fn=deceptive_loss(lam))
            with torch.no_grad():
                att = m(test.ids, test.mask)[1]
            loo = leave_one_out(
                lambda i, mk, m=m: torch.sigmoid(m(i, mk)[0]), test.ids, test.mask
            )
            out["deception"][f"{lam}/{seed}"] = {
                "accuracy": accuracy_f1(m, test)[0],
                "mass": (att * test.rationale).sum(1).mean().item(),
                "attention_recall": rationale_recall(att, test.rationale, test.mask)
                .mean().item(),
                "loo_recall": rationale_recall(loo, test.rationale, test.mask)
                .mean().item(),
            }  # fmt: skip
            print(
                "deception",
                lam,
                seed,
                out["deception"][f"{lam}/{seed}"],
                f"({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )

    for seed in SEEDS:
        m = base["focus", seed]
        r_train, r_test = rankings(m, train, seed), rankings(m, test, seed + 100)
        row = {}
        for name in r_train:
            retrained = train_model(remove_top(train, r_train[name]), seed)
            row[name] = accuracy_f1(retrained, remove_top(test, r_test[name]))[0]
        out["roar"][str(seed)] = row
        print("roar", seed, row, f"({time.perf_counter() - t0:.0f} s)", flush=True)

    train_t = rationale_task("count", "train", n=2000, seed=0, lengths=(8, 16))
    test_t = rationale_task("count", "test", n=150, seed=0, lengths=(8, 16))
    for seed in SEEDS:
        torch.manual_seed(seed)
        tf = TransformerClassifier(
            len(train_t.vocab), d_model=32, n_heads=2, n_layers=3
        )
        fit_classifier(tf, train_t, epochs=4, lr=3e-3, seed=seed)
        tf.eval()
        with torch.no_grad():
            logit, atts = tf(test_t.ids, test_t.mask)
        pred = logit > 0

        def p_pred(ids, mask, tf=tf, pred=pred):
            p = torch.sigmoid(tf(ids, mask)[0])
            return torch.where(pred, p, 1 - p)

        blank = leave_one_out(
            p_pred, test_t.ids, test_t.mask, replace_with=Vocab.unk_id
        )
        keys = torch.cat([torch.ones(len(test_t), 1, dtype=torch.bool), test_t.mask], 1)
        rows = {"raw": atts[-1].mean(1)[:, 0, 1:],
                "rollout": attention_rollout(atts)[:, 0, 1:],
                "flow": attention_flow(atts, keys, rows=[0])[:, 0, 1:]}  # fmt: skip
        out["transformer"][str(seed)] = {
            "accuracy": accuracy_f1(tf, test_t)[0],
            **{
                n: mean_std(spearman(s, blank, test_t.mask))[0] for n, s in rows.items()
            },
        }
        print("transformer", seed, out["transformer"][str(seed)], flush=True)

    meta = dict(
        seeds=SEEDS,
        n_train=2000,
        n_test=300,
        n_adv=N_ADV,
        lams=LAMS,
        epochs=3,
        adversary="eps 0.01, k 4, 200 steps",
        roar_k=2,
        **run_meta(),  # machine, torch, python, date
        seconds=round(time.perf_counter() - t0),
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps({"meta": meta, **out}) + "\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
