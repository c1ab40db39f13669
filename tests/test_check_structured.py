"""Chapter 4 checks pass good answers and catch wrong ones."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attnlab import check


def good_reinforce(scores, reward, n_samples, baseline=0.0):
    p = torch.softmax(scores, -1)
    idx = torch.multinomial(p, n_samples, replacement=True)
    return (reward[idx] - baseline)[:, None] * (
        F.one_hot(idx, len(scores)).to(p.dtype) - p
    )


def good_log_z(u, A):
    a = u[:, 0]
    for i in range(1, u.shape[1]):
        a = u[:, i] + torch.logsumexp(a[:, :, None] + A, dim=1)
    return torch.logsumexp(a, -1)


def good_viterbi(u, A):
    a, back = u[:, 0], []
    for i in range(1, u.shape[1]):
        best, arg = (a[:, :, None] + A).max(dim=1)
        back.append(arg)
        a = u[:, i] + best
    z = [a.argmax(-1)]
    for arg in reversed(back):
        z.append(arg.gather(1, z[-1][:, None])[:, 0])
    return torch.stack(z[::-1], 1)


def test_good_answers_pass(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert check.reinforce_estimates(good_reinforce)
    assert check.log_partition(good_log_z)
    assert check.viterbi(good_viterbi)


def test_wrong_answers_fail(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    # ignoring the baseline: unbiased, but the variance bound fails
    assert not check.reinforce_estimates(lambda s, r, n, b=0.0: good_reinforce(s, r, n))

    # forgetting the softmax term: biased
    def biased(s, r, n, b=0.0):
        idx = torch.multinomial(torch.softmax(s, -1), n, replacement=True)
        return (r[idx] - b)[:, None] * F.one_hot(idx, len(s)).to(s.dtype)

    assert not check.reinforce_estimates(biased)

    def naive(u, A):  # exp then log: overflows at x1000
        a = u[:, 0].exp()
        for i in range(1, u.shape[1]):
            a = u[:, i].exp() * (a @ A.exp())
        return a.sum(-1).log()

    assert not check.log_partition(naive)
    assert not check.viterbi(lambda u, A: u.argmax(-1))  # ignores the transitions


def test_pending_stub(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*a):
        raise NotImplementedError

    result = check.viterbi(stub)
    assert not result and "not implemented yet" in result.line
