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


# ---------------------------------------------------------------- greedy_decode
def good_greedy(model, src, src_lengths, max_len):
    from attnlab.data import Vocab

    ann, summary, mask = model.encode(src, src_lengths)
    s = model.decoder.start(summary)
    y = torch.full((src.shape[0],), Vocab.bos_id)
    done = torch.zeros(src.shape[0], dtype=torch.bool)
    out = []
    for _ in range(max_len):
        logits, s, _ = model.decoder.step(y, s, ann, mask, summary)
        y = logits.argmax(-1).masked_fill(done, Vocab.pad_id)
        out.append(y)
        done = done | (y == Vocab.eos_id)
        if done.all():
            break
    return torch.stack(out, dim=1)


def never_stops(model, src, src_lengths, max_len):  # always max_len columns
    ids = model.greedy(src, src_lengths, max_len)[0]
    pad = torch.zeros(ids.shape[0], max_len - ids.shape[1], dtype=ids.dtype)
    return torch.cat([ids, pad], dim=1)


def no_pad_after_eos(model, src, src_lengths, max_len):  # keeps writing after <eos>
    from attnlab.data import Vocab

    ann, summary, mask = model.encode(src, src_lengths)
    s = model.decoder.start(summary)
    y = torch.full((src.shape[0],), Vocab.bos_id)
    out, done = [], torch.zeros(src.shape[0], dtype=torch.bool)
    for _ in range(max_len):
        logits, s, _ = model.decoder.step(y, s, ann, mask, summary)
        y = logits.argmax(-1)
        out.append(y)
        done = done | (y == Vocab.eos_id)
        if done.all():
            break
    return torch.stack(out, dim=1)


def test_greedy_passes_solution_and_library(capsys):
    assert attnlab.check.greedy_decode(good_greedy)
    assert attnlab.check.greedy_decode(lambda m, s, n, T: m.greedy(s, n, T)[0])
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [never_stops, no_pad_after_eos])
def test_greedy_fails_wrong(wrong):
    with pytest.raises(CheckFailed):
        attnlab.check.greedy_decode(wrong)


def test_greedy_cases_end_rows_at_different_steps():
    from attnlab.check.seq2seq import _greedy_case

    ids = _greedy_case("x", "dot", "luong", 4, 0.5, [3, 4, 2, 4, 1, 3], 8).expected
    ended = (ids == 2).any(1)  # eos id 2
    assert ended.all() and (ids == 0).any(), ids  # some rows padded after <eos>


# ---------------------------------------------------------------- per_position_accuracy
def good_positions(pred, gold, pad_id):
    T = gold.shape[1]
    p = torch.full_like(gold, pad_id)
    n = min(T, pred.shape[1])
    p[:, :n] = pred[:, :n]
    return (p == gold).float().mean(0)


def whole_row(pred, gold, pad_id):  # exact match per row, not per position
    return (
        (pred[:, : gold.shape[1]] == gold).all(1).float().mean().expand(gold.shape[1])
    )


def test_positions_pass_and_fail(capsys):
    assert attnlab.check.per_position_accuracy(good_positions)
    with pytest.raises(CheckFailed):
        attnlab.check.per_position_accuracy(whole_row)


# ---------------------------------------------------------------- sorting_alignment
def good_sorting(src, lengths):
    B, S = src.shape
    real = torch.arange(S)[None] < lengths[:, None]
    order = src.float().masked_fill(~real, float("inf")).argsort(-1)
    out = torch.zeros(B, S, S)
    out[torch.arange(B)[:, None], torch.arange(S)[None].expand(B, S), order] = 1.0
    return out * real[:, :, None]


def sorts_padding_too(src, lengths):  # padding id 0 sorts first
    B, S = src.shape
    order = src.argsort(-1)
    out = torch.zeros(B, S, S)
    out[torch.arange(B)[:, None], torch.arange(S)[None].expand(B, S), order] = 1.0
    return out


def test_sorting_passes_and_fails(capsys):
    assert attnlab.check.sorting_alignment(good_sorting)
    with pytest.raises(CheckFailed):
        attnlab.check.sorting_alignment(sorts_padding_too)
    with pytest.raises(CheckFailed):  # reversal is not sorting
        attnlab.check.sorting_alignment(
            lambda src, n: attnlab.data.ReversalTask.alignment(n, src.shape[1])
        )


@pytest.mark.parametrize(
    "name", ["greedy_decode", "per_position_accuracy", "sorting_alignment"]
)
def test_new_stubs_are_pending(name, monkeypatch, capsys):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert not getattr(attnlab.check, name)(_stub)
    assert "⏳" in capsys.readouterr().out
