"""Chapter 10 checks pass good answers written with loops, and fail realistic wrong ones."""

from __future__ import annotations

import pytest
import torch

import attnlab


# ------------------------------------------------------------- good answers (loops)
def _layer(a, alpha):
    """rownorm(alpha * mean_heads(a) + (1 - alpha) I), one matrix (T, T)."""
    T = a.shape[-1]
    m = sum(a[h] for h in range(a.shape[0])) / a.shape[0]  # (T, T)
    A = alpha * m + (1 - alpha) * torch.eye(T, dtype=m.dtype)
    return A / A.sum(-1, keepdim=True)


def _loop_rollout(attentions, alpha, later_on_left=True):
    """Rollout by loops; ``later_on_left=False`` multiplies in the wrong order."""
    batched = attentions[0].dim() == 4
    att = attentions if batched else [a[None] for a in attentions]
    out = []
    for b in range(att[0].shape[0]):
        R = _layer(att[0][b].double(), alpha)
        for a in att[1:]:
            A = _layer(a[b].double(), alpha)
            R = A @ R if later_on_left else R @ A
        out.append(R)
    out = torch.stack(out)
    return out if batched else out[0]


def good_rollout(attentions, alpha):
    return _loop_rollout(attentions, alpha)


def good_curve(attentions, mask, keys):
    curve = []
    for depth in range(1, len(attentions) + 1):
        R = good_rollout(attentions[:depth], 0.5)  # (B, T, T)
        shares = [
            R[b, i, keys[b]].sum()
            for b in range(R.shape[0])
            for i in range(R.shape[1])
            if mask[b, i]
        ]
        curve.append(torch.stack(shares).mean())
    return torch.stack(curve)


def good_relation(maps, pairs):
    got = [w[:, :, i, j] for w, ps in zip(maps, pairs) for i, j in ps]
    return torch.stack(got).mean(0)


# ------------------------------------------------------------- wrong answers
def curve_counts_padding(attentions, mask, keys):
    return torch.stack(
        [
            (good_rollout(attentions[:d], 0.5) * keys[:, None, :]).sum(-1).mean()
            for d in range(1, len(attentions) + 1)
        ]
    )


def curve_raw_attention(attentions, mask, keys):  # no rollout: each layer alone
    return torch.stack(
        [(a.mean(1) * keys[:, None, :]).sum(-1)[mask].mean() for a in attentions]
    )


def curve_every_real_row(attentions, rows, keys):  # ignores rows: every real token
    real = attentions[0].sum((1, 3)) > 0  # (B, T): padded rows are all zero
    return good_curve(attentions, real, keys)


def curve_last_only(attentions, mask, keys):
    return good_curve(attentions, mask, keys)[-1:]


def relation_per_sentence(maps, pairs):
    means = [
        torch.stack([w[:, :, i, j] for i, j in ps]).mean(0)
        for w, ps in zip(maps, pairs)
        if ps
    ]
    return torch.stack(means).mean(0)


def relation_transposed(maps, pairs):
    return good_relation(maps, [[(j, i) for i, j in ps] for ps in pairs])


def relation_crashes_on_empty(maps, pairs):
    return torch.stack(
        [
            torch.stack([w[:, :, i, j] for i, j in ps]).mean(0) * len(ps)
            for w, ps in zip(maps, pairs)
        ]
    ).sum(0) / sum(len(ps) for ps in pairs)


def rollout_wrong_order(attentions, alpha):
    return _loop_rollout(attentions, alpha, later_on_left=False)


def rollout_no_renorm(attentions, alpha):
    W = torch.stack([a.double().mean(-3) for a in attentions])
    A = alpha * W + (1 - alpha) * torch.eye(W.shape[-1], dtype=W.dtype)
    R = A[0]
    for layer in A[1:]:
        R = layer @ R
    return R


def rollout_fixed_half(attentions, alpha):
    return attnlab.explain.attention_rollout(attentions).double()


def stub(*args):
    raise NotImplementedError


def test_rollout_sink_curve(check_separates):
    check_separates(
        attnlab.check.rollout_sink_curve,
        good_curve,
        [
            curve_counts_padding,
            curve_raw_attention,
            curve_every_real_row,
            curve_last_only,
            stub,
        ],
    )


def test_relation_scores(check_separates):
    check_separates(
        attnlab.check.relation_scores,
        good_relation,
        [relation_per_sentence, relation_transposed, relation_crashes_on_empty, stub],
    )


def test_rollout_with_residual(check_separates):
    check_separates(
        attnlab.check.rollout_with_residual,
        good_rollout,
        [rollout_wrong_order, rollout_no_renorm, rollout_fixed_half, stub],
    )


def test_half_residual_is_the_library_rollout():
    g = torch.Generator().manual_seed(0)
    att = [torch.randn(2, 3, 4, 4, generator=g).softmax(-1) for _ in range(3)]
    torch.testing.assert_close(
        good_rollout(att, 0.5).float(), attnlab.explain.attention_rollout(att)
    )


# ------------------------------------------------ hints name the bug; forbidden calls
def _fails_with(check, bad, words, monkeypatch):
    from attnlab.check import CheckFailed

    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed) as err:
        check(bad)
    assert any(w in str(err.value) for w in words), str(err.value)


def curve_with_library(attentions, mask, keys):  # the library's rollout in a loop
    from attnlab.explain import attention_rollout

    return torch.stack(
        [
            (attention_rollout(attentions[:d], mask) * keys[:, None, :])
            .sum(-1)[mask]
            .mean()
            for d in range(1, len(attentions) + 1)
        ]
    )


def rollout_with_library(attentions, alpha):  # ignores alpha: A&Z's fixed 1/2
    from attnlab.explain import attention_rollout

    return attention_rollout(attentions)


@pytest.mark.parametrize(
    "check, bad, words",
    [
        ("rollout_sink_curve", curve_counts_padding, ["real query rows"]),
        ("rollout_sink_curve", curve_raw_attention, ["roll the layers out"]),
        ("rollout_sink_curve", curve_every_real_row, ["flagged rows only"]),
        ("rollout_sink_curve", curve_last_only, ["one entry per depth"]),
        ("rollout_sink_curve", curve_with_library, ["called attnlab.explain"]),
        ("relation_scores", relation_per_sentence, ["every pair counts once"]),
        ("relation_scores", relation_transposed, ["the row is the query"]),
        ("relation_scores", relation_crashes_on_empty, ["without pairs"]),
        ("rollout_with_residual", rollout_wrong_order, ["multiply on the left"]),
        ("rollout_with_residual", rollout_no_renorm, ["renormalise"]),
        ("rollout_with_residual", rollout_with_library, ["called attnlab.explain"]),
    ],
)
def test_wrong_answers_get_a_hint_naming_the_bug(check, bad, words, monkeypatch):
    _fails_with(getattr(attnlab.check, check), bad, words, monkeypatch)


def test_forbidden_lists_are_published_for_every_check():
    from attnlab.course.ch10_pretrained import check as pretrained

    assert set(pretrained.FORBIDDEN) == {
        "rollout_sink_curve", "relation_scores", "rollout_with_residual"
    }  # fmt: skip
    assert (
        "attnlab.explain.attention_rollout"
        in pretrained.FORBIDDEN["rollout_with_residual"]
    )
