"""A KV cache for decoding with :class:`attnlab.TransformerLM`.

While decoding, the token at position ``t`` needs its own query against the keys and
values of positions ``0..t``; those of ``0..t-1`` were already computed at earlier steps.
:class:`KVCache` keeps them per layer, so each step runs the model on **one** new token
instead of the whole prefix: O(t) attention work per step instead of O(t²), and the
projections and feed-forward layers of old tokens are never recomputed
(Pope et al. 2023 discuss the memory this costs at scale).

:class:`CachedLMStep` is a stateful *step* for :mod:`attnlab.decoding` (with the
``reorder`` hook that :func:`attnlab.beam_search` calls), and
:func:`generate_with_cache` is :meth:`attnlab.TransformerLM.generate` with it; both give
the same tokens as without the cache. They drive the model's own layers
(``self_attn.w_q/w_k/w_v/w_o``, ``residual``, ``feed_forward``), so the model needs no change.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from . import validation as V
from .decoding import generate
from .masking import band_mask

__all__ = ["KVCache", "CachedLMStep", "generate_with_cache"]


class KVCache:
    """Keys and values of past positions, one entry per attention layer."""

    def __init__(self) -> None:
        self.k: dict[int, torch.Tensor] = {}
        self.v: dict[int, torch.Tensor] = {}

    def __len__(self) -> int:
        """Number of cached positions."""
        return 0 if not self.k else next(iter(self.k.values())).shape[-2]

    def append(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Add the new positions ``k, v (B, H, t, Dh)``; return all of them so far."""
        if k.dim() != 4 or v.dim() != 4 or k.shape[:3] != v.shape[:3]:
            raise ValueError(
                f"k and v must be (B, H, t, Dh) with the same B, H, t, got "
                f"{tuple(k.shape)} and {tuple(v.shape)}"
            )
        if layer in self.k:
            old_k, old_v = self.k[layer], self.v[layer]
            for name, new, old in (("k", k, old_k), ("v", v, old_v)):
                for dim, what in ((0, "batch size B"), (1, "heads H"), (3, "width Dh")):
                    if new.shape[dim] != old.shape[dim]:
                        raise ValueError(
                            f"KVCache.append: {name} has {what} = {new.shape[dim]}, "
                            f"the cache of layer {layer} holds {old.shape[dim]} "
                            f"(shapes {tuple(new.shape)} and {tuple(old.shape)})"
                        )
            k = torch.cat([self.k[layer], k], dim=-2)  # (B, H, past + t, Dh)
            v = torch.cat([self.v[layer], v], dim=-2)  # (B, H, past + t, Dh)
        self.k[layer], self.v[layer] = k, v
        return k, v

    def reorder(self, rows: torch.Tensor) -> None:
        """Keep the batch rows ``rows (K,)`` (repeats allowed), e.g. surviving beams."""
        rows = torch.as_tensor(rows)
        B = next(iter(self.k.values())).shape[0] if self.k else None
        if B is not None and rows.numel() and (rows.min() < 0 or rows.max() >= B):
            raise ValueError(
                f"KVCache.reorder: rows must lie in [0, {B}), got {rows.tolist()}"
            )
        for store in (self.k, self.v):
            for layer, t in store.items():
                store[layer] = t.index_select(0, rows.to(t.device))  # (K, H, past, Dh)

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
    # (t, past + t): causal with the cache's offset, query i sees keys j <= past + i
    mask = band_mask(t, past + t, is_causal=True, device=x.device, align="bottom_right")
    heads = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, t, Dh)
    return mha.w_o(heads.transpose(1, 2).reshape(B, t, D))  # (B, t, D)


@torch.no_grad()
def _forward_cached(lm, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
    """Logits ``(B, t, V)`` of the new tokens ``ids (B, t)`` given the cache."""
    past = len(cache)
    x = lm.embed(ids, offset=past)  # (B, t, D), positions past .. past + t - 1
    for n, layer in enumerate(lm.blocks.layers):

        def sa(h, n=n, layer=layer):  # (B, t, D) -> (B, t, D)
            return _cached_self_attention(layer.self_attn, h, cache, n, past)

        x = layer.residual(x, layer.norm1, layer.dropout1, sa)  # (B, t, D)
        # (B, t, D)
        x = layer.residual(x, layer.norm2, layer.dropout2, layer.feed_forward)
    return lm.out(lm.blocks.norm(x))  # (B, t, V)


class CachedLMStep:
    """A decoding step for :mod:`attnlab.decoding` with a KV cache: called with the
    prefix ``ids (B, t)``, it runs the model only on the tokens it has not seen and
    returns the next-token log-probs ``(B, V)``, like :meth:`TransformerLM.step`.
    :func:`attnlab.beam_search` calls :meth:`reorder` when it re-selects beams."""

    def __init__(self, lm: Any) -> None:  # a TransformerLM (its blocks and layers)
        self.lm = lm
        self.reset()

    def reset(self) -> None:
        """Forget everything cached: the next call starts a new prefix."""
        self.cache = KVCache()
        self.seen: torch.Tensor | None = None  # the ids whose keys are cached (B, past)

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        fn = "CachedLMStep"
        V.tensor(ids, "ids", fn, dim=2)
        V.token_ids(ids, self.lm.config.tgt_vocab, "ids", fn)  # no IndexError inside
        past = len(self.cache)
        if self.seen is not None:
            if ids.dim() != 2 or ids.shape[0] != self.seen.shape[0]:
                raise ValueError(
                    f"this CachedLMStep holds a batch of {self.seen.shape[0]} prefixes, "
                    f"got ids of shape {tuple(ids.shape)}: call reset() (or make a new "
                    "CachedLMStep) to start another batch"
                )
            if ids.shape[1] > past and not torch.equal(ids[:, :past], self.seen):
                raise ValueError(
                    f"the first {past} tokens of ids differ from those this "
                    "CachedLMStep has cached, so its keys and values would be stale: "
                    "call reset() (or make a new CachedLMStep) for a new prefix"
                )
        if ids.shape[1] <= past:
            raise ValueError(
                f"a cached step needs new tokens: prefix of length {ids.shape[1]}, "
                f"{past} already cached"
            )
        if ids.shape[1] > self.lm.config.max_len:
            raise ValueError(
                f"prefix length {ids.shape[1]} exceeds max_len {self.lm.config.max_len}: "
                "the uncached step crops the context, a cache of absolute positions "
                "cannot"
            )
        logits = _forward_cached(self.lm, ids[:, past:], self.cache)[:, -1]  # (B, V)
        self.seen = ids.detach().clone()
        return logits.log_softmax(-1)

    def reorder(self, rows: torch.Tensor) -> None:
        self.cache.reorder(rows)
        if self.seen is not None:
            self.seen = self.seen.index_select(0, torch.as_tensor(rows))


@torch.no_grad()
def generate_with_cache(
    lm: Any,
    prompt: torch.Tensor,
    n_new: int,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """:meth:`TransformerLM.generate` with a KV cache — the same loop
    (:func:`attnlab.decoding.generate`) driving a :class:`CachedLMStep`: the prompt is
    run once, then one token per step. ``prompt (B, T0)`` -> ``(B, T0 + n_new)``;
    needs ``T0 + n_new <= lm.config.max_len``.

    Parameters
    ----------
    lm : a :class:`TransformerLM`.
    prompt : token ids ``(B, T0)``.
    n_new : how many tokens to append, an int >= 0.
    temperature : 0 (greedy) or a finite number > 0.
    generator : the random generator for sampling.

    Returns
    -------
    long tensor ``(B, T0 + n_new)``, the same tokens as ``lm.generate`` (without the
    cache).

    Raises
    ------
    ValueError
        ``T0 + n_new`` exceeds ``lm.config.max_len``, or as :func:`attnlab.generate`.
    """
    V.tensor(prompt, "prompt", "generate_with_cache")
    n_new = V.integer(n_new, "n_new", "generate_with_cache", low=0)
    if prompt.dim() != 2 or prompt.shape[1] < 1:
        raise ValueError(
            f"prompt must be (B, T0) with T0 >= 1, got {tuple(prompt.shape)}"
        )
    if prompt.shape[1] + n_new > lm.config.max_len:
        raise ValueError(
            f"prompt length {prompt.shape[1]} + n_new {n_new} exceeds max_len "
            f"{lm.config.max_len}; use lm.generate, which crops the context"
        )
    return generate(CachedLMStep(lm), prompt, n_new, temperature, generator)
