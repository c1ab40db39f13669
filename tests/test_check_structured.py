"""Chapter 4 checks pass good answers and catch wrong ones."""

from __future__ import annotations

import torch
import torch.nn.functional as F

import attnlab
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


# ------------------------------------------------ every wrong answer gets its own hint
import pytest  # noqa: E402

from attnlab.check import CheckFailed  # noqa: E402


def exact_repeated(s, r, n, b=0.0):  # never samples: the exact gradient n times
    p = torch.softmax(s, -1)
    return (p * (r - (p * r).sum())).expand(n, len(s)).clone()


def averaged(s, r, n, b=0.0):  # each row the mean of 16 samples: too little noise
    return torch.stack([good_reinforce(s, r, 16, b).mean(0) for _ in range(n)])


def no_minus_p(s, r, n, b=0.0):
    idx = torch.multinomial(torch.softmax(s, -1), n, replacement=True)
    return (r[idx] - b)[:, None] * F.one_hot(idx, len(s)).to(s.dtype)


def grad_p(s, r, n, b=0.0):  # (r_i - b) ∇p_i instead of (r_i - b) ∇log p_i
    p = torch.softmax(s, -1)
    idx = torch.multinomial(p, n, replacement=True)
    return ((r[idx] - b) * p[idx])[:, None] * (F.one_hot(idx, len(s)).to(s.dtype) - p)


def library_reinforce(s, r, n, b=0.0):
    from attnlab.structured import ReinforceSample

    ReinforceSample()
    return good_reinforce(s, r, n, b)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (exact_repeated, "every row is the same"),
        (averaged, "draw one key per row"),
        (no_minus_p, "the − p term is missing"),
        (grad_p, "needs ∇ log p_i = onehot\\(i\\) − p, without the factor p_i"),
        (lambda s, r, n, b=0.0: good_reinforce(s, r, n), "subtract the baseline"),
        (library_reinforce, "called attnlab.structured.ReinforceSample"),
        (lambda s, r, n, b=0.0: good_reinforce(s, r, n, b).T, "shape"),
    ],
    ids=["exact", "averaged", "no-p", "grad-p", "no-baseline", "library", "transposed"],
)
def test_reinforce_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        check.reinforce_estimates(wrong)


def naive_log_z(u, A):  # exp then log: overflows at x1000
    a = u[:, 0].exp()
    for i in range(1, u.shape[1]):
        a = u[:, i].exp() * (a @ A.exp())
    return a.sum(-1).log()


def transposed_log_z(u, A):  # reads transition[c, c_prev]
    return good_log_z(u, A.T)


def max_log_z(u, A):  # the Viterbi score, not log Z
    a = u[:, 0]
    for i in range(1, u.shape[1]):
        a = u[:, i] + (a[:, :, None] + A).amax(dim=1)
    return a.amax(-1)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (naive_log_z, "stay in log space"),
        (transposed_log_z, "the previous state is the row"),
        (max_log_z, "log Z needs logsumexp"),
        (lambda u, A: torch.logsumexp(u, -1).sum(-1), "the transitions are missing"),
        (
            lambda u, A: attnlab.structured.linear_chain_log_partition(u, A),
            "called attnlab.structured.linear_chain_log_partition",
        ),
        (lambda u, A: torch.zeros(u.shape[0]), "a_i\\[c\\] = ψ_i\\[c\\] \\+ logsumexp"),
    ],
    ids=["exp-log", "A.T", "max", "no-A", "library", "const"],
)
def test_log_partition_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        check.log_partition(wrong)


def posterior_decoding(u, A):
    from attnlab.structured import linear_chain_marginals

    return linear_chain_marginals(u, A).argmax(-1)


def posterior_by_hand(u, A):  # argmax of marginals, computed with autograd
    u = u.clone().requires_grad_()
    (m,) = torch.autograd.grad(good_log_z(u, A).sum(), u)
    return m.argmax(-1)


def greedy_left_to_right(u, A):
    z = [u[:, 0].argmax(-1)]
    for i in range(1, u.shape[1]):
        z.append((u[:, i] + A[z[-1]]).argmax(-1))
    return torch.stack(z, 1)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (lambda u, A: u.argmax(-1), "ignores the transitions"),
        (posterior_by_hand, "the argmax of the marginals is not the best labelling"),
        (posterior_decoding, "called attnlab.structured.linear_chain_marginals"),
        (greedy_left_to_right, "a greedy left-to-right choice"),
        (lambda u, A: good_viterbi(u, A.T), "the previous state is the row of A"),
        (lambda u, A: good_viterbi(u, A).float(), "labels are integers"),
    ],
    ids=["unary", "posterior", "library", "greedy", "A.T", "float"],
)
def test_viterbi_names_the_bug(wrong, hint, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed, match=hint):
        check.viterbi(wrong)


def test_copy_sources_point_at_the_digit_they_copy():
    """Chapter 4's probe: every copied target digit points at that digit in the source;
    only the dashes, a month computed from its name and a day's padding zero copy
    nothing."""
    from attnlab.course.ch04_structured.probes import copy_sources
    from attnlab.data import DateTask

    assert copy_sources(["5", "November", "1", "9", "0", "6"]) == [
        2, 3, 4, 5, None, None, None, None, None, 0,
    ]  # fmt: skip
    assert copy_sources(["Nov", "2", "2", ",", "2", "0", "2", "6"]) == [
        4, 5, 6, 7, None, None, None, None, 1, 2,
    ]  # fmt: skip
    assert copy_sources(["5", ".", "0", "7", ".", "1", "9", "9", "9"]) == [
        5, 6, 7, 8, None, 2, 3, None, None, 0,
    ]  # fmt: skip
    for src, tgt in DateTask(split=None).pairs(300, seed=1):
        sources = copy_sources(src)
        named = any(t.isalpha() for t in src)
        for t, j in enumerate(sources):
            if j is not None:
                assert src[j] == tgt[t], (src, tgt, t)
            else:
                month = named and t in (5, 6)
                pad_zero = t == 8 and tgt[8] == "0"  # the source writes 5, not 05
                assert tgt[t] == "-" or month or pad_zero, (src, tgt, t)


def test_viterbi_case_where_marginals_and_best_labelling_disagree(monkeypatch):
    """Exercise 4.3's question: on "à" with agreement 2 the words with marginal above
    1/2 ("to the") are not the best labelling (nothing): a posterior decoder that is
    right everywhere else still fails there."""
    monkeypatch.setenv("ATTNLAB_STRICT", "1")

    def right_but_for_a(u, A):
        if u.shape == (1, 6, 2) and float(A[0, 0]) == 1.0:
            return posterior_by_hand(u, A)
        return good_viterbi(u, A)

    with pytest.raises(CheckFailed, match="'à' with agreement 2.*marginals"):
        check.viterbi(right_but_for_a)
