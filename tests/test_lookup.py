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


def _trained(estimator, steps=60):
    """A net trained ``steps`` steps the way train_lookup does (tau annealed,
    REINFORCE's baseline moving), for measuring its gradient noise."""
    cfg = L.LookupConfig(steps=steps)
    torch.manual_seed(0)
    net = L.LookupNet(cfg, L._mapping(estimator, cfg))
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    gen = torch.Generator().manual_seed(0)
    net.train()
    for step in range(1, steps + 1):
        if isinstance(net.mapping, L.GumbelSoftmax):
            net.mapping.tau = max(cfg.tau[1], cfg.tau[0] * 0.995**step)
        loss = L.lookup_loss(net, L.lookup_batch(cfg, cfg.batch, gen))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return cfg, net


def test_gumbel_noise_is_measured_at_the_current_temperature():
    """Training anneals tau (a plain attribute, not in the state dict): the
    measurement must use the net's tau, not the starting 2.0."""
    cfg, net = _trained("gumbel")
    net.mapping.tau = 0.5
    at_half = L.grad_variance("gumbel", cfg, draws=8, net=net)
    assert net.mapping.tau == 0.5  # the net is left as it was
    net.mapping.tau = cfg.tau[0]
    at_start = L.grad_variance("gumbel", cfg, draws=8, net=net)
    # same weights, batches and noise: only the temperature differs
    assert at_half["variance"] != pytest.approx(at_start["variance"], rel=1e-3)
    assert at_half["variance"] > at_start["variance"]  # colder relaxation, noisier


def test_reinforce_noise_is_measured_with_the_training_baseline():
    """The draws use the net's moving-average baseline (all from the same value), not
    each batch's own mean reward, and leave the net's baseline unchanged."""
    cfg, net = _trained("reinforce")
    assert bool(net.mapping.initialised)
    b = float(net.mapping.baseline)
    with_b = L.grad_variance("reinforce", cfg, draws=8, net=net)
    assert float(net.mapping.baseline) == b
    again = L.grad_variance("reinforce", cfg, draws=8, net=net)
    assert again == with_b  # no drift of the baseline between calls
    net.mapping.baseline.fill_(b - 5.0)  # a baseline far below the rewards
    far = L.grad_variance("reinforce", cfg, draws=8, net=net)
    net.mapping.baseline.fill_(b)
    assert far["variance"] > 1.5 * with_b["variance"]


def test_grad_variance_refuses_a_net_of_another_estimator():
    cfg, net = _trained("soft", steps=1)
    with pytest.raises(ValueError, match="ReinforceSample"):
        L.grad_variance("reinforce", cfg, draws=2, net=net)
