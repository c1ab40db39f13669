"""The attention layer of a 2026 decoder LLM, one switch per trick.

``Attention(embed_dim, num_heads, num_kv_heads, *, rope, alibi, qk_norm, softcap,
sink, output_gate, window)`` covers, by its switches, the attention layers of
Llama 3 (RoPE, GQA), Qwen3 (QK-norm), Gemma 2 (logit soft-cap, sliding window),
gpt-oss (learned sink logits, window), Qwen3-Next (sigmoid output gate, partial
RoPE) and BLOOM (ALiBi); ``from_hf`` copies the weights of the matching
``transformers`` layer. ``forward`` is causal and takes a :class:`Cache` for
decoding one token at a time.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
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
from .rope import RoPE, alibi_bias

__all__ = ["Attention", "Cache", "RMSNorm", "attend", "IMPLEMENTATIONS"]

# the attention implementations, chosen per layer as transformers' attn_implementation
IMPLEMENTATIONS = ("sdpa", "eager")


class Attention(nn.Module):
    """Causal multi-head attention with the switches of 2026's decoder LLMs.

    Parameters
    ----------
    embed_dim, num_heads : int
        D and H. ``head_dim`` (keyword) defaults to D / H.
    num_kv_heads : int, optional
        G key/value heads shared by H / G query heads each (GQA; 1 = MQA).
    rope : RoPE, optional
        Rotary position embedding of queries and keys.
    alibi : bool
        Add ALiBi's ``-m_h·(i - j)`` to the scores (Press et al. 2022).
    qk_norm : bool
        RMSNorm over each head's query and key before RoPE (Qwen3, Gemma 3). OLMo 2
        normalises differently: one RMSNorm over the whole query projection (width
        H·Dh) and one over the whole key projection, before the split into heads,
        so its statistics mix the heads; this switch does not do that.
    softcap : float, optional
        Scores become ``c·tanh(s/c)`` (Gemma 2 uses c = 50).
    sink : bool
        A learned logit per head joins the softmax; its mass is dropped (gpt-oss).
    output_gate : bool
        Head outputs times ``sigmoid(x W_g)`` before W_o (Qwen3-Next).
    window : int, optional
        A query at i sees keys j with ``i - j < window`` (sliding window).
    scale, bias, causal, norm_eps : keyword
        Score scale (default ``head_dim ** -0.5``), biases on the projections,
        causal masking (default True), the QK-norm epsilon.
    attn_implementation : keyword, ``"sdpa"`` or ``"eager"``
        ``"sdpa"`` (default) computes through ``F.scaled_dot_product_attention``
        (GQA without copying the keys) whenever it can; ``"eager"`` always runs the
        readable :func:`attend`. :meth:`why_not_fast_path` says why a call falls back
        to eager (weights asked for, soft-cap, sinks, a hook).
    """

    def __init__(
        self,
        embed_dim: int,
        num_heads: int,
        num_kv_heads: int | None = None,
        *,
        rope: RoPE | None = None,
        alibi: bool = False,
        qk_norm: bool = False,
        softcap: float | None = None,
        sink: bool = False,
        output_gate: bool = False,
        window: int | None = None,
        head_dim: int | None = None,
        scale: float | None = None,
        bias: bool = False,
        causal: bool = True,
        norm_eps: float = 1e-6,
        attn_implementation: str = "sdpa",
    ) -> None:
        super().__init__()
        self.attn_implementation = V.choice(
            attn_implementation, IMPLEMENTATIONS, "attn_implementation", "Attention"
        )
        self.last_path = ""  # the path the last forward took, or why not the fast one
        D = V.integer(embed_dim, "embed_dim", "Attention", low=1)
        H = V.integer(num_heads, "num_heads", "Attention", low=1)
        G = (
            H
            if num_kv_heads is None
            else V.integer(num_kv_heads, "num_kv_heads", "Attention", low=1)
        )
        if H % G:
            raise ValueError(
                f"Attention: num_heads ({H}) must be a multiple of num_kv_heads ({G})"
            )
        if head_dim is None:
            if D % H:
                raise ValueError(
                    f"Attention: embed_dim ({D}) must be divisible by num_heads ({H}) "
                    "or head_dim given"
                )
            head_dim = D // H
        Dh = V.integer(head_dim, "head_dim", "Attention", low=1)
        if rope is not None and not isinstance(rope, RoPE):
            raise TypeError(f"Attention: rope must be a RoPE or None, got {rope!r}")
        if rope is not None:
            rope.rotary_dim(Dh)  # fails now if the head is too narrow
        fn = "Attention"
        softcap = V.real(softcap, "softcap", fn, low=0.0, open_low=True, optional=True)
        window = V.integer(window, "window", fn, low=1, optional=True)
        scale = V.real(scale, "scale", fn, low=0.0, open_low=True, optional=True)
        alibi, qk_norm = V.flag(alibi, "alibi", fn), V.flag(qk_norm, "qk_norm", fn)
        sink = V.flag(sink, "sink", fn)
        output_gate = V.flag(output_gate, "output_gate", fn)
        bias, causal = V.flag(bias, "bias", fn), V.flag(causal, "causal", fn)
        norm_eps = V.real(norm_eps, "norm_eps", fn, low=0.0)
        self.embed_dim, self.num_heads, self.num_kv_heads, self.head_dim = D, H, G, Dh
        self.rope, self.alibi, self.softcap, self.window = (
            rope,
            bool(alibi),
            softcap,
            window,
        )
        self.causal = bool(causal)
        self.scale = Dh**-0.5 if scale is None else float(scale)
        self.q_proj = nn.Linear(D, H * Dh, bias=bias)
        self.k_proj = nn.Linear(D, G * Dh, bias=bias)
        self.v_proj = nn.Linear(D, G * Dh, bias=bias)
        self.o_proj = nn.Linear(H * Dh, D, bias=bias)
        self.q_norm = RMSNorm(Dh, norm_eps) if qk_norm else None
        self.k_norm = RMSNorm(Dh, norm_eps) if qk_norm else None
        self.sinks = nn.Parameter(torch.zeros(H)) if sink else None
        self.gate_proj = nn.Linear(D, H * Dh, bias=bias) if output_gate else None
        self.record_max_logit = False  # True: keep max |scale·q·k| (before soft-cap)
        self.max_logit = float("nan")

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
        """``x (B, T, D)`` -> ``(B, T, D)`` (and the weights (B, H, T, S) if asked).

        ``attn_mask``: boolean ending in (T, S), True = may attend (combined with the
        causal and window masks), or float, added. ``position_ids``: (T,) or (B, T)
        integers, default ``cache.length + arange(T)``. ``cache``: a :class:`Cache`
        that this call extends with the new keys and values.
        ``position_embeddings``: the ``(cos, sin)`` of ``self.rope.cos_sin(position_ids,
        head_dim, x.dtype)``, computed once by a model for all its layers (as
        transformers passes them down); by default the layer computes them once, for
        its queries and keys together. No path reads a tensor back to the host, except
        dynamic NTK RoPE (its length) and (B, T) ``position_ids`` (equal rows).
        """
        V.floating(x, "x (B, T, D)", "Attention")
        same_dtype_as_weights(x, self.q_proj.weight, "Attention")
        if x.dim() != 3 or x.shape[-1] != self.embed_dim:
            raise ValueError(
                f"Attention: x must be (B, T, {self.embed_dim}), got {tuple(x.shape)}"
            )
        if cache is not None and not isinstance(cache, Cache):
            raise TypeError(
                f"Attention: cache must be a Cache, got {type(cache).__name__}"
            )
        if cache is not None and self.rope is not None and not self.rope.cacheable:
            raise ValueError(
                f"Attention: {self.rope.kind_name} RoPE cannot be cached: its "
                "frequencies depend on the current length, so cached keys were "
                "rotated with other ones"
            )
        B, T, D = x.shape
        H, G, Dh = self.num_heads, self.num_kv_heads, self.head_dim
        past = 0 if cache is None else cache.length
        pos = position_ids_of(position_ids, past, B, T, x.device)
        q = self.q_proj(x).view(B, T, H, Dh)  # (B, T, H, Dh)
        k = self.k_proj(x).view(B, T, G, Dh)  # (B, T, G, Dh)
        v = self.v_proj(x).view(B, T, G, Dh).transpose(1, 2)  # (B, G, T, Dh)
        if self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)  # (B, H, T, Dh), (B, G, T, Dh)
        if self.rope is not None:
            cos, sin = rope_embeddings(
                self.rope, position_embeddings, pos, Dh, x.dtype, "Attention"
            )
            q, k = self.rope.rotate(q, cos, sin), self.rope.rotate(k, cos, sin)
        k_pos = pos
        if cache is not None:
            k, v, k_pos = cache.append(k, v, pos)  # (B, G, S, Dh) x2, (S,)
        S = k.shape[-2]
        why = self.why_not_fast_path(return_weights=return_weights)
        self.last_path = why or "sdpa"
        q_pos = pos
        # plain causal self-attention over positions 0..T-1: SDPA's own is_causal
        plain_causal = (
            not why
            and self.causal
            and self.window is None
            and attn_mask is None
            and position_ids is None
            and past == 0
            and not self.alibi
        )
        mask = None
        if not plain_causal:
            mask = position_mask(q_pos, k_pos, causal=self.causal, window=self.window)
            mask = merge_attn_mask(mask, attn_mask, T, S)
        bias = None
        if self.alibi:
            bias = alibi_bias(H, q_pos, k_pos, x.dtype)[None]  # (1, H, T, S)
        if self.record_max_logit:  # for chapter 13's stability sweep
            kr = k.repeat_interleave(H // G, dim=1)  # (B, H, S, Dh)
            raw = (q @ kr.transpose(-2, -1)) * self.scale  # (B, H, T, S)
            self.max_logit = float(raw.detach().abs().amax())
        if not why:  # the fast path: PyTorch's fused kernel, GQA without copies
            if bias is not None:  # ALiBi: a float mask, the boolean one folded in
                if mask is None:
                    mask = bias
                elif mask.dtype == torch.bool:
                    mask = bias.masked_fill(~mask, float("-inf"))  # (.., H, T, S)
                else:
                    mask = bias + mask  # (.., H, T, S), both added to the scores
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=plain_causal, scale=self.scale,
                enable_gqa=H != G,
            )  # fmt: skip  # (B, H, T, Dh)
            out = out.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H·Dh)
            if self.gate_proj is not None:
                out = out * torch.sigmoid(self.gate_proj(x))  # (B, T, H·Dh)
            return self.o_proj(out)  # (B, T, D)
        if plain_causal:  # (only reached when the fast path was refused)
            mask = position_mask(q_pos, k_pos, causal=True, window=None)
        k = k.repeat_interleave(H // G, dim=1)  # (B, H, S, Dh)
        v = v.repeat_interleave(H // G, dim=1)  # (B, H, S, Dh)
        out, weights = attend(
            q,
            k,
            v,
            mask,
            scale=self.scale,
            bias=bias,
            softcap=self.softcap,
            sink=self.sinks,
        )  # (B, H, T, Dh), (B, H, T, S)
        out = out.transpose(1, 2).reshape(B, T, H * Dh)  # (B, T, H·Dh)
        if self.gate_proj is not None:
            out = out * torch.sigmoid(self.gate_proj(x))  # (B, T, H·Dh)
        out = self.o_proj(out)  # (B, T, D)
        return (out, weights) if return_weights else out

    def why_not_fast_path(self, *, return_weights: bool = False) -> str:
        """Why a forward would take the readable ``attend`` path ("eager") rather than
        ``F.scaled_dot_product_attention``; ``""`` when it takes the fast path.

        As transformers' attention interface, the implementation is chosen by
        ``attn_implementation`` (``"sdpa"`` by default, ``"eager"`` on request), and
        as PyTorch's ``MultiheadAttention`` the reason a fast path is refused can be
        read (also after a call, in ``last_path``). Both paths give the same output
        (to rounding: tests/test_modern_fastpath.py).
        """
        if self.attn_implementation == "eager":
            return "eager: attn_implementation='eager' was requested"
        if return_weights:
            return "eager: weights requested (return_weights=True); SDPA makes none"
        if self.softcap is not None:
            return "eager: logit soft-capping (softcap) is not in SDPA"
        if self.sinks is not None:
            return "eager: sink logits join the softmax, which SDPA cannot"
        if self._forward_hooks or self._forward_pre_hooks:
            return "eager: a forward hook is set on the layer (it may read weights)"
        return ""

    @classmethod
    def from_hf(cls, module: nn.Module) -> Attention:
        """Copy a transformers attention layer (Llama, Qwen3, Gemma 2, gpt-oss,
        Qwen3-Next) with its RoPE, soft-cap, window, sinks and gate."""
        from .hf import attention_from_hf

        return attention_from_hf(cls, module)
