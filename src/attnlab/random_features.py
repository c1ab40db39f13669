r"""Random-feature attention (Performer's FAVOR+, Choromanski et al. 2021).

Softmax attention's kernel :math:`\kappa(q, k) = \exp(q \cdot k)` does not factorise, but
it is an expectation that does: for :math:`w \sim \mathcal N(0, I_d)`,

.. math::  \exp(q \cdot k) = \mathbb E_w\big[\phi_w(q)\,\phi_w(k)\big],\qquad
           \phi_w(x) = \exp\big(w \cdot x - \lVert x\rVert^2 / 2\big),

so with ``m`` draws stacked as the rows of ``W (m, d)`` the features
:math:`\phi(x) = \exp(W x - \lVert x\rVert^2/2) / \sqrt m` give an unbiased estimate
:math:`\phi(q)\cdot\phi(k)` of the kernel, and attention becomes linear attention with
these features (:func:`attnlab.linear_attention`'s associativity). The features are
positive, so the estimated weights are too; the relative variance of one feature
product is :math:`e^{\lVert q + k\rVert^2} - 1` (sharp attention is hard to estimate) and
the estimate's falls as ``1/m``. Orthogonal draws (blocks of orthogonal rows rescaled to Gaussian norms) lower it
further.

Shapes: ``q (..., T, d)``, ``k (..., S, d)``, ``v (..., S, dv)``; the scale
:math:`1/\sqrt d` of scaled dot-product attention is applied to ``q`` and ``k`` (each by
:math:`d^{-1/4}`) before the features, so the estimate targets
``F.scaled_dot_product_attention``.
"""

from __future__ import annotations

import math

import torch

from . import validation as V

__all__ = ["random_projection", "positive_random_features", "random_feature_attention"]


def random_projection(
    m: int, d: int, *, orthogonal: bool = True, generator: torch.Generator | None = None
) -> torch.Tensor:
    """``W (m, d)``: ``m`` Gaussian directions; with ``orthogonal=True`` each block of
    ``d`` rows is orthogonal, every row rescaled to the norm of a Gaussian vector."""
    for name, val in (("m", m), ("d", d)):
        if isinstance(val, bool) or not isinstance(val, int) or val < 1:
            raise ValueError(
                f"random_projection: {name} must be an int >= 1, got {val!r}"
            )
    if not orthogonal:
        return torch.randn(m, d, generator=generator)
    blocks = []
    for _ in range(math.ceil(m / d)):
        g = torch.randn(d, d, generator=generator)
        qmat, r = torch.linalg.qr(g)  # (d, d), orthonormal columns
        # QR leaves each column's sign to the algorithm (Householder: R's diagonal may
        # be negative), which skews the directions; fixing R's diagonal positive makes
        # Q Haar-distributed (uniform over orthogonal matrices, Mezzadri 2007)
        qmat = qmat * torch.sign(torch.diagonal(r))  # column j times sign(R_jj)
        blocks.append(qmat.T)
    w = torch.cat(blocks)[:m]  # (m, d), unit rows
    norms = torch.randn(m, d, generator=generator).norm(dim=-1, keepdim=True)
    return w * norms  # (m, d)


def _exponents(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x W^T - |x|^2 / 2``: the features' exponents, ``(..., n, d) -> (..., n, m)``."""
    return x @ w.T.to(x.dtype) - (x * x).sum(-1, keepdim=True) / 2


def _check_features(x: torch.Tensor, name: str, w: torch.Tensor, fn: str) -> None:
    V.floating(x, name, fn, min_dim=1)
    V.floating(w, "w", fn)
    if w.dim() != 2 or w.shape[-1] != x.shape[-1] or w.shape[0] == 0:
        raise ValueError(
            f"{fn}: w must be (m, d) with m >= 1 and the d of {name} "
            f"{tuple(x.shape)}, got {tuple(w.shape)}"
        )


def positive_random_features(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``phi(x) = exp(x W^T - |x|^2 / 2) / sqrt(m)``: ``x (..., n, d)``, ``W (m, d)`` ->
    ``(..., n, m)``, all positive. These are the estimator's features as they are,
    with no max subtracted: a large ``x W^T`` overflows (float32: exponents above ~88).
    :func:`random_feature_attention` subtracts the exponents' max, which cancels in its
    ratio."""
    _check_features(x, "x", w, "positive_random_features")
    return torch.exp(_exponents(x, w)) / math.sqrt(w.shape[0])  # (..., n, m)


def random_feature_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    *,
    eps: float = 1e-12,
) -> torch.Tensor:
    """Non-causal attention with the softmax kernel estimated by ``W (m, d)``:
    ``out = phi(q) (phi(k)^T v) / (phi(q) phi(k)^T 1)``, in O((T + S) m d) time.

    The features of ``q`` and ``k`` may share a common factor that cancels in the
    ratio; the keys' largest exponent is subtracted (over all keys) and the queries' per
    row, so the estimate is the same and nothing overflows."""
    fn = "random_feature_attention"
    for t, name in ((q, "q"), (k, "k"), (v, "v")):
        V.floating(t, name, fn, min_dim=2)
        V.finite(t, name, fn)
    V.same_dtype(fn, q=q, k=k, v=v)
    _check_features(q, "q", w, fn)
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(
            "random_feature_attention: shapes must be q (..., T, d), k (..., S, d), "
            f"v (..., S, dv), got {tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    d = q.shape[-1]
    q, k = q * d**-0.25, k * d**-0.25  # q . k / sqrt(d) split between the two
    wq, wk = _exponents(q, w), _exponents(k, w)  # (..., T, m), (..., S, m)
    phi_q = torch.exp(wq - wq.amax(-1, keepdim=True))  # (..., T, m), factors cancel
    phi_k = torch.exp(wk - wk.amax((-2, -1), keepdim=True))  # (..., S, m)
    kv = phi_k.transpose(-2, -1) @ v  # (..., m, dv)
    z = phi_k.sum(-2)  # (..., m)
    den = (phi_q * z.unsqueeze(-2)).sum(-1, keepdim=True)  # (..., T, 1)
    return (phi_q @ kv) / den.clamp_min(eps)  # (..., T, dv)
