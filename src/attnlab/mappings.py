"""Mappings from scores to weights: softmax and friends.

Every mapping takes scores ``(..., n)`` and returns weights of the same shape on the
probability simplex along ``dim``. Positions at ``-inf`` get exactly ``0``; a row whose
every entry is ``-inf`` (a fully masked row) gets all zeros, never NaN.
"""

from __future__ import annotations

import torch

__all__ = ["softmax", "sigmoid"]


def _check_dim(x: torch.Tensor, dim: int, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"{name} needs at least one dimension, got a scalar")
    if not -x.dim() <= dim < x.dim():
        raise ValueError(
            f"{name}: dim={dim} is out of range for shape {tuple(x.shape)}"
        )


def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """``softmax(x / temperature)`` along ``dim``; fully ``-inf`` rows give zeros.

    The solution of ``max_{p in simplex} p.x/t + H(p)`` (Shannon entropy H).
    float16/bfloat16 inputs are computed in float32 and cast back.
    """
    _check_dim(x, dim, "softmax")
    if not temperature > 0:
        raise ValueError(f"softmax: temperature must be > 0, got {temperature}")
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    xf = xf / temperature
    # Subtract the row max so exp never overflows; a row that is all -inf has max -inf,
    # so we shift it by 0 instead and its exp is all zeros (not NaN).
    m = xf.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(xf - m)
    z = e.sum(dim=dim, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    return p.to(x.dtype)


def sigmoid(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Independent weights in (0, 1): *not* on the simplex (rows need not sum to 1)."""
    _check_dim(x, dim, "sigmoid")
    return torch.sigmoid(x)
