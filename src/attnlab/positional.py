"""Positional encodings: telling an order-blind attention layer where each token is.

Self-attention treats its input as a *set*: permute the tokens and the outputs are
permuted the same way (chapter 5). Order enters only through what we add to (or do
to) the token vectors. Three ways, for inputs ``x (B, T, D)``:

=============  ==============================================  =======================
name           what it does                                    paper
=============  ==============================================  =======================
sinusoidal     x_t + PE_t, fixed sines/cosines (below)         Vaswani et al. (2017)
learned        x_t + P[t], one trained vector per position     Gehring et al.; BERT
rotary         rotates pairs of features of q and k by t·θ_i   Su et al. (2021)
=============  ==============================================  =======================

The sinusoidal table, for position ``pos`` and feature pair ``i``::

    PE[pos, 2i]   = sin(pos / 10000^(2i/D))
    PE[pos, 2i+1] = cos(pos / 10000^(2i/D))

Each pair is a point on a circle turning at its own frequency, so moving ``k`` steps
is the same rotation for every position: ``PE[pos + k] = PE[pos] @ M_k.T`` with a
block-diagonal rotation ``M_k`` that does not depend on ``pos``
(:func:`relative_shift_matrix`).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from . import validation as V
from .registry import Registry

__all__ = [
    "sinusoidal_encoding",
    "relative_shift_matrix",
    "SinusoidalPositionalEncoding",
    "LearnedPositionalEncoding",
    "apply_rotary",
    "get_positional",
]


def _frequencies(d_model: int, base: float, dtype, device) -> torch.Tensor:
    """Angular frequency of each feature pair: ``1 / base^(2i/D)``, shape (ceil(D/2),)."""
    i2 = torch.arange(0, d_model, 2, dtype=torch.float64, device=device)  # 2i
    return torch.exp(-math.log(base) * i2 / d_model).to(dtype)  # (ceil(D/2),)


def sinusoidal_encoding(
    n_positions: int,
    d_model: int,
    base: float = 10000.0,
    dtype=None,
    device=None,
) -> torch.Tensor:
    """The fixed sinusoidal table of Vaswani et al. (2017), shape (n_positions, D).

    ``PE[pos, 2i] = sin(pos / base^(2i/D))`` and ``PE[pos, 2i+1] = cos(...)``; an odd
    ``D`` keeps the sine of the last pair only. Computed in float64, returned in
    ``dtype`` (default: torch's default dtype).

    Parameters
    ----------
    n_positions : the number of positions, an int >= 1.
    d_model : the width D, an int >= 1.
    base : the wavelength base, finite and > 1.
    dtype, device : of the result.

    Returns
    -------
    tensor ``(n_positions, D)``.

    Raises
    ------
    ValueError
        ``n_positions`` or ``d_model`` is < 1, or ``base`` is not finite and > 1.
    """
    fn = "sinusoidal_encoding"
    n_positions = V.integer(n_positions, "n_positions", fn, low=1)
    d_model = V.integer(d_model, "d_model", fn, low=1)
    base = V.real(base, "base", fn, low=1.0, open_low=True)
    dtype = V.floating_dtype(dtype, "dtype", fn)
    pos = torch.arange(n_positions, dtype=torch.float64, device=device)  # (T,)
    freq = _frequencies(d_model, base, torch.float64, device)  # (ceil(D/2),)
    angles = pos[:, None] * freq[None, :]  # (T, 1) * (1, D/2) -> (T, D/2)
    pe = torch.zeros(n_positions, d_model, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(angles)  # (T, ceil(D/2))
    pe[:, 1::2] = torch.cos(angles[:, : d_model // 2])  # (T, floor(D/2))
    return pe.to(dtype)


def relative_shift_matrix(
    k: int, d_model: int, base: float = 10000.0, dtype=None
) -> torch.Tensor:
    """The (D, D) matrix ``M_k`` with ``PE[pos + k] = PE[pos] @ M_k.T`` for every ``pos``.

    Block diagonal: the 2×2 block of pair ``i`` rotates by the angle ``k·ω_i``
    (``ω_i = base^(-2i/D)``). That an offset is one fixed linear map is what lets a
    layer attend "k positions back" wherever it is. ``D`` must be even.

    Parameters
    ----------
    k : the offset in positions.
    d_model : the width D, even.
    base : the wavelength base of :func:`sinusoidal_encoding`.
    dtype : of the result.

    Returns
    -------
    tensor ``(D, D)``, block diagonal with 2×2 rotations.

    Raises
    ------
    ValueError
        ``d_model`` is odd.
    """
    fn = "relative_shift_matrix"
    k = V.integer(k, "k", fn)
    d_model = V.integer(d_model, "d_model", fn, low=2)
    base = V.real(base, "base", fn, low=1.0, open_low=True)
    if d_model % 2:
        raise ValueError(f"relative_shift_matrix needs an even d_model, got {d_model}")
    dtype = V.floating_dtype(dtype, "dtype", fn)
    theta = k * _frequencies(d_model, base, torch.float64, None)  # (D/2,)
    c, s = torch.cos(theta), torch.sin(theta)
    m = torch.zeros(d_model, d_model, dtype=torch.float64)
    # (sin(a+b), cos(a+b)) = [[cos b, sin b], [-sin b, cos b]] @ (sin a, cos a)
    m[0::2, 0::2] = torch.diag(c)
    m[0::2, 1::2] = torch.diag(s)
    m[1::2, 0::2] = torch.diag(-s)
    m[1::2, 1::2] = torch.diag(c)
    return m.to(dtype)


def _check_offset(offset, name: str) -> int:
    """``offset`` must be an int >= 0 (a position index), not a float or bool."""
    return V.integer(offset, "offset", name, low=0)  # a position


def _check_input(x: torch.Tensor, d_model: int, name: str) -> None:
    V.tensor(x, "x", name)
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(
            f"{name} expects x of shape (B, T, D={d_model}), got {tuple(x.shape)}"
        )


class SinusoidalPositionalEncoding(nn.Module):
    """Add the fixed sinusoidal table to token vectors ``x (B, T, D)``.

    The table is a non-trainable buffer of ``max_len`` rows, rebuilt on the fly for
    longer inputs (sinusoids extrapolate to any position). ``offset`` shifts the
    positions, e.g. for a decoder that is fed one token at a time.
    """

    pe: torch.Tensor  # (max_len, D), a buffer

    def __init__(self, d_model: int, max_len: int = 512, base: float = 10000.0):
        super().__init__()
        fn = "SinusoidalPositionalEncoding"
        d_model = V.integer(d_model, "d_model", fn, low=1)
        max_len = V.integer(max_len, "max_len", fn, low=1)
        base = V.real(base, "base", fn, low=1.0, open_low=True)
        self.d_model, self.base = d_model, base
        self.register_buffer(
            "pe", sinusoidal_encoding(max_len, d_model, base), persistent=False
        )

    def table(self, n_positions: int, like: torch.Tensor) -> torch.Tensor:
        """The first ``n_positions`` rows, on ``like``'s device and dtype: (T, D)."""
        n_positions = V.integer(n_positions, "n_positions", "table", low=0)
        if n_positions > self.pe.shape[0]:
            self.pe = sinusoidal_encoding(n_positions, self.d_model, self.base)
        return self.pe[:n_positions].to(device=like.device, dtype=like.dtype)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_input(x, self.d_model, "SinusoidalPositionalEncoding")
        offset = _check_offset(offset, "SinusoidalPositionalEncoding")
        B, T, D = x.shape
        return x + self.table(offset + T, x)[offset:]  # (B, T, D) + (T, D)


class LearnedPositionalEncoding(nn.Module):
    """Add one trained vector per position (``nn.Embedding(max_len, D)``) to ``x``.

    Cannot go past ``max_len``: positions it never saw have no vector, which is the
    price of learning them (BERT's 512-token limit).
    """

    def __init__(self, d_model: int, max_len: int = 512):
        super().__init__()
        fn = "LearnedPositionalEncoding"
        d_model = V.integer(d_model, "d_model", fn, low=1)
        max_len = V.integer(max_len, "max_len", fn, low=1)
        self.d_model, self.max_len = d_model, max_len
        self.embedding = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        _check_input(x, self.d_model, "LearnedPositionalEncoding")
        offset = _check_offset(offset, "LearnedPositionalEncoding")
        B, T, D = x.shape
        if offset + T > self.max_len:
            raise ValueError(
                f"LearnedPositionalEncoding has {self.max_len} positions, got "
                f"positions up to {offset + T - 1}"
            )
        pos = torch.arange(offset, offset + T, device=x.device)  # (T,)
        return x + self.embedding(pos).to(x.dtype)  # (B, T, D) + (T, D)


def apply_rotary(
    x: torch.Tensor, offset: int = 0, base: float = 10000.0
) -> torch.Tensor:
    """Rotary position embedding (RoPE, Su et al. 2021) of ``x (..., T, D)``, D even.

    Feature pair ``(x[2i], x[2i+1])`` of the token at position ``t`` is rotated by the
    angle ``t·ω_i``. Applied to queries and keys (not values), the score of a query at
    ``m`` and a key at ``n`` then depends on ``m - n`` only:
    ``rot(q, m)·rot(k, n) = rot(q, m - n)·k``.

    Parameters
    ----------
    x : floating-point tensor ``(..., T, D)``, D even (queries or keys).
    offset : the position of the first token, an int >= 0 (a KV cache's length).
    base : the wavelength base of the angles.

    Returns
    -------
    tensor of the shape and dtype of ``x``, each pair rotated by its position's angle.

    Raises
    ------
    TypeError
        ``x`` is not floating point.
    ValueError
        ``D`` is odd, or ``offset`` is negative.
    """
    V.tensor(x, "x", "apply_rotary")
    if x.dim() < 2 or x.shape[-1] % 2:
        raise ValueError(f"apply_rotary needs x (..., T, D) with even D, got {x.shape}")
    if not x.is_floating_point():
        raise TypeError(f"apply_rotary expects floating-point x, got {x.dtype}")
    offset = _check_offset(offset, "apply_rotary")
    base = V.real(base, "base", "apply_rotary", low=1.0, open_low=True)
    T, D = x.shape[-2], x.shape[-1]
    pos = torch.arange(offset, offset + T, dtype=torch.float64, device=x.device)
    theta = pos[:, None] * _frequencies(D, base, torch.float64, x.device)  # (T, D/2)
    c, s = torch.cos(theta).to(x.dtype), torch.sin(theta).to(x.dtype)  # (T, D/2)
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (..., T, D/2) each
    out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), dim=-1)  # (..., T, D/2, 2)
    return out.flatten(-2)  # (..., T, D)


def get_positional(kind: str, d_model: int, max_len: int = 512) -> nn.Module:
    """``"sinusoidal"``, ``"learned"`` or ``"none"`` (identity: no order information).

    Parameters
    ----------
    kind : ``"sinusoidal"``, ``"learned"`` or ``"none"`` (see
        :data:`POSITIONAL_ENCODINGS`).
    d_model : the width D of the embeddings it is added to.
    max_len : the longest sequence it takes.

    Returns
    -------
    ``nn.Module`` mapping embeddings ``(B, T, D)`` to ``(B, T, D)``, with order
    information added (``"none"``: unchanged).

    Raises
    ------
    ValueError
        ``kind`` is unknown (the message lists the known names).
    """
    d_model = V.integer(d_model, "d_model", "get_positional", low=1)
    max_len = V.integer(max_len, "max_len", "get_positional", low=1)
    return POSITIONAL_ENCODINGS.get(kind)(d_model, max_len)


class _NoPosition(nn.Module):
    def __init__(self, d_model: int = 0, max_len: int = 0) -> None:
        super().__init__()  # the sizes are taken, as by the others, and unused

    def forward(self, x: torch.Tensor, offset: int = 0) -> torch.Tensor:
        return x


# The encodings by name, each built as ``cls(d_model, max_len)`` (:func:`get_positional`).
POSITIONAL_ENCODINGS: Registry[type[nn.Module]] = Registry(
    "positional encoding",
    {
        "sinusoidal": SinusoidalPositionalEncoding,
        "learned": LearnedPositionalEncoding,
        "none": _NoPosition,
    },
)
