"""Multi-head latent attention (MLA, DeepSeek-V2 2024 and DeepSeek-V3).

Each token stores one latent ``c = RMSNorm(x W_dkv)`` of width ``d_c`` and one
shared RoPE key ``k_r = RoPE(x W_kr)`` of width ``d_r``: ``d_c + d_r`` numbers per
token and layer (576 in DeepSeek-V3, where 128 MHA heads of width 128 would cache
32 768). Head h's key is ``[c W_uk^h, k_r]`` and its value ``c W_uv^h``; its query
``[q_n^h, RoPE(q_r^h)]``.

``absorb=True`` computes the same thing without expanding the keys and values:
``q_n^h · (c W_uk^h) = (q_n^h W_uk^hᵀ) · c``, so the query is moved into the
latent space once and every head attends directly over the cached latents, like
multi-query attention with a ``d_c + d_r`` wide head; ``W_uv`` is applied after the
weighted sum. The RoPE part cannot be absorbed: a rotation that depends on the key's
position sits between W_uk and the query, hence the decoupled RoPE key.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from .. import validation as V
from ..masking import position_mask
from ._parts import (
    Cache,
    RMSNorm,
    attend,
    merge_attn_mask,
    position_ids_of,
    rope_embeddings,
    same_dtype_as_weights,
)
from .rope import RoPE

__all__ = ["LatentAttention"]


def deepseek_scale(d_qk: int, rope: RoPE) -> float:
    """The default softmax scale of MLA: ``d_qk ** -0.5``, and with YaRN DeepSeek's
    ``mscale(s, mscale_all_dim)²`` on top (the whole score, not only its RoPE part).

    Without ``mscale_all_dim`` YaRN's factor would multiply only the decoupled RoPE
    part of the scores (through cos/sin), which no model does: refused.
    """
    sc = rope.scaling
    if not sc or sc["type"] != "yarn":
        return d_qk**-0.5
    if not sc.get("mscale_all_dim"):
        raise ValueError(
            "LatentAttention: with YaRN, DeepSeek multiplies the whole softmax scale "
            "by mscale(factor, mscale_all_dim)**2; this RoPE has no "
            "scaling['mscale_all_dim'], so YaRN's factor would scale only the "
            "rope_dim part of each score. Give mscale and mscale_all_dim (DeepSeek-V3: "
            "both 1) or an explicit scale"
        )
    s, m = float(sc["factor"]), float(sc["mscale_all_dim"])
    mscale = 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0
    return d_qk**-0.5 * mscale * mscale


class LatentAttention(nn.Module):
    """Multi-head latent attention; ``forward(x, attn_mask, position_ids, cache)``.

    Parameters
    ----------
    embed_dim, num_heads : int
        D and H.
    kv_rank : int
        d_c, the width of the cached latent.
    q_rank : int, optional
        Width of the query's own low-rank bottleneck (DeepSeek-V3: 1536); None = a
        plain query projection.
    nope_dim, rope_dim, v_dim : int
        Per head: the key/query part without position (128), the decoupled RoPE part
        (64) and the value width (128) in DeepSeek-V3.
    rope : RoPE, optional
        Applied to the ``rope_dim`` part (default ``RoPE()``).
    absorb : bool
        Compute scores and outputs in the latent space (the decode path).
    scale : float, optional
        Score scale, default ``(nope_dim + rope_dim) ** -0.5``, times DeepSeek's
        ``mscale(factor, mscale_all_dim)²`` with a YaRN ``rope`` (one without
        ``mscale_all_dim`` is refused unless ``scale`` is given).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        *,
        kv_rank: int,
        q_rank: int | None = None,
        nope_dim: int,
        rope_dim: int,
        v_dim: int,
        rope: RoPE | None = None,
        absorb: bool = False,
        scale: float | None = None,
        causal: bool = True,
        norm_eps: float = 1e-6,
    ) -> None:
        super().__init__()
        fn = "LatentAttention"
        D = V.integer(embed_dim, "embed_dim", fn, low=1)
        H = V.integer(num_heads, "num_heads", fn, low=1)
        dc = V.integer(kv_rank, "kv_rank", fn, low=1)
        dn, dr = (
            V.integer(nope_dim, "nope_dim", fn, low=1),
            V.integer(rope_dim, "rope_dim", fn, low=1),
        )
        dv = V.integer(v_dim, "v_dim", fn, low=1)
        absorb, causal = V.flag(absorb, "absorb", fn), V.flag(causal, "causal", fn)
        scale = V.real(scale, "scale", fn, low=0.0, open_low=True, optional=True)
        norm_eps = V.real(norm_eps, "norm_eps", fn, low=0.0)
        if dr % 2:
            raise ValueError(f"LatentAttention: rope_dim must be even, got {dr}")
        rope = RoPE() if rope is None else rope
        if not isinstance(rope, RoPE):
            raise TypeError(f"LatentAttention: rope must be a RoPE, got {rope!r}")
        if rope.fraction != 1.0:
            raise ValueError(
                "LatentAttention: rope.fraction must be 1 (rope_dim rotates)"
            )
        self.embed_dim, self.num_heads = D, H
        self.kv_rank, self.nope_dim, self.rope_dim, self.v_dim = dc, dn, dr, dv
        self.rope, self.absorb, self.causal = rope, bool(absorb), bool(causal)
        self.scale = deepseek_scale(dn + dr, rope) if scale is None else float(scale)
        if q_rank is None:
            self.q_proj: nn.Module = nn.Linear(D, H * (dn + dr), bias=False)
        else:
            dq = V.integer(q_rank, "q_rank", fn, low=1)
            self.q_proj = nn.Sequential(
                nn.Linear(D, dq, bias=False),
                RMSNorm(dq, norm_eps),
                nn.Linear(dq, H * (dn + dr), bias=False),
            )
        self.kv_down = nn.Linear(D, dc + dr, bias=False)  # -> [c, k_r]
        self.kv_norm = RMSNorm(dc, norm_eps)
        self.kv_up = nn.Linear(dc, H * (dn + dv), bias=False)  # per head [W_uk, W_uv]
        self.o_proj = nn.Linear(H * dv, D, bias=False)

    def cache_width(self) -> int:
        """Numbers cached per token: ``kv_rank + rope_dim``."""
        return self.kv_rank + self.rope_dim

    def forward(
        self,
        x: torch.Tensor,
        attn_mask: torch.Tensor | None = None,
        position_ids: torch.Tensor | None = None,
        cache: Cache | None = None,
        *,
        return_weights: bool = False,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
    ):
        """``x (B, T, D)`` -> ``(B, T, D)``; masks, positions and
        ``position_embeddings`` (for the ``rope_dim`` part) as in ``Attention``."""
        V.floating(x, "x (B, T, D)", "LatentAttention")
        same_dtype_as_weights(x, self.o_proj.weight, "LatentAttention")
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"LatentAttention: x must be (B, T, {self.embed_dim}), got "
                f"{tuple(x.shape)}"
            )
        if cache is not None and not isinstance(cache, Cache):
            raise TypeError(
                f"LatentAttention: cache must be a Cache, got {type(cache)}"
            )
        if cache is not None and not self.rope.cacheable:
            raise ValueError(
                f"LatentAttention: {self.rope.kind_name} RoPE cannot be cached"
            )
        B, T, D = x.shape
        H, dc, dn, dr, dv = (
            self.num_heads,
            self.kv_rank,
            self.nope_dim,
            self.rope_dim,
            self.v_dim,
        )
        past = 0 if cache is None else cache.length
        pos = position_ids_of(position_ids, past, B, T, x.device)  # (T,)
        q = self.q_proj(x).view(B, T, H, dn + dr).transpose(1, 2)  # (B, H, T, dn+dr)
        cos, sin = rope_embeddings(
            self.rope, position_embeddings, pos, dr, x.dtype, "LatentAttention"
        )  # once for the queries and the shared key
        q_n, q_r = (
            q[..., :dn],
            self.rope.rotate(q[..., dn:], cos, sin),
        )  # (.., dn), (.., dr)
        ckr = self.kv_down(x)  # (B, T, dc + dr)
        c = self.kv_norm(ckr[..., :dc])  # (B, T, dc)
        k_r = self.rope.rotate(ckr[:, None, :, dc:], cos, sin)  # (B, 1, T, dr)
        k_r = k_r[:, 0]  # (B, T, dr)
        k_pos = pos
        if cache is not None:
            c, k_r, k_pos = cache.append(c, k_r, pos)  # (B, S, dc), (B, S, dr), (S,)
        S = c.shape[-2]
        mask = merge_attn_mask(
            position_mask(pos, k_pos, causal=self.causal, window=None), attn_mask, T, S
        )
        w = self.kv_up.weight.view(H, dn + dv, dc)  # (H, dn+dv, dc)
        w_uk, w_uv = w[:, :dn], w[:, dn:]  # (H, dn, dc), (H, dv, dc)
        if self.absorb:
            q_lat = q_n @ w_uk  # (B, H, T, dn) @ (H, dn, dc) -> (B, H, T, dc)
            q_cat = torch.cat((q_lat, q_r), -1)  # (B, H, T, dc + dr)
            kv = torch.cat((c, k_r), -1)[:, None]  # (B, 1, S, dc + dr): one shared head
            # (B, H, T, dc), (B, H, T, S)
            o_lat, weights = attend(q_cat, kv, c[:, None], mask, scale=self.scale)
            out = o_lat @ w_uv.transpose(-2, -1)  # (B, H, T, dc) @ (H, dc, dv)
        else:
            # (B, H, S, dn+dv)
            kv = self.kv_up(c).view(B, S, H, dn + dv).transpose(1, 2)
            k = torch.cat((kv[..., :dn], k_r[:, None].expand(B, H, S, dr)), -1)
            v = kv[..., dn:]  # (B, H, S, dv)
            q_cat = torch.cat((q_n, q_r), -1)  # (B, H, T, dn + dr)
            out, weights = attend(q_cat, k, v, mask, scale=self.scale)  # (B, H, T, dv)
        out = self.o_proj(out.transpose(1, 2).reshape(B, T, H * dv))  # (B, T, D)
        return (out, weights) if return_weights else out

    @classmethod
    def from_hf(cls, module: nn.Module, *, absorb: bool = False) -> LatentAttention:
        """Copy transformers' ``DeepseekV3Attention`` (its q, kv, o projections)."""
        from .hf import latent_from_hf

        return latent_from_hf(cls, module, absorb=absorb)
