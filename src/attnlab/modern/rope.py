"""Rotary position embedding (RoPE) and its context-extension scalings; ALiBi slopes.

RoPE (Su et al. 2021) rotates feature pair ``i`` of a query or key at position ``t``
by the angle ``t·ω_i`` with ``ω_i = base^(-2i/d)``. The score of a query at ``m``
and a key at ``n`` then depends on ``m - n`` only:
``<R(mω) q, R(nω) k> = <R((m - n)ω) q, k>``.

Two memory layouts of the pairs exist: ``"interleaved"`` pairs features
``(2i, 2i+1)`` (the paper, GPT-J, Meta's original Llama), ``"half"`` pairs
``(i, i + d/2)`` (GPT-NeoX and Hugging Face's Llama, which permutes the rows of
W_q and W_k when it converts Meta's checkpoints so both give the same scores).

Context extension at evaluation, ``scaling={"type": ..., "factor": s, ...}``:

- ``"linear"`` — position interpolation (Chen et al. 2023): ``ω_i / s``;
- ``"ntk"`` — NTK-aware (bloc97 2023): ``base · s^(d/(d-2))``;
- ``"dynamic"`` — NTK whose base grows with the current length ``L`` (the
  largest position + 1): ``base · (s·L/L0 - (s - 1))^(d/(d-2))`` once ``L > L0``;
- ``"yarn"`` — YaRN (Peng et al. 2023): frequencies whose wavelength exceeds the
  training length ``L0`` are interpolated, fast ones kept, a linear ramp between
  (``beta_fast``, ``beta_slow`` rotations), and cos/sin multiplied by
  ``0.1·ln s + 1`` (so the logits by its square);
- ``"llama3"`` — Llama 3.1's rule (Meta 2024): wavelengths longer than
  ``L0 / low_freq_factor`` are divided by ``s``, shorter than ``L0 / high_freq_factor``
  kept, a smooth interpolation between;
- ``"longrope"`` — LongRoPE (Ding et al. 2024, Phi-3): ``ω_i / λ_i`` with per-pair
  factors ``short_factor`` while the length is at most ``L0`` and ``long_factor``
  beyond, and cos/sin multiplied by ``sqrt(1 + ln s / ln L0)``.

``"dynamic"`` and ``"longrope"`` depend on the current length, so keys cached at one
length would disagree with a full forward at another: a layer with either refuses a
cache (transformers caches them anyway).
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import validation as V
from ._scaling import LENGTH_DEPENDENT, check_scaling, rope_frequencies

__all__ = ["RoPE", "alibi_slopes", "alibi_bias", "rope_frequencies"]

_LAYOUTS = ("half", "interleaved")


class RoPE(nn.Module):
    """Rotary position embedding of queries or keys ``x (B, H, T, Dh)``.

    Parameters
    ----------
    base : float
        ω_i = base^(-2i/d) with d the rotary width.
    layout : "half" or "interleaved"
        Which features form a rotated pair (see the module docstring).
    scaling : None or dict
        ``{"type": "linear"|"ntk"|"dynamic"|"yarn"|"llama3"|"longrope", "factor": s,
        ...}`` (module docstring); all but ``"linear"`` and ``"ntk"`` need
        ``"original_max_position"``, ``"llama3"`` its ``low_freq_factor`` and
        ``high_freq_factor``, ``"longrope"`` its ``short_factor`` and
        ``long_factor`` lists.
    fraction : float
        Share of each head's features that rotate (partial RoPE, e.g. 0.25 in
        Qwen3-Next); the rest pass through. The rotated block comes first.
    """

    def __init__(
        self,
        base: float = 10000.0,
        layout: str = "half",
        scaling: dict | None = None,
        *,
        fraction: float = 1.0,
    ) -> None:
        super().__init__()
        base = V.real(base, "base", "RoPE", low=1.0, open_low=True)
        V.choice(layout, _LAYOUTS, "layout", "RoPE")
        fraction = V.real(
            fraction, "fraction", "RoPE", low=0.0, open_low=True, high=1.0
        )
        self.base, self.layout, self.fraction = float(base), layout, float(fraction)
        self.scaling = check_scaling(scaling)
        # (d, device, dtype) -> (ω, factor): the frequencies, computed once
        self._omega: dict[tuple, tuple[torch.Tensor, float]] = {}

    @property
    def cacheable(self) -> bool:
        """False for dynamic NTK and LongRoPE: their frequencies change with the
        length seen."""
        return not (self.scaling and self.scaling["type"] in LENGTH_DEPENDENT)

    @property
    def kind_name(self) -> str:
        """The scaling's name in messages (``"dynamic NTK"``, ``"longrope"``, ...)."""
        kind = self.scaling["type"] if self.scaling else "plain"
        return "dynamic NTK" if kind == "dynamic" else kind

    def extra_repr(self) -> str:
        return f"base={self.base}, layout={self.layout!r}, scaling={self.scaling}"

    def rotary_dim(self, d_head: int) -> int:
        """The rotated width of a ``d_head``-wide head: ``int(d_head * fraction)``."""
        d_head = V.integer(d_head, "d_head", "RoPE", low=1)
        d = int(d_head * self.fraction)
        if d < 2 or d % 2:
            raise ValueError(
                f"RoPE: rotary width int({d_head} * fraction {self.fraction}) = {d} "
                "must be even and >= 2"
            )
        return d

    def frequencies(
        self, d: int, device: torch.device, dtype: torch.dtype, length: int = 0
    ) -> tuple[torch.Tensor, float]:
        """ω ``(d/2,)`` in ``dtype`` on ``device``, and the cos/sin factor.

        Computed once in float64 and kept per (width, device, dtype): later calls
        copy nothing to the device and never read a tensor back (no host sync).
        Dynamic NTK depends on ``length`` and is recomputed every call.
        """
        V.floating_dtype(dtype, "dtype", "RoPE", optional=False)
        if not self.cacheable:
            omega, att = rope_frequencies(d, self.base, self.scaling, length)
            return omega.to(device=device, dtype=dtype), att
        key = (d, str(device), dtype)
        hit = self._omega.get(key)
        if hit is None:
            V.integer(length, "length", "RoPE", low=0)
            omega, att = rope_frequencies(d, self.base, self.scaling)
            hit = self._omega[key] = (omega.to(device=device, dtype=dtype), att)
        return hit

    def angles(
        self, positions: torch.Tensor, d: int, dtype: torch.dtype = torch.float64
    ) -> tuple[torch.Tensor, float]:
        """Angles ``positions[..., None] * ω`` ((..., d/2), float64 unless ``dtype``
        says otherwise) and the cos/sin factor. Only dynamic NTK reads the length
        (the largest position + 1) from ``positions``: one host sync, so it cannot
        decode with a cache anyway."""
        length = 0
        if not self.cacheable and positions.numel():
            length = int(positions.max()) + 1
        omega, att = self.frequencies(d, positions.device, dtype, length)
        return positions.to(dtype)[..., None] * omega, att  # (..., d/2)

    def cos_sin(
        self, positions: torch.Tensor, d_head: int, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` of the angles times the factor, each ``(T, d/2)`` or
        ``(B, 1, T, d/2)`` for ``positions`` (T,) or (B, T), in ``dtype``.

        As transformers' rotary embedding, the angles are computed in float32
        (float64 for float64 inputs, so float64 stays exact) and cast to ``dtype``
        once. A layer computes them once per forward for its queries and keys; a
        model may compute them once for all its layers and pass them down
        (``Attention.forward(position_embeddings=...)``).
        """
        d = self.rotary_dim(d_head)
        V.floating_dtype(dtype, "dtype", "RoPE.cos_sin", optional=False)
        work = torch.float64 if dtype == torch.float64 else torch.float32
        theta, att = self.angles(positions, d, work)  # (T, d/2) or (B, T, d/2)
        if positions.dim() == 2:
            theta = theta[:, None]  # (B, 1, T, d/2)
        return (torch.cos(theta) * att).to(dtype), (torch.sin(theta) * att).to(dtype)

    def rotate(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        """Rotate ``x (B, H, T, Dh)`` by precomputed :meth:`cos_sin`."""
        d = 2 * cos.shape[-1]
        c, s = cos, sin
        xr, rest = x[..., :d], x[..., d:]  # (B, H, T, d), (B, H, T, Dh - d)
        if self.layout == "interleaved":
            x0, x1 = xr[..., 0::2], xr[..., 1::2]  # (B, H, T, d/2) each
            out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2)
        else:
            x0, x1 = xr[..., : d // 2], xr[..., d // 2 :]  # (B, H, T, d/2) each
            out = torch.cat((x0 * c - x1 * s, x0 * s + x1 * c), -1)  # (B, H, T, d)
        return torch.cat((out, rest), -1)  # (B, H, T, Dh)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (B, H, T, Dh)``; ``positions`` (T,) or (B, T) integers."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError("RoPE: x must be a floating-point tensor (B, H, T, Dh)")
        if x.dim() != 4:
            raise ValueError(
                f"RoPE: x must be (B, H, T, Dh), got shape {tuple(x.shape)}"
            )
        B, H, T, Dh = x.shape
        if Dh < 2:
            raise ValueError(
                f"RoPE: x must have head features to rotate (B, H, T, Dh >= 2), got "
                f"shape {tuple(x.shape)}"
            )
        check_positions(positions, B, T, "RoPE")
        return self.rotate(x, *self.cos_sin(positions, Dh, x.dtype))


def check_positions(positions: object, B: int, T: int, fn: str) -> torch.Tensor:
    """Integer positions of shape (T,) or (B, T) (metadata only: no host sync)."""
    V.tensor(positions, "positions", fn)
    assert isinstance(positions, torch.Tensor)
    if positions.shape not in ((T,), (B, T)) or positions.is_floating_point():
        raise ValueError(
            f"{fn}: positions must be integers of shape ({T},) or ({B}, {T}), "
            f"got {positions.dtype} {tuple(positions.shape)}"
        )
    return positions


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes (Press et al. 2022), float64 ``(H,)``.

    For H a power of two: ``2^(-8h/H)``, h = 1..H. Otherwise the slopes of the
    nearest lower power of two, then every other slope of the next power of two.
    """
    n_heads = V.integer(n_heads, "n_heads", "alibi_slopes", low=1)

    def powers(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    p = 2 ** math.floor(math.log2(n_heads))
    slopes = powers(p) + powers(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    n_heads: int, q_pos: torch.Tensor, k_pos: torch.Tensor, dtype=torch.float32
) -> torch.Tensor:
    """ALiBi's additive bias ``-m_h·|i - j|``, shape ``(H, T, S)``."""
    dtype = V.floating_dtype(dtype, "dtype", "alibi_bias", optional=False)
    V.tensor(q_pos, "q_pos", "alibi_bias", dim=1)
    V.tensor(k_pos, "k_pos", "alibi_bias", dim=1)
    dist = (q_pos[:, None] - k_pos[None, :]).abs().to(torch.float64)  # (T, S)
    m = alibi_slopes(n_heads).to(q_pos.device)  # (H,)
    return (-m[:, None, None] * dist).to(dtype)  # (H, T, S)
