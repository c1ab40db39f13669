"""Chapter 2 checks: pass the library's answer, fail wrong ones, wait for stubs."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed
from attnlab.course.ch02_recipe.check import WIDGET_KEYS

pytestmark = pytest.mark.usefixtures("strict_checks")


def _stub(*args):
    # YOUR CODE HERE
    raise NotImplementedError


# ---------------------------------------------------------------- additive_score
def good_additive(q, k, W1, W2, v):
    hidden = (k @ W1.T).unsqueeze(-3) + (q @ W2.T).unsqueeze(-2)  # (..., T, S, Dh)
    return torch.tanh(hidden) @ v  # (..., T, S)


def no_tanh(q, k, W1, W2, v):
    return ((k @ W1.T).unsqueeze(-3) + (q @ W2.T).unsqueeze(-2)) @ v


def swapped(q, k, W1, W2, v):  # W1 on the queries: wrong when Dq != Dk
    return torch.tanh((q @ W1.T).unsqueeze(-2) + (k @ W2.T).unsqueeze(-3)) @ v


def transposed(q, k, W1, W2, v):  # (S, T) instead of (T, S)
    return good_additive(q, k, W1, W2, v).transpose(-2, -1)


def fixed_dims(q, k, W1, W2, v):  # only right without batch dimensions
    return torch.tanh((k @ W1.T)[None] + (q @ W2.T)[:, None]) @ v


def test_additive_passes_solution(capsys):
    assert attnlab.check.additive_score(good_additive)
    assert capsys.readouterr().out.startswith("✅ additive_score")


def library_scorer(q, k, W1, W2, v):  # the exercise's own answer, from the library
    scorer = attnlab.scoring.AdditiveScore(W2.shape[1], W1.shape[1], W1.shape[0])
    with torch.no_grad():
        scorer.W1.weight.copy_(W1)
        scorer.W2.weight.copy_(W2)
        scorer.v.weight.copy_(v[None])
        return scorer(q, k)


def no_v(q, k, W1, W2, v):  # sums the hidden units instead of weighting them
    return torch.tanh((k @ W1.T).unsqueeze(-3) + (q @ W2.T).unsqueeze(-2)).sum(-1)


def v_inside(q, k, W1, W2, v):  # v applied inside the tanh
    return torch.tanh(((k @ W1.T).unsqueeze(-3) + (q @ W2.T).unsqueeze(-2)) @ v)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (v_inside, "v weighs the tanh's outputs"),
        (no_tanh, "apply tanh"),
        (swapped, "W1 acts on the keys"),
        (transposed, "you returned \\(S, T\\)"),
        (fixed_dims, "keep the leading batch dimensions"),
        (no_v, "weight the Dh hidden units with v"),
        (library_scorer, "called attnlab.scoring.AdditiveScore"),
        (lambda q, k, W1, W2, v: torch.zeros(q.shape[:-1] + k.shape[-2:-1]), "depend"),
    ],
    ids=[
        "v-inside",
        "no-tanh",
        "swapped",
        "transposed",
        "fixed-dims",
        "no-v",
        "library",
        "const",
    ],
)
def test_additive_names_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.additive_score(wrong)


# ---------------------------------------------------------------- winning_key
def good_winner(angle, keys):
    rad = math.radians(angle)
    direction = torch.tensor([math.cos(rad), math.sin(rad)], dtype=keys.dtype)
    return int((keys @ direction).argmax())


def nearest_angle(angle, keys):
    rad = math.radians(angle)
    direction = torch.tensor([math.cos(rad), math.sin(rad)], dtype=keys.dtype)
    return int((keys @ direction / keys.norm(dim=-1)).argmax())


def longest_key(angle, keys):
    return int(keys.norm(dim=-1).argmax())


def radians_mixup(angle, keys):  # treats degrees as radians
    direction = torch.tensor([math.cos(angle), math.sin(angle)], dtype=keys.dtype)
    return int((keys @ direction).argmax())


def test_winner_passes_solution_and_accepts_tensor_index(capsys):
    assert attnlab.check.winning_key(good_winner)
    assert attnlab.check.winning_key(lambda a, k: torch.tensor(good_winner(a, k)))
    assert capsys.readouterr().out.count("✅ winning_key") == 2


def by_softmax(angle, keys):  # the exercise says: without calling softmax
    rad = math.radians(angle)
    q = 1e4 * torch.tensor([[math.cos(rad), math.sin(rad)]], dtype=keys.dtype)
    _, w = attnlab.attend(q, keys, keys)
    return int(w[0].argmax())


def _long_query_scores(angle, keys):
    rad = math.radians(angle)
    q = 1e4 * torch.tensor([math.cos(rad), math.sin(rad)], dtype=keys.dtype)
    return keys @ q  # (S,)


@pytest.mark.parametrize(
    "wrong, name",
    [
        (
            lambda a, k: int(torch.softmax(_long_query_scores(a, k), -1).argmax()),
            "torch.softmax",
        ),  # fmt: skip
        (
            lambda a, k: int(_long_query_scores(a, k).softmax(-1).argmax()),
            "torch.Tensor.softmax",
        ),  # fmt: skip
        (
            lambda a, k: int(
                torch.nn.functional.softmax(_long_query_scores(a, k), -1).argmax()
            ),
            "torch.nn.functional.softmax",
        ),  # fmt: skip
        (
            lambda a, k: int(torch.nn.Softmax(-1)(_long_query_scores(a, k)).argmax()),
            "torch.nn.Softmax",
        ),  # fmt: skip
        (
            lambda a, k: int(
                torch.special.softmax(_long_query_scores(a, k), -1).argmax()
            ),
            "torch.special.softmax",
        ),  # fmt: skip
    ],
    ids=["torch.softmax", "Tensor.softmax", "F.softmax", "nn.Softmax", "special"],
)
def test_winner_rejects_torch_softmax(wrong, name):
    """ "Without calling softmax" means PyTorch's too: every spelling is caught, and the
    method is restored afterwards."""
    original = torch.Tensor.softmax
    with pytest.raises(CheckFailed, match=f"called {name},"):
        attnlab.check.winning_key(wrong)
    assert torch.Tensor.softmax is original and "softmax" not in vars(torch.Tensor)
    assert torch.softmax(torch.zeros(2), 0).tolist() == [0.5, 0.5]


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (nearest_angle, "closest in angle"),
        (longest_key, "the longest key does not always win"),
        (radians_mixup, "the angle is in degrees"),
        (by_softmax, "called attnlab.attention.attend"),
        (lambda a, k: float(good_winner(a, k)) + 0.5, "as an int"),
        (lambda a, k: torch.tensor([good_winner(a, k)] * 2), "return one index"),
        (lambda a, k: True, "as an int"),
        (lambda a, k: str(good_winner(a, k)), "as an int"),
        (lambda a, k: 0, "❌ winning_key"),
    ],
    ids=[
        "nearest",
        "longest",
        "radians",
        "attend",
        "float",
        "tensor2",
        "bool",
        "str",
        "0",
    ],
)
def test_winner_names_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.winning_key(wrong)


def test_widget_keys_make_angle_and_projection_disagree():
    # the check is only useful if "nearest in angle" is wrong somewhere
    angles = [10.0, 90.0, 100.0]
    assert any(
        nearest_angle(a, WIDGET_KEYS) != good_winner(a, WIDGET_KEYS) for a in angles
    )


# ---------------------------------------------------------------- all three
@pytest.mark.parametrize("name", ["additive_score", "winning_key"])
def test_stub_is_pending_not_failed(name, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    result = getattr(attnlab.check, name)(_stub)
    assert not result
    assert capsys.readouterr().out == f"⏳ {name}: not implemented yet\n"


# ---------------------------------------------------------------- smallest_booster
def good_booster(seq, target):
    import math

    if "B" not in seq:
        return math.inf
    nA, nB, nC = seq.count("A"), seq.count("B"), seq.count("C")

    def w(c):
        return nB / (nB + nA * math.exp(-c) + nC * math.exp(-0.8 * c))

    if w(0) >= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while w(hi) < target:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if w(mid) < target else (lo, mid)
    return hi


def ignores_distractor_count(seq, target):  # solves for A B C B whatever seq is
    return good_booster("ABCB", target) if "B" in seq else float("inf")


def one_b_only(seq, target):  # the weight of a single B, though there may be two
    import math

    if "B" not in seq:
        return math.inf
    nA, nC = seq.count("A"), seq.count("C")

    def w(c):
        return 1 / (1 + nA * math.exp(-c) + nC * math.exp(-0.8 * c))

    lo, hi = 0.0, 1.0
    while w(hi) < target:
        hi *= 2
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if w(mid) < target else (lo, mid)
    return hi


def test_booster_passes(capsys):
    assert attnlab.check.smallest_booster(good_booster)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (ignores_distractor_count, "more distractors need a larger c"),
        (one_b_only, "sum the weight on all the Bs"),
        (lambda seq, target: target, "return the booster c, not the target weight"),
        (lambda seq, target: 10.0, "❌ smallest_booster"),  # the page's c
        (
            lambda seq, target: good_booster(seq, target) if "B" in seq else 0.0,
            "math.inf",
        ),
    ],
    ids=["abcb", "one-b", "target", "ten", "no-inf"],
)
def test_booster_names_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.smallest_booster(wrong)


# ---------------------------------------------------------------- factor_bilinear
def good_factor(W):
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    r = int((S > S.max() * 1e-10).sum())
    root = S[:r].sqrt()
    return root[:, None] * Vh[:r], root[:, None] * U[:, :r].T


def full_size(W):  # right product, but not the smallest size
    return W, torch.eye(W.shape[0], dtype=W.dtype)


def svd_not_cut(W):  # right product, but keeps every singular value, zeros included
    U, S, Vh = torch.linalg.svd(W, full_matrices=False)
    root = S.sqrt()
    return root[:, None] * Vh, root[:, None] * U.T


def swapped_factors(W):  # W_q and W_k the other way round
    W_q, W_k = good_factor(W)
    return W_k, W_q


def test_factor_passes(capsys):
    assert attnlab.check.factor_bilinear(good_factor)


@pytest.mark.parametrize(
    "wrong, hint",
    [
        (full_size, "the smallest size is rank\\(W\\)"),
        (svd_not_cut, "the smallest size is rank\\(W\\)"),
        (swapped_factors, "you swapped the two"),
        (lambda W: (W.T, W), "❌ factor_bilinear"),
        (lambda W: W, "return a pair"),
    ],
    ids=["full-size", "not-cut", "swapped", "WT-W", "single"],
)
def test_factor_names_the_bug(wrong, hint):
    with pytest.raises(CheckFailed, match=hint):
        attnlab.check.factor_bilinear(wrong)


@pytest.mark.parametrize("name", ["smallest_booster", "factor_bilinear"])
def test_new_stubs_are_pending(name, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not getattr(attnlab.check, name)(_stub)
    assert "⏳" in capsys.readouterr().out
