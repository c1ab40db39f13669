"""Scoring functions: how well does each key match the query?

Every scorer maps queries ``q (..., T, Dq)`` and keys ``k (..., S, Dk)`` to scores
``(..., T, S)``; a single query is simply ``T = 1``. Leading (batch) dimensions broadcast.

============  ==========================================  =============================
name          score(q, k_j)                               paper
============  ==========================================  =============================
dot           k_jᵀ q                    (Dq == Dk)        Luong et al. (2015)
scaled_dot    k_jᵀ q / √Dk              (Dq == Dk)        Vaswani et al. (2017)
bilinear      k_jᵀ W q,  W ∈ R^{Dk×Dq}                     Luong et al. (2015), "general"
additive      vᵀ tanh(W₁ k_j + W₂ q)                       Bahdanau et al. (2015)
mlp           MLP([q; k_j]) with one hidden ReLU layer
============  ==========================================  =============================
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .registry import Registry

__all__ = [
    "dot_score",
    "scaled_dot_score",
    "DotScore",
    "ScaledDotScore",
    "BilinearScore",
    "AdditiveScore",
    "MLPScore",
    "get_scorer",
]


def _check_qk(q: torch.Tensor, k: torch.Tensor, name: str, same_dim: bool) -> None:
    for t, what in ((q, "q"), (k, "k")):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: {what} must be a torch.Tensor, got {type(t)}")
        if t.dim() < 2:
            raise ValueError(
                f"{name}: {what} must have shape (..., T, D) / (..., S, D), "
                f"got {tuple(t.shape)}; use q[None] for a single query"
            )
    if same_dim and q.shape[-1] != k.shape[-1]:
        raise ValueError(
            f"{name} needs queries and keys of the same size, got Dq={q.shape[-1]} "
            f"(q {tuple(q.shape)}) and Dk={k.shape[-1]} (k {tuple(k.shape)}); "
            "use a bilinear or additive scorer for different sizes"
        )
    if q.dtype != k.dtype:
        raise TypeError(
            f"{name}: q and k must share a dtype, got {q.dtype} and {k.dtype}"
        )
    try:
        torch.broadcast_shapes(q.shape[:-2], k.shape[:-2])
    except RuntimeError:
        raise ValueError(
            f"{name}: the batch dimensions of q {tuple(q.shape)} and k "
            f"{tuple(k.shape)} do not broadcast (shapes are (..., T, Dq), (..., S, Dk))"
        ) from None


def _check_dims(name: str, **sizes) -> None:
    for param, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: {param} must be a positive int, got {value!r}")


def dot_score(q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
    """``k_jᵀ q`` for every query and key: (..., T, D), (..., S, D) -> (..., T, S)."""
    _check_qk(q, k, "dot_score", same_dim=True)
    return q @ k.transpose(-2, -1)  # (..., T, D) @ (..., D, S) -> (..., T, S)


def scaled_dot_score(
    q: torch.Tensor, k: torch.Tensor, scale: float | None = None
) -> torch.Tensor:
    """``k_jᵀ q / √D`` (or times ``scale``): (..., T, D), (..., S, D) -> (..., T, S)."""
    _check_qk(q, k, "scaled_dot_score", same_dim=True)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not scale > 0:
        raise ValueError(f"scaled_dot_score: scale must be a number > 0, got {scale!r}")
    return (q @ k.transpose(-2, -1)) * scale  # (..., T, S)


class DotScore(nn.Module):
    """Module form of :func:`dot_score` (no parameters)."""

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return dot_score(q, k)


class ScaledDotScore(nn.Module):
    """Module form of :func:`scaled_dot_score` (no parameters; ``scale`` defaults to
    ``1/√D``)."""

    def __init__(self, scale: float | None = None):
        super().__init__()
        self.scale = scale

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return scaled_dot_score(q, k, self.scale)


class BilinearScore(nn.Module):
    """``k_jᵀ W q`` with ``W`` of shape ``(d_k, d_q)`` (Luong's "general" score).

    Shapes: ``q (..., T, d_q)``, ``k (..., S, d_k)`` -> ``(..., T, S)``. With ``W = I``
    (and ``d_q == d_k``) it is the dot product. Luong et al. (2015).
    """

    def __init__(self, d_q: int, d_k: int):
        super().__init__()
        _check_dims("BilinearScore", d_q=d_q, d_k=d_k)
        self.d_q, self.d_k = d_q, d_k
        self.W = nn.Parameter(torch.randn(d_k, d_q) / math.sqrt(d_q))

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        _check_qk(q, k, "BilinearScore", same_dim=False)
        _check_size(q, self.d_q, "q", "d_q", "BilinearScore")
        _check_size(k, self.d_k, "k", "d_k", "BilinearScore")
        Wq = q @ self.W.T  # (..., T, Dq) @ (Dq, Dk) -> (..., T, Dk)
        return Wq @ k.transpose(-2, -1)  # (..., T, Dk) @ (..., Dk, S) -> (..., T, S)


class AdditiveScore(nn.Module):
    """``vᵀ tanh(W₁ k_j + W₂ q)`` (Bahdanau et al., 2015), hidden size ``d_hidden``.

    ``W₁ (d_hidden, d_k)``, ``W₂ (d_hidden, d_q)``, ``v (d_hidden,)`` are ``self.W1``,
    ``self.W2``, ``self.v`` (bias-free ``nn.Linear`` layers). Shapes: ``q (..., T, d_q)``,
    ``k (..., S, d_k)`` -> ``(..., T, S)``; the tanh bounds every score by ``‖v‖₁``.
    """

    def __init__(self, d_q: int, d_k: int, d_hidden: int):
        super().__init__()
        _check_dims("AdditiveScore", d_q=d_q, d_k=d_k, d_hidden=d_hidden)
        self.d_q, self.d_k = d_q, d_k
        self.W1 = nn.Linear(d_k, d_hidden, bias=False)
        self.W2 = nn.Linear(d_q, d_hidden, bias=False)
        self.v = nn.Linear(d_hidden, 1, bias=False)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        _check_qk(q, k, "AdditiveScore", same_dim=False)
        _check_size(q, self.d_q, "q", "d_q", "AdditiveScore")
        _check_size(k, self.d_k, "k", "d_k", "AdditiveScore")
        wk = self.W1(k).unsqueeze(-3)  # (..., 1, S, Dh)
        wq = self.W2(q).unsqueeze(-2)  # (..., T, 1, Dh)
        return self.v(torch.tanh(wq + wk)).squeeze(-1)  # (..., T, S, Dh) -> (..., T, S)


class MLPScore(nn.Module):
    """``MLP([q; k_j])``: one hidden ReLU layer of size ``d_hidden``, then a scalar.

    The first layer acts on the concatenation, so it splits into a query part and a key
    part and never materialises the (T, S, Dq + Dk) concatenation.
    """

    def __init__(self, d_q: int, d_k: int, d_hidden: int):
        super().__init__()
        _check_dims("MLPScore", d_q=d_q, d_k=d_k, d_hidden=d_hidden)
        self.d_q, self.d_k = d_q, d_k
        self.hidden = nn.Linear(d_q + d_k, d_hidden)
        self.out = nn.Linear(d_hidden, 1)

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        _check_qk(q, k, "MLPScore", same_dim=False)
        _check_size(q, self.d_q, "q", "d_q", "MLPScore")
        _check_size(k, self.d_k, "k", "d_k", "MLPScore")
        Wq, Wk = self.hidden.weight.split([self.d_q, self.d_k], dim=1)
        hq = (q @ Wq.T + self.hidden.bias).unsqueeze(-2)  # (..., T, 1, Dh)
        hk = (k @ Wk.T).unsqueeze(-3)  # (..., 1, S, Dh)
        return self.out(torch.relu(hq + hk)).squeeze(-1)  # (..., T, S)


def _check_size(t, expected, what, param, name):
    if t.shape[-1] != expected:
        raise ValueError(
            f"{name} was built for {param}={expected}, but {what} has shape "
            f"{tuple(t.shape)} (last dimension {t.shape[-1]})"
        )


def get_scorer(
    name: str,
    d_q: int | None = None,
    d_k: int | None = None,
    d_hidden: int | None = None,
) -> nn.Module:
    """Build a scorer by name: ``dot``, ``scaled_dot``, ``bilinear``, ``additive``, ``mlp``.

    ``dot`` and ``scaled_dot`` have no parameters (``d_q``/``d_k`` are optional and, if
    given, must be equal); the others need ``d_q`` and ``d_k``; ``d_hidden`` (additive
    and mlp) defaults to ``max(d_q, d_k)``. Returns an ``nn.Module`` mapping
    ``q (..., T, Dq), k (..., S, Dk) -> scores (..., T, S)``.
    """
    cls = SCORERS.get(name)  # unknown: a ValueError listing the names
    if name in ("dot", "scaled_dot"):
        if d_q is not None and d_k is not None and d_q != d_k:
            raise ValueError(
                f"scorer {name!r} needs d_q == d_k, got d_q={d_q} and d_k={d_k}; "
                "use 'bilinear', 'additive' or 'mlp' for different sizes"
            )
        return cls()
    if d_q is None or d_k is None:
        raise ValueError(f"scorer {name!r} needs d_q and d_k, got d_q={d_q}, d_k={d_k}")
    if name == "bilinear":
        return cls(d_q, d_k)
    d_hidden = max(d_q, d_k) if d_hidden is None else d_hidden
    return cls(d_q, d_k, d_hidden)  # additive, mlp


# The scorers by name (:func:`get_scorer` builds one with its sizes).
SCORERS: Registry[type[nn.Module]] = Registry(
    "scorer",
    {
        "dot": DotScore,
        "scaled_dot": ScaledDotScore,
        "bilinear": BilinearScore,
        "additive": AdditiveScore,
        "mlp": MLPScore,
    },
)
