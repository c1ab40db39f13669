"""Chapter 9's attention-sink experiment: the committed JSON is complete, held-out text
is disjoint from training text, and the start of one training run re-runs."""

from __future__ import annotations

import importlib.util
import json
from importlib.resources import files
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "tools/experiments/ch09_sinks.py"


def _load():
    return json.loads(files("attnlab").joinpath("results/ch09_sinks.json").read_text())


def _script():
    spec = importlib.util.spec_from_file_location("ch09_sinks", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_result_covers_three_seeds_and_every_mask():
    res = _load()
    meta, runs = res["meta"], res["runs"]
    assert sorted(r["seed"] for r in runs) == sorted(meta["seeds"]) and len(runs) >= 3
    for r in runs:
        assert set(r["per_position"]) == {
            "full",
            "window",
            "window + sinks",
            "recompute",
        }
        assert all(len(v) == meta["eval_len"] for v in r["per_position"].values())
        assert len(r["sink_share"]) == 2 and all(len(h) == 4 for h in r["sink_share"])


def test_held_out_names_are_never_training_names():
    S = _script()
    g = torch.Generator().manual_seed(0)
    train_first = {S._name(g, False)[0] for _ in range(500)}
    test_first = {S._name(g, True)[0] for _ in range(500)}
    assert train_first <= set("abcdefghijkl") and test_first <= set("mnopqrstuvwxyz")
    story = S.story(g, True)  # the first name of a held-out story is a held-out name
    assert story[0] in "mnopqrstuvwxyz"


def test_window_masks_keep_the_same_cache_size():
    S = _script()
    from attnlab.serving import streaming_mask

    w = streaming_mask(S.EVAL_LEN, S.WINDOW)
    ws = streaming_mask(S.EVAL_LEN, S.WINDOW - S.N_SINK, n_sink=S.N_SINK)
    assert w.sum(-1).max() == ws.sum(-1).max() == S.WINDOW
    assert not w[-1, 0] and ws[-1, 0]  # the last query: <bos> evicted / kept


@pytest.mark.slow
@pytest.mark.experiment
def test_the_first_training_steps_reproduce():
    """Seed 0's first 31 steps (the loss is saved every 15 steps) match the JSON."""
    S = _script()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as the script ran
    try:
        _, losses = S.train(0, steps=31)
    finally:
        torch.set_num_threads(threads)
    (row,) = [r for r in _load()["runs"] if r["seed"] == 0]
    saved = row["train_loss"][:3]  # steps 0, 15, 30
    assert losses[::15][:3] == pytest.approx(saved, abs=2e-5)
