"""attnlab.modern.lab: the chapter 13 tasks and the tiny LM (no training here)."""

from __future__ import annotations

import pytest
import torch

from attnlab.modern.lab import (
    TinyLM,
    noop,
    passkey,
    periodic_copy,
    recall,
    train_lm,
    with_rope_scaling,
)


def test_periodic_copy_targets_repeat_the_period():
    ids, targets, mask = periodic_copy(4, 40, period=8, seed=1)
    assert ids.shape == targets.shape == mask.shape == (4, 40)
    assert torch.equal(targets[:, :-1], ids[:, 1:])
    full = torch.cat((ids, targets[:, -1:]), 1)  # (4, 41)
    t = torch.arange(8, 41)
    assert torch.equal(full[:, t], full[:, t - 8])
    assert not mask[:, :7].any() and mask[:, 7:].all()


def test_recall_values_follow_their_keys():
    ids, targets, mask = recall(5, n_pairs=4, n_queries=3, n_keys=10, seed=2)
    for b in range(5):
        pairs = dict(zip(ids[b, 0:8:2].tolist(), ids[b, 1:8:2].tolist()))
        assert len(pairs) == 4  # distinct keys
        for t in torch.nonzero(mask[b]).flatten().tolist():
            assert targets[b, t].item() == pairs[ids[b, t].item()]


def test_noop_targets():
    ids, targets, mask, trigger = noop(6, 20, vocab=8, p_trigger=0.3, seed=3)
    assert (ids[:, 0] == 8).all() and trigger.any()
    assert torch.equal(targets[trigger], ids[:, 1:2].expand_as(ids)[trigger])
    assert torch.equal(targets[~trigger], ids[~trigger])
    assert not mask[:, 0].any()


@pytest.mark.parametrize("far", [0, 5, 20])
def test_passkey_target_follows_the_only_marker(far):
    ids, targets, mask = passkey(64, 24, vocab=8, far=far, seed=4)
    assert ids.shape == targets.shape == mask.shape == (64, 24)
    assert (ids[:, -1] == 9).all() and mask[:, -1].all() and mask.sum() == 64
    assert ((ids == 8).sum(1) == 1).all()  # one marker per sequence
    at = (ids == 8).int().argmax(1)  # (64,) the marker's position
    assert torch.equal(targets[:, -1], ids[torch.arange(64), at + 1])
    assert ((23 - at) > far).all() and (at + 1 <= 22).all()
    assert (ids[:, :-1] != 9).all() and (targets[:, -1] < 8).all()
    if far == 0:
        assert at.min() == 0 and at.max() == 21  # every position possible


def test_passkey_refuses_a_needle_that_cannot_fit():
    with pytest.raises(ValueError, match="far=30"):
        passkey(2, 24, far=30)


def test_train_lm_callback_sees_every_step_in_eval_mode():
    torch.manual_seed(0)
    lm = TinyLM(10, 8, 1, 1, positional="rope", mlp=False)
    seen = []
    losses = train_lm(
        lm,
        lambda s: passkey(4, 12, vocab=8, seed=s),
        steps=3,
        lr=1e-3,
        seed=0,
        callback=lambda step: seen.append((step, lm.training)),
    )
    assert len(losses) == 3 and seen == [(1, False), (2, False), (3, False)]


def test_eval_and_train_streams_differ():
    a, _, _ = periodic_copy(8, 32, seed=0)
    b, _, _ = periodic_copy(8, 32, seed=10_000)
    assert not torch.equal(a, b)


@pytest.mark.parametrize("pos", ["rope", "sinusoidal", "alibi", "none"])
def test_tiny_lm_shapes_and_causality(pos):
    torch.manual_seed(0)
    lm = TinyLM(16, 16, 2, 2, positional=pos).eval()
    ids = torch.randint(0, 16, (2, 12))
    other = ids.clone()
    other[:, 8:] = (other[:, 8:] + 1) % 16
    with torch.no_grad():
        assert lm(ids).shape == (2, 12, 16)
        assert torch.equal(lm(ids)[:, :8], lm(other)[:, :8])


def test_with_rope_scaling_changes_only_the_rope():
    torch.manual_seed(0)
    lm = TinyLM(16, 16, 1, 2, positional="rope").eval()
    pi = with_rope_scaling(lm, {"type": "linear", "factor": 4.0})
    assert pi.attention_layers()[0].rope.scaling["factor"] == 4.0
    assert lm.attention_layers()[0].rope.scaling is None
    ids = torch.randint(0, 16, (1, 10))
    with torch.no_grad():
        assert (pi(ids) - lm(ids)).abs().max() > 1e-6
    with pytest.raises(ValueError, match="positional='rope'"):
        with_rope_scaling(TinyLM(16, 16, 1, 2, positional="alibi"), None)
    with pytest.raises(ValueError, match="positional"):
        TinyLM(16, 16, positional="learned")


def _results(name):
    import json
    from pathlib import Path

    import attnlab

    return json.loads((Path(attnlab.__file__).parent / "results" / name).read_text())


def test_committed_results_cover_every_setting_and_seed():
    d = _results("ch13_extrapolation.json")
    meta = d["meta"]
    assert {"machine", "torch", "date", "cpu_seconds"} <= set(meta)
    assert "extrapolation" not in d  # replaced by ch13_passkey.json
    seeds = [str(s) for s in meta["seeds"]]
    assert len(seeds) >= 3
    for s in seeds:
        assert set(d["kv_budget"][s]) == {"MHA", "GQA", "MQA", "MLA"}
        assert all(len(rows) == len(meta["lrs"]) for rows in d["stability"][s].values())
        assert set(d["noop"][s]) == {"softmax", "sink", "gate"}


def test_committed_passkey_results_cover_every_setting_and_seed():
    d = _results("ch13_passkey.json")
    meta = d["meta"]
    assert {"machine", "torch", "python", "date", "cpu_seconds"} <= set(meta)
    assert meta["model"]["head_dim"] >= 32  # wide enough for the scalings to differ
    assert len(meta["seeds"]) >= 3 and set(d["runs"]) == {str(s) for s in meta["seeds"]}
    n_f = len(meta["factors"])
    for run in d["runs"].values():
        assert set(run["trained"]) == set(meta["positionals_run"]) >= {"rope"}
        assert all(len(v["accuracy"]) == n_f for v in run["trained"].values())
        for part in ("zero_shot", "fine_tuned"):
            assert (
                set(run[part]) == set(meta["scalings"]) == {"none", "PI", "NTK", "YaRN"}
            )
            assert all(len(v) == n_f for v in run[part].values())
        assert all(
            len(c) == len(meta["fine_tune"]["checks"]) for c in run["ft_curve"].values()
        )
        assert run["zero_shot"]["none"] == run["trained"]["rope"]["accuracy"]
