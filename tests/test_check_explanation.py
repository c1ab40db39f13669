"""Chapter 11 checks pass a good answer written independently of the check's
reference and fail realistic wrong ones."""

from __future__ import annotations

import pytest
import torch

import attnlab


# ------------------------------------------------------------- integrated gradients
def ig_good(f, e, steps):  # vectorised over the path (the check's reference loops)
    a = (torch.arange(steps, dtype=e.dtype) + 0.5) / steps  # (steps,)
    x = (a[:, None, None, None] * e).detach().requires_grad_(True)  # (steps, B, T, E)
    (g,) = torch.autograd.grad(f(x.flatten(0, 1)).sum(), x)
    return (e * g.mean(0)).sum(-1)


def ig_left_riemann(f, e, steps):  # alpha = i / steps: misses the end of the path
    a = torch.arange(steps, dtype=e.dtype) / steps
    x = (a[:, None, None, None] * e).detach().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x.flatten(0, 1)).sum(), x)
    return (e * g.mean(0)).sum(-1)


def ig_abs(f, e, steps):  # the sign thrown away
    return ig_good(f, e, steps).abs()


def ig_gradient_only(f, e, steps):  # plain gradient x input at x
    x = e.detach().requires_grad_(True)
    (g,) = torch.autograd.grad(f(x).sum(), x)
    return (g * e).sum(-1)


def test_integrated_gradients(check_separates):
    check_separates(
        attnlab.check.integrated_gradients,
        ig_good,
        [ig_left_riemann, ig_abs, ig_gradient_only],
    )


# ------------------------------------------------------------------ uniform flip rate
def flip_good(decode, h, weights, mask):
    n = mask.sum(1, keepdim=True)
    u = torch.where(mask, 1.0 / n, 0.0)
    before = decode(h, weights) > 0
    return ((decode(h, u) > 0) != before).float().mean().item()


def flip_all_positions(decode, h, weights, mask):  # uniform over padding too
    u = torch.full_like(weights, 1.0 / weights.shape[1])
    return ((decode(h, u) > 0) != (decode(h, weights) > 0)).float().mean().item()


def flip_count(decode, h, weights, mask):  # a count, not a fraction
    u = mask / mask.sum(1, keepdim=True)
    return ((decode(h, u) > 0) != (decode(h, weights) > 0)).sum().item()


def flip_agree(decode, h, weights, mask):  # the fraction that did NOT change
    return 1.0 - flip_good(decode, h, weights, mask)


def test_uniform_flip_rate(check_separates):
    check_separates(
        attnlab.check.uniform_flip_rate,
        flip_good,
        [flip_all_positions, flip_count, flip_agree],
    )


# ------------------------------------------------------------------ comprehensiveness
def comp_good(f, ids, mask, scores, k):
    B, T = ids.shape
    s = scores.masked_fill(~mask, float("-inf"))
    top = s.topk(min(k, T), dim=1).indices  # (B, k)
    drop = torch.zeros_like(mask).scatter(1, top, True) & mask
    keep = mask & ~drop
    rows = [ids[b][keep[b]] for b in range(B)]
    x = torch.zeros_like(ids)
    m = torch.zeros_like(mask)
    for b, r in enumerate(rows):
        x[b, : len(r)] = r
        m[b, : len(r)] = True
    return f(ids, mask) - f(x, m)


def comp_replace(f, ids, mask, scores, k):  # blanks the tokens out instead of deleting
    top = scores.masked_fill(~mask, float("-inf")).topk(k, dim=1).indices
    drop = torch.zeros_like(mask).scatter(1, top, True)
    return f(ids, mask) - f(ids.masked_fill(drop, 0), mask)


def comp_pads_count(f, ids, mask, scores, k):  # padding may be among the top k
    B, T = ids.shape
    top = scores.topk(k, dim=1).indices
    keep = mask & ~torch.zeros_like(mask).scatter(1, top, True)
    x = torch.zeros_like(ids)
    m = torch.zeros_like(mask)
    for b in range(B):
        r = ids[b][keep[b]]
        x[b, : len(r)] = r
        m[b, : len(r)] = True
    return f(ids, mask) - f(x, m)


def comp_bottom(f, ids, mask, scores, k):  # the lowest scores instead of the highest
    return comp_good(f, ids, mask, -scores, k)


def test_comprehensiveness(check_separates):
    check_separates(
        attnlab.check.comprehensiveness,
        comp_good,
        [comp_replace, comp_pads_count, comp_bottom],
    )


def test_stubs_are_pending(monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*args):
        raise NotImplementedError

    for check in (
        attnlab.check.integrated_gradients,
        attnlab.check.uniform_flip_rate,
        attnlab.check.comprehensiveness,
    ):
        assert not check(stub)
        assert "⏳" in capsys.readouterr().out


# ------------------------------------------------ hints name the bug; forbidden calls


def ig_with_library(f, e, steps):  # gradient x input from the library, not IG
    from attnlab.explain import gradient_importance

    return gradient_importance(f, e, torch.ones(e.shape[:2], dtype=torch.bool))


def comp_with_library(f, ids, mask, scores, k):  # leave-one-out of the top token
    from attnlab.explain import leave_one_out

    loo = leave_one_out(f, ids, mask)
    return loo.gather(1, scores.masked_fill(~mask, -1e9).argmax(1, keepdim=True))[:, 0]


@pytest.mark.parametrize(
    "check, bad, words",
    [
        ("integrated_gradients", ig_left_riemann, ["midpoint", "i / steps"]),
        ("integrated_gradients", ig_abs, ["keep the sign"]),
        ("integrated_gradients", ig_gradient_only, ["not the gradient at x alone"]),
        ("integrated_gradients", ig_with_library, ["called attnlab.explain"]),
        ("uniform_flip_rate", flip_all_positions, ["real tokens only"]),
        ("uniform_flip_rate", flip_count, ["not a count"]),
        ("uniform_flip_rate", flip_agree, ["not the fraction that stays"]),
        ("comprehensiveness", comp_replace, ["do not replace"]),
        ("comprehensiveness", comp_pads_count, ["padding never counts"]),
        ("comprehensiveness", comp_bottom, ["highest-scoring"]),
        ("comprehensiveness", comp_with_library, ["called attnlab.explain"]),
    ],
)
def test_wrong_answers_get_a_hint_naming_the_bug(check, bad, words, monkeypatch):
    from attnlab.check import CheckFailed

    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed) as err:
        getattr(attnlab.check, check)(bad)
    assert any(w in str(err.value) for w in words), str(err.value)


def test_forbidden_lists_are_published_for_every_check():
    from attnlab.course.ch11_explanation import check as explanation

    assert set(explanation.FORBIDDEN) == {
        "integrated_gradients", "uniform_flip_rate", "comprehensiveness"
    }  # fmt: skip
    assert "attnlab.explain.leave_one_out" in explanation.FORBIDDEN["comprehensiveness"]
