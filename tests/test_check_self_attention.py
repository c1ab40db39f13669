"""The chapter 5 checks pass the library's answers and fail wrong ones."""

from __future__ import annotations

import math

import pytest
import torch

import attnlab


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
def test_new_checks_pass_good_and_fail_bad(check, good, bads, check_separates):
    check_separates(check, good, bads)
