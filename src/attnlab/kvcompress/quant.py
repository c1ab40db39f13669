"""Quantised keys and values (see the package)."""

from __future__ import annotations

import torch

from .. import validation as _v
from ..modern.attention import Cache

_PER = ("token", "channel")


def _check_quant(x, bits, per, group, fn):
    t = _v.floating(x, "x", fn, min_dim=2)
    if t.shape[-1] == 0 or t.shape[-2] == 0:
        raise ValueError(f"{fn}: x (..., T, C) needs T, C >= 1, got {tuple(t.shape)}")
    nb = _v.integer(bits, "bits", fn, low=1, high=8)
    if per not in _PER:
        raise ValueError(f"{fn}: per must be 'token' or 'channel', got {per!r}")
    g = _v.integer(group, "group", fn, low=1, optional=True)
    return t, nb, g


def quantize(
    x: torch.Tensor, bits: int, *, per: str, group: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Asymmetric min-max quantisation of ``x (..., T, C)`` to ``bits`` (1-8) bits.

    ``per="token"``: one scale and zero point per token (min and max over its ``C``
    channels); ``per="channel"``: one per channel, over the tokens (in groups of
    ``group`` consecutive tokens; None = all ``T`` at once). Returns ``codes`` (uint8,
    the shape of x), ``scale`` and ``zero`` (broadcastable to x), with
    ``x ≈ codes · scale + zero`` and ``|x - that| <= scale / 2``."""
    fn = "quantize"
    t, nb, g = _check_quant(x, bits, per, group, fn)
    f = torch.promote_types(t.dtype, torch.float32)
    xf = t.to(f)
    T = xf.shape[-2]
    if per == "token":
        lo = xf.amin(-1, keepdim=True)  # (..., T, 1)
        hi = xf.amax(-1, keepdim=True)
    else:
        gs = T if g is None else min(g, T)
        n = -(-T // gs)  # groups
        pad = n * gs - T
        xp = torch.cat((xf, xf[..., -1:, :].expand(*xf.shape[:-2], pad, -1)), -2)
        xp = xp.reshape(*xf.shape[:-2], n, gs, xf.shape[-1])  # (..., n, gs, C)
        lo = xp.amin(-2, keepdim=True).repeat_interleave(gs, -2)  # (..., n, gs, C)
        hi = xp.amax(-2, keepdim=True).repeat_interleave(gs, -2)
        lo = lo.reshape(*xf.shape[:-2], n * gs, -1)[..., :T, :]  # (..., T, C)
        hi = hi.reshape(*xf.shape[:-2], n * gs, -1)[..., :T, :]
    levels = 2**nb - 1
    scale = (hi - lo) / levels
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))  # constant group
    codes = torch.round((xf - lo) / scale).clamp_(0, levels).to(torch.uint8)
    return codes, scale, lo


def dequantize(
    codes: torch.Tensor, scale: torch.Tensor, zero: torch.Tensor
) -> torch.Tensor:
    """``codes · scale + zero`` (in the scale's dtype)."""
    fn = "dequantize"
    c = _v.tensor(codes, "codes", fn)
    if c.dtype != torch.uint8:
        raise TypeError(f"{fn}: codes must be uint8 (from quantize), got {c.dtype}")
    s = _v.floating(scale, "scale", fn)
    z = _v.floating(zero, "zero", fn)
    for t, name in ((s, "scale"), (z, "zero")):
        try:
            if torch.broadcast_shapes(t.shape, c.shape) != c.shape:
                raise RuntimeError
        except RuntimeError:
            raise ValueError(
                f"{fn}: {name} {tuple(t.shape)} must broadcast to codes "
                f"{tuple(c.shape)}"
            ) from None
    return c.to(s.dtype) * s + z


def fake_quantize(
    x: torch.Tensor, bits: int, *, per: str, group: int | None = None
) -> torch.Tensor:
    """``dequantize(*quantize(x, ...))`` in x's dtype: what the cache would return."""
    t = _v.floating(x, "x", "fake_quantize", min_dim=2)
    return dequantize(*quantize(t, bits, per=per, group=group)).to(t.dtype)


class QuantCache(Cache):
    """A :class:`attnlab.modern.Cache` that stores keys and values quantised.

    ``key_bits``/``value_bits`` (None = keep float), ``key_per``/``value_per``
    (``"token"`` or ``"channel"``; KIVI: keys per channel, values per token),
    ``group``: tokens per channel group. Each ``append`` quantises the block it is
    given as one unit (a prefill of the whole text: channel statistics over it)."""

    def __init__(
        self,
        key_bits: int | None,
        value_bits: int | None,
        *,
        key_per: str = "channel",
        value_per: str = "token",
        group: int | None = None,
    ) -> None:
        super().__init__()
        fn = "QuantCache"
        self.key_bits = _v.integer(
            key_bits, "key_bits", fn, low=1, high=8, optional=True
        )
        self.value_bits = _v.integer(
            value_bits, "value_bits", fn, low=1, high=8, optional=True
        )
        for name, per in (("key_per", key_per), ("value_per", value_per)):
            if per not in _PER:
                raise ValueError(
                    f"{fn}: {name} must be 'token' or 'channel', got {per!r}"
                )
        self.key_per, self.value_per = key_per, value_per
        self.group = _v.integer(group, "group", fn, low=1, optional=True)

    def append(self, a, b, positions):
        if self.key_bits is not None:
            a = fake_quantize(a, self.key_bits, per=self.key_per, group=self.group)
        if self.value_bits is not None:
            b = fake_quantize(b, self.value_bits, per=self.value_per, group=self.group)
        return super().append(a, b, positions)


def channel_outliers(keys: torch.Tensor) -> torch.Tensor:
    """How uneven the channels are: ``keys (..., T, C)`` -> ``(...)`` the largest
    channel's mean ``|k|`` over the median channel's (1 = even; KIVI reports a few
    channels many times larger than the rest in LLMs' keys)."""
    t = _v.floating(keys, "keys", "channel_outliers", min_dim=2)
    if t.shape[-1] == 0 or t.shape[-2] == 0:
        raise ValueError(
            f"channel_outliers: keys (..., T, C) needs T, C >= 1, got {tuple(t.shape)}"
        )
    mag = t.abs().to(torch.promote_types(t.dtype, torch.float32)).mean(-2)  # (..., C)
    med = mag.median(-1).values.clamp_min(torch.finfo(mag.dtype).tiny)
    return mag.amax(-1) / med
