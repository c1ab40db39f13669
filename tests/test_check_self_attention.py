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
def _scores(d_k, sigma, n, generator, q_sigma=None, k_sigma=None, scaled=True):
    qs = sigma if q_sigma is None else q_sigma
    ks = sigma if k_sigma is None else k_sigma
    q = qs * torch.randn(n, 1, d_k, generator=generator)  # (n, 1, d_k)
    k = ks * torch.randn(n, 16, d_k, generator=generator)  # (n, 16, d_k)
    s = (q @ k.transpose(-2, -1)).squeeze(1)  # (n, 16)
    return s / math.sqrt(d_k) if scaled else s


def _frob(p):  # (n, 16) rows on the simplex -> mean ‖diag(p) - p pᵀ‖_F
    J = torch.diag_embed(p) - p[:, :, None] * p[:, None, :]
    return J.flatten(1).norm(dim=-1).mean().item()


def good_jacobian_norm(d_k, sigma, n, generator):  # the chapter's solution
    return _frob(torch.softmax(_scores(d_k, sigma, n, generator), dim=-1))


def jacobian_diag_only(d_k, sigma, n, generator):  # "softmax' = p(1 - p)"
    p = torch.softmax(_scores(d_k, sigma, n, generator), dim=-1)
    return (p * (1 - p)).norm(dim=-1).mean().item()


def jacobian_never_scaled(d_k, sigma, n, generator):  # forgets √d_k
    return _frob(torch.softmax(_scores(d_k, sigma, n, generator, scaled=False), -1))


def jacobian_sigma_ignored(d_k, sigma, n, generator):  # standard normal entries
    return good_jacobian_norm(d_k, 1.0, n, generator)


def jacobian_sigma_squared(d_k, sigma, n, generator):  # σ² taken as the std
    return good_jacobian_norm(d_k, sigma**2, n, generator)


def jacobian_sigma_queries_only(d_k, sigma, n, generator):  # keys left at std 1
    s = _scores(d_k, sigma, n, generator, k_sigma=1.0)
    return _frob(torch.softmax(s, dim=-1))


def jacobian_wrong_dim(d_k, sigma, n, generator):  # softmax over the n rows
    return _frob(torch.softmax(_scores(d_k, sigma, n, generator), dim=0))


def jacobian_constant(d_k, sigma, n, generator):
    return 0.25


def test_jacobian_check():
    assert attnlab.check.softmax_jacobian_norm(good_jacobian_norm)
    check = attnlab.check.softmax_jacobian_norm
    fails_with(check, jacobian_diag_only, r"d_k=1, sigma=1.0.*off-diagonal")
    fails_with(check, jacobian_never_scaled, r"d_k=16, sigma=1.0.*√d_k = 4")
    fails_with(check, jacobian_sigma_ignored, r"sigma=0.5.*multiply both")
    fails_with(check, jacobian_sigma_squared, r"sigma=0.5.*multiply both")
    fails_with(check, jacobian_sigma_queries_only, r"sigma=0.5.*multiply both")
    fails_with(check, jacobian_wrong_dim, r"d_k=1, sigma=1.0.*dim=-1")
    fails_with(check, jacobian_constant, r"d_k=1, sigma=1.0.*Frobenius")


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


# ------------------------------------------------------------------ receptive_field
def _band(T, r, causal):
    i, j = torch.arange(T)[:, None], torch.arange(T)[None, :]
    band = (i - j).abs() <= r
    return band & (j <= i) if causal else band


def good_receptive_field(T, r, layers, causal):  # the chapter's solution
    band = _band(T, r, causal)
    reach = torch.eye(T, dtype=torch.bool)
    for _ in range(layers):
        reach = (band.double() @ reach.double()) > 0
    return reach


def closed_form_receptive_field(T, r, layers, causal):  # |i - j| <= r L: also right
    return _band(T, r * layers, causal)


def reach_one_layer(T, r, layers, causal):  # ignores the stacking
    return _band(T, r, causal) if layers else torch.eye(T, dtype=torch.bool)


def reach_transposed(T, r, layers, causal):
    return good_receptive_field(T, r, layers, causal).T


def reach_not_causal(T, r, layers, causal):
    return good_receptive_field(T, r, layers, False)


def reach_strict_band(T, r, layers, causal):  # |i - j| < r
    return good_receptive_field(T, max(r - 1, 0), layers, causal)


def reach_one_layer_short(T, r, layers, causal):
    return good_receptive_field(T, r, max(layers - 1, 0), causal)


def reach_no_diagonal(T, r, layers, causal):  # a query may not see itself
    band = _band(T, r, causal) & ~torch.eye(T, dtype=torch.bool)
    reach = torch.eye(T, dtype=torch.bool)
    for _ in range(layers):
        reach = (band.double() @ reach.double()) > 0
    return reach


def test_receptive_field_check():
    check = attnlab.check.receptive_field
    assert check(good_receptive_field)
    assert check(closed_form_receptive_field)
    assert check(lambda *a: good_receptive_field(*a).int())  # 0/1 is fine too
    fails_with(check, reach_one_layer, r"layers=3.*one layer's mask")
    fails_with(check, reach_transposed, r"causal=True.*transposed")
    fails_with(check, reach_not_causal, r"causal=True.*later tokens")
    fails_with(check, reach_strict_band, r"r=2.*off by one")
    fails_with(check, reach_one_layer_short, r"layers=1.*one layer short")
    fails_with(check, reach_no_diagonal, r"layers=1.*attends to itself")
    everything = lambda T, r, L, c: torch.ones(T, T, dtype=torch.bool)  # noqa: E731
    fails_with(check, everything, r"\|i − j\| <= r")


def test_receptive_field_stub_is_pending(capsys, monkeypatch):
    monkeypatch.setenv("ATTNLAB_STRICT", "0")

    def stub(*args):
        raise NotImplementedError

    assert not attnlab.check.receptive_field(stub)
    assert "not implemented yet" in capsys.readouterr().out
