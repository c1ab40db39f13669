"""The tools of the explanation debate (attnlab.explain) against plain references:
scipy's Kendall tau and Spearman, hand gradients, decoders whose answer is known."""

from __future__ import annotations

import math

import pytest
import scipy.stats
import torch

from attnlab.explain import (
    adversarial_attention,
    deception_penalty,
    deceptive_loss,
    erasure_test,
    gradient_importance,
    jsd,
    kendall_tau,
    leave_one_out,
    mean_std,
    permutation_test,
    rationale_recall,
    spearman,
    weight_gradient,
)


# ------------------------------------------------------------------ rank correlations
def _ties(g, n, levels):
    return torch.randint(0, levels, (n,), generator=g).double()


@pytest.mark.parametrize("levels", [1000, 4, 2])  # no ties, many ties, two values
def test_kendall_tau_equals_scipy_tau_b(levels):
    g = torch.Generator().manual_seed(levels)
    a = torch.stack([_ties(g, 12, levels) for _ in range(20)])  # (20, 12)
    b = torch.stack([_ties(g, 12, levels) for _ in range(20)])
    b[0] = a[0]  # identical rankings: 1
    b[1] = -a[1]  # reversed: -1
    got = kendall_tau(a, b)
    for i in range(20):
        ref = scipy.stats.kendalltau(a[i].numpy(), b[i].numpy()).statistic  # tau-b
        if math.isnan(ref):
            assert torch.isnan(got[i])
        else:
            assert got[i].item() == pytest.approx(ref, abs=1e-12)
    if levels > 2:
        assert got[0].item() == pytest.approx(1.0) and got[1].item() == pytest.approx(
            -1.0
        )


def test_kendall_tau_with_a_mask_uses_only_the_real_tokens():
    g = torch.Generator().manual_seed(1)
    a, b = (
        torch.randn(6, 9, generator=g),
        torch.randint(0, 3, (6, 9), generator=g).float(),
    )
    lengths = torch.tensor([9, 7, 5, 3, 2, 8])
    mask = torch.arange(9)[None] < lengths[:, None]
    a[~mask], b[~mask] = 100.0, -100.0  # garbage on padding must not count
    got = kendall_tau(a, b, mask)
    for i, n in enumerate(lengths.tolist()):
        ref = scipy.stats.kendalltau(a[i, :n].numpy(), b[i, :n].numpy()).statistic
        assert got[i].item() == pytest.approx(ref, abs=1e-6)


def test_kendall_tau_of_a_constant_ranking_is_nan_like_scipy():
    assert torch.isnan(kendall_tau(torch.ones(5), torch.arange(5.0)))


def test_spearman_equals_scipy_with_ties_and_masks():
    g = torch.Generator().manual_seed(2)
    a = torch.randint(0, 4, (8, 10), generator=g).float()
    b = torch.randn(8, 10, generator=g)
    lengths = torch.tensor([10, 9, 6, 4, 10, 3, 7, 5])
    mask = torch.arange(10)[None] < lengths[:, None]
    got = spearman(a, b, mask)
    for i, n in enumerate(lengths.tolist()):
        ref = scipy.stats.spearmanr(a[i, :n].numpy(), b[i, :n].numpy()).statistic
        assert got[i].item() == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("fn", [kendall_tau, spearman])
def test_rank_correlations_reject_bad_shapes_and_masks(fn):
    with pytest.raises(ValueError, match="one shape"):
        fn(torch.zeros(2, 3), torch.zeros(2, 4))
    with pytest.raises(ValueError, match="mask"):
        fn(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="boolean"):
        fn(torch.zeros(2, 3), torch.zeros(2, 3), torch.ones(2, 3))


# ------------------------------------------------------------------ importance measures
def test_gradient_times_input_matches_a_hand_computation():
    """f(e) = sum_t c_t * <u, e_t>^2: df/de_t = 2 c_t <u, e_t> u, so g.e_t = 2 c_t <u,e_t>^2."""
    g = torch.Generator().manual_seed(3)
    e = torch.randn(2, 5, 4, generator=g, dtype=torch.float64)
    u = torch.randn(4, generator=g, dtype=torch.float64)
    c = torch.tensor([1.0, -2.0, 0.5, 3.0, 0.0], dtype=torch.float64)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])

    def f(x):
        return ((x @ u) ** 2 * c).sum(-1)  # (B,)

    got = gradient_importance(f, e, mask)
    raw = (2 * c * (e @ u) ** 2).abs() * mask
    torch.testing.assert_close(got, raw / raw.sum(1, keepdim=True))
    assert (got[1, 3:] == 0).all()


def test_plain_gradient_matches_finite_differences():
    g = torch.Generator().manual_seed(4)
    e = torch.randn(1, 4, 3, generator=g, dtype=torch.float64)
    W = torch.randn(3, generator=g, dtype=torch.float64)

    def f(x):
        return torch.tanh(x @ W).prod(-1)  # couples the tokens

    mask = torch.ones(1, 4, dtype=torch.bool)
    got = gradient_importance(f, e, mask, times_input=False)
    h = 1e-6
    fd = torch.zeros(4, dtype=torch.float64)
    for t in range(4):
        for d in range(3):
            step = torch.zeros_like(e)
            step[0, t, d] = h
            fd[t] += (f(e + step) - f(e - step)).item() / (2 * h)
    torch.testing.assert_close(got[0], fd.abs() / fd.abs().sum(), atol=1e-7, rtol=1e-6)


def _sum_model(values):
    """f(ids, mask) = sum of values[id] over the real tokens: LOO of t is |values[id_t]|."""

    def f(ids, mask):
        return (values[ids] * mask).sum(1)

    return f


def test_leave_one_out_on_a_tiny_known_model():
    values = torch.tensor([0.0, 5.0, -1.0, 2.0, 0.5])
    ids = torch.tensor([[1, 2, 3, 4], [4, 2, 0, 0], [3, 0, 0, 0]])
    mask = ids != 0
    got = leave_one_out(_sum_model(values), ids, mask)
    expected = torch.tensor([[5.0, 1.0, 2.0, 0.5], [0.5, 1.0, 0, 0], [0, 0, 0, 0]])
    torch.testing.assert_close(got, expected)  # one-token row: nothing to delete
    blank = leave_one_out(_sum_model(values), ids, mask, replace_with=3)
    torch.testing.assert_close(blank[0], torch.tensor([3.0, 3.0, 0.0, 1.5]))


def test_leave_one_out_deletes_so_the_sequence_closes_up():
    """A model that reads position 1 only: deleting token 0 or 1 moves token 2 there."""

    def second(ids, mask):
        return ids[:, 1].float()

    ids = torch.tensor([[5, 7, 9]])
    got = leave_one_out(second, ids, torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(got, torch.tensor([[2.0, 2.0, 0.0]]))  # 9 moves up


def test_leave_one_out_rejects_bad_shapes():
    with pytest.raises(ValueError, match="mask"):
        leave_one_out(
            _sum_model(torch.ones(3)),
            torch.ones(2, 3, dtype=torch.long),
            torch.ones(2, 4, dtype=torch.bool),
        )


def test_rationale_recall_counts_the_top_k_hits():
    scores = torch.tensor([[0.1, 0.5, 0.3, 0.2], [0.4, 0.3, 0.2, 0.9]])
    rationale = torch.tensor([[False, True, False, True], [True, False, False, False]])
    mask = torch.tensor([[True] * 4, [True, True, True, False]])  # 0.9 is padding
    torch.testing.assert_close(
        rationale_recall(scores, rationale, mask), torch.tensor([0.5, 1.0])
    )


def test_jsd_is_zero_for_equal_and_ln2_for_disjoint():
    p = torch.tensor([0.5, 0.5, 0.0, 0.0])
    q = torch.tensor([0.0, 0.0, 0.3, 0.7])
    assert jsd(p, p).item() == pytest.approx(0.0, abs=1e-7)
    assert jsd(p, q).item() == pytest.approx(math.log(2), abs=1e-6)
    r = torch.tensor([0.2, 0.3, 0.4, 0.1])
    ref = scipy.spatial.distance.jensenshannon(p.numpy(), r.numpy()) ** 2  # natural log
    assert jsd(p, r).item() == pytest.approx(ref, abs=1e-6)


def test_mean_std_skips_nan():
    assert mean_std([1.0, float("nan"), 3.0]) == (2.0, 1.0)


# ------------------------------------------------------------ decoders with known answers
def _linear_decoder(h, w):
    """logit = sum_t w_t h_t: h (B, T) holds each item's vote."""
    return (w * h).sum(-1)


def _blind_decoder(h, w):
    """Ignores the weights entirely."""
    return h.sum(-1)


def test_permutation_of_a_decoder_that_ignores_the_weights_changes_nothing():
    g = torch.Generator().manual_seed(5)
    h = torch.randn(4, 6, generator=g)
    w = torch.softmax(torch.randn(4, 6, generator=g), -1)
    mask = torch.ones(4, 6, dtype=torch.bool)
    assert (permutation_test(_blind_decoder, h, w, mask, n_perm=20) == 0).all()


def test_permutation_keeps_weights_on_real_tokens_and_changes_a_sensitive_decoder():
    h = torch.tensor([[4.0, -4.0, 0.0, 9.0]])
    w = torch.tensor([[0.9, 0.1, 0.0, 0.0]])
    mask = torch.tensor([[True, True, False, False]])
    # the two real weights swap or not: |sigmoid(-3.2) - sigmoid(3.2)| or 0; median of
    # many permutations is one of the two, and padding (h = 9) never gets weight
    d = permutation_test(_linear_decoder, h, w, mask, n_perm=101).item()
    big = torch.sigmoid(torch.tensor(3.2)) - torch.sigmoid(torch.tensor(-3.2))
    assert d == pytest.approx(0.0, abs=1e-6) or d == pytest.approx(big.item(), abs=1e-6)


def test_adversary_respects_its_constraint_and_finds_different_weights():
    g = torch.Generator().manual_seed(6)
    h = torch.randn(8, 7, generator=g)
    h[:, :3] = 1.0  # three items with the same vote: weight can move freely among them
    w = torch.softmax(torch.randn(8, 7, generator=g), -1)
    mask = torch.ones(8, 7, dtype=torch.bool)
    mask[4:, 5:] = False
    w = w * mask / (w * mask).sum(1, keepdim=True)
    for eps in (0.0, 0.01, 0.1):
        best, div, dy = adversarial_attention(
            _linear_decoder, h, w, mask, eps=eps, k=3, steps=150
        )
        y0 = torch.sigmoid(_linear_decoder(h, w))
        real_dy = (torch.sigmoid(_linear_decoder(h, best)) - y0).abs()
        assert (real_dy <= eps + 1e-6).all() and (dy <= eps).all()
        torch.testing.assert_close(best.sum(1), torch.ones(8))
        assert (best[~mask] == 0).all()
        torch.testing.assert_close(div, jsd(best, w), atol=1e-6, rtol=0)
    assert div.mean() > 0.2  # with eps = 0.1 the weights can move far


def test_adversary_against_a_blind_decoder_reaches_nearly_ln2():
    h = torch.zeros(2, 5)
    w = torch.tensor([[0.96, 0.01, 0.01, 0.01, 0.01], [0.2] * 5])
    _, div, dy = adversarial_attention(
        _blind_decoder, h, w, torch.ones(2, 5, dtype=torch.bool), steps=200
    )
    assert (dy == 0).all() and div[0] > 0.6


def test_adversary_rejects_negative_eps_and_bad_shapes():
    h, w, m = (
        torch.zeros(2, 3),
        torch.full((2, 3), 1 / 3),
        torch.ones(2, 3, dtype=torch.bool),
    )
    with pytest.raises(ValueError, match="eps"):
        adversarial_attention(_linear_decoder, h, w, m, eps=-0.1)
    with pytest.raises(ValueError, match="mask"):
        adversarial_attention(_linear_decoder, h, w, m[:, :2])
    with pytest.raises(ValueError, match="h must be"):
        permutation_test(_linear_decoder, h[:, :2], w, m)


def test_erasure_flips_where_the_votes_say():
    """Votes +3, +2, -1, -0.5 with uniform weights: logit = 3.5/4 > 0. Erasing by
    attention order (item 0 first, then 1) flips after two items: 2 of 4 erased."""
    h = torch.tensor([[3.0, 2.0, -1.0, -0.5], [3.0, 2.0, -1.0, -0.5]])
    w = torch.full((2, 4), 0.25)
    mask = torch.ones(2, 4, dtype=torch.bool)
    order = torch.tensor(
        [[4.0, 3.0, 2.0, 1.0], [1.0, 2.0, 3.0, 4.0]]
    )  # row 1: the negatives first
    frac, flipped = erasure_test(_linear_decoder, h, w, mask, order)
    assert flipped.tolist() == [True, False]
    torch.testing.assert_close(frac, torch.tensor([0.5, 1.0], dtype=torch.float64))


def test_weight_gradient_points_toward_the_decision():
    h = torch.tensor([[3.0, -1.0], [-3.0, 1.0]])
    w = torch.full((2, 2), 0.5)
    # row 0 decides positive: d logit / dw = h; row 1 negative: -h
    torch.testing.assert_close(
        weight_gradient(_linear_decoder, h, w), torch.tensor([[3.0, -1.0], [3.0, -1.0]])
    )
    frac, flipped = erasure_test(
        _linear_decoder,
        h,
        w,
        torch.ones(2, 2, dtype=torch.bool),
        weight_gradient(_linear_decoder, h, w),
    )
    assert flipped.all() and (frac == 0.5).all()


def test_erasure_rejects_a_mismatched_order():
    h, w, m = (
        torch.zeros(2, 3),
        torch.full((2, 3), 1 / 3),
        torch.ones(2, 3, dtype=torch.bool),
    )
    with pytest.raises(ValueError, match="order"):
        erasure_test(_linear_decoder, h, w, m, torch.zeros(2, 2))


# ------------------------------------------------------------- Pruthi et al. (2020)
def test_deception_penalty_is_minus_log_of_the_mass_left_elsewhere():
    w = torch.tensor([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [1.0, 0.0, 0.0]])
    m = torch.tensor([[True, False, True], [False, False, False], [True, False, False]])
    got = deception_penalty(w, m)
    assert got[0].item() == pytest.approx(-math.log(1 - 0.7))
    assert got[1].item() == 0.0  # nothing impermissible: no penalty
    assert math.isfinite(got[2].item()) and got[2] > 10  # all of it: large, finite


def test_deception_penalty_pushes_weight_off_the_impermissible_tokens():
    scores = torch.zeros(1, 4, requires_grad=True)
    m = torch.tensor([[True, False, False, True]])
    deception_penalty(scores.softmax(-1), m).sum().backward()
    g = scores.grad[0]
    assert (g[m[0]] > 0).all() and (g[~m[0]] < 0).all()  # descent lowers them


def test_deceptive_loss_adds_lam_times_the_penalty_to_the_cross_entropy():
    from attnlab.classifiers import AttentionClassifier
    from attnlab.data import rationale_task

    d = rationale_task("focus", "train", n=8, lengths=(5, 9))
    torch.manual_seed(0)
    model = AttentionClassifier(len(d.vocab)).eval()
    logit, w = model(d.ids, d.mask)
    bce = torch.nn.functional.binary_cross_entropy_with_logits(logit, d.labels.float())
    pen = deception_penalty(w, d.rationale).mean()
    assert deceptive_loss(0.0)(model, d, None).item() == pytest.approx(bce.item())
    assert deceptive_loss(2.0)(model, d, None).item() == pytest.approx(
        (bce + 2 * pen).item()
    )


def test_deception_rejects_bad_input():
    with pytest.raises(ValueError, match="both be"):
        deception_penalty(torch.ones(2, 3) / 3, torch.ones(2, 4, dtype=torch.bool))
    with pytest.raises(TypeError, match="boolean"):
        deception_penalty(torch.ones(2, 3) / 3, torch.ones(2, 3))
    with pytest.raises(ValueError, match="lam"):
        deceptive_loss(-1.0)
