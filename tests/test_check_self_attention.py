"""The chapter 5 checks pass the chapter's answers, and fail the wrong answers students
write with a hint that names the bug."""

from __future__ import annotations

import math

import pytest
import torch
from checkhelp import fails_with

import attnlab

pytestmark = pytest.mark.usefixtures("strict_checks")


# ------------------------------------------------------------ softmax_jacobian_norm
def _scores(d_k, scaled, n, generator):
    q = torch.randn(n, 1, d_k, generator=generator)  # (n, 1, d_k)
    k = torch.randn(n, 16, d_k, generator=generator)  # (n, 16, d_k)
    s = (q @ k.transpose(-2, -1)).squeeze(1)  # (n, 16)
    return s / math.sqrt(d_k) if scaled else s


def _frob(p):  # (n, 16) rows on the simplex -> mean ‖diag(p) - p pᵀ‖_F
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    return J.flatten(1).norm(dim=-1).mean().item()


def good_jacobian_norm(d_k, scaled, n, generator):  # the chapter's solution
    return _frob(torch.softmax(_scores(d_k, scaled, n, generator), dim=-1))


def jacobian_diag_only(d_k, scaled, n, generator):  # "softmax' = p(1 - p)"
    p = torch.softmax(_scores(d_k, scaled, n, generator), dim=-1)
    return (p * (1 - p)).norm(dim=-1).mean().item()


def jacobian_never_scaled(d_k, scaled, n, generator):  # forgets √d_k
    return good_jacobian_norm(d_k, False, n, generator)


def jacobian_always_scaled(d_k, scaled, n, generator):
    return good_jacobian_norm(d_k, True, n, generator)


def jacobian_wrong_dim(d_k, scaled, n, generator):  # softmax over the n rows
    p = torch.softmax(_scores(d_k, scaled, n, generator), dim=0)
    return _frob(p)


def jacobian_constant(d_k, scaled, n, generator):
    return 0.25


def test_jacobian_check():
    assert attnlab.check.softmax_jacobian_norm(good_jacobian_norm)
    check = attnlab.check.softmax_jacobian_norm
    fails_with(check, jacobian_diag_only, r"d_k=1, scaled=False.*off-diagonal")
    fails_with(check, jacobian_never_scaled, r"d_k=16, scaled=True.*√d_k = 4")
    fails_with(check, jacobian_always_scaled, r"d_k=16, scaled=False.*no division")
    fails_with(check, jacobian_wrong_dim, r"d_k=1, scaled=False.*dim=-1")
    fails_with(check, jacobian_constant, r"d_k=1, scaled=False.*Frobenius")


# --------------------------------------------------- strict_causal_padding_weights
def _allowed(scores, lengths, diagonal=-1):
    T, S = scores.shape[-2:]
    earlier = torch.ones(T, S, dtype=torch.bool).tril(diagonal)  # (T, S)
    real = torch.arange(S)[None, :] < lengths[:, None]  # (B, S)
    return earlier[None] & real[:, None, :]  # (B, T, S)


def _stable_softmax(masked):  # rows of -inf -> zeros
    top = masked.amax(dim=-1, keepdim=True)
    e = torch.exp(masked - torch.where(torch.isinf(top), 0.0, top))
    total = e.sum(dim=-1, keepdim=True)
    return e / torch.where(total > 0, total, 1.0)


def good_strict(scores, lengths):  # the chapter's solution
    return _stable_softmax(scores.masked_fill(~_allowed(scores, lengths), -math.inf))


def strict_with_diagonal(scores, lengths):  # s <= t: off by one
    allowed = _allowed(scores, lengths, diagonal=0)
    return _stable_softmax(scores.masked_fill(~allowed, -math.inf))


def strict_transposed(scores, lengths):  # the mask of the keys' side: s > t
    allowed = _allowed(scores, lengths).transpose(-2, -1)
    return _stable_softmax(scores.masked_fill(~allowed, -math.inf))


def strict_nan_rows(scores, lengths):  # textbook softmax: 0/0 on the empty rows
    allowed = _allowed(scores, lengths)
    return torch.softmax(scores.masked_fill(~allowed, -math.inf), dim=-1)


def strict_wrong_dim(scores, lengths):  # normalised over the queries
    allowed = _allowed(scores, lengths)
    w = _stable_softmax(scores.masked_fill(~allowed, -math.inf).transpose(-2, -1))
    return w.transpose(-2, -1)


def strict_finite_mask(scores, lengths):  # BERT's -10000, empty rows zeroed after
    allowed = _allowed(scores, lengths)
    w = torch.softmax(scores + (~allowed) * -10000.0, dim=-1)
    return w * allowed.any(-1, keepdim=True)


def strict_library(scores, lengths):  # the library's softmax does the hard part
    return attnlab.softmax(scores.masked_fill(~_allowed(scores, lengths), -math.inf))


def strict_constant(scores, lengths):
    return torch.zeros_like(scores)


def test_strict_causal_padding_check():
    check = attnlab.check.strict_causal_padding_weights
    assert check(good_strict)
    fails_with(check, strict_with_diagonal, r"lengths \[4, 2\].*diagonal is masked")
    fails_with(check, strict_transposed, r"lengths \[4, 2\].*s < t")
    fails_with(check, strict_nan_rows, r"lengths \[4, 2\].*not NaN")
    fails_with(check, strict_wrong_dim, r"lengths \[4, 2\].*dim=-1")
    fails_with(check, strict_finite_mask, r"20000 higher.*finite mask value")
    fails_with(check, strict_library, r"called attnlab\.mappings\.softmax")
    fails_with(check, strict_constant, r"lengths \[4, 2\].*s < lengths\[b\]")


# ------------------------------------------------------------ tied_log_normalisers
def good_log_z(X, W):  # the chapter's solution
    Q = X @ W
    return torch.logsumexp(Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[-1]), dim=-1)


def log_z_naive(X, W):  # overflows for large scores
    Q = X @ W
    return torch.exp(Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[-1])).sum(-1).log()


def log_z_sqrt_d_model(X, W):  # √D instead of √d_k
    Q = X @ W
    return torch.logsumexp(Q @ Q.transpose(-2, -1) / math.sqrt(X.shape[-1]), dim=-1)


def log_z_no_sqrt(X, W):
    Q = X @ W
    return torch.logsumexp(Q @ Q.transpose(-2, -1), dim=-1)


def log_z_2d_transpose(X, W):  # .T reverses every axis of a batch
    Q = X @ W
    return torch.logsumexp(Q @ Q.T / math.sqrt(W.shape[-1]), dim=-1)


def log_z_constant(X, W):
    return torch.zeros(X.shape[:-1], dtype=X.dtype)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
def test_tied_log_normalisers_check():
    check = attnlab.check.tied_log_normalisers
    assert check(good_log_z)
    fails_with(check, log_z_naive, r"thousands.*logsumexp")
    fails_with(check, log_z_sqrt_d_model, r"D=4, d_k=2.*scale by √d_k")
    fails_with(check, log_z_no_sqrt, r"T=4, D=3, d_k=3.*/ √d_k")
    fails_with(check, log_z_2d_transpose, r"batch.*transpose\(-2, -1\)")
    fails_with(check, log_z_constant, r"T=4, D=3, d_k=3.*log Σ_m exp")


# ------------------------------------------------------------------ tied_log_ratio
def good_log_ratio(X, W):  # the chapter's solution: log Z_j - log Z_i
    log_z = good_log_z(X, W)  # (..., T)
    return log_z[..., None, :] - log_z[..., :, None]


def log_ratio_flipped(X, W):  # log Z_i - log Z_j: the larger share on the wrong side
    return -good_log_ratio(X, W)


def log_ratio_from_weights(X, W):  # right on small scores, nan/inf once p underflows
    Q = X @ W
    P = torch.softmax(Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[-1]), dim=-1)
    return (P / P.transpose(-2, -1)).log()


def log_ratio_no_sqrt(X, W):
    Q = X @ W
    log_z = torch.logsumexp(Q @ Q.transpose(-2, -1), dim=-1)
    return log_z[..., None, :] - log_z[..., :, None]


def log_ratio_2d_transpose(X, W):  # .T reverses every axis of a batch
    Q = X @ W
    log_z = torch.logsumexp(Q @ Q.T / math.sqrt(W.shape[-1]), dim=-1)
    return log_z[..., None, :] - log_z[..., :, None]


def log_ratio_scores(X, W):  # s_ij - s_ji: zero, the scores are symmetric
    Q = X @ W
    s = Q @ Q.transpose(-2, -1) / math.sqrt(W.shape[-1])
    return s - s.transpose(-2, -1)


@pytest.mark.filterwarnings("ignore:The use of `x.T`")
@pytest.mark.filterwarnings("ignore:divide by zero")
def test_tied_log_ratio_check():
    check = attnlab.check.tied_log_ratio
    assert check(good_log_ratio)
    fails_with(check, log_ratio_flipped, r"T=4, D=3, d_k=3.*log p_ij − log p_ji")
    fails_with(check, log_ratio_from_weights, r"thousands.*without the weights")
    fails_with(check, log_ratio_no_sqrt, r"T=4, D=3, d_k=3.*softmax's definition")
    fails_with(check, log_ratio_2d_transpose, r"batch.*transpose\(-2, -1\)")
    fails_with(check, log_ratio_scores, r"T=4, D=3, d_k=3.*compare what differs")
    # the solution agrees with the weights wherever they do not underflow
    g = torch.Generator().manual_seed(3)
    X, W = torch.randn(6, 4, generator=g), torch.randn(4, 3, generator=g)
    Q = X @ W
    P = torch.softmax(Q @ Q.T / math.sqrt(3), dim=-1)
    torch.testing.assert_close(good_log_ratio(X, W), (P / P.T).log())


@pytest.mark.parametrize(
    "check, good",
    [
        (attnlab.check.softmax_jacobian_norm, good_jacobian_norm),
        (attnlab.check.strict_causal_padding_weights, good_strict),
        (attnlab.check.tied_log_normalisers, good_log_z),
        (attnlab.check.tied_log_ratio, good_log_ratio),
    ],
)
def test_stub_is_pending(check, good, capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*args):
        raise NotImplementedError

    assert not check(stub)
    assert "not implemented yet" in capsys.readouterr().out
