"""Checks for chapter 10 (attention in a pretrained Transformer).

* :func:`rollout_sink_curve` — ``fn(attentions, rows, keys) -> (L,)``: for each depth
  l, the mean share of the flagged keys in the rows of the rollout of layers 0..l,
  over the flagged query rows of a padded batch (the cases flag every real token).
* :func:`relation_scores` — ``fn(maps, pairs) -> (L, H)``: the mean weight each head
  gives to a list of (query, key) pairs, pooled over several sentences.
* :func:`rollout_with_residual` — ``fn(attentions, alpha) -> (B, T, T)``: rollout
  with ``A = rownorm(alpha * mean_heads(W) + (1 - alpha) I)``.
"""

from __future__ import annotations

import torch

from ..check_core import Case, close, run_check, seeded

__all__ = [
    "rollout_sink_curve",
    "relation_scores",
    "rollout_with_residual",
]

_ROLLOUT = (
    "attnlab.explain.attention_rollout",
    "attnlab.explain.residual_attention",
    "attnlab.explain.attention_flow",
)
# check name -> the library calls an answer may not make (the grader reads this too)
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "rollout_sink_curve": _ROLLOUT,  # build the product of the layers yourself
    "relation_scores": (
        "attnlab.explain.attention_rollout",
    ),  # one layer, not a rollout
    "rollout_with_residual": _ROLLOUT,
}


def _attentions(L, B, H, T, seed, lengths=None, sharp=1.0):
    """L random (B, H, T, T) maps; example b has ``lengths[b]`` real tokens."""
    g = seeded(seed)
    lengths = [T] * B if lengths is None else lengths
    mask = torch.arange(T)[None, :] < torch.tensor(lengths)[:, None]  # (B, T)
    out = []
    for _ in range(L):
        s = torch.randn(B, H, T, T, generator=g, dtype=torch.float64) * sharp
        s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
        out.append(s.softmax(-1) * mask[:, None, :, None])  # padded rows all zero
    return out, mask


def _rollout(attentions, alpha):
    """Rollout with residual weight ``alpha`` on the attention (0.5 in A&Z)."""
    W = torch.stack([a.double().mean(-3) for a in attentions])  # (L, [B,] T, T)
    eye = torch.eye(W.shape[-1], dtype=W.dtype)
    A = alpha * W + (1 - alpha) * eye
    A = A / A.sum(-1, keepdim=True)
    R = A[0]
    for layer in A[1:]:
        R = layer @ R  # later layers on the left
    return R


def _compare(got, expected):
    return close(got, expected, atol=1e-5, rtol=1e-4)


def rollout_sink_curve(fn):
    """Check ``fn(attentions, mask, keys) -> (L,)`` tensor."""

    def ref(attentions, mask, keys):
        curve = []
        for depth in range(1, len(attentions) + 1):
            R = _rollout(attentions[:depth], 0.5)  # (B, T, T)
            share = (R * keys[:, None, :]).sum(-1)  # (B, T): mass on the keys
            curve.append(share[mask].mean())
        return torch.stack(curve)

    cases = []
    hard = []
    for _ in range(4):  # every head puts all its weight on position 0
        w = torch.zeros(1, 2, 5, 5, dtype=torch.float64)
        w[..., 0] = 1.0
        hard.append(w)
    mask1 = torch.ones(1, 5, dtype=torch.bool)
    keys1 = torch.zeros(1, 5, dtype=torch.bool)
    keys1[0, 0] = True
    cases.append(
        Case(
            "a perfect sink, 4 layers",
            (hard, mask1, keys1),
            ref(hard, mask1, keys1),
            "roll the layers out (each is 0.5 W + 0.5 I, multiplied onto the "
            "ones below): the share grows by half the rest, layer after layer, "
            "and the curve has one entry per depth, not one layer alone",
        )
    )
    att, mask = _attentions(3, 2, 4, 6, seed=1000, lengths=[6, 4])
    keys = torch.zeros(2, 6, dtype=torch.bool)
    keys[:, 0] = True  # position 0, like [CLS]
    cases.append(
        Case(
            "3 layers, padded batch, key 0",
            (att, mask, keys),
            ref(att, mask, keys),
            "average over the real query rows only: a padded row of the "
            "rollout is not a row of the sentence",
        )
    )
    keys2 = keys.clone()
    keys2[0, 5] = keys2[1, 3] = True  # and each example's last real token ([SEP])
    cases.append(
        Case(
            "two keys per example, at different places",
            (att, mask, keys2),
            ref(att, mask, keys2),
            "sum the weight over every flagged key",
        )
    )
    words = mask.clone()  # the word rows: no position 0, no last real token
    words[:, 0] = False
    words[0, 5] = words[1, 3] = False
    cases.append(
        Case(
            "only the word rows flagged (no [CLS], no [SEP])",
            (att, words, keys),
            ref(att, words, keys),
            "average over the flagged rows only: `rows` may leave out real "
            "tokens (the page passes the word rows, without [CLS] and [SEP])",
        )
    )
    one, m1 = _attentions(1, 1, 3, 1, seed=1001)
    k1 = torch.ones(1, 1, dtype=torch.bool)
    cases.append(Case("length 1", (one, m1, k1), ref(one, m1, k1), "one token: 1"))
    return run_check(
        "rollout_sink_curve",
        fn,
        cases,
        compare=_compare,
        forbid=FORBIDDEN["rollout_sink_curve"],
    )


def relation_scores(fn):
    """Check ``fn(maps, pairs) -> (L, H)``: maps are (L, H, T, T), one per sentence."""

    def ref(maps, pairs):
        total = torch.zeros(maps[0].shape[:2], dtype=torch.float64)
        n = 0
        for w, ps in zip(maps, pairs):
            for i, j in ps:
                total += w[:, :, i, j].double()
                n += 1
        return total / n

    g = seeded(1100)

    def maps_of(L, H, T):
        return torch.randn(L, H, T, T, generator=g, dtype=torch.float64).softmax(-1)

    cases = []
    a = maps_of(2, 3, 5)
    a[1, 2] = 0.0
    a[1, 2, torch.arange(4), torch.arange(1, 5)] = 1.0  # head (1, 2): the next token
    a[1, 2, 4, 4] = 1.0
    p = [[(0, 1), (1, 2), (3, 4)]]
    cases.append(
        Case(
            "one sentence, a planted next-token head",
            ([a], p),
            ref([a], p),
            "weights[layer, head, query, key]: the row is the query",
        )
    )
    b, c = maps_of(2, 3, 7), maps_of(2, 3, 4)
    p2 = [[(2, 1), (5, 6), (6, 0), (3, 3)], [(1, 3)]]
    cases.append(
        Case(
            "two sentences of different lengths, 4 + 1 pairs",
            ([b, c], p2),
            ref([b, c], p2),
            "pool the pairs: every pair counts once, whatever its sentence",
        )
    )
    p3 = [[], [(0, 2)], [(1, 1), (2, 0)]]
    d = maps_of(1, 2, 3)
    cases.append(
        Case(
            "a sentence with no pair",
            ([b[:1, :2], d, d], p3),
            ref([b[:1, :2], d, d], p3),
            "skip sentences without pairs (no 0/0)",
        )
    )
    return run_check(
        "relation_scores",
        fn,
        cases,
        compare=_compare,
        forbid=FORBIDDEN["relation_scores"],
    )


def rollout_with_residual(fn):
    """Check ``fn(attentions, alpha) -> (B, T, T)`` (or (T, T) for (H, T, T) maps)."""
    cases = []
    att, _ = _attentions(3, 2, 4, 5, seed=1200)
    for alpha, hint in [
        (
            0.5,
            "later layers multiply on the left: A_3 @ A_2 @ A_1 (alpha = 0.5 is "
            "A&Z's rollout)",
        ),
        (
            0.9,
            "A_l = rownorm(alpha * mean over heads + (1 - alpha) I); later layers "
            "multiply on the left: A_3 @ A_2 @ A_1",
        ),
        (1.0, "alpha = 1: the plain product of the head-averaged maps"),
        (0.0, "alpha = 0: nothing moves, the identity"),
    ]:
        cases.append(
            Case(f"3 layers, alpha={alpha}", (att, alpha), _rollout(att, alpha), hint)
        )
    pad, _ = _attentions(2, 1, 2, 4, seed=1201, lengths=[2])
    cases.append(
        Case(
            "padded rows (all zero), alpha=0.3",
            (pad, 0.3),
            _rollout(pad, 0.3),
            "renormalise each row after adding the identity: an all-zero "
            "row becomes the identity row",
        )
    )
    one = [a[0] for a in _attentions(1, 1, 3, 4, seed=1202, sharp=30.0)[0]]
    cases.append(
        Case(
            "one layer, no batch axis, sharp heads",
            (one, 0.7),
            _rollout(one, 0.7),
            "heads are axis -3",
        )
    )
    return run_check(
        "rollout_with_residual",
        fn,
        cases,
        compare=_compare,
        forbid=FORBIDDEN["rollout_with_residual"],
    )
