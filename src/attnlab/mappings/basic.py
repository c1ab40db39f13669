"""The checks every mapping shares, softmax, sigmoid and argmax, and the plumbing of the
sparse mappings (shift by the max, the simplex Jacobian-vector product)."""

from __future__ import annotations

import numbers

import torch

from ..kernels import sparse as _k

_HALF = (torch.float16, torch.bfloat16)


def _check_dim(x: torch.Tensor, dim: int, name: str) -> None:
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} expects a torch.Tensor, got {type(x).__name__}")
    if x.dim() == 0:
        raise ValueError(f"{name} needs at least one dimension, got a scalar")
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise TypeError(f"{name}: dim must be an int, got {dim!r}")
    if not -x.dim() <= dim < x.dim():
        raise ValueError(
            f"{name}: dim={dim} is out of range for shape {tuple(x.shape)}"
        )


def _check_float(x: torch.Tensor, name: str) -> None:
    if not x.is_floating_point():
        raise TypeError(f"{name} expects floating-point scores, got {x.dtype}")


def _check_scores(x: torch.Tensor, dim: int, name: str) -> bool:
    """Validate ``x`` and ``dim`` (TypeError / ValueError naming ``name``); NaN or
    ``+inf`` raise ValueError. Returns whether ``x`` is empty (nothing to compute)."""
    _check_dim(x, dim, name)
    _check_float(x, name)
    if x.numel() == 0:
        return True
    if bool((torch.isnan(x) | torch.isposinf(x)).any()):
        raise ValueError(f"{name}: scores contain NaN or +inf (shape {tuple(x.shape)})")
    return False


def _check_number(value, name: str, what: str) -> float:
    """A real number (Python, NumPy or a one-element tensor; not a bool) as a float."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name}: {what} must be a real number, got {value!r}")
    return float(value)


def _check_k(k, name: str) -> int | None:
    """The partial-sort size ``k`` of the sparse mappings: None or an int >= 1."""
    if k is None:
        return None
    if isinstance(k, bool) or not isinstance(k, int):
        raise TypeError(f"{name}: k must be None or an int >= 1, got {k!r}")
    if k < 1:
        raise ValueError(f"{name}: k must be None or an int >= 1, got {k}")
    return k


def softmax(x: torch.Tensor, dim: int = -1, temperature: float = 1.0) -> torch.Tensor:
    """``softmax(x / temperature)`` along ``dim``; fully ``-inf`` rows give zeros.

    The solution of ``max_{p in simplex} p.x/t + H(p)`` (Shannon entropy H).
    float16/bfloat16 inputs are computed in float32 and cast back. NaN or ``+inf``
    scores raise ValueError, integer scores TypeError; ``temperature = inf`` gives the
    uniform weights over the keys that are not ``-inf``.
    """
    empty = _check_scores(x, dim, "softmax")
    t = _check_number(temperature, "softmax", "temperature")
    if not t > 0:
        raise ValueError(f"softmax: temperature must be > 0, got {temperature}")
    if empty:
        return x.clone()
    xf = x.float() if x.dtype in _HALF else x
    if t != 1.0:
        # -inf / inf would be NaN: a masked key stays masked at any temperature
        xf = torch.where(torch.isneginf(xf), xf, xf / t)
    # Subtract the row max so exp never overflows; a row that is all -inf has max -inf,
    # so we shift it by 0 instead and its exp is all zeros (not NaN).
    m = xf.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(xf - m)
    z = e.sum(dim=dim, keepdim=True)
    p = e / torch.where(z > 0, z, torch.ones_like(z))
    return p.to(x.dtype)


def sigmoid(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Independent weights in (0, 1): *not* on the simplex (rows need not sum to 1).

    ``dim`` is only validated (each score is mapped on its own); NaN or ``+inf`` raise
    ValueError as for the other mappings."""
    if _check_scores(x, dim, "sigmoid"):
        return x.clone()
    return torch.sigmoid(x)


def argmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """One-hot weights on the (first) largest score: ``Omega = 0``, a vertex of the simplex.

    Piecewise constant, so its gradient is zero almost everywhere: the result carries no
    gradient. A fully ``-inf`` row gives zeros; NaN or ``+inf`` raise ValueError.
    """
    if _check_scores(x, dim, "argmax"):
        return x.detach().clone()
    idx = x.argmax(dim=dim, keepdim=True)
    out = torch.zeros_like(x).scatter_(dim, idx, 1.0)
    live = torch.isfinite(x.amax(dim=dim, keepdim=True))
    return torch.where(live, out, torch.zeros_like(out)).detach()


# ----------------------------------------------------------------- shared plumbing
def _shift(x: torch.Tensor, dim: int, name: str, floor: float | None = _k.FLOOR):
    """``z = x - max(x)`` clamped at ``floor``, and the mask of live (not -inf) rows."""
    m = x.amax(dim=dim, keepdim=True)
    if bool(torch.isnan(m).any() | (m == float("inf")).any()):
        raise ValueError(f"{name}: scores contain NaN or +inf (shape {tuple(x.shape)})")
    live = m > float("-inf")
    z = x - torch.where(live, m, torch.zeros_like(m))
    return (z if floor is None else torch.clamp(z, min=floor)), live


def _jvp_simplex(g: torch.Tensor, s: torch.Tensor, dim: int) -> torch.Tensor:
    """``J^T g`` for ``J = diag(s) - s s^T / sum(s)``; zero where ``s`` is all zero."""
    den = s.sum(dim=dim, keepdim=True)
    q = (g * s).sum(dim=dim, keepdim=True) / torch.where(den > 0, den, 1)
    return s * (g - q)
