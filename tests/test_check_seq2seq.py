"""Chapter 1 checks: pass the library's answer, fail wrong ones, wait for stubs."""

from __future__ import annotations

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")


def _stub(*args):
    # YOUR CODE HERE
    raise NotImplementedError


# ---------------------------------------------------------------- context_vector
def good_context(s, annotations, lengths, score):
    S = annotations.shape[1]
    mask = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    scores = score(s[:, None, :], annotations)[:, 0]  # (B, S)
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    w = torch.nan_to_num(w)
    return (w[:, :, None] * annotations).sum(1), w


def no_mask(s, annotations, lengths, score):
    w = torch.softmax(score(s[:, None, :], annotations)[:, 0], dim=-1)
    return (w[:, :, None] * annotations).sum(1), w


def nan_on_empty(s, annotations, lengths, score):
    S = annotations.shape[1]
    mask = torch.arange(S)[None, :] < lengths[:, None]
    scores = score(s[:, None, :], annotations)[:, 0]
    w = torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=-1)
    return (w[:, :, None] * annotations).sum(1), w


def naive_softmax(s, annotations, lengths, score):
    S = annotations.shape[1]
    mask = torch.arange(S)[None, :] < lengths[:, None]
    e = torch.exp(score(s[:, None, :], annotations)[:, 0]) * mask
    w = torch.nan_to_num(e / e.sum(-1, keepdim=True))
    return (w[:, :, None] * annotations).sum(1), w


def test_context_passes_solution(capsys):
    assert attnlab.check.context_vector(good_context)
    assert capsys.readouterr().out.startswith("✅ context_vector")


@pytest.mark.parametrize("wrong", [no_mask, nan_on_empty, naive_softmax])
def test_context_fails_wrong(wrong):
    with pytest.raises(CheckFailed, match="context_vector"):
        attnlab.check.context_vector(wrong)


# ---------------------------------------------------------------- exact_match_rate
def good_em(pred, gold, eos_id):
    def cut(row):
        row = row.tolist()
        return row[: row.index(eos_id) + 1] if eos_id in row else row

    return sum(cut(p) == cut(g) for p, g in zip(pred, gold)) / len(pred)


def no_cut(pred, gold, eos_id):  # compares padding and junk too
    T = min(pred.shape[1], gold.shape[1])
    return (pred[:, :T] == gold[:, :T]).all(1).float().mean().item()


def prefix_ok(pred, gold, eos_id):  # accepts a prediction that stops too early
    def cut(row):
        row = row.tolist()
        return row[: row.index(eos_id)] if eos_id in row else row

    return sum(cut(g)[: len(cut(p))] == cut(p) for p, g in zip(pred, gold)) / len(pred)


def token_accuracy(pred, gold, eos_id):
    T = min(pred.shape[1], gold.shape[1])
    return (pred[:, :T] == gold[:, :T]).float().mean().item()


def test_em_passes_solution_and_library(capsys):
    assert attnlab.check.exact_match_rate(good_em)
    lib = lambda p, g, e: attnlab.train.exact_match(p, g, e).float().mean().item()  # noqa: E731
    assert attnlab.check.exact_match_rate(lib)
    assert capsys.readouterr().out.count("✅") == 2


@pytest.mark.parametrize("wrong", [no_cut, prefix_ok, token_accuracy])
def test_em_fails_wrong(wrong):
    with pytest.raises(CheckFailed, match="exact_match_rate"):
        attnlab.check.exact_match_rate(wrong)


# ---------------------------------------------------------------- reversal_alignment
def good_alignment(lengths, S):
    i = torch.arange(S)[:, None]
    j = torch.arange(S)[None, :]
    n = lengths[:, None, None]
    return ((i + j == n - 1) & (j < n)).float()


def diagonal(lengths, S):  # copy, not reversal
    n = lengths[:, None, None]
    eye = torch.eye(S)[None]
    return eye * (torch.arange(S)[None, None, :] < n)


def flipped_full(lengths, S):  # anti-diagonal of the padded S x S: ignores lengths
    return torch.eye(S).flip(1)[None].expand(len(lengths), S, S).clone()


def test_alignment_passes_solution_and_library(capsys):
    assert attnlab.check.reversal_alignment(good_alignment)
    assert attnlab.check.reversal_alignment(attnlab.data.ReversalTask.alignment)
    assert capsys.readouterr().out.count("✅") == 2


@pytest.mark.parametrize("wrong", [diagonal, flipped_full])
def test_alignment_fails_wrong(wrong):
    with pytest.raises(CheckFailed, match="reversal_alignment"):
        attnlab.check.reversal_alignment(wrong)


@pytest.mark.parametrize(
    "name", ["context_vector", "exact_match_rate", "reversal_alignment"]
)
def test_stub_is_pending(name, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    res = getattr(attnlab.check, name)(_stub)
    out = capsys.readouterr().out
    assert "⏳" in out and "not implemented yet" in out and not res
