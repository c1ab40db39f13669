"""attnlab.train: the fit loop, schedules, early stop, metrics."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import attnlab
from attnlab.data import ReversalTask, Vocab
from attnlab.seq2seq import Seq2Seq, Seq2SeqConfig
from attnlab.train import (
    History,
    accuracy_by_length,
    evaluate,
    exact_match,
    fit,
    noam_lr,
    noam_scheduler,
    token_loss,
)


class Affine(nn.Module):
    """y = w x + b, trained with loss_fn on (x, y) batches."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(1, 1)


def _mse(model, batch):
    x, y = batch
    return ((model.lin(x) - y) ** 2).mean()


def _batches(seed=0):
    g = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randn(32, 1, generator=g)
        yield x, 3 * x - 1


def test_fit_learns_and_records(capsys):
    model = Affine()
    hist = fit(model, _batches(), _mse, steps=300, lr=0.05, log_every=100)
    assert isinstance(hist, History) and hist.steps == 300 and len(hist.losses) == 300
    assert hist.losses[-1] < 1e-3 < hist.losses[0]
    torch.testing.assert_close(model.lin.weight.item(), 3.0, atol=0.02, rtol=0)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("step   100/300  loss")
    assert hist.seconds > 0 and not model.training
    assert len(hist.smoothed(10)) == 300 and hist.smoothed(10)[-1] < 1e-2


def test_early_stop_on_target_and_eval_history():
    model = Affine()
    err = lambda m: -abs(m.lin.weight.item() - 3.0)  # noqa: E731
    hist = fit(
        model,
        _batches(),
        _mse,
        steps=2000,
        lr=0.05,
        eval_fn=err,
        eval_every=20,
        target=-0.05,
        quiet=True,
    )
    assert hist.stopped_early and hist.steps < 2000 and hist.steps % 20 == 0
    assert hist.evals[-1][1] >= -0.05 and all(s % 20 == 0 for s, _ in hist.evals)


def test_fit_errors_and_short_iterable():
    with pytest.raises(ValueError, match="steps"):
        fit(Affine(), _batches(), _mse, steps=0)
    with pytest.raises(ValueError, match="eval_fn"):
        fit(Affine(), _batches(), _mse, target=0.9)
    with pytest.raises(ValueError, match="schedule"):
        fit(Affine(), _batches(), _mse, steps=5, schedule="step")
    with pytest.raises(TypeError, match="logits"):
        fit(Affine(), _batches(), steps=2, quiet=True)  # no .logits and no loss_fn
    hist = fit(Affine(), [next(_batches())] * 4, _mse, steps=10, quiet=True)
    assert hist.steps == 4  # the iterable ran out first

    def nan_loss(model, batch):
        return _mse(model, batch) * float("nan")

    with pytest.raises(FloatingPointError, match="step 1"):
        fit(Affine(), _batches(), nan_loss, steps=3, quiet=True)


@pytest.mark.parametrize("schedule", ["cosine", "linear"])
def test_schedules_reach_zero(schedule):
    model = Affine()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    fit(
        model,
        _batches(),
        _mse,
        steps=10,
        optimizer=opt,
        schedule=schedule,
        warmup=2,
        quiet=True,
    )
    assert opt.param_groups[0]["lr"] == pytest.approx(0.0, abs=1e-12)


def test_threads_restored_and_determinism():
    before = torch.get_num_threads()
    fit(Affine(), _batches(), _mse, steps=5, seed=1, quiet=True)
    assert torch.get_num_threads() == before
    torch.manual_seed(0)
    m1 = Affine()
    h1 = fit(m1, _batches(), _mse, steps=5, quiet=True)
    torch.manual_seed(0)
    m2 = Affine()
    h2 = fit(m2, _batches(), _mse, steps=5, quiet=True)
    assert h1.losses == h2.losses  # the same seeds give the same run


def test_token_loss_ignores_padding():
    logits = torch.randn(2, 3, 5)
    tgt = torch.tensor([[1, 2, 0], [3, 0, 0]])
    manual = torch.nn.functional.cross_entropy(logits[tgt != 0], tgt[tgt != 0])
    torch.testing.assert_close(token_loss(logits, tgt), manual)
    with pytest.raises(ValueError, match="logits"):
        token_loss(logits, tgt[:, :2])


def test_label_smoothing_by_its_formula():
    # Reference written out: (1 - eps) * NLL of the gold token + eps * mean_c(-log p_c),
    # averaged over the non-padding positions.
    logits = torch.randn(3, 5, 7, dtype=torch.float64) * 10
    target = torch.randint(1, 7, (3, 5))
    target[0, 3:] = 0
    keep = target != 0
    logp = logits.log_softmax(-1)[keep]  # (N, V)
    nll = -logp.gather(-1, target[keep][:, None]).squeeze(-1)  # (N,)
    for eps in (0.0, 0.1, 0.3):
        want = ((1 - eps) * nll + eps * -logp.mean(-1)).mean()
        torch.testing.assert_close(
            token_loss(logits, target, label_smoothing=eps), want
        )
    with pytest.raises(ValueError, match="pad_id"):
        token_loss(logits, torch.zeros_like(target))
    with pytest.raises(ValueError, match="label_smoothing"):
        token_loss(logits, target, label_smoothing=1.0)


def test_noam_schedule():
    lrs = [noam_lr(s, 64, warmup=100) for s in range(1, 400)]
    peak = max(range(len(lrs)), key=lrs.__getitem__) + 1
    assert peak == 100
    assert lrs[99] == pytest.approx(64**-0.5 * 100**-0.5)
    assert lrs[9] == pytest.approx(lrs[99] / 10)  # linear warm-up
    assert lrs[399 - 1] == pytest.approx(lrs[99] * (100 / 399) ** 0.5)
    p = nn.Parameter(torch.zeros(1))
    opt = torch.optim.Adam([p], lr=0.5)
    sched = noam_scheduler(opt, 64, warmup=10, factor=2.0)
    for s in range(1, 4):
        assert opt.param_groups[0]["lr"] == pytest.approx(noam_lr(s, 64, 10, 2.0))
        opt.step(), sched.step()
    with pytest.raises(ValueError):
        noam_lr(0, 64)
    with pytest.raises(ValueError, match="noam_lr: d_model must be >= 1"):
        noam_lr(1, 0)  # was a ZeroDivisionError


def test_fit_noam_schedule_is_noam_lr_scaled_to_its_peak():
    model, seen = Affine(), []

    def record(m, batch):
        seen.append(opt.param_groups[0]["lr"])
        return _mse(m, batch)

    opt = torch.optim.SGD(model.parameters(), lr=0.2)
    fit(
        model,
        _batches(),
        record,
        steps=40,
        optimizer=opt,
        schedule="noam",
        warmup=10,
        quiet=True,
    )
    peak = noam_lr(10, 64, warmup=10)
    want = [0.2 * noam_lr(s, 64, warmup=10) / peak for s in range(1, 41)]
    assert seen == pytest.approx(want)
    with pytest.raises(ValueError, match="warmup"):
        fit(Affine(), _batches(), _mse, steps=5, schedule="noam", quiet=True)


def test_exact_match_cuts_at_eos():
    pred = torch.tensor([[5, 6, 2, 9], [5, 6, 7, 2], [5, 2, 0, 0], [5, 6, 3, 3]])
    gold = torch.tensor([[5, 6, 2], [5, 6, 2], [5, 6, 2], [5, 6, 2]])
    assert exact_match(pred, gold).tolist() == [True, False, False, False]
    with pytest.raises(ValueError, match="exact_match"):
        exact_match(pred, gold[:2])


def test_evaluate_and_by_length_on_a_perfect_and_a_broken_model():
    task = ReversalTask(lengths=(2, 5))

    class Oracle(nn.Module):  # answers by reading the source: always right
        pad_id, bos_id, eos_id = Vocab.pad_id, Vocab.bos_id, Vocab.eos_id

        def step(self, src, src_lengths, weights=False):
            B, S = src.shape
            answer = torch.full((B, S + 1), self.pad_id)  # reversed source, <eos>
            for b, n in enumerate(src_lengths.tolist()):
                answer[b, :n] = src[b, :n].flip(0)
                answer[b, n] = self.eos_id

            def step(prefix):  # (B, t) -> (B, V): certain of the right token
                logp = torch.full((B, len(task.tgt_vocab)), -1e9)
                col = answer[:, min(prefix.shape[1] - 1, S)]
                return logp.scatter(1, col[:, None], 0.0)

            return step

    assert evaluate(Oracle(), task, n=30)["accuracy"] == 1.0
    attnlab.seed_everything(0)
    untrained = Seq2Seq(
        Seq2SeqConfig(len(task.src_vocab), len(task.tgt_vocab), d_hidden=4)
    )
    acc = accuracy_by_length(untrained, task, [4, 5], n=20)
    assert set(acc) == {4, 5} and all(a < 0.2 for a in acc.values())
    assert threads_after_eval_ok()


def threads_after_eval_ok():
    before = torch.get_num_threads()
    evaluate(Seq2Seq(Seq2SeqConfig(30, 30, d_hidden=2)), ReversalTask(), n=2)
    return torch.get_num_threads() == before
