"""A KV cache for decoding with :class:`attnlab.TransformerLM`.

While decoding, the token at position ``t`` needs its own query against the keys and
values of positions ``0..t``; those of ``0..t-1`` were already computed at earlier steps.
:class:`KVCache` keeps them per layer, so each step runs the model on **one** new token
instead of the whole prefix: O(t) attention work per step instead of O(t²), and the
projections and feed-forward layers of old tokens are never recomputed
(Pope et al. 2023 discuss the memory this costs at scale).

:func:`generate_with_cache` is :meth:`attnlab.TransformerLM.generate` (greedy or sampled)
with a cache; it returns the same tokens. It drives the model's own layers
(``self_attn.w_q/w_k/w_v/w_o``, ``_residual``, ``_ff``), so it needs no change to them.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = ["KVCache", "generate_with_cache"]


class KVCache:
    """Keys and values of past positions, one entry per attention layer."""

    def __init__(self):
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        """Number of cached positions."""
        return 0 if not self.k else next(iter(self.k.values())).shape[-2]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Add the new positions ``k, v (B, H, t, Dh)``; return all of them so far."""
        if layer in self.k:
            k = torch.cat([self.k[layer], k], dim=-2)  # (B, H, past + t, Dh)
            v = torch.cat([self.v[layer], v], dim=-2)  # (B, H, past + t, Dh)
        self.k[layer], self.v[layer] = k, v
        return k, v

    def nbytes(self) -> int:
        return sum(
            t.numel() * t.element_size() for t in [*self.k.values(), *self.v.values()]
        )


def _cached_self_attention(mha, x, cache: KVCache, layer: int, past: int):
    """Causal self-attention of the new positions ``x (B, t, D)`` over cache + new."""
    B, t, D = x.shape
    H, Dh = mha.n_heads, mha.d_head
    q = mha.w_q(x).view(B, t, H, Dh).transpose(1, 2)  # (B, H, t, Dh)
    k = mha.w_k(x).view(B, t, H, Dh).transpose(1, 2)  # (B, H, t, Dh)
    v = mha.w_v(x).view(B, t, H, Dh).transpose(1, 2)  # (B, H, t, Dh)
    k, v = cache.append(layer, k, v)  # (B, H, past + t, Dh)
    i = torch.arange(past, past + t, device=x.device)[
        :, None
    ]  # absolute query positions
    j = torch.arange(past + t, device=x.device)[None, :]
    mask = j <= i  # (t, past + t): causal, with the offset of the cache
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, t, Dh)
    return mha.w_o(heads.transpose(1, 2).reshape(B, t, D))  # (B, t, D)


@torch.no_grad()
def _forward_cached(lm, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits ``(B, t, V)`` of the new tokens ``ids (B, t)`` given the cache."""
    past = len(cache)
    x = lm.embed(ids, offset=past)  # (B, t, D), positions past .. past + t - 1
    for n, layer in enumerate(lm.blocks.layers):
        x = layer._residual(
            x, 1, lambda h, n=n, layer=layer: _cached_self_attention(layer.self_attn, h, cache, n, past)
        )  # fmt: skip
        x = layer._residual(x, 2, layer._ff)  # (B, t, D)
    return lm.out(lm.blocks.norm(x))  # (B, t, V)


@torch.no_grad()
def generate_with_cache(lm, prompt: torch.Tensor, n_new: int, temperature: float = 0.0,
                        generator=None) -> torch.Tensor:  # fmt: skip
    """:meth:`TransformerLM.generate` with a KV cache: the prompt is run once, then one
    token per step. ``prompt (B, T0)`` -> ``(B, T0 + n_new)``. Needs
    ``T0 + n_new <= lm.cfg.max_len`` (the uncached version crops the context beyond it,
    which a cache of absolute positions cannot do)."""
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(
            f"prompt must be (B, T0) with T0 >= 1, got {tuple(prompt.shape)}"
        )
    if prompt.shape[1] + n_new > lm.cfg.max_len:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + n_new {n_new} exceeds max_len "
            f"{lm.cfg.max_len}; use lm.generate, which crops the context"
        )
    cache = KVCache()
    ids = prompt
    logits = _forward_cached(lm, prompt, cache)[:, -1]  # (B, V)
    for step in range(n_new):
        if temperature <= 0:
            nxt = logits.argmax(-1, keepdim=True)  # (B, 1)
        else:
            p = (logits / temperature).softmax(-1)
            nxt = torch.multinomial(p, 1, generator=generator)  # (B, 1)
        ids = torch.cat([ids, nxt], dim=1)  # (B, t + 1)
        if step + 1 < n_new:
            logits = _forward_cached(lm, nxt, cache)[:, -1]  # one token in, (B, V)
    return ids
