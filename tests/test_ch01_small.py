"""results/ch01_small.json, chapter 1's "no room, or not learned yet?" runs: the file
holds every setting for three seeds, and a re-run of one seed reaches its conclusion."""

from __future__ import annotations

import importlib.util
import json
from importlib.resources import files
from pathlib import Path

import pytest
import torch

SETTINGS = {"base", "4x steps", "4x wider", "4x wider, 4x steps"}


def _load():
    return json.loads(files("attnlab").joinpath("results/ch01_small.json").read_text())


def _script():
    path = Path(__file__).resolve().parents[1] / "tools/experiments/ch01_small.py"
    spec = importlib.util.spec_from_file_location("ch01_small", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_setting_has_three_seeds_and_every_length():
    res = _load()
    meta, runs = res["meta"], res["runs"]
    assert len(meta["seeds"]) >= 3 and meta["lengths"] == list(range(3, 9))
    for setting in SETTINGS:
        mine = [r for r in runs if r["setting"] == setting]
        assert sorted(r["seed"] for r in mine) == sorted(meta["seeds"]), setting
        for r in mine:
            assert sorted(int(n) for n in r["accuracy"]) == meta["lengths"]
            assert all(0.0 <= a <= 1.0 for a in r["accuracy"].values())


@pytest.mark.slow
@pytest.mark.experiment
def test_a_rerun_of_seed_0_reaches_the_files_conclusion():
    """The narrow model, seed 0 (~6 CPU s): four times the steps help by more than 0.1
    on average over lengths 3-8, as in the file (another CPU or torch trains another
    model: the conclusion is compared, not the digits)."""
    S = _script()
    torch.set_num_threads(1)
    from attnlab.data import ReversalTask

    task = ReversalTask(lengths=(3, 24), distinct=True)
    curve = S.small_run(task, 0, S.WIDTHS["narrow"], 4 * S.BASE)
    mean = [sum(c.values()) / len(c) for c in (curve[0], curve[-1])]
    assert mean[1] > mean[0] + 0.1, mean
    want = {
        r["setting"]: sum(r["accuracy"].values()) / len(r["accuracy"])
        for r in _load()["runs"]
        if r["seed"] == 0
    }
    assert want["4x steps"] > want["base"] + 0.1, want
