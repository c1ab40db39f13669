"""The checks every mapping shares, softmax, sigmoid and argmax, and the plumbing of the
sparse mappings (shift by the max, the simplex Jacobian-vector product)."""

from __future__ import annotations

import torch

from .. import validation as V
from ..kernels import sparse as _k

HALF = (torch.float16, torch.bfloat16)


def upcast(x: torch.Tensor) -> torch.Tensor:
    """``x`` in float32 if it is float16/bfloat16, else ``x`` itself.

    The mappings compute 16-bit scores in float32 and cast the result back
    (``.to(x.dtype)``): their sums and thresholds lose too much in 16 bits.
    """
    return x.float() if x.dtype in HALF else x


def check_dim(x: torch.Tensor, dim: int, name: str, arg: str = "x") -> None:
    V.tensor(x, arg, name, min_dim=1)
    V.integer(dim, "dim", name)
    if not -x.dim() <= dim < x.dim():
        raise ValueError(
            f"{name}: dim={dim} is out of range for shape {tuple(x.shape)}"
        )


def check_float(x: torch.Tensor, name: str, arg: str = "x") -> None:
    V.floating(x, arg, name)


def check_scores(x: torch.Tensor, dim: int, name: str) -> bool:
    """Validate ``x`` and ``dim`` (TypeError / ValueError naming ``name``); under
    :func:`attnlab.debug`, NaN or ``+inf`` raise ValueError. Returns whether ``x`` is
    empty (nothing to compute)."""
    check_dim(x, dim, name)
    check_float(x, name)
    if x.numel() == 0:
        return True
    if V.debugging() and bool((torch.isnan(x) | torch.isposinf(x)).any()):
        raise ValueError(f"{name}: x contains NaN or +inf (shape {tuple(x.shape)})")
    return False


def _check_number(value, name: str, what: str) -> float:
    """A finite real number (Python, NumPy or a one-element tensor; not a bool)."""
    return V.real(value, what, name)


def _temperature(value, name: str) -> float | torch.Tensor:
    """``temperature > 0`` (``inf`` allowed): a number, or a one-element float tensor
    kept as a tensor so that its gradient flows (its value is checked under
    :func:`attnlab.debug` only: no host sync)."""
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        if value.numel() != 1:
            raise ValueError(
                f"{name}: temperature must be one number, got shape "
                f"{tuple(value.shape)}"
            )
        if V.debugging() and not bool(value > 0):
            raise ValueError(f"{name}: temperature must be > 0, got {value.item()}")
        return value.reshape(())
    return V.real(value, "temperature", name, low=0.0, open_low=True, allow_inf=True)


def check_k(k, name: str) -> int | None:
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
    scores give NaN (a ValueError under :func:`attnlab.debug`), integer scores a
    TypeError; ``temperature = inf`` gives the uniform weights over the keys that are
    not ``-inf``; any ``temperature > 0`` is exact (no overflow), and a tensor
    ``temperature`` receives its gradient.

    Parameters
    ----------
    x : tensor of scores ``(..., n, ...)``, floating point; ``-inf`` = masked.
    dim : the dimension to normalise over.
    temperature : ``> 0`` (``inf`` allowed): a number or a one-element float tensor
        (which receives a gradient).

    Returns
    -------
    tensor of the shape and dtype of ``x``: non-negative weights that sum to 1 along
    ``dim`` (0 on a fully ``-inf`` row).

    Raises
    ------
    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
        ``temperature`` is not ``> 0`` (TypeError for a non-number).
    """
    empty = check_scores(x, dim, "softmax")
    t = _temperature(temperature, "softmax")
    if empty:
        return x.clone()
    xf = upcast(x)
    # Subtract the row max before dividing by the temperature, so that no finite
    # score overflows (x / 1e-40 would be inf, and inf - inf NaN): x - max <= 0, and
    # (x - max) / t is in [-inf, 0]. A row that is all -inf has max -inf: it is shifted
    # by 0 instead, and its exp is all zeros (not NaN).
    m = xf.amax(dim=dim, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    z = xf - m
    if isinstance(t, torch.Tensor) or t != 1.0:
        # -inf / inf would be NaN: a masked key stays masked at any temperature
        z = torch.where(torch.isneginf(z), z, z / t)
    e = torch.exp(z)
    s = e.sum(dim=dim, keepdim=True)
    p = e / torch.where(s > 0, s, torch.ones_like(s))
    return p.to(x.dtype)


def sigmoid(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Independent weights in (0, 1): *not* on the simplex (rows need not sum to 1).

    ``dim`` is only validated (each score is mapped on its own); NaN gives NaN (NaN or
    ``+inf`` raise ValueError under :func:`attnlab.debug`, as for the other mappings).

    Parameters
    ----------
    x : tensor of scores, floating point.
    dim : validated only (each score is mapped on its own).

    Returns
    -------
    tensor ``torch.sigmoid(x)`` of the shape and dtype of ``x``, values in [0, 1].

    Raises
    ------

    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
    """
    if check_scores(x, dim, "sigmoid"):
        return x.clone()
    return torch.sigmoid(x)


def argmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """One-hot weights on the (first) largest score: ``Omega = 0``, a vertex of the simplex.

    Piecewise constant, so its gradient is zero almost everywhere: the result carries no
    gradient. A fully ``-inf`` row gives zeros; a row with NaN gives NaN (a ValueError
    under :func:`attnlab.debug`, as NaN or ``+inf``).

    Parameters
    ----------
    x : tensor of scores, floating point; ``-inf`` = masked.
    dim : the dimension to pick the largest score along.

    Returns
    -------
    tensor of the shape and dtype of ``x``: 1 at the first largest score of each row,
    0 elsewhere (all 0 on a fully ``-inf`` row); no gradient.

    Raises
    ------

    TypeError
        ``x`` is not a floating-point tensor (a list, integer or boolean scores), or
        ``dim`` is not an int.
    ValueError
        ``dim`` is out of range for ``x``; under :func:`attnlab.debug`, ``x`` holds NaN
        or ``+inf``.
    """
    if check_scores(x, dim, "argmax"):
        return x.detach().clone()
    idx = x.argmax(dim=dim, keepdim=True)
    out = torch.zeros_like(x).scatter_(dim, idx, 1.0)
    m = x.amax(dim=dim, keepdim=True)
    out = torch.where(torch.isneginf(m), torch.zeros_like(out), out)
    return torch.where(torch.isnan(m), torch.full_like(out, float("nan")), out).detach()


# ----------------------------------------------------------------- shared plumbing
def shift_scores(x: torch.Tensor, dim: int, name: str, floor: float | None = _k.FLOOR):
    """``z = x - max(x)`` clamped at ``floor``, and the mask of live (not -inf) rows."""
    m = x.amax(dim=dim, keepdim=True)
    if V.debugging() and bool(torch.isnan(m).any() | (m == float("inf")).any()):
        raise ValueError(f"{name}: x contains NaN or +inf (shape {tuple(x.shape)})")
    live = m > float("-inf")
    z = x - torch.where(live, m, torch.zeros_like(m))
    return (z if floor is None else torch.clamp(z, min=floor)), live


def jvp_simplex(g: torch.Tensor, s: torch.Tensor, dim: int) -> torch.Tensor:
    """``J^T g`` for ``J = diag(s) - s s^T / sum(s)``; zero where ``s`` is all zero."""
    den = s.sum(dim=dim, keepdim=True)
    q = (g * s).sum(dim=dim, keepdim=True) / torch.where(den > 0, den, 1)
    return s * (g - q)
