"""The pieces of ``modern.Attention`` that ``LatentAttention`` shares: the RMSNorm, the
per-layer :class:`Cache`, the readable softmax core :func:`attend` (the "eager" path),
and the checks of sizes, masks, positions and RoPE's cos/sin.

Part of :mod:`attnlab.modern`; import the public names from there.
"""

from __future__ import annotations

import torch
from torch import nn

from .. import validation as V
from ..mappings.basic import upcast
from .rope import RoPE


def same_dtype_as_weights(x: torch.Tensor, w: torch.Tensor, fn: str) -> None:
    """TypeError unless ``x`` has the layer's dtype (metadata only), as a matmul of the
    two would refuse it from inside torch."""
    if x.dtype != w.dtype:
        raise TypeError(
            f"{fn}: x is {x.dtype} but the layer's weights are {w.dtype}; convert one "
            f"(layer.to({x.dtype}) or x.to({w.dtype}))"
        )


class RMSNorm(nn.Module):
    """``x / sqrt(mean(x²) + eps) · weight`` over the last dimension."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        dim = V.integer(dim, "dim", "RMSNorm", low=1)
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = V.real(eps, "eps", "RMSNorm", low=0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        V.floating(x, "x", "RMSNorm", min_dim=1)
        if x.shape[-1] != self.weight.shape[0]:
            raise ValueError(
                f"RMSNorm: x must end in its width {self.weight.shape[0]}, got shape "
                f"{tuple(x.shape)}"
            )
        x32 = upcast(x)
        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.to(y.dtype)).to(x.dtype)


class Cache:
    """A per-layer decoding cache: two tensors grown along the sequence (dim -2).

    ``Attention`` keeps rotated keys ``(B, G, S, Dh)`` and values; ``LatentAttention``
    keeps the latent ``(B, S, d_c)`` and the shared RoPE key ``(B, S, d_r)``.
    """

    def __init__(self) -> None:
        self.first: torch.Tensor | None = None
        self.second: torch.Tensor | None = None
        self.positions: torch.Tensor | None = None  # (S,) the cached tokens' positions

    @property
    def length(self) -> int:
        return 0 if self.first is None else self.first.shape[-2]

    def append(self, a: torch.Tensor, b: torch.Tensor, positions: torch.Tensor):
        """Add (…, T, ·) tensors at ``positions (T,)``; return the whole cache."""
        if self.first is None:
            self.first, self.second, self.positions = a, b, positions
        else:
            self.first = torch.cat((self.first, a), -2)
            self.second = torch.cat((self.second, b), -2)  # type: ignore[arg-type]
            self.positions = torch.cat((self.positions, positions))  # type: ignore[arg-type]
        return self.first, self.second, self.positions

    def nbytes_per_token(self) -> int:
        """Bytes the cache holds per token and sequence (both tensors)."""
        if self.first is None or self.second is None:
            return 0
        per = 0
        for t in (self.first, self.second):
            per += t.numel() // (t.shape[0] * t.shape[-2]) * t.element_size()
        return per


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    allowed: torch.Tensor | None,
    *,
    scale: float,
    bias: torch.Tensor | None = None,
    softcap: float | None = None,
    sink: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention with the 2026 options; returns (output, weights).

    ``q (B, H, T, Dq)``, ``k (B, H, S, Dq)``, ``v (B, H, S, Dv)``; ``allowed``
    boolean (True = may attend) broadcastable to (B, H, T, S), or a float mask added
    to the scores. Order as in Gemma 2 and gpt-oss: ``scale·q·k``, soft-cap
    ``c·tanh(s/c)``, add bias and mask, then the softmax over the keys and, with
    ``sink (H,)``, one extra logit per head whose mass is dropped. A row with no
    allowed key (and no sink) gets zero weights and a zero output, never NaN.
    """
    scores = (q @ k.transpose(-2, -1)) * scale  # (B, H, T, Dq) @ (B, H, Dq, S)
    if softcap is not None:
        scores = softcap * torch.tanh(scores / softcap)  # (B, H, T, S)
    if bias is not None:
        scores = scores + bias  # (B, H, T, S)
    if allowed is not None:
        if allowed.dtype == torch.bool:
            scores = scores.masked_fill(~allowed, float("-inf"))
        else:
            scores = scores + allowed
    m = scores.amax(-1, keepdim=True)  # (B, H, T, 1)
    if sink is not None:
        s = sink.to(scores.dtype)[None, :, None, None]  # (1, H, 1, 1)
        m = torch.maximum(m, s)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m)).detach()
    e = torch.exp(scores - m)  # (B, H, T, S); exp(-inf) = 0
    den = e.sum(-1, keepdim=True)  # (B, H, T, 1)
    if sink is not None:
        den = den + torch.exp(s - m)
    weights = e / torch.where(den > 0, den, torch.ones_like(den))  # (B, H, T, S)
    return weights @ v, weights  # (B, H, T, S) @ (B, H, S, Dv) -> (B, H, T, Dv)


def merge_attn_mask(mask: torch.Tensor | None, attn_mask, T: int, S: int):
    if attn_mask is None:
        return mask
    if not isinstance(attn_mask, torch.Tensor):
        raise TypeError(f"attn_mask must be a tensor, got {type(attn_mask).__name__}")
    if attn_mask.shape[-2:] != (T, S):
        raise ValueError(
            f"attn_mask must end in (T, S) = ({T}, {S}) (True = may attend), got "
            f"{tuple(attn_mask.shape)}"
        )
    if mask is None:
        return attn_mask
    if attn_mask.dtype == torch.bool:
        return attn_mask & mask
    return attn_mask.masked_fill(~mask, float("-inf"))


def position_ids_of(position_ids, past: int, B: int, T: int, device) -> torch.Tensor:
    if position_ids is None:
        return torch.arange(past, past + T, device=device)  # (T,)
    if not isinstance(position_ids, torch.Tensor) or position_ids.is_floating_point():
        raise TypeError("position_ids must be an integer tensor (T,) or (B, T)")
    if position_ids.shape not in ((T,), (B, T)):
        raise ValueError(
            f"position_ids must have shape ({T},) or ({B}, {T}), got "
            f"{tuple(position_ids.shape)}"
        )
    if position_ids.dim() == 2 and not bool((position_ids == position_ids[:1]).all()):
        raise ValueError("position_ids (B, T) must be the same for every sequence")
    if V.debugging() and bool((position_ids < 0).any()):  # a value scan: debug only
        raise ValueError("position_ids must be >= 0")
    return position_ids if position_ids.dim() == 1 else position_ids[0]  # (T,)


def rope_embeddings(
    rope: RoPE,
    given: tuple[torch.Tensor, torch.Tensor] | None,
    pos: torch.Tensor,
    d_head: int,
    dtype: torch.dtype,
    fn: str,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cos, sin)`` for ``pos``: the ``given`` ones (checked from their shapes) or
    computed once here."""
    if given is None:
        return rope.cos_sin(pos, d_head, dtype)
    half = rope.rotary_dim(d_head) // 2
    if (
        not isinstance(given, tuple)
        or len(given) != 2
        or not all(isinstance(t, torch.Tensor) for t in given)
    ):
        raise TypeError(f"{fn}: position_embeddings must be a (cos, sin) tuple")
    cos, sin = given
    if cos.shape != sin.shape or cos.shape[-2:] != (pos.shape[-1], half):
        raise ValueError(
            f"{fn}: position_embeddings must end in (T, rotary_dim/2) = "
            f"({pos.shape[-1]}, {half}), got {tuple(cos.shape)} and {tuple(sin.shape)}"
        )
    return cos.to(dtype), sin.to(dtype)
