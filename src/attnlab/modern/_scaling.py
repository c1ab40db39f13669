"""RoPE's frequencies under each context-extension scaling (linear, NTK, dynamic NTK,
YaRN, Llama 3.1, LongRoPE) and the check of a ``scaling`` dict; the formulas are in
:mod:`attnlab.modern.rope`'s docstring.

Part of :mod:`attnlab.modern`; import :func:`rope_frequencies` from there.
"""

from __future__ import annotations

import math

import torch

from .. import validation as V

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
    "llama3": {
        "factor",
        "original_max_position",
        "low_freq_factor",
        "high_freq_factor",
    },
    "longrope": {
        "factor",
        "original_max_position",
        "short_factor",
        "long_factor",
        "attention_factor",
    },
}


_REQUIRED = {
    "linear": {"factor"},
    "ntk": {"factor"},
    "dynamic": {"factor", "original_max_position"},
    "yarn": {"factor", "original_max_position"},
    "llama3": {
        "factor",
        "original_max_position",
        "low_freq_factor",
        "high_freq_factor",
    },
    "longrope": {"factor", "original_max_position", "short_factor", "long_factor"},
}


LENGTH_DEPENDENT = ("dynamic", "longrope")


def check_scaling(scaling) -> dict | None:
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
    V.real(scaling["factor"], "scaling['factor']", "RoPE", low=1.0)
    if "original_max_position" in scaling:
        V.integer(
            scaling["original_max_position"],
            "scaling['original_max_position']",
            "RoPE",
            low=1,
        )
    if kind == "llama3":
        low = V.real(scaling["low_freq_factor"], "scaling['low_freq_factor']", "RoPE")
        high = V.real(
            scaling["high_freq_factor"], "scaling['high_freq_factor']", "RoPE"
        )
        if not 0 < low < high:
            raise ValueError(
                "RoPE: llama3 scaling needs 0 < low_freq_factor < high_freq_factor, "
                f"got {low}, {high}"
            )
    if kind == "longrope":
        for key in ("short_factor", "long_factor"):
            f = scaling[key]
            if not isinstance(f, (list, tuple)) or not f:
                raise TypeError(
                    f"RoPE: scaling[{key!r}] must be a list of numbers (one per "
                    f"rotated pair), got {f!r}"
                )
            for x in f:
                V.real(x, f"scaling[{key!r}] entries", "RoPE", low=0, open_low=True)
    if scaling.get("attention_factor") is not None:
        V.real(
            scaling["attention_factor"],
            "scaling['attention_factor']",
            "RoPE",
            low=0,
            open_low=True,
        )
    return dict(scaling)


def _llama3(base: float, d: int, sc: dict) -> torch.Tensor:
    """Llama 3.1's frequencies (float64): slow pairs divided by the factor, fast ones
    kept, a smooth mix between (transformers' ``_compute_llama3_parameters``)."""
    s, L0 = float(sc["factor"]), sc["original_max_position"]
    low_f, high_f = float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    wavelen = 2 * math.pi / omega  # (d/2,)
    slow = wavelen > L0 / low_f  # longer than the low-frequency wavelength
    fast = wavelen < L0 / high_f
    smooth = (L0 / wavelen - low_f) / (high_f - low_f)  # (d/2,) 0 -> slow, 1 -> fast
    mixed = (1 - smooth) * omega / s + smooth * omega
    return torch.where(slow, omega / s, torch.where(fast, omega, mixed))


def _longrope(base: float, d: int, sc: dict, length: int) -> tuple[torch.Tensor, float]:
    """LongRoPE's frequencies (float64) for the current ``length`` and its factor."""
    s, L0 = float(sc["factor"]), sc["original_max_position"]
    key = "long_factor" if length > L0 else "short_factor"
    if len(sc[key]) != d // 2:
        raise ValueError(
            f"RoPE: scaling[{key!r}] has {len(sc[key])} entries, the rotary width "
            f"{d} needs {d // 2}"
        )
    ext = torch.tensor([float(x) for x in sc[key]], dtype=torch.float64)  # (d/2,)
    omega = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d) / ext
    if sc.get("attention_factor") is not None:
        att = float(sc["attention_factor"])
    else:
        att = 1.0 if s <= 1 else math.sqrt(1 + math.log(s) / math.log(L0))
    return omega, att


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
    ``"dynamic"`` and ``"longrope"`` scaling.
    """
    d = V.integer(d, "d", "rope_frequencies", low=2)
    base = V.real(base, "base", "rope_frequencies", low=1.0, open_low=True)
    length = V.integer(length, "length", "rope_frequencies", low=0)
    if d % 2:
        raise ValueError(f"rope_frequencies: rotary width d must be even, got {d}")
    sc = check_scaling(scaling) or {"type": None}
    kind = sc["type"]
    if kind == "yarn":
        return _yarn(base, d, sc)
    if kind == "llama3":
        return _llama3(base, d, sc), 1.0
    if kind == "longrope":
        return _longrope(base, d, sc, int(length))
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
