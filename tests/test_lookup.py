"""attnlab.lookup: the key-value lookup task and the estimators' experiment."""

from __future__ import annotations

import pytest
import torch

from attnlab import lookup as L


def test_batches_are_well_formed_and_splits_disjoint():
    cfg = L.LookupConfig()
    keys, values, query, answer = L.lookup_batch(
        cfg, 500, torch.Generator().manual_seed(0)
    )
    assert keys.shape == values.shape == (500, cfg.n_pairs)
    assert all(len(set(row)) == cfg.n_pairs for row in keys.tolist())  # distinct keys
    hit = keys == query[:, None]  # (b, P): the query is exactly one of the keys
    assert (hit.sum(-1) == 1).all()
    assert torch.equal(values[hit], answer)
    assert not L.is_test(keys, values, query).any()
    test = L.lookup_batch(cfg, 300, torch.Generator().manual_seed(0), split="test")
    assert L.is_test(*test[:3]).all()
    with pytest.raises(ValueError, match="split"):
        L.lookup_batch(cfg, 4, split="val")


def test_config_errors_name_the_value():
    with pytest.raises(ValueError, match="n_pairs"):
        L.LookupConfig(n_symbols=4, n_pairs=5)
    with pytest.raises(ValueError, match="estimator"):
        L.train_lookup("straight", L.LookupConfig(steps=1))


@pytest.mark.parametrize("estimator", L.ESTIMATORS)
def test_every_estimator_learns(estimator):
    cfg = L.LookupConfig(steps=150, eval_every=150, n_test=300)
    run = L.train_lookup(estimator, cfg, seed=0, variance_at=(0, 150), draws=4)
    assert run.steps == [0, 150] and len(run.losses) == 150
    assert sorted(run.variance) == [0, 150] and run.variance[0]["variance"] > 0
    # measuring the variance does not change training
    again = L.train_lookup(estimator, cfg, seed=0)
    assert again.losses == run.losses
    assert run.accuracy[-1] > run.accuracy[0] + 0.03  # chance is 1/32


def test_unbiased_snr_removes_the_floor_of_a_mean_of_draws():
    """The mean of K draws adds variance / K to its squared norm: the plain snr sits
    on a 1/K floor, snr_unbiased subtracts it (what chapter 4 plots)."""
    v = L.grad_variance("reinforce", draws=16)
    assert v["floor"] == pytest.approx(1 / 16)
    assert v["snr"] - v["snr_unbiased"] == pytest.approx(1 / 16)
    assert v["snr"] > v["floor"] * 0.5  # the plain ratio cannot fall far below it


def test_estimators_indistinguishable_at_initialisation():
    """Chapter 4's claim at step 0: with the floor removed, every estimator's mean
    gradient is lost in its noise (signal-to-noise below 0.05)."""
    for e in L.ESTIMATORS:
        assert abs(L.grad_variance(e, draws=32)["snr_unbiased"]) < 0.05, e
