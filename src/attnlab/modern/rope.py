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
  ``0.1·ln s + 1`` (so the logits by its square).
"""

from __future__ import annotations

import math

import torch
from torch import nn

__all__ = ["RoPE", "alibi_slopes", "alibi_bias", "rope_frequencies"]

_LAYOUTS = ("half", "interleaved")
_KEYS = {
    "linear": {"factor"},
    "ntk": {"factor"},
    "dynamic": {"factor", "original_max_position"},
    "yarn": {
        "factor",
        "original_max_position",
        "beta_fast",
        "beta_slow",
        "attention_factor",
        "mscale",
        "mscale_all_dim",
        "truncate",
    },
}
_REQUIRED = {
    "linear": {"factor"},
    "ntk": {"factor"},
    "dynamic": {"factor", "original_max_position"},
    "yarn": {"factor", "original_max_position"},
}


def _check_scaling(scaling) -> dict | None:
    if scaling is None:
        return None
    if not isinstance(scaling, dict):
        raise TypeError(
            f"RoPE: scaling must be None or a dict, got {type(scaling).__name__}"
        )
    kind = scaling.get("type")
    if kind not in _KEYS:
        raise ValueError(
            f"RoPE: scaling['type'] must be one of {sorted(_KEYS)}, got {kind!r}"
        )
    keys = set(scaling) - {"type"}
    if keys - _KEYS[kind]:
        raise ValueError(
            f"RoPE: unknown scaling keys {sorted(keys - _KEYS[kind])} for "
            f"{kind!r} (allowed: {sorted(_KEYS[kind])})"
        )
    if _REQUIRED[kind] - keys:
        raise ValueError(
            f"RoPE: scaling type {kind!r} needs {sorted(_REQUIRED[kind] - keys)}"
        )
    factor = scaling["factor"]
    if isinstance(factor, bool) or not isinstance(factor, (int, float)):
        raise TypeError(f"RoPE: scaling['factor'] must be a number, got {factor!r}")
    if not factor >= 1.0 or not math.isfinite(factor):
        raise ValueError(f"RoPE: scaling['factor'] must be >= 1, got {factor}")
    orig = scaling.get("original_max_position", 1)
    if isinstance(orig, bool) or not isinstance(orig, int) or orig < 1:
        raise ValueError(
            f"RoPE: scaling['original_max_position'] must be a positive int, "
            f"got {orig!r}"
        )
    return dict(scaling)


def _yarn(base: float, d: int, sc: dict) -> tuple[torch.Tensor, float]:
    """YaRN's frequencies (float64) and cos/sin factor, as in Peng et al. 2023."""
    s, L0 = float(sc["factor"]), sc["original_max_position"]
    fast, slow = sc.get("beta_fast", 32), sc.get("beta_slow", 1)

    def dim_of(rotations: float) -> float:  # the pair index making `rotations` in L0
        return d * math.log(L0 / (rotations * 2 * math.pi)) / (2 * math.log(base))

    low, high = dim_of(fast), dim_of(slow)
    if sc.get("truncate", True):  # gpt-oss keeps the fractional bounds
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, d - 1)
    if low == high:
        high += 0.001
    ramp = ((torch.arange(d // 2, dtype=torch.float64) - low) / (high - low)).clamp(
        0, 1
    )  # (d/2,) 0 = keep (fast pairs), 1 = interpolate (slow pairs)
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    omega = omega * (1 - ramp) + omega / s * ramp

    def mscale(x: float, m: float = 1.0) -> float:
        return 1.0 if x <= 1 else 0.1 * m * math.log(x) + 1.0

    if sc.get("attention_factor") is not None:
        att = float(sc["attention_factor"])
    elif sc.get("mscale") and sc.get("mscale_all_dim"):
        att = mscale(s, sc["mscale"]) / mscale(s, sc["mscale_all_dim"])
    else:
        att = mscale(s)
    return omega, att


def rope_frequencies(
    d: int, base: float = 10000.0, scaling: dict | None = None, length: int = 0
) -> tuple[torch.Tensor, float]:
    """The ``d/2`` angular frequencies ω_i (float64) and the cos/sin factor.

    ``length`` (the current length, largest position + 1) matters only for
    ``"dynamic"`` scaling.
    """
    if d < 2 or d % 2:
        raise ValueError(f"rope_frequencies: rotary width must be even, got {d}")
    sc = _check_scaling(scaling) or {"type": None}
    kind = sc["type"]
    if kind == "yarn":
        return _yarn(base, d, sc)
    if kind == "ntk":
        base = base * float(sc["factor"]) ** (d / (d - 2))
    if kind == "dynamic":
        L0, s = sc["original_max_position"], float(sc["factor"])
        L = max(int(length), L0)
        base = base * (s * L / L0 - (s - 1)) ** (d / (d - 2))
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    if kind == "linear":
        omega = omega / float(sc["factor"])
    return omega, 1.0


class RoPE(nn.Module):
    """Rotary position embedding of queries or keys ``x (B, H, T, Dh)``.

    Parameters
    ----------
    base : float
        ω_i = base^(-2i/d) with d the rotary width.
    layout : "half" or "interleaved"
        Which features form a rotated pair (see the module docstring).
    scaling : None or dict
        ``{"type": "linear"|"ntk"|"dynamic"|"yarn", "factor": s, ...}`` (module
        docstring); ``"dynamic"`` and ``"yarn"`` need ``"original_max_position"``.
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
        if isinstance(base, bool) or not isinstance(base, (int, float)):
            raise TypeError(f"RoPE: base must be a number, got {base!r}")
        if not base > 1 or not math.isfinite(base):
            raise ValueError(f"RoPE: base must be a finite number > 1, got {base}")
        if layout not in _LAYOUTS:
            raise ValueError(f"RoPE: layout must be one of {_LAYOUTS}, got {layout!r}")
        if not 0 < fraction <= 1:
            raise ValueError(f"RoPE: fraction must be in (0, 1], got {fraction}")
        self.base, self.layout, self.fraction = float(base), layout, float(fraction)
        self.scaling = _check_scaling(scaling)

    @property
    def cacheable(self) -> bool:
        """False for dynamic NTK: its frequencies change with the length seen."""
        return not (self.scaling and self.scaling["type"] == "dynamic")

    def extra_repr(self) -> str:
        return f"base={self.base}, layout={self.layout!r}, scaling={self.scaling}"

    def rotary_dim(self, d_head: int) -> int:
        d = int(d_head * self.fraction)
        if d < 2 or d % 2:
            raise ValueError(
                f"RoPE: rotary width int({d_head} * fraction {self.fraction}) = {d} "
                "must be even and >= 2"
            )
        return d

    def angles(self, positions: torch.Tensor, d: int) -> tuple[torch.Tensor, float]:
        """Angles ``positions[..., None] * ω`` (float64, (..., d/2)) and the factor."""
        length = int(positions.max()) + 1 if positions.numel() else 0
        omega, att = rope_frequencies(d, self.base, self.scaling, length)
        omega = omega.to(positions.device)
        return positions.to(torch.float64)[..., None] * omega, att  # (..., d/2)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Rotate ``x (B, H, T, Dh)``; ``positions`` (T,) or (B, T) integers."""
        if not isinstance(x, torch.Tensor) or not x.is_floating_point():
            raise TypeError("RoPE: x must be a floating-point tensor (B, H, T, Dh)")
        if x.dim() != 4:
            raise ValueError(
                f"RoPE: x must be (B, H, T, Dh), got shape {tuple(x.shape)}"
            )
        B, H, T, Dh = x.shape
        if positions.shape not in ((T,), (B, T)) or positions.is_floating_point():
            raise ValueError(
                f"RoPE: positions must be integers of shape ({T},) or ({B}, {T}), "
                f"got {positions.dtype} {tuple(positions.shape)}"
            )
        d = self.rotary_dim(Dh)
        theta, att = self.angles(positions, d)  # (T, d/2) or (B, T, d/2)
        if theta.dim() == 3:
            theta = theta[:, None]  # (B, 1, T, d/2)
        c = (torch.cos(theta) * att).to(x.dtype)
        s = (torch.sin(theta) * att).to(x.dtype)
        xr, rest = x[..., :d], x[..., d:]  # (B, H, T, d), (B, H, T, Dh - d)
        if self.layout == "interleaved":
            x0, x1 = xr[..., 0::2], xr[..., 1::2]  # (B, H, T, d/2) each
            out = torch.stack((x0 * c - x1 * s, x0 * s + x1 * c), -1).flatten(-2)
        else:
            x0, x1 = xr[..., : d // 2], xr[..., d // 2 :]  # (B, H, T, d/2) each
            out = torch.cat((x0 * c - x1 * s, x0 * s + x1 * c), -1)  # (B, H, T, d)
        return torch.cat((out, rest), -1)  # (B, H, T, Dh)


def alibi_slopes(n_heads: int) -> torch.Tensor:
    """ALiBi's head slopes (Press et al. 2022), float64 ``(H,)``.

    For H a power of two: ``2^(-8h/H)``, h = 1..H. Otherwise the slopes of the
    nearest lower power of two, then every other slope of the next power of two.
    """
    if isinstance(n_heads, bool) or not isinstance(n_heads, int) or n_heads < 1:
        raise ValueError(
            f"alibi_slopes: n_heads must be a positive int, got {n_heads!r}"
        )

    def powers(n: int) -> list[float]:
        return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

    p = 2 ** math.floor(math.log2(n_heads))
    slopes = powers(p) + powers(2 * p)[0::2][: n_heads - p]
    return torch.tensor(slopes, dtype=torch.float64)


def alibi_bias(
    n_heads: int, q_pos: torch.Tensor, k_pos: torch.Tensor, dtype=torch.float32
) -> torch.Tensor:
    """ALiBi's additive bias ``-m_h·|i - j|``, shape ``(H, T, S)``."""
    dist = (q_pos[:, None] - k_pos[None, :]).abs().to(torch.float64)  # (T, S)
    m = alibi_slopes(n_heads).to(q_pos.device)  # (H,)
    return (-m[:, None, None] * dist).to(dtype)  # (H, T, S)
