"""Chapter 2 checks: pass the library's answer, fail wrong ones, wait for stubs."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed
from attnlab.check.recipe import WIDGET_KEYS


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


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


@pytest.mark.parametrize("wrong", [no_tanh, swapped, transposed, fixed_dims])
def test_additive_fails_wrong_answers(wrong):
    with pytest.raises(CheckFailed, match="❌ additive_score"):
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


@pytest.mark.parametrize(
    "wrong",
    [
        nearest_angle,
        longest_key,
        radians_mixup,
        lambda a, k: float(good_winner(a, k)) + 0.5,
        lambda a, k: torch.tensor([good_winner(a, k)] * 2),
        lambda a, k: True,
        lambda a, k: str(good_winner(a, k)),
    ],
    ids=["nearest", "longest", "radians", "float", "tensor2", "bool", "str"],
)
def test_winner_fails_wrong_answers(wrong):
    with pytest.raises(CheckFailed, match="❌ winning_key"):
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


def test_booster_passes_and_fails(capsys):
    assert attnlab.check.smallest_booster(good_booster)
    with pytest.raises(CheckFailed):
        attnlab.check.smallest_booster(ignores_distractor_count)
    with pytest.raises(CheckFailed):  # a fixed guess
        attnlab.check.smallest_booster(lambda seq, target: 10.0)


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


def test_factor_passes_and_fails(capsys):
    assert attnlab.check.factor_bilinear(good_factor)
    for wrong in (full_size, lambda W: (W.T, W), svd_not_cut):
        with pytest.raises(CheckFailed):
            attnlab.check.factor_bilinear(wrong)


@pytest.mark.parametrize("name", ["smallest_booster", "factor_bilinear"])
def test_new_stubs_are_pending(name, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not getattr(attnlab.check, name)(_stub)
    assert "⏳" in capsys.readouterr().out
