"""The attention recipe: score, map to the simplex, combine.

Given queries ``q (..., T, Dq)``, keys ``k (..., S, Dk)`` and values ``v (..., S, Dv)``:

1. ``scores = score(q, k)``            (..., T, S)
2. ``weights = mapping(scores)``       (..., T, S), each row on the simplex
3. ``out = weights @ v``               (..., T, Dv)
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .mappings import softmax
from .masking import apply_mask
from .scoring import dot_score

__all__ = ["attend"]


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    score: Callable = dot_score,
    mapping: Callable = softmax,
    mask: torch.Tensor | None = None,
):
    """Attend from queries to keys and combine the values.

    Parameters
    ----------
    q, k, v : tensors of shape (..., T, Dq), (..., S, Dk), (..., S, Dv)
    score : callable ``(q, k) -> (..., T, S)``; any scorer of :mod:`attnlab.scoring`
    mapping : callable ``scores -> weights`` along the last dimension (default softmax)
    mask : optional, broadcastable to (..., T, S); boolean ``True`` = may attend, or a
        float mask added to the scores. A query whose every key is masked gets zero
        weights and a zero output (never NaN).

    Returns
    -------
    out : (..., T, Dv)
    weights : (..., T, S)
    """
    if k.shape[:-1] != v.shape[:-1]:
        raise ValueError(
            f"attend: keys and values must agree on (..., S), got k {tuple(k.shape)} "
            f"and v {tuple(v.shape)}"
        )
    scores = score(q, k)  # (..., T, S)
    scores = apply_mask(scores, mask)  # (..., T, S), -inf where masked
    weights = mapping(scores)  # (..., T, S)
    out = weights @ v  # (..., T, S) @ (..., S, Dv) -> (..., T, Dv)
    return out, weights
