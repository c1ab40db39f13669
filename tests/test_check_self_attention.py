"""The chapter 5 checks pass the library's answers, fail wrong ones, and spot stubs."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab
from attnlab.check import CheckFailed


def good_self_attention(X, W_q, W_k, W_v):
    return attnlab.scaled_dot_product_attention(X @ W_q, X @ W_k, X @ W_v)


def good_padded(scores, lengths):
    keep = attnlab.padding_mask(lengths, scores.shape[-1])[:, None, :]
    return attnlab.softmax(scores.masked_fill(~keep, float("-inf")), dim=-1)


def good_tied(X, W):
    return attnlab.scaled_dot_product_attention(X @ W, X @ W, X)[1]


def _unscaled(X, W_q, W_k, W_v):  # forgets the 1/sqrt(d_k)
    P = torch.softmax((X @ W_q) @ (X @ W_k).transpose(-2, -1), dim=-1)
    return P @ (X @ W_v), P


def _scaled_by_model_width(X, W_q, W_k, W_v):  # divides by sqrt(D) instead
    s = (X @ W_q) @ (X @ W_k).transpose(-2, -1) / math.sqrt(X.shape[-1])
    P = torch.softmax(s, dim=-1)
    return P @ (X @ W_v), P


def _naive_exp(X, W_q, W_k, W_v):  # no max subtraction: overflows on large scores
    s = (X @ W_q) @ (X @ W_k).transpose(-2, -1) / math.sqrt(W_k.shape[1])
    e = torch.exp(s)
    P = e / e.sum(-1, keepdim=True)
    return P @ (X @ W_v), P


def _padded_minus_10000(scores, lengths):
    keep = torch.arange(scores.shape[-1]) < lengths[:, None]
    return torch.softmax(scores + (~keep[:, None, :]) * -10000.0, dim=-1)


def _padded_minus_inf_naive(scores, lengths):  # NaN on a fully masked row
    keep = torch.arange(scores.shape[-1]) < lengths[:, None]
    return torch.softmax(scores.masked_fill(~keep[:, None, :], float("-inf")), -1)


def _tied_symmetrised(X, W):  # the wrong belief: tied projections -> symmetric weights
    P = good_tied(X, W)
    return (P + P.transpose(-2, -1)) / 2


def _tied_column_normalised(X, W):
    Q = X @ W
    s = Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[1])
    return torch.softmax(s, dim=-2)


GOOD = [
    (attnlab.check.self_attention, good_self_attention),
    (attnlab.check.padded_attention_weights, good_padded),
    (attnlab.check.tied_attention_weights, good_tied),
]

BAD = [
    (attnlab.check.self_attention, _unscaled),
    (attnlab.check.self_attention, _scaled_by_model_width),
    (attnlab.check.self_attention, _naive_exp),
    (
        attnlab.check.self_attention,
        lambda X, W_q, W_k, W_v: good_self_attention(X, W_q, W_k, W_v)[0],
    ),  # returns only Z
    (attnlab.check.padded_attention_weights, _padded_minus_10000),
    (attnlab.check.padded_attention_weights, _padded_minus_inf_naive),
    (attnlab.check.tied_attention_weights, _tied_symmetrised),
    (attnlab.check.tied_attention_weights, _tied_column_normalised),
]


@pytest.mark.parametrize("check,fn", GOOD, ids=lambda x: getattr(x, "__name__", ""))
def test_check_passes_library(check, fn, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert bool(check(fn)) is True
    assert "✅" in capsys.readouterr().out


@pytest.mark.parametrize("check,fn", BAD, ids=lambda x: getattr(x, "__name__", ""))
def test_check_fails_wrong_answer(check, fn, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    with pytest.raises(CheckFailed):
        check(fn)
    assert "❌" in capsys.readouterr().out


@pytest.mark.parametrize("check", [c for c, _ in GOOD], ids=lambda c: c.__name__)
def test_stub_reports_pending(check, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")

    def stub(*args):
        raise NotImplementedError

    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    assert bool(check(stub)) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_padded_check_catches_minus_10000_with_the_padding_case(capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")
    attnlab.check.padded_attention_weights(_padded_minus_10000)
    assert "20000 higher" in capsys.readouterr().out


def test_tied_reference_has_symmetric_scores_but_not_weights():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(5, 4, generator=g, dtype=torch.float64)
    W = torch.randn(4, 3, generator=g, dtype=torch.float64)
    Q = X @ W
    scores = Q @ Q.T
    torch.testing.assert_close(scores, scores.T)
    P = good_tied(X, W)
    assert (P - P.T).abs().max() > 1e-3
    # detailed balance: P_ij Z_i = P_ji Z_j with Z_i the row partition function
    Z = torch.exp(scores / math.sqrt(3)).sum(-1, keepdim=True)
    torch.testing.assert_close(P * Z, (P * Z).T)


# ------------------------------------------------------------- new chapter 5 checks
def good_jacobian_norm(d_k, scaled, n, generator):
    q = torch.randn(n, d_k, generator=generator)
    k = torch.randn(n, 16, d_k, generator=generator)
    s = torch.einsum("nd,nkd->nk", q, k) / (math.sqrt(d_k) if scaled else 1.0)
    p = torch.softmax(s.double(), -1)
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    return J.flatten(1).norm(dim=-1).mean().item()


def _jacobian_always_scaled(d_k, scaled, n, generator):
    return good_jacobian_norm(d_k, True, n, generator)


def _jacobian_of_diag_only(d_k, scaled, n, generator):  # forgets the -p pᵀ term
    q = torch.randn(n, d_k, generator=generator)
    k = torch.randn(n, 16, d_k, generator=generator)
    s = torch.einsum("nd,nkd->nk", q, k) / (math.sqrt(d_k) if scaled else 1.0)
    return torch.softmax(s, -1).norm(dim=-1).mean().item()


def good_strict(scores, lengths):
    T, S = scores.shape[-2:]
    allowed = torch.ones(T, S, dtype=torch.bool).tril(-1)[None] & (
        torch.arange(S)[None, None, :] < lengths[:, None, None]
    )
    return attnlab.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def _strict_with_diagonal(scores, lengths):  # s <= t: the ordinary causal mask
    T, S = scores.shape[-2:]
    allowed = torch.ones(T, S, dtype=torch.bool).tril()[None] & (
        torch.arange(S)[None, None, :] < lengths[:, None, None]
    )
    return attnlab.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def _strict_nan_rows(scores, lengths):  # textbook softmax: NaN on the empty rows
    T, S = scores.shape[-2:]
    allowed = torch.ones(T, S, dtype=torch.bool).tril(-1)[None] & (
        torch.arange(S)[None, None, :] < lengths[:, None, None]
    )
    return torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)


def good_log_z(X, W):
    Q = X @ W
    return torch.logsumexp(Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[-1]), dim=-1)


def _naive_log_z(X, W):  # overflows for large scores
    Q = X @ W
    return torch.exp(Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[-1])).sum(-1).log()


@pytest.mark.parametrize(
    "check, good, bads",
    [
        (
            attnlab.check.softmax_jacobian_norm,
            good_jacobian_norm,
            [_jacobian_always_scaled, _jacobian_of_diag_only],
        ),
        (
            attnlab.check.strict_causal_padding_weights,
            good_strict,
            [_strict_with_diagonal, _strict_nan_rows],
        ),
        (attnlab.check.tied_log_normalisers, good_log_z, [_naive_log_z]),
    ],
)
def test_new_checks_pass_good_and_fail_bad(check, good, bads, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "1")
    assert check(good)
    for bad in bads:
        with pytest.raises(CheckFailed):
            check(bad)
