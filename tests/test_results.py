"""The experiment results chapter 7 loads (written by tools/experiments/) are complete."""

from __future__ import annotations

import json
from importlib.resources import files


def _load(name):
    return json.loads(files("attnlab").joinpath(f"results/{name}").read_text())


def test_warmup_results_cover_every_setting_and_seed():
    res = _load("ch07_warmup.json")
    meta, runs = res["meta"], res["runs"]
    assert meta["clip"] is None and meta["schedule"].startswith("linear warm-up")
    settings = {(r["ln"], r["warmup"], r["lr"]) for r in runs}
    assert len(settings) == 2 * len(meta["warmups"]) * len(meta["lrs"])
    for s in settings:
        seeds = sorted(r["seed"] for r in runs if (r["ln"], r["warmup"], r["lr"]) == s)
        assert seeds == sorted(meta["seeds"]) and len(seeds) >= 3
    assert all(len(r["losses"]) == meta["steps"] for r in runs)


def test_comparison_results_have_both_models_on_both_tasks():
    res = _load("ch07_vs_rnn.json")["results"]
    for task in ("date", "reversal"):
        assert set(res[task]) == {"Transformer", "RNN + attention"}
    assert res["date"]["Transformer"]["test_seen_in_training"] == 0.0  # disjoint split
    assert set(res["reversal"]["Transformer"]["by_length"]) == {
        "4",
        "8",
        "12",
        "14",
        "16",
    }
